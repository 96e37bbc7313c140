/* SPDX-License-Identifier: MIT */
/*
 * lane.c - the request slots a manager keeps in reserve for the fast path
 * (its lanes), the one owner of their state, and the fast path as a
 * manager takes it: find the name, claim a lane's slot, and let the name's
 * fast word (state/fastword.c) do the rest. The uncontended part of that
 * path is inline in shm.h (wlk__lane_acquire(), the memo, the lane's take
 * and put); its other ends are here.
 *
 * A lane is EMPTY (no slot), READY (its slot RESERVED for this client, in
 * lane->gen, free to take) or BUSY (taken by one thread: a fast lock, a
 * request on the mutex path that uses the slot, or a refill). Only the
 * thread that made it BUSY moves it on:
 *
 *   EMPTY --wlk__lane_fill()--> BUSY --slot reserved--> READY
 *   READY --wlk__lane_take()--> BUSY --wlk__lane_put()--> READY or EMPTY
 *   (wlk__lane_put(): LETGO, then READY or EMPTY; after close: DEAD)
 *
 * An uncontended acquire+release is then one CAS on the lane (this
 * process's memory; the put is a store) and two CASes on the name's first
 * line: two processes on two names share no cache line.
 *
 * PINS (engine.h). A BUSY lane keeps its manager: a lock taken by the fast
 * path holds no reference to it. A put marks the lane LETGO, makes a full
 * barrier (on the uncontended release, the fast word's CAS), then reads
 * the manager's closed word and stores READY or EMPTY. Close stores CLOSED
 * (full barrier) before its seal (wlk__lane_seal()) reads the lanes, so a
 * lane the seal finds BUSY is put by a thread that sees CLOSED: that put
 * turns the lane DEAD and drops the reference close counted for it. The
 * seal turns the other lanes DEAD and drops theirs; it waits out a LETGO,
 * whose put may or may not have seen CLOSED. Whoever turns a lane DEAD
 * (one CAS decides) drops its one reference, so each is dropped once.
 * Only the end of a lock the lane kept (wlk__lane_settle(), _put_last())
 * may drop the manager's last reference, as the last thing its call
 * does; every other put (wlk__lane_put()) is made by a call that holds a
 * reference of its own (wlk__lock_count() first).
 */
#include <sched.h>
#include <string.h>

#include "shm.h"

/* Pauses wlk__lane_seal() makes for a put under way before it yields. */
#define SEAL_SPINS 1024u

WLK_TLS struct wlk__memo wlk__memo;

static void memo_keep(struct wlk__bucket *b, const struct wlk__shm_lock *l,
		      uint64_t hash, uint32_t ni, uint32_t ngen)
{
	struct wlk__memo *memo = &wlk__memo;

	if (l->pub.name_len > WLK_SHORT_NAME || !l->pub.name_len)
		return;
	memo->seg_key[0] = b->seg_key[0];
	memo->seg_key[1] = b->seg_key[1];
	memo->hash = hash;
	memo->len = (uint32_t)l->pub.name_len;
	memo->ni = ni;
	memo->ngen = ngen;
	memcpy(memo->name, l->pub.name, l->pub.name_len);
}

/*
 * wlk__lane_unclaim() - @l's claimed slot goes back to its lane, RESERVED:
 * its fast wait was never adopted (under the mutex, wait.c).
 */
void wlk__lane_unclaim(struct wlk__shm_lock *l)
{
	struct wlk__shm_manager *m = wlk__shm_lm(l);

	wlk__fast_unclaim_slot(m->b, &l->claim);
	wlk__lane_put(m, &m->lanes[l->lane], l->slot, l->gen, true);
}

/*
 * wlk__lane_lookup() - wlk__lane_acquire()'s lookup of @l's name when the
 * memo does not have it (shm.h): hash it (kept for the mutex path, if it
 * comes to that), find it without the mutex, and remember it. Return:
 * whether the name has an entry (@l's fast_name and fast_ngen then).
 */
bool wlk__lane_lookup(struct wlk__bucket *b, struct wlk__shm_lock *l)
{
	uint64_t hash = wlk__name_hash(b, l->pub.name, l->pub.name_len);

	l->hash = hash;
	l->hashed = true;
	if (!wlk__name_peek(b, l->pub.name, (uint32_t)l->pub.name_len, hash,
			    &l->fast_name, &l->fast_ngen))
		return false;
	memo_keep(b, l, hash, l->fast_name, l->fast_ngen);
	return true;
}

/*
 * wlk__lane_missed() - wlk__lane_acquire()'s end when the fast word did
 * not take (@rc: WLK__FAST_SLOW or _LOST): @lane goes back, and the
 * request to the mutex path. Return: WLK__FAST_SLOW.
 */
enum wlk__fast wlk__lane_missed(struct wlk__shm_manager *m,
				struct wlk__shm_lock *l, struct wlk__lane *lane,
				enum wlk__fast rc, bool memo_hit)
{
	struct wlk__bucket *b = m->b;

	/* The mutex path comes next, counted; counted first, as the put
	 * may drop the lane's pin (PINS). */
	if (!l->pub.counted)
		wlk__lock_count(&l->pub);
	wlk__lane_put(m, lane, l->slot, l->gen, rc == WLK__FAST_SLOW);
	/* A remembered entry that went (evicted, reused) is no sign of
	 * contention: forget it, and look the name up next time. */
	if (memo_hit &&
	    wlk__word_load(&wlk__name(b, l->fast_name)->word) !=
		    WLK_WORD(l->fast_ngen, WLK_SLOT_USED))
		wlk__memo.len = 0;
	return WLK__FAST_SLOW;
}

/*
 * wlk__lane_await() - spin until the fast word hands @l's name over.
 * Return: WLK__FAST_OK or _FROZEN: held; _SLOW: settle under the mutex.
 */
enum wlk__fast wlk__lane_await(struct wlk__shm_lock *l)
{
	enum wlk__fast rc =
		wlk__fast_await(wlk__shm_lm(l)->b, &l->claim, &l->pub.token);

	if (rc != WLK__FAST_SLOW)
		l->fast = true;
	return rc;
}

/*
 * wlk__lane_fill() - under the mutex: put one free request slot in an
 * empty lane of @m, while the table is less than three quarters full.
 */
void wlk__lane_fill(struct wlk__shm_manager *m)
{
	struct wlk__bucket *b = m->b;
	struct wlk_seg_header *h = b->hdr;
	struct wlk_seg_request *r;
	struct wlk__lane *lane = wlk__lane_grab(m, WLK_LANE_EMPTY);
	uint32_t ri;

	/* Usually all lanes are full: wlk__lane_grab() then only reads. */
	if (!lane)
		return;
	ri = h->n_requests >= b->geo.max_requests -
				     b->geo.max_requests / WLK_LANE_SPARE_DIV
		     ? WLK_NIL
		     : wlk__req_alloc(b);
	if (ri == WLK_NIL) {
		wlk__lane_put(m, lane, lane->slot, lane->gen, false);
		return;
	}
	wlk__req_init(b, ri, m->client, m->client_gen, WLK_EXCLUSIVE, 0);
	r = wlk__req(b, ri);
	wlk__word_store(&r->word, WLK_WORD(WLK_WORD_GEN(r->word),
					   WLK_SLOT_RESERVED));
	wlk__lane_put(m, lane, ri, WLK_WORD_GEN(r->word), true);
}


/*
 * wlk__lane_seal() - struct wlk__engine's seal for @m (PINS above): each
 * lane not BUSY dies, and the reference close added for it is dropped;
 * a BUSY lane's is dropped by its put. Never the last reference: close
 * holds the user's.
 */
void wlk__lane_seal(struct wlk__shm_manager *m)
{
	unsigned long spare = 0;

	for (unsigned int i = 0; i < WLK_LANES; i++) {
		uint32_t *state = &m->lanes[i].state;

		for (unsigned int spins = 0;; spins++) {
			uint32_t s = uatomic_read(state);

			/* BUSY: its put drops it; DEAD: a put did. */
			if (s == WLK_LANE_BUSY || s == WLK_LANE_DEAD)
				break;
			if (s == WLK_LANE_LETGO) {
				/* A put between its mark and its store: a
				 * few instructions, or a wait for the mutex. */
				if (spins < SEAL_SPINS && wlk__spin_ok())
					caa_cpu_relax();
				else
					sched_yield();
				continue;
			}
			if (uatomic_cmpxchg(state, s, WLK_LANE_DEAD) == s) {
				spare++;
				break;
			}
		}
	}
	if (spare)
		uatomic_sub(&m->pub.refs, spare);
}
