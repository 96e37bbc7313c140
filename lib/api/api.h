/* SPDX-License-Identifier: MIT */
/*
 * api.h - the objects of the public API in this process (managers, locks,
 * signals, the lanes a manager keeps for the fast path) and the calls
 * between the files that implement it.
 */
#ifndef WLK_API_H
#define WLK_API_H

#include "weblocks/async.h"
#include "attach.h"

/*
 * A request slot a manager keeps in reserve for the fast path (lane.c):
 * EMPTY (no slot), READY (slot RESERVED, free to take), BUSY (taken by one
 * thread). @state changes only through lane.c's functions, and a BUSY lane
 * only by the thread that made it BUSY.
 */
enum { WLK_LANE_EMPTY = 0, WLK_LANE_READY = 1, WLK_LANE_BUSY = 2 };
struct wlk__lane {
	uint32_t state; /* [A] */
	uint32_t slot;
	uint32_t gen;
};

/*
 * The async path's part in closing a manager and releasing a lock. The
 * async files are a leaf above the core API: they install these hooks when
 * a manager's async context is created, and the core calls through them,
 * only on paths a manager without one never takes.
 */
struct wlk__async_hooks {
	void (*close)(struct wlk_manager *m);  /* callbacks owed: WLK_ESTATE */
	void (*unwatch)(struct wlk_lock *l);   /* l->watched: watched no more */
};

/* lane.c: the one owner of lane state, and the fast path through it. */
void wlk__lane_fill(struct wlk_manager *m) WLK_INTERNAL;
void wlk__lane_unclaim(struct wlk_lock *l) WLK_INTERNAL;
enum wlk__fast wlk__lane_acquire(struct wlk_manager *m, struct wlk_lock *l,
				 bool may_wait) WLK_INTERNAL;
enum wlk__fast wlk__lane_await(struct wlk_lock *l) WLK_INTERNAL;

/* struct wlk_manager: a client of a bucket. */
struct wlk_manager {
	struct wlk__bucket *b;
	unsigned long refs;      /* [A] user handle + locks + calls in flight */
	unsigned long fork_gen;  /* process incarnation that opened it */
	uint32_t closed;         /* [A] set once by wlk_manager_close() */
	uint32_t close_word;     /* futex: bumped when closed */
	uint32_t client;         /* client slot and its gen */
	uint32_t client_gen;
	char client_id[WLK_CLIENT_ID_MAX + 1];
	pthread_mutex_t amu;     /* guards actx and what hangs off it */
	struct wlk__actx *actx;  /* async state (async_dispatch.c), NULL until
				    used */
	const struct wlk__async_hooks *async; /* [A] set with actx under
						 amu, never cleared */
	struct wlk__lane lanes[WLK_LANES];
};

/* struct wlk_lock: a granted request, owned by the caller. */
struct wlk_lock {
	struct wlk_manager *m;
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
	uint64_t token;
	/* The name's hash in its segment, once the fast path computed it. */
	bool hashed;
	uint64_t hash;
	/* Its slot is a lane's (m->lanes[lane]): taken by the fast path
	 * (@fast), or the mutex path used the lane's slot (@laned). */
	bool laned;
	bool fast;
	uint8_t lane;
	/* wlk_lock_on_stolen(), under m->amu */
	struct cds_list_head watch;
	bool watched;
	wlk_stolen_cb on_stolen;
	void *stolen_arg;
	size_t name_len;
	char name[]; /* name_len bytes + NUL */
};

#define WLK__CLAIM_IS(field, as)                                              \
	_Static_assert(offsetof(struct wlk_lock, field) ==                    \
			       offsetof(struct wlk_lock, claim.as),           \
		       "struct wlk_lock: " #field " is claim." #as)
WLK__CLAIM_IS(fast_name, ni);
WLK__CLAIM_IS(fast_ngen, ngen);
WLK__CLAIM_IS(slot, slot);
WLK__CLAIM_IS(gen, gen);
WLK__CLAIM_IS(mode, mode);
#undef WLK__CLAIM_IS

/*
 * wlk__lane_grab() - make a lane of @m in @state BUSY, or NULL. Plain
 * reads first: a CAS on a lane that cannot match would cost for nothing.
 * Inline, with wlk__lane_take() and wlk__lane_put(), for the uncontended
 * path; lane.c's, like the rest of lane state.
 */
static inline struct wlk__lane *wlk__lane_grab(struct wlk_manager *m,
					       uint32_t state)
{
	for (unsigned int i = 0; i < WLK_LANES; i++)
		if (uatomic_read(&m->lanes[i].state) == state &&
		    uatomic_cmpxchg(&m->lanes[i].state, state,
				    WLK_LANE_BUSY) == state)
			return &m->lanes[i];
	return NULL;
}

/* wlk__lane_take() - take a READY lane of @m (BUSY then), or NULL. */
static inline struct wlk__lane *wlk__lane_take(struct wlk_manager *m)
{
	return wlk__lane_grab(m, WLK_LANE_READY);
}

/*
 * wlk__lane_put() - the BUSY @lane is done with: READY with slot @slot in
 * gen @gen, if @ready (the slot is RESERVED for this client in that gen),
 * else EMPTY (the slot went: closed, stolen, reclaimed).
 */
static inline void wlk__lane_put(struct wlk__lane *lane, uint32_t slot,
				 uint32_t gen, bool ready)
{
	lane->slot = slot;
	lane->gen = gen;
	uatomic_set(&lane->state, ready ? WLK_LANE_READY : WLK_LANE_EMPTY);
}

/*
 * wlk__lane_release() - release a lock held through the fast word; its
 * slot is RESERVED again, and its lane still BUSY: the caller puts it
 * back (wlk__lane_put()). Inline: the uncontended release.
 * Return: WLK__FAST_OK or _FROZEN: released; _SLOW: the name was inflated
 * meanwhile: release it under the mutex.
 */
static inline enum wlk__fast wlk__lane_release(struct wlk_lock *l)
{
	enum wlk__fast rc = wlk__fast_let_go(l->m->b, &l->claim);

	if (rc != WLK__FAST_SLOW)
		l->fast = false;
	return rc;
}

/* struct wlk_signal: AbortController/AbortSignal. */
struct wlk_signal {
	int reason;    /* [A] 0 until aborted */
	uint32_t word; /* futex: bumped on abort */
	int efd;       /* [A] eventfd for event loops (async.c), or -1 */
};

/* wait.c: the lifelines a waiter sleeps on besides its request (reap.c) */
struct wlk__watch {
	struct wlk__waitv v[WLK_WATCH_MAX];
	unsigned int n;
	bool complete; /* every blocker is watched */
	bool stale;    /* recompute before sleeping again */
};
void wlk__watch_arm(struct wlk__bucket *b, uint32_t slot, uint32_t gen,
		    struct wlk__wake *wake, struct wlk__watch *w) WLK_INTERNAL;
int wlk__wait_grant(struct wlk_manager *m, uint32_t slot, uint32_t gen,
		    struct wlk_signal *sig, uint64_t deadline,
		    struct wlk__watch *watch) WLK_INTERNAL;
int wlk__wait_for(struct wlk_manager *m, struct wlk_lock *l,
		  const struct wlk_options *o, uint64_t deadline,
		  struct wlk__watch *watch) WLK_INTERNAL;
void wlk__watch_init(struct wlk__bucket *b, struct wlk_lock *l,
		     struct wlk__wake *wake, struct wlk__watch *watch)
	WLK_INTERNAL;
/* Where a blocking request stands between the steps of an acquire. */
enum wlk__step {
	WLK__STEP_HELD,   /* granted (perhaps stolen since): take the grant */
	WLK__STEP_MISS,   /* an if_available miss: no lock */
	WLK__STEP_MUTEX,  /* request it under the mutex */
	WLK__STEP_SETTLE, /* a fast waiter not handed the name: wlk__settle() */
};
int wlk__settle(struct wlk_manager *m, struct wlk_lock *l,
		enum wlk__step *step) WLK_INTERNAL;
int wlk__release_slot(struct wlk__bucket *b, uint32_t slot, uint32_t gen,
		      bool keep) WLK_INTERNAL;
int wlk__give_up(struct wlk__bucket *b, uint32_t slot, uint32_t gen,
		 bool closing) WLK_INTERNAL;
int wlk__dropped(struct wlk_manager *m) WLK_INTERNAL;
int wlk__after_wait(struct wlk_manager *m, uint32_t slot, uint32_t gen,
		    bool gave_up, int why, bool closing) WLK_INTERNAL;

/*
 * abi.c: the option structs as the caller's header laid them out (the size
 * rule of weblocks.h, GROWING STRUCTS). Every entry point reads its options
 * through wlk__options_read() or wlk__manager_options_read() once, first;
 * the code below it sees only the copy, of this library's layout, never
 * NULL (the defaults stand in for it).
 *
 * The first layouts, which a size of 0 stands for: the fields soname 1
 * shipped. Fixed for good: fields added later go after them.
 */
#define WLK__OPTIONS_FIRST_SIZE                                                \
	(offsetof(struct wlk_options, timeout_ns) + sizeof(uint64_t))
#define WLK__MANAGER_OPTIONS_FIRST_SIZE                                        \
	(offsetof(struct wlk_manager_options, max_name_len) + sizeof(uint32_t))
extern const struct wlk_options wlk__options_default WLK_INTERNAL;
extern const struct wlk_manager_options wlk__manager_options_default
	WLK_INTERNAL;
int wlk__struct_read(void *copy, size_t known, size_t first, const void *src,
		     size_t size) WLK_INTERNAL;

/*
 * Point *@o at its copy in @copy (or at the defaults, for NULL, without a
 * copy). Inline: a caller built with this very header (or, while the
 * struct has its first layout, one that leaves size 0), the common case,
 * costs one 32-byte copy on the request path. Return: 0, or WLK_EINVAL
 * (then *@o is left alone).
 */
static inline int wlk__options_read(const struct wlk_options **o,
				    struct wlk_options *copy)
{
	size_t size;
	int rc = 0;

	if (!*o) {
		*o = &wlk__options_default;
		return 0;
	}
	size = (*o)->size ? (*o)->size : WLK__OPTIONS_FIRST_SIZE;
	if (size == sizeof(**o))
		*copy = **o;
	else
		rc = wlk__struct_read(copy, sizeof(*copy),
				      WLK__OPTIONS_FIRST_SIZE, *o, (*o)->size);
	if (!rc)
		*o = copy;
	return rc;
}

/* The same for struct wlk_manager_options (not on a hot path). */
static inline int
wlk__manager_options_read(const struct wlk_manager_options **o,
			  struct wlk_manager_options *copy)
{
	int rc;

	if (!*o) {
		*o = &wlk__manager_options_default;
		return 0;
	}
	rc = wlk__struct_read(copy, sizeof(*copy),
			      WLK__MANAGER_OPTIONS_FIRST_SIZE, *o, (*o)->size);
	if (!rc)
		*o = copy;
	return rc;
}

/* request.c */
int wlk__acquire_begin(struct wlk_manager *m, const char *name, size_t *len,
		       const struct wlk_options *o) WLK_INTERNAL;

/* handle.c */
struct wlk_lock *wlk__lock_new(struct wlk_manager *m, const char *name,
			       size_t len, enum wlk_mode mode) WLK_INTERNAL;
void wlk__lock_free(struct wlk_lock *l) WLK_INTERNAL;

/* manager.c */
bool wlk__manager_enter(struct wlk_manager *m) WLK_INTERNAL;
void wlk__manager_leave(struct wlk_manager *m) WLK_INTERNAL;

#endif /* WLK_API_H */
