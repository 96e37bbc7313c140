/* SPDX-License-Identifier: MIT */
/*
 * scopes.c - scopes on etcd under a lost lease (lib/etcd/scope.c): a
 * process holding one scope and waiting for another is stopped past its
 * lease's TTL. Run by tests/etcd/check.sh, one test at a time.
 *
 *  - Both of its scopes go, on every name at once, and a scope waiting
 *    elsewhere behind both is granted;
 *  - when it continues, its held scope says stolen (its release
 *    WLK_ESTOLEN) and its waiting one completes with WLK_EABORTED; its
 *    manager goes on with a new lease.
 *
 * And a scope with one of its keys deleted behind the library's back is
 * held on none of its names, and wlk_manager_validate() reports it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../scope_common.h"
#include "proxy.h"

/* Child: hold {a, b}, wait for {c, d} (the test holds "d"), say 'h'; be
 * stopped; on 'c', see both lost, and take another scope. */
static int stopped_scope_holder(void *arg)
{
	struct t_pipe *p = arg;
	struct wlk_name ab[] = { N("a"), N("b") }, cd[] = { N("c"), N("d") };
	struct wlk_name xy[] = { N("x"), N("y") };
	struct wlk_manager *m;
	struct wlk_lock *l = NULL, *l2 = NULL;
	struct rec r = { 0 };

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 1);
	T_CHILD_CHECK(wlk_acquire_scope(m, ab, 2, NULL, &l) == 0, 2);
	T_CHILD_CHECK(wlk_request_scope_async(m, cd, 2, NULL, rec_done, &r,
					      NULL) == 0,
		      3);
	T_CHILD_CHECK(t_put_byte(p[0].wr, 'h') == 0, 4);
	/* Stopped here; continued once the test's scope is granted. */
	T_CHILD_CHECK(t_get_byte(p[1].rd) == 'c', 5);
	T_CHILD_CHECK(t_stolen_within(&l, 1, T_EXPIRY_WAIT_MS), 6);
	T_CHILD_CHECK(wlk_release(l) == WLK_ESTOLEN, 7);
	T_CHILD_CHECK(t_pump(m, &r.calls, 1, T_EXPIRY_WAIT_MS), 8);
	T_CHILD_CHECK(r.status == WLK_EABORTED && !r.lock, 9);
	T_CHILD_CHECK(wlk_acquire_scope(m, xy, 2, NULL, &l2) == 0, 10);
	T_CHILD_CHECK(wlk_release(l2) == 0, 11);
	wlk_manager_close(m);
	return 0;
}

Test(etcd_scopes, an_expired_lease_takes_held_and_queued_scopes_whole,
     T_FIX, .timeout = 60)
{
	struct wlk_manager *m = t_open();
	struct wlk_name bc[] = { N("b"), N("c") };
	struct wlk_lock *ld = NULL, *l = NULL;
	struct wlk_options o = { .size = sizeof(o),
				 .timeout_ns = T_EXPIRY_WAIT_MS * 1000000ull };
	struct t_stopped st;
	uint64_t t0;
	int rc;

	T_ASSERT_RC(wlk_acquire(m, "d", 1, NULL, &ld), 0);
	t_stopped_start(&st, stopped_scope_holder);
	cr_assert_eq(t_held_n(m, NULL, 0), 3, "{a, b} and \"d\"");
	cr_assert_eq(t_pending_n(m, NULL, 0), 2, "{c, d}");
	/* Behind the held scope on "b", the queued one on "c". */
	t0 = t_now_ns();
	T_ASSERT_RC(wlk_acquire_scope(m, bc, 2, &o, &l), 0);
	cr_log_info("granted %.2f s after the holder stopped",
		    (double)(t_now_ns() - t0) / 1e9);
	cr_assert_eq(t_entries_of(m, st.pid), 0, "the lost scopes, in part");
	cr_assert_eq(t_held_n(m, "a", 1), 0);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
	rc = t_stopped_resume(&st, T_EXPIRY_WAIT_MS * 2);
	cr_assert_eq(rc, 0, "the holder's step %d failed", rc);
	cr_assert_not(wlk_lock_stolen(l));
	T_ASSERT_RC(wlk_release(l), 0);
	T_ASSERT_RC(wlk_release(ld), 0);
	t_assert_valid(m, NULL);
}

/* Delete the keys of t_origin's default bucket under @name. */
static void delete_name(const char *name)
{
	char key[700], end[700];

	t_etcd_name_prefix(key, sizeof(key), name);
	/* The name's prefix ends in '/': its range ends at '0'. */
	snprintf(end, sizeof(end), "%.*s0", (int)strlen(key) - 1, key);
	t_etcd_post("/v3/kv/deleterange", key, "range_end", end);
}

static void count_violation(const char *what, void *arg)
{
	(void)what;
	(*(int *)arg)++;
}

Test(etcd_scopes, a_scope_with_a_key_missing_is_held_nowhere_and_invalid,
     T_FIX, .timeout = 30)
{
	struct wlk_manager *m = t_open();
	struct wlk_name ab[] = { N("a"), N("b") };
	struct wlk_lock *l = NULL;
	int bad = 0;

	T_ASSERT_RC(wlk_acquire_scope(m, ab, 2, &sh, &l), 0);
	t_assert_valid(m, NULL);
	delete_name("a");
	cr_assert(t_wait_held(m, "a", 1, 0));
	cr_assert_eq(t_held_n(m, NULL, 0), 0, "part of a scope held");
	cr_assert_eq(t_pending_n(m, "b", 1), 1);
	T_ASSERT_RC(wlk_manager_validate(m, count_violation, &bad),
		    WLK_ECORRUPT);
	cr_assert_eq(bad, 1);
	(void)wlk_release(l); /* the rest of it goes */
	t_assert_valid(m, NULL);
}
