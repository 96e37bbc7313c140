/* SPDX-License-Identifier: MIT */
/*
 * shm.h - the shared-memory engine: a bucket's lock state in one POSIX
 * shared-memory segment (the layers below), reached by the API layer
 * through wlk__shm_engine (engine.c). What its files share: the engine's
 * manager and lock, the lanes a manager keeps for the fast path, the wait
 * for a grant, and the async context.
 */
#ifndef WLK_SHM_H
#define WLK_SHM_H

#include <string.h>

#include "engine.h"
#include "attach.h"
#include "inspect_internal.h"

/*
 * A request slot a manager keeps in reserve for the fast path (lane.c).
 * @word: the lane's kind and slot (WLK__LANE()): EMPTY (no slot), FILL
 * (being given one, under the segment mutex), READY (its slot is this
 * client's, RESERVED or claimed), SEALING, OWED and CLOSING (its manager
 * is being closed), DEAD. Who takes the slot is settled on the slot's
 * own word in the segment (a claim: RESERVED to FAST by CAS), not here:
 * a thread that claimed it holds the lane until it gives the slot back.
 * @letgo: set while a lock held through the lane ends (seal.c, PINS).
 * @owed_gen: the claim an OWED lane waits for (PINS).
 */
enum {
	WLK_LANE_EMPTY = 0,
	WLK_LANE_FILL = 1,
	WLK_LANE_READY = 2,
	WLK_LANE_SEALING = 3,
	WLK_LANE_OWED = 4,
	WLK_LANE_CLOSING = 5,
	WLK_LANE_DEAD = 6,
};
#define WLK__LANE_KIND_BITS 3u
#define WLK__LANE(slot, kind) ((uint32_t)(slot) << WLK__LANE_KIND_BITS | (kind))
#define WLK__LANE_KIND(w) ((w) & ((1u << WLK__LANE_KIND_BITS) - 1u))
#define WLK__LANE_SLOT(w) ((w) >> WLK__LANE_KIND_BITS)
_Static_assert(WLK_LIMIT_MAX_REQUESTS <= UINT32_MAX >> WLK__LANE_KIND_BITS,
	       "a lane word holds every request slot index");
struct wlk__lane {
	union {
		/* Read at once by a claim's check (wlk__lane_guard()). */
		uint64_t guard;
		struct {
			uint32_t word;  /* [A] */
			uint32_t letgo; /* [A] */
		};
	};
	uint32_t owed_gen; /* set before the word turns OWED */
};

/* What a claim of slot @s finds in its lane's guard word when it may keep
 * it: READY with @s, and no lock's end under way (seal.c, PINS). */
static inline uint64_t wlk__lane_guard(uint32_t s)
{
	struct wlk__lane ok = {.word = WLK__LANE(s, WLK_LANE_READY)};

	return ok.guard;
}

/* The engine's manager: a client slot in the bucket's segment. */
struct wlk__shm_manager {
	struct wlk_manager pub;
	struct wlk__bucket *b;
	uint32_t client;         /* client slot and its gen */
	uint32_t client_gen;
	bool detect;             /* detect_deadlocks: requests are checked */
	/* Its requests may wait as a name's fast waiter (acquire.c, fast()):
	 * it does not detect deadlocks, and spinning pays here. */
	bool fast_wait;
	struct wlk__actx *actx;  /* async state (async.c), under pub.amu */
	struct wlk__lane lanes[WLK_LANES];
};

/* The engine's lock: a request slot. */
struct wlk__shm_lock {
	struct wlk_lock pub;
	/*
	 * Its request slot, gen and mode, and, taken by the fast path, the
	 * name entry whose fast word holds it: one struct wlk__fast_claim,
	 * which the fast path hands to fastword.c as it is, without a copy.
	 */
	union {
		struct wlk__fast_claim claim;
		struct {
			uint32_t fast_name;
			uint32_t fast_ngen;
			uint32_t slot;
			uint32_t gen;
			enum wlk_mode mode;
		};
	};
	/* The fast word that names it as the holder, as the uncontended
	 * acquire made it (wlk__fast_acquire()), or 0. */
	uint64_t held_word;
	/* The name's hash in its segment, once the fast path computed it. */
	bool hashed;
	uint64_t hash;
	/* Its slot is a lane's (m->lanes[lane]): taken by the fast path
	 * (@fast), or the mutex path used the lane's slot (@laned). */
	bool laned;
	bool fast;
	uint8_t lane;
};

#define WLK__CLAIM_IS(field, as)                                              \
	_Static_assert(offsetof(struct wlk__shm_lock, field) ==               \
			       offsetof(struct wlk__shm_lock, claim.as),      \
		       "struct wlk__shm_lock: " #field " is claim." #as)
WLK__CLAIM_IS(fast_name, ni);
WLK__CLAIM_IS(fast_ngen, ngen);
WLK__CLAIM_IS(slot, slot);
WLK__CLAIM_IS(gen, gen);
WLK__CLAIM_IS(mode, mode);
#undef WLK__CLAIM_IS

/* The engine's objects from the API layer's: the base is at offset 0. */
static inline struct wlk__shm_manager *wlk__shm_m(struct wlk_manager *m)
{
	return caa_container_of(m, struct wlk__shm_manager, pub);
}

static inline struct wlk__shm_lock *wlk__shm_l(struct wlk_lock *l)
{
	return caa_container_of(l, struct wlk__shm_lock, pub);
}

static inline const struct wlk__shm_lock *
wlk__shm_cl(const struct wlk_lock *l)
{
	return caa_container_of(l, const struct wlk__shm_lock, pub);
}

/* The manager of the engine's lock @l. */
static inline struct wlk__shm_manager *wlk__shm_lm(struct wlk__shm_lock *l)
{
	return wlk__shm_m(l->pub.m);
}

/* The engine's part of a new handle, which the API layer leaves to it. */
static inline void wlk__shm_lock_init(struct wlk__shm_lock *l)
{
	l->mode = l->pub.mode;
	l->held_word = 0;
	l->fast = false;
	l->laned = false;
	l->lane = 0;
	l->hashed = false;
}

/* lane.c: the one owner of lane state, and the fast path through it. */
void wlk__lane_fill(struct wlk__shm_manager *m) WLK_INTERNAL;
bool wlk__lane_offer(struct wlk__shm_manager *m, struct wlk__shm_lock *l,
		     uint32_t *slot, uint32_t *gen) WLK_INTERNAL;
void wlk__lane_end(struct wlk__shm_manager *m, unsigned int at,
		   uint32_t slot, uint32_t gen, bool kept, bool marked)
	WLK_INTERNAL;
enum wlk__fast wlk__lane_await(struct wlk__shm_lock *l) WLK_INTERNAL;
bool wlk__lane_lookup(struct wlk__bucket *b, struct wlk__shm_lock *l)
	WLK_INTERNAL;
enum wlk__fast wlk__lane_missed(struct wlk__shm_manager *m,
				struct wlk__shm_lock *l, unsigned int at,
				uint32_t gen0, enum wlk__fast rc,
				bool memo_hit) WLK_INTERNAL;

/* seal.c: the lanes as their manager closes (PINS). */
void wlk__lane_seal_claims(struct wlk__shm_manager *m) WLK_INTERNAL;
void wlk__lane_seal(struct wlk__shm_manager *m) WLK_INTERNAL;
bool wlk__lane_settle_owed(struct wlk__lane *lane, uint32_t slot,
			   uint32_t gen) WLK_INTERNAL;

/*
 * wlk__slot_ours() - whether request slot @s (bounded by the caller) is
 * this client's: its word in *@w, read once and before the client it was
 * given to (a slot taken back and given to another client is not ours).
 * Without the mutex, a hint that a CAS on the word, or the mutex, settles.
 */
static inline bool wlk__slot_ours(const struct wlk__shm_manager *m,
				  uint32_t s, uint32_t *w)
{
	const struct wlk_seg_request *r = wlk__req(m->b, s);

	*w = uatomic_read(&r->word);
	cmm_smp_rmb();
	return r->client == m->client && r->client_gen == m->client_gen;
}

/*
 * wlk__lane_pick() - a READY lane of @m whose slot is RESERVED for this
 * client: its index, the slot in *@slot and its gen in *@gen; or WLK_LANES
 * if none is. Plain reads: the claim's CAS (RESERVED in that gen) decides,
 * and its caller checks the lane again after it (seal.c, PINS). The slot
 * index is the lane's, bounded when the lane was filled. Inline: the
 * uncontended acquire's; lane.c's, like the rest of lane state.
 */
static inline unsigned int wlk__lane_pick(struct wlk__shm_manager *m,
					  uint32_t *slot, uint32_t *gen)
{
	for (unsigned int i = 0; i < WLK_LANES; i++) {
		/* The word and the mark at once, as the claim's guard. */
		struct wlk__lane now = {
			.guard = uatomic_read(&m->lanes[i].guard),
		};
		uint32_t s = WLK__LANE_SLOT(now.word), w;

		if (now.guard != wlk__lane_guard(s) ||
		    !wlk__slot_ours(m, s, &w) ||
		    WLK_WORD_STATE(w) != WLK_SLOT_RESERVED)
			continue;
		*slot = s;
		*gen = WLK_WORD_GEN(w);
		return i;
	}
	return WLK_LANES;
}

/*
 * The name this thread found last, per thread (lane.c's): taking the same
 * name again skips the hash and the table walk. Entries are (slot, gen),
 * so a stale one only makes the fast word's CAS fail; the segment key
 * tells segments apart (a bucket's memory may be reused for another).
 */
struct wlk__memo {
	uint64_t seg_key[2];
	uint64_t hash;
	uint32_t len;
	uint32_t ni;
	uint32_t ngen;
	char name[WLK_SHORT_NAME];
};
extern WLK_TLS struct wlk__memo wlk__memo WLK_INTERNAL;

/* Whether the memo has @l's name: then @l's hash, fast_name and fast_ngen
 * are set from it. */
static inline bool wlk__memo_find(struct wlk__bucket *b,
				  struct wlk__shm_lock *l)
{
	const struct wlk__memo *memo = &wlk__memo;

	if (memo->len != l->pub.name_len ||
	    memo->seg_key[0] != b->seg_key[0] ||
	    memo->seg_key[1] != b->seg_key[1] || !memo->len ||
	    !wlk__bytes_equal(memo->name, l->pub.name, l->pub.name_len))
		return false;
	l->hash = memo->hash;
	l->hashed = true;
	l->fast_name = memo->ni;
	l->fast_ngen = memo->ngen;
	return true;
}

/*
 * wlk__lane_acquire() - take @l's name in @l->mode by the fast path, or,
 * if @may_wait, wait for it as its fast waiter: find the name (the memo,
 * or wlk__lane_lookup()), pick a lane, and let the fast word (state.h) do
 * the rest: it claims the lane's slot, which makes the lane this thread's
 * (seal.c, PINS). Inline: the uncontended acquire; lane.c's.
 * Return: WLK__FAST_OK or _FROZEN: held, @l filled (slot, gen, token,
 * fast fields, lane); _WAITING: enlisted (wlk__lane_await() next); _SLOW:
 * no lane ready, unknown name, inflated, contended, a race: take the
 * mutex.
 */
static inline enum wlk__fast wlk__lane_acquire(struct wlk__shm_manager *m,
					       struct wlk__shm_lock *l,
					       bool may_wait)
{
	struct wlk__bucket *b = m->b;
	enum wlk__fast rc;
	unsigned int at;
	uint32_t gen0;
	bool memo_hit = wlk__memo_find(b, l);

	if (!memo_hit && !wlk__lane_lookup(b, l))
		return WLK__FAST_SLOW;
	if (!wlk__name_at(b, l->fast_name))
		return WLK__FAST_SLOW;
	at = wlk__lane_pick(m, &l->slot, &l->gen);
	if (at == WLK_LANES)
		return WLK__FAST_SLOW;
	gen0 = l->gen;
	rc = wlk__fast_acquire(b, &l->claim, may_wait, &l->pub.token,
			       &l->held_word, &m->lanes[at].guard,
			       wlk__lane_guard(l->slot));
	if (caa_unlikely(rc == WLK__FAST_SLOW || rc == WLK__FAST_LOST))
		return wlk__lane_missed(m, l, at, gen0, rc, memo_hit);
	l->lane = (uint8_t)at;
	l->fast = rc != WLK__FAST_WAITING;
	return rc;
}

/*
 * wlk__lane_release() - release a lock held through the fast word; its
 * slot is RESERVED again, still its lane's. The caller marked the lane
 * (@letgo) first, and ends it after (seal.c, PINS). Inline: the
 * uncontended release.
 * Return: WLK__FAST_OK or _FROZEN: released; _SLOW: the name was inflated
 * meanwhile: release it under the mutex.
 */
static inline enum wlk__fast wlk__lane_release(struct wlk__shm_lock *l)
{
	enum wlk__fast rc = wlk__fast_let_go(wlk__shm_lm(l)->b, &l->claim,
					     l->held_word);

	if (rc != WLK__FAST_SLOW)
		l->fast = false;
	return rc;
}

/* wait.c: the lifelines a waiter sleeps on besides its request (reap.c) */
struct wlk__watch {
	struct wlk__waitv v[WLK_WATCH_MAX];
	unsigned int n;
	bool complete; /* every blocker is watched */
	bool stale;    /* recompute before sleeping again */
	bool partial;  /* of the agents nearest the head (WLK_REQF_PARTIAL):
			* recompute when woken */
	bool head;     /* first in its name's queue (its slice, slice.c) */
};
int wlk__wait_for(struct wlk__shm_manager *m, struct wlk__shm_lock *l,
		  const struct wlk_options *o, uint64_t deadline,
		  struct wlk__watch *watch) WLK_INTERNAL;
void wlk__watch_init(struct wlk__bucket *b, struct wlk__shm_lock *l,
		     struct wlk__wake *wake, struct wlk__watch *watch)
	WLK_INTERNAL;
/* Where a blocking request stands between the steps of an acquire. */
enum wlk__step {
	WLK__STEP_HELD,   /* granted (perhaps stolen since): take the grant */
	WLK__STEP_MISS,   /* an if_available miss: no lock */
	WLK__STEP_MUTEX,  /* request it under the mutex */
	WLK__STEP_SETTLE, /* a fast waiter not handed the name: wlk__settle() */
};
int wlk__settle(struct wlk__shm_manager *m, struct wlk__shm_lock *l,
		enum wlk__step *step) WLK_INTERNAL;
int wlk__release_slot(struct wlk__bucket *b, uint32_t slot, uint32_t gen,
		      bool keep) WLK_INTERNAL;
int wlk__after_wait(struct wlk__shm_manager *m, uint32_t slot, uint32_t gen,
		    bool gave_up, int why, bool closing) WLK_INTERNAL;

/* scope.c: a scope's handle and its members (layout.h, SCOPES). */
void wlk__shm_scope_items(struct wlk__shm_manager *m,
			  const struct wlk__shm_lock *l,
			  struct wlk__scope_item *items,
			  struct wlk__enqueue *e) WLK_INTERNAL;
void wlk__shm_scope_members(struct wlk__shm_lock *l,
			    const struct wlk__scope_item *items) WLK_INTERNAL;
void wlk__shm_scope_tokens(struct wlk__bucket *b, struct wlk__shm_lock *l)
	WLK_INTERNAL;

/* acquire.c: the blocking request and the release. */
int wlk__shm_acquire(struct wlk_manager *m, struct wlk_lock *l,
		     const struct wlk_options *o, bool *held) WLK_INTERNAL;
int wlk__shm_release(struct wlk_lock *l) WLK_INTERNAL;

/*
 * The async context (async.c): a doorbell (doorbell.c), an eventfd that
 * granters ring directly and that is the manager's descriptor, and an
 * inner epoll instance holding a timer for deadlines, the event
 * descriptors of abort signals, pidfds of the processes pending requests
 * wait behind and the doorbell's fallback socket, which the process's
 * watcher thread turns into a ring (watcher.c). Under m->pub.amu.
 */
struct pidwatch {
	uint32_t agent, gen;
	int fd;
	uint32_t life; /* its lifeline word, armed (async_pid.c) */
};

struct wlk__actx {
	int epfd, tfd; /* the inner epoll instance (watcher.c), the timer */
	struct wlk__bell bell; /* its eventfd is wlk_manager_fd() */
	int inner_fired;       /* [A] the watcher saw the inner instance
				* readable: consume it, then re-arm */
	uint64_t wkey;         /* the watcher's key for it (under its mutex) */
	unsigned long wfork;   /* the fork generation it was watched in */
	struct cds_list_head wlink; /* in the watcher's list */
	struct pidwatch pid[PIDFD_MAX];
	unsigned int n_pid;
	/* Their lifelines, for the lifeline thread; under its mutex. */
	struct wlk__waitv life[PIDFD_MAX];
	unsigned int n_life;
	uint64_t recheck; /* a blocker is not watched: look again then */
	uint64_t timer_at; /* when the timerfd fires, or 0: not armed (read
			    * it when draining only then) */
	uint64_t epoch;    /* the header's recovery_epoch, at the last drain */
};

/* async.c: the engine's async operations (struct wlk__engine). */
int wlk__shm_async_open(struct wlk_manager *m) WLK_INTERNAL;
int wlk__shm_async_fd(struct wlk_manager *m) WLK_INTERNAL;
int wlk__shm_async_watch_fd(struct wlk_manager *m, int fd) WLK_INTERNAL;
void wlk__shm_async_ring(struct wlk_manager *m) WLK_INTERNAL;
int wlk__shm_async_request(struct wlk_manager *m, struct wlk_async *r,
			   const struct wlk_options *o) WLK_INTERNAL;
bool wlk__shm_async_drain(struct wlk_manager *m) WLK_INTERNAL;
void wlk__shm_async_settle(struct wlk_manager *m, struct wlk_async *r,
			   int why) WLK_INTERNAL;
void wlk__shm_async_arm(struct wlk_manager *m) WLK_INTERNAL;
void wlk__shm_async_close(struct wlk_manager *m) WLK_INTERNAL;

/* watcher.c */
int wlk__epoll_add(int epfd, int fd, uint32_t events) WLK_INTERNAL;
int wlk__watcher_add(struct wlk__actx *a) WLK_INTERNAL;
void wlk__watcher_rearm(struct wlk__actx *a) WLK_INTERNAL;
void wlk__watcher_del(struct wlk__actx *a) WLK_INTERNAL;
bool wlk__watcher_lifelines(struct wlk__actx *a, const struct wlk__waitv *v,
			    unsigned int n) WLK_INTERNAL;

/* async_pid.c */
void wlk__pidwatch_fired(struct wlk__actx *a, int fd) WLK_INTERNAL;
void wlk__pidwatch_update(struct wlk__shm_manager *m, struct wlk__actx *a)
	WLK_INTERNAL;

#endif /* WLK_SHM_H */
