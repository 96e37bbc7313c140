/* SPDX-License-Identifier: MIT */
/*
 * t_deep.c - deep queues: a waiter looks for the processes blocking it
 * among the first WLK_WATCH_WALK (64) holders and requests of its name
 * only (lib/repair/reap.c), and is woken to look again when it reaches
 * the head of the queue (lib/spec/queue.c). A death the first look could
 * not see must still wake it at once.
 */
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "../common.h"
#include "weblocks/async.h"

/* More requests ahead than a waiter looks at (WLK_WATCH_WALK). */
#define FILLERS 80
/* A death noticed on time: well below the 1 s safety re-check a waiter
 * falls back to. */
#define PROMPT_MS 500

static const struct wlk_options sh = { .mode = WLK_SHARED };

struct child {
	struct t_pipe up;   /* child -> parent */
	struct t_pipe down; /* parent -> child */
	bool scope;         /* child_acquire(): "c" and "d" as one scope */
};

static void child_open(struct child *c)
{
	memset(c, 0, sizeof(*c));
	t_pipe_open(&c->up);
	t_pipe_open(&c->down);
}

static void child_close(struct child *c)
{
	t_pipe_close(&c->up);
	t_pipe_close(&c->down);
}

static atomic_int released;

static void release_at_once(struct wlk_async *req, int status,
			    struct wlk_lock *l, void *arg)
{
	(void)req;
	(void)arg;
	if (!status && l && wlk_release(l) == 0)
		atomic_fetch_add(&released, 1);
}

/* Child: FILLERS shared requests from one event loop, each released as
 * soon as it is granted; 'q' once queued, 'd' once all released. */
static int child_fillers(void *arg)
{
	struct child *c = arg;
	struct wlk_manager *m = NULL;
	char b;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	for (int i = 0; i < FILLERS; i++)
		T_CHILD_CHECK(wlk_request_async(m, "d", 1, &sh,
						release_at_once, NULL,
						NULL) == 0, 11);
	T_CHILD_CHECK(t_put_byte(c->up.wr, 'q') == 0, 12);
	T_CHILD_CHECK(t_pump(m, &released, FILLERS, 3 * T_WAIT_MS), 13);
	T_CHILD_CHECK(t_put_byte(c->up.wr, 'd') == 0, 14);
	T_CHILD_CHECK(t_get(c->down.rd, &b, 1, 3 * T_WAIT_MS) == 0, 15);
	wlk_manager_close(m);
	return 0;
}

/* Child: a blocking exclusive acquire of "d" (and "c" with it, as one
 * scope, if c->scope); 'g' once held; then holds until told (or
 * killed). */
static int child_acquire(void *arg)
{
	static const struct wlk_name cd[] = {{"c", 1}, {"d", 1}};
	struct child *c = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;
	char b;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK((c->scope ? wlk_acquire_scope(m, cd, 2, NULL, &l)
				: wlk_acquire(m, "d", 1, NULL, &l)) == 0, 11);
	T_CHILD_CHECK(t_put_byte(c->up.wr, 'g') == 0, 12);
	T_CHILD_CHECK(t_get(c->down.rd, &b, 1, 3 * T_WAIT_MS) == 0, 13);
	T_CHILD_CHECK(wlk_release(l) == 0, 14);
	wlk_manager_close(m);
	return 0;
}

/* The parent (@m) holds "d" (*@l); then F queues FILLERS shared requests
 * and X one exclusive request behind them. */
static void queue_behind_fillers(struct wlk_manager *m, struct wlk_lock **l,
				 struct child *f, pid_t *pf, struct child *x,
				 pid_t *px)
{
	T_ASSERT_RC(wlk_acquire(m, "d", 1, NULL, l), 0);
	child_open(f);
	*pf = t_fork(child_fillers, f);
	cr_assert_eq(t_get_byte(f->up.rd), 'q', "fillers did not queue");
	cr_assert(t_wait_pending(m, "d", 1, FILLERS));
	child_open(x);
	*px = t_fork(child_acquire, x);
	cr_assert(t_wait_pending(m, "d", 1, FILLERS + 1), "X did not queue");
}

/*
 * The parent holds "d"; FILLERS shared requests of one process queue,
 * then X, then W. W's first look sees the parent and the fillers' process
 * only. The parent lets go, the fillers pass, X holds; W, now first in
 * the queue, must watch X: X is killed, and W is granted at once (a
 * scope, at its next re-check: WLK_RECHECK_NS).
 */
static void new_holder_dies(bool scope)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	struct child f, x, w;
	pid_t pf, px, pw;
	uint64_t t0;

	queue_behind_fillers(m, &l, &f, &pf, &x, &px);
	child_open(&w);
	w.scope = scope;
	pw = t_fork(child_acquire, &w);
	cr_assert(t_wait_pending(m, "d", 1, FILLERS + 2), "W did not queue");

	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_get_byte(f.up.rd), 'd', "fillers not granted");
	cr_assert_eq(t_get_byte(x.up.rd), 'g', "X not granted");
	cr_assert(t_wait_pending(m, "d", 1, 1));
	cr_assert_not(t_readable(w.up.rd), "W granted while X holds");

	t0 = t_now_ns();
	cr_assert_eq(kill(px, SIGKILL), 0);
	cr_assert_eq(t_get_byte(w.up.rd), 'g', "W not granted");
	cr_assert_lt(t_now_ns() - t0, PROMPT_MS * 1000000ull,
		     "W granted %llu ms after X's death",
		     (unsigned long long)((t_now_ns() - t0) / 1000000));
	cr_assert_eq(t_wait(px, T_WAIT_MS), 128 + SIGKILL);
	cr_assert_eq(t_put_byte(w.down.wr, 'r'), 0);
	cr_assert_eq(t_wait(pw, T_WAIT_MS), 0);
	cr_assert_eq(t_put_byte(f.down.wr, 'r'), 0);
	cr_assert_eq(t_wait(pf, T_WAIT_MS), 0);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
	t_assert_valid(m, NULL);
	child_close(&f);
	child_close(&x);
	child_close(&w);
}

Test(deep, a_waiter_reaching_the_head_watches_the_new_holder, T_FIX,
     .timeout = 40)
{
	new_holder_dies(false);
}

Test(deep, a_scope_behind_a_deep_queue_sees_the_new_holder_die, T_FIX,
     .timeout = 40)
{
	new_holder_dies(true);
}

/* The slice sched_getattr(2) reports for thread @tid (common.h); 0 on a
 * kernel without custom slices. */
static uint64_t slice_of(pid_t tid)
{
	struct t_sched_attr a;

	return t_sched_get(tid, &a) < 0 ? 0 : a.runtime;
}

/*
 * As above, but X holds on: W, woken when it reaches the head, counts as
 * first in its queue from then on, and at the next tick asks for a short
 * time slice (lib/sys/slice.c), which it gives back once granted.
 */
Test(deep, a_waiter_woken_at_the_head_asks_for_a_short_slice, T_FIX,
     .timeout = 40)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	struct child f, x, w;
	uint64_t before;
	pid_t pf, px, pw;

	if (!slice_of(0))
		cr_skip_test("this kernel has no custom time slices (6.12+)");
	queue_behind_fillers(m, &l, &f, &pf, &x, &px);
	child_open(&w);
	pw = t_fork(child_acquire, &w);
	cr_assert(t_wait_pending(m, "d", 1, FILLERS + 2), "W did not queue");
	before = slice_of(pw);
	cr_assert_neq(before, T_SHORT_SLICE_NS);

	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_get_byte(f.up.rd), 'd', "fillers not granted");
	cr_assert_eq(t_get_byte(x.up.rd), 'g', "X not granted");
	cr_assert(t_wait_short_slice(pw),
		  "W, first in the queue, kept its slice");

	cr_assert_eq(t_put_byte(x.down.wr, 'r'), 0);
	cr_assert_eq(t_get_byte(w.up.rd), 'g', "W not granted");
	cr_assert_eq(slice_of(pw), before, "W did not give the slice back");
	cr_assert_eq(t_wait(px, T_WAIT_MS), 0);
	cr_assert_eq(t_put_byte(w.down.wr, 'r'), 0);
	cr_assert_eq(t_wait(pw, T_WAIT_MS), 0);
	cr_assert_eq(t_put_byte(f.down.wr, 'r'), 0);
	cr_assert_eq(t_wait(pf, T_WAIT_MS), 0);
	t_assert_valid(m, NULL);
	child_close(&f);
	child_close(&x);
	child_close(&w);
}

/* The same with W an event loop: the new holder's death reaches it
 * through its watch of the processes nearest the head, which it looks
 * at again at each dispatch, or at its re-check (WLK_RECHECK_NS). */
static atomic_int w_granted;

static void granted_flag(struct wlk_async *req, int status,
			 struct wlk_lock *l, void *arg)
{
	(void)req;
	*(struct wlk_lock **)arg = status ? NULL : l;
	atomic_fetch_add(&w_granted, 1);
}

Test(deep, an_event_loop_behind_a_deep_queue_sees_the_holder_die, T_FIX,
     .timeout = 40)
{
	struct wlk_manager *m = t_open(), *wm = t_open();
	struct wlk_lock *l = NULL, *got = NULL;
	struct child f, x;
	pid_t pf, px;

	queue_behind_fillers(m, &l, &f, &pf, &x, &px);
	T_ASSERT_RC(wlk_request_async(wm, "d", 1, NULL, granted_flag, &got,
				      NULL), 0);
	T_ASSERT_RC(t_dispatch_ready(wm), 0);

	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_get_byte(f.up.rd), 'd', "fillers not granted");
	cr_assert_eq(t_get_byte(x.up.rd), 'g', "X not granted");
	cr_assert_eq(kill(px, SIGKILL), 0);
	cr_assert(t_pump(wm, &w_granted, 1, T_WAIT_MS),
		  "the event loop was not granted after X's death");
	cr_assert_not_null(got);
	T_ASSERT_RC(wlk_release(got), 0);
	cr_assert_eq(t_wait(px, T_WAIT_MS), 128 + SIGKILL);
	cr_assert_eq(t_put_byte(f.down.wr, 'r'), 0);
	cr_assert_eq(t_wait(pf, T_WAIT_MS), 0);
	t_assert_valid(m, NULL);
	child_close(&f);
	child_close(&x);
}
