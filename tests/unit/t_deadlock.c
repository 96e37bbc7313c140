/* SPDX-License-Identifier: MIT */
/*
 * t_deadlock.c - detect_deadlocks (weblocks.h, DEADLOCKS): a request that
 * would close a cycle of managers waiting for each other fails at once
 * with WLK_EDEADLK and nothing queued; any other request is untouched.
 * Threads of this process wait as the managers' holders (t_holder).
 */
#include <string.h>

#include "../scope_common.h"

/* A holder thread's request is granted; it lets go and is joined. */
static void holder_done(struct t_holder *w)
{
	cr_assert_eq(t_holder_wait_granted(w), 0);
	cr_assert_eq(w->acq_rc, 0);
	cr_assert_eq(t_holder_release(w), 0);
	t_holder_join(w);
}

static struct wlk_manager *detecting(const char *id)
{
	struct wlk_manager_options o = WLK_MANAGER_OPTIONS_INIT;

	o.client_id = id;
	o.detect_deadlocks = true;
	return t_open_opts(&o);
}

Test(deadlock, the_error_has_a_name_and_a_message)
{
	cr_assert_str_eq(wlk_error_name(WLK_EDEADLK), "DeadlockError");
	cr_assert_not_null(strstr(wlk_strerror(WLK_EDEADLK), "cycle"));
	cr_assert_eq(WLK_EDEADLK, -35, "the value of -EDEADLK");
}

/* a holds x, waits for y; b holds y: b asking for x closes the cycle. */
Test(deadlock, the_request_that_closes_a_cycle_is_refused, T_FIX,
     .timeout = 30)
{
	struct wlk_manager *a = detecting("a"), *b = detecting("b");
	struct wlk_lock *la = NULL, *lb = NULL, *l = (struct wlk_lock *)&l;
	struct t_holder w;

	T_ASSERT_RC(wlk_acquire(a, "x", 1, NULL, &la), 0);
	T_ASSERT_RC(wlk_acquire(b, "y", 1, NULL, &lb), 0);
	t_holder_start(&w, a, "y", 1, NULL); /* a waits for b */
	cr_assert(t_wait_pending(a, "y", 1, 1));

	T_ASSERT_RC(wlk_acquire(b, "x", 1, NULL, &l), WLK_EDEADLK);
	cr_assert_eq(l, (struct wlk_lock *)&l, "*out written on error");
	T_ASSERT_RC(wlk_acquire(b, "x", 1, &sh, &l), WLK_EDEADLK);
	cr_assert_eq(t_pending_n(a, "x", 1), 0, "the refused one was queued");
	cr_assert_eq(t_held_n(a, "y", 1), 1, "b lost what it held");
	/* Without waiting there is no cycle: if_available just misses. */
	{
		struct wlk_options ia = {.if_available = true};

		T_ASSERT_RC(wlk_acquire(b, "x", 1, &ia, &l), 0);
		cr_assert_null(l);
	}

	/* b lets go, as the error invites: the cycle is gone. */
	T_ASSERT_RC(wlk_release(lb), 0);
	holder_done(&w);
	T_ASSERT_RC(wlk_release(la), 0);
}

/* Without the option the same request is queued, as the spec says. */
Test(deadlock, off_by_default_the_request_is_queued, T_FIX, .timeout = 30)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *la = NULL, *lb = NULL;
	struct t_holder wa, wb;

	T_ASSERT_RC(wlk_acquire(a, "x", 1, NULL, &la), 0);
	T_ASSERT_RC(wlk_acquire(b, "y", 1, NULL, &lb), 0);
	t_holder_start(&wa, a, "y", 1, NULL);
	cr_assert(t_wait_pending(a, "y", 1, 1));
	t_holder_start(&wb, b, "x", 1, NULL);
	cr_assert(t_wait_pending(a, "x", 1, 1), "not queued");
	/* Break the deadlock from outside: a lets go of x. */
	T_ASSERT_RC(wlk_release(la), 0);
	holder_done(&wb);
	T_ASSERT_RC(wlk_release(lb), 0);
	holder_done(&wa);
}

/* Only conflicting locks make a wait: shared beside shared is granted. */
Test(deadlock, a_compatible_request_is_no_wait, T_FIX, .timeout = 30)
{
	struct wlk_manager *a = detecting("a"), *b = detecting("b");
	struct wlk_lock *la = NULL, *lb = NULL, *l = NULL;
	struct t_holder w;

	T_ASSERT_RC(wlk_acquire(a, "x", 1, &sh, &la), 0);
	T_ASSERT_RC(wlk_acquire(b, "y", 1, NULL, &lb), 0);
	t_holder_start(&w, a, "y", 1, NULL);
	cr_assert(t_wait_pending(a, "y", 1, 1));
	T_ASSERT_RC(wlk_acquire(b, "x", 1, &sh, &l), 0);
	cr_assert_not_null(l);
	T_ASSERT_RC(wlk_release(l), 0);
	T_ASSERT_RC(wlk_release(lb), 0);
	holder_done(&w);
	T_ASSERT_RC(wlk_release(la), 0);
}

/* A manager's threads queue behind its own locks: no cycle, it waits. */
Test(deadlock, a_manager_behind_its_own_lock_waits, T_FIX, .timeout = 30)
{
	struct wlk_manager *a = detecting("a");
	struct wlk_lock *la = NULL;
	struct t_holder w;

	T_ASSERT_RC(wlk_acquire(a, "x", 1, NULL, &la), 0);
	t_holder_start(&w, a, "x", 1, NULL);
	cr_assert(t_wait_pending(a, "x", 1, 1));
	T_ASSERT_RC(wlk_release(la), 0);
	holder_done(&w);
}

/* A longer cycle: a holds x, b holds y, c holds z; a waits for y, b for z;
 * c asking for x closes a -> b -> c -> a. */
Test(deadlock, a_cycle_of_three_through_holders_and_queues, T_FIX,
     .timeout = 30)
{
	struct wlk_manager *a = detecting("a"), *b = detecting("b"),
			   *c = detecting("c");
	struct wlk_lock *la = NULL, *lb = NULL, *lc = NULL, *l = NULL;
	struct t_holder wa, wb;

	T_ASSERT_RC(wlk_acquire(a, "x", 1, NULL, &la), 0);
	T_ASSERT_RC(wlk_acquire(b, "y", 1, NULL, &lb), 0);
	T_ASSERT_RC(wlk_acquire(c, "z", 1, NULL, &lc), 0);
	t_holder_start(&wa, a, "y", 1, NULL);
	cr_assert(t_wait_pending(a, "y", 1, 1));
	t_holder_start(&wb, b, "z", 1, NULL);
	cr_assert(t_wait_pending(a, "z", 1, 1));
	T_ASSERT_RC(wlk_acquire(c, "x", 1, NULL, &l), WLK_EDEADLK);
	cr_assert_eq(t_pending_n(a, "x", 1), 0);

	T_ASSERT_RC(wlk_release(lc), 0);
	holder_done(&wb);
	T_ASSERT_RC(wlk_release(lb), 0);
	holder_done(&wa);
	T_ASSERT_RC(wlk_release(la), 0);
}

/* b holds y and waits for x behind a's lock and d's queued request: a
 * asking for y closes a -> b -> a. (d, queued ahead of b, waits for a
 * too, and is on no cycle.) */
Test(deadlock, a_request_queued_ahead_is_waited_for, T_FIX, .timeout = 30)
{
	struct wlk_manager *a = detecting("a"), *b = detecting("b"),
			   *d = detecting("d");
	struct wlk_lock *la = NULL, *lb = NULL, *l = NULL;
	struct t_holder wd, wb;

	T_ASSERT_RC(wlk_acquire(a, "x", 1, NULL, &la), 0);
	T_ASSERT_RC(wlk_acquire(b, "y", 1, NULL, &lb), 0);
	t_holder_start(&wd, d, "x", 1, NULL);
	cr_assert(t_wait_pending(a, "x", 1, 1));
	t_holder_start(&wb, b, "x", 1, NULL);
	cr_assert(t_wait_pending(a, "x", 1, 2));
	T_ASSERT_RC(wlk_acquire(a, "y", 1, NULL, &l), WLK_EDEADLK);

	T_ASSERT_RC(wlk_release(la), 0);
	holder_done(&wd);
	holder_done(&wb);
	T_ASSERT_RC(wlk_release(lb), 0);
}

/* A scope closes a cycle through any of its names, and a waiting scope's
 * members are edges of the graph like any request (weblocks.h, SCOPES). */
Test(deadlock, scopes_are_in_the_graph_on_every_name, T_FIX, .timeout = 30)
{
	struct wlk_manager *a = detecting("a"), *b = detecting("b");
	struct wlk_name xz[] = {{"x", 1}, {"z", 1}}, yw[] = {{"y", 1},
							   {"w", 1}};
	struct wlk_lock *la = NULL, *lb = NULL, *l = (struct wlk_lock *)&l;
	struct t_holder w;

	T_ASSERT_RC(wlk_acquire(a, "x", 1, NULL, &la), 0);
	T_ASSERT_RC(wlk_acquire(b, "y", 1, NULL, &lb), 0);
	t_holder_start(&w, a, "y", 1, NULL); /* a waits for b */
	cr_assert(t_wait_pending(a, "y", 1, 1));
	/* b asks for x (and z) in one scope: the cycle is through x. */
	T_ASSERT_RC(wlk_acquire_scope(b, xz, 2, NULL, &l), WLK_EDEADLK);
	cr_assert_eq(l, (struct wlk_lock *)&l, "*out written on error");
	cr_assert_eq(t_pending_n(a, NULL, 0), 1, "the refused scope queued");
	cr_assert_eq(t_held_n(a, "z", 1), 0, "part of the refused scope held");
	T_ASSERT_RC(wlk_release(lb), 0);
	holder_done(&w);
	T_ASSERT_RC(wlk_release(la), 0);

	/* Now a waits as a scope: a holds x and waits for {y, w}, y held by
	 * b; b asking for x closes the cycle through the scope's member. */
	T_ASSERT_RC(wlk_acquire(a, "x", 1, NULL, &la), 0);
	T_ASSERT_RC(wlk_acquire(b, "y", 1, NULL, &lb), 0);
	{
		struct rec r = {0};

		T_ASSERT_RC(wlk_request_scope_async(a, yw, 2, NULL, rec_done,
						    &r, NULL),
			    0);
		cr_assert(t_wait_pending(a, "w", 1, 1));
		T_ASSERT_RC(wlk_acquire(b, "x", 1, NULL, &l), WLK_EDEADLK);
		T_ASSERT_RC(wlk_release(lb), 0);
		cr_assert(t_pump(a, &r.calls, 1, T_WAIT_MS));
		T_ASSERT_RC(r.status, 0);
		T_ASSERT_RC(wlk_release(r.lock), 0);
	}
	T_ASSERT_RC(wlk_release(la), 0);
}
