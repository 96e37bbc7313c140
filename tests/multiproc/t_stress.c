/* SPDX-License-Identifier: MIT */
/* t_stress.c - many processes: mutual exclusion, readers/writer, fairness. */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common.h"

#define T_MAX_WANT 64

/* State shared by the parent and all children of one test. */
struct arena {
	volatile long counter;
	atomic_int inside;
	atomic_int readers;
	atomic_int writers;
	atomic_int violations;
	atomic_int unfair;
	atomic_int checks;
	int nwant;		/* FIFO check: processes waiting, in order */
	int wpos;		/* how many of them were granted so far */
	pid_t want[T_MAX_WANT];
	atomic_int ngrants;
	atomic_int wanting;	/* in wlk_request(), not yet in a callback */
	atomic_int contended;	/* grants while another one was wanting */
	pid_t grants[4096];
};

struct job {
	struct arena *ar;
	struct t_pipe gate;
	int iterations;
	bool writer;
	struct wlk_manager *m;
};

/* Widen a critical section so that the others really queue up. */
static void dawdle(void)
{
	struct timespec ts = { .tv_nsec = 20000 };

	sched_yield();
	nanosleep(&ts, NULL);
}

/* Entering the callback: was anyone else waiting meanwhile? */
static void entered(struct arena *ar)
{
	if (atomic_fetch_sub(&ar->wanting, 1) > 1)
		atomic_fetch_add(&ar->contended, 1);
}

/* Children start together once the parent opens the gate. */
static int wait_gate(struct job *j)
{
	char c;

	return t_get(j->gate.rd, &c, 1, 10000);
}

static void open_gate(struct job *j, int n)
{
	int i;

	for (i = 0; i < n; i++)
		cr_assert_eq(t_put_byte(j->gate.wr, 'g'), 0);
}

static int cb_increment(struct wlk_lock *lock, void *arg)
{
	struct arena *ar = arg;
	long v;

	entered(ar);
	if (atomic_fetch_add(&ar->inside, 1) != 0)
		atomic_fetch_add(&ar->violations, 1);
	v = ar->counter;
	if ((v & 3) == 0)
		dawdle();
	ar->counter = v + 1;
	atomic_fetch_sub(&ar->inside, 1);
	return 0;
}

static int child_increment(void *arg)
{
	struct job *j = arg;
	struct wlk_manager *m = NULL;
	int i;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK(wait_gate(j) == 0, 11);
	for (i = 0; i < j->iterations; i++) {
		atomic_fetch_add(&j->ar->wanting, 1);
		T_CHILD_CHECK(wlk_request(m, "ctr", 3, NULL, cb_increment,
					  j->ar) == 0,
			      12);
	}
	wlk_manager_close(m);
	return 0;
}

Test(stress, processes_keep_mutual_exclusion_on_a_shared_counter, T_FIX,
     .timeout = 120)
{
	enum { N = 6, M = 300 };
	struct job j = { .iterations = M };
	struct wlk_manager *m = t_open();
	pid_t pids[N];
	int i;

	j.ar = t_shared_alloc(sizeof(*j.ar));
	t_pipe_open(&j.gate);
	for (i = 0; i < N; i++)
		pids[i] = t_fork(child_increment, &j);
	open_gate(&j, N);
	for (i = 0; i < N; i++)
		cr_assert_eq(t_wait(pids[i], 100000), 0, "child %d failed", i);
	cr_assert_eq(atomic_load(&j.ar->violations), 0,
		     "%d overlapping critical sections",
		     atomic_load(&j.ar->violations));
	cr_assert_eq(j.ar->counter, (long)N * M, "lost updates: %ld of %d",
		     j.ar->counter, N * M);
	cr_log_info("%d of %d grants contended",
		    atomic_load(&j.ar->contended), N * M);
	cr_assert_geq(atomic_load(&j.ar->contended), N * M / 10,
		      "too little contention to mean anything: %d",
		      atomic_load(&j.ar->contended));
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
	t_pipe_close(&j.gate);
	t_shared_free(j.ar, sizeof(*j.ar));
}

static int cb_rw(struct wlk_lock *lock, void *arg)
{
	struct arena *ar = arg;

	entered(ar);
	if (wlk_lock_mode(lock) == WLK_SHARED) {
		atomic_fetch_add(&ar->readers, 1);
		if (atomic_load(&ar->writers) != 0)
			atomic_fetch_add(&ar->violations, 1);
		dawdle();
		if (atomic_load(&ar->writers) != 0)
			atomic_fetch_add(&ar->violations, 1);
		atomic_fetch_sub(&ar->readers, 1);
	} else {
		if (atomic_fetch_add(&ar->writers, 1) != 0)
			atomic_fetch_add(&ar->violations, 1);
		if (atomic_load(&ar->readers) != 0)
			atomic_fetch_add(&ar->violations, 1);
		ar->counter++;
		dawdle();
		if (atomic_load(&ar->readers) != 0)
			atomic_fetch_add(&ar->violations, 1);
		atomic_fetch_sub(&ar->writers, 1);
	}
	return 0;
}

static int child_rw(void *arg)
{
	struct job *j = arg;
	struct wlk_options o = { .mode = j->writer ? WLK_EXCLUSIVE :
						     WLK_SHARED };
	struct wlk_manager *m = NULL;
	int i;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK(wait_gate(j) == 0, 11);
	for (i = 0; i < j->iterations; i++) {
		atomic_fetch_add(&j->ar->wanting, 1);
		T_CHILD_CHECK(wlk_request(m, "db", 2, &o, cb_rw, j->ar) == 0,
			      12);
	}
	wlk_manager_close(m);
	return 0;
}

Test(stress, readers_and_writers_in_processes_never_overlap, T_FIX,
     .timeout = 120)
{
	enum { R = 3, W = 2, M = 200 };
	struct job j = { .iterations = M };
	pid_t pids[R + W];
	int i;

	(void)t_open();
	j.ar = t_shared_alloc(sizeof(*j.ar));
	t_pipe_open(&j.gate);
	for (i = 0; i < R + W; i++) {
		j.writer = i >= R;
		pids[i] = t_fork(child_rw, &j);
	}
	open_gate(&j, R + W);
	for (i = 0; i < R + W; i++)
		cr_assert_eq(t_wait(pids[i], 100000), 0, "child %d failed", i);
	cr_assert_eq(atomic_load(&j.ar->violations), 0);
	cr_assert_eq(j.ar->counter, (long)W * M);
	cr_log_info("%d of %d grants contended",
		    atomic_load(&j.ar->contended), (R + W) * M);
	cr_assert_geq(atomic_load(&j.ar->contended), (R + W) * M / 10,
		      "too little contention: %d",
		      atomic_load(&j.ar->contended));
	t_pipe_close(&j.gate);
	t_shared_free(j.ar, sizeof(*j.ar));
}

/*
 * FIFO under contention. While holding the lock, a process lists the
 * requests waiting now; every one of them was made before any request that
 * comes later (the holder's own next one included), so the next grants must
 * go to exactly those processes, in the listed order, before anyone else.
 */
struct fair_arg {
	struct arena *ar;
	struct wlk_manager *m;
};

static int cb_fair(struct wlk_lock *lock, void *arg)
{
	struct fair_arg *fa = arg;
	struct arena *ar = fa->ar;
	pid_t me = getpid();
	size_t n;
	int g;

	if (atomic_fetch_add(&ar->inside, 1) != 0)
		atomic_fetch_add(&ar->violations, 1);
	if (ar->wpos < ar->nwant) {
		atomic_fetch_add(&ar->checks, 1);
		if (ar->want[ar->wpos] != me)
			atomic_fetch_add(&ar->unfair, 1);
		ar->wpos++;
	}
	g = atomic_fetch_add(&ar->ngrants, 1);
	if (g < (int)(sizeof(ar->grants) / sizeof(ar->grants[0])))
		ar->grants[g] = me;
	dawdle();
	if (ar->wpos == ar->nwant) {
		n = t_pending_pids(fa->m, "fair", 4, ar->want, T_MAX_WANT);
		if (n == SIZE_MAX || n > T_MAX_WANT)
			atomic_fetch_add(&ar->violations, 1);
		ar->nwant = n > T_MAX_WANT ? 0 : (int)n;
		ar->wpos = 0;
	}
	atomic_fetch_sub(&ar->inside, 1);
	return 0;
}

static int child_fair(void *arg)
{
	struct job *j = arg;
	struct fair_arg fa = { .ar = j->ar };
	int i;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &fa.m) == 0, 10);
	T_CHILD_CHECK(wait_gate(j) == 0, 11);
	for (i = 0; i < j->iterations; i++)
		T_CHILD_CHECK(wlk_request(fa.m, "fair", 4, NULL, cb_fair,
					  &fa) == 0,
			      12);
	wlk_manager_close(fa.m);
	return 0;
}

Test(stress, grants_follow_queue_order_under_contention, T_FIX,
     .timeout = 120)
{
	enum { N = 5, M = 150 };
	struct job j = { .iterations = M };
	pid_t pids[N];
	int i, checks;

	(void)t_open();
	j.ar = t_shared_alloc(sizeof(*j.ar));
	t_pipe_open(&j.gate);
	for (i = 0; i < N; i++)
		pids[i] = t_fork(child_fair, &j);
	open_gate(&j, N);
	for (i = 0; i < N; i++)
		cr_assert_eq(t_wait(pids[i], 100000), 0, "child %d failed", i);
	checks = atomic_load(&j.ar->checks);
	cr_assert_eq(atomic_load(&j.ar->violations), 0);
	cr_assert_eq(atomic_load(&j.ar->ngrants), N * M);
	cr_log_info("%d of %d grants were checked against the queue", checks,
		    N * M);
	/* Not vacuous: many grants had someone waiting. */
	cr_assert_geq(checks, N * M / 10, "only %d grants had a queue",
		      checks);
	cr_assert_eq(atomic_load(&j.ar->unfair), 0,
		     "%d of %d grants went to a later request",
		     atomic_load(&j.ar->unfair), checks);
	t_pipe_close(&j.gate);
	t_shared_free(j.ar, sizeof(*j.ar));
}
