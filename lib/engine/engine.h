/* SPDX-License-Identifier: MIT */
/*
 * engine.h - the seam between the public API and the lock state: the
 * objects every engine shares (managers, locks, signals, asynchronous
 * requests, snapshots) and the one interface through which the API layer
 * (lib/api, lib/async) reaches an engine's state.
 *
 * An engine keeps a bucket's lock state somewhere and runs the spec's
 * algorithms over it: lib/shm keeps it in a shared-memory segment. The API
 * layer checks arguments and the manager, keeps the reference counts, the
 * clientId, the handles and the asynchronous requests' callbacks, and asks
 * the engine for the rest through struct wlk__engine. It never includes an
 * engine's headers (its include path has none), so an engine plugs in by
 * filling one struct wlk__engine and adding a line to lib/engine/select.c.
 *
 * The objects are an engine's to extend: its manager struct begins with a
 * struct wlk_manager, its lock struct with a struct wlk_lock, its snapshot
 * with a struct wlk_snapshot; the API layer allocates managers and locks
 * with the sizes the engine gives, so that the cast between the two (the
 * engine's, at offset 0) costs nothing on the uncontended path.
 */
#ifndef WLK_ENGINE_H
#define WLK_ENGINE_H

#include <pthread.h>
#include <stdlib.h>

#include "weblocks/async.h"
#include "sys.h"

struct wlk__engine;

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

/*
 * PINS. A manager's memory stays until its last reference goes: the
 * user's (dropped by wlk_manager_close()), one per call in flight, one per
 * lock handle. An engine may keep the manager for a lock itself instead
 * (struct wlk__engine's pins): the shared-memory engine's uncontended
 * acquire and release then make no reference count traffic, which is two
 * locked instructions of the eight such a pair made. Such a lock is a
 * claim of one of the manager's lanes (shm/lane.c) for as long as it
 * exists; close turns what the engine keeps into references (seal), and
 * the lock's release drops one.
 *
 * Close runs in three steps, so that nothing drops such a reference
 * before close has counted it: CLOSING (set by the one closer: every
 * call now fails with WLK_ESTATE), the engine's pins added to refs, then
 * CLOSED with a full barrier; only a release that sees CLOSED drops a
 * reference for its lane. closed != WLK__OPEN means closed to callers.
 */
enum { WLK__OPEN = 0, WLK__CLOSING = 1, WLK__CLOSED = 2 };

/* struct wlk_manager: a client of a bucket, as every engine has it. */
struct wlk_manager {
	const struct wlk__engine *e;
	unsigned long refs;      /* [A] user handle + locks + calls in flight
				    (PINS below) */
	unsigned long fork_gen;  /* process incarnation that opened it */
	uint32_t closed;         /* [A] WLK__OPEN, then _CLOSING, _CLOSED */
	uint32_t close_word;     /* futex: bumped when closed (the etcd
				    engine's waiters sleep on it) */
	uint32_t max_name_len;   /* the bucket's, set by the engine's open */
	char client_id[WLK_CLIENT_ID_MAX + 1];
	pthread_mutex_t amu;     /* guards the async state below */
	bool async_on;           /* the engine's async context exists */
	struct cds_list_head pending;  /* struct wlk_async, not dispatched */
	/* The same requests again, for a dispatch that looks only where a
	 * grant can be (ASYNC ORDER, below): struct wlk__agroup, one per
	 * name; and the rest, in request order. */
	struct cds_list_head groups;
	struct cds_list_head loose;
	struct cds_list_head timed;    /* those with a deadline */
	bool async_all;          /* the next dispatch looks at every one */
	uint64_t async_seq;      /* the last request's seq */
	struct cds_list_head watching; /* struct wlk_lock with on_stolen */
	const struct wlk__async_hooks *async; /* [A] set under amu with the
						 async context, never
						 cleared */
};

/* One name of a scope's handle (wlk_acquire_scope()), in byte order. */
struct wlk__lock_name {
	const char *name; /* NUL-terminated, in the handle's allocation */
	size_t len;
	uint64_t token;   /* set by the engine with the grant */
	uint32_t slot, gen; /* the engine's, for its member of the name */
};

/* struct wlk_lock: a granted request, owned by the caller. */
struct wlk_lock {
	struct wlk_manager *m;
	enum wlk_mode mode;
	uint64_t token;          /* set by the engine with the grant */
	/* wlk_lock_on_stolen(), under m->amu */
	struct cds_list_head watch;
	bool watched;
	wlk_stolen_cb on_stolen;
	void *stolen_arg;
	/* A scope's names (@n_scope of them, at least two), or NULL for a
	 * single name; @name is then the first, @token its token. */
	struct wlk__lock_name *scope;
	uint32_t n_scope;
	size_t name_len;
	char *name;              /* name_len bytes + NUL, after the engine's
				    part of the handle, in its allocation */
	/* It holds a reference to @m (else its engine keeps @m for it:
	 * PINS); set by the API layer, or by the engine (wlk__lock_count()).
	 */
	bool counted;
};

/* struct wlk_signal: AbortController/AbortSignal. */
struct wlk_signal {
	int reason;    /* [A] 0 until aborted */
	uint32_t word; /* futex: bumped on abort */
	int efd;       /* [A] eventfd for event loops (async.c), or -1 */
};

/*
 * ASYNC ORDER. The spec grants the requests queued on one name in the
 * order they were made, but for a steal (granted at once). So of one
 * manager's plain requests on a name (no steal, no if_available, not a
 * scope) only the first not yet settled can be granted next, and then
 * the next one: a dispatch after a grant looks at the first of each
 * name's group, and further only while they completed, and at each
 * loose request (the others). What completes a request out of that
 * order - its signal, its deadline, a cancel, a blocker's death, a
 * repair - makes the next dispatch look at every request (the engine's
 * async_drain() says so, or m->async_all), and so does a dispatch that
 * found nothing in order. The cost of a dispatch is then the number of
 * names, loose requests and completions, not of requests waiting.
 */
struct wlk__agroup {
	struct cds_list_head link; /* in m->groups */
	struct cds_list_head reqs; /* struct wlk_async, in request order */
	size_t len;
	char name[];               /* len bytes + NUL */
};

/* struct wlk_async: a request made by wlk_request_async(). */
struct wlk_async {
	struct cds_list_head link; /* in m->pending, under m->amu */
	struct cds_list_head glink; /* in its group's reqs, or m->loose */
	struct wlk__agroup *group;  /* or NULL: loose */
	struct cds_list_head tlink; /* in m->timed if it has a deadline */
	uint64_t seq;               /* request order in its manager */
	struct wlk_manager *m;
	struct wlk_lock *l; /* handed to the callback when granted */
	wlk_granted_cb cb;
	void *arg;
	struct wlk_signal *sig;
	uint64_t deadline;
	bool cancel;
	bool settled; /* completed: the callback is owed, with status */
	int status;
};

/* struct wlk_snapshot: what wlk_query() returns; an engine's snapshot
 * begins with one, and frees itself. */
struct wlk_snapshot {
	struct wlk_lock_info *held;
	struct wlk_lock_info *pending;
	size_t n_held;
	size_t n_pending;
	void (*free)(struct wlk_snapshot *s);
};

/*
 * struct wlk__engine - what an engine does for the API layer.
 *
 * Every call gets objects the API layer has checked: a manager not closed
 * (except close and free), of this engine, in the process that opened it
 * (never a fork child's inherited copy), held by a reference for the call;
 * options read through the size rule (never NULL); names of at most
 * m->max_name_len bytes, not starting with '-'. Results are 0 or a
 * negative library code, as the public calls return them, and an error
 * leaves nothing queued or held.
 */
struct wlk__engine {
	const char *name;
	size_t manager_size; /* its manager struct, at least the base */
	size_t lock_size;    /* its lock struct, at least the base */

	/* Become a client of @origin's bucket: the engine's part of @m
	 * (zeroed, the base filled but for max_name_len) is set up. */
	int (*open)(struct wlk_manager *m, const char *origin,
		    const struct wlk_manager_options *o);
	/* wlk_manager_close(), after m->closed was set and m->close_word
	 * woken: drop the client, its locks and its requests. */
	void (*close)(struct wlk_manager *m);
	/* The last reference went: let go of the bucket. */
	void (*free)(struct wlk_manager *m);
	/*
	 * PINS: how many locks at most the engine keeps the manager for
	 * itself (0: every lock handle holds a reference, taken by the API
	 * layer). With pins, a blocking acquire comes without a reference
	 * (l->counted false), and the engine takes one (wlk__lock_count())
	 * before anything that is not its uncontended path.
	 */
	unsigned int pins;
	/* wlk_manager_close(), in the process that opened @m or a fork
	 * child, with @m CLOSED and pins references added: drop one for each
	 * pin the engine does not hold, and from now on drop one when a
	 * lock it keeps @m for goes. Process memory only. */
	void (*seal)(struct wlk_manager *m);
	/* wlk_release() of lock @l in a fork child (inherited: the parent's):
	 * let go of what the engine keeps in process memory for it, touch
	 * nothing shared. May drop @l's pin (the last reference). NULL: none. */
	void (*forget)(struct wlk_lock *l);
	/* wlk_bucket_remove(). */
	int (*remove)(const char *origin, const struct wlk_manager_options *o);

	/* wlk_acquire(): request @l's name (or, with l->scope, its names
	 * at once; an engine without scopes returns WLK_ENOTSUPPORTED),
	 * wait for the grant. 0 with
	 * *@held true (granted: l->token set) or false (an if_available
	 * miss), or an error. A new handle comes with its base set and the
	 * engine's part uninitialised (here and in async_request): one
	 * indirect call less on the uncontended path. */
	int (*acquire)(struct wlk_manager *m, struct wlk_lock *l,
		       const struct wlk_options *o, bool *held);
	/* wlk_release(): 0, WLK_ESTOLEN, WLK_ESTATE, WLK_ECORRUPT, ... */
	int (*release)(struct wlk_lock *l);
	bool (*stolen)(const struct wlk_lock *l);
	/* wlk_query(), wlk_manager_validate(). */
	int (*query)(struct wlk_manager *m, struct wlk_snapshot **out);
	int (*validate)(struct wlk_manager *m, wlk_violation_cb cb,
			void *arg);

	/*
	 * The async path. All under m->amu. async_open() makes the context
	 * once (m->async_on then); async_fd() is the manager's descriptor,
	 * readable whenever a pending request may have completed, a lock
	 * been stolen, or the engine ring()s it; async_watch_fd() makes it
	 * readable when @fd (an abort signal's eventfd) is.
	 */
	int (*async_open)(struct wlk_manager *m);
	int (*async_fd)(struct wlk_manager *m);
	int (*async_watch_fd)(struct wlk_manager *m, int fd);
	void (*async_ring)(struct wlk_manager *m);
	/* Queue @r (r->l, r->sig, r->deadline set; on m->pending). 0:
	 * queued, or settled at once, never granted (r->settled, r->status
	 * 0 for an if_available miss); or an error, nothing queued. The
	 * API layer frees the handle of a request settled at once, or
	 * settled with a status. */
	int (*async_request)(struct wlk_manager *m, struct wlk_async *r,
			     const struct wlk_options *o);
	/* Empty the descriptor's sources before the requests are looked
	 * at. Return: true if only grants can have come since the last
	 * drain (ASYNC ORDER), false if anything else may have. */
	bool (*async_drain)(struct wlk_manager *m);
	/* Settle @r if it completed, or give it up for @why (a cancel, its
	 * signal's reason, WLK_ETIMEDOUT) if not 0: r->settled, r->status
	 * and, granted, r->l->token. */
	void (*async_settle)(struct wlk_manager *m, struct wlk_async *r,
			     int why);
	/* After a dispatch: wake the descriptor by the earliest deadline of
	 * a pending request, and watch what they wait for. */
	void (*async_arm)(struct wlk_manager *m);
	/* The manager is closing, its requests settled: free the context. */
	void (*async_close)(struct wlk_manager *m);
};

/*
 * wlk__manager_unref() - drop a reference to @m; the last one frees it
 * (the engine's part first). Inline: the API layer drops the references
 * it takes, an engine those it keeps for its locks (PINS).
 */
static inline void wlk__manager_unref(struct wlk_manager *m)
{
	if (uatomic_sub_return(&m->refs, 1))
		return;
	m->e->free(m);
	pthread_mutex_destroy(&m->amu);
	free(m);
}

/* wlk__lock_count() - @l, kept by its engine so far, takes a reference to
 * its manager (PINS): before the engine does more than the uncontended
 * path for it. */
static inline void wlk__lock_count(struct wlk_lock *l)
{
	uatomic_inc(&l->m->refs);
	l->counted = true;
}

/* select.c: the engine of a bucket, by its options. */
const struct wlk__engine *
wlk__engine_for(const char *origin,
		const struct wlk_manager_options *o) WLK_INTERNAL;

/* The environment variable that names a backend for managers whose
 * options name none (weblocks.h, struct wlk_manager_options). */
#define WLK_BACKEND_ENV "WEBLOCKS_BACKEND"

/* The engines (select.c names them). */
extern const struct wlk__engine wlk__shm_engine WLK_INTERNAL;
#ifdef WLK_HAVE_ETCD
extern const struct wlk__engine wlk__etcd_engine WLK_INTERNAL;
#endif

#endif /* WLK_ENGINE_H */
