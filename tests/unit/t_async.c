/* SPDX-License-Identifier: MIT */
/* t_async.c - asynchronous requests in one process (weblocks/async.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>

#include "../common.h"
#include "weblocks/async.h"

static const struct wlk_options sh = { .mode = WLK_SHARED };
static const struct wlk_options steal = { .steal = true };
static const struct wlk_options ex_ia = { .if_available = true };

/* Callbacks run so far (granted and stolen), and the completion order. */
static atomic_int g_calls;
static atomic_int g_seq;
/* Set around wlk_request_async() and wlk_manager_close() on this thread. */
static __thread bool t_requesting;
static __thread bool t_closing;

/* What one granted callback saw; filled in by on_done(). */
struct rec {
	atomic_int calls;
	int status;
	struct wlk_lock *lock;    /* as given to the callback */
	struct wlk_async *req;    /* from wlk_request_async()'s @out */
	struct wlk_async *cb_req; /* as given to the callback */
	bool during_request;      /* ran inside wlk_request_async() */
	bool during_close;        /* ran inside wlk_manager_close() */
	bool release;             /* release the lock in the callback */
	int rel_rc;
	int seq;
	struct wlk_manager *m;
	/* Extra work done in the callback, and its result. */
	void (*then)(struct rec *r);
	int then_rc;
	void *then_arg;
};

static void on_done(struct wlk_async *req, int status, struct wlk_lock *lock,
		    void *arg)
{
	struct rec *r = arg;

	atomic_fetch_add(&r->calls, 1);
	r->status = status;
	r->lock = lock;
	r->cb_req = req;
	r->during_request |= t_requesting;
	r->during_close |= t_closing;
	r->seq = atomic_fetch_add(&g_seq, 1);
	if (r->then)
		r->then(r);
	if (lock && r->release) {
		r->rel_rc = wlk_release(lock);
		r->lock = NULL;
	}
	atomic_fetch_add(&g_calls, 1);
}

static int req_async(struct wlk_manager *m, const char *name,
		     const struct wlk_options *o, struct rec *r)
{
	int rc;

	r->m = m;
	t_requesting = true;
	rc = wlk_request_async(m, name, WLK_NUL_TERMINATED, o, on_done, r,
			       &r->req);
	t_requesting = false;
	return rc;
}

/* What one stolen callback saw. */
struct srec {
	atomic_int calls;
	struct wlk_lock *lock;
	bool release;
	int rel_rc;
};

static void on_stolen(struct wlk_lock *lock, void *arg)
{
	struct srec *s = arg;

	atomic_fetch_add(&s->calls, 1);
	s->lock = lock;
	if (s->release)
		s->rel_rc = wlk_release(lock);
	atomic_fetch_add(&g_calls, 1);
}

/* The event loop (t_pump()), counting callbacks in g_calls. */
static bool pump(struct wlk_manager *m, int want)
{
	return t_pump(m, &g_calls, want, T_WAIT_MS);
}

/* A thread making one blocking request, counted like a callback. */
struct blocker {
	struct wlk_manager *m;
	const char *name;
	struct wlk_options opt;
	int acq_rc;
	int rel_rc;
	int seq;
	pthread_t th;
};

static void *blocker_main(void *arg)
{
	struct blocker *b = arg;
	struct wlk_lock *l = NULL;

	b->acq_rc = wlk_acquire(b->m, b->name, WLK_NUL_TERMINATED, &b->opt,
				&l);
	b->seq = atomic_fetch_add(&g_seq, 1);
	if (l)
		b->rel_rc = wlk_release(l);
	atomic_fetch_add(&g_calls, 1);
	return NULL;
}

static void blocker_start(struct blocker *b, struct wlk_manager *m,
			  const char *name, const struct wlk_options *o)
{
	int rc;

	memset(b, 0, sizeof(*b));
	b->m = m;
	b->name = name;
	b->acq_rc = 1;
	b->rel_rc = 1;
	if (o)
		b->opt = *o;
	rc = pthread_create(&b->th, NULL, blocker_main, b);
	cr_assert_eq(rc, 0, "pthread_create: %s", strerror(rc));
}

/*
 * Descriptor and validation.
 */

Test(async, descriptor_is_stable_and_close_on_exec, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	int fa = wlk_manager_fd(a), fb = wlk_manager_fd(b), i;
	struct rec r = { .release = true };

	cr_assert_geq(fa, 0, "wlk_manager_fd: %s", t_ename(fa));
	cr_assert_geq(fb, 0, "wlk_manager_fd: %s", t_ename(fb));
	cr_assert_neq(fa, fb, "two managers share a descriptor");
	for (i = 0; i < 10; i++)
		cr_assert_eq(wlk_manager_fd(a), fa);
	cr_assert(fcntl(fa, F_GETFD) & FD_CLOEXEC, "not close-on-exec");
	T_ASSERT_RC(req_async(a, "r", NULL, &r), 0);
	cr_assert(pump(a, 1));
	cr_assert_eq(wlk_manager_fd(a), fa, "descriptor changed after use");
	cr_assert_eq(wlk_manager_fd(b), fb);
	/* Nothing outstanding: dispatch runs nothing, the fd is quiet. */
	T_ASSERT_RC(wlk_manager_dispatch(a), 0);
	cr_assert_not(t_readable(fa));
}

Test(async, dispatch_before_any_request_runs_nothing, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();

	T_ASSERT_RC(wlk_manager_dispatch(m), 0);
	cr_assert_geq(wlk_manager_fd(m), 0);
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_not(t_readable(wlk_manager_fd(m)));
}

Test(async, null_arguments_are_einval, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_async *req = (struct wlk_async *)&req;
	struct rec r = { 0 };

	T_ASSERT_RC(wlk_manager_fd(NULL), WLK_EINVAL);
	T_ASSERT_RC(wlk_manager_dispatch(NULL), WLK_EINVAL);
	T_ASSERT_RC(wlk_async_cancel(NULL), WLK_EINVAL);
	T_ASSERT_RC(wlk_lock_on_stolen(NULL, on_stolen, NULL), WLK_EINVAL);
	T_ASSERT_RC(wlk_request_async(NULL, "r", 1, NULL, on_done, &r, &req),
		    WLK_EINVAL);
	T_ASSERT_RC(wlk_request_async(m, NULL, 0, NULL, on_done, &r, &req),
		    WLK_EINVAL);
	T_ASSERT_RC(wlk_request_async(m, "r", 1, NULL, NULL, &r, &req),
		    WLK_EINVAL);
	cr_assert_eq(req, (struct wlk_async *)&req, "@out written on error");
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_eq(atomic_load(&r.calls), 0);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
}

Test(async, option_errors_queue_nothing_and_call_nothing, T_FIX,
     .timeout = 10)
{
	struct wlk_manager_options mo = { .max_name_len = 8 };
	struct wlk_manager *m = t_open_opts(&mo);
	struct wlk_signal *s = NULL, *aborted = NULL, *aborted0 = NULL;
	struct rec r = { 0 };
	struct {
		const char *name;
		struct wlk_options o;
		int want;
	} cases[] = {
		{ "r", { .mode = (enum wlk_mode)7 }, WLK_EINVAL },
		{ "-r", { 0 }, WLK_ENOTSUPPORTED },
		{ "r", { .steal = true, .if_available = true },
		  WLK_ENOTSUPPORTED },
		{ "r", { .steal = true, .mode = WLK_SHARED },
		  WLK_ENOTSUPPORTED },
		{ "r", { .steal = true, .timeout_ns = 1000000 },
		  WLK_ENOTSUPPORTED },
		{ "r", { .if_available = true, .timeout_ns = 1000000 },
		  WLK_ENOTSUPPORTED },
		{ "r", { .steal = true }, WLK_ENOTSUPPORTED }, /* + signal */
		{ "r", { .if_available = true }, WLK_ENOTSUPPORTED }, /* + s */
		{ "r", { 0 }, -ECANCELED },  /* already aborted with a reason */
		{ "r", { 0 }, WLK_EABORTED }, /* already aborted, reason 0 */
		{ "123456789", { 0 }, WLK_ENAMETOOLONG },
	};
	size_t i, n = sizeof(cases) / sizeof(cases[0]);

	T_ASSERT_RC(wlk_signal_new(&s), 0);
	T_ASSERT_RC(wlk_signal_new(&aborted), 0);
	T_ASSERT_RC(wlk_signal_new(&aborted0), 0);
	wlk_signal_abort(aborted, -ECANCELED);
	wlk_signal_abort(aborted0, 0);
	cases[6].o.signal = s;
	cases[7].o.signal = s;
	cases[8].o.signal = aborted;
	cases[9].o.signal = aborted0;
	for (i = 0; i < n; i++) {
		int rc = req_async(m, cases[i].name, &cases[i].o, &r);

		cr_assert_eq(rc, cases[i].want, "case %zu: got %s, want %s", i,
			     t_ename(rc), t_ename(cases[i].want));
	}
	/* The longest allowed name is fine. */
	r.release = true;
	T_ASSERT_RC(req_async(m, "12345678", NULL, &r), 0);
	cr_assert(pump(m, 1));
	cr_assert_eq(atomic_load(&r.calls), 1, "a refused request called back");
	T_ASSERT_RC(r.status, 0);
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
	wlk_signal_free(s);
	wlk_signal_free(aborted);
	wlk_signal_free(aborted0);
}

Test(async, out_handle_is_optional, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct rec r = { .release = true };

	T_ASSERT_RC(wlk_request_async(m, "r", 1, NULL, on_done, &r, NULL), 0);
	cr_assert(pump(m, 1));
	T_ASSERT_RC(r.status, 0);
	T_ASSERT_RC(r.rel_rc, 0);
	cr_assert_not_null(r.cb_req);
}

/*
 * A closed manager answers WLK_ESTATE. The test keeps a lock of it
 * outstanding, which keeps the manager's memory alive for these calls.
 */
Test(async, closed_manager_is_estate, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct wlk_lock *keep = NULL, *acq = NULL;
	struct rec r = { 0 }, late = { 0 };
	struct srec s = { 0 };

	T_ASSERT_RC(req_async(m, "keep", NULL, &r), 0);
	cr_assert(pump(m, 1));
	keep = r.lock;
	cr_assert_not_null(keep);
	T_ASSERT_RC(wlk_acquire(m, "acq", 3, NULL, &acq), 0);
	t_close(m);

	T_ASSERT_RC(wlk_manager_fd(m), WLK_ESTATE);
	T_ASSERT_RC(wlk_manager_dispatch(m), WLK_ESTATE);
	T_ASSERT_RC(req_async(m, "x", NULL, &late), WLK_ESTATE);
	T_ASSERT_RC(wlk_lock_on_stolen(keep, on_stolen, &s), WLK_ESTATE);
	T_ASSERT_RC(wlk_lock_on_stolen(acq, on_stolen, &s), WLK_ESTATE);
	cr_assert_eq(atomic_load(&late.calls), 0);
	cr_assert_eq(t_held_n(o, NULL, 0), 0, "close left a lock held");
	T_ASSERT_RC(wlk_release(keep), WLK_ESTATE);
	T_ASSERT_RC(wlk_release(acq), WLK_ESTATE);
	cr_assert_eq(atomic_load(&s.calls), 0);
}

/* Fill the descriptor table up to a lowered limit; the fds taken. */
static int fill_fds(int *fds, int max, struct rlimit *saved)
{
	struct rlimit lim;
	int n = 0, top = dup(0);

	cr_assert_geq(top, 0);
	close(top);
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, saved), 0);
	lim = *saved;
	lim.rlim_cur = (rlim_t)top + 8;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
	while (n < max && (fds[n] = dup(0)) >= 0)
		n++;
	return n;
}

static void free_fds(int *fds, int n, const struct rlimit *saved)
{
	while (n > 0)
		close(fds[--n]);
	setrlimit(RLIMIT_NOFILE, saved);
}

/*
 * One release grants more asynchronous managers than a wake batch holds
 * (WLK_WAKE_BATCH, 32): every one of them must be rung, not only the
 * first 32.
 */
Test(async, a_release_granting_many_managers_rings_every_one, T_FIX,
     .timeout = 30)
{
	enum { N = 40 };
	static const struct wlk_options shared = { .mode = WLK_SHARED };
	struct wlk_manager *o = t_open(), *m[N];
	struct rec r[N];
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(o, "s", 1, NULL, &l), 0);
	for (int i = 0; i < N; i++) {
		m[i] = t_open();
		r[i] = (struct rec){ .release = true };
		T_ASSERT_RC(req_async(m[i], "s", &shared, &r[i]), 0);
	}
	cr_assert_eq(t_pending_n(o, "s", 1), N);
	T_ASSERT_RC(wlk_release(l), 0);
	for (int i = 0; i < N; i++) {
		struct pollfd p = { .fd = wlk_manager_fd(m[i]),
				    .events = POLLIN };

		cr_assert_eq(poll(&p, 1, T_WAIT_MS), 1,
			     "manager %d of %d was not rung", i + 1, N);
		cr_assert_eq(wlk_manager_dispatch(m[i]), 1);
		T_ASSERT_RC(r[i].status, 0);
		T_ASSERT_RC(r[i].rel_rc, 0);
	}
}

/* Out of descriptors: an error, nothing queued, no callback; then fine. */
Test(async, descriptor_errors_queue_nothing_and_call_nothing, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct wlk_options os = { 0 };
	struct rec r1 = { 0 }, r2 = { 0 }, ok = { .release = true };
	struct wlk_lock *l = NULL;
	struct rlimit saved;
	int fds[64], n, fd_rc, rq_rc, sig_rc;

	T_ASSERT_RC(wlk_acquire(o, "r", 1, NULL, &l), 0);
	T_ASSERT_RC(wlk_signal_new(&os.signal), 0);
	/* No assertion while the table is full: Criterion needs fds. */
	n = fill_fds(fds, 64, &saved);
	fd_rc = wlk_manager_fd(m);
	rq_rc = req_async(m, "r", NULL, &r1);
	free_fds(fds, n, &saved);
	cr_assert_lt(n, 64, "could not fill the descriptor table");
	T_ASSERT_RC(fd_rc, -EMFILE);
	T_ASSERT_RC(rq_rc, -EMFILE);

	/* The manager's descriptor exists; the signal's cannot be made. */
	cr_assert_geq(wlk_manager_fd(m), 0);
	n = fill_fds(fds, 64, &saved);
	sig_rc = req_async(m, "r", &os, &r2);
	free_fds(fds, n, &saved);
	cr_assert_lt(sig_rc, 0, "request queued without its signal's fd");

	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_eq(atomic_load(&r1.calls) + atomic_load(&r2.calls), 0,
		     "a refused request called back");
	cr_assert_eq(t_pending_n(o, NULL, 0), 0, "a refused request queued");
	T_ASSERT_RC(req_async(m, "r", &os, &ok), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert(pump(m, 1));
	T_ASSERT_RC(ok.status, 0);
	T_ASSERT_RC(ok.rel_rc, 0);
	wlk_signal_free(os.signal);
}

/*
 * Completion.
 */

/* Granted, then stolen before the dispatch: a grant all the same, as for
 * a blocking request (the stolen state is not taken for a closed
 * manager). */
Test(async, grant_stolen_before_dispatch_is_a_stolen_grant, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m = t_open(), *h = t_open(), *thief = t_open();
	struct wlk_lock *lh = NULL, *lt = NULL;
	struct rec r = { 0 };

	T_ASSERT_RC(wlk_acquire(h, "r", 1, NULL, &lh), 0);
	T_ASSERT_RC(req_async(m, "r", NULL, &r), 0);
	T_ASSERT_RC(wlk_release(lh), 0);
	T_ASSERT_RC(wlk_acquire(thief, "r", 1, &steal, &lt), 0);
	T_ASSERT_RC(wlk_manager_dispatch(m), 1);
	T_ASSERT_RC(r.status, 0);
	cr_assert_not_null(r.lock);
	cr_assert(wlk_lock_stolen(r.lock));
	T_ASSERT_RC(wlk_release(r.lock), WLK_ESTOLEN);
	T_ASSERT_RC(wlk_release(lt), 0);
	T_ASSERT_RC(wlk_manager_validate(m, NULL, NULL), 0);
}

Test(async, immediate_grant_completes_only_through_dispatch, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m = t_open();
	int fd = wlk_manager_fd(m);
	struct rec r = { 0 };
	size_t len = 0;

	T_ASSERT_RC(req_async(m, "r", NULL, &r), 0);
	cr_assert_eq(atomic_load(&r.calls), 0,
		     "callback ran inside wlk_request_async");
	cr_assert_not_null(r.req);
	/* Granted in the held set at once; told through the descriptor. */
	cr_assert_eq(t_held_by(m, "r", 1, wlk_manager_client_id(m)), 1);
	cr_assert(t_readable(fd), "descriptor not readable after a grant");
	T_ASSERT_RC(wlk_manager_dispatch(m), 1);
	cr_assert_eq(atomic_load(&r.calls), 1);
	cr_assert_not(r.during_request);
	T_ASSERT_RC(r.status, 0);
	cr_assert_not_null(r.lock);
	cr_assert_eq(r.cb_req, r.req, "callback got another request handle");
	cr_assert_str_eq(wlk_lock_name(r.lock, &len), "r");
	cr_assert_eq(len, 1);
	cr_assert_eq(wlk_lock_mode(r.lock), WLK_EXCLUSIVE);
	cr_assert_geq(wlk_lock_token(r.lock), 1);
	cr_assert_not(wlk_lock_stolen(r.lock));
	cr_assert_not(t_readable(fd), "descriptor readable after dispatch");
	T_ASSERT_RC(wlk_manager_dispatch(m), 0);
	cr_assert_eq(atomic_load(&r.calls), 1, "callback ran twice");
	/* The lock stays held after the callback returned. */
	cr_assert_eq(t_held_n(m, "r", 1), 1);
	T_ASSERT_RC(wlk_release(r.lock), 0);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
}

Test(async, shared_requests_are_granted_together, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct rec r1 = { 0 }, r2 = { 0 };
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(o, "r", 1, &sh, &l), 0);
	T_ASSERT_RC(req_async(m, "r", &sh, &r1), 0);
	T_ASSERT_RC(req_async(m, "r", &sh, &r2), 0);
	cr_assert(pump(m, 2));
	T_ASSERT_RC(r1.status, 0);
	T_ASSERT_RC(r2.status, 0);
	cr_assert_eq(wlk_lock_mode(r1.lock), WLK_SHARED);
	cr_assert_eq(t_held_n(m, "r", 1), 3);
	T_ASSERT_RC(wlk_release(r1.lock), 0);
	T_ASSERT_RC(wlk_release(r2.lock), 0);
	T_ASSERT_RC(wlk_release(l), 0);
}

Test(async, if_available_miss_gives_status_0_and_null_lock, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct wlk_lock *l = NULL;
	struct rec miss = { 0 }, hit = { 0 };

	T_ASSERT_RC(wlk_acquire(o, "r", 1, NULL, &l), 0);
	T_ASSERT_RC(req_async(m, "r", &ex_ia, &miss), 0);
	cr_assert_eq(atomic_load(&miss.calls), 0,
		     "miss called back inside wlk_request_async");
	cr_assert_eq(t_pending_n(m, NULL, 0), 0, "if_available queued");
	cr_assert(pump(m, 1));
	T_ASSERT_RC(miss.status, 0);
	cr_assert_null(miss.lock);
	cr_assert_not(miss.during_request);

	T_ASSERT_RC(req_async(m, "s", &ex_ia, &hit), 0);
	cr_assert(pump(m, 2));
	T_ASSERT_RC(hit.status, 0);
	cr_assert_not_null(hit.lock);
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_eq(atomic_load(&miss.calls), 1);
	T_ASSERT_RC(wlk_release(hit.lock), 0);
	T_ASSERT_RC(wlk_release(l), 0);
}

/* 100 requests on distinct names and 100 queued on one name. */
Test(async, many_outstanding_requests_on_one_descriptor, T_FIX,
     .timeout = 30)
{
	enum { N = 100 };
	struct wlk_manager *m = t_open(), *o = t_open();
	struct rec *distinct = calloc(N, sizeof(*distinct));
	struct rec *same = calloc(N, sizeof(*same));
	struct wlk_lock *l = NULL;
	char names[N][16];	/* room for "n" and any int */
	int i;

	cr_assert(distinct && same);
	T_ASSERT_RC(wlk_acquire(o, "q", 1, NULL, &l), 0);
	for (i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "n%d", i);
		distinct[i].release = true;
		T_ASSERT_RC(req_async(m, names[i], NULL, &distinct[i]), 0);
		same[i].release = true;
		T_ASSERT_RC(req_async(m, "q", NULL, &same[i]), 0);
	}
	cr_assert_eq(t_pending_n(m, "q", 1), N);
	cr_assert_eq(atomic_load(&g_calls), 0);

	cr_assert(pump(m, N), "%d of %d distinct grants delivered",
		  atomic_load(&g_calls), N);
	for (i = 0; i < N; i++) {
		cr_assert_eq(atomic_load(&distinct[i].calls), 1,
			     "request %d called back %d times", i,
			     atomic_load(&distinct[i].calls));
		T_ASSERT_RC(distinct[i].status, 0);
		T_ASSERT_RC(distinct[i].rel_rc, 0);
		cr_assert_eq(atomic_load(&same[i].calls), 0,
			     "queued request %d completed while held", i);
	}

	/* Each callback releases "q"; the next one is granted and rung. */
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert(pump(m, 2 * N), "%d of %d grants delivered",
		  atomic_load(&g_calls), 2 * N);
	for (i = 0; i < N; i++) {
		cr_assert_eq(atomic_load(&same[i].calls), 1);
		T_ASSERT_RC(same[i].status, 0);
		T_ASSERT_RC(same[i].rel_rc, 0);
		if (i)
			cr_assert_gt(same[i].seq, same[i - 1].seq,
				     "request %d granted before %d", i, i - 1);
	}
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_eq(atomic_load(&g_calls), 2 * N, "a callback ran twice");
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
	free(distinct);
	free(same);
}

struct dispatcher {
	struct wlk_manager *m;
	int want;
	int ran;
	bool ok;
	pthread_t th;
};

static void *dispatcher_main(void *arg)
{
	struct dispatcher *d = arg;
	int fd = wlk_manager_fd(d->m);
	uint64_t end = t_now_ns() + (uint64_t)T_WAIT_MS * 1000000u;

	d->ok = fd >= 0;
	while (d->ok && atomic_load(&g_calls) < d->want) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int n = poll(&p, 1, 20);

		if (n > 0) {
			n = wlk_manager_dispatch(d->m);
			if (n < 0)
				d->ok = false;
			else
				d->ran += n;
		}
		if (t_now_ns() > end)
			d->ok = false;
	}
	return NULL;
}

Test(async, concurrent_dispatchers_share_the_callbacks_out, T_FIX,
     .timeout = 30)
{
	enum { N = 200 };
	struct wlk_manager *m = t_open();
	struct rec *r = calloc(N, sizeof(*r));
	struct dispatcher d[2];
	char name[16];
	int i;

	cr_assert_not_null(r);
	for (i = 0; i < N; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		r[i].release = true;
		T_ASSERT_RC(req_async(m, name, NULL, &r[i]), 0);
	}
	for (i = 0; i < 2; i++) {
		d[i] = (struct dispatcher){ .m = m, .want = N };
		cr_assert_eq(pthread_create(&d[i].th, NULL, dispatcher_main,
					    &d[i]), 0);
	}
	for (i = 0; i < 2; i++)
		pthread_join(d[i].th, NULL);
	cr_assert(d[0].ok && d[1].ok, "a dispatcher failed or timed out");
	cr_assert_eq(d[0].ran + d[1].ran, N, "dispatch counted %d + %d",
		     d[0].ran, d[1].ran);
	for (i = 0; i < N; i++) {
		cr_assert_eq(atomic_load(&r[i].calls), 1,
			     "request %d called back %d times", i,
			     atomic_load(&r[i].calls));
		T_ASSERT_RC(r[i].rel_rc, 0);
	}
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	free(r);
}

/*
 * One FIFO queue per name for async and blocking requesters: requests
 * alternate between async ones on one manager and blocking threads on
 * managers of their own; each is pending before the next is made.
 */
Test(async, fifo_order_across_async_and_blocking_threads, T_FIX,
     .timeout = 30)
{
	enum { K = 8 };
	struct wlk_manager *m = t_open(), *o = t_open();
	struct wlk_manager *bm[K];
	struct rec r[K];
	struct blocker b[K];
	struct wlk_lock *l = NULL;
	int i;

	memset(r, 0, sizeof(r));
	T_ASSERT_RC(wlk_acquire(o, "r", 1, NULL, &l), 0);
	for (i = 0; i < K; i++) {
		if (i % 2 == 0) {
			r[i].release = true;
			T_ASSERT_RC(req_async(m, "r", NULL, &r[i]), 0);
		} else {
			bm[i] = t_open();
			blocker_start(&b[i], bm[i], "r", NULL);
		}
		cr_assert(t_wait_pending(o, "r", 1, (size_t)i + 1),
			  "requester %d did not queue", i);
	}
	/* The first dispatch (our own bell) must not grant anything. */
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert(pump(m, K), "only %d of %d granted", atomic_load(&g_calls),
		  K);
	for (i = 1; i < K; i += 2)
		pthread_join(b[i].th, NULL);
	for (i = 0; i < K; i++) {
		int seq = i % 2 == 0 ? r[i].seq : b[i].seq;

		cr_assert_eq(seq, i, "requester %d was granted %d-th", i, seq);
		if (i % 2 == 0) {
			cr_assert_eq(atomic_load(&r[i].calls), 1);
			T_ASSERT_RC(r[i].status, 0);
			T_ASSERT_RC(r[i].rel_rc, 0);
		} else {
			T_ASSERT_RC(b[i].acq_rc, 0);
			T_ASSERT_RC(b[i].rel_rc, 0);
		}
	}
	cr_assert_eq(t_held_n(o, NULL, 0), 0);
}

/* A shared async request waits behind a queued blocking exclusive one. */
Test(async, shared_async_request_waits_behind_queued_exclusive, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open(), *o = t_open(), *x = t_open();
	struct wlk_lock *l = NULL;
	struct rec r = { .release = true };
	struct t_holder h;

	T_ASSERT_RC(wlk_acquire(o, "r", 1, &sh, &l), 0);
	t_holder_start(&h, x, "r", 1, NULL);
	cr_assert(t_wait_pending(o, "r", 1, 1));
	T_ASSERT_RC(req_async(m, "r", &sh, &r), 0);
	cr_assert_eq(t_pending_n(o, "r", 1), 2, "shared request jumped");
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_eq(atomic_load(&r.calls), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_eq(atomic_load(&r.calls), 0, "granted beside an exclusive");
	cr_assert_eq(t_holder_release(&h), 0);
	cr_assert(pump(m, 1));
	T_ASSERT_RC(r.status, 0);
	T_ASSERT_RC(r.rel_rc, 0);
	t_holder_join(&h);
}

/*
 * Abort, timeout, cancel.
 */

Test(async, abort_passes_the_reason_and_leaves_the_queue, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open(), *o = t_open(), *x = t_open();
	struct wlk_signal *s = NULL;
	struct wlk_lock *l = NULL;
	struct rec r = { 0 };
	struct t_holder h;

	T_ASSERT_RC(wlk_signal_new(&s), 0);
	T_ASSERT_RC(wlk_acquire(o, "r", 1, NULL, &l), 0);
	T_ASSERT_RC(req_async(m, "r", &(struct wlk_options){ .signal = s },
			      &r), 0);
	t_holder_start(&h, x, "r", 1, NULL);
	cr_assert(t_wait_pending(o, "r", 1, 2));
	T_ASSERT_RC(t_dispatch_ready(m), 0);

	wlk_signal_abort(s, -ECANCELED);
	cr_assert(pump(m, 1), "abort did not make the descriptor readable");
	T_ASSERT_RC(r.status, -ECANCELED);
	cr_assert_null(r.lock);
	cr_assert_eq(t_pending_n(o, "r", 1), 1, "aborted request still queued");
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0, "next one not granted");
	T_ASSERT_RC(h.acq_rc, 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_eq(atomic_load(&r.calls), 1);
	wlk_signal_free(s);
}

Test(async, abort_without_reason_is_eaborted, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct wlk_signal *s = NULL;
	struct wlk_lock *l = NULL;
	struct rec r = { 0 };

	T_ASSERT_RC(wlk_signal_new(&s), 0);
	T_ASSERT_RC(wlk_acquire(o, "r", 1, NULL, &l), 0);
	T_ASSERT_RC(req_async(m, "r", &(struct wlk_options){ .signal = s },
			      &r), 0);
	wlk_signal_abort(s, 0);
	cr_assert(pump(m, 1));
	T_ASSERT_RC(r.status, WLK_EABORTED);
	cr_assert_eq(t_pending_n(o, NULL, 0), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	wlk_signal_free(s);
}

/* The abort grants the shared request that waited behind the aborted one. */
Test(async, abort_grants_the_shared_request_behind, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open(), *o = t_open(), *x = t_open();
	struct wlk_signal *s = NULL;
	struct wlk_lock *l = NULL;
	struct rec r = { 0 };
	struct t_holder h;

	T_ASSERT_RC(wlk_signal_new(&s), 0);
	T_ASSERT_RC(wlk_acquire(o, "r", 1, &sh, &l), 0);
	T_ASSERT_RC(req_async(m, "r", &(struct wlk_options){ .signal = s },
			      &r), 0);
	t_holder_start(&h, x, "r", 1, &sh);
	cr_assert(t_wait_pending(o, "r", 1, 2));
	cr_assert_not(t_holder_granted_now(&h));
	wlk_signal_abort(s, -ECANCELED);
	cr_assert(pump(m, 1));
	T_ASSERT_RC(r.status, -ECANCELED);
	cr_assert_eq(t_holder_wait_granted(&h), 0, "shared one not granted");
	cr_assert_eq(t_held_n(o, "r", 1), 2);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
	T_ASSERT_RC(wlk_release(l), 0);
	wlk_signal_free(s);
}

/* Aborted after the grant but before dispatch: released, reason given. */
Test(async, abort_after_grant_before_dispatch_releases, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_signal *s = NULL;
	struct rec r = { 0 };

	T_ASSERT_RC(wlk_signal_new(&s), 0);
	T_ASSERT_RC(req_async(m, "r", &(struct wlk_options){ .signal = s },
			      &r), 0);
	cr_assert_eq(t_held_n(m, "r", 1), 1);
	wlk_signal_abort(s, -ECANCELED);
	cr_assert(pump(m, 1));
	T_ASSERT_RC(r.status, -ECANCELED);
	cr_assert_null(r.lock);
	cr_assert_eq(t_held_n(m, NULL, 0), 0, "aborted grant left held");
	wlk_signal_free(s);
}

/* One signal for requests of two managers: both leave their queues. */
Test(async, one_signal_aborts_requests_of_two_managers, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *o = t_open();
	struct wlk_options os = { 0 };
	struct wlk_lock *l = NULL;
	struct rec ra = { 0 }, rb = { 0 };

	T_ASSERT_RC(wlk_signal_new(&os.signal), 0);
	T_ASSERT_RC(wlk_acquire(o, "r", 1, NULL, &l), 0);
	T_ASSERT_RC(req_async(a, "r", &os, &ra), 0);
	T_ASSERT_RC(req_async(b, "r", &os, &rb), 0);
	wlk_signal_abort(os.signal, -ECANCELED);
	cr_assert(pump(a, 1));
	cr_assert(pump(b, 2));
	T_ASSERT_RC(ra.status, -ECANCELED);
	T_ASSERT_RC(rb.status, -ECANCELED);
	cr_assert_eq(t_pending_n(o, NULL, 0), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	wlk_signal_free(os.signal);
}

Test(async, timeout_gives_etimedout_and_leaves_the_queue, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open(), *o = t_open(), *x = t_open();
	struct wlk_options ot = { .timeout_ns = 50 * 1000000ull };
	struct wlk_lock *l = NULL;
	struct rec r = { 0 };
	struct t_holder h;
	uint64_t t0;

	T_ASSERT_RC(wlk_acquire(o, "r", 1, NULL, &l), 0);
	t0 = t_now_ns();
	T_ASSERT_RC(req_async(m, "r", &ot, &r), 0);
	t_holder_start(&h, x, "r", 1, NULL);
	cr_assert(t_wait_pending(o, "r", 1, 2));
	/* Only the deadline makes the descriptor readable here. */
	cr_assert(pump(m, 1), "deadline did not make the fd readable");
	T_ASSERT_RC(r.status, WLK_ETIMEDOUT);
	cr_assert_null(r.lock);
	cr_assert_geq(t_now_ns() - t0, ot.timeout_ns, "timed out early");
	cr_assert_eq(t_pending_n(o, "r", 1), 1, "timed-out request queued");
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
}

/* UINT64_MAX is "forever": the deadline must not wrap to the past. */
Test(async, timeout_of_uint64_max_waits_until_granted, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct wlk_options ot = { .timeout_ns = UINT64_MAX };
	struct wlk_lock *l = NULL;
	struct rec r = { .release = true };

	T_ASSERT_RC(wlk_acquire(o, "r", 1, NULL, &l), 0);
	T_ASSERT_RC(req_async(m, "r", &ot, &r), 0);
	cr_assert_not(t_pump(m, &g_calls, 1, 100), "completed with %s at once",
		      t_ename(r.status));
	cr_assert_eq(t_pending_n(o, "r", 1), 1);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert(pump(m, 1));
	T_ASSERT_RC(r.status, 0);
	T_ASSERT_RC(r.rel_rc, 0);
}

Test(async, grant_before_the_deadline_wins, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct wlk_options ot = { .timeout_ns = 60 * 1000000000ull };
	struct wlk_lock *l = NULL;
	struct rec r = { .release = true };

	T_ASSERT_RC(wlk_acquire(o, "r", 1, NULL, &l), 0);
	T_ASSERT_RC(req_async(m, "r", &ot, &r), 0);
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert(pump(m, 1));
	T_ASSERT_RC(r.status, 0);
	T_ASSERT_RC(r.rel_rc, 0);
	/* The disarmed deadline does not ring later. */
	T_ASSERT_RC(t_dispatch_ready(m), 0);
}

/*
 * The timeout only limits the wait for the grant (struct wlk_options: "if
 * not granted within this many nanoseconds"), as for wlk_acquire(): a
 * request granted before its deadline, but dispatched after it because the
 * loop was busy, is granted.
 */
Test(async, grant_before_the_deadline_wins_even_if_dispatched_late, T_FIX,
     .timeout = 60)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct wlk_options ot = { .timeout_ns = 200 * 1000000ull };
	struct wlk_lock *l = NULL;
	struct rec r = { .release = true };
	uint64_t t0;
	int calls = 0;

	/* The grant must be seen before the deadline; on a machine stalled
	 * that long, try again with a longer one. */
	for (int tries = 1;; tries++) {
		bool in_time;

		r = (struct rec){ .release = true };
		T_ASSERT_RC(wlk_acquire(o, "r", 1, NULL, &l), 0);
		t0 = t_now_ns();
		T_ASSERT_RC(req_async(m, "r", &ot, &r), 0);
		T_ASSERT_RC(wlk_release(l), 0);
		/* Granted in the segment by the release. */
		cr_assert_eq(t_held_by(o, "r", 1, wlk_manager_client_id(m)),
			     1);
		in_time = t_now_ns() - t0 < ot.timeout_ns;
		calls++;
		if (in_time)
			break;
		cr_assert_lt(tries, 4, "machine too slow, %d tries", tries);
		cr_assert(pump(m, calls));
		ot.timeout_ns *= 2;
	}
	/* The loop is busy past the deadline (letting time pass). */
	t_nap_ms((unsigned int)(ot.timeout_ns / 1000000u) + 100);
	cr_assert(pump(m, calls));
	cr_assert_eq(r.status, 0, "granted request reported as %s",
		     t_ename(r.status));
	T_ASSERT_RC(r.rel_rc, 0);
	cr_assert_eq(t_held_n(o, NULL, 0), 0);
}

Test(async, cancel_gives_eaborted_and_leaves_the_queue, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open(), *o = t_open(), *x = t_open();
	struct wlk_lock *l = NULL;
	struct rec r = { 0 }, after = { .release = true };
	struct t_holder h;

	T_ASSERT_RC(wlk_acquire(o, "r", 1, NULL, &l), 0);
	T_ASSERT_RC(req_async(m, "r", NULL, &r), 0);
	t_holder_start(&h, x, "r", 1, NULL);
	cr_assert(t_wait_pending(o, "r", 1, 2));
	T_ASSERT_RC(req_async(m, "r", NULL, &after), 0);
	T_ASSERT_RC(t_dispatch_ready(m), 0);

	T_ASSERT_RC(wlk_async_cancel(r.req), 0);
	T_ASSERT_RC(wlk_async_cancel(r.req), 0); /* twice: harmless */
	cr_assert_eq(atomic_load(&r.calls), 0, "cancel ran the callback");
	/* Out of the queue already, as the spec's abort is: before any
	 * dispatch, a query does not show it. */
	cr_assert_eq(t_pending_n(o, "r", 1), 2, "cancelled, still queued");
	cr_assert(pump(m, 1));
	T_ASSERT_RC(r.status, WLK_EABORTED);
	cr_assert_null(r.lock);
	cr_assert_eq(t_pending_n(o, "r", 1), 2, "cancelled request queued");
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_eq(atomic_load(&r.calls), 1, "cancelled callback ran again");

	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0, "next one not granted");
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
	cr_assert(pump(m, 2));
	T_ASSERT_RC(after.status, 0);
	T_ASSERT_RC(after.rel_rc, 0);
}

/* Cancelled after the grant but before dispatch: the lock is released. */
Test(async, cancel_after_grant_before_dispatch_releases, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open(), *x = t_open();
	struct rec r = { 0 };
	struct t_holder h;

	T_ASSERT_RC(req_async(m, "r", NULL, &r), 0);
	cr_assert_eq(t_held_n(m, "r", 1), 1);
	t_holder_start(&h, x, "r", 1, NULL);
	cr_assert(t_wait_pending(m, "r", 1, 1));
	T_ASSERT_RC(wlk_async_cancel(r.req), 0);
	cr_assert(pump(m, 1));
	T_ASSERT_RC(r.status, WLK_EABORTED);
	cr_assert_null(r.lock);
	cr_assert_eq(t_holder_wait_granted(&h), 0, "lock not released");
	T_ASSERT_RC(h.acq_rc, 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
}

/* A thread that releases a lock at a barrier. */
struct releaser {
	struct wlk_lock *l;
	pthread_barrier_t *go;
	int rc;
	pthread_t th;
};

static void *releaser_main(void *arg)
{
	struct releaser *r = arg;

	pthread_barrier_wait(r->go);
	r->rc = wlk_release(r->l);
	return NULL;
}

/*
 * An abort racing with the grant (and with a dispatcher thread) ends as a
 * grant delivered before the abort, or with the reason; never with the
 * lock held by nobody's handle or the request left queued.
 */
Test(async, abort_racing_with_grant_and_dispatch_leaks_nothing, T_FIX,
     .timeout = 60)
{
	enum { ITER = 100 };
	struct wlk_manager *m = t_open(), *o = t_open();
	pthread_barrier_t go;
	int i, granted = 0, aborted = 0;

	pthread_barrier_init(&go, NULL, 2);
	for (i = 0; i < ITER; i++) {
		struct wlk_options os = { 0 };
		struct releaser rl = { .go = &go, .rc = 1 };
		struct dispatcher d = { .m = m, .want = i + 1 };
		struct rec r = { 0 };

		T_ASSERT_RC(wlk_signal_new(&os.signal), 0);
		T_ASSERT_RC(wlk_acquire(o, "r", 1, NULL, &rl.l), 0);
		T_ASSERT_RC(req_async(m, "r", &os, &r), 0);
		cr_assert_eq(pthread_create(&rl.th, NULL, releaser_main, &rl),
			     0);
		cr_assert_eq(pthread_create(&d.th, NULL, dispatcher_main, &d),
			     0);
		pthread_barrier_wait(&go);
		wlk_signal_abort(os.signal, -ECANCELED);
		pthread_join(rl.th, NULL);
		pthread_join(d.th, NULL);
		T_ASSERT_RC(rl.rc, 0);
		cr_assert(d.ok, "iteration %d: no callback", i);
		cr_assert_eq(atomic_load(&r.calls), 1);
		if (r.status == 0) {
			cr_assert_not_null(r.lock);
			T_ASSERT_RC(wlk_release(r.lock), 0);
			granted++;
		} else {
			T_ASSERT_RC(r.status, -ECANCELED);
			cr_assert_null(r.lock);
			aborted++;
		}
		cr_assert_eq(t_held_n(o, "r", 1), 0, "iteration %d: leaked", i);
		cr_assert_eq(t_pending_n(o, "r", 1), 0, "iteration %d: queued",
			     i);
		wlk_signal_free(os.signal);
	}
	pthread_barrier_destroy(&go);
	cr_log_info("abort race: %d granted first, %d aborted", granted,
		    aborted);
}

Test(async, cancel_racing_with_grant_leaks_nothing, T_FIX, .timeout = 60)
{
	enum { ITER = 100 };
	struct wlk_manager *m = t_open(), *o = t_open();
	pthread_barrier_t go;
	int i;

	pthread_barrier_init(&go, NULL, 2);
	for (i = 0; i < ITER; i++) {
		struct releaser rl = { .go = &go, .rc = 1 };
		struct rec r = { 0 };

		T_ASSERT_RC(wlk_acquire(o, "r", 1, NULL, &rl.l), 0);
		T_ASSERT_RC(req_async(m, "r", NULL, &r), 0);
		cr_assert_eq(pthread_create(&rl.th, NULL, releaser_main, &rl),
			     0);
		pthread_barrier_wait(&go);
		T_ASSERT_RC(wlk_async_cancel(r.req), 0);
		pthread_join(rl.th, NULL);
		T_ASSERT_RC(rl.rc, 0);
		/* Cancelled before any dispatch: aborted whatever the race. */
		cr_assert(pump(m, i + 1), "iteration %d: no callback", i);
		cr_assert_eq(atomic_load(&r.calls), 1);
		T_ASSERT_RC(r.status, WLK_EABORTED);
		cr_assert_null(r.lock);
		cr_assert_eq(t_held_n(o, "r", 1), 0, "iteration %d: leaked", i);
		cr_assert_eq(t_pending_n(o, "r", 1), 0, "iteration %d: queued",
			     i);
	}
	pthread_barrier_destroy(&go);
}

/*
 * Steal notification.
 */

static void steal_notifies(struct wlk_manager *m, struct wlk_lock *l)
{
	struct wlk_manager *thief = t_open();
	struct wlk_lock *lt = NULL;
	struct srec s = { 0 };
	int base = atomic_load(&g_calls);

	T_ASSERT_RC(wlk_lock_on_stolen(l, on_stolen, &s), 0);
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_not(t_readable(wlk_manager_fd(m)));
	T_ASSERT_RC(wlk_acquire(thief, "r", 1, &steal, &lt), 0);
	cr_assert_eq(atomic_load(&s.calls), 0, "stolen callback ran in steal");
	cr_assert(wlk_lock_stolen(l));
	cr_assert(pump(m, base + 1), "steal did not ring the descriptor");
	cr_assert_eq(atomic_load(&s.calls), 1);
	cr_assert_eq(s.lock, l, "stolen callback got another lock");
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_eq(atomic_load(&s.calls), 1, "stolen callback ran twice");
	T_ASSERT_RC(wlk_release(l), WLK_ESTOLEN);
	cr_assert_eq(t_held_by(m, "r", 1, wlk_manager_client_id(thief)), 1);
	T_ASSERT_RC(wlk_release(lt), 0);
}

Test(async, steal_notifies_a_lock_granted_async, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct rec r = { 0 };

	T_ASSERT_RC(req_async(m, "r", NULL, &r), 0);
	cr_assert(pump(m, 1));
	cr_assert_not_null(r.lock);
	steal_notifies(m, r.lock);
}

Test(async, steal_notifies_a_lock_from_wlk_acquire, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	steal_notifies(m, l);
}

/* Every shared holder is told; one releases inside its stolen callback. */
Test(async, steal_notifies_every_shared_holder, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open(), *thief = t_open();
	struct wlk_lock *l1 = NULL, *l2 = NULL, *lt = NULL;
	struct srec s1 = { .release = true }, s2 = { 0 };

	T_ASSERT_RC(wlk_acquire(m, "r", 1, &sh, &l1), 0);
	T_ASSERT_RC(wlk_acquire(m, "r", 1, &sh, &l2), 0);
	T_ASSERT_RC(wlk_lock_on_stolen(l1, on_stolen, &s1), 0);
	T_ASSERT_RC(wlk_lock_on_stolen(l2, on_stolen, &s2), 0);
	T_ASSERT_RC(wlk_acquire(thief, "r", 1, &steal, &lt), 0);
	cr_assert(pump(m, 2));
	cr_assert_eq(atomic_load(&s1.calls), 1);
	cr_assert_eq(atomic_load(&s2.calls), 1);
	T_ASSERT_RC(s1.rel_rc, WLK_ESTOLEN);
	T_ASSERT_RC(wlk_release(l2), WLK_ESTOLEN);
	T_ASSERT_RC(wlk_release(lt), 0);
}

Test(async, on_stolen_null_stops_watching, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open(), *thief = t_open();
	struct wlk_lock *l = NULL, *lt = NULL;
	struct srec s = { 0 };

	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	T_ASSERT_RC(wlk_lock_on_stolen(l, on_stolen, &s), 0);
	T_ASSERT_RC(wlk_lock_on_stolen(l, NULL, NULL), 0);
	T_ASSERT_RC(wlk_lock_on_stolen(l, NULL, NULL), 0); /* twice */
	T_ASSERT_RC(wlk_acquire(thief, "r", 1, &steal, &lt), 0);
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_eq(atomic_load(&s.calls), 0, "unwatched lock reported");
	T_ASSERT_RC(wlk_release(l), WLK_ESTOLEN);
	T_ASSERT_RC(wlk_release(lt), 0);
}

/* Watching a lock that was stolen already tells at the next dispatch. */
Test(async, on_stolen_after_the_steal_still_tells, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open(), *thief = t_open();
	struct wlk_lock *l = NULL, *lt = NULL;
	struct srec s = { 0 };

	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	T_ASSERT_RC(wlk_acquire(thief, "r", 1, &steal, &lt), 0);
	T_ASSERT_RC(wlk_lock_on_stolen(l, on_stolen, &s), 0);
	cr_assert_eq(atomic_load(&s.calls), 0);
	cr_assert(pump(m, 1));
	cr_assert_eq(atomic_load(&s.calls), 1);
	T_ASSERT_RC(wlk_release(l), WLK_ESTOLEN);
	T_ASSERT_RC(wlk_release(lt), 0);
}

/* A watched lock released before any steal is never reported. */
Test(async, released_watched_lock_is_not_reported, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open(), *thief = t_open();
	struct wlk_lock *l = NULL, *lt = NULL;
	struct srec s = { 0 };

	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	T_ASSERT_RC(wlk_lock_on_stolen(l, on_stolen, &s), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	T_ASSERT_RC(wlk_acquire(thief, "r", 1, &steal, &lt), 0);
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_eq(atomic_load(&s.calls), 0);
	T_ASSERT_RC(wlk_release(lt), 0);
}

/* An async stealer is granted ahead of the queue, through dispatch. */
Test(async, async_steal_is_granted_through_dispatch, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct wlk_lock *l = NULL;
	struct rec r = { 0 };

	T_ASSERT_RC(wlk_acquire(o, "r", 1, NULL, &l), 0);
	T_ASSERT_RC(req_async(m, "r", &steal, &r), 0);
	cr_assert(wlk_lock_stolen(l));
	cr_assert_eq(atomic_load(&r.calls), 0);
	cr_assert(pump(m, 1));
	T_ASSERT_RC(r.status, 0);
	cr_assert_not_null(r.lock);
	T_ASSERT_RC(wlk_release(l), WLK_ESTOLEN);
	T_ASSERT_RC(wlk_release(r.lock), 0);
}

/*
 * Closing a manager with requests outstanding.
 */

static void try_request(struct rec *r)
{
	struct rec *late = r->then_arg;

	r->then_rc = req_async(r->m, "late", NULL, late);
}

Test(async, close_runs_every_outstanding_callback_with_estate, T_FIX,
     .timeout = 20)
{
	enum { NR = 6 };
	struct wlk_manager *m = t_open(), *o = t_open(), *x = t_open();
	struct wlk_options os = { 0 };
	struct wlk_options ot = { .timeout_ns = 60 * 1000000000ull };
	struct wlk_lock *busy = NULL, *acq = NULL;
	struct rec held = { 0 }, r[NR], late = { 0 };
	struct srec s = { 0 };
	struct t_holder h;
	int i, base;

	memset(r, 0, sizeof(r));
	T_ASSERT_RC(wlk_signal_new(&os.signal), 0);
	T_ASSERT_RC(wlk_acquire(o, "busy", 4, NULL, &busy), 0);
	/* A lock granted and delivered, kept; another from wlk_acquire. */
	T_ASSERT_RC(req_async(m, "held", NULL, &held), 0);
	cr_assert(pump(m, 1));
	cr_assert_not_null(held.lock);
	T_ASSERT_RC(wlk_acquire(m, "acq", 3, NULL, &acq), 0);
	T_ASSERT_RC(wlk_lock_on_stolen(acq, on_stolen, &s), 0);
	T_ASSERT_RC(wlk_lock_on_stolen(held.lock, on_stolen, &s), 0);
	base = atomic_load(&g_calls);

	/* Outstanding: granted but not delivered, ... */
	T_ASSERT_RC(req_async(m, "free", NULL, &r[0]), 0);
	r[0].then = try_request;
	r[0].then_arg = &late;
	r[0].then_rc = 1;
	/* ... queued, with a signal, with a deadline, cancelled, and an
	 * if_available miss not delivered yet. */
	T_ASSERT_RC(req_async(m, "busy", NULL, &r[1]), 0);
	T_ASSERT_RC(req_async(m, "busy", &os, &r[2]), 0);
	T_ASSERT_RC(req_async(m, "busy", &ot, &r[3]), 0);
	T_ASSERT_RC(req_async(m, "busy", NULL, &r[4]), 0);
	T_ASSERT_RC(wlk_async_cancel(r[4].req), 0);
	T_ASSERT_RC(req_async(m, "busy", &ex_ia, &r[5]), 0);
	/* A blocking waiter behind the undelivered grant. */
	t_holder_start(&h, x, "free", 4, NULL);
	cr_assert(t_wait_pending(o, "free", 4, 1));
	cr_assert_eq(t_pending_n(o, "busy", 4), 3, "the cancelled one left");

	t_forget(m);
	t_closing = true;
	wlk_manager_close(m);
	t_closing = false;
	for (i = 0; i < NR; i++) {
		cr_assert_eq(atomic_load(&r[i].calls), 1,
			     "request %d called back %d times by close", i,
			     atomic_load(&r[i].calls));
		cr_assert(r[i].during_close, "request %d not told by close", i);
		/* The cancelled one was aborted before the close. */
		T_ASSERT_RC(r[i].status, i == 4 ? WLK_EABORTED : WLK_ESTATE);
		cr_assert_null(r[i].lock);
	}
	cr_assert_eq(atomic_load(&g_calls), base + NR, "extra callbacks ran");
	cr_assert_eq(atomic_load(&s.calls), 0, "close reported a steal");
	T_ASSERT_RC(r[0].then_rc, WLK_ESTATE);
	cr_assert_eq(atomic_load(&late.calls), 0);

	/* Nothing of m is left in the segment; the waiter behind got in. */
	cr_assert_eq(t_pending_n(o, "busy", 4), 0, "close left requests");
	cr_assert_eq(t_held_n(o, "held", 4), 0);
	cr_assert_eq(t_held_n(o, "acq", 3), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0, "waiter behind not granted");
	T_ASSERT_RC(h.acq_rc, 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
	/* Locks granted before the close are released by it. */
	T_ASSERT_RC(wlk_release(held.lock), WLK_ESTATE);
	T_ASSERT_RC(wlk_release(acq), WLK_ESTATE);
	T_ASSERT_RC(wlk_release(busy), 0);
	wlk_signal_free(os.signal);
}

/*
 * Closing with every kind of request outstanding, the descriptor never
 * polled. It all happens on a thread whose stack is gone by the time the
 * fixture's leak check runs, and the records are freed, so that no stale
 * pointer keeps leaked memory reachable for LeakSanitizer.
 */
struct closer {
	struct rec *r;
	int n;
	int open_rc;
	int rc[8];
	int rel_rc;
};

static void *closer_main(void *arg)
{
	struct closer *c = arg;
	struct wlk_manager *m = NULL;
	struct wlk_options os = { 0 };
	struct wlk_options ot = { .timeout_ns = 60 * 1000000000ull };
	struct rec kept = { 0 };
	char name[16];
	int i;

	c->open_rc = wlk_manager_open(t_origin, NULL, &m);
	if (c->open_rc)
		return NULL;
	c->rc[0] = wlk_signal_new(&os.signal);
	c->rc[1] = req_async(m, "kept", NULL, &kept);
	c->rc[2] = pump(m, 1) ? 0 : -1;
	for (i = 0; i < c->n; i++) {
		snprintf(name, sizeof(name), "n%d", i % 5);
		if (i % 4 == 1)
			c->rc[3] |= req_async(m, name, &os, &c->r[i]);
		else if (i % 4 == 2)
			c->rc[3] |= req_async(m, name, &ot, &c->r[i]);
		else
			c->rc[3] |= req_async(m, name, NULL, &c->r[i]);
		if (i % 7 == 3)
			c->rc[4] |= wlk_async_cancel(c->r[i].req);
	}
	c->rc[5] = wlk_lock_on_stolen(kept.lock, on_stolen, NULL);
	wlk_manager_close(m);
	c->rel_rc = wlk_release(kept.lock);
	wlk_signal_free(os.signal);
	return NULL;
}

Test(async, close_before_any_dispatch_leaks_nothing, T_FIX, .timeout = 20)
{
	enum { N = 50 };
	struct closer *c = calloc(1, sizeof(*c));
	pthread_t th;
	int i;

	cr_assert_not_null(c);
	c->r = calloc(N, sizeof(*c->r));
	cr_assert_not_null(c->r);
	c->n = N;
	cr_assert_eq(pthread_create(&th, NULL, closer_main, c), 0);
	pthread_join(th, NULL);
	T_ASSERT_RC(c->open_rc, 0);
	for (i = 0; i < 6; i++)
		T_ASSERT_RC(c->rc[i], 0);
	T_ASSERT_RC(c->rel_rc, WLK_ESTATE);
	/* Cancelled ones were aborted by the cancel (out of the queue
	 * before close): they say so; close told the rest. */
	for (i = 0; i < N; i++) {
		cr_assert_eq(atomic_load(&c->r[i].calls), 1);
		T_ASSERT_RC(c->r[i].status,
			    i % 7 == 3 ? WLK_EABORTED : WLK_ESTATE);
		cr_assert_null(c->r[i].lock);
	}
	cr_assert_eq(atomic_load(&g_calls), N + 1);
	free(c->r);
	free(c);
}

/*
 * What a callback may do.
 */

static void nested_dispatch(struct rec *r)
{
	r->then_rc = wlk_manager_dispatch(r->m);
}

Test(async, callback_may_dispatch_again, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct rec r1 = { .then = nested_dispatch, .then_rc = -1,
			  .release = true };
	struct rec r2 = { .release = true };

	T_ASSERT_RC(req_async(m, "a", NULL, &r1), 0);
	T_ASSERT_RC(req_async(m, "b", NULL, &r2), 0);
	cr_assert(pump(m, 2));
	cr_assert_geq(r1.then_rc, 0, "nested dispatch: %s",
		      t_ename(r1.then_rc));
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_eq(atomic_load(&r1.calls), 1);
	cr_assert_eq(atomic_load(&r2.calls), 1);
	T_ASSERT_RC(r1.rel_rc, 0);
	T_ASSERT_RC(r2.rel_rc, 0);
}

struct chain {
	struct rec next;
	size_t held_seen;
	int query_rc;
};

static void request_and_query(struct rec *r)
{
	struct chain *c = r->then_arg;
	struct wlk_snapshot *s = NULL;

	c->query_rc = wlk_query(r->m, &s);
	c->held_seen = wlk_snapshot_held_count(s);
	wlk_snapshot_free(s);
	c->next.release = true;
	r->then_rc = req_async(r->m, "next", NULL, &c->next);
}

Test(async, callback_may_request_and_query, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct chain c;
	struct rec r = { .then = request_and_query, .release = true };

	memset(&c, 0, sizeof(c));
	r.then_arg = &c;
	r.then_rc = 1;
	T_ASSERT_RC(req_async(m, "r", NULL, &r), 0);
	cr_assert(pump(m, 1));
	T_ASSERT_RC(r.then_rc, 0);
	T_ASSERT_RC(c.query_rc, 0);
	cr_assert_eq(c.held_seen, 1);
	cr_assert_eq(atomic_load(&c.next.calls), 0,
		     "request made in a callback completed in that dispatch");
	cr_assert(pump(m, 2));
	T_ASSERT_RC(c.next.status, 0);
	T_ASSERT_RC(c.next.rel_rc, 0);
	cr_assert_not(c.next.during_request);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
}

/* Releasing in the callback hands the lock on, async and blocking. */
Test(async, callback_may_release_and_hand_on, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open(), *x = t_open();
	struct rec r[3];
	struct blocker b;
	int i;

	memset(r, 0, sizeof(r));
	for (i = 0; i < 3; i++) {
		r[i].release = true;
		T_ASSERT_RC(req_async(m, "r", NULL, &r[i]), 0);
	}
	blocker_start(&b, x, "r", NULL);
	cr_assert(t_wait_pending(x, "r", 1, 3));
	cr_assert(pump(m, 4));
	pthread_join(b.th, NULL);
	for (i = 0; i < 3; i++) {
		cr_assert_eq(r[i].seq, i);
		T_ASSERT_RC(r[i].status, 0);
		T_ASSERT_RC(r[i].rel_rc, 0);
	}
	cr_assert_eq(b.seq, 3);
	T_ASSERT_RC(b.acq_rc, 0);
	T_ASSERT_RC(b.rel_rc, 0);
}

static void cancel_other(struct rec *r)
{
	struct rec *other = r->then_arg;

	r->then_rc = wlk_async_cancel(other->req);
}

Test(async, callback_may_cancel_another_request, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct wlk_lock *l = NULL;
	struct rec victim = { 0 };
	struct rec r = { .then = cancel_other, .then_arg = &victim,
			 .then_rc = 1, .release = true };

	T_ASSERT_RC(wlk_acquire(o, "busy", 4, NULL, &l), 0);
	T_ASSERT_RC(req_async(m, "busy", NULL, &victim), 0);
	T_ASSERT_RC(req_async(m, "r", NULL, &r), 0);
	cr_assert(pump(m, 2));
	T_ASSERT_RC(r.then_rc, 0);
	T_ASSERT_RC(victim.status, WLK_EABORTED);
	cr_assert_eq(t_pending_n(o, NULL, 0), 0);
	T_ASSERT_RC(wlk_release(l), 0);
}

/* A callback that closes its own manager (dispatch is still running). */
static void close_own(struct rec *r)
{
	t_forget(r->m);
	t_closing = true;
	wlk_manager_close(r->m);
	t_closing = false;
}

/*
 * wlk_manager_dispatch() with a callback that closes the manager: the
 * callbacks ready in the same dispatch still run, once, with their locks
 * (released by the close: wlk_release() says WLK_ESTATE); a request not
 * completed yet is told WLK_ESTATE by the close; nothing is used after it
 * is freed (the AddressSanitizer build checks).
 */
Test(async, a_callback_may_close_its_own_manager, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct wlk_lock *busy = NULL;
	struct rec first = {0}, second = {0}, waiting = {0};
	int n;

	T_ASSERT_RC(wlk_acquire(o, "busy", 4, NULL, &busy), 0);
	T_ASSERT_RC(req_async(m, "a", NULL, &first), 0);
	T_ASSERT_RC(req_async(m, "b", NULL, &second), 0);
	T_ASSERT_RC(req_async(m, "busy", NULL, &waiting), 0);
	first.then = close_own;
	n = wlk_manager_dispatch(m);
	cr_assert_geq(n, 2, "dispatch ran %d callbacks", n);
	cr_assert_eq(atomic_load(&first.calls), 1);
	cr_assert_eq(atomic_load(&second.calls), 1, "the second not run");
	cr_assert_eq(atomic_load(&waiting.calls), 1, "close did not tell");
	T_ASSERT_RC(first.status, 0);
	T_ASSERT_RC(second.status, 0);
	T_ASSERT_RC(waiting.status, WLK_ESTATE);
	cr_assert(waiting.during_close);
	T_ASSERT_RC(wlk_release(first.lock), WLK_ESTATE);
	T_ASSERT_RC(wlk_release(second.lock), WLK_ESTATE);
	cr_assert_eq(t_held_n(o, NULL, 0), 1, "the closed manager's locks");
	T_ASSERT_RC(wlk_release(busy), 0);
}

/*
 * Dispatch looks only where a grant can be (engine.h, ASYNC ORDER): the
 * first unsettled request of each name, the loose ones, and every request
 * after a deadline, a signal or a cancel. These complete out of request
 * order, and each must still be delivered.
 */

Test(async, completions_out_of_request_order_are_delivered, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct wlk_options ot = { .timeout_ns = 50 * 1000000ull };
	struct rec a = { 0 }, b = { 0 }, c = { .release = true };
	struct rec d = { 0 };
	struct wlk_lock *l = NULL;
	int fd = wlk_manager_fd(m);

	T_ASSERT_RC(wlk_acquire(o, "q", 1, NULL, &l), 0);
	T_ASSERT_RC(req_async(m, "q", NULL, &a), 0);
	T_ASSERT_RC(req_async(m, "q", &ot, &b), 0);  /* behind a: times out */
	T_ASSERT_RC(req_async(m, "q", NULL, &c), 0);
	T_ASSERT_RC(req_async(m, "q", NULL, &d), 0);  /* behind c: cancelled */
	cr_assert_eq(t_pending_n(m, "q", 1), 4);

	cr_assert(pump(m, 1), "the deadline behind a request was missed");
	T_ASSERT_RC(b.status, WLK_ETIMEDOUT);
	cr_assert_eq(atomic_load(&a.calls) + atomic_load(&c.calls) +
			     atomic_load(&d.calls), 0);

	/* d is cancelled as the holder goes: the one dispatch that finds a
	 * granted in order, with c still queued behind it, must find d. */
	T_ASSERT_RC(wlk_async_cancel(d.req), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1,
			  T_WAIT_MS), 1);
	cr_assert_eq(wlk_manager_dispatch(m), 2);
	T_ASSERT_RC(a.status, 0);
	T_ASSERT_RC(d.status, WLK_EABORTED);
	cr_assert_eq(atomic_load(&c.calls), 0, "c granted while a holds");
	cr_assert_eq(t_pending_n(m, "q", 1), 1, "c stays queued");

	T_ASSERT_RC(wlk_release(a.lock), 0);
	cr_assert(pump(m, 4), "%d of 4 callbacks", atomic_load(&g_calls));
	T_ASSERT_RC(c.status, 0);
	T_ASSERT_RC(t_dispatch_ready(m), 0);
	cr_assert_eq(atomic_load(&g_calls), 4, "a callback ran twice");
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
}

Test(async, each_names_requests_are_delivered_in_their_order, T_FIX,
     .timeout = 20)
{
	enum { N = 8 };
	struct wlk_manager *m = t_open(), *o = t_open();
	struct rec x[N] = { 0 }, y[N] = { 0 };
	struct wlk_lock *lx = NULL, *ly = NULL;

	T_ASSERT_RC(wlk_acquire(o, "x", 1, NULL, &lx), 0);
	T_ASSERT_RC(wlk_acquire(o, "y", 1, NULL, &ly), 0);
	for (int i = 0; i < N; i++) {
		x[i].release = y[i].release = true;
		T_ASSERT_RC(req_async(m, "x", i % 2 ? &sh : NULL, &x[i]), 0);
		T_ASSERT_RC(req_async(m, "y", NULL, &y[i]), 0);
	}
	/* y's holder goes: every y request in turn, no x request. */
	T_ASSERT_RC(wlk_release(ly), 0);
	cr_assert(pump(m, N), "%d of %d y callbacks", atomic_load(&g_calls),
		  N);
	for (int i = 0; i < N; i++) {
		T_ASSERT_RC(y[i].status, 0);
		cr_assert_eq(atomic_load(&x[i].calls), 0, "x %d called", i);
		if (i)
			cr_assert_gt(y[i].seq, y[i - 1].seq);
	}
	T_ASSERT_RC(wlk_release(lx), 0);
	cr_assert(pump(m, 2 * N), "%d of %d callbacks", atomic_load(&g_calls),
		  2 * N);
	for (int i = 0; i < N; i++) {
		T_ASSERT_RC(x[i].status, 0);
		if (i)
			cr_assert_gt(x[i].seq, x[i - 1].seq);
	}
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
}

Test(async, a_steal_behind_own_queued_requests_is_delivered, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct rec a = { .release = true }, s = { 0 }, f = { 0 };
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(o, "q", 1, NULL, &l), 0);
	T_ASSERT_RC(req_async(m, "q", NULL, &a), 0);
	/* Granted at once, ahead of m's own queued request. */
	T_ASSERT_RC(req_async(m, "q", &steal, &s), 0);
	cr_assert(pump(m, 1), "the steal was not delivered");
	T_ASSERT_RC(s.status, 0);
	cr_assert_not_null(s.lock);
	cr_assert_eq(atomic_load(&a.calls), 0, "a granted with the steal");
	/* An if_available miss on the stolen name, behind a too. */
	T_ASSERT_RC(req_async(m, "q", &ex_ia, &f), 0);
	cr_assert(pump(m, 2), "the if_available miss was not delivered");
	T_ASSERT_RC(f.status, 0);
	cr_assert_null(f.lock);
	T_ASSERT_RC(wlk_release(s.lock), 0);
	cr_assert(pump(m, 3), "a was not granted after the steal's release");
	T_ASSERT_RC(a.status, 0);
	T_ASSERT_RC(wlk_release(l), WLK_ESTOLEN);
}

/* @n requests all granted, their callbacks run in request order; each
 * lock released. */
static void granted_in_order(struct rec *r, int n)
{
	for (int i = 0; i < n; i++) {
		T_ASSERT_RC(r[i].status, 0);
		if (i)
			cr_assert_gt(r[i].seq, r[i - 1].seq,
				     "callback %d ran before %d", i, i - 1);
		T_ASSERT_RC(wlk_release(r[i].lock), 0);
	}
}

Test(async, one_dispatch_runs_callbacks_in_request_order, T_FIX,
     .timeout = 20)
{
	enum { N = 6 };
	static const char *const names[N] = {"y", "x", "y", "z", "x", "z"};
	struct wlk_manager *m = t_open(), *o = t_open();
	struct rec r[N] = { 0 };
	struct wlk_lock *l[3] = { NULL };
	int fd = wlk_manager_fd(m);

	T_ASSERT_RC(wlk_acquire(o, "x", 1, NULL, &l[0]), 0);
	T_ASSERT_RC(wlk_acquire(o, "y", 1, NULL, &l[1]), 0);
	T_ASSERT_RC(wlk_acquire(o, "z", 1, NULL, &l[2]), 0);
	for (int i = 0; i < N; i++)
		T_ASSERT_RC(req_async(m, names[i], &sh, &r[i]), 0);
	/* Every name's holder goes before one dispatch finds them all. */
	for (int i = 0; i < 3; i++)
		T_ASSERT_RC(wlk_release(l[i]), 0);
	cr_assert_eq(poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1,
			  T_WAIT_MS), 1);
	cr_assert_eq(wlk_manager_dispatch(m), N);
	granted_in_order(r, N);
}

/* The same at scale: 300 requests over 5 names in a shuffled order, all
 * granted before one dispatch, run in request order (the merge of the
 * names' runs, lib/async/order.c). */
Test(async, one_dispatch_orders_hundreds_of_callbacks_over_names, T_FIX,
     .timeout = 30)
{
	enum { N = 300, NAMES = 5 };
	static const char *const names[NAMES] = {"a", "b", "c", "d", "e"};
	struct wlk_manager *m = t_open(), *o = t_open();
	struct rec *r = calloc(N, sizeof(*r));
	struct wlk_lock *l[NAMES] = { NULL };
	unsigned int seed = 12345;
	int fd = wlk_manager_fd(m), ran = 0;

	cr_assert_not_null(r);
	for (int i = 0; i < NAMES; i++)
		T_ASSERT_RC(wlk_acquire(o, names[i], 1, NULL, &l[i]), 0);
	for (int i = 0; i < N; i++) {
		seed = seed * 1103515245u + 12345u;
		T_ASSERT_RC(req_async(m, names[(seed >> 16) % NAMES], &sh,
				      &r[i]), 0);
	}
	for (int i = 0; i < NAMES; i++)
		T_ASSERT_RC(wlk_release(l[i]), 0);
	while (ran < N) {
		int k;

		cr_assert_eq(poll(&(struct pollfd){.fd = fd, .events = POLLIN},
				  1, T_WAIT_MS), 1, "%d of %d callbacks", ran,
			     N);
		k = wlk_manager_dispatch(m);
		cr_assert_gt(k, 0);
		ran += k;
	}
	granted_in_order(r, N);
	free(r);
}
