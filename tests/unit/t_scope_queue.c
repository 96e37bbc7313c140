/* SPDX-License-Identifier: MIT */
/*
 * t_scope_queue.c - a scope against single-name requests on each of its
 * names (weblocks.h, SCOPES): the draft's grant rule, FIFO on every name,
 * no part of a scope ever held, and steal, abort and timeout acting on
 * every name. Requests wait as asynchronous ones (scope_common.h); the
 * state is read by query().
 */
#include <string.h>

#include "../scope_common.h"

static const struct wlk_options steal = {.steal = true};

/* An exclusive scope waits for a holder of any of its names, holding none
 * of them meanwhile; the holder's release grants every name at once. */
Test(scope_queue, a_scope_holds_no_name_until_it_holds_all, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_name ab[] = {N("a"), N("b")};
	struct wlk_lock *lb = NULL;
	struct rec r = {0};

	T_ASSERT_RC(wlk_acquire(b, "b", 1, NULL, &lb), 0);
	rec_scope(a, ab, 2, NULL, &r);
	cr_assert_eq(t_held_n(a, "a", 1), 0, "\"a\" held while \"b\" is not");
	cr_assert_eq(t_pending_n(a, "a", 1), 1);
	cr_assert_eq(t_pending_n(a, "b", 1), 1);
	cr_assert_not(rec_now(a, &r));
	T_ASSERT_RC(wlk_release(lb), 0);
	cr_assert_eq(t_held_n(a, "a", 1), 1);
	cr_assert_eq(t_held_n(a, "b", 1), 1);
	cr_assert_eq(t_pending_n(a, NULL, 0), 0);
	rec_wait(a, &r, 0);
	cr_assert_eq(wlk_lock_scope_count(r.lock), 2);
	rec_release(&r);
	cr_assert_eq(t_held_n(a, NULL, 0), 0);
	t_assert_valid(a, NULL);
}

/* A scope keeps its place in each name's queue: a single-name request
 * after it waits for it on a name that is free, and one before it on
 * another name goes first there. */
Test(scope_queue, fifo_on_each_name_in_both_orders, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_name ab[] = {N("a"), N("b")};
	struct wlk_lock *la = NULL;
	struct rec s = {0}, before = {0}, after = {0};

	T_ASSERT_RC(wlk_acquire(b, "a", 1, NULL, &la), 0);
	rec_single(c, "a", NULL, &before); /* ahead of the scope on "a" */
	rec_scope(a, ab, 2, NULL, &s);
	rec_single(c, "b", NULL, &after);  /* behind it on the free "b" */
	cr_assert_eq(t_held_n(a, "b", 1), 0, "\"b\" jumped the scope");
	cr_assert_eq(t_pending_n(a, "b", 1), 2);
	T_ASSERT_RC(wlk_release(la), 0);
	/* "a" goes to the request ahead of the scope. */
	rec_wait(c, &before, 0);
	cr_assert_eq(t_held_n(a, "b", 1), 0);
	cr_assert_not(rec_now(a, &s));
	rec_release(&before);
	rec_wait(a, &s, 0);
	cr_assert_not(rec_now(c, &after));
	rec_release(&s);
	rec_wait(c, &after, 0);
	rec_release(&after);
	t_assert_valid(a, NULL);
}

/* The draft's shared rule: a shared scope waiting for one name does not
 * hold up shared requests behind it on its other names, but does hold up
 * exclusive ones. */
Test(scope_queue, shared_requests_pass_a_waiting_shared_scope, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_name ab[] = {N("a"), N("b")};
	struct wlk_options ia_sh = {.mode = WLK_SHARED, .if_available = true};
	struct wlk_lock *lb = NULL, *l = NULL;
	struct rec s = {0}, x = {0}, r = {0};

	T_ASSERT_RC(wlk_acquire(b, "b", 1, NULL, &lb), 0);
	rec_scope(a, ab, 2, &sh, &s); /* waits for "b" */
	rec_single(c, "a", &sh, &r);
	rec_wait(c, &r, 0);           /* granted past the scope */
	T_ASSERT_RC(wlk_acquire(c, "a", 1, &ia_sh, &l), 0);
	cr_assert_not_null(l, "if_available shared refused past the scope");
	T_ASSERT_RC(wlk_release(l), 0);
	rec_single(c, "a", NULL, &x); /* exclusive: behind the scope */
	cr_assert_eq(t_pending_n(a, "a", 1), 2);
	T_ASSERT_RC(wlk_release(lb), 0);
	/* The scope shares "a" with the shared holder. */
	rec_wait(a, &s, 0);
	cr_assert_eq(t_held_n(a, "a", 1), 2);
	cr_assert_not(rec_now(c, &x));
	rec_release(&r);
	cr_assert_not(rec_now(c, &x));
	rec_release(&s);
	rec_wait(c, &x, 0);
	rec_release(&x);
	t_assert_valid(a, NULL);
}

/* An exclusive scope behind shared holders of one name, with shared
 * requests arriving after it there: they wait (it is ahead of them). */
Test(scope_queue, an_exclusive_scope_holds_up_later_shared_requests, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_name ab[] = {N("a"), N("b")};
	struct wlk_lock *la = NULL;
	struct rec s = {0}, r = {0};

	T_ASSERT_RC(wlk_acquire(b, "a", 1, &sh, &la), 0);
	rec_scope(a, ab, 2, NULL, &s);
	rec_single(c, "a", &sh, &r);
	cr_assert_not(rec_now(c, &r));
	cr_assert_eq(t_pending_n(a, "a", 1), 2);
	T_ASSERT_RC(wlk_release(la), 0);
	rec_wait(a, &s, 0);
	cr_assert_not(rec_now(c, &r));
	rec_release(&s);
	rec_wait(c, &r, 0);
	rec_release(&r);
}

/* Two scopes with names in common queue in one order on every name, so
 * they never wait for each other in a cycle, whatever order the caller
 * lists the names in. */
Test(scope_queue, overlapping_scopes_take_turns_in_request_order, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_name abc[] = {N("c"), N("b"), N("a")};
	struct wlk_name cd[] = {N("d"), N("c")};
	struct wlk_name ad[] = {N("a"), N("d")};
	struct wlk_lock *l = NULL;
	struct rec s1 = {0}, s2 = {0}, s3 = {0};

	T_ASSERT_RC(wlk_acquire(c, "c", 1, NULL, &l), 0);
	rec_scope(a, abc, 3, NULL, &s1); /* waits for "c" */
	rec_scope(b, cd, 2, NULL, &s2);  /* behind s1 on "c" */
	rec_scope(c, ad, 2, NULL, &s3);  /* behind s1 on "a", s2 on "d" */
	cr_assert_eq(t_held_n(a, NULL, 0), 1);
	T_ASSERT_RC(wlk_release(l), 0);
	rec_wait(a, &s1, 0);
	cr_assert_not(rec_now(b, &s2));
	cr_assert_not(rec_now(c, &s3));
	rec_release(&s1);
	rec_wait(b, &s2, 0);
	cr_assert_not(rec_now(c, &s3));
	rec_release(&s2);
	rec_wait(c, &s3, 0);
	rec_release(&s3);
	t_assert_valid(a, NULL);
}

/* A signal or timeout takes the scope out of every queue; what waited
 * behind it on each name is granted. */
Test(scope_queue, abort_and_timeout_leave_every_queue, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_name ab[] = {N("a"), N("b")};
	struct wlk_signal *sig;
	struct wlk_options o = {0};
	struct wlk_lock *la = NULL, *l = (struct wlk_lock *)&l;
	struct rec s = {0}, w = {0};

	T_ASSERT_RC(wlk_acquire(b, "a", 1, NULL, &la), 0);
	cr_assert_eq(wlk_signal_new(&sig), 0);
	o.signal = sig;
	rec_scope(a, ab, 2, &o, &s);
	rec_single(c, "b", NULL, &w); /* behind the scope on "b" */
	cr_assert_not(rec_now(c, &w));
	wlk_signal_abort(sig, 0);
	rec_wait(a, &s, WLK_EABORTED);
	cr_assert_null(s.lock);
	rec_wait(c, &w, 0);
	cr_assert_eq(t_pending_n(a, NULL, 0), 0);
	rec_release(&w);
	wlk_signal_free(sig);

	o = (struct wlk_options){.timeout_ns = 30 * 1000000ull};
	T_ASSERT_RC(wlk_acquire_scope(a, ab, 2, &o, &l), WLK_ETIMEDOUT);
	cr_assert_eq(l, (struct wlk_lock *)&l);
	cr_assert_eq(t_pending_n(a, NULL, 0), 0);
	cr_assert_eq(t_held_n(a, "b", 1), 0, "part of a timed-out scope");
	T_ASSERT_RC(wlk_release(la), 0);
	t_assert_valid(a, NULL);
}

/* A cancelled asynchronous scope leaves every queue too. */
Test(scope_queue, a_cancelled_async_scope_leaves_every_queue, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_name ab[] = {N("a"), N("b")};
	struct wlk_lock *lb = NULL;
	struct wlk_async *req = NULL;
	struct rec s = {0};

	T_ASSERT_RC(wlk_acquire(b, "b", 1, NULL, &lb), 0);
	T_ASSERT_RC(wlk_request_scope_async(a, ab, 2, NULL, rec_done, &s,
					    &req),
		    0);
	cr_assert_eq(t_pending_n(a, NULL, 0), 2);
	T_ASSERT_RC(wlk_async_cancel(req), 0);
	rec_wait(a, &s, WLK_EABORTED);
	cr_assert_eq(t_pending_n(a, NULL, 0), 0);
	T_ASSERT_RC(wlk_release(lb), 0);
	t_assert_valid(a, NULL);
}

/* A scope's steal takes every name; a scope holding any of them loses all
 * of its names, which become free where nobody else waits. */
Test(scope_queue, steal_takes_every_name_from_whole_scopes, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_name ab[] = {N("a"), N("b")}, bc[] = {N("b"), N("c")};
	struct wlk_options ia = {.if_available = true};
	struct wlk_lock *la = NULL, *lbc = NULL, *ls = NULL, *l = NULL;
	uint64_t tb;

	T_ASSERT_RC(wlk_acquire(b, "a", 1, NULL, &la), 0);
	T_ASSERT_RC(wlk_acquire_scope(c, bc, 2, NULL, &lbc), 0);
	tb = wlk_lock_scope_token(lbc, 0);
	T_ASSERT_RC(wlk_acquire_scope(a, ab, 2, &steal, &ls), 0);
	cr_assert_not_null(ls);
	cr_assert(wlk_lock_stolen(la));
	cr_assert(wlk_lock_stolen(lbc));
	cr_assert_gt(wlk_lock_scope_token(ls, 1), tb);
	cr_assert_eq(t_held_n(a, NULL, 0), 2, "stolen ones still held");
	/* "c" went with the scope that held "b". */
	T_ASSERT_RC(wlk_acquire(b, "c", 1, &ia, &l), 0);
	cr_assert_not_null(l, "\"c\" still held by a stolen scope");
	T_ASSERT_RC(wlk_release(l), 0);
	T_ASSERT_RC(wlk_release(la), WLK_ESTOLEN);
	T_ASSERT_RC(wlk_release(lbc), WLK_ESTOLEN);
	T_ASSERT_RC(wlk_release(ls), 0);
	cr_assert_eq(t_held_n(a, NULL, 0), 0);
	t_assert_valid(a, NULL);
}

/* A steal takes a name from its holders only: a shared scope waiting
 * there, clear on it but waiting for another name, stays queued, now
 * behind the stealer, even once its other name is free. */
Test(scope_queue, a_steal_leaves_a_waiting_scope_waiting_behind_it, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_name ab[] = {N("a"), N("b")};
	struct wlk_lock *la = NULL, *lb = NULL, *ls = NULL;
	struct rec s = {0};

	T_ASSERT_RC(wlk_acquire(a, "a", 1, &sh, &la), 0);
	T_ASSERT_RC(wlk_acquire(c, "b", 1, NULL, &lb), 0);
	rec_scope(b, ab, 2, &sh, &s); /* clear on "a", waits for "b" */
	T_ASSERT_RC(wlk_acquire(c, "a", 1, &steal, &ls), 0);
	cr_assert(t_stolen(la));
	cr_assert_eq(t_pending_n(b, NULL, 0), 2, "the waiting scope went");
	T_ASSERT_RC(wlk_release(lb), 0);
	cr_assert_eq(t_pending_n(b, NULL, 0), 2, "granted past the stealer");
	cr_assert_eq(t_held_n(b, NULL, 0), 1);
	cr_assert_not(rec_now(b, &s));
	T_ASSERT_RC(wlk_release(ls), 0);
	rec_wait(b, &s, 0);
	cr_assert_eq(t_held_n(b, NULL, 0), 2);
	rec_release(&s);
	T_ASSERT_RC(wlk_release(la), WLK_ESTOLEN);
	t_assert_valid(b, NULL);
}

/* A single-name steal of one name of a held scope steals the whole
 * scope: its other names are granted to whoever waits there. */
Test(scope_queue, a_single_steal_takes_the_whole_scope, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_name ab[] = {N("a"), N("b")};
	struct wlk_lock *ls = NULL, *l = NULL;
	struct rec w = {0};

	T_ASSERT_RC(wlk_acquire_scope(a, ab, 2, NULL, &ls), 0);
	rec_single(c, "b", NULL, &w);
	T_ASSERT_RC(wlk_acquire(b, "a", 1, &steal, &l), 0);
	cr_assert(wlk_lock_stolen(ls));
	rec_wait(c, &w, 0);
	T_ASSERT_RC(wlk_release(ls), WLK_ESTOLEN);
	rec_release(&w);
	T_ASSERT_RC(wlk_release(l), 0);
	t_assert_valid(a, NULL);
}

/* The stolen holder of an asynchronous scope hears of it. */
static void on_stolen(struct wlk_lock *l, void *arg)
{
	(void)l;
	atomic_fetch_add((atomic_int *)arg, 1);
}

Test(scope_queue, the_stolen_callback_fires_for_a_scope, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_name ab[] = {N("a"), N("b")};
	struct wlk_lock *l = NULL;
	struct rec s = {0};
	atomic_int stolen = 0;

	rec_scope(a, ab, 2, NULL, &s);
	rec_wait(a, &s, 0);
	T_ASSERT_RC(wlk_lock_on_stolen(s.lock, on_stolen, &stolen), 0);
	T_ASSERT_RC(wlk_acquire(b, "b", 1, &steal, &l), 0);
	cr_assert(t_pump(a, &stolen, 1, T_WAIT_MS), "no stolen callback");
	cr_assert(wlk_lock_stolen(s.lock));
	T_ASSERT_RC(wlk_release(s.lock), WLK_ESTOLEN);
	T_ASSERT_RC(wlk_release(l), 0);
}
