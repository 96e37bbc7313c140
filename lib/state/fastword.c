/* SPDX-License-Identifier: MIT */
/*
 * fastword.c - a name's fast word and waiter word (layout.h, FAST PATH),
 * the one file that touches them (but for the uncontended acquire and
 * release: fastword.c's too, inline in state.h for their caller). The fast
 * path takes, hands over and releases a name with CASes and no mutex; the
 * mutex side turns it off (inflation), reads who holds and who waits,
 * grants through the word and turns it on again; a poisoning turns it off
 * everywhere; lookers (query, the inspector, the validator) read the
 * words. The fast path goes on while the mutex is held: the words may
 * change under every function of the mutex side.
 *
 * The fast path's functions take a struct wlk__fast_claim (the name entry,
 * and a request slot of the caller's lane, shm/lane.c) and return an enum
 * wlk__fast: none is an error, none takes the mutex. WLK__FAST_SLOW sends
 * the caller to the mutex; WLK__FAST_FROZEN (done while a query copies)
 * makes it wait for the copy first (layout.h, QUERY).
 */
#include "state.h"

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
 * Become @n's fast waiter behind the holder in @f: claim the waiter word
 * (@claim: WLK_CLAIM()), then set WAIT. Return: whether it worked (not if
 * someone else waits, or @f went).
 */
static bool enlist(struct wlk_seg_name *n, uint64_t f, uint64_t claim)
{
	if (uatomic_cmpxchg(&n->waiter, 0, claim) != 0)
		return false;
	WLK_FAILPOINT(fast_enlist_mid);
	if (uatomic_cmpxchg(&n->fast, f, f | WLK_FAST_WAIT) == f)
		return true;
	/* Not our turn after all: withdraw the claim, unless the mutex
	 * side cleared it as stale meanwhile. */
	uatomic_cmpxchg(&n->waiter, claim, 0);
	return false;
}

/*
 * wlk__fast_take() - the rest of wlk__fast_acquire() once @c's slot is
 * claimed: take @c's name by its fast word, or, if @may_wait, enlist as
 * its fast waiter. The CASes publish the slot's fields to whoever
 * inflates. @seen: the fast word and the name's token as last seen (the
 * token read apart from the word: the CAS checks both); @tries: the looks
 * already made. Return: as wlk__fast_acquire().
 */
enum wlk__fast wlk__fast_take(struct wlk__bucket *b,
			      const struct wlk__fast_claim *c,
			      struct wlk__pair seen, int tries, bool may_wait,
			      uint64_t *token)
{
	struct wlk_seg_name *n = wlk__name(b, c->ni);
	uint64_t on = wlk__fast_on_free(c->ngen);
	uint64_t me = wlk__fast_who(c->slot, c->gen, c->mode);

	/* The word may change between our look and our CAS (the holder let
	 * go just then, a holder came): look again, a few times. */
	for (; tries < WLK_FAST_TRIES; tries++) {
		if (seen.lo == on) {
			uint64_t t = seen.hi + 1;

			/* Held, and the name's next token ours, in one step
			 * (layout.h, TOKENS ON THE FAST PATH). */
			if (wlk__cas2(&n->fast, &seen,
				      (struct wlk__pair){on | me, t})) {
				uatomic_set(&wlk__req(b, c->slot)->token, t);
				*token = t;
				return wlk__fast_done(b);
			}
		} else if (may_wait && waitable(seen.lo, on, c->mode)) {
			if (enlist(n, seen.lo, WLK_CLAIM(me, c->gen)))
				return WLK__FAST_WAITING;
			seen.lo = wlk__fast_load(&n->fast);
			seen.hi = uatomic_read(&n->token);
		} else {
			break;
		}
	}
	/* A claim seen with a stale WAIT (the waiter word's value came
	 * back: see layout.h) may have been adopted by an inflation that
	 * took it for the waiter's: then it is a queued request now. */
	if (uatomic_cmpxchg(&wlk__req(b, c->slot)->word,
			    WLK_WORD(c->gen, WLK_SLOT_FAST),
			    WLK_WORD(c->gen, WLK_SLOT_RESERVED)) !=
	    WLK_WORD(c->gen, WLK_SLOT_FAST))
		return WLK__FAST_WAITING;
	return WLK__FAST_SLOW;
}

/*
 * wlk__fast_acquire_held() - wlk__fast_acquire() of a name whose fast word
 * @f is not "on, free": worth a claim only if, with @may_wait, a request
 * in c->mode may wait there. @guard, @expect: as wlk__fast_claim_slot().
 * Return: as wlk__fast_acquire().
 */
enum wlk__fast wlk__fast_acquire_held(struct wlk__bucket *b,
				      struct wlk__fast_claim *c,
				      bool may_wait, uint64_t f,
				      uint64_t *token, const uint64_t *guard,
				      uint64_t expect)
{
	struct wlk_seg_name *n = wlk__name(b, c->ni);

	if (!may_wait || !waitable(f, wlk__fast_on_free(c->ngen), c->mode))
		return WLK__FAST_SLOW;
	if (!wlk__fast_claim_slot(b, c, guard, expect))
		return WLK__FAST_LOST;
	return wlk__fast_take(b, c,
			      (struct wlk__pair){f, uatomic_read(&n->token)},
			      0, may_wait, token);
}

/* What a fast waiter watches while it spins (wlk__fast_await()). */
struct handoff {
	const struct wlk_seg_name *n;
	uint64_t on;     /* the name's fast word "on, free" */
	uint64_t mine;   /* ... with this waiter as its holder */
	bool handed;     /* the last look found it so */
};

/* Whether the spin is over: the holder handed the name over to us, or
 * the name was inflated (its word is no longer on and ours to wait on). */
static bool handed_or_gone(void *arg)
{
	struct handoff *h = arg;
	uint64_t f = uatomic_read(&h->n->fast);

	h->handed = (f & ~WLK_FAST_WAIT) == h->mine;
	return h->handed ||
	       (f & ~WLK_FAST_WHO_MASK & ~WLK_FAST_WAIT) != h->on;
}

/*
 * wlk__fast_await() - spin until the fast word hands @c's name over, for
 * at most WLK_SPIN_NS (wlk__spin()). Nobody queues behind a fast waiter
 * (a name has one, and other requests inflate it), so only the handoff or
 * the inflation ends the spin early. Return: WLK__FAST_OK or _FROZEN:
 * held, *@token set; _ADOPTED: held, but inflated since the handoff, so
 * the token is the slot's once the mutex is free (the inflation stores
 * it there); _SLOW: the name was inflated, or the holder keeps it
 * too long: settle under the mutex (the waiter is then in the queue, or
 * was granted, or was never adopted).
 */
enum wlk__fast wlk__fast_await(struct wlk__bucket *b,
			       const struct wlk__fast_claim *c,
			       uint64_t *token)
{
	struct wlk_seg_name *n = wlk__name(b, c->ni);
	struct handoff h = {n, wlk__fast_on_free(c->ngen), 0, false};
	struct wlk_seg_request *r = wlk__req(b, c->slot);
	uint64_t t, f, given;

	h.mine = h.on | wlk__fast_who(c->slot, c->gen, c->mode);
	if (!wlk__spin(handed_or_gone, NULL, &h, WLK_SPIN_NS) || !h.handed)
		return WLK__FAST_SLOW;
	cmm_smp_rmb();
	r->stamp_ns = wlk__stamp_ns();
	/*
	 * The handoff's CAS counted the name's token up for us (layout.h,
	 * TOKENS ON THE FAST PATH). It stays ours while the word names us
	 * with ON: if it still does after the token was read, that is our
	 * token. If not, an inflation adopted us, and gives the token under
	 * the mutex (the word never names our claim with ON again before we
	 * release).
	 */
	t = uatomic_read(&n->token);
	cmm_smp_rmb();
	f = uatomic_read(&n->fast);
	if ((f & ~WLK_FAST_WAIT) != h.mine)
		return WLK__FAST_ADOPTED;
	/* An inflation may have stored it first: the same value. */
	given = uatomic_cmpxchg(&r->token, 0, t);
	*token = given ? given : t;
	/* The handoff was the holder's CAS: order our look at it before the
	 * freeze word (the CAS above is a full barrier). */
	return wlk__fast_done(b);
}

/*
 * wlk__fast_let_go_rest() - the rest of wlk__fast_let_go() (state.h), whose
 * CAS found the fast word @f, not @c's "held": with a fast waiter, hand
 * the name over to it. Return: as wlk__fast_let_go().
 */
enum wlk__fast wlk__fast_let_go_rest(struct wlk__bucket *b,
				     const struct wlk__fast_claim *c,
				     uint64_t f)
{
	struct wlk_seg_name *n = wlk__name(b, c->ni);
	uint64_t on = wlk__fast_on_free(c->ngen);
	uint64_t held = on | wlk__fast_who(c->slot, c->gen, c->mode);
	uint64_t w, next;
	struct wlk__pair p;

	if (f != (held | WLK_FAST_WAIT))
		return WLK__FAST_SLOW;
	/* WAIT is set after the claim, and the claim stays until the
	 * handoff (or an inflation, which clears ON first). */
	w = uatomic_read(&n->waiter);
	next = on | (w & WLK_FAST_WHO_MASK);
	/* The waiter holds with the name's next token (layout.h, TOKENS ON
	 * THE FAST PATH); ours leaves it as it is. */
	p = (struct wlk__pair){f, uatomic_read(&n->token)};
	if (!WLK_FAST_HOLDER1(w) || (w & ~WLK_CLAIM_MASK) ||
	    !wlk__cas2(&n->fast, &p, (struct wlk__pair){next, p.hi + 1}))
		return WLK__FAST_SLOW;
	WLK_FAILPOINT(fast_handoff_mid);
	/* The waiter holds now; clear its claim for the next one (a CAS:
	 * the mutex side may have cleared it already). */
	uatomic_cmpxchg(&n->waiter, w, 0);
	wlk__fast_unclaim_slot(b, c);
	return wlk__fast_done(b);
}

/* The mutex side. */

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
	r = wlk__req_at(b, s);
	if (!r)
		return WLK_NIL;
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
