/* SPDX-License-Identifier: MIT */
/*
 * t_scope_mp.c - scopes across processes (weblocks.h, SCOPES): a process
 * that dies holding or waiting for a scope releases or drops it on every
 * name; one that dies granting a scope leaves it granted whole; FIFO
 * across processes; and scopes listed in opposite orders never deadlock.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../scope_common.h"

struct kid {
	struct t_pipe up, down;
	const char *point; /* a fail point to arm, or NULL */
};

static const struct wlk_name ab[] = {N("a"), N("b")};

static void kid_open(struct kid *k)
{
	t_pipe_open(&k->up);
	t_pipe_open(&k->down);
}

static void kid_close(struct kid *k)
{
	t_pipe_close(&k->up);
	t_pipe_close(&k->down);
}

/* Child: take the scope {a, b} (waiting if need be), say 'g', then hold
 * it until told to let go (or killed). */
static int child_scope(void *arg)
{
	struct kid *k = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;
	char c;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'o') == 0, 11);
	T_CHILD_CHECK(wlk_acquire_scope(m, ab, 2, NULL, &l) == 0, 12);
	T_CHILD_CHECK(wlk_lock_scope_count(l) == 2, 13);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'g') == 0, 14);
	T_CHILD_CHECK(t_get(k->down.rd, &c, 1, 3 * T_WAIT_MS) == 0, 15);
	T_CHILD_CHECK(wlk_release(l) == 0, 16);
	wlk_manager_close(m);
	return 0;
}

Test(scope_mp, death_while_holding_releases_every_name, T_FIX,
     .timeout = 30)
{
	struct wlk_manager *m = t_open();
	struct t_holder wa;
	struct rec wb = {0};
	struct kid k;
	pid_t pid;

	kid_open(&k);
	pid = t_fork(child_scope, &k);
	cr_assert_eq(t_get_byte(k.up.rd), 'o');
	cr_assert_eq(t_get_byte(k.up.rd), 'g', "child got no scope");
	t_holder_start(&wa, m, "a", 1, NULL);
	rec_single(m, "b", &sh, &wb);
	cr_assert(t_wait_pending(m, "a", 1, 1));
	cr_assert_eq(t_pending_n(m, "b", 1), 1);
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 128 + SIGKILL);
	cr_assert_eq(t_holder_wait_granted(&wa), 0, "\"a\" never granted");
	T_ASSERT_RC(wa.acq_rc, 0);
	rec_wait(m, &wb, 0);
	cr_assert_eq(t_entries_of(m, pid), 0, "the dead child remains");
	rec_release(&wb);
	cr_assert_eq(t_holder_release(&wa), 0);
	t_holder_join(&wa);
	t_assert_valid(m, NULL);
	kid_close(&k);
}

Test(scope_mp, death_while_queued_drops_it_from_every_queue, T_FIX,
     .timeout = 30)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *la = NULL;
	struct rec wb = {0};
	struct kid k;
	pid_t pid;

	T_ASSERT_RC(wlk_acquire(m, "a", 1, NULL, &la), 0);
	kid_open(&k);
	pid = t_fork(child_scope, &k);
	cr_assert_eq(t_get_byte(k.up.rd), 'o');
	cr_assert(t_wait_pending(m, "b", 1, 1), "child did not queue");
	rec_single(m, "b", NULL, &wb); /* behind the child's scope */
	cr_assert_not(rec_now(m, &wb));
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 128 + SIGKILL);
	rec_wait(m, &wb, 0);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
	cr_assert_eq(t_entries_of(m, pid), 0, "the dead child remains");
	rec_release(&wb);
	T_ASSERT_RC(wlk_release(la), 0);
	t_assert_valid(m, NULL);
	kid_close(&k);
}

/* FIFO across processes: a scope queued in another process goes before
 * this process's later request on its free name, and after the earlier
 * holder of its other name. */
Test(scope_mp, fifo_across_processes, T_FIX, .timeout = 30)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *la = NULL;
	struct rec wb = {0};
	struct kid k;
	pid_t pid;

	T_ASSERT_RC(wlk_acquire(m, "a", 1, NULL, &la), 0);
	kid_open(&k);
	pid = t_fork(child_scope, &k);
	cr_assert_eq(t_get_byte(k.up.rd), 'o');
	cr_assert(t_wait_pending(m, "b", 1, 1), "child did not queue");
	rec_single(m, "b", NULL, &wb);
	cr_assert_not(rec_now(m, &wb));
	T_ASSERT_RC(wlk_release(la), 0);
	cr_assert_eq(t_get_byte(k.up.rd), 'g', "the scope was not granted");
	cr_assert_not(rec_now(m, &wb));
	cr_assert_eq(t_put_byte(k.down.wr, 'r'), 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	rec_wait(m, &wb, 0);
	rec_release(&wb);
	kid_close(&k);
}

/* Child: hold "a", then release it, with a fail point armed in the grant
 * of the scope waiting for it: it dies halfway through that grant. (Fail
 * points are read at a process's first; this one is passed only there.) */
static int child_grant_dies(void *arg)
{
	struct kid *k = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;
	char c;

	T_CHILD_CHECK(setenv("WLK_FAILPOINT", k->point, 1) == 0, 14);
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK(wlk_acquire(m, "a", 1, NULL, &l) == 0, 11);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'h') == 0, 12);
	T_CHILD_CHECK(t_get(k->down.rd, &c, 1, T_WAIT_MS) == 0, 13);
	T_CHILD_CHECK(wlk_release(l) == 0, 15);
	return 16; /* the fail point was not reached */
}

/* A process that dies granting a scope to another leaves it granted on
 * every name (the intent record is redone by the next locker). */
Test(scope_mp, a_granter_dying_halfway_grants_the_whole_scope, T_FIX,
     .timeout = 30)
{
	struct wlk_manager *m, *m2;
	struct wlk_lock *l = NULL;
	struct t_holder wb;
	struct rec s = {0};
	struct kid k = {.point = "scope_grant_mid"};
	pid_t pid;

	/* Before anything is opened: a skipped test's .fini does not run. */
#ifndef WLK_ENABLE_FAILPOINTS
	cr_skip_test("fail points are not compiled in (--enable-failpoints)");
#endif
	m = t_open();
	m2 = t_open();
	kid_open(&k);
	pid = t_fork(child_grant_dies, &k);
	cr_assert_eq(t_get_byte(k.up.rd), 'h');
	rec_scope(m, ab, 2, NULL, &s);
	t_holder_start(&wb, m2, "b", 1, NULL); /* behind the scope */
	cr_assert(t_wait_pending(m, "b", 1, 2));
	cr_assert_eq(t_put_byte(k.down.wr, 'r'), 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 128 + SIGKILL,
		     "the child did not die in the grant");
	rec_wait(m, &s, 0);
	cr_assert_eq(t_held_n(m, "a", 1), 1);
	cr_assert_eq(t_held_n(m, "b", 1), 1);
	cr_assert_not(t_holder_granted_now(&wb), "\"b\" granted twice");
	cr_assert_gt(wlk_lock_scope_token(s.lock, 1), 0);
	t_assert_valid(m, NULL);
	rec_release(&s);
	cr_assert_eq(t_holder_wait_granted(&wb), 0);
	T_ASSERT_RC(wb.acq_rc, 0);
	cr_assert_eq(t_holder_release(&wb), 0);
	t_holder_join(&wb);
	T_ASSERT_RC(wlk_acquire(m, "a", 1, NULL, &l), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	kid_close(&k);
}

/*
 * Opposite orders: processes take {x, y} listed one way or the other, and
 * single names, for a while; with scopes nobody can hold one name and wait
 * for the other, so all of them finish (the test's timeout is the
 * deadlock detector) and no two exclusive holders ever overlap.
 */
#define ROUNDS 300
struct tally {
	atomic_int inside[2]; /* holders of x and y right now */
	atomic_int overlaps;
};

static int child_orders(void *arg)
{
	struct tally *t = arg;
	struct wlk_manager *m = NULL;
	struct wlk_name xy[] = {N("x"), N("y")}, yx[] = {N("y"), N("x")};
	int me = getpid() & 1;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	for (int i = 0; i < t_rounds(ROUNDS); i++) {
		struct wlk_lock *l = NULL;
		int single = (i % 3 == 2) ? (i & 1) : -1;

		if (single >= 0)
			T_CHILD_CHECK(wlk_acquire(m, single ? "y" : "x", 1,
						  NULL, &l) == 0,
				      11);
		else
			T_CHILD_CHECK(wlk_acquire_scope(m, (i + me) & 1 ? xy
								       : yx,
							2, NULL, &l) == 0,
				      12);
		for (int n = 0; n < 2; n++)
			if ((single < 0 || single == n) &&
			    atomic_fetch_add(&t->inside[n], 1) != 0)
				atomic_fetch_add(&t->overlaps, 1);
		sched_yield(); /* a wider window for an overlap */
		for (int n = 0; n < 2; n++)
			if (single < 0 || single == n)
				atomic_fetch_sub(&t->inside[n], 1);
		T_CHILD_CHECK(wlk_release(l) == 0, 13);
	}
	wlk_manager_close(m);
	return 0;
}

Test(scope_mp, scopes_in_opposite_orders_never_deadlock, T_FIX,
     .timeout = 60)
{
	struct tally *t = t_shared_alloc(sizeof(*t));
	struct wlk_manager *m = t_open();
	pid_t kids[3];

	for (int i = 0; i < 3; i++)
		kids[i] = t_fork(child_orders, t);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(t_wait(kids[i], 6 * T_WAIT_MS), 0,
			     "child %d stuck or failed", i);
	cr_assert_eq(atomic_load(&t->overlaps), 0,
		     "two exclusive holders at once");
	cr_assert_eq(t_held_n(m, NULL, 0) + t_pending_n(m, NULL, 0), 0);
	t_assert_valid(m, NULL);
	t_shared_free(t, sizeof(*t));
}

/* Child: steal the scope {a, b} with a fail point armed in the steal. */
static int child_steal_dies(void *arg)
{
	struct kid *k = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;
	const struct wlk_options steal = {.steal = true};

	T_CHILD_CHECK(setenv("WLK_FAILPOINT", k->point, 1) == 0, 10);
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 11);
	T_CHILD_CHECK(wlk_acquire_scope(m, ab, 2, &steal, &l) == 0, 12);
	return 13; /* the fail point was not reached */
}

/* A stealer that dies halfway through stealing a scope leaves the steal
 * done on every name (redone from the intent record), the victims all
 * stolen whole, and, being dead, nothing of its own. */
static void steal_dies(const char *point)
{
	struct wlk_manager *m, *m2;
	struct wlk_name bc[] = {N("b"), N("c")};
	struct wlk_options ia = {.if_available = true};
	struct wlk_lock *la = NULL, *lbc = NULL, *l = NULL;
	struct kid k = {.point = point};
	pid_t pid;

	/* Before anything is opened: a skipped test's .fini does not run. */
#ifndef WLK_ENABLE_FAILPOINTS
	cr_skip_test("fail points are not compiled in (--enable-failpoints)");
#endif
	m = t_open();
	m2 = t_open();
	T_ASSERT_RC(wlk_acquire(m, "a", 1, NULL, &la), 0);
	T_ASSERT_RC(wlk_acquire_scope(m2, bc, 2, NULL, &lbc), 0);
	kid_open(&k);
	pid = t_fork(child_steal_dies, &k);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 128 + SIGKILL,
		     "%s: the child did not die in the steal", point);
	/* The next locker repairs and reaps. */
	T_ASSERT_RC(wlk_acquire(m2, "c", 1, &ia, &l), 0);
	cr_assert(wlk_lock_stolen(la), "%s: \"a\" not stolen", point);
	cr_assert(wlk_lock_stolen(lbc), "%s: the scope not stolen", point);
	cr_assert_not_null(l, "%s: \"c\" kept by a stolen scope", point);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_entries_of(m, pid), 0, "%s: the dead stealer remains",
		     point);
	T_ASSERT_RC(wlk_release(la), WLK_ESTOLEN);
	T_ASSERT_RC(wlk_release(lbc), WLK_ESTOLEN);
	cr_assert_eq(t_held_n(m, NULL, 0) + t_pending_n(m, NULL, 0), 0);
	t_assert_valid(m, NULL);
	kid_close(&k);
}

Test(scope_mp, a_stealer_dying_after_its_intent_steals_everything, T_FIX,
     .timeout = 30)
{
	steal_dies("steal_after_intent");
}

Test(scope_mp, a_stealer_dying_halfway_steals_everything, T_FIX,
     .timeout = 30)
{
	steal_dies("steal_mid");
}

/* Child: hold "b" until killed. */
static int child_hold_b(void *arg)
{
	struct kid *k = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;
	char c;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK(wlk_acquire(m, "b", 1, NULL, &l) == 0, 11);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'h') == 0, 12);
	T_CHILD_CHECK(t_get(k->down.rd, &c, 1, 3 * T_WAIT_MS) == 0, 13);
	return 14; /* killed before this */
}

/* A thread waiting for the scope {a, b} in wlk_acquire_scope(). */
static void *scope_waiter(void *arg)
{
	struct wlk_manager *m = arg;
	struct wlk_lock *l = NULL;
	intptr_t rc = wlk_acquire_scope(m, ab, 2, NULL, &l);

	if (!rc)
		rc = wlk_release(l);
	return (void *)rc;
}

/* A blocking scope waits on its lead ("a"), but watches the holders of
 * every name: the death of the holder of "b" grants it at once, not after
 * a recheck. */
Test(scope_mp, a_waiter_sees_the_death_of_a_holder_of_any_name, T_FIX,
     .timeout = 30)
{
	struct wlk_manager *m = t_open();
	struct kid k;
	pthread_t th;
	void *ret;
	uint64_t t0;
	pid_t pid;

	kid_open(&k);
	pid = t_fork(child_hold_b, &k);
	cr_assert_eq(t_get_byte(k.up.rd), 'h', "child did not take b");
	cr_assert_eq(pthread_create(&th, NULL, scope_waiter, m), 0);
	cr_assert(t_wait_pending(m, "b", 1, 1));
	t0 = t_now_ns();
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 128 + SIGKILL);
	cr_assert_eq(pthread_join(th, &ret), 0);
	T_ASSERT_RC((int)(intptr_t)ret, 0);
	/* Well within the 1 s safety recheck that would find an unwatched
	 * dead blocker. */
	cr_assert_lt(t_now_ns() - t0, 500 * 1000000ull,
		     "granted %.1f ms after the death",
		     (double)(t_now_ns() - t0) / 1e6);
	cr_assert_eq(t_entries_of(m, pid), 0);
	t_assert_valid(m, NULL);
	kid_close(&k);
}
