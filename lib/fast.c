/* SPDX-License-Identifier: MIT */
/*
 * fast.c - the uncontended path: acquire and release a lock nobody else
 * wants without the segment mutex (layout.h, FAST PATH).
 *
 * A manager keeps a few request slots in reserve (lanes). An acquire finds
 * the name entry without the mutex, claims a reserved slot and CASes the
 * name's fast word from "on, no holder" to "on, held by that slot". The
 * release CASes it back. Two processes on two names then share no cache
 * line, and an acquire+release pair makes two CASes on the name's first
 * line and one atomic add on its token (second line).
 *
 * Everything else goes through the mutex, and whatever there needs a name
 * inflates it first (wlk__name_inflate()): the fast holder becomes an
 * ordinary held request and the fast path stays off until the name is idle
 * again. A fast operation that fails for any reason returns 1 and the
 * caller takes the mutex; nothing here is an error.
 */
#include <string.h>

#include "internal.h"

_Static_assert(WLK_LIMIT_MAX_REQUESTS + 1ull <= WLK_FAST_HOLDER_MASK,
	       "a fast word holds any request slot + 1");

static uint64_t fast_load(const uint64_t *f)
{
	uint64_t v = uatomic_read(f);

	cmm_smp_rmb();
	return v;
}

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

/*
 * wlk__fast_acquire() - take @l's name in @l->mode without the mutex.
 * Return: 0 with @l filled (slot, gen, token, fast fields); 1 when it cannot
 * (no reserved slot, unknown name, any holder or queue, a race): take the
 * mutex instead.
 */
int wlk__fast_acquire(struct wlk_manager *m, struct wlk_lock *l)
{
	struct wlk__bucket *b = m->b;
	struct wlk__lane *lane;
	struct wlk_seg_request *r;
	struct wlk_seg_name *n;
	uint32_t ni = WLK_NIL, ngen = 0, s, g;
	uint64_t hash = 0, on, *cool;

	bool memo_hit = memo_find(b, l, &hash, &ni, &ngen);

	if (!memo_hit)
		hash = wlk__name_hash(b, l->name, l->name_len);
	l->hash = hash; /* for the mutex path, if it comes to that */
	l->hashed = true;
	/* A name this manager found contended lately: straight to the
	 * queue, not through the other process's cache lines first. */
	cool = &m->cool[hash % WLK_COOL_SLOTS];
	if (uatomic_read(cool)) {
		if (wlk__stamp_ns() < uatomic_read(cool))
			return 1;
		uatomic_set(cool, 0);
	}
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
	if (fast_load(&n->fast) != on) {
		/* A remembered entry that went (evicted, reused) is no sign
		 * of contention: forget it, and look the name up next time. */
		if (memo_hit &&
		    wlk__word_load(&n->word) != WLK_WORD(ngen, WLK_SLOT_USED)) {
			memo.len = 0;
			return 1;
		}
		goto contended;
	}
	lane = wlk__lane_take(m);
	if (!lane)
		return 1;
	s = lane->slot;
	g = lane->gen;
	r = wlk__req(b, s);
	/* The mutex side may have reclaimed it (wlk__stash_reclaim()). */
	if (uatomic_cmpxchg(&r->word, WLK_WORD(g, WLK_SLOT_RESERVED),
			    WLK_WORD(g, WLK_SLOT_FAST)) !=
	    WLK_WORD(g, WLK_SLOT_RESERVED)) {
		uatomic_set(&lane->state, WLK_LANE_EMPTY);
		return 1;
	}
	r->mode = (uint8_t)l->mode;
	r->flags = 0;
	r->name = ni;
	r->name_gen = ngen;
	r->token = 0;
	r->enq_ns = r->grant_ns = wlk__stamp_ns();
	/* The CAS publishes the fields above to whoever inflates. */
	if (uatomic_cmpxchg(&n->fast, on, WLK_FAST(ngen, 1, s + 1, g)) != on) {
		wlk__word_store(&r->word, WLK_WORD(g, WLK_SLOT_RESERVED));
		uatomic_set(&lane->state, WLK_LANE_READY);
		goto contended;
	}
	l->token = uatomic_add_return(&n->token, 1);
	uatomic_set(&r->token, l->token);
	l->slot = s;
	l->gen = g;
	l->fast_name = ni;
	l->fast_ngen = ngen;
	l->lane = (uint8_t)(lane - m->lanes);
	l->fast = true;
	return 0;
contended:
	uatomic_set(cool, wlk__stamp_ns() + WLK_FAST_COOL_NS);
	return 1;
}

/*
 * wlk__fast_release() - release a lock taken by wlk__fast_acquire().
 * Return: 0 if released; 1 if the name was inflated meanwhile (the lock is
 * an ordinary held or stolen request now): release it under the mutex.
 */
int wlk__fast_release(struct wlk_lock *l)
{
	struct wlk_manager *m = l->m;
	struct wlk__bucket *b = m->b;
	struct wlk_seg_name *n = wlk__name(b, l->fast_name);
	uint64_t held = WLK_FAST(l->fast_ngen, 1, l->slot + 1, l->gen);

	/* The whole gen first: the fast word has only its low bits, and a
	 * stale handle (its manager closed) must not match a reused slot. */
	if (wlk__word_load(&wlk__req(b, l->slot)->word) !=
		    WLK_WORD(l->gen, WLK_SLOT_FAST) ||
	    uatomic_cmpxchg(&n->fast, held, WLK_FAST(l->fast_ngen, 1, 0, 0)) !=
		    held)
		return 1;
	wlk__word_store(&wlk__req(b, l->slot)->word,
			WLK_WORD(l->gen, WLK_SLOT_RESERVED));
	uatomic_set(&m->lanes[l->lane].state, WLK_LANE_READY);
	return 0;
}

/*
 * wlk__fast_discard() - a fast lane's slot whose manager was closed while
 * it was in use: free it, unless it went already or is a held lock.
 */
void wlk__fast_discard(struct wlk__bucket *b, uint32_t s, uint32_t g)
{
	struct wlk_seg_request *r = wlk__req(b, s);
	struct wlk__wake wake;
	uint32_t w;

	if (wlk__lock(b, &wake))
		return;
	w = r->word;
	if (w == WLK_WORD(g, WLK_SLOT_RESERVED))
		wlk__req_reclaim(b, s, w);
	else if (w == WLK_WORD(g, WLK_SLOT_FAST) &&
		 (r->name >= b->geo.max_names ||
		  !wlk__fast_holds(b, r->name, s)))
		wlk__req_free(b, s);
	wlk__unlock(b, &wake);
}

/*
 * The request slot fast word @f of name @ni names as its holder, if that
 * slot really is the name's fast holder (claimed, for this name and gen);
 * else WLK_NIL. A slot freed under its holder (a dead client) holds
 * nothing.
 */
static uint32_t holder_of(struct wlk__bucket *b, uint32_t ni, uint64_t f)
{
	uint32_t ngen = WLK_WORD_GEN(wlk__name(b, ni)->word), s;
	struct wlk_seg_request *r;

	if (!WLK_FAST_HOLDER1(f) || WLK_FAST_NGEN(f) != ngen)
		return WLK_NIL;
	s = WLK_FAST_HOLDER1(f) - 1;
	if (s >= b->geo.max_requests)
		return WLK_NIL;
	r = wlk__req(b, s);
	if (WLK_WORD_STATE(r->word) != WLK_SLOT_FAST ||
	    (WLK_WORD_GEN(r->word) & WLK_FAST_SGEN_MASK) != WLK_FAST_SGEN(f) ||
	    r->name != ni || r->name_gen != ngen || r->mode > WLK_SHARED)
		return WLK_NIL;
	return s;
}

/*
 * wlk__fast_off() - under the mutex: clear ON in @ni's fast word, racing
 * only with fast paths, which CAS too (each failed CAS here is one of
 * theirs that succeeded). Return: the name's fast holder (holder_of()),
 * or WLK_NIL. The holder bits stay until the caller stores the word OFF.
 */
uint32_t wlk__fast_off(struct wlk__bucket *b, uint32_t ni)
{
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint32_t ngen = WLK_WORD_GEN(n->word);
	uint64_t f = fast_load(&n->fast);

	while (f & WLK_FAST_ON) {
		uint64_t seen;

		if (WLK_FAST_NGEN(f) != ngen)
			return WLK_NIL; /* not this entry's: no holder */
		seen = uatomic_cmpxchg(&n->fast, f, f & ~WLK_FAST_ON);
		if (seen == f)
			break;
		f = seen;
	}
	return holder_of(b, ni, f);
}

/*
 * wlk__name_inflate() - under the mutex: turn @ni's fast path off, making a
 * fast holder an ordinary held request. Idempotent. Return: 0 or
 * WLK_ECORRUPT.
 */
int wlk__name_inflate(struct wlk__bucket *b, uint32_t ni)
{
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint32_t s = wlk__fast_off(b, ni);
	int rc = 0;

	if (s != WLK_NIL) {
		rc = wlk__name_touch(b, ni);
		if (!rc)
			rc = wlk__adopt(b, n, s);
	}
	/* Stored only if it changes: fast paths elsewhere read this line. */
	if (!rc && uatomic_read(&n->fast) !=
			   WLK_FAST(WLK_WORD_GEN(n->word), 0, 0, 0))
		uatomic_set(&n->fast,
			    WLK_FAST(WLK_WORD_GEN(n->word), 0, 0, 0));
	return rc;
}

/* Under the mutex: @ni has neither held set nor queue; let the fast path
 * have it. */
void wlk__name_deflate(struct wlk__bucket *b, uint32_t ni)
{
	struct wlk_seg_name *n = wlk__name(b, ni);

	uatomic_set(&n->fast, WLK_FAST(WLK_WORD_GEN(n->word), 1, 0, 0));
}

/* Under the mutex: whether request @ri holds name @ni by its fast word. */
bool wlk__fast_holds(struct wlk__bucket *b, uint32_t ni, uint32_t ri)
{
	return holder_of(b, ni, fast_load(&wlk__name(b, ni)->fast)) == ri;
}

/*
 * wlk__stash_fill() - under the mutex: put one free request slot in an
 * empty lane of @m, while the table is less than three quarters full.
 */
void wlk__stash_fill(struct wlk_manager *m)
{
	struct wlk__bucket *b = m->b;
	struct wlk_seg_header *h = b->hdr;
	struct wlk_seg_request *r;
	struct wlk__lane *lane = NULL;
	uint32_t ri;

	/* Plain reads first: the lanes are usually all full, and a CAS
	 * here would be time the other processes wait for the mutex. */
	for (unsigned int i = 0; i < WLK_LANES && !lane; i++)
		if (uatomic_read(&m->lanes[i].state) == WLK_LANE_EMPTY &&
		    uatomic_cmpxchg(&m->lanes[i].state, WLK_LANE_EMPTY,
				    WLK_LANE_BUSY) == WLK_LANE_EMPTY)
			lane = &m->lanes[i];
	if (!lane)
		return;
	if (h->n_requests >= b->geo.max_requests - b->geo.max_requests / 4) {
		uatomic_set(&lane->state, WLK_LANE_EMPTY);
		return;
	}
	ri = wlk__req_alloc(b);
	if (ri == WLK_NIL) {
		uatomic_set(&lane->state, WLK_LANE_EMPTY);
		return;
	}
	r = wlk__req(b, ri);
	r->mode = WLK_EXCLUSIVE;
	r->flags = 0;
	r->sleeping = 0;
	r->client = m->client;
	r->client_gen = m->client_gen;
	r->name = WLK_NIL;
	r->name_gen = 0;
	r->seq = r->token = 0;
	r->enq_ns = r->grant_ns = 0;
	r->prev = r->next = WLK_NIL;
	lane->slot = ri;
	lane->gen = WLK_WORD_GEN(r->word);
	wlk__word_store(&r->word, WLK_WORD(lane->gen, WLK_SLOT_RESERVED));
	uatomic_set(&lane->state, WLK_LANE_READY);
}

/*
 * wlk__stash_reclaim() - under the mutex, with the free list empty: take
 * back the slots clients keep in reserve. Return: how many.
 */
uint32_t wlk__stash_reclaim(struct wlk__bucket *b)
{
	uint32_t got = 0;

	for (uint32_t ri = 0; ri < b->geo.max_requests; ri++) {
		struct wlk_seg_request *r = wlk__req(b, ri);
		uint32_t w = uatomic_read(&r->word);

		if (WLK_WORD_STATE(w) == WLK_SLOT_RESERVED &&
		    wlk__req_reclaim(b, ri, w))
			got++;
	}
	return got;
}
