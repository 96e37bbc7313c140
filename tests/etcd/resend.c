/* SPDX-License-Identifier: MIT */
/*
 * resend.c - a call sent twice (weblocks.h, ETCD ENGINE): the first
 * reaches the cluster and applies, its reply is lost, and the client
 * tries the next member. A release's delete then finds nothing; a
 * request's first Txn finds the entry it put, or, on a busy name, puts
 * it once more than it ranged.
 *
 * The manager under test reaches the cluster through a proxy in the test
 * that stands for its first member: it forwards bytes both ways, except
 * that, once armed, it forwards the next /v3/kv/deleterange (or
 * /v3/kv/txn) request, waits for the start of the reply (the call has
 * applied) and closes both sides instead of passing it on. It can also
 * mute the manager's watch stream, so that a steal is not seen before
 * the release.
 *
 *  - A lock released so: 0, not WLK_ESTOLEN, and the name is free.
 *  - A lock stolen by another process, then released so: WLK_ESTOLEN.
 *  - A lock whose lease the cluster revoked (as it ends an expired one),
 *    unseen by the manager, then released: its delete finds nothing, and
 *    only the lease's death tells it from a resend: WLK_ESTOLEN.
 *  - A request on a free name whose put applied unseen: held, by one
 *    entry, and released.
 *  - A request on a busy name whose first Txn (a range) was sent twice:
 *    queued once, granted at the holder's release.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"

/* "r" is free: @other takes it at once. Then @m closes and @p stops. */
static void free_then_end(struct wlk_manager *other, struct wlk_manager *m,
			  struct proxy *p)
{
	struct wlk_options o = { .size = sizeof(o), .if_available = true };
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(other, "r", 1, &o, &l), 0);
	cr_assert_not_null(l, "r is not free");
	T_ASSERT_RC(wlk_release(l), 0);
	wlk_manager_close(m);
	proxy_stop(p);
}

Test(resend, a_release_resent_after_it_applied_is_not_a_steal, T_FIX,
     .timeout = 60)
{
	static struct proxy p;
	struct wlk_manager *m, *other;
	struct wlk_lock *l = NULL;

	proxy_start(&p);
	m = proxy_open(&p, false);
	other = t_open();
	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	atomic_store(&p.drop_armed, 1);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(atomic_load(&p.dropped), 1, "no reply was dropped");
	/* It did let go. */
	free_then_end(other, m, &p);
}

Test(resend, a_release_resent_after_a_steal_is_a_steal, T_FIX,
     .timeout = 60)
{
	static struct proxy p;
	struct wlk_manager *m;
	struct wlk_lock *l = NULL;

	proxy_start(&p);
	m = proxy_open(&p, false);
	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	/* Unseen by the watch: only the release's own reading can tell. */
	atomic_store(&p.mute_watch, 1);
	cr_assert_eq(t_wait(t_fork(t_stealer, (char[]){ "r" }), 30000), 0,
		     "the stealer");
	cr_assert_not(wlk_lock_stolen(l), "the muted watch told");
	atomic_store(&p.drop_armed, 1);
	T_ASSERT_RC(wlk_release(l), WLK_ESTOLEN);
	cr_assert_eq(atomic_load(&p.dropped), 1, "no reply was dropped");
	wlk_manager_close(m);
	proxy_stop(&p);
}

/* Revoke lease @id on the cluster's first member (not the proxy), as the
 * cluster ends a lease that expired. */
static void lease_revoke(long long id)
{
	const char *b = getenv("WEBLOCKS_BACKEND");
	char member[256], cmd[512];
	size_t n;

	cr_assert(b && !strncmp(b, "etcd://", 7));
	b += strlen("etcd://");
	n = strcspn(b, ",");
	cr_assert_lt(n, sizeof(member));
	memcpy(member, b, n);
	member[n] = '\0';
	snprintf(cmd, sizeof(cmd),
		 "curl -sf -m 5 -o /dev/null http://%s/v3/lease/revoke "
		 "-d '{\"ID\":\"%lld\"}'",
		 member, id);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

Test(resend, a_release_after_the_lease_ended_unseen_is_a_steal, T_FIX,
     .timeout = 60)
{
	static struct proxy p;
	const char *ttl = getenv("WEBLOCKS_ETCD_TTL");
	char old[32] = "";
	struct wlk_manager *m, *other = t_open();
	struct wlk_lock *l = NULL;

	/* A long lease: its keepalive, which would find it revoked and
	 * tell the lock before its release, is not due during the test. */
	if (ttl)
		snprintf(old, sizeof(old), "%s", ttl);
	setenv("WEBLOCKS_ETCD_TTL", "60", 1);
	proxy_start(&p);
	m = proxy_open(&p, false);
	if (*old)
		setenv("WEBLOCKS_ETCD_TTL", old, 1);
	else
		unsetenv("WEBLOCKS_ETCD_TTL");
	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	cr_assert_gt(atomic_load(&p.lease), 0, "no put seen");
	/* Unseen by the watch: only the release's own reading can tell. */
	atomic_store(&p.mute_watch, 1);
	lease_revoke(atomic_load(&p.lease));
	cr_assert(t_wait_held(other, "r", 1, 0), "the lease kept the lock");
	cr_assert_not(wlk_lock_stolen(l), "the manager was told");
	T_ASSERT_RC(wlk_release(l), WLK_ESTOLEN);
	wlk_manager_close(m);
	proxy_stop(&p);
}

Test(resend, a_request_resent_after_its_put_applied_holds_once, T_FIX,
     .timeout = 60)
{
	static struct proxy p;
	struct wlk_options o = { .size = sizeof(o), .if_available = true };
	struct wlk_manager *m, *other;
	struct wlk_lock *l = NULL, *l2 = NULL;

	proxy_start(&p);
	m = proxy_open(&p, false);
	other = t_open();
	atomic_store(&p.drop_txn_armed, 1);
	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	cr_assert_eq(atomic_load(&p.dropped), 1, "no reply was dropped");
	cr_assert_eq(t_held_n(other, "r", 1), 1, "not one entry held");
	cr_assert_eq(t_pending_n(other, "r", 1), 0, "an entry waits");
	T_ASSERT_RC(wlk_acquire(other, "r", 1, &o, &l2), 0);
	cr_assert_null(l2, "another was granted the name too");
	T_ASSERT_RC(wlk_release(l), 0);
	free_then_end(other, m, &p);
}

Test(resend, a_request_on_a_busy_name_resent_queues_once, T_FIX,
     .timeout = 60)
{
	static struct proxy p;
	struct wlk_manager *m, *other;
	struct wlk_lock *l = NULL;
	struct t_holder h;

	proxy_start(&p);
	m = proxy_open(&p, false);
	other = t_open();
	T_ASSERT_RC(wlk_acquire(other, "r", 1, NULL, &l), 0);
	atomic_store(&p.drop_txn_armed, 1);
	t_holder_start(&h, m, "r", 1, NULL);
	cr_assert(t_wait_pending(other, "r", 1, 1), "not queued");
	cr_assert_eq(atomic_load(&p.dropped), 1, "no reply was dropped");
	cr_assert_eq(t_pending_n(other, "r", 1), 1, "queued twice");
	cr_assert_not(t_holder_granted_now(&h), "granted while held");
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0, "never granted");
	cr_assert_eq(h.acq_rc, 0, "%s", t_ename(h.acq_rc));
	cr_assert(h.got);
	cr_assert_eq(t_held_n(other, "r", 1), 1, "not one entry held");
	cr_assert_eq(t_holder_release(&h), 0, "no release");
	cr_assert_eq(h.rel_rc, 0, "%s", t_ename(h.rel_rc));
	t_holder_join(&h);
	wlk_manager_close(m);
	proxy_stop(&p);
}
