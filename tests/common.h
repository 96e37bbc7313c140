/* SPDX-License-Identifier: MIT */
/* common.h - fixtures, query, pipe, thread and fork helpers for the tests. */
#ifndef WLK_TESTS_COMMON_H
#define WLK_TESTS_COMMON_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/types.h>

#include <criterion/criterion.h>

#include "weblocks.h"

/* How long a helper waits for another thread or process before giving up. */
#define T_WAIT_MS 5000
/* How soon a closed manager's blocked thread must return: well below its
 * own recheck (WLK_SAFETY_RECHECK_NS, 1 s), so the close woke it. */
#define T_CLOSE_WAKE_MAX_NS (700ull * 1000 * 1000)

/*
 * The fixture. t_init() gives the test a unique origin in t_origin (so tests
 * can run in parallel); t_fini() closes managers opened with t_open*() that
 * are still open, kills and reaps children started with t_fork() that were
 * not reaped, and removes the default bucket of t_origin and every bucket
 * registered with t_track_bucket().
 */
extern char t_origin[];
void t_init(void);
void t_fini(void);

/*
 * The engine under test: the library's (WEBLOCKS_BACKEND, weblocks.h), so
 * that the same tests run on each. On etcd, t_init() skips, with its
 * reason, each test of the table in common.c: those that look into the
 * shared-memory segment or test what only it has (its tables' limits,
 * its fast path, tokens that count grants one by one).
 */
bool t_on_etcd(void);
/*
 * The rounds a test that hammers a few names runs: @n, a quarter on etcd,
 * where each grant takes round trips to the cluster (the suites run four
 * tests at a time against one cluster): as much contention, in the
 * test's timeout.
 */
static inline int t_rounds(int n)
{
	return t_on_etcd() ? n / 4 : n;
}
/*
 * exit(@status) from a child that means to leave its managers open: what
 * they hold is not a leak to report (and the threads of an etcd manager
 * may be mid-request, their objects on stacks LeakSanitizer cannot always
 * stop and scan).
 */
void t_exit_leaking(int status) __attribute__((noreturn));
/*
 * wlk_lock_stolen(@l) of a lock stolen by another process: on etcd its
 * holder learns of the steal from its watch, a moment later, so this
 * polls (bounded, T_WAIT_MS) for it there; at once on shared memory.
 */
bool t_stolen(struct wlk_lock *l);
/*
 * Poll (bounded, @ms) until wlk_lock_stolen() is true of each of
 * @l[0..@n), on either engine: true if so. For a holder that learns of a
 * loss late, e.g. its lease's end once its process runs again.
 */
bool t_stolen_within(struct wlk_lock *const *l, unsigned int n,
		     unsigned int ms);

/* The fixture, for Test(suite, name, T_FIX, .timeout = N). */
#define T_FIX .init = t_init, .fini = t_fini

/* Make another unique origin, tagged with @tag; to have its buckets
 * removed in t_fini(), pass them to t_track_bucket(). */
void t_make_origin(char *buf, size_t size, const char *tag);
/* Remove (origin, bucket, partition) in t_fini(); NULLs mean defaults. */
void t_track_bucket(const char *origin, const char *bucket,
		    const char *partition);

/* Unlink @path in t_fini() (for segments a test damaged). */
void t_track_file(const char *path);

/*
 * A child for t_fork() with two pipes: opens t_origin's bucket on 'o',
 * takes "z" and answers 'h', lets go and closes on 'r'.
 */
int t_newcomer(void *arg);

/* A child for t_fork(): open t_origin's bucket, steal the name @arg (a
 * string) and let it go. */
int t_stealer(void *arg);

/* The /dev/shm path of the first weblocks segment this process maps. */
bool t_mapped_segment(char *path, size_t size);

/* The whole file at @path, mapped shared read-write; its size in *@size. */
void *t_map_file(const char *path, size_t *size);

/*
 * Map the segment of t_origin's default bucket read-write, to look into it
 * or damage it (with lib/testing.h); *@size receives the size to munmap().
 */
void *t_segment_map(size_t *size);

/*
 * Open a manager of t_origin (or of @origin) with options @o; the test fails
 * if that fails. The manager is closed in t_fini() unless t_close() or
 * t_forget() was called on it first.
 */
struct wlk_manager *t_open(void);
struct wlk_manager *t_open_opts(const struct wlk_manager_options *o);
struct wlk_manager *t_open_at(const char *origin,
			      const struct wlk_manager_options *o);
void t_close(struct wlk_manager *m);
/* Stop tracking @m (the test closes it with wlk_manager_close itself). */
void t_forget(struct wlk_manager *m);

/* Error code as text for messages: "0", "AbortError(-3002)", ... */
const char *t_ename(int rc);

#define T_ASSERT_RC(call, want)                                                \
	do {                                                                   \
		int t_rc_ = (call);                                            \
		int t_want_ = (want);                                          \
		cr_assert_eq(t_rc_, t_want_, "%s: got %s, want %s", #call,     \
			     t_ename(t_rc_), t_ename(t_want_));                \
	} while (0)

/*
 * Query helpers. A name of NULL counts every name. They return SIZE_MAX if
 * wlk_query() fails, which no count assertion accepts.
 */
size_t t_held_n(struct wlk_manager *m, const char *name, size_t len);
size_t t_pending_n(struct wlk_manager *m, const char *name, size_t len);
/* Held entries on @name whose clientId is @client_id. */
size_t t_held_by(struct wlk_manager *m, const char *name, size_t len,
		 const char *client_id);
/* Held entries on @name of the process @pid. */
size_t t_held_by_pid(struct wlk_manager *m, const char *name, size_t len,
		     pid_t pid);
/* The pids of the pending entries on @name, in order; their count. */
size_t t_pending_pids(struct wlk_manager *m, const char *name, size_t len,
		      pid_t *pids, size_t max);
/* Held and pending entries of process @pid in the bucket; SIZE_MAX. */
size_t t_entries_of(struct wlk_manager *m, pid_t pid);

/*
 * Scheduling attributes of thread @tid (0: the caller), the kernel's struct
 * sched_attr (first version), through sched_getattr(2) and
 * sched_setattr(2); 0 or -1 (errno). A SCHED_OTHER thread's runtime is its
 * time slice since Linux 6.12, 0 before. T_SHORT_SLICE_NS: the slice a
 * blocked waiter first in its queue asks for at the scheduler's next tick
 * (lib/sys/slice.c).
 */
struct t_sched_attr {
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime, deadline, period;
};
int t_sched_get(pid_t tid, struct t_sched_attr *a);
int t_sched_set(pid_t tid, struct t_sched_attr *a);
#define T_SHORT_SLICE_NS (100 * 1000ull)
/* Poll (1 ms naps, at most T_WAIT_MS) until thread @tid's slice is
 * T_SHORT_SLICE_NS: when it was seen so (t_now_ns()), or 0 if never. */
uint64_t t_wait_short_slice(pid_t tid);
/*
 * Fail the test unless wlk_manager_validate(@m) passes; the message starts
 * with @what (may be NULL) and lists the violations.
 */
void t_assert_valid(struct wlk_manager *m, const char *what);
/* Dispatch @m while its descriptor is readable: the callbacks run, or a
 * negative code from wlk_manager_dispatch(). */
int t_dispatch_ready(struct wlk_manager *m);
/*
 * An event loop: until *@calls (counted by the callbacks) reaches @want,
 * wait for @m's descriptor, in 20 ms slices so that callbacks counted by
 * other threads are seen, and dispatch when poll() says it is readable (so
 * completions that do not ring it fail). Bounded by @ms. Asserts nothing,
 * so fork children may use it. Returns whether @want was reached.
 */
bool t_pump(struct wlk_manager *m, atomic_int *calls, int want, int ms);
/* Poll (bounded, T_WAIT_MS) until the count on @name is @n; true if so. */
bool t_wait_pending(struct wlk_manager *m, const char *name, size_t len,
		    size_t n);
bool t_wait_held(struct wlk_manager *m, const char *name, size_t len,
		 size_t n);
/* Sleep @ms milliseconds; only to bound polling loops or let time pass. */
void t_nap_ms(unsigned int ms);
/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t t_now_ns(void);

/* Zeroed memory shared with fork children (MAP_SHARED | MAP_ANONYMOUS). */
void *t_shared_alloc(size_t size);
void t_shared_free(void *p, size_t size);

/* Pipes: one end writes a byte at a point, the other blocks reading it. */
struct t_pipe {
	int rd;
	int wr;
};
void t_pipe_open(struct t_pipe *p);
void t_pipe_close(struct t_pipe *p);
/* Write all of @buf; 0 or -1. */
int t_put(int fd, const void *buf, size_t n);
/* Read exactly @n bytes within @ms milliseconds; 0, or -1 (EOF, timeout). */
int t_get(int fd, void *buf, size_t n, int ms);
int t_put_byte(int fd, char c);
/* The next byte within T_WAIT_MS, or -1. */
int t_get_byte(int fd);
/* Whether @fd has data (or EOF) right now, without blocking. */
bool t_readable(int fd);

/*
 * Fork a child that runs @fn(@arg) and _exit()s with its return value; it
 * never returns into Criterion. t_wait() reaps it: the exit code, 128 +
 * signal number if it was killed, or -1 if it did not end within @ms (it is
 * then killed).
 */
pid_t t_fork(int (*fn)(void *arg), void *arg);
int t_wait(pid_t pid, int ms);

/*
 * A child stopped while it holds locks, so that its lease runs out (etcd):
 * t_stopped_start() forks @fn(@s->p), which takes its locks, says 'h' on
 * p[0] and then reads 'c' on p[1]; the child is stopped (SIGSTOP) once it
 * said 'h'. t_stopped_resume() continues it, says 'c', and waits up to
 * @ms for it to end (t_wait()'s status: 0 when @fn returned 0), then
 * closes the pipes.
 */
struct t_stopped {
	struct t_pipe p[2];
	pid_t pid;
};
void t_stopped_start(struct t_stopped *s, int (*fn)(void *arg));
int t_stopped_resume(struct t_stopped *s, int ms);
/* How long a test waits for a stopped holder's lease to run out: its TTL
 * (tests/etcd/check.sh sets 2 s) plus an election and a round trip, with
 * room. */
#define T_EXPIRY_WAIT_MS 15000

/* In a child: return @code from the child function unless @cond holds. */
#define T_CHILD_CHECK(cond, code)                                              \
	do {                                                                   \
		if (!(cond))                                                   \
			return (code);                                         \
	} while (0)

/*
 * A thread that holds a lock: it calls wlk_acquire(), reports, waits to be
 * told to release (if it got a lock), records whether the lock was stolen,
 * calls wlk_release() and reports again. The thread works on its own heap
 * state, so a test that fails while it runs leaves it nothing dangling; the
 * results below are copied out by t_holder_wait_granted() (acq_rc, got,
 * token), t_holder_release() (stolen, rel_rc) and t_holder_join() (all).
 */
struct t_holder_st;
struct t_holder {
	int acq_rc;
	int rel_rc;
	bool got;
	bool stolen;
	uint64_t token;
	struct t_holder_st *st;
};
void t_holder_start(struct t_holder *h, struct wlk_manager *m,
		    const char *name, size_t len, const struct wlk_options *o);
/* Wait until wlk_acquire() returned in the thread; 0, or -1 on timeout. */
int t_holder_wait_granted(struct t_holder *h);
/* Whether wlk_acquire() has returned already (does not block). */
bool t_holder_granted_now(struct t_holder *h);
/* Tell the thread to release, and wait until it did; 0 or -1. */
int t_holder_release(struct t_holder *h);
/* Join the thread and close its pipes. */
void t_holder_join(struct t_holder *h);

#endif /* WLK_TESTS_COMMON_H */
