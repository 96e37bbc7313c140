/* SPDX-License-Identifier: MIT */
/*
 * state.h - the segment's tables and words, all in shared memory: slot
 * allocation, name lookup and the idle list (table.c), and a name's fast
 * word and waiter word (fastword.c, their one owner). No blocking calls:
 * what a change owes other processes goes into a wake list (struct
 * wlk__wake), which the repair layer flushes after the mutex.
 */
#ifndef WLK_STATE_H
#define WLK_STATE_H

#include "sys.h"
#include "cas2.h"

/* Waiters to wake once the segment mutex is released. */
struct wlk__wake {
	uint32_t self1; /* 1 + the caller's own request: never woken; 0: none */
	uint32_t n;
	bool sweep; /* names overflowed too: wake every waiter */
	uint32_t idx[WLK_WAKE_BATCH];
	/* Names of the grants past WLK_WAKE_BATCH: broadcast on their grants
	 * words (layout.h, GRANT BROADCAST). */
	uint32_t n_names;
	uint32_t names[WLK_WAKE_NAMES];
	/* Reaped agents whose lifelines this thread owns until the flush. */
	uint32_t n_reaped;
	uint32_t reaped[WLK_REAP_BATCH];
	/* Doorbells of clients whose requests changed (shm/async.c). */
	uint32_t n_bells;
	bool bell_sweep; /* more than WLK_WAKE_BATCH: ring every doorbell */
	struct wlk__bell_to bells[WLK_WAKE_BATCH];
};

/*
 * wlk__token_adopt() - under the mutex, @n's fast word ON clear: the
 * fencing token of @r, the holder that word named: its own if its thread
 * stored it, else the name's, stored for it (layout.h, TOKENS ON THE FAST
 * PATH: both are the same value). Return: the token.
 */
static inline uint64_t wlk__token_adopt(struct wlk_seg_name *n,
					struct wlk_seg_request *r)
{
	uint64_t t = uatomic_read(&n->token);
	uint64_t seen = uatomic_cmpxchg(&r->token, 0, t);

	return seen ? seen : t;
}

/* Whether name @n has neither held set nor queue. */
static inline bool wlk__name_idle(const struct wlk_seg_name *n)
{
	return n->h_head == WLK_NIL && n->q_head == WLK_NIL;
}

/* A bad index or walk found: flag the segment for repair (recover.c). */
static inline int wlk__corrupt(struct wlk__bucket *b)
{
	uatomic_set(&b->hdr->needs_repair, 1);
	return WLK_ECORRUPT;
}

/* The hash a name is filed under in the segment's table. */
static inline uint64_t wlk__name_hash(const struct wlk__bucket *b,
				      const void *name, size_t len)
{
	return wlk__siphash13(b->seg_key, name, len);
}

/* text.c: long names' and client ids' bytes (layout.h, TEXT). */
uint32_t wlk__text_room(const struct wlk__bucket *b) WLK_INTERNAL;
int wlk__text_put(struct wlk__bucket *b, const void *src, uint32_t len,
		  uint32_t *first) WLK_INTERNAL;
void wlk__text_drop(struct wlk__bucket *b, uint32_t first,
		    uint32_t len) WLK_INTERNAL;
int wlk__text_cmp(const struct wlk__bucket *b, uint32_t first, uint32_t len,
		  const void *s) WLK_INTERNAL;
int wlk__text_copy(const struct wlk__bucket *b, uint32_t first, uint32_t len,
		   void *dst) WLK_INTERNAL;
int wlk__text_hash(const struct wlk__bucket *b, uint32_t first, uint32_t len,
		   uint64_t *out) WLK_INTERNAL;
bool wlk__text_mark(struct wlk__bucket *b, uint32_t first, uint32_t len,
		    uint32_t tag) WLK_INTERNAL;
void wlk__text_unmark(struct wlk__bucket *b) WLK_INTERNAL;
void wlk__text_rebuild(struct wlk__bucket *b) WLK_INTERNAL;
int wlk__name_cmp(const struct wlk__bucket *b, const struct wlk_seg_name *n,
		  uint32_t len, const void *s) WLK_INTERNAL;
int wlk__name_copy(const struct wlk__bucket *b, const struct wlk_seg_name *n,
		   uint32_t len, void *dst) WLK_INTERNAL;
int wlk__name_rehash(struct wlk__bucket *b, const struct wlk_seg_name *n,
		     uint32_t len, uint64_t *out) WLK_INTERNAL;
/* Chunks a name of @len bytes takes: none if it fits inline. */
static inline uint32_t wlk__name_chunks(uint32_t len)
{
	return len <= WLK_NAME_INLINE ? 0 : wlk__chunks_for(len);
}

/* table.c: slot allocation and lookup; all under the segment mutex. */
int wlk__name_find(struct wlk__bucket *b, const void *name, uint32_t len,
		   uint64_t hash, uint32_t *out) WLK_INTERNAL;
int wlk__name_new(struct wlk__bucket *b, const void *name, uint32_t len,
		  uint64_t hash, uint32_t *out) WLK_INTERNAL;
void wlk__name_put(struct wlk__bucket *b, uint32_t n) WLK_INTERNAL;
void wlk__name_settle(struct wlk__bucket *b, uint32_t n) WLK_INTERNAL;
int wlk__name_touch(struct wlk__bucket *b, uint32_t n) WLK_INTERNAL;
int wlk__name_evict(struct wlk__bucket *b) WLK_INTERNAL;
void wlk__name_list_put(struct wlk__bucket *b, uint32_t n,
			enum wlk_name_list l) WLK_INTERNAL;
void wlk__name_reset(struct wlk_seg_name *n) WLK_INTERNAL;
void wlk__name_tokens_carry(struct wlk__bucket *b,
			    const struct wlk_seg_name *n) WLK_INTERNAL;
uint32_t wlk__req_alloc(struct wlk__bucket *b) WLK_INTERNAL;
void wlk__req_free(struct wlk__bucket *b, uint32_t r) WLK_INTERNAL;
void wlk__req_init(struct wlk__bucket *b, uint32_t ri, uint32_t client,
		   uint32_t client_gen, enum wlk_mode mode, uint8_t flags)
	WLK_INTERNAL;
void wlk__req_keep(struct wlk__bucket *b, uint32_t r) WLK_INTERNAL;
void wlk__client_push(struct wlk__bucket *b, uint32_t ri) WLK_INTERNAL;
void wlk__client_unlink(struct wlk__bucket *b, uint32_t ri) WLK_INTERNAL;
bool wlk__client_next(struct wlk__bucket *b, uint32_t ci, uint32_t gen,
		      uint32_t ri, uint32_t *next, uint32_t steps) WLK_INTERNAL;
bool wlk__req_reclaim(struct wlk__bucket *b, uint32_t r, uint32_t word)
	WLK_INTERNAL;
int wlk__client_alloc(struct wlk__bucket *b, const char *id, size_t id_len,
		      uint64_t now, uint32_t *out) WLK_INTERNAL;
void wlk__client_free(struct wlk__bucket *b, uint32_t c) WLK_INTERNAL;
int wlk__agent_alloc(struct wlk__bucket *b, uint32_t pid, uint64_t now,
		     uint32_t *out) WLK_INTERNAL;
void wlk__agent_free(struct wlk__bucket *b, uint32_t ai, uint32_t gen)
	WLK_INTERNAL;
/* agent_list.c: each agent's list of its clients (layout.h, AGENT LISTS). */
void wlk__agent_push(struct wlk__bucket *b, uint32_t ci) WLK_INTERNAL;
void wlk__agent_unlink(struct wlk__bucket *b, uint32_t ci) WLK_INTERNAL;
bool wlk__agent_first(struct wlk__bucket *b, uint32_t ai, uint32_t gen,
		      uint32_t *ci, uint32_t steps) WLK_INTERNAL;

/* Whether agent slot @a is in use in generation @gen. */
static inline bool wlk__agent_live(struct wlk__bucket *b, uint32_t a,
				   uint32_t gen)
{
	const struct wlk_seg_agent *ag = wlk__agent_at(b, a);

	return ag && wlk__word_load(&ag->word) == WLK_WORD(gen, WLK_SLOT_USED);
}

/* Whether client slot @c is in use in generation @gen. */
static inline bool wlk__client_live(struct wlk__bucket *b, uint32_t c,
				    uint32_t gen)
{
	const struct wlk_seg_client *cl = wlk__client_at(b, c);

	return cl && wlk__word_load(&cl->word) == WLK_WORD(gen, WLK_SLOT_USED);
}

bool wlk__name_peek(struct wlk__bucket *b, const char *name, uint32_t len,
		    uint64_t hash, uint32_t *ni, uint32_t *ngen) WLK_INTERNAL;

/*
 * fastword.c: the one owner of a name's fast word and waiter word
 * (layout.h, FAST PATH).
 */

_Static_assert(WLK_LIMIT_MAX_REQUESTS + 1ull <= WLK_FAST_HOLDER_MASK,
	       "a fast word holds any request slot + 1");

/* A fast word, read before what its holder published with it. */
static inline uint64_t wlk__fast_load(const uint64_t *f)
{
	uint64_t v = uatomic_read(f);

	cmm_smp_rmb();
	return v;
}

/* The holder or waiter part of a fast word for slot @s, gen @g, @mode. */
static inline uint64_t wlk__fast_who(uint32_t s, uint32_t g,
				     enum wlk_mode mode)
{
	return WLK_FAST(0, 0, s + 1, g) |
	       (mode == WLK_SHARED ? WLK_FAST_SHARED : 0);
}

/* What a fast operation did; nothing here is an error. */
enum wlk__fast {
	WLK__FAST_OK = 0, /* done: held, handed over, released */
	WLK__FAST_FROZEN, /* done while a query copies: wait for the copy */
	WLK__FAST_WAITING, /* the name's fast waiter now: wlk__fast_await() */
	WLK__FAST_SLOW,   /* not possible now: take the mutex */
	WLK__FAST_LOST,   /* as SLOW, and the slot was not claimed: taken,
			   * gone, or given back (wlk__fast_claim_slot()) */
	WLK__FAST_ADOPTED, /* handed over, then inflated: held, its token is
			    * the inflation's to give (under the mutex) */
};

/* A request slot claimed for name entry @ni by the fast path. */
struct wlk__fast_claim {
	uint32_t ni, ngen;  /* the name entry, bounded */
	uint32_t slot, gen; /* the request slot, FAST in gen */
	enum wlk_mode mode;
};

enum wlk__fast wlk__fast_acquire_held(struct wlk__bucket *b,
				      struct wlk__fast_claim *c,
				      bool may_wait, uint64_t f,
				      uint64_t *token, const uint64_t *guard,
				      uint64_t expect) WLK_INTERNAL;
enum wlk__fast wlk__fast_take(struct wlk__bucket *b,
			      const struct wlk__fast_claim *c,
			      struct wlk__pair seen, int tries, bool may_wait,
			      uint64_t *token) WLK_INTERNAL;
enum wlk__fast wlk__fast_await(struct wlk__bucket *b,
			       const struct wlk__fast_claim *c,
			       uint64_t *token) WLK_INTERNAL;
enum wlk__fast wlk__fast_let_go_rest(struct wlk__bucket *b,
				     const struct wlk__fast_claim *c,
				     uint64_t f) WLK_INTERNAL;
/* The mutex side. */
uint32_t wlk__fast_off(struct wlk__bucket *b, uint32_t ni, uint32_t *waiter)
	WLK_INTERNAL;
void wlk__fast_waiter_clear(struct wlk__bucket *b, uint32_t ni) WLK_INTERNAL;
void wlk__fast_store_off(struct wlk__bucket *b, uint32_t ni) WLK_INTERNAL;
void wlk__fast_reset(struct wlk_seg_name *n) WLK_INTERNAL;
void wlk__fast_deflate(struct wlk__bucket *b, uint32_t ni) WLK_INTERNAL;
void wlk__fast_grant(struct wlk__bucket *b, uint32_t ni, uint32_t ri,
		     uint32_t gen, enum wlk_mode mode) WLK_INTERNAL;
bool wlk__fast_holds(struct wlk__bucket *b, uint32_t ni, uint32_t ri)
	WLK_INTERNAL;
bool wlk__fast_waits(struct wlk__bucket *b, uint32_t ni, uint32_t ri)
	WLK_INTERNAL;
void wlk__fast_unclaim(struct wlk__bucket *b, uint32_t ri) WLK_INTERNAL;
void wlk__fast_off_all(struct wlk__bucket *b) WLK_INTERNAL;
/* For those who only look. */
bool wlk__fast_held(const struct wlk_seg_name *n) WLK_INTERNAL;
bool wlk__fast_words(const struct wlk_seg_name *n, uint64_t *f,
		     uint64_t *c) WLK_INTERNAL;

/*
 * The uncontended acquire and release, inline in their one caller (the
 * lanes, shm/lane.c and shm.h): fastword.c's, like the rest of the fast
 * word. Whatever is not uncontended (a held name, a CAS that lost, a
 * fast waiter) goes on in fastword.c, out of line.
 */

/* The fast word of name entry gen @ngen, "on" and free. */
static inline uint64_t wlk__fast_on_free(uint32_t ngen)
{
	return WLK_FAST(ngen, 1, 0, 0);
}

/*
 * A fast operation changed a fast word, or saw a change it acts on, and
 * then made a full barrier: if a query is copying the bucket, its copy may
 * have looked at that name before the change and looks at others after,
 * so the caller waits for the copy to end before it goes on (layout.h,
 * QUERY). Costs one load of a line only queries write when none runs.
 */
static inline enum wlk__fast wlk__fast_done(struct wlk__bucket *b)
{
	if (caa_unlikely(uatomic_read(&b->hdr->freeze)))
		return WLK__FAST_FROZEN;
	return WLK__FAST_OK;
}

/* wlk__fast_unclaim_slot() - @c's slot is RESERVED again, in gen c->gen. */
static inline void wlk__fast_unclaim_slot(struct wlk__bucket *b,
					  const struct wlk__fast_claim *c)
{
	wlk__word_store(&wlk__req(b, c->slot)->word,
			WLK_WORD(c->gen, WLK_SLOT_RESERVED));
}

/*
 * Claim @c's request slot, RESERVED in gen c->gen: FAST in gen + 1 (a new
 * gen per claim tells one fast waiter claim from the next), name and mode
 * filled, c->gen moved on. @guard, if not NULL, is a word of the caller's
 * that must still read @expect once the slot is claimed (the claim's CAS
 * is the full barrier that orders the look after it): if it does not, the
 * slot is given back, RESERVED in the new gen. Return: the slot; or NULL:
 * not claimed (the slot is no longer RESERVED in that gen: another claim
 * took it, or the mutex side reclaimed it, wlk__stash_reclaim()), or given
 * back (c->gen moved on then).
 */
static inline struct wlk_seg_request *
wlk__fast_claim_slot(struct wlk__bucket *b, struct wlk__fast_claim *c,
		     const uint64_t *guard, uint64_t expect)
{
	struct wlk_seg_request *r = wlk__req(b, c->slot);
	uint32_t gen = c->gen;

	if (uatomic_cmpxchg(&r->word, WLK_WORD(gen, WLK_SLOT_RESERVED),
			    WLK_WORD(gen + 1, WLK_SLOT_FAST)) !=
	    WLK_WORD(gen, WLK_SLOT_RESERVED))
		return NULL;
	c->gen = gen + 1;
	if (guard && caa_unlikely(uatomic_read(guard) != expect)) {
		wlk__fast_unclaim_slot(b, c);
		return NULL;
	}
	r->mode = (uint8_t)c->mode;
	r->flags = 0;
	r->name = c->ni;
	r->name_gen = c->ngen;
	r->token = 0;
	r->stamp_ns = wlk__stamp_ns();
	return r;
}

/*
 * wlk__fast_acquire() - take @c's name by its fast word, with @c's request
 * slot, RESERVED for this client in gen c->gen; or, if @may_wait, enlist
 * as the name's fast waiter. A free name is taken here: the slot claimed
 * (wlk__fast_claim_slot(), with @guard and @expect), then the word and
 * the name's next token in one CAS (layout.h, TOKENS ON THE FAST PATH),
 * which publishes the slot's fields to whoever inflates.
 * Return: WLK__FAST_OK or _FROZEN: held, *@token set, the slot FAST in
 * c->gen, and *@held the fast word that names it as the holder (0 if not
 * known here: wlk__fast_let_go() then works it out); _WAITING: enlisted
 * (wlk__fast_await() next); _SLOW: neither, the slot RESERVED in c->gen
 * (unclaimed, or claimed and given back: c->gen moved on); _LOST: not
 * claimed (the slot was not RESERVED in c->gen), or claimed and given
 * back for @guard (c->gen moved on).
 */
static inline enum wlk__fast wlk__fast_acquire(struct wlk__bucket *b,
					       struct wlk__fast_claim *c,
					       bool may_wait, uint64_t *token,
					       uint64_t *held,
					       const uint64_t *guard,
					       uint64_t expect)
{
	struct wlk_seg_name *n = wlk__name(b, c->ni);
	uint64_t on = wlk__fast_on_free(c->ngen);
	struct wlk_seg_request *r;
	struct wlk__pair seen;
	uint64_t t, mine;

	*held = 0;
	seen.lo = wlk__fast_load(&n->fast);
	if (caa_unlikely(seen.lo != on))
		return wlk__fast_acquire_held(b, c, may_wait, seen.lo, token,
					      guard, expect);
	r = wlk__fast_claim_slot(b, c, guard, expect);
	if (!r)
		return WLK__FAST_LOST;
	/* The token is read apart from the word: the CAS checks both. */
	seen.hi = uatomic_read(&n->token);
	t = seen.hi + 1;
	mine = on | wlk__fast_who(c->slot, c->gen, c->mode);
	if (caa_unlikely(!wlk__cas2(&n->fast, &seen,
				    (struct wlk__pair){mine, t})))
		return wlk__fast_take(b, c, seen, 1, may_wait, token);
	uatomic_set(&r->token, t);
	*token = t;
	*held = mine;
	return wlk__fast_done(b);
}

/*
 * wlk__fast_let_go() - release @c's lock, held through the fast word: back
 * to "on, free", or, with a fast waiter, handed over to it; the slot is
 * RESERVED again, in gen c->gen. @held: the fast word that names @c as
 * the holder, if wlk__fast_acquire() gave it, else 0 (worked out here).
 * Return: WLK__FAST_OK or _FROZEN: released; _SLOW: the name was inflated
 * meanwhile (the lock is an ordinary held or stolen request now): release
 * it under the mutex.
 */
static inline enum wlk__fast wlk__fast_let_go(struct wlk__bucket *b,
					      const struct wlk__fast_claim *c,
					      uint64_t held)
{
	struct wlk_seg_name *n = wlk__name(b, c->ni);
	uint64_t on = wlk__fast_on_free(c->ngen);
	struct wlk_seg_request *r = wlk__req(b, c->slot);
	uint64_t f;

	/* The whole gen first: the fast word has only its low bits, and a
	 * stale handle (its manager closed) must not match a reused slot. */
	if (wlk__word_load(&r->word) != WLK_WORD(c->gen, WLK_SLOT_FAST))
		return WLK__FAST_SLOW;
	if (!held)
		held = on | wlk__fast_who(c->slot, c->gen, c->mode);
	f = uatomic_cmpxchg(&n->fast, held, on);
	if (caa_unlikely(f != held))
		return wlk__fast_let_go_rest(b, c, f);
	/* RESERVED again (wlk__fast_unclaim_slot()). */
	wlk__word_store(&r->word, WLK_WORD(c->gen, WLK_SLOT_RESERVED));
	return wlk__fast_done(b);
}

#endif /* WLK_STATE_H */
