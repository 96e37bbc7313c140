/* SPDX-License-Identifier: MIT */
/*
 * t_fast_mp.c - locks another process took without the segment mutex
 * (lib/state/fastword.c, lib/shm/lane.c): seen by query, and given up when
 * that process dies, whether or not somebody was already waiting when it
 * died.
 */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "../common.h"

#define HOLD_MS 60000

static const struct wlk_options ex_ia = {.if_available = true};
static const struct wlk_options sh = {.mode = WLK_SHARED};

struct fast_child {
	struct t_pipe up, down;
	struct wlk_options opt;
};

/* Child: take "f" once under the mutex, then again by the fast path; say
 * 'g'; wait for a byte (or be killed); release. */
static int child(void *arg)
{
	struct fast_child *c = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;
	char b;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK(wlk_acquire(m, "f", 1, &c->opt, &l) == 0, 11);
	T_CHILD_CHECK(wlk_release(l) == 0, 12);
	T_CHILD_CHECK(wlk_acquire(m, "f", 1, &c->opt, &l) == 0, 13);
	T_CHILD_CHECK(t_put_byte(c->up.wr, 'g') == 0, 14);
	T_CHILD_CHECK(t_get(c->down.rd, &b, 1, HOLD_MS) == 0, 15);
	T_CHILD_CHECK(wlk_release(l) == 0, 16);
	wlk_manager_close(m);
	return 0;
}

static pid_t start(struct fast_child *c, const struct wlk_options *o)
{
	pid_t pid;

	memset(c, 0, sizeof(*c));
	if (o)
		c->opt = *o;
	t_pipe_open(&c->up);
	t_pipe_open(&c->down);
	pid = t_fork(child, c);
	cr_assert_eq(t_get_byte(c->up.rd), 'g', "the child did not get \"f\"");
	return pid;
}

static void stop(struct fast_child *c)
{
	t_pipe_close(&c->up);
	t_pipe_close(&c->down);
}

Test(fast_mp, holder_killed_before_anyone_waits, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open(), *m2 = t_open();
	struct wlk_lock *l = (struct wlk_lock *)&l, *l2;
	struct fast_child c;
	pid_t pid;

	/* m2 keeps a slot for the fast path: its next take of an idle
	 * name goes without the mutex. */
	T_ASSERT_RC(wlk_acquire(m2, "w", 1, NULL, &l2), 0);
	T_ASSERT_RC(wlk_release(l2), 0);
	pid = start(&c, NULL);
	T_ASSERT_RC(wlk_acquire(m, "f", 1, &ex_ia, &l), 0);
	cr_assert_null(l, "a live fast holder was overlooked");
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 128 + SIGKILL);
	/* Nobody watched it die: the next request finds it dead. Reaping
	 * it left the name idle, and back on the fast path for a moment:
	 * the request (from a new manager, granted under the mutex) must
	 * take the name off it again. */
	m = t_open();
	T_ASSERT_RC(wlk_acquire(m, "f", 1, &ex_ia, &l), 0);
	cr_assert_not_null(l, "the dead fast holder kept its lock");
	T_ASSERT_RC(wlk_manager_validate(m, NULL, NULL), 0);
	l2 = (struct wlk_lock *)&l2;
	T_ASSERT_RC(wlk_acquire(m2, "f", 1, &ex_ia, &l2), 0);
	cr_assert_null(l2, "granted to a fast taker beside its holder");
	T_ASSERT_RC(wlk_release(l), 0);
	T_ASSERT_RC(wlk_manager_validate(m, NULL, NULL), 0);
	stop(&c);
}

Test(fast_mp, holder_killed_while_a_waiter_sleeps, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct fast_child c;
	struct t_holder w;
	pid_t pid = start(&c, NULL);

	cr_assert_eq(t_held_by_pid(m, "f", 1, pid), 1);
	t_holder_start(&w, m, "f", 1, NULL);
	cr_assert(t_wait_pending(m, "f", 1, 1), "the waiter did not queue");
	cr_assert_not(t_holder_granted_now(&w));
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(t_holder_wait_granted(&w), 0, "not granted after death");
	cr_assert(w.got);
	cr_assert_eq(t_holder_release(&w), 0);
	t_holder_join(&w);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 128 + SIGKILL);
	T_ASSERT_RC(wlk_manager_validate(m, NULL, NULL), 0);
	stop(&c);
}

Test(fast_mp, shared_holder_seen_and_released_in_order, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	struct fast_child c;
	pid_t pid = start(&c, &sh);

	cr_assert_eq(t_held_by_pid(m, "f", 1, pid), 1);
	T_ASSERT_RC(wlk_acquire(m, "f", 1, &sh, &l), 0);
	cr_assert_eq(t_held_n(m, "f", 1), 2);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_put_byte(c.down.wr, 'r'), 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0, "the child failed");
	cr_assert_eq(t_held_n(m, "f", 1), 0);
	stop(&c);
}
