/* SPDX-License-Identifier: MIT */
/*
 * t_deadlock.c - shm-inspect finds deadlocks: cycles of clients waiting
 * for each other (tools/deadlock.c), in dump (text and JSON) and check,
 * which exits 5 for one. The requests are queued with wlk_request_async(),
 * so that one process can hold and wait as several clients at once.
 */
#include <string.h>

#include "../common.h"
#include "weblocks/async.h"
#include "run.h"

static const struct wlk_options sh = {.mode = WLK_SHARED};

static void never(struct wlk_async *r, int status, struct wlk_lock *l,
		  void *arg)
{
	(void)r;
	(void)status;
	(void)arg;
	if (l)
		wlk_release(l);
}

/* @m asks for @name in @o's mode (the caller waits until it is pending);
 * the callback, if it ever runs, lets go. */
static void queue(struct wlk_manager *m, const char *name,
		  const struct wlk_options *o)
{
	struct wlk_async *r = NULL;

	T_ASSERT_RC(wlk_request_async(m, name, WLK_NUL_TERMINATED, o, never,
				      NULL, &r),
		    0);
}

static struct wlk_manager *open_as(const char *id)
{
	const struct wlk_manager_options o = {.client_id = id};

	return t_open_opts(&o);
}

Test(deadlock, two_clients_each_holding_what_the_other_waits_for, T_FIX,
     .timeout = 60)
{
	struct wlk_manager *a = open_as("alice"), *b = open_as("bob");
	struct wlk_lock *la = NULL, *lb = NULL;
	struct run r;

	T_ASSERT_RC(wlk_acquire(a, "x", 1, NULL, &la), 0);
	T_ASSERT_RC(wlk_acquire(b, "y", 1, NULL, &lb), 0);
	RUN(&r, "check", t_origin);
	expect_exit(&r, 0, "check before the cycle");
	run_free(&r);
	queue(a, "y", NULL);
	cr_assert(t_wait_pending(a, "y", 1, 1));
	RUN(&r, "check", t_origin);
	expect_exit(&r, 0, "check with a waiter, no cycle");
	run_free(&r);

	queue(b, "x", NULL);
	cr_assert(t_wait_pending(b, "x", 1, 1));
	RUN(&r, "check", t_origin);
	expect_exit(&r, 5, "check of a deadlock");
	cr_assert_not_null(strstr(r.out, "a cycle of 2 clients"), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "\"alice\" waits for \"y\" "
					 "(exclusive), held by"),
			   "%s", r.out);
	cr_assert_not_null(strstr(r.out, "\"bob\" waits for \"x\""), "%s",
			   r.out);
	run_free(&r);
	RUN(&r, "check", "--locked", t_origin);
	expect_exit(&r, 5, "check --locked of a deadlock");
	run_free(&r);

	RUN(&r, "dump", t_origin);
	expect_exit(&r, 0, "dump");
	cr_assert_not_null(strstr(r.out, "Deadlocks: 1\n"), "%s", r.out);
	run_free(&r);
	RUN(&r, "dump", "--json", t_origin);
	expect_exit(&r, 0, "dump --json");
	{
		struct tj *doc = parse_json(&r, "dump --json");
		const struct tj *d = tj_get(doc, "deadlocks");

		cr_assert(d && d->type == TJ_ARR && d->n == 1, "one cycle");
		cr_assert(tj_at(d, 0)->n == 2, "of two edges");
		cr_assert(tj_str_is(tj_get(tj_at(tj_at(d, 0), 0), "client_id"),
				    "alice", SIZE_MAX),
			  "from the lowest client");
		tj_free(doc);
	}
	run_free(&r);

	/* Letting go of one lock breaks the cycle. */
	T_ASSERT_RC(wlk_release(lb), 0);
	RUN(&r, "check", t_origin);
	expect_exit(&r, 0, "check after the cycle broke");
	run_free(&r);
	T_ASSERT_RC(wlk_release(la), 0);
}

/* A manager shared by threads queues behind its own locks all the time:
 * that is no deadlock (the holding thread lets go), and check passes. */
Test(deadlock, a_client_queued_behind_its_own_lock_is_no_cycle, T_FIX,
     .timeout = 60)
{
	struct wlk_manager *a = open_as("threads");
	struct wlk_lock *l = NULL;
	struct run r;

	T_ASSERT_RC(wlk_acquire(a, "z", 1, NULL, &l), 0);
	queue(a, "z", &sh);
	cr_assert(t_wait_pending(a, "z", 1, 1));
	RUN(&r, "check", t_origin);
	expect_exit(&r, 0, "check of a client behind itself");
	cr_assert_null(strstr(r.out, "cycle"), "%s", r.out);
	run_free(&r);
	T_ASSERT_RC(wlk_release(l), 0);
}

/*
 * Who waits for whom follows the modes: b and c hold "s" shared, a holds
 * "t". b waits for "t" (shared, behind a's exclusive lock): b waits for a,
 * no cycle. Then a waits for "s" exclusively: for both shared holders, b
 * and c; a and b now wait for each other, and c, who waits for nobody, is
 * on no cycle.
 */
Test(deadlock, modes_decide_who_waits_for_whom, T_FIX, .timeout = 60)
{
	struct wlk_manager *a = open_as("a"), *b = open_as("b"),
			   *c = open_as("c");
	struct wlk_lock *lc = NULL, *lb = NULL, *la = NULL;
	struct run r;

	T_ASSERT_RC(wlk_acquire(c, "s", 1, &sh, &lc), 0);
	T_ASSERT_RC(wlk_acquire(b, "s", 1, &sh, &lb), 0);
	T_ASSERT_RC(wlk_acquire(a, "t", 1, NULL, &la), 0);
	queue(b, "t", &sh); /* b waits for a (exclusive holder of "t") */
	cr_assert(t_wait_pending(b, "t", 1, 1));
	RUN(&r, "check", t_origin);
	expect_exit(&r, 0, "b waits for a, a for nobody");
	run_free(&r);
	queue(a, "s", NULL); /* a waits for the shared holders b and c */
	cr_assert(t_wait_pending(a, "s", 1, 1));
	RUN(&r, "check", t_origin);
	expect_exit(&r, 5, "a and b wait for each other");
	cr_assert_not_null(strstr(r.out, "a cycle of 2 clients"), "%s", r.out);
	cr_assert_null(strstr(r.out, "\"c\" waits"), "%s", r.out);
	run_free(&r);
	T_ASSERT_RC(wlk_release(la), 0);
	T_ASSERT_RC(wlk_release(lb), 0);
	T_ASSERT_RC(wlk_release(lc), 0);
}
