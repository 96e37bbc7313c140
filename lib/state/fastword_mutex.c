/* SPDX-License-Identifier: MIT */
/*
 * fastword_mutex.c - a name's fast word and waiter word (layout.h, FAST
 * PATH) from the mutex side: under the segment mutex it turns the fast
 * path off (inflation), reads who holds and who waits, grants through
 * the word and turns it on again; a poisoning turns it off everywhere;
 * lookers (query, the inspector, the validator) read the words. The fast
 * path itself, which changes them without the mutex, is fastword.c.
 *
 * The fast path goes on while the mutex is held: the words may change
 * under every function here.
 */
#include "state.h"

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
 * wlk__fast_waiter_clear() - under the mutex: clear the waiter word of
 * @ni unless a live claim holds it (an enlisting waiter withdraws by
 * itself when it finds ON clear). A dead claim (adopted, granted, freed)
 * would keep every later request from waiting by the fast path.
 */
void wlk__fast_waiter_clear(struct wlk__bucket *b, uint32_t ni)
{
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint64_t c = uatomic_read(&n->waiter);

	if (c && claim_of(b, ni, c) == WLK_NIL)
		uatomic_cmpxchg(&n->waiter, c, 0);
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
 * wlk__fast_store_off() - under the mutex: @ni's fast word OFF, no holder,
 * no waiter (after wlk__fast_off() and the adoption of what it named).
 * Stored only if it changes: fast paths elsewhere read this line.
 */
void wlk__fast_store_off(struct wlk__bucket *b, uint32_t ni)
{
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint64_t off = WLK_FAST(WLK_WORD_GEN(n->word), 0, 0, 0);

	if (uatomic_read(&n->fast) != off)
		uatomic_set(&n->fast, off);
}

/*
 * wlk__fast_reset() - under the mutex: name entry @n starts over (a new
 * entry, or a rebuild): fast word OFF in its gen, no waiter claim.
 */
void wlk__fast_reset(struct wlk_seg_name *n)
{
	uatomic_set(&n->waiter, 0);
	uatomic_set(&n->fast, WLK_FAST(WLK_WORD_GEN(n->word), 0, 0, 0));
}

/*
 * wlk__fast_deflate() - under the mutex: an idle name goes back to the
 * fast path. Only from OFF: a grant through the fast word may have put a
 * holder there already (wlk__fast_grant()).
 */
void wlk__fast_deflate(struct wlk__bucket *b, uint32_t ni)
{
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint32_t ngen = WLK_WORD_GEN(n->word);

	uatomic_cmpxchg(&n->fast, WLK_FAST(ngen, 0, 0, 0),
			WLK_FAST(ngen, 1, 0, 0));
}

/*
 * wlk__fast_grant() - under the mutex: grant request @ri (gen @gen, in
 * @mode) name @ni through its fast word: ON, with @ri as the holder. The
 * caller then makes the slot FAST: FAST means held only while the fast
 * word names the slot.
 */
void wlk__fast_grant(struct wlk__bucket *b, uint32_t ni, uint32_t ri,
		     uint32_t gen, enum wlk_mode mode)
{
	struct wlk_seg_name *n = wlk__name(b, ni);

	uatomic_set(&n->fast, WLK_FAST(WLK_WORD_GEN(n->word), 1, 0, 0) |
				      wlk__fast_who(ri, gen, mode));
}

/*
 * wlk__fast_off_all() - a segment is being poisoned (mutex.c): its users' fast
 * operations must take the mutex and fail there, not go on granting beside
 * the next generation. ON is cleared by CAS, as an inflation does; nothing
 * sets it again. Entries are bounded by the mapping only (the geometry may
 * be what is broken): a word that is no fast word is at worst changed in
 * a segment nobody may use.
 */
void wlk__fast_off_all(struct wlk__bucket *b)
{
	const struct wlk_seg_header *h = b->hdr;
	const size_t fast = offsetof(struct wlk_seg_name, fast);
	uint64_t off = uatomic_read(&h->off_names);
	uint64_t stride = uatomic_read(&h->name_stride);
	uint64_t n = wlk__names_span(off, stride, uatomic_read(&h->max_names),
				     b->geo.size);

	for (uint64_t i = 0; i < n; i++) {
		uint64_t *w = (uint64_t *)(void *)(b->base + off +
						   i * stride + fast);
		uint64_t f = uatomic_read(w), seen;

		while ((f & WLK_FAST_ON) &&
		       (seen = uatomic_cmpxchg(w, f, f & ~WLK_FAST_ON)) != f)
			f = seen;
	}
}

/* wlk__fast_held() - whether name entry @n has a fast holder now. */
bool wlk__fast_held(const struct wlk_seg_name *n)
{
	return WLK_FAST_HOLDER1(uatomic_read(&n->fast)) != 0;
}

/*
 * wlk__fast_words() - @n's fast word and waiter word, for those who only
 * look: query, the inspector, the validator. Return: whether they are one
 * consistent pair (neither moved while both were read).
 */
bool wlk__fast_words(const struct wlk_seg_name *n, uint64_t *f, uint64_t *c)
{
	*f = uatomic_read(&n->fast);
	*c = uatomic_read(&n->waiter);
	cmm_smp_rmb();
	return uatomic_read(&n->fast) == *f && uatomic_read(&n->waiter) == *c;
}
