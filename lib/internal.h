/* SPDX-License-Identifier: MIT */
/*
 * internal.h - process-local state and the cross-file internals (wlk__).
 */
#ifndef WLK_INTERNAL_H
#define WLK_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <urcu/urcu-bp.h> /* the flavour must precede rculfhash.h */
#include <urcu/rculfhash.h>
#include <urcu/list.h>
#include <urcu/uatomic.h>

#include "weblocks.h"
#include "weblocks/async.h"
#include "layout.h"
#include "tunables.h"
#include "failpoint.h"

#define WLK_INTERNAL __attribute__((__visibility__("hidden")))

/* Per-thread caches (handle.c, fast.c): found without a call. */
#define WLK_TLS __thread __attribute__((tls_model("initial-exec")))

/* System calls glibc 2.36 has no wrapper for (numbers as on every
 * architecture since Linux 5.3 and 5.6). */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

/* Hex digits of the 128-bit bucket hash in the segment name. */
/* The bucket of a manager opened without one (spec: the default bucket). */
#define WLK_DEFAULT_BUCKET "default"
#define WLK_KEY_BYTES 16
#define WLK_SHM_NAME_MAX 64

/* Spinning before sleeping (WLK_SPIN_NS, tunables.h) pays off only with
 * more than one CPU online. */
bool wlk__spin_ok(void) WLK_INTERNAL;

#define WLK_NSEC_PER_SEC 1000000000ull

/*
 * The geometry of a segment, copied to private memory once validated. All
 * bound checks use this copy: a co-tenant scribbling on the header cannot
 * widen them.
 */
struct wlk__geo {
	uint32_t max_agents;
	uint32_t max_clients;
	uint32_t max_names;
	uint32_t max_requests;
	uint32_t max_name_len;
	uint32_t name_stride;
	uint32_t hash_buckets;
	size_t off_agents;
	size_t off_clients;
	size_t off_names;
	size_t off_requests;
	size_t off_hash;
	size_t size;
};

/*
 * One mapping of a bucket's segment in this process, shared by every manager
 * of that bucket here, and this process's agent slot in it. Lives in the
 * registry (registry.c) while referenced.
 */
struct wlk__bucket {
	struct cds_lfht_node node; /* registry */
	unsigned long refs;        /* under the registry mutex */
	unsigned long fork_gen;    /* process incarnation that mapped it */
	uint8_t key[WLK_KEY_BYTES];
	char base_name[WLK_SHM_NAME_MAX]; /* generation 0 */
	char shm_name[WLK_SHM_NAME_MAX];  /* the generation in use */
	int fd;
	unsigned int mode; /* permission bits of the segment file */
	uint8_t *base;
	struct wlk_seg_header *hdr;
	struct wlk__geo geo;
	uint64_t seg_key[2]; /* private copy of the name-hash key */
	uint32_t agent;      /* our agent slot */
	uint32_t agent_gen;
};

/*
 * A request slot a manager keeps in reserve for the fast path (fast.c).
 * state: EMPTY (no slot), READY (slot RESERVED, free to take), BUSY (taken
 * by a fast lock, or being filled).
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
	uint32_t slot;
	uint32_t gen;
	enum wlk_mode mode;
	uint64_t token;
	/* The name's hash in its segment, once the fast path computed it. */
	bool hashed;
	uint64_t hash;
	/* Its slot is a lane's (m->lanes[lane]): taken by the fast path
	 * (@fast, with the name entry whose fast word holds it), or the
	 * mutex path used the lane's slot (@laned). */
	bool laned;
	bool fast;
	uint8_t lane;
	uint32_t fast_name;
	uint32_t fast_ngen;
	/* wlk_lock_on_stolen(), under m->amu */
	struct cds_list_head watch;
	bool watched;
	wlk_stolen_cb on_stolen;
	void *stolen_arg;
	size_t name_len;
	char name[]; /* name_len bytes + NUL */
};

/* struct wlk_signal: AbortController/AbortSignal. */
struct wlk_signal {
	int reason;    /* [A] 0 until aborted */
	uint32_t word; /* futex: bumped on abort */
	int efd;       /* [A] eventfd for event loops (async.c), or -1 */
};

/* A doorbell (doorbell.c): its eventfd, and a socket as the fallback. */
struct wlk__bell {
	int efd, sock;
	uint64_t id;  /* the socket's address */
	uint64_t key; /* the eventfd's eventfd-id + 1 (0: unknown) */
};

/* Where another client's doorbell is, copied from its slot. */
struct wlk__bell_to {
	uint64_t id;
	uint64_t key;
	uint32_t pid, fd;
	uint32_t client, client_gen;
};

/* Waiters to wake once the segment mutex is released. */
struct wlk__wake {
	uint32_t self1; /* 1 + the caller's own request: never woken; 0: none */
	uint32_t n;
	bool sweep; /* more than WLK_WAKE_BATCH: wake every held request */
	uint32_t idx[WLK_WAKE_BATCH];
	/* Reaped agents whose lifelines this thread owns until the flush. */
	uint32_t n_reaped;
	uint32_t reaped[WLK_REAP_BATCH];
	/* Doorbells of clients whose requests changed (async.c). */
	uint32_t n_bells;
	bool bell_sweep; /* more than WLK_WAKE_BATCH: ring every doorbell */
	struct wlk__bell_to bells[WLK_WAKE_BATCH];
};

/* Typed access to the tables. Callers bound the index first. */
static inline struct wlk_seg_agent *wlk__agent(const struct wlk__bucket *b,
					       uint32_t i)
{
	return (struct wlk_seg_agent *)(b->base + b->geo.off_agents) + i;
}

static inline struct wlk_seg_client *wlk__client(const struct wlk__bucket *b,
						 uint32_t i)
{
	return (struct wlk_seg_client *)(b->base + b->geo.off_clients) + i;
}

/* Where client @ci's doorbell is, copied from its slot @c. */
static inline struct wlk__bell_to wlk__bell_of(const struct wlk_seg_client *c,
					       uint32_t ci)
{
	return (struct wlk__bell_to){
		.id = uatomic_read(&c->doorbell),
		.key = uatomic_read(&c->bell_key),
		.pid = uatomic_read(&c->pid),
		.fd = uatomic_read(&c->bell_fd),
		.client = ci,
		.client_gen = WLK_WORD_GEN(uatomic_read(&c->word)),
	};
}

static inline struct wlk_seg_name *wlk__name(const struct wlk__bucket *b,
					     uint32_t i)
{
	return (struct wlk_seg_name *)(b->base + b->geo.off_names +
				       (size_t)i * b->geo.name_stride);
}

static inline uint8_t *wlk__name_bytes(struct wlk_seg_name *n)
{
	return (uint8_t *)(n + 1);
}

static inline struct wlk_seg_request *wlk__req(const struct wlk__bucket *b,
					       uint32_t i)
{
	return (struct wlk_seg_request *)(b->base + b->geo.off_requests) + i;
}

static inline uint32_t *wlk__hash_heads(const struct wlk__bucket *b)
{
	return (uint32_t *)(b->base + b->geo.off_hash);
}

/* Atomic access to slot words: release on publish, acquire on read. */
static inline uint32_t wlk__word_load(const uint32_t *w)
{
	uint32_t v = uatomic_read(w);

	cmm_smp_rmb();
	return v;
}

static inline void wlk__word_store(uint32_t *w, uint32_t v)
{
	cmm_smp_wmb();
	uatomic_set(w, v);
}

/*
 * Usage counters ([D][A] in layout.h) change only under the segment mutex,
 * so a plain load and store suffice; uatomic_set keeps the store whole for
 * readers outside the mutex (query's sizing, the inspector), without the
 * cost of a locked read-modify-write.
 */
static inline void wlk__count(uint32_t *c, int32_t d)
{
	uatomic_set(c, *c + (uint32_t)d);
}

static inline void wlk__count64(uint64_t *c, int64_t d)
{
	uatomic_set(c, *c + (uint64_t)d);
}

/* error.c */
int wlk__errno(int e) WLK_INTERNAL;

/* hash.c */
uint64_t wlk__siphash(const uint64_t key[2], const void *data,
		      size_t len) WLK_INTERNAL;
uint64_t wlk__siphash13(const uint64_t key[2], const void *data,
			size_t len) WLK_INTERNAL;

/* futex.c: the only place that makes futex system calls. */
struct wlk__waitv {
	uint32_t *word;
	uint32_t val;
};
int wlk__futex_wait(struct wlk__waitv *w, unsigned int n,
		    uint64_t deadline_ns) WLK_INTERNAL;
void wlk__futex_wake(uint32_t *word, int n) WLK_INTERNAL;
uint64_t wlk__now_ns(void) WLK_INTERNAL;

/*
 * The deadline of a request with @timeout_ns (0 = none). A timeout whose
 * deadline lies past the end of the 64-bit clock (UINT64_MAX, the natural
 * "forever") means none, rather than a sum that wraps to the past.
 */
static inline uint64_t wlk__deadline_ns(uint64_t timeout_ns)
{
	uint64_t now;

	if (!timeout_ns)
		return 0;
	now = wlk__now_ns();
	return timeout_ns > UINT64_MAX - now ? 0 : now + timeout_ns;
}
uint64_t wlk__stamp_ns(void) WLK_INTERNAL;
uint64_t wlk__realtime_ns(void) WLK_INTERNAL;

/* mutex.c: the only place that locks the segment mutex. */
int wlk__lock_until(struct wlk__bucket *b, struct wlk__wake *wake,
		    uint64_t deadline, const struct wlk_signal *sig)
	WLK_INTERNAL;
/* Without a deadline or signal: waits for the mutex as long as it takes. */
static inline int wlk__lock(struct wlk__bucket *b, struct wlk__wake *wake)
{
	return wlk__lock_until(b, wake, 0, NULL);
}
void wlk__unlock(struct wlk__bucket *b, struct wlk__wake *wake) WLK_INTERNAL;
void wlk__wake_flush(struct wlk__bucket *b, struct wlk__wake *wake)
	WLK_INTERNAL;
void wlk__wake_add(struct wlk__bucket *b, struct wlk__wake *wake, uint32_t r)
	WLK_INTERNAL;

/* robust.c */
int wlk__mutex_init(pthread_mutex_t *mu) WLK_INTERNAL;
bool wlk__mutex_sane(const pthread_mutex_t *mu) WLK_INTERNAL;
int wlk__mutex_trylock(pthread_mutex_t *mu) WLK_INTERNAL;

/*
 * A poisoned segment that processes are still attached to is replaced for
 * new openers by the next generation, named "<name>~<g>". Openers try the
 * generations in order and use the first one that is not poisoned.
 */
#define WLK_MAX_GENERATIONS 16

/* naming.c */
int wlk__check_ident(const char *s, size_t max) WLK_INTERNAL;
int wlk__bucket_key(const char *origin, const struct wlk_manager_options *o,
		    uint8_t key[WLK_KEY_BYTES], char *shm_name) WLK_INTERNAL;
void wlk__generation_name(char *dst, const char *base, unsigned int gen)
	WLK_INTERNAL;

/* token.c */
uint64_t wlk__token_mark_fd(int fd) WLK_INTERNAL;

/* segment.c */
#define WLK__SEG_BROKEN (-EBADMSG) /* header geometry does not add up */
/*
 * Fencing tokens at or above this are damage, never carried into a new
 * segment or a new name entry: it leaves 2^63 grants before a wrap, and
 * CLOCK_REALTIME in nanoseconds (where a segment's tokens start) reaches it
 * in 2262.
 */
#define WLK_TOKEN_DAMAGED (1ull << 63)
int wlk__header_check(struct wlk__bucket *b, size_t file_size) WLK_INTERNAL;
int wlk__ofd_lock(int fd, short type, off_t byte, bool wait) WLK_INTERNAL;
bool wlk__same_pidns(const struct wlk_seg_header *h) WLK_INTERNAL;
bool wlk__header_ident_eq(const struct wlk_seg_header *h, const char *origin,
			  const struct wlk_manager_options *o) WLK_INTERNAL;
int wlk__segment_attach(struct wlk__bucket *b, const char *origin,
			const struct wlk_manager_options *o) WLK_INTERNAL;
void wlk__segment_detach(struct wlk__bucket *b) WLK_INTERNAL;
int wlk__segment_perm_check(const struct wlk__bucket *b,
			    const struct wlk_manager_options *o) WLK_INTERNAL;
int wlk__segment_remove(const char *shm_name) WLK_INTERNAL;

/* registry.c */
int wlk__bucket_get(const char *origin, const struct wlk_manager_options *o,
		    struct wlk__bucket **out) WLK_INTERNAL;
void wlk__bucket_put(struct wlk__bucket *b) WLK_INTERNAL;

/* proc.c: the fork generation, bumped in the child (registry.c) */
unsigned long wlk__fork_gen(void) WLK_INTERNAL;
void wlk__fork_gen_bump(void) WLK_INTERNAL;
int wlk__thread_spawn(void *(*fn)(void *), void *arg, size_t stack)
	WLK_INTERNAL;

/* fast.c, inflate.c: the fast path (layout.h, FAST PATH) and its mutex side. */

/* A name's fast word, and what it publishes. */
static inline uint64_t wlk__fast_load(const uint64_t *f)
{
	uint64_t v = uatomic_read(f);

	cmm_smp_rmb();
	return v;
}

/* Whether name @n has neither held set nor queue. */
static inline bool wlk__name_idle(const struct wlk_seg_name *n)
{
	return n->h_head == WLK_NIL && n->q_head == WLK_NIL;
}

/*
 * Under the mutex: an idle name goes back to the fast path. Only from OFF:
 * a grant through the fast word may have put a holder there already
 * (queue.c).
 */
static inline void wlk__name_deflate(struct wlk__bucket *b, uint32_t ni)
{
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint32_t ngen = WLK_WORD_GEN(n->word);

	uatomic_cmpxchg(&n->fast, WLK_FAST(ngen, 0, 0, 0),
			WLK_FAST(ngen, 1, 0, 0));
}

/*
 * A fast operation succeeded while a query copies the bucket: the caller
 * waits for the copy (wlk__freeze_wait()), then goes on as after 0.
 */
#define WLK_FAST_FROZEN 3
void wlk__slot_unclaim(struct wlk_manager *m, struct wlk_lock *l) WLK_INTERNAL;
int wlk__fast_acquire(struct wlk_manager *m, struct wlk_lock *l,
		      bool may_wait) WLK_INTERNAL;
int wlk__fast_await(struct wlk_manager *m, struct wlk_lock *l) WLK_INTERNAL;
uint64_t wlk__token_give(struct wlk_seg_name *n, struct wlk_seg_request *r)
	WLK_INTERNAL;
int wlk__fast_release(struct wlk_lock *l) WLK_INTERNAL;
struct wlk__lane *wlk__lane_take(struct wlk_manager *m) WLK_INTERNAL;
void wlk__fast_discard(struct wlk__bucket *b, uint32_t s, uint32_t g)
	WLK_INTERNAL;
uint32_t wlk__fast_off(struct wlk__bucket *b, uint32_t ni, uint32_t *waiter)
	WLK_INTERNAL;
void wlk__fast_unclaim(struct wlk__bucket *b, uint32_t ri) WLK_INTERNAL;
int wlk__name_inflate(struct wlk__bucket *b, uint32_t ni) WLK_INTERNAL;
bool wlk__fast_waits(struct wlk__bucket *b, uint32_t ni, uint32_t ri)
	WLK_INTERNAL;
int wlk__idle_inflate(struct wlk__bucket *b) WLK_INTERNAL;
bool wlk__fast_holds(struct wlk__bucket *b, uint32_t ni, uint32_t ri)
	WLK_INTERNAL;
void wlk__stash_fill(struct wlk_manager *m) WLK_INTERNAL;
uint32_t wlk__stash_reclaim(struct wlk__bucket *b) WLK_INTERNAL;

/* table.c: slot allocation and lookup; all under the segment mutex. */
int wlk__name_find(struct wlk__bucket *b, const void *name, uint32_t len,
		   uint64_t hash, uint32_t *out) WLK_INTERNAL;
int wlk__name_new(struct wlk__bucket *b, const void *name, uint32_t len,
		  uint64_t hash, uint32_t *out) WLK_INTERNAL;
void wlk__name_put(struct wlk__bucket *b, uint32_t n) WLK_INTERNAL;
void wlk__name_settle(struct wlk__bucket *b, uint32_t n) WLK_INTERNAL;
int wlk__name_touch(struct wlk__bucket *b, uint32_t n) WLK_INTERNAL;
void wlk__idle_append(struct wlk__bucket *b, uint32_t n) WLK_INTERNAL;
void wlk__name_reset(struct wlk_seg_name *n) WLK_INTERNAL;
uint32_t wlk__req_alloc(struct wlk__bucket *b) WLK_INTERNAL;
void wlk__req_free(struct wlk__bucket *b, uint32_t r) WLK_INTERNAL;
void wlk__req_keep(struct wlk__bucket *b, uint32_t r) WLK_INTERNAL;
bool wlk__req_reclaim(struct wlk__bucket *b, uint32_t r, uint32_t word)
	WLK_INTERNAL;
int wlk__client_alloc(struct wlk__bucket *b, const char *id, size_t id_len,
		      uint64_t now, uint32_t *out) WLK_INTERNAL;
void wlk__client_free(struct wlk__bucket *b, uint32_t c) WLK_INTERNAL;
int wlk__agent_alloc(struct wlk__bucket *b, uint32_t pid, uint64_t now,
		     uint32_t *out) WLK_INTERNAL;
void wlk__agent_free(struct wlk__bucket *b, uint32_t ai, uint32_t gen)
	WLK_INTERNAL;
bool wlk__client_live(struct wlk__bucket *b, uint32_t c, uint32_t gen)
	WLK_INTERNAL;
int wlk__corrupt(struct wlk__bucket *b) WLK_INTERNAL;
uint64_t wlk__name_hash(struct wlk__bucket *b, const void *name,
			size_t len) WLK_INTERNAL;

/* queue.c and ops.c: the spec's algorithms; all under the segment mutex. */
struct wlk__enqueue {
	uint32_t client, client_gen;
	uint8_t flags; /* WLK_REQF_* */
	const void *name;
	uint32_t name_len;
	enum wlk_mode mode;
	bool if_available;
	bool steal;
	uint64_t hash; /* wlk__name_hash() of the name, by the caller */
	uint32_t own, own_gen; /* a slot the client keeps in reserve, to use
				* first; WLK_NIL: none */
	bool probed; /* the holders of an if_available miss were reaped */
};
/* wlk__request_lock(): an if_available miss, holders not yet probed. */
#define WLK_REQ_UNPROBED 2
int wlk__request_lock(struct wlk__bucket *b, const struct wlk__enqueue *e,
		      struct wlk__wake *wake, uint32_t *slot,
		      uint32_t *gen) WLK_INTERNAL;
int wlk__release_lock(struct wlk__bucket *b, uint32_t slot, uint32_t gen,
		      bool keep, struct wlk__wake *wake) WLK_INTERNAL;
int wlk__abort_request(struct wlk__bucket *b, uint32_t slot, uint32_t gen,
		       bool closing, struct wlk__wake *wake) WLK_INTERNAL;
int wlk__process_queue(struct wlk__bucket *b, uint32_t n,
		       struct wlk__wake *wake) WLK_INTERNAL;
bool wlk__head_grantable(const struct wlk_seg_name *n, uint8_t mode)
	WLK_INTERNAL;
struct wlk_seg_name *wlk__name_of(struct wlk__bucket *b,
				  struct wlk_seg_request *r,
				  uint32_t *ni) WLK_INTERNAL;
int wlk__enqueue(struct wlk__bucket *b, uint32_t ni, uint32_t ri,
		 struct wlk__wake *wake) WLK_INTERNAL;
int wlk__dequeue(struct wlk__bucket *b, struct wlk_seg_name *n,
		 uint32_t ri) WLK_INTERNAL;
int wlk__ungrant(struct wlk__bucket *b, struct wlk_seg_name *n,
		 uint32_t ri) WLK_INTERNAL;
int wlk__adopt(struct wlk__bucket *b, struct wlk_seg_name *n,
	       uint32_t ri) WLK_INTERNAL;
int wlk__adopt_waiter(struct wlk__bucket *b, struct wlk_seg_name *n,
		      uint32_t ri) WLK_INTERNAL;
int wlk__steal(struct wlk__bucket *b, struct wlk_seg_name *n, uint32_t ri,
	       struct wlk__wake *wake) WLK_INTERNAL;
void wlk__drop_client(struct wlk__bucket *b, uint32_t c, bool dead,
		      struct wlk__wake *wake) WLK_INTERNAL;
int wlk__steal_apply(struct wlk__bucket *b, uint32_t r,
		     struct wlk__wake *wake) WLK_INTERNAL;

/* doorbell.c */
int wlk__bell_open(struct wlk__bell *bl) WLK_INTERNAL;
void wlk__bell_close(struct wlk__bell *bl) WLK_INTERNAL;
void wlk__bell_ring(struct wlk__bucket *b, const struct wlk__bell_to *t)
	WLK_INTERNAL;
void wlk__bell_ring_self(const struct wlk__bell *bl) WLK_INTERNAL;
void wlk__bell_drain(const struct wlk__bell *bl, uint32_t *owed)
	WLK_INTERNAL;

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
int wlk__settle(struct wlk_manager *m, struct wlk_lock *l, bool *got)
	WLK_INTERNAL;
int wlk__release_slot(struct wlk__bucket *b, uint32_t slot, uint32_t gen,
		      bool keep) WLK_INTERNAL;
int wlk__give_up(struct wlk__bucket *b, uint32_t slot, uint32_t gen,
		 bool closing) WLK_INTERNAL;
int wlk__dropped(struct wlk_manager *m) WLK_INTERNAL;

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
int wlk__freeze_wait(struct wlk__bucket *b) WLK_INTERNAL;

/* handle.c */
struct wlk_lock *wlk__lock_new(struct wlk_manager *m, const char *name,
			       size_t len, enum wlk_mode mode) WLK_INTERNAL;
void wlk__lock_free(struct wlk_lock *l) WLK_INTERNAL;

/* reap.c, for async_pid.c */
bool wlk__blockers_live(struct wlk__bucket *b, uint32_t ri,
			struct wlk__wake *wake, uint32_t *agents,
			unsigned int max, unsigned int *n) WLK_INTERNAL;

/* reap.c */
uint32_t *wlk__lifeline_word(struct wlk__bucket *b, uint32_t ai) WLK_INTERNAL;
bool wlk__agent_probe(struct wlk__bucket *b, uint32_t ai,
		      struct wlk__wake *wake) WLK_INTERNAL;
bool wlk__reap_all(struct wlk__bucket *b, struct wlk__wake *wake) WLK_INTERNAL;
int wlk__request_reaping(struct wlk__bucket *b, const struct wlk__enqueue *e,
			 struct wlk__wake *wake, uint32_t *slot,
			 uint32_t *gen) WLK_INTERNAL;
bool wlk__watch_set(struct wlk__bucket *b, uint32_t ri, struct wlk__wake *wake,
		    struct wlk__waitv *v, unsigned int max,
		    unsigned int *n) WLK_INTERNAL;

/* anchor.c */
int wlk__anchor_attach(struct wlk__bucket *b) WLK_INTERNAL;
void wlk__anchor_detach(struct wlk__bucket *b) WLK_INTERNAL;
void wlk__anchor_before_fork(void) WLK_INTERNAL;
void wlk__anchor_after_fork_parent(void) WLK_INTERNAL;
void wlk__anchor_after_fork_child(void) WLK_INTERNAL;

/* validate.c */
int wlk__validate(struct wlk__bucket *b, bool lock, wlk_violation_cb cb,
		  void *arg) WLK_INTERNAL;

/* recover.c */
int wlk__rebuild(struct wlk__bucket *b) WLK_INTERNAL;
int wlk__recover(struct wlk__bucket *b, struct wlk__wake *wake) WLK_INTERNAL;
int wlk__segment_format(struct wlk__bucket *b) WLK_INTERNAL;

/* manager.c */
bool wlk__manager_enter(struct wlk_manager *m) WLK_INTERNAL;
void wlk__manager_leave(struct wlk_manager *m) WLK_INTERNAL;
void wlk__manager_ref(struct wlk_manager *m) WLK_INTERNAL;

#endif /* WLK_INTERNAL_H */
