/* SPDX-License-Identifier: MIT */
/*
 * deadlock.c - detect_deadlocks on etcd (lib/etcd/deadlock.c) when two
 * requests close one cycle between them at once: a holds x, b holds y; a
 * asks for y, and its put is held back at the proxy (proxy.h) after its
 * read of the bucket; meanwhile b asks for x, and is queued, seeing no
 * cycle (a was not waiting yet). a's put must then not apply, since the
 * bucket changed after a's read: a reads it again, finds the cycle, and
 * gets WLK_EDEADLK. Were it queued, a and b would wait for each other
 * until a's timeout.
 */
#include <pthread.h>

#include "proxy.h"

/* a's request for y: it must end long before this if it is refused. */
#define ASK_TIMEOUT_MS 3000

struct ask {
	struct wlk_manager *m;
	int rc;
};

static void *ask_y(void *arg)
{
	struct ask *q = arg;
	struct wlk_options o = { .size = sizeof(o),
				 .timeout_ns = ASK_TIMEOUT_MS * 1000000ull };
	struct wlk_lock *l = NULL;

	q->rc = wlk_acquire(q->m, "y", 1, &o, &l);
	if (!q->rc)
		(void)wlk_release(l);
	return NULL;
}

Test(etcd_deadlock, two_requests_closing_one_cycle_at_once, T_FIX,
     .timeout = 60)
{
	static struct proxy p;
	struct wlk_manager_options mo = { .size = sizeof(mo),
					   .detect_deadlocks = true };
	struct wlk_manager *a, *b = t_open_opts(&mo);
	struct wlk_lock *lx = NULL, *ly = NULL;
	struct t_holder wb;
	struct ask q = { 0 };
	pthread_t t;

	proxy_start(&p);
	a = proxy_open(&p, true);
	q.m = a;
	T_ASSERT_RC(wlk_acquire(a, "x", 1, NULL, &lx), 0);
	T_ASSERT_RC(wlk_acquire(b, "y", 1, NULL, &ly), 0);
	atomic_store(&p.hold_armed, 1);
	cr_assert_eq(pthread_create(&t, NULL, ask_y, &q), 0);
	for (int i = 0; i < T_WAIT_MS && !atomic_load(&p.holding); i++)
		t_nap_ms(1);
	cr_assert(atomic_load(&p.holding), "a's put never came");
	t_holder_start(&wb, b, "x", 1, NULL); /* b waits for a */
	cr_assert(t_wait_pending(b, "x", 1, 1));
	atomic_store(&p.let_go, 1);
	cr_assert_eq(pthread_join(t, NULL), 0);
	T_ASSERT_RC(q.rc, WLK_EDEADLK);
	cr_assert_eq(t_pending_n(b, "y", 1), 0, "a's refused request queued");
	T_ASSERT_RC(wlk_release(lx), 0);
	cr_assert_eq(t_holder_wait_granted(&wb), 0);
	T_ASSERT_RC(wb.acq_rc, 0);
	cr_assert_eq(t_holder_release(&wb), 0);
	t_holder_join(&wb);
	T_ASSERT_RC(wlk_release(ly), 0);
	wlk_manager_close(a);
	proxy_stop(&p);
}
