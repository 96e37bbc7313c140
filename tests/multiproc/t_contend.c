/* SPDX-License-Identifier: MIT */
/* t_contend.c - processes contending for locks: exclusion and FIFO order. */
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "../common.h"

static const struct wlk_options ex_ia = { .if_available = true };
static const struct wlk_options sh_ia = { .mode = WLK_SHARED,
					  .if_available = true };
static const struct wlk_options sh = { .mode = WLK_SHARED };

/* Pipes between the parent and one child. */
struct link {
	struct t_pipe up;   /* child -> parent */
	struct t_pipe down; /* parent -> child */
	struct wlk_options opt;
};

static void link_open(struct link *k, const struct wlk_options *o)
{
	memset(k, 0, sizeof(*k));
	t_pipe_open(&k->up);
	t_pipe_open(&k->down);
	if (o)
		k->opt = *o;
}

static void link_close(struct link *k)
{
	t_pipe_close(&k->up);
	t_pipe_close(&k->down);
}

/*
 * Child: open a manager, probe "r" with if_available in its mode (must
 * miss), say 'q', acquire it blocking, say 'g', wait for the parent's word,
 * release.
 */
static int child_probe_then_wait(void *arg)
{
	struct link *k = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = (struct wlk_lock *)&l;
	struct wlk_options probe = k->opt;
	char c;

	probe.if_available = true;
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK(wlk_acquire(m, "r", 1, &probe, &l) == 0, 11);
	T_CHILD_CHECK(l == NULL, 12);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'q') == 0, 13);
	T_CHILD_CHECK(wlk_acquire(m, "r", 1, &k->opt, &l) == 0, 14);
	T_CHILD_CHECK(l != NULL, 15);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'g') == 0, 16);
	T_CHILD_CHECK(t_get(k->down.rd, &c, 1, T_WAIT_MS) == 0, 17);
	T_CHILD_CHECK(wlk_release(l) == 0, 18);
	wlk_manager_close(m);
	return 0;
}

Test(contend, two_processes_exclude_each_other, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	struct link k;
	pid_t pid;

	link_open(&k, NULL);
	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	pid = t_fork(child_probe_then_wait, &k);
	cr_assert_eq(t_get_byte(k.up.rd), 'q', "child did not start");
	cr_assert(t_wait_pending(m, "r", 1, 1), "child did not queue");
	cr_assert_not(t_readable(k.up.rd), "child got the lock while held");
	cr_assert_eq(t_held_n(m, "r", 1), 1);

	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_held_by_pid(m, "r", 1, pid), 1);
	cr_assert_eq(t_get_byte(k.up.rd), 'g', "child not woken");
	T_ASSERT_RC(wlk_acquire(m, "r", 1, &ex_ia, &l), 0);
	cr_assert_null(l, "parent got the lock the child holds");
	t_put_byte(k.down.wr, 'r');
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	link_close(&k);
}

struct fifo {
	atomic_int next;
	int order[16];
};

struct fifo_child {
	struct fifo *f;
	int index;
	struct wlk_options opt;
};

static int child_record_grant(void *arg)
{
	struct fifo_child *fc = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK(wlk_acquire(m, "r", 1, &fc->opt, &l) == 0, 11);
	fc->f->order[atomic_fetch_add(&fc->f->next, 1)] = fc->index;
	T_CHILD_CHECK(wlk_release(l) == 0, 12);
	wlk_manager_close(m);
	return 0;
}

Test(contend, fifo_order_across_processes, T_FIX, .timeout = 30)
{
	enum { K = 6 };
	struct wlk_manager *m = t_open();
	struct fifo *f = t_shared_alloc(sizeof(*f));
	struct fifo_child fc;
	struct wlk_lock *l = NULL;
	pid_t pids[K], seen[K];
	int i;

	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	for (i = 0; i < K; i++) {
		fc = (struct fifo_child){ .f = f, .index = i };
		pids[i] = t_fork(child_record_grant, &fc);
		/* Child i is queued before child i + 1 starts. */
		cr_assert(t_wait_pending(m, "r", 1, (size_t)i + 1),
			  "child %d did not queue", i);
	}
	cr_assert_eq(t_pending_pids(m, "r", 1, seen, K), K);
	for (i = 0; i < K; i++)
		cr_assert_eq(seen[i], pids[i], "pending entry %d out of order",
			     i);
	T_ASSERT_RC(wlk_release(l), 0);
	for (i = 0; i < K; i++)
		cr_assert_eq(t_wait(pids[i], 10000), 0, "child %d failed", i);
	cr_assert_eq(atomic_load(&f->next), K);
	for (i = 0; i < K; i++)
		cr_assert_eq(f->order[i], i, "grant %d went to child %d", i,
			     f->order[i]);
	t_shared_free(f, sizeof(*f));
}

Test(contend, mixed_mode_fifo_order_across_processes, T_FIX, .timeout = 30)
{
	enum { K = 6 };
	struct wlk_manager *m = t_open();
	struct fifo *f = t_shared_alloc(sizeof(*f));
	struct fifo_child fc;
	struct wlk_lock *l = NULL;
	pid_t pids[K];
	int i;

	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	for (i = 0; i < K; i++) {
		/* Pattern X S S X S X: shared runs may overlap each other. */
		fc = (struct fifo_child){ .f = f, .index = i };
		if (i == 1 || i == 2 || i == 4)
			fc.opt.mode = WLK_SHARED;
		pids[i] = t_fork(child_record_grant, &fc);
		cr_assert(t_wait_pending(m, "r", 1, (size_t)i + 1));
	}
	T_ASSERT_RC(wlk_release(l), 0);
	for (i = 0; i < K; i++)
		cr_assert_eq(t_wait(pids[i], 10000), 0, "child %d failed", i);
	cr_assert_eq(f->order[0], 0);
	cr_assert(f->order[1] + f->order[2] == 3, "shared pair not next");
	cr_assert_eq(f->order[3], 3);
	cr_assert_eq(f->order[4], 4);
	cr_assert_eq(f->order[5], 5);
	t_shared_free(f, sizeof(*f));
}

static int child_shared_probe(void *arg)
{
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK(wlk_acquire(m, "r", 1, &sh_ia, &l) == 0, 11);
	T_CHILD_CHECK(l != NULL, 12);	/* shared joins shared */
	T_CHILD_CHECK(wlk_lock_mode(l) == WLK_SHARED, 13);
	T_CHILD_CHECK(wlk_release(l) == 0, 14);
	T_CHILD_CHECK(wlk_acquire(m, "r", 1, &ex_ia, &l) == 0, 15);
	T_CHILD_CHECK(l == NULL, 16);	/* exclusive does not */
	wlk_manager_close(m);
	return 0;
}

Test(contend, shared_lock_is_shared_across_processes, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	pid_t pid;

	T_ASSERT_RC(wlk_acquire(m, "r", 1, &sh, &l), 0);
	pid = t_fork(child_shared_probe, NULL);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	cr_assert_eq(t_held_n(m, NULL, 0), 1);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
	T_ASSERT_RC(wlk_release(l), 0);
}

Test(contend, shared_behind_queued_exclusive_waits_across_processes, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	struct link kx, ks;
	pid_t px, ps;

	T_ASSERT_RC(wlk_acquire(m, "r", 1, &sh, &l), 0);
	link_open(&kx, NULL);
	link_open(&ks, &sh);
	px = t_fork(child_probe_then_wait, &kx);
	cr_assert_eq(t_get_byte(kx.up.rd), 'q');
	cr_assert(t_wait_pending(m, "r", 1, 1));
	/* Its if_available shared probe must miss: the queue is not empty. */
	ps = t_fork(child_probe_then_wait, &ks);
	cr_assert_eq(t_get_byte(ks.up.rd), 'q', "shared probe got the lock");
	cr_assert(t_wait_pending(m, "r", 1, 2), "shared request jumped");
	cr_assert_not(t_readable(ks.up.rd));

	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_get_byte(kx.up.rd), 'g');
	cr_assert_eq(t_held_by_pid(m, "r", 1, px), 1);
	cr_assert_eq(t_pending_n(m, "r", 1), 1);
	t_put_byte(kx.down.wr, 'r');
	cr_assert_eq(t_wait(px, T_WAIT_MS), 0);
	cr_assert_eq(t_get_byte(ks.up.rd), 'g');
	t_put_byte(ks.down.wr, 'r');
	cr_assert_eq(t_wait(ps, T_WAIT_MS), 0);
	link_close(&kx);
	link_close(&ks);
}

static int child_hold_then_close(void *arg)
{
	struct link *k = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;
	char c;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK(wlk_acquire(m, "r", 1, NULL, &l) == 0, 11);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'g') == 0, 12);
	T_CHILD_CHECK(t_get(k->down.rd, &c, 1, T_WAIT_MS) == 0, 13);
	/* Close without releasing: the close releases. */
	wlk_manager_close(m);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'c') == 0, 14);
	T_CHILD_CHECK(wlk_release(l) == WLK_ESTATE, 15);
	return 0;
}

Test(contend, close_in_another_process_grants_the_waiter, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct t_holder h;
	struct link k;
	pid_t pid;

	link_open(&k, NULL);
	pid = t_fork(child_hold_then_close, &k);
	cr_assert_eq(t_get_byte(k.up.rd), 'g');
	t_holder_start(&h, m, "r", 1, NULL);
	cr_assert(t_wait_pending(m, "r", 1, 1));
	cr_assert_not(t_holder_granted_now(&h));
	t_put_byte(k.down.wr, 'c');
	cr_assert_eq(t_get_byte(k.up.rd), 'c');
	cr_assert_eq(t_held_by_pid(m, "r", 1, getpid()), 1);
	cr_assert_eq(t_holder_wait_granted(&h), 0, "waiter not woken");
	T_ASSERT_RC(h.acq_rc, 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
	link_close(&k);
}
