/* SPDX-License-Identifier: MIT */
/* t_async_mp.c - asynchronous requests across processes (weblocks/async.h). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/wait.h>

#include "../common.h"
#include "weblocks/async.h"

static const struct wlk_options steal = { .steal = true };

/* Callbacks run so far in this process (granted and stolen). */
static atomic_int g_calls;

/* Grant order, shared with the children. */
struct order {
	atomic_int next;
	int who[16];
};
static struct order *g_order;

struct rec {
	int calls;
	int status;
	struct wlk_lock *lock;
	struct wlk_async *req;
	int index;   /* recorded in g_order when granted, if >= 0 */
	bool release;
	int rel_rc;
};

static void on_done(struct wlk_async *req, int status, struct wlk_lock *lock,
		    void *arg)
{
	struct rec *r = arg;

	r->calls++;
	r->status = status;
	r->lock = lock;
	if (lock && g_order && r->index >= 0)
		g_order->who[atomic_fetch_add(&g_order->next, 1)] = r->index;
	if (lock && r->release) {
		r->rel_rc = wlk_release(lock);
		r->lock = NULL;
	}
	atomic_fetch_add(&g_calls, 1);
}

static int req_async(struct wlk_manager *m, const char *name,
		     const struct wlk_options *o, struct rec *r)
{
	return wlk_request_async(m, name, WLK_NUL_TERMINATED, o, on_done, r,
				 &r->req);
}

struct srec {
	int calls;
	struct wlk_lock *lock;
};

static void on_stolen(struct wlk_lock *lock, void *arg)
{
	struct srec *s = arg;

	s->calls++;
	s->lock = lock;
	atomic_fetch_add(&g_calls, 1);
}

/* The event loop (t_pump()), counting callbacks in g_calls; usable in
 * children. */
static bool pump_ms(struct wlk_manager *m, int want, int ms)
{
	return t_pump(m, &g_calls, want, ms);
}

static bool pump(struct wlk_manager *m, int want)
{
	return pump_ms(m, want, T_WAIT_MS);
}


/* Pipes between the parent and one child. */
struct link {
	struct t_pipe up;   /* child -> parent */
	struct t_pipe down; /* parent -> child */
	int index;
	const char *name;
	struct wlk_options opt;
};

static void link_open(struct link *k, int index, const char *name)
{
	memset(k, 0, sizeof(*k));
	t_pipe_open(&k->up);
	t_pipe_open(&k->down);
	k->index = index;
	k->name = name;
}

static void link_close(struct link *k)
{
	t_pipe_close(&k->up);
	t_pipe_close(&k->down);
}

/* Child: a blocking requester that records its grant and releases. */
static int child_blocking_record(void *arg)
{
	struct link *k = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK(wlk_acquire(m, k->name, WLK_NUL_TERMINATED, &k->opt,
				  &l) == 0, 11);
	g_order->who[atomic_fetch_add(&g_order->next, 1)] = k->index;
	T_CHILD_CHECK(wlk_release(l) == 0, 12);
	wlk_manager_close(m);
	return 0;
}

/* Child: an async requester that records its grant in the callback. */
static int child_async_record(void *arg)
{
	struct link *k = arg;
	struct wlk_manager *m = NULL;
	struct rec r = { .index = k->index, .release = true };

	atomic_store(&g_calls, 0);
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 20);
	T_CHILD_CHECK(req_async(m, k->name, &k->opt, &r) == 0, 21);
	T_CHILD_CHECK(pump_ms(m, 1, 3 * T_WAIT_MS), 22);
	T_CHILD_CHECK(r.calls == 1 && r.status == 0 && r.rel_rc == 0, 23);
	wlk_manager_close(m);
	return 0;
}

/*
 * One FIFO queue per name, shared by async requests of this process and of
 * others, blocking requests of other processes and a blocking thread here.
 */
Test(async_mp, fifo_order_across_async_and_blocking_processes, T_FIX,
     .timeout = 30)
{
	enum { K = 7 };
	struct wlk_manager *m = t_open(), *o = t_open(), *tm = t_open();
	struct link k[K];
	struct rec r[K];
	struct t_holder h;
	struct wlk_lock *l = NULL;
	pid_t pids[K], seen[K];
	int i, nasync = 0;

	g_order = t_shared_alloc(sizeof(*g_order));
	memset(r, 0, sizeof(r));
	T_ASSERT_RC(wlk_acquire(o, "r", 1, NULL, &l), 0);
	/* 0: blocking child, 1: async here, 2: async child, 3: blocking
	 * thread here, 4: async here, 5: blocking child, 6: async child. */
	for (i = 0; i < K; i++) {
		pids[i] = getpid();
		link_open(&k[i], i, "r");
		switch (i) {
		case 0:
		case 5:
			pids[i] = t_fork(child_blocking_record, &k[i]);
			break;
		case 2:
		case 6:
			pids[i] = t_fork(child_async_record, &k[i]);
			break;
		case 3:
			t_holder_start(&h, tm, "r", 1, NULL);
			break;
		default:
			r[i].index = i;
			r[i].release = true;
			T_ASSERT_RC(req_async(m, "r", NULL, &r[i]), 0);
			nasync++;
		}
		cr_assert(t_wait_pending(o, "r", 1, (size_t)i + 1),
			  "requester %d did not queue", i);
	}
	cr_assert_eq(t_pending_pids(o, "r", 1, seen, K), K);
	for (i = 0; i < K; i++)
		cr_assert_eq(seen[i], pids[i], "pending entry %d out of order",
			     i);
	T_ASSERT_RC(t_dispatch_ready(m), 0);

	T_ASSERT_RC(wlk_release(l), 0);
	/* Up to the thread, then the thread records and lets go. */
	cr_assert(pump(m, 1), "async request 1 not granted");
	cr_assert_eq(t_holder_wait_granted(&h), 0, "thread not granted");
	g_order->who[atomic_fetch_add(&g_order->next, 1)] = 3;
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
	cr_assert(pump(m, nasync), "async request 4 not granted");
	for (i = 0; i < K; i++)
		if (pids[i] != getpid())
			cr_assert_eq(t_wait(pids[i], T_WAIT_MS), 0,
				     "child %d failed", i);
	cr_assert_eq(atomic_load(&g_order->next), K);
	for (i = 0; i < K; i++)
		cr_assert_eq(g_order->who[i], i, "grant %d went to %d", i,
			     g_order->who[i]);
	cr_assert_eq(r[1].calls, 1);
	cr_assert_eq(r[4].calls, 1);
	T_ASSERT_RC(r[1].rel_rc, 0);
	T_ASSERT_RC(r[4].rel_rc, 0);
	cr_assert_eq(t_held_n(o, NULL, 0), 0);
	for (i = 0; i < K; i++)
		link_close(&k[i]);
	t_shared_free(g_order, sizeof(*g_order));
	g_order = NULL;
}

/* Child: hold @k->name (blocking), say 'g', release when told. */
static int child_hold(void *arg)
{
	struct link *k = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;
	char c;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 30);
	T_CHILD_CHECK(wlk_acquire(m, k->name, WLK_NUL_TERMINATED, &k->opt,
				  &l) == 0 && l, 31);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'g') == 0, 32);
	T_CHILD_CHECK(t_get(k->down.rd, &c, 1, 3 * T_WAIT_MS) == 0, 33);
	T_CHILD_CHECK(wlk_release(l) == 0, 34);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'r') == 0, 35);
	wlk_manager_close(m);
	return 0;
}

/* Child: queue async requests on "r" and "s", say 'q', never dispatch. */
static int child_async_pending(void *arg)
{
	struct link *k = arg;
	struct wlk_manager *m = NULL;
	struct rec r[4];
	char c;
	int i;

	memset(r, 0, sizeof(r));
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 40);
	for (i = 0; i < 3; i++)
		T_CHILD_CHECK(req_async(m, "r", NULL, &r[i]) == 0, 41);
	T_CHILD_CHECK(req_async(m, "s", NULL, &r[3]) == 0, 42);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'q') == 0, 43);
	/* Wait to be killed. */
	(void)t_get(k->down.rd, &c, 1, 6 * T_WAIT_MS);
	return 44;
}

/*
 * A process with async requests pending is killed: another process's
 * blocking waiter behind them gets the lock once the holder releases, and
 * an async request of ours behind that is granted in turn.
 */
Test(async_mp, killed_process_with_pending_async_requests_lets_the_rest_advance,
     T_FIX, .timeout = 30)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct wlk_lock *lr = NULL, *ls = NULL;
	struct link ka, kb;
	struct rec r = { .release = true }, rs = { .release = true };
	pid_t pa, pb;

	T_ASSERT_RC(wlk_acquire(o, "r", 1, NULL, &lr), 0);
	T_ASSERT_RC(wlk_acquire(o, "s", 1, NULL, &ls), 0);
	link_open(&ka, 0, "r");
	pa = t_fork(child_async_pending, &ka);
	cr_assert_eq(t_get_byte(ka.up.rd), 'q', "async child did not queue");
	cr_assert_eq(t_pending_n(o, "r", 1), 3);
	link_open(&kb, 1, "r");
	pb = t_fork(child_hold, &kb);
	cr_assert(t_wait_pending(o, "r", 1, 4), "blocking child not queued");
	T_ASSERT_RC(req_async(m, "r", NULL, &r), 0);
	T_ASSERT_RC(req_async(m, "s", NULL, &rs), 0);
	cr_assert_eq(t_pending_n(o, "r", 1), 5);

	cr_assert_eq(kill(pa, SIGKILL), 0);
	cr_assert_eq(t_wait(pa, T_WAIT_MS), 128 + SIGKILL);
	T_ASSERT_RC(wlk_release(lr), 0);
	cr_assert_eq(t_get_byte(kb.up.rd), 'g', "blocking waiter not granted");
	cr_assert_eq(t_held_by_pid(o, "r", 1, pb), 1);
	cr_assert_eq(t_pending_n(o, "r", 1), 1, "dead requests left queued");
	cr_assert_eq(t_pending_n(o, "s", 1), 1);
	cr_assert_eq(r.calls, 0);
	t_put_byte(kb.down.wr, 'x');
	cr_assert_eq(t_get_byte(kb.up.rd), 'r');
	cr_assert(pump(m, 1), "async request behind not granted");
	T_ASSERT_RC(r.status, 0);
	T_ASSERT_RC(r.rel_rc, 0);
	T_ASSERT_RC(wlk_release(ls), 0);
	cr_assert(pump(m, 2), "async request on s not granted");
	T_ASSERT_RC(rs.status, 0);
	cr_assert_eq(t_wait(pb, T_WAIT_MS), 0);
	cr_assert_eq(t_held_n(o, NULL, 0), 0);
	cr_assert_eq(t_pending_n(o, NULL, 0), 0);
	link_close(&ka);
	link_close(&kb);
}

/*
 * A holder killed while our async request waits behind it: the descriptor
 * becomes readable (the holder's death is watched) and dispatch grants,
 * with nobody else calling anything (no query, no other request).
 */
static void killed_holder_grants(bool shared)
{
	struct wlk_manager *m = t_open();
	struct wlk_options ho = { .mode = shared ? WLK_SHARED : WLK_EXCLUSIVE };
	struct rec r = { .release = true };
	struct link k[2];
	pid_t pid[2];
	int i, n = shared ? 2 : 1;

	for (i = 0; i < n; i++) {
		link_open(&k[i], i, "r");
		k[i].opt = ho;
		pid[i] = t_fork(child_hold, &k[i]);
		cr_assert_eq(t_get_byte(k[i].up.rd), 'g', "holder %d", i);
	}
	T_ASSERT_RC(req_async(m, "r", NULL, &r), 0);
	/* The loop runs: the first dispatch (own bell) grants nothing. */
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_eq(r.calls, 0);
	cr_assert_not(t_readable(wlk_manager_fd(m)));
	for (i = 0; i < n; i++)
		cr_assert_eq(kill(pid[i], SIGKILL), 0);
	/* Not reaped yet: the holders are zombies until the end. */
	cr_assert(pump(m, 1), "holder's death did not reach the descriptor");
	T_ASSERT_RC(r.status, 0);
	T_ASSERT_RC(r.rel_rc, 0);
	for (i = 0; i < n; i++) {
		cr_assert_eq(t_wait(pid[i], T_WAIT_MS), 128 + SIGKILL);
		link_close(&k[i]);
	}
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
}

Test(async_mp, killed_holder_grants_the_async_waiter_through_the_fd, T_FIX,
     .timeout = 20)
{
	killed_holder_grants(false);
}

Test(async_mp, killed_shared_holders_grant_the_async_waiter, T_FIX,
     .timeout = 20)
{
	killed_holder_grants(true);
}

/* Child: hold "r" and "s"; release each when told, saying so. */
static int child_hold_two(void *arg)
{
	struct link *k = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *lr = NULL, *ls = NULL;
	char c;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 50);
	T_CHILD_CHECK(wlk_acquire(m, "r", 1, NULL, &lr) == 0, 51);
	T_CHILD_CHECK(wlk_acquire(m, "s", 1, NULL, &ls) == 0, 52);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'g') == 0, 53);
	T_CHILD_CHECK(t_get(k->down.rd, &c, 1, 3 * T_WAIT_MS) == 0, 54);
	T_CHILD_CHECK(wlk_release(lr) == 0, 55);
	T_CHILD_CHECK(t_get(k->down.rd, &c, 1, 3 * T_WAIT_MS) == 0, 56);
	T_CHILD_CHECK(wlk_release(ls) == 0, 57);
	T_CHILD_CHECK(t_get(k->down.rd, &c, 1, 3 * T_WAIT_MS) == 0, 58);
	wlk_manager_close(m);
	return 0;
}

static int ep_wait(int ep, int ms)
{
	struct epoll_event ev[4];
	int n;

	do
		n = epoll_wait(ep, ev, 4, ms);
	while (n < 0 && errno == EINTR);
	return n;
}

/*
 * Edge-triggered epoll: each completion from another process is one edge;
 * after dispatch the descriptor is quiet, though requests are still
 * pending behind a live process, with a signal and with a deadline.
 */
Test(async_mp, edge_triggered_epoll_wakes_once_per_completion, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct wlk_options os = { .timeout_ns = 60 * 1000000000ull };
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	struct rec rr = { .release = true }, rs = { .release = true };
	struct rec rt = { 0 };
	struct link k;
	pid_t pid;
	int fd, ep;

	T_ASSERT_RC(wlk_signal_new(&os.signal), 0);
	link_open(&k, 0, NULL);
	pid = t_fork(child_hold_two, &k);
	cr_assert_eq(t_get_byte(k.up.rd), 'g');
	/* Only now: the descriptor starts this process's watcher thread, and
	 * a fork while a new thread allocates leaves ASan's allocator locked
	 * in the child (glibc's malloc is fork-safe; GCC 12's ASan is not). */
	fd = wlk_manager_fd(m);
	ep = epoll_create1(EPOLL_CLOEXEC);
	cr_assert_geq(ep, 0);
	cr_assert_eq(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), 0);

	T_ASSERT_RC(req_async(m, "r", NULL, &rr), 0);
	T_ASSERT_RC(req_async(m, "s", &os, &rs), 0);
	T_ASSERT_RC(req_async(m, "s", &os, &rt), 0);
	/* Pending requests owe no callback yet; an edge is allowed but not
	 * required, and dispatch runs nothing. */
	(void)ep_wait(ep, 0);
	T_ASSERT_RC(wlk_manager_dispatch(m), 0);
	cr_assert_eq(ep_wait(ep, 0), 0, "edge without news");
	cr_assert_not(t_readable(fd), "fd readable with nothing ready");

	t_put_byte(k.down.wr, '1'); /* the child releases "r" */
	cr_assert_eq(ep_wait(ep, T_WAIT_MS), 1, "grant from child: no edge");
	T_ASSERT_RC(wlk_manager_dispatch(m), 1);
	T_ASSERT_RC(rr.status, 0);
	cr_assert_eq(ep_wait(ep, 0), 0, "second edge for one grant");
	cr_assert_not(t_readable(fd), "fd readable after dispatch");
	T_ASSERT_RC(wlk_manager_dispatch(m), 0);

	t_put_byte(k.down.wr, '2'); /* the child releases "s" */
	cr_assert_eq(ep_wait(ep, T_WAIT_MS), 1, "grant from child: no edge");
	/* rs releases in its callback, which grants rt: one more edge. */
	T_ASSERT_RC(wlk_manager_dispatch(m), 1);
	T_ASSERT_RC(rs.status, 0);
	cr_assert_eq(ep_wait(ep, T_WAIT_MS), 1, "hand-on did not ring");
	T_ASSERT_RC(wlk_manager_dispatch(m), 1);
	T_ASSERT_RC(rt.status, 0);
	cr_assert_eq(ep_wait(ep, 0), 0);
	cr_assert_not(t_readable(fd));

	T_ASSERT_RC(wlk_release(rt.lock), 0);
	t_put_byte(k.down.wr, '3');
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	close(ep);
	link_close(&k);
	wlk_signal_free(os.signal);
}

/* Child: steal "a", "b" and "c", say 's', release when told. */
static int child_steal(void *arg)
{
	struct link *k = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l[3] = { NULL, NULL, NULL };
	const char *names[3] = { "a", "b", "c" };
	char c;
	int i;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 60);
	for (i = 0; i < 3; i++)
		T_CHILD_CHECK(wlk_acquire(m, names[i], 1, &steal, &l[i]) == 0,
			      61);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 's') == 0, 62);
	T_CHILD_CHECK(t_get(k->down.rd, &c, 1, 3 * T_WAIT_MS) == 0, 63);
	for (i = 0; i < 3; i++)
		T_CHILD_CHECK(wlk_release(l[i]) == 0, 64);
	wlk_manager_close(m);
	return 0;
}

Test(async_mp, stealer_in_another_process_is_reported_through_dispatch,
     T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *lb = NULL, *lc = NULL;
	struct rec ra = { 0 };
	struct srec sa = { 0 }, sb = { 0 }, sc = { 0 };
	struct link k;
	pid_t pid;

	T_ASSERT_RC(req_async(m, "a", NULL, &ra), 0);
	cr_assert(pump(m, 1));
	cr_assert_not_null(ra.lock);
	T_ASSERT_RC(wlk_acquire(m, "b", 1, NULL, &lb), 0);
	T_ASSERT_RC(wlk_acquire(m, "c", 1, NULL, &lc), 0);
	T_ASSERT_RC(wlk_lock_on_stolen(ra.lock, on_stolen, &sa), 0);
	T_ASSERT_RC(wlk_lock_on_stolen(lb, on_stolen, &sb), 0);
	T_ASSERT_RC(wlk_lock_on_stolen(lc, on_stolen, &sc), 0);
	T_ASSERT_RC(wlk_lock_on_stolen(lc, NULL, NULL), 0);
	T_ASSERT_RC(t_dispatch_ready(m), 0);

	link_open(&k, 0, NULL);
	pid = t_fork(child_steal, &k);
	cr_assert_eq(t_get_byte(k.up.rd), 's');
	cr_assert_eq(sa.calls + sb.calls, 0, "told without dispatch");
	cr_assert(pump(m, 3), "steals did not ring the descriptor");
	cr_assert_eq(sa.calls, 1);
	cr_assert_eq(sb.calls, 1);
	cr_assert_eq(sa.lock, ra.lock);
	cr_assert_eq(sb.lock, lb);
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_eq(sc.calls, 0, "unwatched lock reported");
	cr_assert_eq(sa.calls + sb.calls, 2, "a stolen callback ran twice");
	cr_assert(t_stolen(lc));
	T_ASSERT_RC(wlk_release(ra.lock), WLK_ESTOLEN);
	T_ASSERT_RC(wlk_release(lb), WLK_ESTOLEN);
	T_ASSERT_RC(wlk_release(lc), WLK_ESTOLEN);
	t_put_byte(k.down.wr, 'x');
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	link_close(&k);
}

struct inherited {
	struct wlk_manager *m;
	struct wlk_lock *lock;
};

/* Child: every async call on the inherited manager is WLK_ESTATE. */
static int child_inherited(void *arg)
{
	struct inherited *in = arg;
	struct rec r = { 0 };
	struct srec s = { 0 };

	T_CHILD_CHECK(wlk_manager_fd(in->m) == WLK_ESTATE, 70);
	T_CHILD_CHECK(wlk_manager_dispatch(in->m) == WLK_ESTATE, 71);
	T_CHILD_CHECK(req_async(in->m, "x", NULL, &r) == WLK_ESTATE, 72);
	T_CHILD_CHECK(wlk_lock_on_stolen(in->lock, on_stolen, &s) ==
		      WLK_ESTATE, 73);
	T_CHILD_CHECK(wlk_release(in->lock) == WLK_ESTATE, 74);
	T_CHILD_CHECK(r.calls == 0 && s.calls == 0, 75);
	T_CHILD_CHECK(atomic_load(&g_calls) == 1, 76); /* the parent's one */
	return 0;
}

Test(async_mp, inherited_manager_is_estate_and_parent_unaffected, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct wlk_lock *l = NULL;
	struct rec held = { 0 }, r = { .release = true };
	struct inherited in;
	pid_t pid;

	T_ASSERT_RC(req_async(m, "k", NULL, &held), 0);
	cr_assert(pump(m, 1));
	T_ASSERT_RC(wlk_acquire(o, "r", 1, NULL, &l), 0);
	T_ASSERT_RC(req_async(m, "r", NULL, &r), 0);
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	in = (struct inherited){ .m = m, .lock = held.lock };
	pid = t_fork(child_inherited, &in);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0, "child saw something else");

	cr_assert_eq(t_held_by_pid(o, "k", 1, getpid()), 1,
		     "child's release touched the parent's lock");
	cr_assert_eq(t_pending_n(o, "r", 1), 1);
	cr_assert_eq(r.calls, 0);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert(pump(m, 2));
	cr_assert_eq(r.calls, 1);
	T_ASSERT_RC(r.status, 0);
	T_ASSERT_RC(r.rel_rc, 0);
	T_ASSERT_RC(wlk_release(held.lock), 0);
}

/*
 * Child of a process whose async managers are watched already: its own
 * new manager's deadline must still make its descriptor readable, so the
 * watcher thread (lib/shm/watcher.c) is started again after fork().
 */
static int child_deadline_after_fork(void *arg)
{
	static const struct wlk_options ot = { .timeout_ns = 20 * 1000000ull };
	struct wlk_manager *m = NULL, *h = NULL;
	struct wlk_lock *l = NULL;
	struct rec r = { 0 };
	struct pollfd p;

	(void)arg;
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 80);
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &h) == 0, 81);
	T_CHILD_CHECK(wlk_acquire(h, "t", 1, NULL, &l) == 0, 82);
	T_CHILD_CHECK(req_async(m, "t", &ot, &r) == 0, 83);
	p = (struct pollfd){ .fd = wlk_manager_fd(m), .events = POLLIN };
	/* Only the deadline can make it readable: "t" stays held. */
	T_CHILD_CHECK(poll(&p, 1, T_WAIT_MS) == 1, 84);
	T_CHILD_CHECK(wlk_manager_dispatch(m) == 1, 85);
	T_CHILD_CHECK(r.status == WLK_ETIMEDOUT, 86);
	T_CHILD_CHECK(wlk_release(l) == 0, 87);
	wlk_manager_close(h);
	wlk_manager_close(m);
	return 0;
}

Test(async_mp, deadline_wakes_a_fork_childs_own_manager, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct wlk_lock *l = NULL;
	struct rec r = { .release = true };
	pid_t pid;

	/* The parent's watcher runs, with a request outstanding. */
	T_ASSERT_RC(wlk_acquire(o, "r", 1, NULL, &l), 0);
	T_ASSERT_RC(req_async(m, "r", NULL, &r), 0);
	pid = t_fork(child_deadline_after_fork, NULL);
	cr_assert_eq(t_wait(pid, T_WAIT_MS * 2), 0,
		     "the child's deadline did not wake its descriptor");
	/* And the parent's still works. */
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert(pump(m, 1));
	T_ASSERT_RC(r.status, 0);
	T_ASSERT_RC(r.rel_rc, 0);
}

/* Child: open a manager, make it an async one, then exit holding. */
static int child_async_holder_exits(void *arg)
{
	struct link *k = arg;
	struct wlk_manager *m = NULL;
	struct rec r = { 0 };
	char c;

	atomic_store(&g_calls, 0);
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 80);
	T_CHILD_CHECK(req_async(m, "r", NULL, &r) == 0, 81);
	T_CHILD_CHECK(pump_ms(m, 1, T_WAIT_MS) && r.status == 0, 82);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'g') == 0, 83);
	T_CHILD_CHECK(t_get(k->down.rd, &c, 1, 3 * T_WAIT_MS) == 0, 84);
	_exit(0); /* neither released nor closed */
}

/* A process holding an async-granted lock exits: async waiters get it. */
Test(async_mp, async_holder_exiting_grants_the_async_waiter, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct rec r = { .release = true };
	struct link k;
	pid_t pid;

	link_open(&k, 0, NULL);
	pid = t_fork(child_async_holder_exits, &k);
	cr_assert_eq(t_get_byte(k.up.rd), 'g');
	T_ASSERT_RC(req_async(m, "r", NULL, &r), 0);
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_eq(r.calls, 0);
	t_put_byte(k.down.wr, 'x');
	cr_assert(pump(m, 1), "exit did not reach the descriptor");
	T_ASSERT_RC(r.status, 0);
	T_ASSERT_RC(r.rel_rc, 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	link_close(&k);
}

/* How long the exec'd holder lives: far longer than the grant may take. */
#define EXEC_LIFE "30"
/* Bound on exec -> async waiter granted (blocking waiters: immediate). */
#define EXEC_GRANT_MS 1000

/* Child: hold "r", say 'g', exec a long sleep when told (no release). */
static int child_hold_exec(void *arg)
{
	struct link *k = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;
	char c;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 90);
	T_CHILD_CHECK(wlk_acquire(m, "r", 1, NULL, &l) == 0, 91);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'g') == 0, 92);
	T_CHILD_CHECK(t_get(k->down.rd, &c, 1, 3 * T_WAIT_MS) == 0, 93);
	execlp("sleep", "sleep", EXEC_LIFE, (char *)NULL);
	return 94;
}

/*
 * A holder exec()s: its locks end with its image, and an async waiter,
 * with no blocking waiter in the bucket to notice, is granted at once, not
 * when the new program exits (a pidfd fires at exit, not at exec).
 */
Test(async_mp, holder_exec_grants_the_async_waiter, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct rec r = { .release = true };
	struct link k;
	uint64_t t0;
	pid_t pid;

	/* Forked before the watcher thread starts: ASan's allocator is
	 * not fork-safe. */
	link_open(&k, 0, NULL);
	pid = t_fork(child_hold_exec, &k);
	close(k.up.wr);
	k.up.wr = -1;
	cr_assert_eq(t_get_byte(k.up.rd), 'g');
	T_ASSERT_RC(req_async(m, "r", NULL, &r), 0);
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_eq(r.calls, 0);
	t_put_byte(k.down.wr, 'x');
	/* EOF: the exec closed the child's end (O_CLOEXEC). */
	cr_assert_eq(t_get_byte(k.up.rd), -1, "the child did not exec");
	t0 = t_now_ns();
	cr_assert(pump_ms(m, 1, EXEC_GRANT_MS),
		  "exec did not reach the descriptor within %d ms",
		  EXEC_GRANT_MS);
	cr_assert_lt(t_now_ns() - t0, EXEC_GRANT_MS * 1000000ull);
	T_ASSERT_RC(r.status, 0);
	T_ASSERT_RC(r.rel_rc, 0);
	cr_assert_eq(waitpid(pid, NULL, WNOHANG), 0, "exec'd child ended");
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 128 + SIGKILL);
	t_assert_valid(m, NULL);
	link_close(&k);
}
