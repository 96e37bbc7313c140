/* SPDX-License-Identifier: MIT */
/*
 * t_deadlock_mp.c - detect_deadlocks across processes: the cycle is seen
 * in the segment, whoever waits in it. And a process that dies holding
 * its part of a would-be cycle takes it with it.
 */
#include <signal.h>

#include "../common.h"

struct kid {
	struct t_pipe up, down;
};

static int open_detecting(struct wlk_manager **m)
{
	struct wlk_manager_options o = WLK_MANAGER_OPTIONS_INIT;

	o.detect_deadlocks = true;
	return wlk_manager_open(t_origin, &o, m);
}

/* Child: hold "y" ('h'), then wait for "x" ('g' once granted); let go
 * when told. */
static int child_y_then_x(void *arg)
{
	struct kid *k = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *ly = NULL, *lx = NULL;
	char c;

	T_CHILD_CHECK(open_detecting(&m) == 0, 10);
	T_CHILD_CHECK(wlk_acquire(m, "y", 1, NULL, &ly) == 0, 11);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'h') == 0, 12);
	T_CHILD_CHECK(wlk_acquire(m, "x", 1, NULL, &lx) == 0, 13);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'g') == 0, 14);
	T_CHILD_CHECK(t_get(k->down.rd, &c, 1, T_WAIT_MS) == 0, 15);
	T_CHILD_CHECK(wlk_release(lx) == 0, 16);
	T_CHILD_CHECK(wlk_release(ly) == 0, 17);
	wlk_manager_close(m);
	return 0;
}

/* Hold "x" in this process and queue the child behind it: the child holds
 * "y" and waits for "x". */
static pid_t setup(struct kid *k, struct wlk_manager **m,
		   struct wlk_lock **lx)
{
	pid_t pid;

	t_pipe_open(&k->up);
	t_pipe_open(&k->down);
	T_ASSERT_RC(open_detecting(m), 0);
	T_ASSERT_RC(wlk_acquire(*m, "x", 1, NULL, lx), 0);
	pid = t_fork(child_y_then_x, k);
	cr_assert_eq(t_get_byte(k->up.rd), 'h', "child did not take y");
	cr_assert(t_wait_pending(*m, "x", 1, 1), "child did not queue");
	return pid;
}

Test(deadlock_mp, a_cycle_across_two_processes_is_refused, T_FIX,
     .timeout = 30)
{
	struct wlk_manager *m = NULL;
	struct wlk_lock *lx = NULL, *l = (struct wlk_lock *)&l;
	struct kid k;
	pid_t pid;

	pid = setup(&k, &m, &lx);

	T_ASSERT_RC(wlk_acquire(m, "y", 1, NULL, &l), WLK_EDEADLK);
	cr_assert_eq(t_pending_n(m, "y", 1), 0, "refused, yet queued");

	T_ASSERT_RC(wlk_release(lx), 0);
	cr_assert_eq(t_get_byte(k.up.rd), 'g', "child not granted x");
	cr_assert_eq(t_put_byte(k.down.wr, 'r'), 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	wlk_manager_close(m);
	t_pipe_close(&k.up);
	t_pipe_close(&k.down);
}

/* The child dies holding y and waiting for x: its part of the graph goes
 * with it, and asking for y is an ordinary wait, granted. */
Test(deadlock_mp, a_dead_process_leaves_no_cycle_behind, T_FIX,
     .timeout = 30)
{
	struct wlk_manager *m = NULL;
	struct wlk_lock *lx = NULL, *ly = NULL;
	struct kid k;
	pid_t pid;

	pid = setup(&k, &m, &lx);
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 128 + SIGKILL);

	T_ASSERT_RC(wlk_acquire(m, "y", 1, NULL, &ly), 0);
	cr_assert_not_null(ly);
	T_ASSERT_RC(wlk_release(ly), 0);
	T_ASSERT_RC(wlk_release(lx), 0);
	wlk_manager_close(m);
	t_pipe_close(&k.up);
	t_pipe_close(&k.down);
}
