/* SPDX-License-Identifier: MIT */
/* t_threads.c - threads of one process contending; the spec's examples. */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "../common.h"

static const struct wlk_options sh = { .mode = WLK_SHARED };

/* Shared by the contending threads. */
struct arena {
	volatile long counter;
	atomic_int inside;
	atomic_int readers;
	atomic_int writers;
	atomic_int violations;
	atomic_int errors;
	atomic_int max_readers;
	atomic_int wanting;
	atomic_int contended;
	pthread_barrier_t start; /* the counter threads set off together */
};

struct worker {
	struct arena *ar;
	struct wlk_manager *m;
	int iterations;
	bool writer;
};

static int cb_increment(struct wlk_lock *lock, void *arg)
{
	struct arena *ar = arg;
	long v;

	if (atomic_fetch_sub(&ar->wanting, 1) > 1)
		atomic_fetch_add(&ar->contended, 1);
	if (atomic_fetch_add(&ar->inside, 1) != 0)
		atomic_fetch_add(&ar->violations, 1);
	v = ar->counter;
	sched_yield();
	ar->counter = v + 1;
	atomic_fetch_sub(&ar->inside, 1);
	return 0;
}

static void *increment_thread(void *arg)
{
	struct worker *w = arg;
	int i;

	pthread_barrier_wait(&w->ar->start);
	for (i = 0; i < w->iterations; i++) {
		atomic_fetch_add(&w->ar->wanting, 1);
		if (wlk_request(w->m, "ctr", 3, NULL, cb_increment, w->ar) != 0)
			atomic_fetch_add(&w->ar->errors, 1);
	}
	return NULL;
}

/* One round of T threads, N increments each. Return: whether at least a
 * tenth of the grants were contended. */
static bool counter_round(struct wlk_manager *shared_m, bool one_manager)
{
	enum { T = 6 };
	const int N = t_rounds(200);
	struct arena ar = { 0 };
	struct worker w[T];
	pthread_t th[T];
	int i;

	cr_assert_eq(pthread_barrier_init(&ar.start, NULL, T), 0);
	for (i = 0; i < T; i++) {
		w[i] = (struct worker){ .ar = &ar, .iterations = N };
		w[i].m = one_manager ? shared_m : t_open();
		cr_assert_eq(pthread_create(&th[i], NULL, increment_thread,
					    &w[i]),
			     0);
	}
	for (i = 0; i < T; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&ar.start);
	cr_assert_eq(atomic_load(&ar.errors), 0);
	cr_assert_eq(atomic_load(&ar.violations), 0,
		     "%d overlapping critical sections",
		     atomic_load(&ar.violations));
	cr_assert_eq(ar.counter, T * N, "lost updates: %ld", ar.counter);
	cr_log_info("%d of %d grants contended", atomic_load(&ar.contended),
		    T * N);
	return atomic_load(&ar.contended) >= T * N / 10;
}

/*
 * The threads set off together, yet a loaded machine (a sanitizer build
 * beside the torture test) can still run them one after another; the
 * round is only meaningful with some contention, so up to 3 are run.
 */
static void run_counter(bool one_manager)
{
	struct wlk_manager *shared_m = t_open();
	bool contended = false;

	for (int round = 1; !contended; round++) {
		cr_assert_leq(round, 3, "too little contention to mean "
					"anything, in 3 rounds");
		contended = counter_round(shared_m, one_manager);
	}
	cr_assert_eq(t_held_n(shared_m, NULL, 0), 0);
	cr_assert_eq(t_pending_n(shared_m, NULL, 0), 0);
}

Test(threads, threads_with_separate_managers_exclude_each_other, T_FIX,
     .timeout = 60)
{
	run_counter(false);
}

Test(threads, threads_sharing_one_manager_exclude_each_other, T_FIX,
     .timeout = 60)
{
	run_counter(true);
}

struct nest {
	struct wlk_manager *m;
	size_t held_a_by_me;
	size_t held_b_by_me;
	bool inner_ran;
	bool reentrant;
};

static int cb_inner(struct wlk_lock *lock, void *arg)
{
	struct nest *n = arg;
	const char *me = wlk_manager_client_id(n->m);

	n->inner_ran = lock != NULL;
	n->held_a_by_me = t_held_by(n->m, "A", 1, me);
	n->held_b_by_me = t_held_by(n->m, "B", 1, me);
	return 20;
}

static int cb_reentry_probe(struct wlk_lock *lock, void *arg)
{
	struct nest *n = arg;

	n->reentrant = lock != NULL;
	return 0;
}

static int cb_outer(struct wlk_lock *lock, void *arg)
{
	struct nest *n = arg;
	struct wlk_options ia = { .if_available = true };
	int r;

	/* The spec's nested request: B while holding A. */
	r = wlk_request(n->m, "B", 1, NULL, cb_inner, n);
	if (r != 20)
		return -1000 + r;
	/* A again, from inside A: not re-entrant. */
	r = wlk_request(n->m, "A", 1, &ia, cb_reentry_probe, n);
	if (r != 0)
		return -2000 + r;
	return 10;
}

Test(threads, nested_request_inside_callback, T_FIX, .timeout = 10)
{
	struct nest n = { .m = t_open() };

	T_ASSERT_RC(wlk_request(n.m, "A", 1, NULL, cb_outer, &n), 10);
	cr_assert(n.inner_ran);
	cr_assert_eq(n.held_a_by_me, 1, "A not held during B's callback");
	cr_assert_eq(n.held_b_by_me, 1);
	cr_assert_not(n.reentrant, "A granted twice to one manager");
	cr_assert_eq(t_held_n(n.m, NULL, 0), 0);
}

struct reader {
	struct wlk_manager *m;
	struct t_pipe in;
	struct t_pipe go;
	int rc;
	int readers_seen;
};

static atomic_int readers_in;
static atomic_int writer_in;

static int cb_reader(struct wlk_lock *lock, void *arg)
{
	struct reader *r = arg;
	char c;

	atomic_fetch_add(&readers_in, 1);
	if (atomic_load(&writer_in))
		r->readers_seen = -1;
	t_put_byte(r->in.wr, 'i');
	(void)t_get(r->go.rd, &c, 1, T_WAIT_MS);
	if (atomic_load(&writer_in))
		r->readers_seen = -1;
	atomic_fetch_sub(&readers_in, 1);
	return 0;
}

static void *reader_thread(void *arg)
{
	struct reader *r = arg;

	r->rc = wlk_request(r->m, "db", 2, &sh, cb_reader, r);
	return NULL;
}

static int cb_writer(struct wlk_lock *lock, void *arg)
{
	int *seen = arg;

	atomic_store(&writer_in, 1);
	*seen = atomic_load(&readers_in);
	atomic_store(&writer_in, 0);
	return 0;
}

struct writer {
	struct wlk_manager *m;
	int rc;
	int readers_seen;
};

static void *writer_thread(void *arg)
{
	struct writer *w = arg;

	w->readers_seen = -1;
	w->rc = wlk_request(w->m, "db", 2, NULL, cb_writer, &w->readers_seen);
	return NULL;
}

Test(threads, readers_share_and_writer_waits_for_them, T_FIX, .timeout = 10)
{
	struct reader r[2];
	struct writer w = { .m = t_open(), .rc = 1 };
	pthread_t rt[2], wt;
	int i;

	for (i = 0; i < 2; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].m = t_open();
		r[i].rc = 1;
		t_pipe_open(&r[i].in);
		t_pipe_open(&r[i].go);
		cr_assert_eq(pthread_create(&rt[i], NULL, reader_thread, &r[i]),
			     0);
	}
	/* Both readers are inside at once. */
	for (i = 0; i < 2; i++)
		cr_assert_eq(t_get_byte(r[i].in.rd), 'i', "reader %d blocked",
			     i);
	cr_assert_eq(atomic_load(&readers_in), 2);
	cr_assert_eq(t_held_n(w.m, "db", 2), 2);

	cr_assert_eq(pthread_create(&wt, NULL, writer_thread, &w), 0);
	cr_assert(t_wait_pending(w.m, "db", 2, 1));
	t_put_byte(r[0].go.wr, 'g');
	pthread_join(rt[0], NULL);
	cr_assert_eq(t_pending_n(w.m, "db", 2), 1, "writer in with a reader");
	t_put_byte(r[1].go.wr, 'g');
	pthread_join(rt[1], NULL);
	pthread_join(wt, NULL);
	T_ASSERT_RC(w.rc, 0);
	cr_assert_eq(w.readers_seen, 0, "writer saw %d readers",
		     w.readers_seen);
	for (i = 0; i < 2; i++) {
		T_ASSERT_RC(r[i].rc, 0);
		cr_assert_eq(r[i].readers_seen, 0, "reader saw the writer");
		t_pipe_close(&r[i].in);
		t_pipe_close(&r[i].go);
	}
}

static int cb_rw(struct wlk_lock *lock, void *arg)
{
	struct arena *ar = arg;
	int n;

	if (wlk_lock_mode(lock) == WLK_SHARED) {
		n = atomic_fetch_add(&ar->readers, 1) + 1;
		if (atomic_load(&ar->writers) != 0)
			atomic_fetch_add(&ar->violations, 1);
		if (n > atomic_load(&ar->max_readers))
			atomic_store(&ar->max_readers, n);
		sched_yield();
		if (atomic_load(&ar->writers) != 0)
			atomic_fetch_add(&ar->violations, 1);
		atomic_fetch_sub(&ar->readers, 1);
	} else {
		if (atomic_fetch_add(&ar->writers, 1) != 0)
			atomic_fetch_add(&ar->violations, 1);
		if (atomic_load(&ar->readers) != 0)
			atomic_fetch_add(&ar->violations, 1);
		ar->counter++;
		sched_yield();
		if (atomic_load(&ar->readers) != 0)
			atomic_fetch_add(&ar->violations, 1);
		atomic_fetch_sub(&ar->writers, 1);
	}
	return 0;
}

static void *rw_thread(void *arg)
{
	struct worker *w = arg;
	int i;

	for (i = 0; i < w->iterations; i++)
		if (wlk_request(w->m, "db", 2, w->writer ? NULL : &sh, cb_rw,
				w->ar) != 0)
			atomic_fetch_add(&w->ar->errors, 1);
	return NULL;
}

Test(threads, readers_writer_exclusion_under_contention, T_FIX,
     .timeout = 60)
{
	enum { R = 4, W = 2 };
	const int N = t_rounds(200);
	struct arena ar = { 0 };
	struct worker w[R + W];
	pthread_t th[R + W];
	int i;

	for (i = 0; i < R + W; i++) {
		w[i] = (struct worker){ .ar = &ar, .iterations = N,
					.writer = i >= R, .m = t_open() };
		cr_assert_eq(pthread_create(&th[i], NULL, rw_thread, &w[i]), 0);
	}
	for (i = 0; i < R + W; i++)
		pthread_join(th[i], NULL);
	cr_assert_eq(atomic_load(&ar.errors), 0);
	cr_assert_eq(atomic_load(&ar.violations), 0);
	cr_assert_eq(ar.counter, W * N);
}

/* The spec's deadlock advice: take several locks in one fixed order. */
struct multi {
	struct wlk_manager *m;
	const char *names[2];
	int step;
	int rc;
	atomic_int *both;
};

static int cb_multi(struct wlk_lock *lock, void *arg);

static int request_sorted(struct multi *mu)
{
	if (strcmp(mu->names[0], mu->names[1]) > 0) {
		const char *t = mu->names[0];

		mu->names[0] = mu->names[1];
		mu->names[1] = t;
	}
	mu->step = 0;
	return wlk_request(mu->m, mu->names[0], WLK_NUL_TERMINATED, NULL,
			   cb_multi, mu);
}

static int cb_multi(struct wlk_lock *lock, void *arg)
{
	struct multi *mu = arg;

	if (mu->step++ == 0)
		return wlk_request(mu->m, mu->names[1], WLK_NUL_TERMINATED,
				   NULL, cb_multi, mu);
	if (atomic_fetch_add(mu->both, 1) != 0)
		return -1;
	sched_yield();
	atomic_fetch_sub(mu->both, 1);
	return 0;
}

static void *multi_thread(void *arg)
{
	struct multi *mu = arg;
	const char *n0 = mu->names[0], *n1 = mu->names[1];
	int i;

	for (i = 0; i < 100 && mu->rc == 0; i++) {
		mu->names[0] = n0;
		mu->names[1] = n1;
		mu->rc = request_sorted(mu);
	}
	return NULL;
}

Test(threads, ordered_multi_lock_helper_avoids_deadlock, T_FIX,
     .timeout = 30)
{
	atomic_int both = 0;
	struct multi a = { .m = t_open(), .names = { "A", "B" },
			   .both = &both };
	struct multi b = { .m = t_open(), .names = { "B", "A" },
			   .both = &both };
	pthread_t ta, tb;

	cr_assert_eq(pthread_create(&ta, NULL, multi_thread, &a), 0);
	cr_assert_eq(pthread_create(&tb, NULL, multi_thread, &b), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	T_ASSERT_RC(a.rc, 0);
	T_ASSERT_RC(b.rc, 0);
}
