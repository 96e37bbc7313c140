/* SPDX-License-Identifier: MIT */
/*
 * t_broadcast.c - one release grants many sleeping shared waiters of
 * another process (layout.h, GRANT BROADCAST): the granter wakes a few on
 * the name's grants word and the first of them to run wakes the rest.
 * Every waiter must
 * see its grant soon, not at its next safety recheck
 * (WLK_SAFETY_RECHECK_NS, 1 s), which is all a lost wake-up would leave it;
 * a waiter woken without being granted must sleep again.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "../common.h"
#include "testing.h"

/* More waiters than WLK_WAKE_BATCH and WLK_BROADCAST_FIRST: most must be
 * woken by another waiter. */
#define MANY 100
/* A grant seen later than this came from a recheck, not a wake-up. */
#define SOON_NS (400ull * 1000 * 1000)

static const struct wlk_options sh = {.mode = WLK_SHARED};

/* A child's threads queue for "b" in @opt's mode, and hold it until
 * told. */
struct crowd {
	int n;
	struct wlk_options opt;
	struct t_pipe up;   /* 'g': all granted */
	struct t_pipe down; /* 'r': release */
	struct wlk_manager *m;
	atomic_int granted;
	pthread_barrier_t held; /* the threads and the child's main one */
};

static void *crowd_thread(void *arg)
{
	struct crowd *c = arg;
	struct wlk_lock *l = NULL;
	int rc = wlk_acquire(c->m, "b", 1, &c->opt, &l);

	if (rc == 0)
		atomic_fetch_add(&c->granted, 1);
	pthread_barrier_wait(&c->held);
	/* Hold until the child's main thread has heard 'r'. */
	pthread_barrier_wait(&c->held);
	if (l)
		wlk_release(l);
	return NULL;
}

static int crowd_child(void *arg)
{
	struct crowd *c = arg;
	pthread_t th[MANY];
	char b;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &c->m) == 0, 10);
	T_CHILD_CHECK(pthread_barrier_init(&c->held, NULL,
					   (unsigned int)c->n + 1) == 0, 11);
	for (int i = 0; i < c->n; i++)
		T_CHILD_CHECK(pthread_create(&th[i], NULL, crowd_thread, c) == 0,
			      12);
	pthread_barrier_wait(&c->held);
	T_CHILD_CHECK(atomic_load(&c->granted) == c->n, 13);
	T_CHILD_CHECK(t_put_byte(c->up.wr, 'g') == 0, 14);
	T_CHILD_CHECK(t_get(c->down.rd, &b, 1, T_WAIT_MS) == 0, 15);
	pthread_barrier_wait(&c->held);
	for (int i = 0; i < c->n; i++)
		pthread_join(th[i], NULL);
	wlk_manager_close(c->m);
	return 0;
}

static void crowd_open(struct crowd *c, int n, const struct wlk_options *o)
{
	memset(c, 0, sizeof(*c));
	c->n = n;
	c->opt = *o;
	t_pipe_open(&c->up);
	t_pipe_open(&c->down);
}

static void crowd_close(struct crowd *c)
{
	t_pipe_close(&c->up);
	t_pipe_close(&c->down);
}

/* Pending requests of the bucket whose waiters sleep in the kernel. */
static int sleepers(void *map)
{
	const struct wlk_seg_header *h = map;
	const struct wlk_seg_request *r =
		(const struct wlk_seg_request *)((const char *)map +
						 h->off_requests);
	int n = 0;

	for (uint32_t i = 0; i < h->max_requests; i++)
		n += WLK_WORD_STATE(__atomic_load_n(&r[i].word,
						    __ATOMIC_ACQUIRE)) ==
			     WLK_SLOT_PENDING &&
		     __atomic_load_n(&r[i].sleeping, __ATOMIC_ACQUIRE);
	return n;
}

/* Poll (bounded, T_WAIT_MS) until @n waiters sleep: the grant must then
 * come through a wake-up, not a spinner's look. */
static bool wait_sleepers(int n)
{
	size_t size;
	void *map = t_segment_map(&size);
	bool ok = false;

	for (int ms = 0; ms < T_WAIT_MS && !ok; ms++) {
		ok = sleepers(map) == n;
		if (!ok)
			t_nap_ms(1);
	}
	munmap(map, size);
	return ok;
}

/* Hold "b", queue @n shared waiters of a child behind it, let them fall
 * asleep, release, and return how long until the child says all hold. */
static uint64_t grant_crowd(int n)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	struct crowd c;
	uint64_t t0, dt;
	pid_t pid;

	crowd_open(&c, n, &sh);
	T_ASSERT_RC(wlk_acquire(m, "b", 1, NULL, &l), 0);
	pid = t_fork(crowd_child, &c);
	cr_assert(t_wait_pending(m, "b", 1, (size_t)n), "crowd did not queue");
	cr_assert(wait_sleepers(n), "crowd did not fall asleep");
	t0 = t_now_ns();
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_get_byte(c.up.rd), 'g', "crowd not granted");
	dt = t_now_ns() - t0;
	cr_assert_eq(t_held_n(m, "b", 1), (size_t)n);
	cr_assert_eq(t_put_byte(c.down.wr, 'r'), 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	crowd_close(&c);
	t_close(m);
	return dt;
}

Test(broadcast, many_sleeping_shared_waiters_are_all_woken_at_once, T_FIX,
     .timeout = 30)
{
	uint64_t dt = grant_crowd(MANY);

	cr_assert_lt(dt, SOON_NS, "%d waiters took %llu ms", MANY,
		     (unsigned long long)(dt / 1000000));
}

Test(broadcast, two_sleeping_shared_waiters_are_woken_by_one_broadcast,
     T_FIX, .timeout = 30)
{
	uint64_t dt = grant_crowd(2);

	cr_assert_lt(dt, SOON_NS, "2 waiters took %llu ms",
		     (unsigned long long)(dt / 1000000));
}

/*
 * Two shared waiters and an exclusive one behind them, all asleep: the
 * release grants the two; the broadcast wakes the third too, which must
 * find itself still pending and sleep again until they let go.
 */
Test(broadcast, an_exclusive_waiter_woken_by_a_broadcast_sleeps_again, T_FIX,
     .timeout = 30)
{
	static const struct wlk_options ex = {.mode = WLK_EXCLUSIVE};
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	struct crowd s, x;
	pid_t ps, px;

	crowd_open(&s, 2, &sh);
	crowd_open(&x, 1, &ex);
	T_ASSERT_RC(wlk_acquire(m, "b", 1, NULL, &l), 0);
	ps = t_fork(crowd_child, &s);
	cr_assert(t_wait_pending(m, "b", 1, 2), "shared ones did not queue");
	px = t_fork(crowd_child, &x);
	cr_assert(t_wait_pending(m, "b", 1, 3), "exclusive did not queue");
	cr_assert(wait_sleepers(3), "waiters did not fall asleep");

	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_get_byte(s.up.rd), 'g', "shared ones not granted");
	cr_assert_not(t_readable(x.up.rd), "exclusive granted beside shared");
	cr_assert_eq(t_held_n(m, "b", 1), 2);
	cr_assert_eq(t_pending_n(m, "b", 1), 1);

	cr_assert_eq(t_put_byte(s.down.wr, 'r'), 0);
	cr_assert_eq(t_get_byte(x.up.rd), 'g', "exclusive not granted");
	cr_assert_eq(t_put_byte(x.down.wr, 'r'), 0);
	cr_assert_eq(t_wait(ps, T_WAIT_MS), 0);
	cr_assert_eq(t_wait(px, T_WAIT_MS), 0);
	crowd_close(&s);
	crowd_close(&x);
	t_close(m);
}
