/* SPDX-License-Identifier: MIT */
/*
 * t_scope.c - scopes (weblocks.h, SCOPES): the calls, their checks, the
 * handle, and the options on a whole scope. The queue rules against
 * single-name requests are in t_scope_queue.c; processes, in
 * tests/multiproc/t_scope_mp.c.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../common.h"
#include "weblocks/async.h"
#include "../scope_common.h"

Test(scope, arguments_are_checked_first, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = (struct wlk_lock *)&l;
	struct wlk_name ab[] = {N("a"), N("b")};
	struct wlk_name hole[] = {N("a"), {NULL, 0}};
	struct wlk_options bad = {.mode = (enum wlk_mode)7};

	T_ASSERT_RC(wlk_acquire_scope(NULL, ab, 2, NULL, &l), WLK_EINVAL);
	T_ASSERT_RC(wlk_acquire_scope(m, NULL, 2, NULL, &l), WLK_EINVAL);
	/* The draft: an empty scope is a TypeError. */
	T_ASSERT_RC(wlk_acquire_scope(m, ab, 0, NULL, &l), WLK_EINVAL);
	T_ASSERT_RC(wlk_acquire_scope(m, hole, 2, NULL, &l), WLK_EINVAL);
	T_ASSERT_RC(wlk_acquire_scope(m, ab, 2, &bad, &l), WLK_EINVAL);
	T_ASSERT_RC(wlk_acquire_scope(m, ab, 2, NULL, NULL), WLK_EINVAL);
	T_ASSERT_RC(wlk_request_scope(m, ab, 2, NULL, NULL, NULL), WLK_EINVAL);
	cr_assert_eq(l, (struct wlk_lock *)&l, "*out written on error");
	cr_assert_eq(t_held_n(m, NULL, 0) + t_pending_n(m, NULL, 0), 0);
}

/* wlk_request()'s order, each name in turn where it checks its name. */
Test(scope, the_spec_checks_come_in_the_spec_order, T_FIX, .timeout = 10)
{
	struct wlk_manager_options mo = WLK_MANAGER_OPTIONS_INIT;
	struct wlk_manager *m;
	struct wlk_lock *l = (struct wlk_lock *)&l;
	struct wlk_signal *sig;
	struct wlk_options o = {0};
	struct wlk_name dash_long[] = {N("0123456789"), N("-x")};
	struct wlk_name longer[] = {N("a"), N("0123456789")};
	struct wlk_name ab[] = {N("a"), N("b")};

	mo.max_name_len = 8;
	m = t_open_opts(&mo);
	/* '-' is checked on every name before any length. */
	T_ASSERT_RC(wlk_acquire_scope(m, dash_long, 2, NULL, &l),
		    WLK_ENOTSUPPORTED);
	o = (struct wlk_options){.steal = true, .if_available = true};
	T_ASSERT_RC(wlk_acquire_scope(m, longer, 2, &o, &l),
		    WLK_ENOTSUPPORTED);
	o = (struct wlk_options){.steal = true, .mode = WLK_SHARED};
	T_ASSERT_RC(wlk_acquire_scope(m, ab, 2, &o, &l), WLK_ENOTSUPPORTED);
	o = (struct wlk_options){.timeout_ns = 1, .if_available = true};
	T_ASSERT_RC(wlk_acquire_scope(m, ab, 2, &o, &l), WLK_ENOTSUPPORTED);
	cr_assert_eq(wlk_signal_new(&sig), 0);
	wlk_signal_abort(sig, -4242);
	o = (struct wlk_options){.signal = sig};
	T_ASSERT_RC(wlk_acquire_scope(m, longer, 2, &o, &l), -4242);
	T_ASSERT_RC(wlk_acquire_scope(m, longer, 2, NULL, &l),
		    WLK_ENAMETOOLONG);
	wlk_signal_free(sig);
	cr_assert_eq(l, (struct wlk_lock *)&l, "*out written on error");
	cr_assert_eq(t_held_n(m, NULL, 0) + t_pending_n(m, NULL, 0), 0);
}

Test(scope, the_handle_has_its_names_sorted_and_unique, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_name v[] = {N("c"), N("ab"), N("a"), N("c"), {"b\0x", 3}};
	const char *want[] = {"a", "ab", "b\0x", "c"};
	size_t want_len[] = {1, 2, 3, 1};
	struct wlk_lock *l = NULL;
	size_t len = 0;

	T_ASSERT_RC(wlk_acquire_scope(m, v, 5, NULL, &l), 0);
	cr_assert_not_null(l);
	cr_assert_eq(wlk_lock_scope_count(l), 4);
	for (size_t i = 0; i < 4; i++) {
		const char *s = wlk_lock_scope_name(l, i, &len);

		cr_assert_eq(len, want_len[i], "name %zu", i);
		cr_assert(!memcmp(s, want[i], len) && s[len] == '\0',
			  "name %zu", i);
		cr_assert_gt(wlk_lock_scope_token(l, i), 0, "token %zu", i);
		cr_assert_eq(t_held_n(m, want[i], want_len[i]), 1);
	}
	cr_assert_null(wlk_lock_scope_name(l, 4, &len));
	cr_assert_eq(wlk_lock_scope_token(l, 4), 0);
	cr_assert_str_eq(wlk_lock_name(l, &len), "a");
	cr_assert_eq(wlk_lock_token(l), wlk_lock_scope_token(l, 0));
	cr_assert_eq(wlk_lock_mode(l), WLK_EXCLUSIVE);
	cr_assert_not(wlk_lock_stolen(l));
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	t_assert_valid(m, NULL);
}

/* Duplicates collapse; one distinct name is a single-name request. */
Test(scope, a_scope_of_one_name_is_a_single_name_request, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_name xx[] = {N("x"), N("x")};
	struct wlk_lock *l = NULL;
	struct wlk_snapshot *s;

	T_ASSERT_RC(wlk_acquire_scope(m, xx, 2, NULL, &l), 0);
	cr_assert_eq(wlk_lock_scope_count(l), 1);
	cr_assert_str_eq(wlk_lock_scope_name(l, 0, NULL), "x");
	cr_assert_eq(wlk_lock_scope_token(l, 0), wlk_lock_token(l));
	T_ASSERT_RC(wlk_query(m, &s), 0);
	cr_assert_eq(wlk_snapshot_held_count(s), 1);
	cr_assert_eq(wlk_snapshot_held(s, 0)->scope, 0);
	wlk_snapshot_free(s);
	T_ASSERT_RC(wlk_release(l), 0);
}

Test(scope, at_most_WLK_SCOPE_MAX_distinct_names, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_name v[WLK_SCOPE_MAX + 1];
	char buf[WLK_SCOPE_MAX + 1][16];
	struct wlk_lock *l = NULL;

	for (int i = 0; i <= WLK_SCOPE_MAX; i++) {
		snprintf(buf[i], sizeof(buf[i]), "n%d", i);
		v[i] = (struct wlk_name)N(buf[i]);
	}
	T_ASSERT_RC(wlk_acquire_scope(m, v, WLK_SCOPE_MAX + 1, NULL, &l),
		    WLK_EINVAL);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	/* Sixty-five names of which two are the same: 64 distinct. */
	v[WLK_SCOPE_MAX] = v[0];
	T_ASSERT_RC(wlk_acquire_scope(m, v, WLK_SCOPE_MAX + 1, NULL, &l), 0);
	cr_assert_eq(wlk_lock_scope_count(l), WLK_SCOPE_MAX);
	cr_assert_eq(t_held_n(m, NULL, 0), WLK_SCOPE_MAX);
	t_assert_valid(m, NULL);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
}

/* Each name counts its own tokens; a scope takes its turn in each. */
Test(scope, each_name_gets_its_own_token_in_its_order, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_name ab[] = {N("a"), N("b")};
	struct wlk_lock *l = NULL;
	uint64_t ta, tb;

	T_ASSERT_RC(wlk_acquire(m, "a", 1, NULL, &l), 0);
	ta = wlk_lock_token(l);
	T_ASSERT_RC(wlk_release(l), 0);
	T_ASSERT_RC(wlk_acquire_scope(m, ab, 2, NULL, &l), 0);
	cr_assert_gt(wlk_lock_scope_token(l, 0), ta);
	tb = wlk_lock_scope_token(l, 1);
	T_ASSERT_RC(wlk_release(l), 0);
	T_ASSERT_RC(wlk_acquire(m, "b", 1, NULL, &l), 0);
	cr_assert_gt(wlk_lock_token(l), tb);
	T_ASSERT_RC(wlk_release(l), 0);
}

/* No room for every name and member: WLK_EFULL, nothing changed. */
Test(scope, a_scope_that_does_not_fit_changes_nothing, T_FIX, .timeout = 10)
{
	struct wlk_manager_options mo = WLK_MANAGER_OPTIONS_INIT;
	struct wlk_manager *m;
	struct wlk_name abc[] = {N("a"), N("b"), N("c")};
	struct wlk_lock *la = NULL, *l = (struct wlk_lock *)&l;

	mo.max_names = 2;
	m = t_open_opts(&mo);
	T_ASSERT_RC(wlk_acquire(m, "a", 1, NULL, &la), 0);
	T_ASSERT_RC(wlk_acquire_scope(m, abc, 3, NULL, &l), WLK_EFULL);
	cr_assert_eq(l, (struct wlk_lock *)&l);
	cr_assert_eq(t_held_n(m, NULL, 0), 1);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
	t_assert_valid(m, NULL);
	T_ASSERT_RC(wlk_release(la), 0);
	/* Two of them fit (the idle "a" is reused for one). */
	T_ASSERT_RC(wlk_acquire_scope(m, abc + 1, 2, NULL, &l), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	t_assert_valid(m, NULL);
}

static int in_callback(struct wlk_lock *l, void *arg)
{
	struct wlk_manager *m = arg;

	if (wlk_lock_scope_count(l) != 2 || t_held_n(m, NULL, 0) != 2)
		return -1;
	return 77;
}

Test(scope, wlk_request_scope_runs_the_callback_holding_every_name, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_name ab[] = {N("b"), N("a")};

	T_ASSERT_RC(wlk_request_scope(m, ab, 2, NULL, in_callback, m), 77);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
}

/* if_available takes every name or none, and never queues. */
Test(scope, if_available_is_all_or_nothing, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_name abc[] = {N("a"), N("b"), N("c")};
	struct wlk_options ia = {.if_available = true};
	struct wlk_options ia_sh = {.if_available = true,
				    .mode = WLK_SHARED};
	struct wlk_lock *lb = NULL, *l = (struct wlk_lock *)&l;

	T_ASSERT_RC(wlk_acquire(b, "b", 1, &sh, &lb), 0);
	T_ASSERT_RC(wlk_acquire_scope(a, abc, 3, &ia, &l), 0);
	cr_assert_null(l, "granted with \"b\" held");
	cr_assert_eq(t_held_n(a, NULL, 0), 1, "part of the scope was taken");
	cr_assert_eq(t_pending_n(a, NULL, 0), 0, "an if_available queued");
	/* Shared with shared is available. */
	T_ASSERT_RC(wlk_acquire_scope(a, abc, 3, &ia_sh, &l), 0);
	cr_assert_not_null(l);
	cr_assert_eq(t_held_n(a, NULL, 0), 4);
	T_ASSERT_RC(wlk_release(l), 0);
	T_ASSERT_RC(wlk_release(lb), 0);
	T_ASSERT_RC(wlk_acquire_scope(a, abc, 3, &ia, &l), 0);
	cr_assert_not_null(l);
	T_ASSERT_RC(wlk_release(l), 0);
	t_assert_valid(a, NULL);
}

/* query() shows a scope under each name, one value for its entries. */
Test(scope, query_marks_the_entries_of_one_scope, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open(), *m2 = t_open();
	struct wlk_name ab[] = {N("a"), N("b")}, bc[] = {N("b"), N("c")};
	struct wlk_lock *l1 = NULL, *l2 = NULL, *l3 = NULL;
	struct wlk_snapshot *s;
	uint64_t id[3] = {0};

	T_ASSERT_RC(wlk_acquire_scope(m, ab, 2, &sh, &l1), 0);
	T_ASSERT_RC(wlk_acquire_scope(m2, bc, 2, &sh, &l2), 0);
	T_ASSERT_RC(wlk_acquire(m2, "z", 1, NULL, &l3), 0);
	T_ASSERT_RC(wlk_query(m, &s), 0);
	cr_assert_eq(wlk_snapshot_held_count(s), 5);
	for (size_t i = 0; i < 5; i++) {
		const struct wlk_lock_info *e = wlk_snapshot_held(s, i);
		int who = !strcmp(e->client_id, wlk_manager_client_id(m)) ? 0
			  : e->name[0] == 'z'				 ? 2
									 : 1;

		if (who == 2) {
			cr_assert_eq(e->scope, 0, "a single name's entry");
			continue;
		}
		cr_assert_neq(e->scope, 0, "%s: not marked", e->name);
		cr_assert(!id[who] || id[who] == e->scope,
			  "%s: two values in one scope", e->name);
		id[who] = e->scope;
	}
	cr_assert_neq(id[0], id[1], "two scopes share a value");
	wlk_snapshot_free(s);
	T_ASSERT_RC(wlk_release(l1), 0);
	T_ASSERT_RC(wlk_release(l2), 0);
	T_ASSERT_RC(wlk_release(l3), 0);
}

/* Closing a manager releases and aborts its scopes on every name. */
Test(scope, close_drops_held_and_queued_scopes_on_every_name, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_name ab[] = {N("a"), N("b")}, cd[] = {N("c"), N("d")};
	struct wlk_lock *la = NULL, *lc = NULL;
	struct rec r = {0}, wb = {0}, wd = {0};

	T_ASSERT_RC(wlk_acquire_scope(a, ab, 2, NULL, &la), 0);
	T_ASSERT_RC(wlk_acquire(c, "c", 1, NULL, &lc), 0);
	rec_scope(a, cd, 2, NULL, &r);   /* queued behind "c" */
	rec_single(b, "b", NULL, &wb);   /* behind a's scope */
	rec_single(b, "d", NULL, &wd);   /* behind a's queued scope */
	cr_assert_eq(t_pending_n(b, NULL, 0), 4);
	t_close(a);
	cr_assert_eq(r.status, WLK_ESTATE, "the queued scope's callback");
	rec_wait(b, &wb, 0);
	rec_wait(b, &wd, 0);
	cr_assert_eq(t_pending_n(b, NULL, 0), 0);
	cr_assert_eq(t_held_n(b, NULL, 0), 3);
	T_ASSERT_RC(wlk_release(la), WLK_ESTATE);
	rec_release(&wb);
	rec_release(&wd);
	T_ASSERT_RC(wlk_release(lc), 0);
	t_assert_valid(b, NULL);
}

/* Spec 2.6 on close: every request of the manager is aborted before any
 * queue runs, so its own single-name request queued behind its scope on
 * the scope's other name is never granted on the way out (which would
 * spend a fencing token of that name). */
Test(scope, close_grants_none_of_its_own_on_the_way_out, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_name xy[] = {N("x"), N("y")};
	struct wlk_lock *lx = NULL, *l = NULL;
	struct rec s = {0}, r = {0};
	uint64_t t0;

	T_ASSERT_RC(wlk_acquire(c, "y", 1, NULL, &l), 0);
	t0 = wlk_lock_token(l);
	T_ASSERT_RC(wlk_release(l), 0);
	T_ASSERT_RC(wlk_acquire(b, "x", 1, NULL, &lx), 0);
	rec_scope(a, xy, 2, NULL, &s); /* waits for "x" */
	rec_single(a, "y", NULL, &r);  /* behind the scope on "y" */
	cr_assert_eq(t_pending_n(a, "y", 1), 2);
	t_close(a);
	T_ASSERT_RC(s.status, WLK_ESTATE);
	T_ASSERT_RC(r.status, WLK_ESTATE);
	T_ASSERT_RC(wlk_acquire(c, "y", 1, NULL, &l), 0);
	cr_assert_eq(wlk_lock_token(l), t0 + 1,
		     "a token of \"y\" was spent on the way out");
	T_ASSERT_RC(wlk_release(l), 0);
	T_ASSERT_RC(wlk_release(lx), 0);
	t_assert_valid(b, NULL);
}
