/* SPDX-License-Identifier: MIT */
/*
 * weblocks/async.h - asynchronous requests for event loops.
 *
 * OVERVIEW
 *
 * In the spec every request returns a promise and the lock is held while an
 * async task runs. This is that form for programs built around an event
 * loop (epoll, libuv, GLib, a game loop): wlk_request_async() returns at
 * once; when the request completes, its callback runs - on the thread that
 * calls wlk_manager_dispatch(), never on a library thread and never inside
 * wlk_request_async() itself. A granted lock stays held until the program
 * calls wlk_release(), from the callback or any later time.
 *
 * Each manager has one descriptor, wlk_manager_fd(), that becomes readable
 * when callbacks are ready. Register it with the loop for reading and call
 * wlk_manager_dispatch() when it is; dispatch drains the descriptor and
 * runs every ready callback, so the descriptor works level-triggered and
 * edge-triggered alike (with edge-triggered epoll, call dispatch once per
 * edge). The descriptor is the manager's doorbell, an eventfd: other
 * processes ring it directly when they grant, steal or drop one of its
 * requests, writing to their own copy of it, taken once with
 * pidfd_getfd(2) and kept (its eventfd-id is checked), so no thread relays
 * a grant. Where that copy cannot be had (pidfd_getfd() needs the
 * permission to ptrace-attach: another user, a non-dumpable process, Linux
 * before 5.6), the ring is an AF_UNIX datagram to an abstract address of
 * the manager, which reaches the descriptor through the watcher thread
 * below.
 *
 * Asynchronous and blocking requests, from any threads and processes, share
 * one FIFO queue per name.
 *
 * Deadlines (timeout_ns) and abort signals work as for the blocking calls,
 * and a request whose holders die is granted when the dispatcher notices
 * the death. These rarer events (a timer, the signal's own event
 * descriptor, a pidfd per blocking process, the fallback socket) sit in an
 * inner epoll instance per manager, which one library thread per process,
 * started with its first asynchronous manager, watches: when one fires,
 * the thread rings the manager's descriptor. A pidfd fires when its
 * process exits, not when it calls exec(), which ends its locks too; so a
 * second library thread, started with the first blocking process to
 * watch, sleeps on the lifelines of those processes (weblocks.h,
 * TERMINATION MODEL) and rings the descriptor within milliseconds of an
 * exit or exec, as a blocked thread would be woken. Neither runs user
 * code.
 *
 * Caveat: the fallback doorbell addresses live in the network namespace;
 * all processes of a bucket should share one (as they share a PID
 * namespace). Each process keeps copies of up to 32 (BELL_CACHE in
 * lib/format/tunables.h) other managers' doorbells open, each for as long as it
 * stays among the 32 most recently rung (a copy keeps a closed manager's
 * eventfd alive until then).
 */
#ifndef WEBLOCKS_ASYNC_H
#define WEBLOCKS_ASYNC_H

#include <weblocks.h>

#ifdef __cplusplus
extern "C" {
#endif

struct wlk_async; /* an outstanding asynchronous request */

/**
 * typedef wlk_granted_cb - An asynchronous request completed.
 * @req:    the request; it is freed when the callback returns.
 * @status: 0 when granted (@lock) or refused by if_available (@lock NULL);
 *          otherwise the abort reason (%WLK_EABORTED by default, also for
 *          wlk_async_cancel()), %WLK_ETIMEDOUT, %WLK_ESTATE (the manager
 *          was closed), or %WLK_ECORRUPT (also: a repair dropped the
 *          request while the manager was open).
 * @lock:   the granted lock, held until wlk_release(); NULL otherwise. A
 *          lock stolen before the callback runs is granted all the same:
 *          wlk_lock_stolen() is true, and wlk_release() returns
 *          %WLK_ESTOLEN.
 * @arg:    the argument given to wlk_request_async().
 */
typedef void (*wlk_granted_cb)(struct wlk_async *req, int status,
			       struct wlk_lock *lock, void *arg);

/**
 * typedef wlk_stolen_cb - A held lock was stolen (the spec's released
 * promise rejecting with AbortError).
 * @lock: the lock; still to be released with wlk_release(), which will
 *        return %WLK_ESTOLEN.
 * @arg:  the argument given to wlk_lock_on_stolen().
 */
typedef void (*wlk_stolen_cb)(struct wlk_lock *lock, void *arg);

/**
 * wlk_request_async() - Request a lock without blocking.
 * @m:        the manager.
 * @name:     as for wlk_request().
 * @name_len: as for wlk_request().
 * @o:        options, or NULL for the defaults.
 * @cb:       run once, from wlk_manager_dispatch() (or from
 *            wlk_manager_close(), with %WLK_ESTATE, or %WLK_EABORTED for
 *            a request cancelled before the close).
 * @arg:      passed to @cb.
 * @out:      receives the request handle, valid until @cb returns; or NULL.
 *
 * Queues the request as wlk_acquire() does, then returns. Even a request
 * granted at once completes through the callback, at the next dispatch.
 *
 * Context: thread-safe; never blocks on other lock holders (takes the
 * segment mutex briefly); not async-signal-safe. A process stopped inside
 * the segment's critical section holds it up (weblocks.h, TERMINATION
 * MODEL) until the request's timeout passes or its signal fires, if it has
 * either: then nothing is queued, 0 is returned, and the callback reports
 * %WLK_ETIMEDOUT or the abort reason at the next dispatch.
 *
 * Return: 0, or the negative codes of wlk_request() for what is checked
 * before queueing (%WLK_EINVAL also for a NULL @cb; %WLK_EDEADLK, for a
 * manager with detect_deadlocks, is one of them); -EMFILE and other
 * -errno values when the descriptor cannot be set up. On error @cb is never
 * called and nothing is queued.
 */
WLK_EXPORT int wlk_request_async(struct wlk_manager *m, const char *name,
				 size_t name_len, const struct wlk_options *o,
				 wlk_granted_cb cb, void *arg,
				 struct wlk_async **out);

/**
 * wlk_request_scope_async() - wlk_request_async() for a set of names.
 * @m:     the manager.
 * @names: as for wlk_acquire_scope().
 * @n:     as for wlk_acquire_scope().
 * @o:     options, or NULL for the defaults.
 * @cb:    run once, as for wlk_request_async(); gets the scope's lock.
 * @arg:   passed to @cb.
 * @out:   receives the request handle, or NULL.
 *
 * Context: as for wlk_request_async().
 *
 * Return: as wlk_request_async(), with the argument checks of
 * wlk_acquire_scope().
 */
WLK_EXPORT int wlk_request_scope_async(struct wlk_manager *m,
				       const struct wlk_name *names, size_t n,
				       const struct wlk_options *o,
				       wlk_granted_cb cb, void *arg,
				       struct wlk_async **out);

/**
 * wlk_async_cancel() - Abort an asynchronous request.
 * @req: a request whose callback has not run yet.
 *
 * Like aborting its signal: the request leaves its queue before this
 * returns (a wlk_query() made after it does not show it; the requests
 * behind it may be granted), or, if it was granted in the meantime, the
 * lock is released; the callback runs at the next dispatch with
 * %WLK_EABORTED. Cancelling twice is harmless.
 *
 * Context: thread-safe; not from @req's own callback. Takes the segment
 * mutex briefly, like wlk_request_async().
 *
 * Return: 0, or %WLK_EINVAL if @req is NULL.
 */
WLK_EXPORT int wlk_async_cancel(struct wlk_async *req);

/**
 * wlk_lock_on_stolen() - Be told when a held lock is stolen.
 * @lock: a lock of this process (granted in any form), not yet released.
 * @cb:   run once from wlk_manager_dispatch() of the lock's manager when
 *        the lock is stolen; NULL stops watching.
 * @arg:  passed to @cb.
 *
 * Context: thread-safe.
 *
 * Return: 0, %WLK_EINVAL, %WLK_ESTATE (manager closed or inherited through
 * fork()), or the errors of wlk_manager_fd().
 */
WLK_EXPORT int wlk_lock_on_stolen(struct wlk_lock *lock, wlk_stolen_cb cb,
				  void *arg);

/**
 * wlk_manager_fd() - The manager's pollable descriptor.
 * @m: the manager.
 *
 * Readable when callbacks are ready; then call wlk_manager_dispatch(). The
 * descriptor belongs to @m (close-on-exec) and is closed by
 * wlk_manager_close(); do not close it yourself.
 *
 * Context: thread-safe.
 *
 * Return: the descriptor (>= 0), or %WLK_EINVAL, %WLK_ESTATE, or -EMFILE
 * and other -errno values from socket(), eventfd(), epoll_create1(),
 * timerfd_create() or pthread_create() (the watcher thread).
 */
WLK_EXPORT int wlk_manager_fd(struct wlk_manager *m);

/**
 * wlk_manager_dispatch() - Run the callbacks that are ready.
 * @m: the manager.
 *
 * Drains the descriptor, completes requests that were granted, aborted,
 * cancelled or timed out, notices stolen locks and dead blockers, and runs
 * the callbacks on the calling thread with no library lock held (a callback
 * may request, release, query, cancel, dispatch again, and close @m: the
 * callbacks this dispatch found ready still run, and those of requests not
 * completed yet run inside the close, with %WLK_ESTATE): the requests'
 * callbacks in the order the requests were made, then the stolen-lock
 * callbacks. Never blocks on other lock holders. A deadline that passed
 * after the request was granted does not count: it completes granted.
 *
 * Cost: after grants, a dispatch looks at the first outstanding request
 * of each name the manager has requests on (the spec grants one name's
 * requests in the order they were made; steal, if_available and scope
 * requests are looked at each), so it costs the same behind any number
 * of outstanding requests of a name. After a deadline, an abort, a
 * cancel or a process's death it looks at every outstanding request
 * once.
 *
 * Context: thread-safe (concurrent dispatchers share the callbacks out).
 *
 * Return: the number of callbacks run (0 if none were ready), or
 * %WLK_EINVAL or %WLK_ESTATE.
 */
WLK_EXPORT int wlk_manager_dispatch(struct wlk_manager *m);

#ifdef __cplusplus
}
#endif

#endif /* WEBLOCKS_ASYNC_H */
