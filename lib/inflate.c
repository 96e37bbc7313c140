/* SPDX-License-Identifier: MIT */
/*
 * inflate.c - the mutex side of the fast path (layout.h, FAST PATH; fast.c
 * is the other side): inflating a name (its fast holder and fast waiter
 * become ordinary requests) and deflating it, and the request slots each
 * manager keeps in reserve for the fast path.
 */
#include "internal.h"

/*
 * wlk__fast_discard() - under the mutex: a fast lane's slot whose manager
 * was closed while it was in use: free it, unless it went already or is a
 * held lock.
 */
void wlk__fast_discard(struct wlk__bucket *b, uint32_t s, uint32_t g)
{
	struct wlk_seg_request *r = wlk__req(b, s);
	uint32_t w, ni;

	w = r->word;
	ni = uatomic_read(&r->name); /* once: bounded, then used */
	if (w == WLK_WORD(g, WLK_SLOT_RESERVED))
		wlk__req_reclaim(b, s, w);
	else if (w == WLK_WORD(g, WLK_SLOT_FAST) &&
		 (ni >= b->geo.max_names || (!wlk__fast_holds(b, ni, s) &&
					     !wlk__fast_waits(b, ni, s))))
		wlk__req_free(b, s);
}

/*
 * The slot that @who (the holder or waiter part of a fast word) names on
 * name @ni, if it is a live claim on that name: FAST, the same gen bits,
 * this name and gen, the same mode; else WLK_NIL. A slot freed under its
 * holder (a dead client) holds nothing.
 */
static uint32_t claimant(struct wlk__bucket *b, uint32_t ni, uint64_t who)
{
	uint32_t ngen = WLK_WORD_GEN(wlk__name(b, ni)->word), s, w;
	struct wlk_seg_request *r;

	if (!WLK_FAST_HOLDER1(who))
		return WLK_NIL;
	s = WLK_FAST_HOLDER1(who) - 1;
	if (s >= b->geo.max_requests)
		return WLK_NIL;
	r = wlk__req(b, s);
	w = r->word;
	if (WLK_WORD_STATE(w) != WLK_SLOT_FAST ||
	    (WLK_WORD_GEN(w) & WLK_FAST_SGEN_MASK) != WLK_FAST_SGEN(who) ||
	    r->name != ni || r->name_gen != ngen ||
	    r->mode != ((who & WLK_FAST_SHARED) ? WLK_SHARED : WLK_EXCLUSIVE))
		return WLK_NIL;
	return s;
}

/* The holder fast word @f of name @ni names, if a live claim; or WLK_NIL. */
static uint32_t holder_of(struct wlk__bucket *b, uint32_t ni, uint64_t f)
{
	if (WLK_FAST_NGEN(f) != WLK_WORD_GEN(wlk__name(b, ni)->word))
		return WLK_NIL;
	return claimant(b, ni, f & WLK_FAST_WHO_MASK);
}

/* The slot claim @c (a waiter word) names, if a live claim on name @ni
 * (claimant(), and the whole gen), or WLK_NIL. */
static uint32_t claim_of(struct wlk__bucket *b, uint32_t ni, uint64_t c)
{
	uint32_t s;

	if (c & ~WLK_CLAIM_MASK)
		return WLK_NIL;
	s = claimant(b, ni, c & WLK_FAST_WHO_MASK);
	if (s != WLK_NIL &&
	    WLK_WORD_GEN(wlk__req(b, s)->word) != WLK_CLAIM_GEN(c))
		return WLK_NIL;
	return s;
}

/* The fast waiter of name @ni whose fast word is @f, or WLK_NIL. */
static uint32_t waiter_of(struct wlk__bucket *b, uint32_t ni, uint64_t f)
{
	struct wlk_seg_name *n = wlk__name(b, ni);

	if (!(f & WLK_FAST_WAIT) || WLK_FAST_NGEN(f) != WLK_WORD_GEN(n->word))
		return WLK_NIL;
	return claim_of(b, ni, uatomic_read(&n->waiter));
}

/*
 * wlk__fast_off() - under the mutex: clear ON in @ni's fast word, racing
 * only with fast paths, which CAS too (each failed CAS here is one of
 * theirs that succeeded). Return: the name's fast holder, or WLK_NIL;
 * *@waiter: its fast waiter, or WLK_NIL. The holder bits and WAIT stay
 * until the caller stores the word OFF.
 */
uint32_t wlk__fast_off(struct wlk__bucket *b, uint32_t ni, uint32_t *waiter)
{
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint32_t ngen = WLK_WORD_GEN(n->word);
	uint64_t f = wlk__fast_load(&n->fast);

	*waiter = WLK_NIL;
	while (f & WLK_FAST_ON) {
		uint64_t seen;

		if (WLK_FAST_NGEN(f) != ngen)
			return WLK_NIL; /* not this entry's: no holder */
		seen = uatomic_cmpxchg(&n->fast, f, f & ~WLK_FAST_ON);
		if (seen == f)
			break;
		f = seen;
	}
	*waiter = waiter_of(b, ni, f);
	return holder_of(b, ni, f);
}

/*
 * The waiter word of @n, unless some request is still claiming it (an
 * enlisting fast waiter, which withdraws by itself when it finds ON
 * clear): cleared. A claim that is not live (adopted, granted, freed)
 * would keep every later request from waiting by the fast path.
 */
static void waiter_clear(struct wlk__bucket *b, uint32_t ni)
{
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint64_t c = uatomic_read(&n->waiter);

	if (c && claim_of(b, ni, c) == WLK_NIL)
		uatomic_cmpxchg(&n->waiter, c, 0);
}

/*
 * wlk__name_inflate() - under the mutex: turn @ni's fast path off, making a
 * fast holder an ordinary held request and a fast waiter the first of the
 * queue. Idempotent. Return: 0 or WLK_ECORRUPT.
 */
int wlk__name_inflate(struct wlk__bucket *b, uint32_t ni)
{
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint32_t w, s = wlk__fast_off(b, ni, &w);
	int rc = 0;

	if (s != WLK_NIL || w != WLK_NIL)
		rc = wlk__name_touch(b, ni);
	if (!rc && s != WLK_NIL)
		rc = wlk__adopt(b, n, s);
	if (!rc && w != WLK_NIL)
		/* A waiter whose holder's slot was freed under it (a dead
		 * client): its turn has come. */
		rc = s != WLK_NIL ? wlk__adopt_waiter(b, n, w)
				  : wlk__adopt(b, n, w);
	if (rc)
		return rc;
	waiter_clear(b, ni);
	/* Stored only if it changes: fast paths elsewhere read this line. */
	if (uatomic_read(&n->fast) != WLK_FAST(WLK_WORD_GEN(n->word), 0, 0, 0))
		uatomic_set(&n->fast,
			    WLK_FAST(WLK_WORD_GEN(n->word), 0, 0, 0));
	return 0;
}

/*
 * wlk__idle_inflate() - under the mutex, before wlk__name_new() takes an
 * idle name for a new one: inflate the least recently used idle name. An
 * idle name may be held through its fast word: inflating it takes it off
 * the idle list, held; the next one is tried. Return: 0 with
 * h->idle_head inflated and idle, WLK_EFULL if no name is idle, or an
 * error.
 */
int wlk__idle_inflate(struct wlk__bucket *b)
{
	struct wlk_seg_header *h = b->hdr;
	uint32_t ni = h->idle_head;
	int rc;

	for (uint32_t steps = 0;; steps++) {
		if (ni == WLK_NIL)
			return WLK_EFULL;
		if (ni >= b->geo.max_names || steps >= b->geo.max_names)
			return wlk__corrupt(b);
		rc = wlk__name_inflate(b, ni);
		if (rc)
			return rc;
		if (wlk__name_idle(wlk__name(b, ni)))
			return 0;
		ni = h->idle_head;
	}
}

/* Under the mutex: whether request @ri holds name @ni by its fast word. */
bool wlk__fast_holds(struct wlk__bucket *b, uint32_t ni, uint32_t ri)
{
	return holder_of(b, ni, wlk__fast_load(&wlk__name(b, ni)->fast)) == ri;
}

/* Under the mutex: whether request @ri is name @ni's fast waiter. */
bool wlk__fast_waits(struct wlk__bucket *b, uint32_t ni, uint32_t ri)
{
	return waiter_of(b, ni, wlk__fast_load(&wlk__name(b, ni)->fast)) == ri;
}

/*
 * wlk__fast_unclaim() - under the mutex, for a dead client's FAST slot @ri
 * that is neither holder nor waiter: a claim on the waiter word it may
 * have left is nobody's.
 */
void wlk__fast_unclaim(struct wlk__bucket *b, uint32_t ri)
{
	uint32_t ni = wlk__req(b, ri)->name;

	if (ni < b->geo.max_names && claim_of(b, ni, uatomic_read(
				     &wlk__name(b, ni)->waiter)) == ri)
		uatomic_set(&wlk__name(b, ni)->waiter, 0);
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
	if (h->n_requests >= b->geo.max_requests - b->geo.max_requests / WLK_LANE_SPARE_DIV) {
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
