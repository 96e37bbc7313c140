/* SPDX-License-Identifier: MIT */
/* t_queue.c - grant rules, FIFO queues, if_available, tokens, full tables. */
#include <string.h>

#include "../common.h"

static const struct wlk_options ex_ia = { .if_available = true };
static const struct wlk_options sh_ia = { .mode = WLK_SHARED,
					  .if_available = true };
static const struct wlk_options sh = { .mode = WLK_SHARED };

/* Whether @m could get "r" in @o's mode right now (if_available probe). */
static bool can_get(struct wlk_manager *m, const struct wlk_options *o)
{
	struct wlk_lock *l = (struct wlk_lock *)&l;

	T_ASSERT_RC(wlk_acquire(m, "r", 1, o, &l), 0);
	cr_assert_neq(l, (struct wlk_lock *)&l, "*out not written");
	if (!l)
		return false;
	T_ASSERT_RC(wlk_release(l), 0);
	return true;
}

static const char *id(struct wlk_manager *m)
{
	return wlk_manager_client_id(m);
}

Test(queue, free_lock_grants_either_mode, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();

	cr_assert(can_get(m, &ex_ia));
	cr_assert(can_get(m, &sh_ia));
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
}

Test(queue, exclusive_held_refuses_exclusive_and_shared, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &l), 0);
	cr_assert_not(can_get(b, &ex_ia));
	cr_assert_not(can_get(b, &sh_ia));
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert(can_get(b, &ex_ia));
}

Test(queue, shared_held_admits_shared_not_exclusive, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, &sh, &l), 0);
	cr_assert(can_get(b, &sh_ia));
	cr_assert_not(can_get(b, &ex_ia));
	T_ASSERT_RC(wlk_release(l), 0);
}

Test(queue, shared_holders_coexist_one_entry_each, T_FIX, .timeout = 10)
{
	struct wlk_manager *m[3];
	struct wlk_lock *l[3];
	size_t i;

	for (i = 0; i < 3; i++) {
		m[i] = t_open();
		T_ASSERT_RC(wlk_acquire(m[i], "r", 1, &sh, &l[i]), 0);
		cr_assert_eq(wlk_lock_mode(l[i]), WLK_SHARED);
	}
	cr_assert_eq(t_held_n(m[0], "r", 1), 3);
	for (i = 0; i < 3; i++)
		cr_assert_eq(t_held_by(m[0], "r", 1, id(m[i])), 1);
	for (i = 0; i < 3; i++)
		T_ASSERT_RC(wlk_release(l[i]), 0);
	cr_assert_eq(t_held_n(m[0], NULL, 0), 0);
}

Test(queue, exclusive_waits_for_every_shared_holder, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_lock *la = NULL, *lb = NULL;
	struct t_holder h;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, &sh, &la), 0);
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &sh, &lb), 0);
	t_holder_start(&h, c, "r", 1, NULL);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	T_ASSERT_RC(wlk_release(la), 0);
	cr_assert_eq(t_pending_n(a, "r", 1), 1, "granted with b holding");
	cr_assert_not(t_holder_granted_now(&h));
	T_ASSERT_RC(wlk_release(lb), 0);
	cr_assert_eq(t_held_by(a, "r", 1, id(c)), 1);
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	T_ASSERT_RC(h.acq_rc, 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
}

Test(queue, shared_behind_queued_exclusive_stays_pending, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_manager *d = t_open();
	struct wlk_lock *la = NULL;
	struct t_holder hb, hc;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, &sh, &la), 0);
	t_holder_start(&hb, b, "r", 1, NULL);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	t_holder_start(&hc, c, "r", 1, &sh);
	/* Only a shared lock is held, yet the shared request queues. */
	cr_assert(t_wait_pending(a, "r", 1, 2), "shared request jumped the "
						"queued exclusive one");
	cr_assert_eq(t_held_n(a, "r", 1), 1);
	cr_assert_not(t_holder_granted_now(&hc));
	/* An if_available shared request is refused too. */
	cr_assert_not(can_get(d, &sh_ia));
	cr_assert_eq(t_pending_n(a, "r", 1), 2);

	T_ASSERT_RC(wlk_release(la), 0);
	cr_assert_eq(t_held_by(a, "r", 1, id(b)), 1);
	cr_assert_eq(t_held_n(a, "r", 1), 1);
	cr_assert_eq(t_pending_n(a, "r", 1), 1);
	cr_assert_eq(t_holder_wait_granted(&hb), 0);
	cr_assert_eq(t_holder_release(&hb), 0);
	cr_assert_eq(t_held_by(a, "r", 1, id(c)), 1);
	cr_assert_eq(t_holder_wait_granted(&hc), 0);
	cr_assert_eq(t_holder_release(&hc), 0);
	t_holder_join(&hb);
	t_holder_join(&hc);
	T_ASSERT_RC(hb.acq_rc, 0);
	T_ASSERT_RC(hc.acq_rc, 0);
}

Test(queue, exclusive_waiters_are_granted_in_fifo_order, T_FIX,
     .timeout = 20)
{
	enum { N = 5 };
	struct wlk_manager *a = t_open(), *w[N];
	struct t_holder h[N];
	struct wlk_lock *la = NULL;
	size_t i;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	for (i = 0; i < N; i++) {
		w[i] = t_open();
		t_holder_start(&h[i], w[i], "r", 1, NULL);
		cr_assert(t_wait_pending(a, "r", 1, i + 1));
	}
	T_ASSERT_RC(wlk_release(la), 0);
	for (i = 0; i < N; i++) {
		size_t j;

		cr_assert_eq(t_held_by(a, "r", 1, id(w[i])), 1,
			     "waiter %zu is not next", i);
		cr_assert_eq(t_pending_n(a, "r", 1), N - 1 - i);
		cr_assert_eq(t_holder_wait_granted(&h[i]), 0);
		for (j = i + 1; j < N; j++)
			cr_assert_not(t_holder_granted_now(&h[j]),
				      "waiter %zu granted before %zu", j, i);
		cr_assert_eq(t_holder_release(&h[i]), 0);
	}
	for (i = 0; i < N; i++) {
		t_holder_join(&h[i]);
		T_ASSERT_RC(h[i].acq_rc, 0);
		T_ASSERT_RC(h[i].rel_rc, 0);
		if (i > 0)
			cr_assert_gt(h[i].token, h[i - 1].token);
	}
}

Test(queue, release_puts_next_request_in_held_set_before_returning, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_lock *la = NULL;
	struct t_holder h;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	t_holder_start(&h, b, "r", 1, NULL);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	T_ASSERT_RC(wlk_release(la), 0);
	/* No waiting for b's thread to wake: the grant already happened. */
	cr_assert_eq(t_held_by(c, "r", 1, id(b)), 1);
	cr_assert_eq(t_pending_n(c, "r", 1), 0);
	cr_assert_not(can_get(c, &ex_ia));
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
}

/* The leading shared waiters are granted as one run (spec/queue.c), in
 * request order, tokens too (on etcd a grant's token is the revision its
 * waiter read it at: shared grants of one release are not ordered); the
 * shared one behind the exclusive is not, and the exclusive's token is
 * above both. */
Test(queue, release_grants_all_leading_shared_waiters, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_manager *d = t_open(), *e = t_open();
	struct wlk_lock *la = NULL;
	struct t_holder hb, hc, hd, he;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	t_holder_start(&hb, b, "r", 1, &sh);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	t_holder_start(&hc, c, "r", 1, &sh);
	cr_assert(t_wait_pending(a, "r", 1, 2));
	t_holder_start(&hd, d, "r", 1, NULL);
	cr_assert(t_wait_pending(a, "r", 1, 3));
	t_holder_start(&he, e, "r", 1, &sh);
	cr_assert(t_wait_pending(a, "r", 1, 4));

	T_ASSERT_RC(wlk_release(la), 0);
	cr_assert_eq(t_held_by(a, "r", 1, id(b)), 1);
	cr_assert_eq(t_held_by(a, "r", 1, id(c)), 1);
	cr_assert_eq(t_held_n(a, "r", 1), 2);
	cr_assert_eq(t_pending_n(a, "r", 1), 2);
	cr_assert_eq(t_holder_wait_granted(&hb), 0);
	cr_assert_eq(t_holder_wait_granted(&hc), 0);
	if (!t_on_etcd())
		cr_assert_lt(hb.token, hc.token, "tokens out of request order");
	cr_assert_eq(t_holder_release(&hb), 0);
	cr_assert_eq(t_pending_n(a, "r", 1), 2);
	cr_assert_eq(t_holder_release(&hc), 0);
	cr_assert_eq(t_held_by(a, "r", 1, id(d)), 1);
	cr_assert_eq(t_pending_n(a, "r", 1), 1);
	cr_assert_eq(t_holder_wait_granted(&hd), 0);
	cr_assert_gt(hd.token, hc.token);
	cr_assert_gt(hd.token, hb.token);
	cr_assert_eq(t_holder_release(&hd), 0);
	cr_assert_eq(t_held_by(a, "r", 1, id(e)), 1);
	cr_assert_eq(t_holder_wait_granted(&he), 0);
	cr_assert_eq(t_holder_release(&he), 0);
	t_holder_join(&hb);
	t_holder_join(&hc);
	t_holder_join(&hd);
	t_holder_join(&he);
}

Test(queue, not_reentrant_if_available_gets_null, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	cr_assert_not(can_get(m, &ex_ia), "lock is re-entrant");
	cr_assert_not(can_get(m, &sh_ia), "lock is re-entrant");
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
	T_ASSERT_RC(wlk_release(l), 0);
}

Test(queue, not_reentrant_second_request_waits, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	struct t_holder h;

	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	t_holder_start(&h, m, "r", 1, NULL);
	cr_assert(t_wait_pending(m, "r", 1, 1), "second request not queued");
	cr_assert_not(t_holder_granted_now(&h));
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_held_by(m, "r", 1, id(m)), 1);
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	T_ASSERT_RC(h.acq_rc, 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
}

struct ia_arg {
	int calls;
	bool got;
	size_t held_inside;
	struct wlk_manager *m;
};

static int cb_ia(struct wlk_lock *lock, void *arg)
{
	struct ia_arg *a = arg;

	a->calls++;
	a->got = lock != NULL;
	a->held_inside = t_held_n(a->m, "r", 1);
	return lock ? 11 : 22;
}

Test(queue, if_available_miss_calls_back_with_null_and_never_queues, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct ia_arg arg = { .m = b };
	struct wlk_lock *la = NULL;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	T_ASSERT_RC(wlk_request(b, "r", 1, &ex_ia, cb_ia, &arg), 22);
	cr_assert_eq(arg.calls, 1);
	cr_assert_not(arg.got);
	cr_assert_eq(t_pending_n(a, NULL, 0), 0, "if_available queued");
	T_ASSERT_RC(wlk_request(b, "r", 1, &sh_ia, cb_ia, &arg), 22);
	cr_assert_eq(t_pending_n(a, NULL, 0), 0, "if_available queued");
	cr_assert_eq(t_held_n(a, NULL, 0), 1);
	T_ASSERT_RC(wlk_release(la), 0);
}

Test(queue, if_available_hit_holds_the_lock_during_callback, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct ia_arg arg = { .m = m };

	T_ASSERT_RC(wlk_request(m, "r", 1, &ex_ia, cb_ia, &arg), 11);
	cr_assert(arg.got);
	cr_assert_eq(arg.held_inside, 1);
	cr_assert_eq(t_held_n(m, NULL, 0), 0, "not released after callback");
}

Test(queue, if_available_never_shows_in_pending_while_others_wait, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_lock *la = NULL;
	struct t_holder h;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	t_holder_start(&h, b, "r", 1, NULL);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	cr_assert_not(can_get(c, &ex_ia));
	cr_assert_eq(t_pending_n(a, "r", 1), 1);
	T_ASSERT_RC(wlk_release(la), 0);
	/* b was first in line, an if_available request cannot overtake. */
	cr_assert_not(can_get(c, &ex_ia));
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
}

Test(queue, names_have_independent_queues, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_lock *la = NULL, *lc = NULL;
	struct t_holder h;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	t_holder_start(&h, b, "r", 1, NULL);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	T_ASSERT_RC(wlk_acquire(c, "s", 1, &ex_ia, &lc), 0);
	cr_assert_not_null(lc, "a queue on r blocked s");
	cr_assert_eq(t_pending_n(a, "s", 1), 0);
	T_ASSERT_RC(wlk_release(lc), 0);
	T_ASSERT_RC(wlk_release(la), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
}

Test(queue, fencing_tokens_strictly_increase, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *l1 = NULL, *l2 = NULL, *l3 = NULL, *l4 = NULL;
	uint64_t last[2] = {0, 0};
	int i;

	/* Per name: both the fast path (uncontended) and the queue. */
	for (i = 0; i < 10; i++) {
		struct wlk_lock *l = NULL;
		int k = i % 3 ? 0 : 1;

		T_ASSERT_RC(wlk_acquire(i % 2 ? a : b, k ? "s" : "r", 1,
					NULL, &l),
			    0);
		cr_assert_geq(wlk_lock_token(l), 1);
		cr_assert_gt(wlk_lock_token(l), last[k],
			     "token %d not above %lu", i,
			     (unsigned long)last[k]);
		last[k] = wlk_lock_token(l);
		T_ASSERT_RC(wlk_release(l), 0);
	}
	/* Locks held at once, shared ones included, differ too. */
	T_ASSERT_RC(wlk_acquire(a, "r", 1, &sh, &l1), 0);
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &sh, &l2), 0);
	T_ASSERT_RC(wlk_acquire(a, "s", 1, NULL, &l3), 0);
	T_ASSERT_RC(wlk_acquire(b, "t", 1, NULL, &l4), 0);
	cr_assert_gt(wlk_lock_token(l1), last[0]);
	cr_assert_gt(wlk_lock_token(l2), wlk_lock_token(l1));
	cr_assert_gt(wlk_lock_token(l3), last[1]);
	cr_assert_geq(wlk_lock_token(l4), 1);
	T_ASSERT_RC(wlk_release(l1), 0);
	T_ASSERT_RC(wlk_release(l2), 0);
	T_ASSERT_RC(wlk_release(l3), 0);
	T_ASSERT_RC(wlk_release(l4), 0);
}

Test(queue, fencing_tokens_increase_across_managers_of_the_bucket, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *la = NULL;
	struct t_holder h;
	uint64_t ta;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	ta = wlk_lock_token(la);
	t_holder_start(&h, b, "r", 1, NULL);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	T_ASSERT_RC(wlk_release(la), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
	cr_assert_gt(h.token, ta);
}

/* The token of one grant of @name in a manager opened and closed for it. */
static uint64_t token_once(const char *name)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	uint64_t t;

	T_ASSERT_RC(wlk_acquire(m, name, WLK_NUL_TERMINATED, NULL, &l), 0);
	t = wlk_lock_token(l);
	T_ASSERT_RC(wlk_release(l), 0);
	t_close(m);
	return t;
}

/*
 * With nobody attached, the next opener re-initialises the segment; its
 * tokens must still be above the last one's (a run-once tool that stores
 * the token would otherwise see 1 every time).
 */
Test(queue, fencing_tokens_rise_when_the_segment_is_reinitialised, T_FIX,
     .timeout = 10)
{
	uint64_t t1 = token_once("r"), t2 = token_once("r");

	cr_assert_gt(t2, t1, "token %llu after %llu", (unsigned long long)t2,
		     (unsigned long long)t1);
	cr_assert_gt(token_once("r"), t2);
}

Test(queue, fencing_tokens_rise_when_the_bucket_is_removed_and_created_again,
     T_FIX, .timeout = 10)
{
	uint64_t t1 = token_once("r"), t2;

	T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), 0);
	t2 = token_once("r");
	cr_assert_gt(t2, t1, "token %llu after %llu", (unsigned long long)t2,
		     (unsigned long long)t1);
}

static void assert_state(struct wlk_manager *m, size_t held, size_t pending)
{
	cr_assert_eq(t_held_n(m, NULL, 0), held);
	cr_assert_eq(t_pending_n(m, NULL, 0), pending);
}

Test(queue, full_request_table_is_efull_and_changes_nothing, T_FIX,
     .timeout = 10)
{
	struct wlk_manager_options o = { .max_requests = 2 };
	struct wlk_manager *a = t_open_opts(&o), *b = t_open_opts(&o);
	struct wlk_options tmo = { .timeout_ns = 2000000000ull };
	struct wlk_lock *l1 = NULL, *l2 = NULL, *l3 = (struct wlk_lock *)&l3;

	T_ASSERT_RC(wlk_acquire(a, "a", 1, NULL, &l1), 0);
	T_ASSERT_RC(wlk_acquire(a, "b", 1, NULL, &l2), 0);
	/* Would be granted at once: refused. */
	T_ASSERT_RC(wlk_acquire(b, "c", 1, NULL, &l3), WLK_EFULL);
	cr_assert_eq(l3, (struct wlk_lock *)&l3);
	T_ASSERT_RC(wlk_acquire(b, "c", 1, &sh, &l3), WLK_EFULL);
	assert_state(a, 2, 0);
	/* Would queue: refused at once instead of waiting. */
	T_ASSERT_RC(wlk_acquire(b, "a", 1, &tmo, &l3), WLK_EFULL);
	assert_state(a, 2, 0);
	cr_assert_not(wlk_lock_stolen(l1));
	cr_assert_not(wlk_lock_stolen(l2));

	/* Works again once a slot is free. */
	T_ASSERT_RC(wlk_release(l1), 0);
	T_ASSERT_RC(wlk_acquire(b, "c", 1, NULL, &l3), 0);
	cr_assert_not_null(l3);
	assert_state(a, 2, 0);
	T_ASSERT_RC(wlk_release(l3), 0);
	T_ASSERT_RC(wlk_release(l2), 0);
	assert_state(a, 0, 0);
}

static int cb_never(struct wlk_lock *lock, void *arg)
{
	(*(int *)arg)++;
	return 0;
}

Test(queue, full_request_table_refuses_wlk_request_without_callback, T_FIX,
     .timeout = 10)
{
	struct wlk_manager_options o = { .max_requests = 2 };
	struct wlk_manager *a = t_open_opts(&o), *b = t_open_opts(&o);
	struct wlk_lock *l1 = NULL, *l2 = NULL;
	int runs = 0;

	T_ASSERT_RC(wlk_acquire(a, "a", 1, NULL, &l1), 0);
	T_ASSERT_RC(wlk_acquire(a, "b", 1, NULL, &l2), 0);
	T_ASSERT_RC(wlk_request(b, "c", 1, NULL, cb_never, &runs), WLK_EFULL);
	cr_assert_eq(runs, 0);
	assert_state(a, 2, 0);
	T_ASSERT_RC(wlk_release(l1), 0);
	T_ASSERT_RC(wlk_request(b, "c", 1, NULL, cb_never, &runs), 0);
	cr_assert_eq(runs, 1);
	T_ASSERT_RC(wlk_release(l2), 0);
}

Test(queue, full_request_table_counts_pending_requests, T_FIX,
     .timeout = 10)
{
	struct wlk_manager_options o = { .max_requests = 2 };
	struct wlk_manager *a = t_open_opts(&o), *b = t_open_opts(&o);
	struct wlk_manager *c = t_open_opts(&o);
	struct wlk_options tmo = { .timeout_ns = 2000000000ull };
	struct wlk_lock *l1 = NULL, *l3 = (struct wlk_lock *)&l3;
	struct t_holder h;

	T_ASSERT_RC(wlk_acquire(a, "a", 1, NULL, &l1), 0);
	t_holder_start(&h, b, "a", 1, NULL);
	cr_assert(t_wait_pending(a, "a", 1, 1));
	T_ASSERT_RC(wlk_acquire(c, "z", 1, &tmo, &l3), WLK_EFULL);
	T_ASSERT_RC(wlk_acquire(c, "a", 1, &tmo, &l3), WLK_EFULL);
	assert_state(a, 1, 1);
	T_ASSERT_RC(wlk_release(l1), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
	T_ASSERT_RC(wlk_acquire(c, "z", 1, NULL, &l3), 0);
	T_ASSERT_RC(wlk_release(l3), 0);
}

Test(queue, full_name_table_is_efull_and_changes_nothing, T_FIX,
     .timeout = 10)
{
	struct wlk_manager_options o = { .max_names = 2 };
	struct wlk_manager *a = t_open_opts(&o), *b = t_open_opts(&o);
	struct wlk_lock *l1 = NULL, *l2 = NULL, *l3 = (struct wlk_lock *)&l3;

	T_ASSERT_RC(wlk_acquire(a, "a", 1, NULL, &l1), 0);
	T_ASSERT_RC(wlk_acquire(a, "b", 1, NULL, &l2), 0);
	T_ASSERT_RC(wlk_acquire(b, "c", 1, NULL, &l3), WLK_EFULL);
	cr_assert_eq(l3, (struct wlk_lock *)&l3);
	assert_state(a, 2, 0);
	/* An existing name needs no new slot. */
	T_ASSERT_RC(wlk_acquire(b, "a", 1, &ex_ia, &l3), 0);
	cr_assert_null(l3);
	T_ASSERT_RC(wlk_acquire(a, "a", 1, &sh_ia, &l3), 0);
	cr_assert_null(l3);
	/* A name whose last lock went away frees its slot. */
	T_ASSERT_RC(wlk_release(l1), 0);
	T_ASSERT_RC(wlk_acquire(b, "c", 1, NULL, &l3), 0);
	cr_assert_not_null(l3);
	assert_state(a, 2, 0);
	T_ASSERT_RC(wlk_release(l3), 0);
	T_ASSERT_RC(wlk_release(l2), 0);
}

Test(queue, release_of_null_is_a_noop, T_FIX, .timeout = 10)
{
	T_ASSERT_RC(wlk_release(NULL), 0);
}

struct rel_arg {
	struct wlk_lock *l;
	int rc;
};

static void *release_thread(void *arg)
{
	struct rel_arg *r = arg;

	r->rc = wlk_release(r->l);
	return NULL;
}

Test(queue, release_from_another_thread, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct rel_arg r = { .rc = 1 };
	pthread_t th;

	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &r.l), 0);
	cr_assert_eq(pthread_create(&th, NULL, release_thread, &r), 0);
	pthread_join(th, NULL);
	T_ASSERT_RC(r.rc, 0);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
}

struct cb_seen {
	struct wlk_manager *m;
	enum wlk_mode mode;
	bool stolen;
	uint64_t token;
	size_t held_by_me;
	size_t len;
	char name[8];
};

static int cb_look(struct wlk_lock *lock, void *arg)
{
	struct cb_seen *s = arg;
	const char *n = wlk_lock_name(lock, &s->len);

	memcpy(s->name, n, s->len < 8 ? s->len : 8);
	s->mode = wlk_lock_mode(lock);
	s->stolen = wlk_lock_stolen(lock);
	s->token = wlk_lock_token(lock);
	s->held_by_me = t_held_by(s->m, "res", 3, wlk_manager_client_id(s->m));
	return 5;
}

Test(queue, request_holds_during_callback_and_releases_after, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct cb_seen s = { .m = m };

	T_ASSERT_RC(wlk_request(m, "res", 3, &sh, cb_look, &s), 5);
	cr_assert_eq(s.len, 3);
	cr_assert_eq(memcmp(s.name, "res", 3), 0);
	cr_assert_eq(s.mode, WLK_SHARED);
	cr_assert_not(s.stolen);
	cr_assert_geq(s.token, 1);
	cr_assert_eq(s.held_by_me, 1);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	T_ASSERT_RC(wlk_request(m, "res", 3, NULL, cb_look, &s), 5);
	cr_assert_eq(s.mode, WLK_EXCLUSIVE);
}
