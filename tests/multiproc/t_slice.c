/* SPDX-License-Identifier: MIT */
/*
 * t_slice.c - a thread blocked first in its name's queue asks for a short
 * time slice at the scheduler's first tick after it got there, and puts
 * its own back before the call returns (lib/sys/slice.c, tick.c); nobody
 * else's slice changes, and a change made meanwhile by another thread
 * stands.
 *
 * The holder is another process; the waiters are threads of the test's
 * process, whose scheduling attributes the test reads with
 * sched_getattr(2) by thread id while they sleep.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common.h"
#include "testing.h"

#define MS 1000000ull
/* A slice of the thread's own choosing, and one set by another thread. */
#define OWN_NS (3 * MS)
#define OTHERS_NS (2 * MS)
#define OTHERS_NICE 5
/* How long a waiter that must not shorten its slice is watched: past
 * several ticks at HZ=100. */
#define WATCH_MS 40
/* How late a poll (1 ms naps) may see a new slice, and how many tries
 * a bound on a time may take (each may be delayed on a busy machine).
 * Late enough for a loaded machine, and still short of what a fixed 10 ms
 * would give at HZ=250 (6 ms late at least). */
#define POLL_SLACK_NS (4 * MS)
#define TRIES 8

/* The scheduler's next tick after @t on every CPU, as the kernel describes
 * its ticks (tick.c): their period, and whether its command line skews
 * them. */
static uint64_t tick_after(uint64_t t, uint64_t *period)
{
	char buf[4096];
	struct timespec ts;
	ssize_t n = 0;
	int fd = open("/proc/cmdline", O_RDONLY);
	uint64_t p;

	cr_assert_eq(clock_getres(CLOCK_MONOTONIC_COARSE, &ts), 0);
	p = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf));
		close(fd);
	}
	*period = p;
	return wlk__tick_next(t, p,
			      n > 0 && wlk__tick_skewed(buf, (size_t)n) ? p / 2 : 0);
}

/* Since Linux 6.12 sched_getattr() reports a SCHED_OTHER thread's slice. */
static void skip_without_slices(void)
{
	struct t_sched_attr a;

	if (t_sched_get(0, &a) < 0 || a.policy != SCHED_OTHER || !a.runtime)
		cr_skip_test("this kernel has no custom time slices (6.12+)");
}

/* The holder: a process that holds @names until told, or killed. */
struct holder {
	struct t_pipe up, down;
	const char *const *names;
	pid_t pid;
};

static int holder_main(void *arg)
{
	struct holder *h = arg;
	struct wlk_lock *l[4] = {NULL};
	struct wlk_manager *m = NULL;
	int n = 0;
	char c;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	for (; h->names[n]; n++)
		T_CHILD_CHECK(wlk_acquire(m, h->names[n], WLK_NUL_TERMINATED,
					  NULL, &l[n]) == 0, 11);
	T_CHILD_CHECK(t_put_byte(h->up.wr, 'g') == 0, 12);
	T_CHILD_CHECK(t_get(h->down.rd, &c, 1, 6 * T_WAIT_MS) == 0, 13);
	while (n--)
		T_CHILD_CHECK(wlk_release(l[n]) == 0, 14);
	wlk_manager_close(m);
	return 0;
}

static void holder_start(struct holder *h, const char *const *names)
{
	t_pipe_open(&h->up);
	t_pipe_open(&h->down);
	h->names = names;
	h->pid = t_fork(holder_main, h);
	cr_assert_eq(t_get_byte(h->up.rd), 'g', "the holder did not hold");
}

static void holder_end(struct holder *h)
{
	cr_assert_eq(t_put_byte(h->down.wr, 'r'), 0);
	cr_assert_eq(t_wait(h->pid, T_WAIT_MS), 0, "the holder failed");
	t_pipe_close(&h->up);
	t_pipe_close(&h->down);
}

/* A waiter: a thread that sets @pre up, then acquires @name and releases
 * it, reading its own attributes before and after. */
enum pre { PRE_NONE, PRE_BATCH, PRE_OWN_SLICE };

struct waiter {
	struct wlk_manager *m;
	const char *name;
	enum pre pre;
	pthread_t th;
	int tid;          /* [A] 0 until known */
	uint64_t started; /* [A] just before wlk_acquire() */
	struct t_sched_attr before, after;
	int pre_rc, rc;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	struct wlk_lock *l = NULL;
	struct t_sched_attr a;

	if (w->pre != PRE_NONE && t_sched_get(0, &a) == 0) {
		if (w->pre == PRE_BATCH)
			a.policy = SCHED_BATCH;
		else
			a.runtime = OWN_NS;
		w->pre_rc = t_sched_set(0, &a);
	}
	t_sched_get(0, &w->before);
	__atomic_store_n(&w->started, t_now_ns(), __ATOMIC_SEQ_CST);
	__atomic_store_n(&w->tid, (int)syscall(SYS_gettid), __ATOMIC_SEQ_CST);
	w->rc = wlk_acquire(w->m, w->name, WLK_NUL_TERMINATED, NULL, &l);
	t_sched_get(0, &w->after);
	if (!w->rc)
		w->rc = wlk_release(l);
	return NULL;
}

/* Start @w, and wait until it queued (@pending requests on its name). */
static void waiter_start(struct waiter *w, struct wlk_manager *m,
			 const char *name, enum pre pre, size_t pending)
{
	memset(w, 0, sizeof(*w));
	w->m = m;
	w->name = name;
	w->pre = pre;
	cr_assert_eq(pthread_create(&w->th, NULL, waiter_main, w), 0);
	cr_assert(t_wait_pending(m, name, WLK_NUL_TERMINATED, pending),
		  "waiter on \"%s\" did not queue", name);
	cr_assert_eq(w->pre_rc, 0, "could not set the waiter up");
}

static void waiter_join(struct waiter *w)
{
	cr_assert_eq(pthread_join(w->th, NULL), 0);
	T_ASSERT_RC(w->rc, 0);
}

static pid_t tid_of(struct waiter *w)
{
	return __atomic_load_n(&w->tid, __ATOMIC_SEQ_CST);
}

/* When @w's slice was seen short, or 0 if never (common.h). */
static uint64_t wait_slice(struct waiter *w)
{
	return t_wait_short_slice(tid_of(w));
}

static void assert_same(const struct t_sched_attr *a, const struct t_sched_attr *b,
			const char *who)
{
	cr_assert_eq(a->policy, b->policy, "%s: policy changed", who);
	cr_assert_eq(a->nice, b->nice, "%s: nice changed", who);
	cr_assert_eq(a->runtime, b->runtime, "%s: slice %llu ns, was %llu",
		     who, (unsigned long long)a->runtime,
		     (unsigned long long)b->runtime);
}

/* Skip without custom slices; else a holder of "a", and @w queued. */
static void one_head(struct wlk_manager *m, struct holder *h,
		     struct waiter *w, enum pre pre)
{
	static const char *const names[] = {"a", NULL};

	skip_without_slices();
	holder_start(h, names);
	waiter_start(w, m, "a", pre, 1);
}

/* Skip without custom slices; else a holder of "a" and "b", and @x and
 * @y queued first on each. */
static void two_heads(struct wlk_manager *m, struct holder *h,
		      struct waiter *x, enum pre px, struct waiter *y,
		      enum pre py)
{
	static const char *const names[] = {"a", "b", NULL};

	skip_without_slices();
	holder_start(h, names);
	waiter_start(x, m, "a", px, 1);
	waiter_start(y, m, "b", py, 1);
}

Test(slice, a_head_waiter_past_a_tick_runs_with_a_short_slice_until_granted,
     T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct holder h;
	struct waiter w;
	uint64_t at, tick, period;

	one_head(m, &h, &w, PRE_NONE);
	tick = tick_after(__atomic_load_n(&w.started, __ATOMIC_SEQ_CST),
			  &period);
	at = wait_slice(&w);
	cr_assert(at, "the waiter's slice never shortened");
	cr_assert_geq(at, tick, "shortened before the tick after its wait "
		      "began (period %llu ns)", (unsigned long long)period);
	holder_end(&h);
	waiter_join(&w);
	assert_same(&w.after, &w.before, "after the wait");
	t_assert_valid(m, NULL);
}

/* Not much later than that tick either: in one of TRIES tries (a poll
 * may come late on a busy machine), within a poll's slack of it. */
Test(slice, the_short_slice_comes_at_the_first_tick, T_FIX, .timeout = 30)
{
	struct wlk_manager *m = t_open();
	uint64_t late = UINT64_MAX, period = 0;

	for (int i = 0; i < TRIES && late > POLL_SLACK_NS; i++) {
		struct holder h;
		struct waiter w;
		uint64_t at, tick;

		one_head(m, &h, &w, PRE_NONE);
		tick = tick_after(__atomic_load_n(&w.started, __ATOMIC_SEQ_CST),
				  &period);
		at = wait_slice(&w);
		cr_assert(at, "the waiter's slice never shortened");
		if (at >= tick && at - tick < late)
			late = at - tick;
		holder_end(&h);
		waiter_join(&w);
	}
	cr_assert_leq(late, POLL_SLACK_NS, "in %d tries, the slice came at "
		      "best %llu ns after the first tick (period %llu ns)",
		      TRIES, (unsigned long long)late,
		      (unsigned long long)period);
}

Test(slice, a_waiter_behind_the_head_keeps_its_slice, T_FIX, .timeout = 20)
{
	static const char *const names[] = {"a", "b", NULL};
	struct wlk_manager *m = t_open();
	struct waiter first, second, other;
	struct t_sched_attr a;
	struct holder h;

	skip_without_slices();
	holder_start(&h, names);
	waiter_start(&first, m, "a", PRE_NONE, 1);
	waiter_start(&second, m, "a", PRE_NONE, 2);
	waiter_start(&other, m, "b", PRE_NONE, 1);
	/* Once the last one queued has seen its tick, so has the second. */
	cr_assert(wait_slice(&other), "no slice shortened");
	cr_assert_eq(t_sched_get(tid_of(&first), &a), 0);
	cr_assert_eq(a.runtime, T_SHORT_SLICE_NS, "the head's slice is not short");
	cr_assert_eq(t_sched_get(tid_of(&second), &a), 0);
	assert_same(&a, &second.before, "the second in the queue");
	holder_end(&h);
	waiter_join(&first);
	waiter_join(&second);
	waiter_join(&other);
	assert_same(&first.after, &first.before, "the first, after");
	assert_same(&second.after, &second.before, "the second, after");
	assert_same(&other.after, &other.before, "the other, after");
}

Test(slice, a_thread_of_another_policy_is_left_alone, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct waiter batch, other;
	struct holder h;
	struct t_sched_attr a;

	two_heads(m, &h, &batch, PRE_BATCH, &other, PRE_NONE);
	cr_assert_eq(batch.before.policy, SCHED_BATCH);
	cr_assert(wait_slice(&other), "no slice shortened");
	cr_assert_eq(t_sched_get(tid_of(&batch), &a), 0);
	assert_same(&a, &batch.before, "the SCHED_BATCH waiter");
	holder_end(&h);
	waiter_join(&batch);
	waiter_join(&other);
	assert_same(&batch.after, &batch.before, "the SCHED_BATCH one, after");
}

Test(slice, a_slice_the_thread_chose_comes_back, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct holder h;
	struct waiter w;

	one_head(m, &h, &w, PRE_OWN_SLICE);
	cr_assert_eq(w.before.runtime, OWN_NS);
	cr_assert(wait_slice(&w), "the slice never shortened");
	holder_end(&h);
	waiter_join(&w);
	assert_same(&w.after, &w.before, "after the wait");
}

Test(slice, a_change_made_meanwhile_by_another_thread_stands, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct waiter niced, sliced;
	struct holder h;
	struct t_sched_attr a;

	two_heads(m, &h, &niced, PRE_NONE, &sliced, PRE_NONE);
	cr_assert(wait_slice(&niced), "the slice never shortened");
	cr_assert(wait_slice(&sliced), "the slice never shortened");
	cr_assert_eq(setpriority(PRIO_PROCESS, (id_t)tid_of(&niced),
				 OTHERS_NICE), 0);
	cr_assert_eq(t_sched_get(tid_of(&sliced), &a), 0);
	a.runtime = OTHERS_NS;
	cr_assert_eq(t_sched_set(tid_of(&sliced), &a), 0);
	holder_end(&h);
	waiter_join(&niced);
	waiter_join(&sliced);
	/* The new nice value stays, with the thread's slice back. */
	cr_assert_eq(niced.after.nice, OTHERS_NICE);
	cr_assert_eq(niced.after.runtime, niced.before.runtime);
	/* A slice set meanwhile is not the library's to undo. */
	cr_assert_eq(sliced.after.runtime, OTHERS_NS);
}

Test(slice, the_waiter_of_a_killed_holder_is_granted_and_gives_it_back,
     T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct holder h;
	struct waiter w;

	one_head(m, &h, &w, PRE_NONE);
	cr_assert(wait_slice(&w), "the slice never shortened");
	cr_assert_eq(kill(h.pid, SIGKILL), 0);
	waiter_join(&w);
	assert_same(&w.after, &w.before, "after the wait");
	cr_assert_eq(t_wait(h.pid, T_WAIT_MS), 128 + SIGKILL);
	t_pipe_close(&h.up);
	t_pipe_close(&h.down);
	t_assert_valid(m, NULL);
}

Test(slice, switched_off_by_the_environment, T_FIX, .timeout = 20)
{
	struct wlk_manager *m;
	struct holder h;
	struct waiter w;
	struct t_sched_attr a;

	skip_without_slices();
	/* Read at this process's first long wait: this test's. */
	cr_assert_eq(setenv("WEBLOCKS_WAIT_SLICE", "0", 1), 0);
	m = t_open();
	one_head(m, &h, &w, PRE_NONE);
	t_nap_ms(WATCH_MS);
	cr_assert_eq(t_sched_get(tid_of(&w), &a), 0);
	assert_same(&a, &w.before, "with WEBLOCKS_WAIT_SLICE=0");
	holder_end(&h);
	waiter_join(&w);
	assert_same(&w.after, &w.before, "after the wait");
}
