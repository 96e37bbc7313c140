/* SPDX-License-Identifier: MIT */
/*
 * t_pins.c - a lock the fast path took holds no reference to its manager:
 * its lane keeps the manager (lib/engine/engine.h and lib/shm/seal.c,
 * PINS). Closing the manager must still keep it, and its bucket, for as
 * long as such a lock exists, and free both once the last one goes: the
 * bucket's removal (-EBUSY while anything of the manager is alive) shows
 * which. AddressSanitizer builds also see a manager freed too early.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>

#include "../common.h"

/* Threads taking and releasing locks on one manager while it is closed:
 * more than the manager has lanes (tunables.h, WLK_LANES), so that some
 * take the mutex path, counted, beside the fast ones. */
#define RACERS 6
/* Pairs each racer makes before the close may come. */
#define WARM_PAIRS 200
/* Rounds of open, race, close. */
#define ROUNDS 40

/* Take "@name" and release it at once, twice: the second take is fast
 * (the first makes the name known and fills a lane). */
static struct wlk_lock *take_fast(struct wlk_manager *m, const char *name)
{
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(m, name, WLK_NUL_TERMINATED, NULL, &l), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	l = NULL;
	T_ASSERT_RC(wlk_acquire(m, name, WLK_NUL_TERMINATED, NULL, &l), 0);
	cr_assert_not_null(l);
	return l;
}

Test(pins, fast_lock_keeps_its_closed_manager_and_bucket, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *a = take_fast(m, "a"), *b = take_fast(m, "b");
	uint64_t token = wlk_lock_token(a);

	t_forget(m);
	wlk_manager_close(m);
	/* Closed: calls fail, the locks' handles still answer. */
	T_ASSERT_RC(wlk_acquire(m, "c", WLK_NUL_TERMINATED, NULL,
				&(struct wlk_lock *){NULL}),
		    WLK_ESTATE);
	cr_assert_eq(wlk_lock_token(a), token);
	T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), -EBUSY);
	T_ASSERT_RC(wlk_release(a), WLK_ESTATE); /* close released it */
	/* One lock left: still kept. */
	T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), -EBUSY);
	T_ASSERT_RC(wlk_release(b), WLK_ESTATE);
	T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), 0);
}

/* A fast lock the mutex side took over (stolen: its slot STOLEN, no
 * longer FAST) still keeps its closed manager (seal.c: the close looks at
 * the lanes' slots before the client's slots go). */
Test(pins, stolen_fast_lock_keeps_its_closed_manager, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open(), *n = t_open();
	struct wlk_options steal = {.steal = true};
	struct wlk_lock *a = take_fast(m, "a"), *s = NULL;

	T_ASSERT_RC(wlk_acquire(n, "a", 1, &steal, &s), 0);
	cr_assert(wlk_lock_stolen(a));
	T_ASSERT_RC(wlk_release(s), 0);
	t_forget(n);
	wlk_manager_close(n);
	t_forget(m);
	wlk_manager_close(m);
	T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), -EBUSY);
	/* The close freed its slot: as for any lock of a closed manager. */
	T_ASSERT_RC(wlk_release(a), WLK_ESTATE);
	T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), 0);
}

Test(pins, closed_manager_without_locks_lets_go_at_once, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m = t_open();

	/* Lanes filled and idle: the close must drop what it counted for
	 * them itself. */
	T_ASSERT_RC(wlk_release(take_fast(m, "a")), 0);
	t_forget(m);
	wlk_manager_close(m);
	T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), 0);
}

struct racer {
	struct wlk_manager *m;
	pthread_t tid;
	char name[16];
	long pairs;      /* pairs made */
	int last_rc;     /* what ended the loop */
	int bad_release; /* first release that failed, or 0 */
};

static atomic_int warmed;

static void *race(void *arg)
{
	struct racer *r = arg;

	for (;;) {
		struct wlk_lock *l = NULL;
		int rc = wlk_acquire(r->m, r->name, WLK_NUL_TERMINATED, NULL,
				     &l);

		if (rc) {
			r->last_rc = rc;
			return NULL;
		}
		rc = wlk_release(l);
		/* A release after the close may report the manager gone;
		 * anything else is wrong. */
		if (rc && rc != WLK_ESTATE && !r->bad_release)
			r->bad_release = rc;
		if (++r->pairs == WARM_PAIRS)
			atomic_fetch_add(&warmed, 1);
	}
}

Test(pins, close_racing_fast_acquires_frees_once, T_FIX, .timeout = 60)
{
	for (int round = 0; round < ROUNDS; round++) {
		struct wlk_manager *m = t_open();
		struct racer r[RACERS];
		/* Keeps the manager alive for the racers' calls, which the
		 * API requires of its caller (a call on a freed manager is
		 * undefined): closed under them, it stays until released. */
		struct wlk_lock *keep = take_fast(m, "keep");

		atomic_store(&warmed, 0);
		for (int i = 0; i < RACERS; i++) {
			r[i] = (struct racer){.m = m};
			snprintf(r[i].name, sizeof(r[i].name), "n%d", i);
			cr_assert_eq(pthread_create(&r[i].tid, NULL, race,
						    &r[i]),
				     0);
		}
		/* Bounded by the test's timeout; no sleep. */
		while (atomic_load(&warmed) < RACERS)
			sched_yield();
		t_forget(m);
		wlk_manager_close(m);
		for (int i = 0; i < RACERS; i++)
			pthread_join(r[i].tid, NULL);
		for (int i = 0; i < RACERS; i++) {
			cr_assert_eq(r[i].last_rc, WLK_ESTATE,
				     "round %d racer %d ended with %s", round,
				     i, t_ename(r[i].last_rc));
			cr_assert_eq(r[i].bad_release, 0,
				     "round %d racer %d: release gave %s",
				     round, i, t_ename(r[i].bad_release));
		}
		T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), -EBUSY);
		T_ASSERT_RC(wlk_release(keep), WLK_ESTATE);
		T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), 0);
	}
}
