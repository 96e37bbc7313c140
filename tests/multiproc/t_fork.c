/* SPDX-License-Identifier: MIT */
/* t_fork.c - fork(): the child inherits no locks and no managers. */
#include <string.h>
#include <unistd.h>

#include "../common.h"

static const struct wlk_options ex_ia = { .if_available = true };

struct inherit {
	struct wlk_manager *m;
	struct wlk_lock *l;
	int fd;
};

static int cb_mark(struct wlk_lock *lock, void *arg)
{
	return 1234;
}

/* Child: use the parent's manager and lock handle; report the results. */
static int child_use_inherited(void *arg)
{
	struct inherit *in = arg;
	struct wlk_options sh_ia = { .mode = WLK_SHARED,
				     .if_available = true };
	struct wlk_snapshot *s = NULL;
	struct wlk_lock *l = NULL;
	int rc[7];

	/* "r" is held by the parent: a real request would block. */
	rc[0] = wlk_acquire(in->m, "r", 1, NULL, &l);
	rc[1] = wlk_request(in->m, "r", 1, NULL, cb_mark, NULL);
	rc[2] = wlk_acquire(in->m, "free", 4, NULL, &l);
	rc[3] = wlk_acquire(in->m, "r", 1, &sh_ia, &l);
	rc[4] = wlk_query(in->m, &s);
	rc[5] = wlk_release(in->l);
	rc[6] = wlk_request(in->m, "free", 4, NULL, cb_mark, NULL);
	if (rc[4] == 0)
		wlk_snapshot_free(s);
	/* Frees only the child's copy. */
	wlk_manager_close(in->m);
	return t_put(in->fd, rc, sizeof(rc)) == 0 ? 0 : 1;
}

/*
 * Fork a child that uses @in's manager and lock (held on "r"): every call
 * in the child is WLK_ESTATE and none hangs; nothing it did touched the
 * parent's state, whose lock is then released.
 */
static void check_inherited(struct inherit *in)
{
	struct t_pipe p;
	int rc[7], i;
	pid_t pid;

	t_pipe_open(&p);
	in->fd = p.wr;
	pid = t_fork(child_use_inherited, in);
	cr_assert_eq(t_get(p.rd, rc, sizeof(rc), T_WAIT_MS), 0,
		     "child hung using inherited handles");
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	for (i = 0; i < 7; i++)
		cr_assert_eq(rc[i], WLK_ESTATE, "call %d in child: %s", i,
			     t_ename(rc[i]));
	cr_assert_eq(t_held_n(in->m, NULL, 0), 1);
	cr_assert_eq(t_held_by_pid(in->m, "r", 1, getpid()), 1);
	cr_assert_eq(t_pending_n(in->m, NULL, 0), 0);
	cr_assert_not(wlk_lock_stolen(in->l));
	T_ASSERT_RC(wlk_release(in->l), 0);
	cr_assert_eq(t_held_n(in->m, NULL, 0), 0);
	t_pipe_close(&p);
}

Test(fork, inherited_manager_and_lock_are_estate_and_never_hang, T_FIX,
     .timeout = 20)
{
	struct inherit in = { .m = t_open() };

	T_ASSERT_RC(wlk_acquire(in.m, "r", 1, NULL, &in.l), 0);
	check_inherited(&in);
}

/* The same with a lock the fast path took (the second take of a name):
 * it holds a lane of the manager, not a reference (engine.h, PINS), and
 * the child's release and close let go of the child's copies only. */
Test(fork, inherited_fast_lock_is_estate_and_its_copy_freed, T_FIX,
     .timeout = 20)
{
	struct inherit in = { .m = t_open() };

	T_ASSERT_RC(wlk_acquire(in.m, "r", 1, NULL, &in.l), 0);
	T_ASSERT_RC(wlk_release(in.l), 0);
	T_ASSERT_RC(wlk_acquire(in.m, "r", 1, NULL, &in.l), 0);
	check_inherited(&in);
}

static int child_exit_without_close(void *arg)
{
	struct inherit *in = arg;

	(void)in;
	return 0;
}

Test(fork, child_exit_leaves_parent_locks_alone, T_FIX, .timeout = 20)
{
	struct inherit in = { .m = t_open() };
	struct wlk_manager *o = t_open();
	struct wlk_lock *l = (struct wlk_lock *)&l;
	pid_t pid;

	T_ASSERT_RC(wlk_acquire(in.m, "r", 1, NULL, &in.l), 0);
	pid = t_fork(child_exit_without_close, &in);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	T_ASSERT_RC(wlk_acquire(o, "r", 1, &ex_ia, &l), 0);
	cr_assert_null(l, "child's exit released the parent's lock");
	T_ASSERT_RC(wlk_release(in.l), 0);
}

struct fresh {
	struct t_pipe up;
	struct t_pipe down;
};

/*
 * Child: open a new manager; it works: probe "r" (held by the parent, must
 * miss), say 'q', queue for it, say 'g' when granted, hold until told.
 */
static int child_fresh_manager(void *arg)
{
	struct fresh *f = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = (struct wlk_lock *)&l, *l2 = NULL;
	char c;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK(wlk_acquire(m, "other", 5, NULL, &l2) == 0, 11);
	T_CHILD_CHECK(wlk_release(l2) == 0, 12);
	T_CHILD_CHECK(wlk_acquire(m, "r", 1, &ex_ia, &l) == 0, 13);
	T_CHILD_CHECK(l == NULL, 14);
	T_CHILD_CHECK(t_put_byte(f->up.wr, 'q') == 0, 15);
	T_CHILD_CHECK(wlk_acquire(m, "r", 1, NULL, &l) == 0, 16);
	T_CHILD_CHECK(t_put_byte(f->up.wr, 'g') == 0, 17);
	T_CHILD_CHECK(t_get(f->down.rd, &c, 1, T_WAIT_MS) == 0, 18);
	T_CHILD_CHECK(wlk_release(l) == 0, 19);
	wlk_manager_close(m);
	return 0;
}

Test(fork, manager_opened_in_child_works_and_excludes_parent, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	struct fresh f;
	pid_t pid;

	t_pipe_open(&f.up);
	t_pipe_open(&f.down);
	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	pid = t_fork(child_fresh_manager, &f);
	cr_assert_eq(t_get_byte(f.up.rd), 'q', "child's manager failed");
	cr_assert(t_wait_pending(m, "r", 1, 1));
	cr_assert_not(t_readable(f.up.rd), "child got a lock the parent held");
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_get_byte(f.up.rd), 'g');
	cr_assert_eq(t_held_by_pid(m, "r", 1, pid), 1);
	/* And now the child excludes the parent. */
	T_ASSERT_RC(wlk_acquire(m, "r", 1, &ex_ia, &l), 0);
	cr_assert_null(l);
	t_put_byte(f.down.wr, 'r');
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	T_ASSERT_RC(wlk_acquire(m, "r", 1, &ex_ia, &l), 0);
	cr_assert_not_null(l);
	T_ASSERT_RC(wlk_release(l), 0);
	t_pipe_close(&f.up);
	t_pipe_close(&f.down);
}

static int child_close_inherited_with_waiter(void *arg)
{
	struct inherit *in = arg;

	/* The parent's manager holds "r" and has a waiter behind it. */
	wlk_manager_close(in->m);
	return t_put_byte(in->fd, 'c') == 0 ? 0 : 1;
}

Test(fork, closing_inherited_manager_touches_no_shared_state, T_FIX,
     .timeout = 20)
{
	struct inherit in = { .m = t_open() };
	struct wlk_manager *w = t_open();
	struct t_holder h;
	struct t_pipe p;
	pid_t pid;

	T_ASSERT_RC(wlk_acquire(in.m, "r", 1, NULL, &in.l), 0);
	t_pipe_open(&p);
	in.fd = p.wr;
	pid = t_fork(child_close_inherited_with_waiter, &in);
	cr_assert_eq(t_get_byte(p.rd), 'c');
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	/* A waiter queued after the child is gone still waits for us. */
	t_holder_start(&h, w, "r", 1, NULL);
	cr_assert(t_wait_pending(w, "r", 1, 1));
	cr_assert_eq(t_held_by_pid(w, "r", 1, getpid()), 1);
	cr_assert_eq(t_held_by(w, "r", 1, wlk_manager_client_id(in.m)), 1);
	cr_assert_not(t_holder_granted_now(&h));
	T_ASSERT_RC(wlk_release(in.l), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
	t_pipe_close(&p);
}

struct forker {
	struct wlk_manager *m;
	struct t_pipe p;
	pid_t child;
	int rc[2];
	int got;
};

/*
 * Grandchild, forked while the parent runs a callback holding "r": the
 * inherited manager is unusable, and a fresh manager sees "r" held.
 */
static int child_probe_report(void *arg)
{
	struct forker *fk = arg;
	struct wlk_manager *m2 = NULL;
	struct wlk_lock *l = (struct wlk_lock *)&l;
	int rc[2];

	rc[0] = wlk_acquire(fk->m, "r", 1, &ex_ia, &l);
	rc[1] = wlk_manager_open(t_origin, NULL, &m2);
	if (rc[1] == 0) {
		rc[1] = wlk_acquire(m2, "r", 1, &ex_ia, &l);
		if (rc[1] == 0 && l != NULL)
			rc[1] = 1;	/* got a lock held by the parent */
		wlk_manager_close(m2);
	}
	return t_put(fk->p.wr, rc, sizeof(rc)) == 0 ? 0 : 1;
}

static int cb_fork_inside(struct wlk_lock *lock, void *arg)
{
	struct forker *fk = arg;

	fk->child = t_fork(child_probe_report, fk);
	/* Keep holding until the child has probed. */
	fk->got = t_get(fk->p.rd, fk->rc, sizeof(fk->rc), T_WAIT_MS);
	return 0;
}

Test(fork, fork_inside_callback_gives_child_no_lock, T_FIX, .timeout = 20)
{
	struct forker fk = { .m = t_open() };

	t_pipe_open(&fk.p);
	T_ASSERT_RC(wlk_request(fk.m, "r", 1, NULL, cb_fork_inside, &fk), 0);
	cr_assert_eq(fk.got, 0, "no report from the child");
	cr_assert_eq(t_wait(fk.child, T_WAIT_MS), 0);
	T_ASSERT_RC(fk.rc[0], WLK_ESTATE);
	T_ASSERT_RC(fk.rc[1], 0);	/* opened, probed, missed */
	cr_assert_eq(t_held_n(fk.m, NULL, 0), 0);
	t_pipe_close(&fk.p);
}
