/* SPDX-License-Identifier: MIT */
/*
 * lane.c - the request slots a manager keeps in reserve for the fast path
 * (its lanes), the one owner of their state, and the fast path as a
 * manager takes it: find the name, claim a lane's slot, and let the name's
 * fast word (state/fastword.c) do the rest. The uncontended part of that
 * path is inline in shm.h (wlk__lane_acquire(), the memo, the pick of a
 * lane); its other ends are here.
 *
 * A lane holds one request slot of the manager's client (READY), or none
 * (EMPTY: wlk__lane_fill() gives it one under the segment mutex, FILL
 * meanwhile). Which thread uses the slot is decided on the slot's own word
 * in the segment, where the mutex side decides too: a thread claims it
 * (RESERVED to FAST, one CAS) and gives it back (RESERVED again, a store).
 * The uncontended acquire's claim is also the lane's: no other word is
 * taken, and an uncontended acquire+release makes three locked
 * instructions, the claim and two CASes on the name's first line. Two
 * processes on two names share no cache line.
 *
 * PINS (engine.h). A claim of a lane's slot keeps the manager: a lock the
 * fast path took holds no reference to it. Close adds one reference per
 * lane, stores CLOSED (full barrier), then closes the lanes: under the
 * mutex before the client's slots are taken back, while a slot still
 * shows whether a lock holds it (wlk__lane_seal_claims()), and after
 * (wlk__lane_seal()). Only the closer closes a lane (close_lane()): READY
 * to SEALING by CAS, a look at the slot, then DEAD, the closer dropping
 * the lane's reference; or, if the slot is claimed (this client's,
 * neither RESERVED nor FREE), OWED with the claim's gen in @owed_gen: the
 * end of that claim alone turns it DEAD and drops the reference
 * (settle_owed()). A lane with a lock's end under way (@letgo below) is
 * left CLOSING under the mutex, and turned DEAD by the seal once that end
 * is over. Every lane is turned DEAD once, by one CAS.
 *
 * Why no claim is missed: a claim is checked after its CAS (a full
 * barrier): it reads the lane again (wlk__fast_claim_slot()'s guard) and
 * gives the slot back unless the lane is still READY with it. SEALING is
 * a CAS, a full barrier, before the look at the slot. So a claim either
 * shows in that look, or sees SEALING and is given back.
 *
 * Why no end is missed: an end gives the slot back, then reads closed.
 * The end of a lock held through the lane has no barrier between the two
 * (the uncontended release has one locked instruction, the fast word's
 * CAS, before both), so the read may come first: it marks the lane
 * (@letgo) before that CAS and clears the mark last. A closer that finds
 * no mark looks at the slot after the end's mark, so the end's read of
 * closed, after its barrier, sees CLOSED and settles an OWED lane; a
 * closer that finds the mark leaves the lane CLOSING (under the mutex) or
 * waits for the mark to clear (the seal), and the seal waits for every
 * mark before close drops the user's reference: the mark also keeps the
 * manager while the end runs. The marks of two ends never overlap: a
 * claim's check also wants @letgo clear (one 64-bit read with the lane's
 * word), so a second lock cannot be taken in the lane while the first
 * one's end is under way. Every other end (a claim given back at once, a
 * request's slot) holds a reference of its own, makes a full barrier
 * between the two, and leaves @letgo alone.
 */
#include <sched.h>
#include <string.h>

#include "shm.h"

/* Pauses a lane's closer makes for a step under way before it yields. */
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

/* A closer's pause while another step on a lane is under way. */
static void pause_for(unsigned int spins)
{
	if (spins < SEAL_SPINS && wlk__spin_ok())
		caa_cpu_relax();
	else
		sched_yield();
}

/*
 * Whether slot @s is claimed, this client's and neither RESERVED nor FREE:
 * a lock or a request of @m's in it may still be ended by its thread (a
 * fast one, or one the mutex side took over since). Its gen then in
 * *@gen. Before the client's slots go (wlk__lane_seal_claims()), that is
 * so for every lock handle of the lane; after, the slots are free.
 */
static bool claimed(struct wlk__shm_manager *m, uint32_t s, uint32_t *gen)
{
	const struct wlk_seg_request *r = wlk__req(m->b, s);
	uint32_t w = uatomic_read(&r->word);

	cmm_smp_rmb();
	if (WLK_WORD_STATE(w) == WLK_SLOT_FREE ||
	    WLK_WORD_STATE(w) == WLK_SLOT_RESERVED ||
	    r->client != m->client || r->client_gen != m->client_gen)
		return false;
	*gen = WLK_WORD_GEN(w);
	return true;
}

/*
 * close_lane() - the closer's step on @lane, @m CLOSED (PINS above): DEAD
 * with the drop, OWED to the claim of its slot, or, @locked (under the
 * segment mutex, where it may not wait) and with a lock's end under way,
 * CLOSING: the seal's, once that end is over. Without @locked it waits
 * for such an end, and for a fill. Return: whether the caller drops the
 * reference close counted for the lane.
 */
static bool close_lane(struct wlk__shm_manager *m, struct wlk__lane *lane,
		       bool locked)
{
	for (unsigned int spins = 0;; spins++) {
		struct wlk__lane now;
		uint32_t s, cgen;

		now.guard = uatomic_read(&lane->guard);
		s = WLK__LANE_SLOT(now.word);
		switch (WLK__LANE_KIND(now.word)) {
		case WLK_LANE_DEAD:
		case WLK_LANE_OWED:
			return false;
		case WLK_LANE_EMPTY:
			break;
		case WLK_LANE_READY:
			if (now.letgo && locked) {
				/* The end's mark still set in the same CAS:
				 * no lock can be taken in the lane since. */
				struct wlk__lane to = now;

				to.word = WLK__LANE(s, WLK_LANE_CLOSING);
				if (uatomic_cmpxchg(&lane->guard, now.guard,
						    to.guard) == now.guard)
					return false;
				continue;
			}
			if (now.letgo)
				goto wait;
			if (uatomic_cmpxchg(&lane->word, now.word,
					    WLK__LANE(s, WLK_LANE_SEALING)) !=
			    now.word)
				continue;
			/* The CAS is a full barrier: a claim made after it
			 * sees SEALING and is given back; one made before
			 * shows in this look. */
			if (claimed(m, s, &cgen)) {
				uatomic_set(&lane->owed_gen, cgen);
				cmm_smp_wmb(); /* the gen before the word */
				uatomic_set(&lane->word,
					    WLK__LANE(s, WLK_LANE_OWED));
				return false;
			}
			uatomic_set(&lane->word, WLK__LANE(0, WLK_LANE_DEAD));
			return true;
		case WLK_LANE_CLOSING:
			if (!now.letgo)
				break;
			goto wait;
		default: /* FILL: under the mutex, so never when @locked */
			if (locked)
				return false;
			goto wait;
		}
		if (uatomic_cmpxchg(&lane->word, now.word,
				    WLK__LANE(0, WLK_LANE_DEAD)) == now.word)
			return true;
		continue;
wait:
		pause_for(spins);
	}
}

/*
 * A claim's end that saw CLOSED: whether the closer left the lane OWED to
 * this claim (slot @slot, gen @gen); the lane is DEAD then, and the caller
 * drops its reference. The closer's look at the slot is a few
 * instructions: waited for.
 */
static bool settle_owed(struct wlk__lane *lane, uint32_t slot, uint32_t gen)
{
	uint32_t owed = WLK__LANE(slot, WLK_LANE_OWED), w;

	for (unsigned int spins = 0;
	     WLK__LANE_KIND(w = uatomic_read(&lane->word)) ==
	     WLK_LANE_SEALING;
	     spins++)
		pause_for(spins);
	cmm_smp_rmb(); /* the word, then the gen stored before it */
	return w == owed && uatomic_read(&lane->owed_gen) == gen &&
	       uatomic_cmpxchg(&lane->word, owed,
			       WLK__LANE(0, WLK_LANE_DEAD)) == owed;
}

/*
 * wlk__lane_end() - a claim of slot @slot of @m's lane @at, FAST in gen
 * @gen while claimed, is over: the slot is RESERVED again (@kept; the
 * caller gave it back), or not the lane's any more (freed, or the
 * parent's in a fork child): the lane is then EMPTY. If @m is CLOSED and
 * the closer left the lane OWED to this claim, the caller drops the
 * lane's reference (PINS above). @marked: the end of a lock that held
 * through the lane, whose caller set @letgo before the slot was given
 * back (cleared here); any other end holds a reference of its own. Not
 * under the segment mutex. The reference dropped may be @m's last: a
 * caller without one of its own touches @m no more.
 */
void wlk__lane_end(struct wlk__shm_manager *m, unsigned int at,
		   uint32_t slot, uint32_t gen, bool kept, bool marked)
{
	struct wlk__lane *lane = &m->lanes[at];
	bool drop;

	cmm_smp_mb(); /* the slot given back before the looks */
	if (!kept)
		(void)uatomic_cmpxchg(&lane->word,
				      WLK__LANE(slot, WLK_LANE_READY),
				      WLK__LANE(0, WLK_LANE_EMPTY));
	drop = uatomic_read(&m->pub.closed) == WLK__CLOSED &&
	       settle_owed(lane, slot, gen);
	if (marked)
		uatomic_set(&lane->letgo, 0);
	if (drop)
		wlk__manager_unref(&m->pub);
}

/* Whether slot @s, a lane's, is no longer this client's (freed, reserved
 * for another): the lane then empties. */
static bool slot_gone(struct wlk__shm_manager *m, uint32_t s)
{
	const struct wlk_seg_request *r = wlk__req(m->b, s);
	uint32_t w = uatomic_read(&r->word);

	cmm_smp_rmb();
	return WLK_WORD_STATE(w) == WLK_SLOT_FREE || r->client != m->client ||
	       r->client_gen != m->client_gen;
}

/*
 * wlk__lane_missed() - wlk__lane_acquire()'s end when the fast word did
 * not take (@rc: WLK__FAST_SLOW or _LOST) with @m's lane @at, whose slot
 * was RESERVED in @gen0: a claim it made ends (l->gen moved on), a slot
 * gone empties the lane, and the request goes to the mutex path. Return:
 * WLK__FAST_SLOW.
 */
enum wlk__fast wlk__lane_missed(struct wlk__shm_manager *m,
				struct wlk__shm_lock *l, unsigned int at,
				uint32_t gen0, enum wlk__fast rc, bool memo_hit)
{
	struct wlk__bucket *b = m->b;

	/* The mutex path comes next, counted; counted first, as the end
	 * of the claim may drop the lane's pin (PINS). */
	if (!l->pub.counted)
		wlk__lock_count(&l->pub);
	if (l->gen != gen0)
		wlk__lane_end(m, at, l->slot, l->gen, true, false);
	else if (rc == WLK__FAST_LOST && slot_gone(m, l->slot))
		(void)uatomic_cmpxchg(&m->lanes[at].word,
				      WLK__LANE(l->slot, WLK_LANE_READY),
				      WLK__LANE(0, WLK_LANE_EMPTY));
	/* A remembered entry that went (evicted, reused) is no sign of
	 * contention: forget it, and look the name up next time. */
	if (memo_hit &&
	    wlk__word_load(&wlk__name(b, l->fast_name)->word) !=
		    WLK_WORD(l->fast_ngen, WLK_SLOT_USED))
		wlk__memo.len = 0;
	return WLK__FAST_SLOW;
}

/*
 * wlk__lane_offer() - for a request on the mutex path: claim the slot of a
 * READY lane of @m (FAST, not yet on any name: an acquire in flight), so
 * that the request may take it rather than a free one. Return: whether it
 * did: the lane in l->lane, the slot and its gen in *@slot and *@gen; the
 * caller ends the claim (wlk__lane_end()) unless the request keeps it.
 */
bool wlk__lane_offer(struct wlk__shm_manager *m, struct wlk__shm_lock *l,
		     uint32_t *slot, uint32_t *gen)
{
	struct wlk__fast_claim c = {.ni = 0, .mode = l->mode};
	unsigned int at = wlk__lane_pick(m, &c.slot, &c.gen);
	uint32_t gen0 = c.gen;

	if (at == WLK_LANES)
		return false;
	/* Its name and mode are filled for nothing: the request fills them
	 * again. Name 0 is bounded, and no fast word names the slot. */
	if (!wlk__fast_claim_slot(m->b, &c, &m->lanes[at].guard,
				  wlk__lane_guard(c.slot))) {
		if (c.gen != gen0)
			wlk__lane_end(m, at, c.slot, c.gen, true, false);
		return false;
	}
	l->lane = (uint8_t)at;
	*slot = c.slot;
	*gen = c.gen;
	return true;
}

/*
 * wlk__lane_fill() - under the mutex: a lane of @m whose slot is gone
 * empties, and one empty lane gets a free request slot, while the table is
 * less than three quarters full.
 */
void wlk__lane_fill(struct wlk__shm_manager *m)
{
	struct wlk__bucket *b = m->b;
	struct wlk_seg_header *h = b->hdr;
	struct wlk_seg_request *r;
	struct wlk__lane *lane = NULL;
	uint32_t ri;

	for (unsigned int i = 0; i < WLK_LANES; i++) {
		uint32_t w = uatomic_read(&m->lanes[i].word);

		if (WLK__LANE_KIND(w) == WLK_LANE_READY &&
		    slot_gone(m, WLK__LANE_SLOT(w)))
			(void)uatomic_cmpxchg(&m->lanes[i].word, w,
					      WLK__LANE(0, WLK_LANE_EMPTY));
		/* Usually all lanes are full: then this only reads. */
		if (!lane && uatomic_read(&m->lanes[i].word) ==
				     WLK__LANE(0, WLK_LANE_EMPTY) &&
		    uatomic_cmpxchg(&m->lanes[i].word,
				    WLK__LANE(0, WLK_LANE_EMPTY),
				    WLK__LANE(0, WLK_LANE_FILL)) ==
			    WLK__LANE(0, WLK_LANE_EMPTY))
			lane = &m->lanes[i];
	}
	if (!lane)
		return;
	ri = h->n_requests >= b->geo.max_requests -
				     b->geo.max_requests / WLK_LANE_SPARE_DIV
		     ? WLK_NIL
		     : wlk__req_alloc(b);
	if (ri == WLK_NIL) {
		uatomic_set(&lane->word, WLK__LANE(0, WLK_LANE_EMPTY));
		return;
	}
	wlk__req_init(b, ri, m->client, m->client_gen, WLK_EXCLUSIVE, 0);
	r = wlk__req(b, ri);
	wlk__word_store(&r->word, WLK_WORD(WLK_WORD_GEN(r->word),
					   WLK_SLOT_RESERVED));
	/* The slot's word before the lane that offers it. */
	cmm_smp_wmb();
	uatomic_set(&lane->word, WLK__LANE(ri, WLK_LANE_READY));
}

/*
 * wlk__lane_seal_claims() - under the mutex, as @m closes, before its
 * client's slots are taken back (which frees the slots of its locks):
 * each lane is closed now, while its slot still shows whether a lock
 * holds it (PINS above); a lane with a lock's end under way is left
 * CLOSING to the seal.
 */
void wlk__lane_seal_claims(struct wlk__shm_manager *m)
{
	unsigned long spare = 0;

	for (unsigned int i = 0; i < WLK_LANES; i++)
		if (close_lane(m, &m->lanes[i], true))
			spare++;
	/* Never the last reference: close holds the user's. */
	if (spare)
		uatomic_sub(&m->pub.refs, spare);
}

/*
 * wlk__lane_seal() - struct wlk__engine's seal for @m (PINS above): each
 * lane's lock ends under way are waited for (the lock holds no reference
 * of its own; close drops the user's next), and each lane not closed yet
 * is closed. Never the last reference: close holds the user's.
 */
void wlk__lane_seal(struct wlk__shm_manager *m)
{
	unsigned long spare = 0;

	for (unsigned int i = 0; i < WLK_LANES; i++) {
		struct wlk__lane *lane = &m->lanes[i];

		/* An end between its mark and its clear: a few
		 * instructions, or a wait for the mutex. */
		for (unsigned int spins = 0; uatomic_read(&lane->letgo);
		     spins++)
			pause_for(spins);
		if (close_lane(m, lane, false))
			spare++;
	}
	if (spare)
		uatomic_sub(&m->pub.refs, spare);
}
