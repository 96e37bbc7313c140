/* SPDX-License-Identifier: MIT */
/* t_steal_abort.c - steal, abort and timeout across processes. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "../common.h"

static const struct wlk_options steal = { .steal = true };
static const struct wlk_options sh = { .mode = WLK_SHARED };

struct link {
	struct t_pipe up;   /* child -> parent */
	struct t_pipe down; /* parent -> child */
	struct wlk_options opt;
	int result[2];
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
 * Child: acquire "r", say 'g', wait for the parent's word, then send
 * whether the lock was stolen and what wlk_release() returned.
 */
static int child_hold_report(void *arg)
{
	struct link *k = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;
	int res[2];
	char c;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK(wlk_acquire(m, "r", 1, &k->opt, &l) == 0, 11);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'g') == 0, 12);
	T_CHILD_CHECK(t_get(k->down.rd, &c, 1, T_WAIT_MS) == 0, 13);
	/* 's': the parent stole it, which may take a moment to tell. */
	res[0] = c == 's' ? t_stolen(l) : wlk_lock_stolen(l);
	res[1] = wlk_release(l);
	T_CHILD_CHECK(t_put(k->up.wr, res, sizeof(res)) == 0, 14);
	wlk_manager_close(m);
	return 0;
}

/*
 * The child's report comes after its own bounded waits: t_stolen()
 * (T_WAIT_MS on etcd) and a release (one call to the cluster, whose
 * timeout is 5 s by default). The parent waits longer than both, so that
 * a slow cluster fails the check that says what was late, not this one.
 */
#define RESULT_MS (3 * T_WAIT_MS)

static void get_result(struct link *k)
{
	cr_assert_eq(t_get(k->up.rd, k->result, sizeof(k->result), RESULT_MS),
		     0, "no result from the child");
}

Test(steal_abort, steal_across_processes_victim_sees_estolen, T_FIX,
     .timeout = 40)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	struct link k;
	pid_t pid;

	link_open(&k, NULL);
	pid = t_fork(child_hold_report, &k);
	cr_assert_eq(t_get_byte(k.up.rd), 'g');
	cr_assert_eq(t_held_by_pid(m, "r", 1, pid), 1);
	T_ASSERT_RC(wlk_acquire(m, "r", 1, &steal, &l), 0);
	cr_assert_eq(t_held_n(m, "r", 1), 1);
	cr_assert_eq(t_held_by_pid(m, "r", 1, getpid()), 1);
	t_put_byte(k.down.wr, 's');
	get_result(&k);
	cr_assert_eq(k.result[0], 1, "victim did not see wlk_lock_stolen");
	T_ASSERT_RC(k.result[1], WLK_ESTOLEN);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	cr_assert_eq(t_held_by_pid(m, "r", 1, getpid()), 1,
		     "victim's release dropped the stealer's lock");
	T_ASSERT_RC(wlk_release(l), 0);
	link_close(&k);
}

struct cb_link {
	struct link *k;
	int stolen_seen;
};

static int cb_child_wait(struct wlk_lock *lock, void *arg)
{
	struct cb_link *cl = arg;
	char c;

	t_put_byte(cl->k->up.wr, 'i');
	(void)t_get(cl->k->down.rd, &c, 1, T_WAIT_MS);
	cl->stolen_seen = t_stolen(lock);
	return 7;
}

static int child_request_report(void *arg)
{
	struct link *k = arg;
	struct cb_link cl = { .k = k };
	struct wlk_manager *m = NULL;
	int res[2];

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	res[1] = wlk_request(m, "r", 1, NULL, cb_child_wait, &cl);
	res[0] = cl.stolen_seen;
	T_CHILD_CHECK(t_put(k->up.wr, res, sizeof(res)) == 0, 14);
	wlk_manager_close(m);
	return 0;
}

Test(steal_abort, request_in_other_process_returns_estolen, T_FIX,
     .timeout = 40)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	struct link k;
	pid_t pid;

	link_open(&k, NULL);
	pid = t_fork(child_request_report, &k);
	cr_assert_eq(t_get_byte(k.up.rd), 'i');
	T_ASSERT_RC(wlk_acquire(m, "r", 1, &steal, &l), 0);
	t_put_byte(k.down.wr, 'r');
	get_result(&k);
	cr_assert_eq(k.result[0], 1);
	T_ASSERT_RC(k.result[1], WLK_ESTOLEN);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	cr_assert_eq(t_held_by_pid(m, "r", 1, getpid()), 1);
	T_ASSERT_RC(wlk_release(l), 0);
	link_close(&k);
}

Test(steal_abort, stealing_process_goes_ahead_of_queued_process, T_FIX,
     .timeout = 40)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	struct link kw, ks;
	pid_t pw, ps;

	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	link_open(&kw, NULL);
	pw = t_fork(child_hold_report, &kw);
	cr_assert(t_wait_pending(m, "r", 1, 1));
	link_open(&ks, &steal);
	ps = t_fork(child_hold_report, &ks);
	cr_assert_eq(t_get_byte(ks.up.rd), 'g', "stealer not granted at once");
	cr_assert(t_stolen(l));
	cr_assert_eq(t_held_by_pid(m, "r", 1, ps), 1);
	cr_assert_eq(t_held_n(m, "r", 1), 1);
	cr_assert_eq(t_pending_n(m, "r", 1), 1);
	T_ASSERT_RC(wlk_release(l), WLK_ESTOLEN);
	cr_assert_eq(t_pending_n(m, "r", 1), 1, "stolen release granted");
	cr_assert_not(t_readable(kw.up.rd));

	t_put_byte(ks.down.wr, 'r');
	get_result(&ks);
	cr_assert_eq(ks.result[0], 0);
	T_ASSERT_RC(ks.result[1], 0);
	cr_assert_eq(t_get_byte(kw.up.rd), 'g', "queued process not granted");
	cr_assert_eq(t_held_by_pid(m, "r", 1, pw), 1);
	t_put_byte(kw.down.wr, 'r');
	get_result(&kw);
	T_ASSERT_RC(kw.result[1], 0);
	cr_assert_eq(t_wait(ps, T_WAIT_MS), 0);
	cr_assert_eq(t_wait(pw, T_WAIT_MS), 0);
	link_close(&kw);
	link_close(&ks);
}

/* The waiting child's signal, aborted from its SIGUSR1 handler. */
static struct wlk_signal *child_signal;

static void on_sigusr1(int sig)
{
	(void)sig;
	wlk_signal_abort(child_signal, -55);
}

/*
 * Child: queue "r" (exclusive) with a signal or a timeout and report what
 * wlk_acquire() returned.
 */
static int child_wait_abortable(void *arg)
{
	struct link *k = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;
	struct sigaction sa;
	int res[2] = { 0, 0 };

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	if (!k->opt.timeout_ns) {
		T_CHILD_CHECK(wlk_signal_new(&child_signal) == 0, 11);
		k->opt.signal = child_signal;
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_sigusr1;
		sigemptyset(&sa.sa_mask);
		T_CHILD_CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, 12);
	}
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'q') == 0, 13);
	res[1] = wlk_acquire(m, "r", 1, &k->opt, &l);
	if (res[1] == 0)
		(void)wlk_release(l);
	T_CHILD_CHECK(t_put(k->up.wr, res, sizeof(res)) == 0, 14);
	wlk_manager_close(m);
	return 0;
}

static void abort_advances_queue(bool use_timeout)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	struct link ka, kb;
	struct wlk_options to = { .timeout_ns = 2000000000 };
	pid_t pa, pb;

	T_ASSERT_RC(wlk_acquire(m, "r", 1, &sh, &l), 0);
	link_open(&ka, use_timeout ? &to : NULL);
	pa = t_fork(child_wait_abortable, &ka);
	cr_assert_eq(t_get_byte(ka.up.rd), 'q');
	cr_assert(t_wait_pending(m, "r", 1, 1));
	link_open(&kb, &sh);
	pb = t_fork(child_hold_report, &kb);
	cr_assert(t_wait_pending(m, "r", 1, 2));
	cr_assert_not(t_readable(kb.up.rd));

	if (!use_timeout)
		cr_assert_eq(kill(pa, SIGUSR1), 0);
	get_result(&ka);
	T_ASSERT_RC(ka.result[1], use_timeout ? WLK_ETIMEDOUT : -55);
	cr_assert_eq(t_get_byte(kb.up.rd), 'g', "request behind not granted");
	cr_assert_eq(t_held_by_pid(m, "r", 1, pb), 1);
	cr_assert_eq(t_held_n(m, "r", 1), 2);
	cr_assert_eq(t_pending_n(m, "r", 1), 0);
	t_put_byte(kb.down.wr, 'r');
	get_result(&kb);
	T_ASSERT_RC(kb.result[1], 0);
	cr_assert_eq(t_wait(pa, T_WAIT_MS), 0);
	cr_assert_eq(t_wait(pb, T_WAIT_MS), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	link_close(&ka);
	link_close(&kb);
}

Test(steal_abort, abort_in_waiting_process_advances_the_queue, T_FIX,
     .timeout = 40)
{
	abort_advances_queue(false);
}

Test(steal_abort, timeout_in_waiting_process_advances_the_queue, T_FIX,
     .timeout = 40)
{
	abort_advances_queue(true);
}

Test(steal_abort, abort_in_waiting_process_leaves_holder_alone, T_FIX,
     .timeout = 40)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	struct link ka;
	pid_t pa;

	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	link_open(&ka, NULL);
	pa = t_fork(child_wait_abortable, &ka);
	cr_assert_eq(t_get_byte(ka.up.rd), 'q');
	cr_assert(t_wait_pending(m, "r", 1, 1));
	cr_assert_eq(kill(pa, SIGUSR1), 0);
	get_result(&ka);
	T_ASSERT_RC(ka.result[1], -55);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
	cr_assert_eq(t_held_by_pid(m, "r", 1, getpid()), 1);
	cr_assert_not(wlk_lock_stolen(l));
	cr_assert_eq(t_wait(pa, T_WAIT_MS), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	link_close(&ka);
}
