/* SPDX-License-Identifier: MIT */
/* t_options.c - argument and LockOptions validation, in the spec's order. */
#include <limits.h>
#include <string.h>

#include "../common.h"

static int cb_runs;

static int cb_count(struct wlk_lock *lock, void *arg)
{
	cb_runs++;
	return arg ? *(int *)arg : 0;
}

/* A fresh aborted signal; the caller frees it. */
static struct wlk_signal *aborted_signal(int reason)
{
	struct wlk_signal *s = NULL;

	T_ASSERT_RC(wlk_signal_new(&s), 0);
	wlk_signal_abort(s, reason);
	return s;
}

/*
 * Run wlk_request() and wlk_acquire() with the same arguments, check that
 * both fail with @want, that the callback did not run, *out was not written
 * and that nothing was queued or newly held (@held locks are held on "r" by
 * another manager, @obs observes).
 */
static void expect_fail(struct wlk_manager *m, const char *name, size_t len,
			const struct wlk_options *o, int want,
			struct wlk_manager *obs, size_t held)
{
	struct wlk_lock *l = (struct wlk_lock *)&l;
	int rc;

	cb_runs = 0;
	rc = wlk_request(m, name, len, o, cb_count, NULL);
	cr_assert_eq(rc, want, "wlk_request(\"%s\"): got %s, want %s",
		     name ? name : "(null)", t_ename(rc), t_ename(want));
	cr_assert_eq(cb_runs, 0, "callback ran on failure");
	rc = wlk_acquire(m, name, len, o, &l);
	cr_assert_eq(rc, want, "wlk_acquire(\"%s\"): got %s, want %s",
		     name ? name : "(null)", t_ename(rc), t_ename(want));
	cr_assert_eq(l, (struct wlk_lock *)&l, "*out written on failure");
	cr_assert_eq(t_pending_n(obs, NULL, 0), 0, "failure left a request");
	cr_assert_eq(t_held_n(obs, NULL, 0), held, "failure changed held");
}

/* Another manager holds "r" so that a request that got through would queue. */
static struct wlk_manager *busy(struct wlk_lock **l)
{
	struct wlk_manager *other = t_open();

	T_ASSERT_RC(wlk_acquire(other, "r", 1, NULL, l), 0);
	return other;
}

Test(options, null_manager_is_einval, T_FIX, .timeout = 10)
{
	struct wlk_manager *obs = t_open();

	expect_fail(NULL, "r", 1, NULL, WLK_EINVAL, obs, 0);
}

Test(options, null_name_is_einval, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();

	expect_fail(m, NULL, WLK_NUL_TERMINATED, NULL, WLK_EINVAL, m, 0);
	expect_fail(m, NULL, 1, NULL, WLK_EINVAL, m, 0);
	expect_fail(m, NULL, 0, NULL, WLK_EINVAL, m, 0);
}

Test(options, null_callback_is_einval, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();

	T_ASSERT_RC(wlk_request(m, "r", 1, NULL, NULL, NULL), WLK_EINVAL);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
}

Test(options, null_out_is_einval, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();

	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, NULL), WLK_EINVAL);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
}

Test(options, bad_mode_is_einval, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_options o = { 0 };

	o.mode = (enum wlk_mode)2;
	expect_fail(m, "r", 1, &o, WLK_EINVAL, m, 0);
	o.mode = (enum wlk_mode)-1;
	expect_fail(m, "r", 1, &o, WLK_EINVAL, m, 0);
	o.mode = (enum wlk_mode)0x7fffffff;
	expect_fail(m, "r", 1, &o, WLK_EINVAL, m, 0);
}

Test(options, einval_precedes_enotsupported, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_options o = { .steal = true, .if_available = true };

	T_ASSERT_RC(wlk_request(m, "-x", 2, NULL, NULL, NULL), WLK_EINVAL);
	T_ASSERT_RC(wlk_acquire(m, "-x", 2, NULL, NULL), WLK_EINVAL);
	o.mode = (enum wlk_mode)7;
	expect_fail(m, "r", 1, &o, WLK_EINVAL, m, 0);
	expect_fail(m, "-x", 2, &o, WLK_EINVAL, m, 0);
	expect_fail(NULL, "-x", 2, NULL, WLK_EINVAL, m, 0);
}

Test(options, einval_precedes_aborted_signal, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_signal *s = aborted_signal(-4242);
	struct wlk_options o = { .signal = s };

	T_ASSERT_RC(wlk_request(m, "r", 1, &o, NULL, NULL), WLK_EINVAL);
	o.mode = (enum wlk_mode)3;
	expect_fail(m, "r", 1, &o, WLK_EINVAL, m, 0);
	wlk_signal_free(s);
}

/* Results of calls on an inherited manager in a fork child. */
struct inherited {
	struct wlk_manager *m;
	struct wlk_signal *aborted;
	int fd;
};

static int child_inherited_calls(void *arg)
{
	struct inherited *in = arg;
	struct wlk_options steal_ia = { .steal = true, .if_available = true };
	struct wlk_options sig = { .signal = in->aborted };
	struct wlk_options bad = { .mode = (enum wlk_mode)5 };
	struct wlk_lock *l = NULL;
	int rc[8], ran = 0;

	rc[0] = wlk_request(in->m, "r", 1, NULL, cb_count, NULL);
	rc[1] = wlk_acquire(in->m, "r", 1, NULL, &l);
	rc[2] = wlk_request(in->m, "-x", 2, NULL, cb_count, NULL);
	rc[3] = wlk_request(in->m, "r", 1, &steal_ia, cb_count, NULL);
	rc[4] = wlk_request(in->m, "r", 1, &sig, cb_count, NULL);
	rc[5] = wlk_request(in->m, "r", 1, NULL, NULL, NULL);
	rc[6] = wlk_request(in->m, "r", 1, &bad, cb_count, NULL);
	rc[7] = wlk_acquire(in->m, NULL, 1, NULL, &l);
	ran = cb_runs;
	if (t_put(in->fd, rc, sizeof(rc)) != 0 ||
	    t_put(in->fd, &ran, sizeof(ran)) != 0)
		return 1;
	return 0;
}

Test(options, inherited_manager_is_estate_after_einval_before_the_rest,
     T_FIX, .timeout = 10)
{
	struct inherited in = { .m = t_open() };
	struct t_pipe p;
	int rc[8], ran = -1;
	pid_t pid;

	in.aborted = aborted_signal(-77);
	t_pipe_open(&p);
	in.fd = p.wr;
	cb_runs = 0;
	pid = t_fork(child_inherited_calls, &in);
	cr_assert_eq(t_get(p.rd, rc, sizeof(rc), T_WAIT_MS), 0,
		     "no results from the child");
	cr_assert_eq(t_get(p.rd, &ran, sizeof(ran), T_WAIT_MS), 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	T_ASSERT_RC(rc[0], WLK_ESTATE);
	T_ASSERT_RC(rc[1], WLK_ESTATE);
	T_ASSERT_RC(rc[2], WLK_ESTATE);	/* before the '-' check */
	T_ASSERT_RC(rc[3], WLK_ESTATE);	/* before option combinations */
	T_ASSERT_RC(rc[4], WLK_ESTATE);	/* before the abort reason */
	T_ASSERT_RC(rc[5], WLK_EINVAL);	/* after NULL callback */
	T_ASSERT_RC(rc[6], WLK_EINVAL);	/* after a bad mode */
	T_ASSERT_RC(rc[7], WLK_EINVAL);	/* after NULL name */
	cr_assert_eq(ran, 0, "callback ran in the child");
	cr_assert_eq(t_held_n(in.m, NULL, 0), 0);
	cr_assert_eq(t_pending_n(in.m, NULL, 0), 0);
	t_pipe_close(&p);
	wlk_signal_free(in.aborted);
}

Test(options, name_starting_with_hyphen_is_enotsupported, T_FIX,
     .timeout = 10)
{
	struct wlk_lock *l = NULL;
	struct wlk_manager *m = busy(&l);

	expect_fail(m, "-", 1, NULL, WLK_ENOTSUPPORTED, m, 1);
	expect_fail(m, "-x", WLK_NUL_TERMINATED, NULL, WLK_ENOTSUPPORTED, m,
		    1);
	expect_fail(m, "--", 2, NULL, WLK_ENOTSUPPORTED, m, 1);
	expect_fail(m, "-r", 2, NULL, WLK_ENOTSUPPORTED, m, 1);
	T_ASSERT_RC(wlk_release(l), 0);
}

Test(options, hyphen_with_shared_or_if_available_is_enotsupported, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_options sh = { .mode = WLK_SHARED };
	struct wlk_options ia = { .if_available = true };

	expect_fail(m, "-x", 2, &sh, WLK_ENOTSUPPORTED, m, 0);
	expect_fail(m, "-x", 2, &ia, WLK_ENOTSUPPORTED, m, 0);
}

Test(options, hyphen_not_at_the_start_is_fine, T_FIX, .timeout = 10)
{
	static const char *const names[] = { "x-y", "x-", " -x", "a--" };
	struct wlk_manager *m = t_open();
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		struct wlk_lock *l = NULL;
		int ret = 9;

		cb_runs = 0;
		T_ASSERT_RC(wlk_request(m, names[i], WLK_NUL_TERMINATED, NULL,
					cb_count, &ret),
			    9);
		cr_assert_eq(cb_runs, 1, "%s", names[i]);
		T_ASSERT_RC(wlk_acquire(m, names[i], WLK_NUL_TERMINATED, NULL,
					&l),
			    0);
		cr_assert_not_null(l);
		T_ASSERT_RC(wlk_release(l), 0);
	}
	/* A hyphen after an embedded NUL is not at the start either. */
	cr_assert_eq(wlk_request(m, "\0-", 2, NULL, cb_count, NULL), 0);
}

Test(options, hyphen_beyond_name_len_is_not_part_of_the_name, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	size_t len = 99;

	/* Zero bytes of "-x": the empty name. */
	T_ASSERT_RC(wlk_acquire(m, "-x", 0, NULL, &l), 0);
	cr_assert_not_null(l);
	cr_assert_str_eq(wlk_lock_name(l, &len), "");
	cr_assert_eq(len, 0);
	T_ASSERT_RC(wlk_release(l), 0);
}

Test(options, steal_with_if_available_is_enotsupported, T_FIX, .timeout = 10)
{
	struct wlk_lock *l = NULL;
	struct wlk_manager *m = busy(&l);
	struct wlk_options o = { .steal = true, .if_available = true };

	expect_fail(m, "r", 1, &o, WLK_ENOTSUPPORTED, m, 1);
	/* The holder was not robbed. */
	cr_assert_not(wlk_lock_stolen(l));
	T_ASSERT_RC(wlk_release(l), 0);
}

Test(options, steal_with_shared_is_enotsupported, T_FIX, .timeout = 10)
{
	struct wlk_lock *l = NULL;
	struct wlk_manager *m = busy(&l);
	struct wlk_options o = { .steal = true, .mode = WLK_SHARED };

	expect_fail(m, "r", 1, &o, WLK_ENOTSUPPORTED, m, 1);
	cr_assert_not(wlk_lock_stolen(l));
	T_ASSERT_RC(wlk_release(l), 0);
}

Test(options, signal_with_steal_is_enotsupported, T_FIX, .timeout = 10)
{
	struct wlk_lock *l = NULL;
	struct wlk_manager *m = busy(&l);
	struct wlk_signal *s = NULL;
	struct wlk_options o = { .steal = true };

	T_ASSERT_RC(wlk_signal_new(&s), 0);
	o.signal = s;
	expect_fail(m, "r", 1, &o, WLK_ENOTSUPPORTED, m, 1);
	cr_assert_not(wlk_lock_stolen(l));
	T_ASSERT_RC(wlk_release(l), 0);
	wlk_signal_free(s);
}

Test(options, signal_with_if_available_is_enotsupported, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_signal *s = NULL;
	struct wlk_options o = { .if_available = true };

	T_ASSERT_RC(wlk_signal_new(&s), 0);
	o.signal = s;
	/* Even though the lock is free. */
	expect_fail(m, "r", 1, &o, WLK_ENOTSUPPORTED, m, 0);
	o.mode = WLK_SHARED;
	expect_fail(m, "r", 1, &o, WLK_ENOTSUPPORTED, m, 0);
	wlk_signal_free(s);
}

Test(options, timeout_with_steal_is_enotsupported, T_FIX, .timeout = 10)
{
	struct wlk_lock *l = NULL;
	struct wlk_manager *m = busy(&l);
	struct wlk_options o = { .steal = true, .timeout_ns = 1000000000 };

	expect_fail(m, "r", 1, &o, WLK_ENOTSUPPORTED, m, 1);
	cr_assert_not(wlk_lock_stolen(l));
	T_ASSERT_RC(wlk_release(l), 0);
}

Test(options, timeout_with_if_available_is_enotsupported, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_options o = { .if_available = true, .timeout_ns = 1000 };

	expect_fail(m, "r", 1, &o, WLK_ENOTSUPPORTED, m, 0);
}

Test(options, enotsupported_precedes_aborted_signal, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_signal *s = aborted_signal(-4242);
	struct wlk_options o = { .signal = s };

	expect_fail(m, "-x", 2, &o, WLK_ENOTSUPPORTED, m, 0);
	o.steal = true;
	expect_fail(m, "r", 1, &o, WLK_ENOTSUPPORTED, m, 0);
	o.steal = false;
	o.if_available = true;
	expect_fail(m, "r", 1, &o, WLK_ENOTSUPPORTED, m, 0);
	wlk_signal_free(s);
}

Test(options, enotsupported_precedes_name_length, T_FIX, .timeout = 10)
{
	struct wlk_manager_options mo = { .max_name_len = 4 };
	struct wlk_manager *m = t_open_opts(&mo);
	struct wlk_options o = { .steal = true, .mode = WLK_SHARED };

	expect_fail(m, "-abcdefgh", 9, NULL, WLK_ENOTSUPPORTED, m, 0);
	expect_fail(m, "abcdefgh", 8, &o, WLK_ENOTSUPPORTED, m, 0);
}

Test(options, aborted_signal_returns_default_reason, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_signal *s = aborted_signal(0);
	struct wlk_options o = { .signal = s };

	/* The lock is free, but the request must not be made. */
	expect_fail(m, "r", 1, &o, WLK_EABORTED, m, 0);
	o.mode = WLK_SHARED;
	expect_fail(m, "r", 1, &o, WLK_EABORTED, m, 0);
	wlk_signal_free(s);
}

Test(options, aborted_signal_returns_custom_reason, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_signal *s1 = aborted_signal(-4242);
	struct wlk_signal *s2 = aborted_signal(WLK_ETIMEDOUT);
	struct wlk_signal *s3 = aborted_signal(INT_MIN);
	struct wlk_options o = { .signal = s1 };

	expect_fail(m, "r", 1, &o, -4242, m, 0);
	o.signal = s2;
	expect_fail(m, "r", 1, &o, WLK_ETIMEDOUT, m, 0);
	o.signal = s3;
	expect_fail(m, "r", 1, &o, INT_MIN, m, 0);
	wlk_signal_free(s1);
	wlk_signal_free(s2);
	wlk_signal_free(s3);
}

Test(options, positive_abort_reason_becomes_eaborted, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_signal *s = aborted_signal(5);
	struct wlk_options o = { .signal = s };

	expect_fail(m, "r", 1, &o, WLK_EABORTED, m, 0);
	wlk_signal_free(s);
}

Test(options, aborted_signal_while_lock_busy_queues_nothing, T_FIX,
     .timeout = 10)
{
	struct wlk_lock *l = NULL;
	struct wlk_manager *m = busy(&l);
	struct wlk_signal *s = aborted_signal(-9);
	struct wlk_options o = { .signal = s };

	expect_fail(m, "r", 1, &o, -9, m, 1);
	T_ASSERT_RC(wlk_release(l), 0);
	wlk_signal_free(s);
}

Test(options, null_options_mean_exclusive_defaults, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_options zero = { 0 };
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	cr_assert_eq(wlk_lock_mode(l), WLK_EXCLUSIVE);
	T_ASSERT_RC(wlk_release(l), 0);
	T_ASSERT_RC(wlk_acquire(m, "r", 1, &zero, &l), 0);
	cr_assert_eq(wlk_lock_mode(l), WLK_EXCLUSIVE);
	T_ASSERT_RC(wlk_release(l), 0);
}

Test(options, signal_and_timeout_alone_are_accepted, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_signal *s = NULL;
	struct wlk_options o = { .timeout_ns = 5000000000ull };
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_signal_new(&s), 0);
	o.signal = s;
	T_ASSERT_RC(wlk_acquire(m, "r", 1, &o, &l), 0);
	cr_assert_not_null(l);
	T_ASSERT_RC(wlk_release(l), 0);
	o.mode = WLK_SHARED;
	T_ASSERT_RC(wlk_acquire(m, "r", 1, &o, &l), 0);
	cr_assert_eq(wlk_lock_mode(l), WLK_SHARED);
	T_ASSERT_RC(wlk_release(l), 0);
	wlk_signal_free(s);
}

Test(options, callback_return_value_passes_through, T_FIX, .timeout = 10)
{
	static const int vals[] = {
		0, 1, 42, -1, INT_MAX, INT_MIN, WLK_EINVAL, WLK_ESTOLEN,
		WLK_ESTATE,
	};
	struct wlk_manager *m = t_open();
	size_t i;

	for (i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		int v = vals[i];

		cb_runs = 0;
		T_ASSERT_RC(wlk_request(m, "r", 1, NULL, cb_count, &v), v);
		cr_assert_eq(cb_runs, 1);
	}
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
}
