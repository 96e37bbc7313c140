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
 * PINS (engine.h): a claim of a lane's slot keeps the manager; how a
 * close turns that into references, and why no claim or end is missed,
 * is seal.c's. A lane's word changes by CAS, but where one thread alone
 * may change it: the fill (from FILL) and the closer (from SEALING).
 */
#include <string.h>

#include "shm.h"

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

/* A lane with no slot, and one being filled (wlk__lane_fill()). */
#define LANE_EMPTY WLK__LANE(0, WLK_LANE_EMPTY)
#define LANE_FILL WLK__LANE(0, WLK_LANE_FILL)

/* Lane @lane, READY with slot @slot, empties: the slot is not its any
 * more. A lane found otherwise is left alone. */
static void lane_empty(struct wlk__lane *lane, uint32_t slot)
{
	(void)uatomic_cmpxchg(&lane->word, WLK__LANE(slot, WLK_LANE_READY),
			      LANE_EMPTY);
}

/*
 * wlk__lane_end() - a claim of slot @slot of @m's lane @at, FAST in gen
 * @gen while claimed, is over: the slot is RESERVED again (@kept; the
 * caller gave it back), or not the lane's any more (freed, or the
 * parent's in a fork child): the lane is then EMPTY. If @m is CLOSED and
 * the closer left the lane OWED to this claim, the caller drops the
 * lane's reference (seal.c, PINS). @marked: the end of a lock that held
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
		lane_empty(lane, slot);
	drop = uatomic_read(&m->pub.closed) == WLK__CLOSED &&
	       wlk__lane_settle_owed(lane, slot, gen);
	if (marked)
		uatomic_set(&lane->letgo, 0);
	if (drop)
		wlk__manager_unref(&m->pub);
}

/* Whether slot @s, a lane's, is no longer this client's (freed, reserved
 * for another): the lane then empties. */
static bool slot_gone(struct wlk__shm_manager *m, uint32_t s)
{
	uint32_t w;

	return !wlk__slot_ours(m, s, &w) || WLK_WORD_STATE(w) == WLK_SLOT_FREE;
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
		lane_empty(&m->lanes[at], l->slot);
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
		struct wlk__lane *at = &m->lanes[i];
		uint32_t w = uatomic_read(&at->word);

		if (WLK__LANE_KIND(w) == WLK_LANE_READY &&
		    slot_gone(m, WLK__LANE_SLOT(w)))
			lane_empty(at, WLK__LANE_SLOT(w));
		/* Usually all lanes are full: then this only reads. */
		if (!lane && uatomic_read(&at->word) == LANE_EMPTY &&
		    uatomic_cmpxchg(&at->word, LANE_EMPTY, LANE_FILL) ==
			    LANE_EMPTY)
			lane = at;
	}
	if (!lane)
		return;
	ri = h->n_requests >= b->geo.max_requests -
				     b->geo.max_requests / WLK_LANE_SPARE_DIV
		     ? WLK_NIL
		     : wlk__req_alloc(b);
	if (ri == WLK_NIL) {
		uatomic_set(&lane->word, LANE_EMPTY);
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
