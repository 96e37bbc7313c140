/* SPDX-License-Identifier: MIT */
/*
 * t_scope.c - shm-inspect shows a scope (weblocks.h, SCOPES) under each
 * of its names, marked so that a reader can tell the entries are one
 * request: in text, "scope @S of N names" with one S; in JSON, one
 * "scope" value, null for a single name.
 */
#include <string.h>

#include "../common.h"
#include "weblocks/async.h"
#include "run.h"

static void never(struct wlk_async *r, int status, struct wlk_lock *l,
		  void *arg)
{
	(void)r;
	(void)status;
	(void)arg;
	if (l)
		wlk_release(l);
}

/* The "scope" of the first held or pending entry of name @name. */
static const struct tj *entry(const struct tj *doc, const char *name,
			      const char *list)
{
	const struct tj *names = tj_get(doc, "names");

	for (size_t i = 0; names && i < names->n; i++)
		if (tj_str_is(tj_get(tj_at(names, i), "name"), name, SIZE_MAX))
			return tj_at(tj_get(tj_at(names, i), list), 0);
	return NULL;
}

Test(scope, a_scope_is_marked_under_each_of_its_names, T_FIX,
     .timeout = 60)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_name xy[] = {{"x", 1}, {"y", 1}}, yz[] = {{"y", 1},
							   {"z", 1}};
	struct wlk_lock *l = NULL, *lw = NULL;
	const struct tj *e[5];
	struct tj *doc;
	struct run r;

	T_ASSERT_RC(wlk_acquire_scope(a, xy, 2, NULL, &l), 0);
	T_ASSERT_RC(wlk_acquire(a, "w", 1, NULL, &lw), 0);
	T_ASSERT_RC(wlk_request_scope_async(b, yz, 2, NULL, never, NULL, NULL),
		    0);
	cr_assert(t_wait_pending(a, "z", 1, 1));

	RUN(&r, "dump", t_origin);
	expect_exit(&r, 0, "dump");
	cr_assert_not_null(strstr(r.out, "scope @"), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "of 2 names"), "%s", r.out);
	run_free(&r);

	RUN(&r, "dump", "--json", t_origin);
	expect_exit(&r, 0, "dump --json");
	doc = parse_json(&r, "dump --json");
	e[0] = entry(doc, "x", "held");
	e[1] = entry(doc, "y", "held");
	e[2] = entry(doc, "y", "pending");
	e[3] = entry(doc, "z", "pending");
	e[4] = entry(doc, "w", "held");
	for (int i = 0; i < 5; i++)
		cr_assert_not_null(e[i], "entry %d missing", i);
	cr_assert_neq(tj_u64(tj_get(e[0], "scope")), UINT64_MAX);
	cr_assert_eq(tj_u64(tj_get(e[0], "scope")),
		     tj_u64(tj_get(e[1], "scope")), "one scope, two values");
	cr_assert_eq(tj_u64(tj_get(e[2], "scope")),
		     tj_u64(tj_get(e[3], "scope")), "one scope, two values");
	cr_assert_neq(tj_u64(tj_get(e[0], "scope")),
		      tj_u64(tj_get(e[2], "scope")), "two scopes, one value");
	cr_assert_eq(tj_get(e[4], "scope")->type, TJ_NULL,
		     "a single name marked as a scope");
	tj_free(doc);
	run_free(&r);
	T_ASSERT_RC(wlk_release(lw), 0);
	T_ASSERT_RC(wlk_release(l), 0);
}
