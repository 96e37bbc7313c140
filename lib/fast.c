/* SPDX-License-Identifier: MIT */
/*
 * fast.c - acquire, hand off and release without the segment mutex
 * (layout.h, FAST PATH); inflate.c is the mutex side.
 *
 * A manager keeps a few request slots in reserve (lanes). An acquire finds
 * the name entry without the mutex, claims a reserved slot and CASes the
 * name's fast word from "on, no holder" to "on, held by that slot". The
 * release CASes it back. Two processes on two names then share no cache
 * line, and an acquire+release pair makes two CASes and one atomic add,
 * all on the name's first line.
 *
 * A blocking acquire that finds the name held (and not by a shared holder
 * it could join) may wait as the name's one fast waiter, spinning on the
 * fast word; the holder's release hands the name over with one CAS. Two
 * processes taking turns on a name thus trade one cache line per grant,
 * in FIFO order. A third request, or a waiter that spins too long, takes
 * the mutex and inflates the name (inflate.c): the holder becomes an
 * ordinary held request, the waiter the first of the queue.
 *
 * A fast operation that fails for any reason returns 1 and the caller
 * takes the mutex; nothing here is an error. One that succeeds while a
 * query copies the bucket returns WLK_FAST_FROZEN, and the caller waits
 * for the copy before it goes on (freeze_pass(); layout.h, QUERY): the
 * wait takes the segment mutex, which this file never does.
 */
#include <string.h>

#include "internal.h"

_Static_assert(WLK_LIMIT_MAX_REQUESTS + 1ull <= WLK_FAST_HOLDER_MASK,
	       "a fast word holds any request slot + 1");

/*
 * Find @name without the mutex. The hash chains may change under us, so
 * the walk is bounded, every index checked, and a match is only believed
 * if the entry's word did not change while its bytes were compared (bytes
 * are written only while the entry is FREE). The caller's CAS on the fast
 * word, which carries the gen, settles any remaining race.
 */
static bool name_peek(struct wlk__bucket *b, const char *name, uint32_t len,
		      uint64_t hash, uint32_t *ni, uint32_t *gen)
{
	uint32_t i = uatomic_read(
		&wlk__hash_heads(b)[hash & (b->geo.hash_buckets - 1)]);

	for (uint32_t steps = 0; i != WLK_NIL; steps++) {
		struct wlk_seg_name *n;
		uint32_t w;

		if (i >= b->geo.max_names || steps >= b->geo.max_names)
			return false;
		n = wlk__name(b, i);
		w = wlk__word_load(&n->word);
		if (WLK_WORD_STATE(w) == WLK_SLOT_USED &&
		    uatomic_read(&n->hash) == hash &&
		    uatomic_read(&n->len) == len &&
		    !memcmp(wlk__name_bytes(n), name, len)) {
			cmm_smp_rmb();
			if (uatomic_read(&n->word) != w)
				return false;
			*ni = i;
			*gen = WLK_WORD_GEN(w);
			return true;
		}
		i = uatomic_read(&n->chain);
	}
	return false;
}

/*
 * The name this thread found last, per thread: taking the same name again
 * skips the hash and the table walk. Entries are (slot, gen), so a stale
 * one only makes the fast word's CAS fail; the segment key tells segments
 * apart (a bucket's memory may be reused for another).
 */
struct memo {
	uint64_t seg_key[2];
	uint64_t hash;
	uint32_t len;
	uint32_t ni;
	uint32_t ngen;
	char name[WLK_SHORT_NAME];
};
static WLK_TLS struct memo memo;

static bool memo_find(struct wlk__bucket *b, const struct wlk_lock *l,
		      uint64_t *hash, uint32_t *ni, uint32_t *ngen)
{
	if (memo.len != l->name_len || memo.seg_key[0] != b->seg_key[0] ||
	    memo.seg_key[1] != b->seg_key[1] || !memo.len ||
	    memcmp(memo.name, l->name, l->name_len) != 0)
		return false;
	*hash = memo.hash;
	*ni = memo.ni;
	*ngen = memo.ngen;
	return true;
}

static void memo_keep(struct wlk__bucket *b, const struct wlk_lock *l,
		      uint64_t hash, uint32_t ni, uint32_t ngen)
{
	if (l->name_len > WLK_SHORT_NAME || !l->name_len)
		return;
	memo.seg_key[0] = b->seg_key[0];
	memo.seg_key[1] = b->seg_key[1];
	memo.hash = hash;
	memo.len = (uint32_t)l->name_len;
	memo.ni = ni;
	memo.ngen = ngen;
	memcpy(memo.name, l->name, l->name_len);
}

/* Take a READY lane (it is BUSY then), or NULL. */
struct wlk__lane *wlk__lane_take(struct wlk_manager *m)
{
	for (unsigned int i = 0; i < WLK_LANES; i++)
		if (uatomic_read(&m->lanes[i].state) == WLK_LANE_READY &&
		    uatomic_cmpxchg(&m->lanes[i].state, WLK_LANE_READY,
				    WLK_LANE_BUSY) == WLK_LANE_READY)
			return &m->lanes[i];
	return NULL;
}

/* The holder or waiter part of a fast word for slot @s, gen @g, @mode. */
static uint64_t who(uint32_t s, uint32_t g, enum wlk_mode mode)
{
	return WLK_FAST(0, 0, s + 1, g) |
	       (mode == WLK_SHARED ? WLK_FAST_SHARED : 0);
}

/*
 * Whether a request in @mode may wait as the fast waiter of a name whose
 * fast word is @f (@on: its "on, free" value): held, nobody waiting, and
 * not a shared holder a shared request would join at once (spec 2.5).
 */
static bool waitable(uint64_t f, uint64_t on, enum wlk_mode mode)
{
	return (f & ~WLK_FAST_WHO_MASK) == on && WLK_FAST_HOLDER1(f) &&
	       !((f & WLK_FAST_SHARED) && mode == WLK_SHARED);
}

/*
 * Claim a lane's slot for @l: RESERVED (gen g) to FAST (gen g + 1; a new
 * gen per claim tells one fast waiter claim from the next), name and mode
 * filled. Return: the lane, or NULL.
 */
static struct wlk__lane *slot_claim(struct wlk_manager *m, struct wlk_lock *l,
				    uint32_t ni, uint32_t ngen)
{
	struct wlk__lane *lane = wlk__lane_take(m);
	struct wlk_seg_request *r;
	uint32_t g;

	if (!lane)
		return NULL;
	r = wlk__req(m->b, lane->slot);
	g = lane->gen;
	if (uatomic_cmpxchg(&r->word, WLK_WORD(g, WLK_SLOT_RESERVED),
			    WLK_WORD(g + 1, WLK_SLOT_FAST)) !=
	    WLK_WORD(g, WLK_SLOT_RESERVED)) {
		/* The mutex side reclaimed it (wlk__stash_reclaim()). */
		uatomic_set(&lane->state, WLK_LANE_EMPTY);
		return NULL;
	}
	r->mode = (uint8_t)l->mode;
	r->flags = 0;
	r->name = ni;
	r->name_gen = ngen;
	r->token = 0;
	r->enq_ns = r->grant_ns = wlk__stamp_ns();
	l->slot = lane->slot;
	l->gen = g + 1;
	l->fast_name = ni;
	l->fast_ngen = ngen;
	l->lane = (uint8_t)(lane - m->lanes);
	return lane;
}

/* The lane of @l's slot, RESERVED again (gen l->gen), is ready. */
static void lane_back(struct wlk_manager *m, struct wlk_lock *l)
{
	struct wlk__lane *lane = &m->lanes[l->lane];

	lane->gen = l->gen;
	uatomic_set(&lane->state, WLK_LANE_READY);
}

/* Give @l's claimed slot back to its lane: its lock was released, or (under
 * the mutex, wait.c) its fast wait was never adopted. */
void wlk__slot_unclaim(struct wlk_manager *m, struct wlk_lock *l)
{
	wlk__word_store(&wlk__req(m->b, l->slot)->word,
			WLK_WORD(l->gen, WLK_SLOT_RESERVED));
	lane_back(m, l);
}

/*
 * wlk__token_give() - give the lock in request @r of name @n its fencing
 * token, unless it has one: the fast path's thread and an inflation under
 * the mutex may both try, and the first one wins.
 * Return: the token.
 */
uint64_t wlk__token_give(struct wlk_seg_name *n, struct wlk_seg_request *r)
{
	uint64_t t = uatomic_read(&r->token), seen;

	if (t)
		return t;
	t = uatomic_add_return(&n->token, 1);
	seen = uatomic_cmpxchg(&r->token, 0, t);
	return seen ? seen : t;
}

/* The fast word changed hands to @l: its fencing token. */
static void granted(struct wlk__bucket *b, struct wlk_lock *l)
{
	l->token = wlk__token_give(wlk__name(b, l->fast_name),
				   wlk__req(b, l->slot));
	l->fast = true;
}

/*
 * A fast operation changed a fast word, or saw a change it acts on, and
 * then made a full barrier: if a query is copying the bucket, its copy may
 * have looked at that name before the change and looks at others after,
 * so the caller waits for the copy to end (wlk__freeze_wait()) before it
 * goes on (layout.h, QUERY). Costs one load of a line only queries write
 * when none runs. Return: 0, or WLK_FAST_FROZEN: done, but wait first.
 */
static inline int freeze_pass(struct wlk__bucket *b)
{
	if (caa_unlikely(uatomic_read(&b->hdr->freeze)))
		return WLK_FAST_FROZEN;
	return 0;
}

/*
 * Become @n's fast waiter behind the holder in @f: claim the waiter word
 * (@claim: WLK_CLAIM()), then set WAIT. Return: 0, or 1 (someone else
 * waits, or @f went).
 */
static int enlist(struct wlk_seg_name *n, uint64_t f, uint64_t claim)
{
	if (uatomic_cmpxchg(&n->waiter, 0, claim) != 0)
		return 1;
	WLK_FAILPOINT(fast_enlist_mid);
	if (uatomic_cmpxchg(&n->fast, f, f | WLK_FAST_WAIT) == f)
		return 0;
	/* Not our turn after all: withdraw the claim, unless the mutex
	 * side cleared it as stale meanwhile. */
	uatomic_cmpxchg(&n->waiter, claim, 0);
	return 1;
}

/*
 * wlk__fast_acquire() - take @l's name in @l->mode without the mutex, or,
 * if @may_wait, wait for it as its fast waiter.
 * Return: 0 held, with @l filled (slot, gen, token, fast fields), or
 * WLK_FAST_FROZEN held, as 0 after wlk__freeze_wait(); 2 when waiting
 * (wlk__fast_await() next); 1 when it cannot (no reserved slot, unknown
 * name, inflated, contended, a race): take the mutex instead.
 */
int wlk__fast_acquire(struct wlk_manager *m, struct wlk_lock *l, bool may_wait)
{
	struct wlk__bucket *b = m->b;
	struct wlk_seg_name *n;
	uint32_t ni = WLK_NIL, ngen = 0;
	uint64_t hash = 0, on, me, claim, f;
	bool memo_hit = memo_find(b, l, &hash, &ni, &ngen);

	if (!memo_hit)
		hash = wlk__name_hash(b, l->name, l->name_len);
	l->hash = hash; /* for the mutex path, if it comes to that */
	l->hashed = true;
	if (!memo_hit) {
		if (!name_peek(b, l->name, (uint32_t)l->name_len, hash, &ni,
			       &ngen))
			return 1;
		memo_keep(b, l, hash, ni, ngen);
	}
	if (ni >= b->geo.max_names)
		return 1;
	n = wlk__name(b, ni);
	on = WLK_FAST(ngen, 1, 0, 0);
	f = wlk__fast_load(&n->fast);
	if (f != on && !(may_wait && waitable(f, on, l->mode))) {
		/* A remembered entry that went (evicted, reused) is no sign
		 * of contention: forget it, and look the name up next time. */
		if (memo_hit &&
		    wlk__word_load(&n->word) != WLK_WORD(ngen, WLK_SLOT_USED))
			memo.len = 0;
		return 1;
	}
	if (!slot_claim(m, l, ni, ngen))
		return 1;
	me = who(l->slot, l->gen, l->mode);
	claim = WLK_CLAIM(me, l->gen);
	/* The CASes publish the slot's fields to whoever inflates. The word
	 * may change between our look and our CAS (the holder let go just
	 * then, a holder came): look again, a few times. */
	for (int tries = 0; tries < WLK_FAST_TRIES; tries++) {
		if (f == on) {
			f = uatomic_cmpxchg(&n->fast, on, on | me);
			if (f == on) {
				granted(b, l);
				return freeze_pass(b);
			}
		} else if (may_wait && waitable(f, on, l->mode)) {
			if (!enlist(n, f, claim))
				return 2;
			f = wlk__fast_load(&n->fast);
		} else {
			break;
		}
	}
	/* A claim seen with a stale WAIT (the waiter word's value came
	 * back: see layout.h) may have been adopted by an inflation that
	 * took it for the waiter's: then it is a queued request now. */
	if (uatomic_cmpxchg(&wlk__req(b, l->slot)->word,
			    WLK_WORD(l->gen, WLK_SLOT_FAST),
			    WLK_WORD(l->gen, WLK_SLOT_RESERVED)) !=
	    WLK_WORD(l->gen, WLK_SLOT_FAST))
		return 2;
	lane_back(m, l);
	return 1;
}

/*
 * wlk__fast_await() - spin until the fast word hands @l's name over, for
 * a while. Return: 0 or WLK_FAST_FROZEN held (as wlk__fast_acquire());
 * 1: the name was inflated, or the holder keeps it too long: settle under
 * the mutex (the waiter is then in the queue, or was granted, or was never
 * adopted).
 */
int wlk__fast_await(struct wlk_manager *m, struct wlk_lock *l)
{
	struct wlk_seg_name *n = wlk__name(m->b, l->fast_name);
	uint64_t mine = WLK_FAST(l->fast_ngen, 1, 0, 0) |
			who(l->slot, l->gen, l->mode);
	uint64_t end = wlk__now_ns() + WLK_SPIN_NS;

	do {
		for (int i = 0; i < WLK_SPIN_CHECK; i++) {
			uint64_t f = uatomic_read(&n->fast);

			if ((f & ~WLK_FAST_WAIT) == mine) {
				cmm_smp_rmb();
				wlk__req(m->b, l->slot)->grant_ns =
					wlk__stamp_ns();
				granted(m->b, l);
				/* The handoff was the holder's CAS: order
				 * our look at it before the freeze word. */
				cmm_smp_mb();
				return freeze_pass(m->b);
			}
			if ((f & ~WLK_FAST_WHO_MASK & ~WLK_FAST_WAIT) !=
			    WLK_FAST(l->fast_ngen, 1, 0, 0))
				return 1;
			caa_cpu_relax();
		}
	} while (wlk__now_ns() < end);
	return 1;
}

/*
 * wlk__fast_release() - release a lock held through the fast word: back
 * to "on, free", or, with a fast waiter, handed over to it.
 * Return: 0 if released (WLK_FAST_FROZEN: released, as 0 after
 * wlk__freeze_wait()); 1 if the name was inflated meanwhile (the lock is
 * an ordinary held or stolen request now): release it under the mutex.
 */
int wlk__fast_release(struct wlk_lock *l)
{
	struct wlk_manager *m = l->m;
	struct wlk__bucket *b = m->b;
	struct wlk_seg_name *n = wlk__name(b, l->fast_name);
	uint64_t on = WLK_FAST(l->fast_ngen, 1, 0, 0);
	uint64_t held = on | who(l->slot, l->gen, l->mode);
	uint64_t f;

	/* The whole gen first: the fast word has only its low bits, and a
	 * stale handle (its manager closed) must not match a reused slot. */
	if (wlk__word_load(&wlk__req(b, l->slot)->word) !=
	    WLK_WORD(l->gen, WLK_SLOT_FAST))
		return 1;
	f = uatomic_cmpxchg(&n->fast, held, on);
	if (f == (held | WLK_FAST_WAIT)) {
		/* WAIT is set after the claim, and the claim stays until
		 * the handoff (or an inflation, which clears ON first). */
		uint64_t w = uatomic_read(&n->waiter);

		uint64_t next = on | (w & WLK_FAST_WHO_MASK);

		if (!WLK_FAST_HOLDER1(w) || (w & ~WLK_CLAIM_MASK) ||
		    uatomic_cmpxchg(&n->fast, f, next) != f)
			return 1;
		WLK_FAILPOINT(fast_handoff_mid);
		/* The waiter holds now; clear its claim for the next one
		 * (a CAS: the mutex side may have cleared it already). */
		uatomic_cmpxchg(&n->waiter, w, 0);
	} else if (f != held) {
		return 1;
	}
	wlk__slot_unclaim(m, l);
	l->fast = false;
	return freeze_pass(b);
}
