/* SPDX-License-Identifier: MIT */
/*
 * weblocks.h - the W3C Web Locks API for cooperating Linux processes.
 *
 * OVERVIEW
 *
 * libweblocks implements navigator.locks (W3C Web Locks, Working Draft,
 * sections 2-4) for processes on one Linux machine. A program opens the lock
 * manager of an origin bucket with wlk_manager_open() and requests named
 * locks, exclusive or shared, with wlk_request() (callback form) or
 * wlk_acquire()/wlk_release() (handle form). All managers opened for the same
 * (origin, bucket, partition) by processes of the same user share one lock
 * state. That state lives in one POSIX shared-memory segment per bucket,
 * guarded by a robust process-shared mutex; waiters sleep on futex words and
 * are woken by whoever grants them. There is no broker process.
 *
 * How the specification maps to C:
 *
 *  - A promise becomes a blocking call. wlk_request() returns when the
 *    spec's "released promise" would settle; the callback is the spec's
 *    LockGrantedCallback and the lock is held while it runs (the "waiting
 *    promise" settles when it returns).
 *  - An agent is a process. A clientId belongs to one manager handle: two
 *    managers in one process are two clients (like two frames) and exclude
 *    each other.
 *  - AbortSignal is struct wlk_signal. The spec's DOMExceptions are negative
 *    WLK_E* codes; wlk_error_name() gives the DOMException name.
 *  - timeout_ns is an extension: a deadline after which a request that was
 *    not yet granted leaves the queue with WLK_ETIMEDOUT.
 *
 * Two more headers: weblocks/async.h, requests that complete through a
 * pollable descriptor, for event loops; weblocks/inspect.h, read-only
 * inspection of segments (what tools/shm-inspect uses).
 *
 * Scheduling follows the spec exactly. Each name has a FIFO queue. A request
 * is grantable when it is first in its queue and, for an exclusive request,
 * no lock is held on the name, or, for a shared request, no exclusive lock
 * is held on it. Grants happen when the state changes (release, abort,
 * steal, close): when wlk_release() returns, the requests it unblocked are
 * already in the held set. A shared request queued behind a queued exclusive
 * one waits, even while only shared locks are held, so writers never starve.
 * Locks are not re-entrant.
 *
 * CONVENTIONS
 *
 * Functions that can fail return 0 or a negative error code: one of the
 * WLK_E* codes below, or a negated errno value. Out-parameters are written
 * only on success. A call that fails leaves nothing queued or held.
 *
 * TERMINATION MODEL (the spec's "terminate remaining locks and requests")
 *
 *  - A context ends with wlk_manager_close(): its locks are released, its
 *    requests dropped, and the requests behind them granted.
 *  - A process ends by dying: any signal (SIGKILL included), a crash,
 *    exit() or _exit() without closing, or exec(). Its locks are released
 *    and its queued requests dropped without anyone calling anything. A
 *    process attached to a bucket is an agent with a lifeline, a robust
 *    mutex in the segment that a library-owned thread (the anchor: one per
 *    process, all signals blocked, started at the first open) keeps locked.
 *    Requests blocked behind a process sleep on its lifeline too, so the
 *    kernel wakes them when it dies; they take over its slot, release its
 *    locks and grant the queue. Measured failover (holder SIGKILLed ->
 *    blocked waiter in another process granted): see README and
 *    bench/failover. A request waiting behind more than 32 other processes
 *    also re-checks every 100 ms. Locks of a dead process that nobody waits
 *    for are released by the next request that would wait for them, by
 *    wlk_query(), or by the next process opening the bucket.
 *  - Alive: a process stopped (SIGSTOP) or slow keeps its locks; the spec's
 *    remedy is steal. A thread that exits is not a process that died.
 *  - fork(): the child inherits no locks and no managers; inherited handles
 *    return WLK_ESTATE and never block. The parent's death is detected even
 *    while its children live. A manager opened in the child works.
 *  - A process killed inside the segment's critical section leaves the
 *    robust mutex owner-dead: the next locker rebuilds every derived
 *    structure from the per-slot state words, redoes an interrupted steal,
 *    reaps dead agents and wakes every waiter. A segment that cannot be
 *    repaired is marked poisoned (its users get WLK_ECORRUPT) and new
 *    openers get a fresh generation of it.
 *  - Not supported: processes in another PID namespace (refused at open
 *    with WLK_ESECURITY: robust mutex owners are namespace-local thread
 *    ids), other users (WLK_ESECURITY), checkpoint/restore (CRIU), and more
 *    than 1024 buckets open at once in one process (WLK_EFULL; the kernel
 *    recovers at most 2048 robust mutexes of a dying thread). The library
 *    is never unloaded (it is linked -z nodelete: the anchor runs its code).
 *
 * CAVEATS
 *
 *  - Only processes of the same effective user share a bucket; the segment is
 *    created mode 0600 and a segment owned by another user, or with looser
 *    permissions than asked, is refused (WLK_ESECURITY). Anyone who can
 *    write the segment can disturb the lock state of every process using it.
 *  - The API is thread-safe but not async-signal-safe, except
 *    wlk_signal_abort() and wlk_signal_aborted().
 */
#ifndef WEBLOCKS_H
#define WEBLOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && defined(WLK_BUILDING_LIBRARY)
#define WLK_EXPORT __attribute__((__visibility__("default")))
#else
#define WLK_EXPORT
#endif

#if defined(__GNUC__)
#define WLK_WARN_UNUSED __attribute__((__warn_unused_result__))
#else
#define WLK_WARN_UNUSED
#endif

/* Library version: major changes break the API or ABI. */
#define WLK_VERSION_MAJOR 0
#define WLK_VERSION_MINOR 1
#define WLK_VERSION_PATCH 0

/*
 * WLK_ERRNO_MAP(XX) - the error table: XX(name, value, error name, message),
 * where the error name is the DOMException name where the spec has one and
 * the symbol otherwise. It is the single source of the enum below, of
 * wlk_strerror() and of wlk_error_name(). Codes that equal a negated errno
 * value keep that value so they compare equal to -errno.
 */
#define WLK_ERRNO_MAP(XX)                                                      \
	XX(EINVAL, -22, "TypeError",                                           \
	   "invalid argument")                                                 \
	XX(ENAMETOOLONG, -36, "WLK_ENAMETOOLONG",                                            \
	   "name longer than the bucket allows")                               \
	XX(ETIMEDOUT, -110, "TimeoutError",                                    \
	   "timed out before the lock was granted")                            \
	XX(ENOTSUPPORTED, -3001, "NotSupportedError",                          \
	   "option combination or name not supported by the specification")    \
	XX(EABORTED, -3002, "AbortError",                                      \
	   "request aborted before the lock was granted")                      \
	XX(ESTOLEN, -3003, "AbortError",                                       \
	   "lock was stolen by another request")                               \
	XX(ESTATE, -3004, "InvalidStateError",                                 \
	   "manager closed, or handle used after fork")                        \
	XX(ESECURITY, -3005, "SecurityError",                                  \
	   "opaque origin, or segment with a foreign owner or loose permissions") \
	XX(EFULL, -3006, "QuotaExceededError",                                 \
	   "a table of the bucket's segment is full")                          \
	XX(ECORRUPT, -3007, "WLK_ECORRUPT",                                              \
	   "segment failed validation or repair")                              \
	XX(EFORMAT, -3008, "WLK_EFORMAT",                                               \
	   "segment has an incompatible layout version")

/* The error codes. */
enum wlk_errno {
#define WLK__ERR_ENUM(name, value, dom, msg) WLK_##name = (value),
	WLK_ERRNO_MAP(WLK__ERR_ENUM)
#undef WLK__ERR_ENUM
};

/* Lock modes (LockMode). */
enum wlk_mode {
	WLK_EXCLUSIVE = 0,
	WLK_SHARED = 1,
};

/* Pass as a name_len to use strlen(name). */
#define WLK_NUL_TERMINATED ((size_t)-1)

/* Limits on identifiers (bytes, not counting a terminating NUL). */
#define WLK_ORIGIN_MAX 1024
#define WLK_BUCKET_MAX 255
#define WLK_PARTITION_MAX 255
#define WLK_CLIENT_ID_MAX 127

/* Table sizes a new segment gets when the options leave them 0. */
#define WLK_DEFAULT_MAX_NAMES 1024
#define WLK_DEFAULT_MAX_REQUESTS 4096
#define WLK_DEFAULT_MAX_NAME_LEN 1024
/* Upper bounds accepted for the options above. */
#define WLK_LIMIT_MAX_NAMES (1u << 20)
#define WLK_LIMIT_MAX_REQUESTS (1u << 22)
#define WLK_LIMIT_MAX_NAME_LEN 65536

struct wlk_manager; /* navigator.locks of one context: a bucket + a clientId */
struct wlk_lock;    /* a granted lock */
struct wlk_signal;  /* AbortController + AbortSignal */
struct wlk_snapshot; /* result of wlk_query() */

/**
 * struct wlk_manager_options - where a manager lives and who it is.
 * @bucket:       storage bucket name; NULL means "default". At most
 *                WLK_BUCKET_MAX bytes.
 * @partition:    storage partition, a separate user agent (profile, private
 *                session); NULL means "". At most WLK_PARTITION_MAX bytes.
 * @client_id:    the clientId reported by wlk_query(); NULL generates one
 *                that is unique across processes. 1..WLK_CLIENT_ID_MAX
 *                bytes. It is a label: two managers given the same string
 *                are still two clients.
 * @permissions:  file mode of the segment, a subset of 0600 | 0060 | 0006
 *                (read/write bits only); 0 means 0600. Every opener must
 *                ask for the same or looser permissions than the segment has.
 * @max_names:    capacity of the name table; 0 = WLK_DEFAULT_MAX_NAMES.
 * @max_requests: capacity of the request table (held + pending);
 *                0 = WLK_DEFAULT_MAX_REQUESTS.
 * @max_name_len: longest lock name in bytes; 0 = WLK_DEFAULT_MAX_NAME_LEN.
 *
 * All-zero (or a NULL pointer) gives the defaults. The three capacities are
 * used only by the process that creates the segment; later openers get the
 * existing geometry.
 */
struct wlk_manager_options {
	const char *bucket;
	const char *partition;
	const char *client_id;
	unsigned int permissions;
	uint32_t max_names;
	uint32_t max_requests;
	uint32_t max_name_len;
};

/**
 * wlk_manager_open() - Obtain the lock manager of an origin bucket.
 * @origin: serialized origin, such as "https://example.com"; compared byte
 *          for byte, 1..WLK_ORIGIN_MAX bytes. "null" (an opaque origin) is
 *          refused, as the spec requires.
 * @o:      options, or NULL for the defaults.
 * @out:    receives the manager; written only on success.
 *
 * Creates the bucket's segment if it does not exist, or attaches to it, and
 * registers a new client (clientId) in it. Managers of the same bucket in one
 * process share one mapping of the segment.
 *
 * Context: thread-safe; may sleep briefly (waits for a concurrent creator to
 * finish initialising the segment); not async-signal-safe.
 *
 * Return: 0 on success, or
 * * %WLK_EINVAL - @origin or @out is NULL, @origin is empty, an option is out
 *   of range, or a string contains characters not allowed.
 * * %WLK_ESECURITY - @origin is "null", or the segment is owned by another
 *   user or has looser permissions than asked for.
 * * %WLK_ENAMETOOLONG - @origin, bucket, partition or client_id too long.
 * * %WLK_EFULL - the segment's client or agent table is full, or this
 *   process has 1024 buckets open.
 * * %WLK_EFORMAT - the segment was made by an incompatible build (pointer
 *   size, mutex layout) of the library.
 * * %WLK_ECORRUPT - the segment failed validation.
 * * -ENOMEM, -ENOSPC (no room in /dev/shm), -EMFILE and other -errno
 *   values from shm_open(), ftruncate(), mmap() or fcntl().
 */
WLK_EXPORT WLK_WARN_UNUSED int
wlk_manager_open(const char *origin, const struct wlk_manager_options *o,
		 struct wlk_manager **out);

/**
 * wlk_manager_close() - Terminate a context: drop its locks and requests.
 * @m: the manager, or NULL (no-op).
 *
 * Releases every lock the manager holds (the spec's "terminate remaining
 * locks and requests"), drops its queued requests, and grants and wakes the
 * requests that were waiting behind them. Threads blocked in wlk_request()
 * or wlk_acquire() on @m return %WLK_ESTATE. Lock handles of @m that are
 * still outstanding stay valid objects: wlk_release() on them frees them and
 * returns %WLK_ESTATE. Memory is freed when the last thread and handle are
 * done with it.
 *
 * Context: thread-safe with respect to other calls on @m that are already
 * in progress; @m must not be used by new calls once this returns. May sleep
 * briefly. In a fork child, closing an inherited manager only frees the
 * child's copy and touches no shared state.
 */
WLK_EXPORT void wlk_manager_close(struct wlk_manager *m);

/**
 * wlk_manager_client_id() - The manager's clientId.
 * @m: the manager.
 *
 * Context: thread-safe; never sleeps.
 *
 * Return: a NUL-terminated string owned by @m, valid until it is closed, or
 * NULL if @m is NULL.
 */
WLK_EXPORT const char *wlk_manager_client_id(const struct wlk_manager *m);

/**
 * wlk_bucket_remove() - Remove a bucket's segment from /dev/shm.
 * @origin: as for wlk_manager_open().
 * @o:      only @bucket and @partition are used; NULL for the defaults.
 *
 * Unlinks the segment so that the next opener creates a fresh one. A bucket
 * that some process (this one included) still has open is left alone.
 *
 * Context: thread-safe; not async-signal-safe.
 *
 * Return: 0 on success, or
 * * %WLK_EINVAL, %WLK_ESECURITY, %WLK_ENAMETOOLONG - as for
 *   wlk_manager_open().
 * * -ENOENT - there is no such segment.
 * * -EBUSY - a process has the bucket open.
 * * other -errno values from shm_open() or fcntl().
 */
WLK_EXPORT int wlk_bucket_remove(const char *origin,
				 const struct wlk_manager_options *o);

/**
 * struct wlk_options - LockOptions.
 * @mode:         %WLK_EXCLUSIVE (default) or %WLK_SHARED.
 * @if_available: grant only if the lock can be granted at once; otherwise
 *                the callback gets NULL (wlk_acquire(): *out = NULL). Such a
 *                request never queues and never shows in "pending".
 * @steal:        release every held lock on the name (its holders see
 *                %WLK_ESTOLEN) and grant this request at once, ahead of the
 *                queue. Exclusive mode only.
 * @signal:       abort signal, or NULL.
 * @timeout_ns:   extension: give up with %WLK_ETIMEDOUT if not granted
 *                within this many nanoseconds (CLOCK_MONOTONIC); 0 waits
 *                without limit.
 *
 * All-zero (or a NULL pointer) gives the defaults.
 */
struct wlk_options {
	enum wlk_mode mode;
	bool if_available;
	bool steal;
	struct wlk_signal *signal;
	uint64_t timeout_ns;
};

/**
 * typedef wlk_callback - LockGrantedCallback.
 * @lock: the granted lock, or NULL when if_available could not grant it.
 * @arg:  the argument given to wlk_request().
 *
 * Return: any value; wlk_request() passes it through unchanged.
 */
typedef int (*wlk_callback)(struct wlk_lock *lock, void *arg);

/**
 * wlk_request() - Request a lock and run a callback while holding it.
 * @m:        the manager.
 * @name:     lock name: any bytes (empty, embedded NUL and non-UTF-8 are all
 *            valid and distinct), at most the bucket's max_name_len bytes,
 *            not starting with '-'.
 * @name_len: length of @name in bytes, or %WLK_NUL_TERMINATED.
 * @o:        options, or NULL for the defaults.
 * @cb:       run once with the lock held (or NULL for an if_available miss).
 * @arg:      passed to @cb.
 *
 * LockManager.request(name, options, callback). Validates in the spec's
 * order, queues the request behind earlier requests for @name, blocks until
 * it is granted, runs @cb, releases the lock and returns what @cb returned.
 * The lock handle passed to @cb is valid only during the call; @cb must not
 * wlk_release() it.
 *
 * If @o->signal is aborted, or the timeout passes, before @cb starts, the
 * request leaves the queue (the requests behind it may be granted) and the
 * abort reason or %WLK_ETIMEDOUT is returned; @cb does not run. As in the
 * spec, a signal found aborted when the lock has been granted but @cb has not
 * started yet also releases the lock and returns the reason. Once @cb has
 * started, the signal and the timeout are ignored.
 *
 * Context: thread-safe; may sleep; not async-signal-safe. Thread
 * cancellation is disabled while waiting so that a cancelled thread never
 * leaves a request queued. A request that has to wait spins first, for up
 * to 20 us, when more than one CPU is online: a request without timeout or
 * signal that finds the name held by one uncontended holder spins on the
 * name's entry, and that holder's release hands it the lock directly.
 *
 * Return: @cb's return value if @cb ran, except %WLK_ESTOLEN if the lock was
 * stolen while @cb ran and %WLK_ESTATE if the manager was closed while @cb
 * ran (the lock was released under it). Otherwise a negative code, and @cb
 * did not run:
 * * %WLK_EINVAL - @m, @name or @cb is NULL, or @o->mode is not a mode.
 * * %WLK_ESTATE - @m is closed or was inherited through fork().
 * * %WLK_ENOTSUPPORTED - @name starts with '-'; or steal is combined with
 *   if_available or %WLK_SHARED; or a signal or a timeout is combined with
 *   steal or if_available.
 * * the signal's abort reason - the signal was already aborted, or fired
 *   before @cb started.
 * * %WLK_ENAMETOOLONG - @name is longer than the bucket's max_name_len.
 * * %WLK_ETIMEDOUT - @o->timeout_ns passed before the grant.
 * * %WLK_EFULL - the name or request table is full; nothing changed.
 * * %WLK_ECORRUPT - the segment failed validation or repair.
 * * -ENOMEM - out of memory.
 */
WLK_EXPORT int wlk_request(struct wlk_manager *m, const char *name,
			   size_t name_len, const struct wlk_options *o,
			   wlk_callback cb, void *arg);

/**
 * wlk_acquire() - Request a lock and return it as a handle.
 * @m:        the manager.
 * @name:     as for wlk_request().
 * @name_len: as for wlk_request().
 * @o:        options, or NULL for the defaults.
 * @out:      receives the lock; NULL on an if_available miss. Written only
 *            on success.
 *
 * The handle form of wlk_request(): the lock is held until wlk_release().
 * The signal and the timeout act until this function returns.
 *
 * Context: as for wlk_request().
 *
 * Return: 0 on success (with *@out NULL on an if_available miss), or the
 * negative codes listed for wlk_request().
 */
WLK_EXPORT WLK_WARN_UNUSED int
wlk_acquire(struct wlk_manager *m, const char *name, size_t name_len,
	    const struct wlk_options *o, struct wlk_lock **out);

/**
 * wlk_release() - Release a lock and free its handle.
 * @lock: a handle from wlk_acquire(), or NULL (no-op, returns 0).
 *
 * Removes the lock from the held set and grants the requests that become
 * grantable; they are in the held set when this returns. The handle is
 * freed in every case.
 *
 * Context: thread-safe; never sleeps for another lock holder (only for the
 * segment mutex). May be called from any thread of the process that
 * acquired the lock.
 *
 * Return: 0 on success, or
 * * %WLK_ESTOLEN - the lock had been stolen; nothing else was released.
 * * %WLK_ESTATE - the manager was closed (which released the lock already),
 *   or the handle was inherited through fork() (nothing was released).
 * * %WLK_ECORRUPT - the segment failed validation or repair.
 */
WLK_EXPORT int wlk_release(struct wlk_lock *lock);

/**
 * wlk_lock_name() - Lock.name.
 * @lock: the lock.
 * @len:  receives the name's length in bytes, or NULL.
 *
 * Context: thread-safe; never sleeps.
 *
 * Return: the name's bytes, exactly as requested, followed by a NUL that is
 * not part of the name; owned by @lock.
 */
WLK_EXPORT const char *wlk_lock_name(const struct wlk_lock *lock, size_t *len);

/**
 * wlk_lock_mode() - Lock.mode.
 * @lock: the lock.
 *
 * Context: thread-safe; never sleeps.
 *
 * Return: %WLK_EXCLUSIVE or %WLK_SHARED.
 */
WLK_EXPORT enum wlk_mode wlk_lock_mode(const struct wlk_lock *lock);

/**
 * wlk_lock_stolen() - Whether another request stole this lock.
 * @lock: the lock.
 *
 * The spec's released promise rejecting with AbortError. A stolen lock is no
 * longer in the held set; its holder should stop using the resource.
 *
 * Context: thread-safe; never sleeps; a single atomic load.
 *
 * Return: true if the lock was stolen.
 */
WLK_EXPORT bool wlk_lock_stolen(const struct wlk_lock *lock);

/**
 * wlk_lock_token() - Fencing token of a grant.
 * @lock: the lock.
 *
 * Every grant of a name gets a token greater than every earlier grant's of
 * the same name in the bucket, so the resource the name guards can refuse
 * writes from a holder that lost its lock (stolen, or released by close) to
 * a later one. Tokens of different names are not ordered with each other
 * (each name counts on its own, which keeps names independent).
 *
 * Context: thread-safe; never sleeps.
 *
 * Return: the token, at least 1.
 */
WLK_EXPORT uint64_t wlk_lock_token(const struct wlk_lock *lock);

/**
 * wlk_signal_new() - Create an abort signal (AbortController).
 * @out: receives the signal; written only on success.
 *
 * One signal may be passed to any number of requests, in any managers and
 * threads of the process; aborting it aborts all of those still waiting.
 *
 * Context: thread-safe.
 *
 * Return: 0, %WLK_EINVAL if @out is NULL, or -ENOMEM.
 */
WLK_EXPORT WLK_WARN_UNUSED int wlk_signal_new(struct wlk_signal **out);

/**
 * wlk_signal_abort() - Abort (AbortController.abort(reason)).
 * @s:      the signal.
 * @reason: the value aborted requests return; a negative code, or 0 for
 *          %WLK_EABORTED. Positive values are replaced by %WLK_EABORTED.
 *
 * The first call sets the reason; later calls do nothing. Requests using @s
 * that are still waiting leave their queues and return @reason.
 *
 * Context: any thread; async-signal-safe (an atomic store and a futex wake).
 */
WLK_EXPORT void wlk_signal_abort(struct wlk_signal *s, int reason);

/**
 * wlk_signal_aborted() - AbortSignal.aborted.
 * @s: the signal.
 *
 * Context: any thread; async-signal-safe.
 *
 * Return: true once wlk_signal_abort() has been called.
 */
WLK_EXPORT bool wlk_signal_aborted(const struct wlk_signal *s);

/**
 * wlk_signal_free() - Free a signal.
 * @s: the signal, or NULL.
 *
 * Context: no request may still be using @s.
 */
WLK_EXPORT void wlk_signal_free(struct wlk_signal *s);

/**
 * struct wlk_lock_info - LockInfo.
 * @name:      the name's bytes, NUL-terminated after @name_len bytes.
 * @name_len:  length of @name in bytes.
 * @mode:      %WLK_EXCLUSIVE or %WLK_SHARED.
 * @client_id: clientId of the requesting manager.
 * @pid:       process id of the requesting manager, in its PID namespace.
 */
struct wlk_lock_info {
	const char *name;
	size_t name_len;
	enum wlk_mode mode;
	const char *client_id;
	pid_t pid;
};

/**
 * wlk_query() - Snapshot the lock state of the manager's bucket.
 * @m:   the manager.
 * @out: receives the snapshot; written only on success.
 *
 * LockManager.query(): the held locks (one entry per holder, so each shared
 * holder has its own) and the pending requests of the whole bucket, from any
 * manager of it. Pending entries of one name are in request order; the order
 * across names and of held entries is unspecified.
 *
 * The snapshot is atomic across names: it is the state of the whole bucket
 * at one instant, with respect to every grant and release of every process,
 * those of the uncontended fast path included (a process that always takes
 * Y before Z is never shown holding Z alone). The copy takes time in
 * proportion to the bucket's name capacity (max_names); while it runs, the
 * bucket's segment mutex is held, and an acquire or release that completes
 * meanwhile, even one that needs no mutex otherwise, waits for the copy to
 * end before it returns, as a call that takes the mutex would (so a
 * process stopped while it copies holds up every acquire and release in
 * the bucket until it continues). When no query runs, this costs the
 * uncontended acquire and release one memory load each.
 *
 * Context: thread-safe; not async-signal-safe.
 *
 * Return: 0, or
 * * %WLK_EINVAL - @m or @out is NULL.
 * * %WLK_ESTATE - @m is closed or was inherited through fork().
 * * %WLK_ECORRUPT - the segment failed validation or repair, or its usage
 *   counters were damaged (they are rebuilt, or the segment poisoned,
 *   before it returns).
 * * -ENOMEM - out of memory.
 */
WLK_EXPORT WLK_WARN_UNUSED int wlk_query(struct wlk_manager *m,
					 struct wlk_snapshot **out);

/**
 * wlk_snapshot_held_count() - Number of held entries.
 * @s: the snapshot.
 *
 * Return: the count; 0 if @s is NULL.
 */
WLK_EXPORT size_t wlk_snapshot_held_count(const struct wlk_snapshot *s);

/**
 * wlk_snapshot_held() - One held entry.
 * @s: the snapshot.
 * @i: index, below wlk_snapshot_held_count().
 *
 * Return: the entry, owned by @s; NULL if @i is out of range.
 */
WLK_EXPORT const struct wlk_lock_info *
wlk_snapshot_held(const struct wlk_snapshot *s, size_t i);

/**
 * wlk_snapshot_pending_count() - Number of pending entries.
 * @s: the snapshot.
 *
 * Return: the count; 0 if @s is NULL.
 */
WLK_EXPORT size_t wlk_snapshot_pending_count(const struct wlk_snapshot *s);

/**
 * wlk_snapshot_pending() - One pending entry.
 * @s: the snapshot.
 * @i: index, below wlk_snapshot_pending_count().
 *
 * Return: the entry, owned by @s; NULL if @i is out of range.
 */
WLK_EXPORT const struct wlk_lock_info *
wlk_snapshot_pending(const struct wlk_snapshot *s, size_t i);

/**
 * wlk_snapshot_free() - Free a snapshot.
 * @s: the snapshot, or NULL.
 */
WLK_EXPORT void wlk_snapshot_free(struct wlk_snapshot *s);

/**
 * typedef wlk_violation_cb - receives one violated invariant.
 * @what: a one-line description, valid during the call.
 * @arg:  the argument given to wlk_manager_validate().
 */
typedef void (*wlk_violation_cb)(const char *what, void *arg);

/**
 * wlk_manager_validate() - Check every invariant of the bucket's segment.
 * @m:   the manager.
 * @cb:  called once per violation found (at most 64, then a summary
 *       line), after the segment mutex is released; or NULL.
 * @arg: passed to @cb.
 *
 * A debugging aid and the oracle of the crash tests: checks, under the
 * segment mutex, the slot states, free lists, hash chains, queues (request
 * order, nothing grantable left pending), held sets (never an exclusive
 * holder beside another), counters and cross references. Dead processes
 * that have not been reaped yet are not violations.
 *
 * Context: thread-safe; takes the segment mutex for a time linear in the
 * segment's capacity; allocates.
 *
 * Return: 0 if every invariant holds, or
 * * %WLK_ECORRUPT - at least one violation (reported through @cb).
 * * %WLK_EINVAL - @m is NULL.
 * * %WLK_ESTATE - @m is closed or was inherited through fork().
 * * -ENOMEM - out of memory.
 */
WLK_EXPORT int wlk_manager_validate(struct wlk_manager *m, wlk_violation_cb cb,
				    void *arg);

/**
 * wlk_strerror() - Describe an error code.
 * @err: a WLK_E* code or a negated errno value.
 *
 * Context: thread-safe.
 *
 * Return: a static string; "unknown error" for codes it does not know.
 */
WLK_EXPORT const char *wlk_strerror(int err);

/**
 * wlk_error_name() - Name an error code.
 * @err: a WLK_E* code or a negated errno value.
 *
 * Context: thread-safe.
 *
 * Return: a static string: the DOMException name where the spec has one
 * ("TypeError", "NotSupportedError", "AbortError", "TimeoutError",
 * "InvalidStateError", "SecurityError", "QuotaExceededError"), otherwise
 * the symbol ("WLK_ECORRUPT", "ENOMEM"); "UnknownError" for codes it does
 * not know.
 */
WLK_EXPORT const char *wlk_error_name(int err);

#ifdef __cplusplus
}
#endif

#endif /* WEBLOCKS_H */
