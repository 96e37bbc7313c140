/* SPDX-License-Identifier: MIT */
/* t_abort.c - abort signals and timeouts of pending requests. */
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "../common.h"

static const struct wlk_options sh = { .mode = WLK_SHARED };

static const char *id(struct wlk_manager *m)
{
	return wlk_manager_client_id(m);
}

static struct wlk_signal *new_signal(void)
{
	struct wlk_signal *s = NULL;

	T_ASSERT_RC(wlk_signal_new(&s), 0);
	cr_assert_not_null(s);
	return s;
}

Test(abort, signal_new_rejects_null_out, T_FIX, .timeout = 10)
{
	T_ASSERT_RC(wlk_signal_new(NULL), WLK_EINVAL);
}

Test(abort, signal_starts_unaborted_and_abort_sticks, T_FIX, .timeout = 10)
{
	struct wlk_signal *s = new_signal();

	cr_assert_not(wlk_signal_aborted(s));
	wlk_signal_abort(s, 0);
	cr_assert(wlk_signal_aborted(s));
	wlk_signal_abort(s, -5);
	cr_assert(wlk_signal_aborted(s));
	wlk_signal_free(s);
	wlk_signal_free(NULL);
}

Test(abort, first_abort_reason_wins, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_signal *s = new_signal();
	struct wlk_options o = { 0 };
	struct wlk_lock *l = NULL;

	wlk_signal_abort(s, -5);
	wlk_signal_abort(s, -6);
	wlk_signal_abort(s, 0);
	o.signal = s;
	T_ASSERT_RC(wlk_acquire(m, "r", 1, &o, &l), -5);
	wlk_signal_free(s);
}

Test(abort, abort_while_pending_returns_reason_and_leaves_queue, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_signal *s = new_signal();
	struct wlk_options o = { 0 };
	struct wlk_lock *la = NULL;
	struct t_holder h;

	o.signal = s;
	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	t_holder_start(&h, b, "r", 1, &o);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	wlk_signal_abort(s, 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0, "abort did not wake");
	T_ASSERT_RC(h.acq_rc, WLK_EABORTED);
	cr_assert_not(h.got);
	cr_assert_eq(t_pending_n(a, NULL, 0), 0, "aborted request queued");
	cr_assert_eq(t_held_by(a, "r", 1, id(a)), 1);
	cr_assert_eq(t_held_n(a, NULL, 0), 1);
	t_holder_join(&h);
	T_ASSERT_RC(wlk_release(la), 0);
	cr_assert_eq(t_held_n(a, NULL, 0), 0, "aborted request got the lock");
	wlk_signal_free(s);
}

Test(abort, abort_returns_custom_reason, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_signal *s = new_signal();
	struct wlk_options o = { 0 };
	struct wlk_lock *la = NULL;
	struct t_holder h;

	o.signal = s;
	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	t_holder_start(&h, b, "r", 1, &o);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	wlk_signal_abort(s, -4242);
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	T_ASSERT_RC(h.acq_rc, -4242);
	t_holder_join(&h);
	T_ASSERT_RC(wlk_release(la), 0);
	wlk_signal_free(s);
}

Test(abort, aborting_queued_exclusive_grants_shared_behind_it, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_signal *s = new_signal();
	struct wlk_options o = { 0 };
	struct wlk_lock *la = NULL;
	struct t_holder hb, hc;

	o.signal = s;
	T_ASSERT_RC(wlk_acquire(a, "r", 1, &sh, &la), 0);
	t_holder_start(&hb, b, "r", 1, &o);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	t_holder_start(&hc, c, "r", 1, &sh);
	cr_assert(t_wait_pending(a, "r", 1, 2));
	wlk_signal_abort(s, 0);
	cr_assert_eq(t_holder_wait_granted(&hb), 0);
	T_ASSERT_RC(hb.acq_rc, WLK_EABORTED);
	cr_assert_eq(t_holder_wait_granted(&hc), 0, "shared one not granted");
	T_ASSERT_RC(hc.acq_rc, 0);
	cr_assert_eq(t_held_n(a, "r", 1), 2);
	cr_assert_eq(t_held_by(a, "r", 1, id(c)), 1);
	cr_assert_eq(t_pending_n(a, "r", 1), 0);
	cr_assert_eq(t_holder_release(&hc), 0);
	t_holder_join(&hb);
	t_holder_join(&hc);
	T_ASSERT_RC(wlk_release(la), 0);
	wlk_signal_free(s);
}

Test(abort, aborting_a_middle_request_keeps_the_others_in_order, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_manager *d = t_open();
	struct wlk_signal *s = new_signal();
	struct wlk_options o = { 0 };
	struct wlk_lock *la = NULL;
	struct t_holder hb, hc, hd;

	o.signal = s;
	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	t_holder_start(&hb, b, "r", 1, NULL);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	t_holder_start(&hc, c, "r", 1, &o);
	cr_assert(t_wait_pending(a, "r", 1, 2));
	t_holder_start(&hd, d, "r", 1, NULL);
	cr_assert(t_wait_pending(a, "r", 1, 3));
	wlk_signal_abort(s, 0);
	cr_assert_eq(t_holder_wait_granted(&hc), 0);
	T_ASSERT_RC(hc.acq_rc, WLK_EABORTED);
	cr_assert_eq(t_pending_n(a, "r", 1), 2);
	cr_assert_eq(t_held_by(a, "r", 1, id(a)), 1);
	T_ASSERT_RC(wlk_release(la), 0);
	cr_assert_eq(t_held_by(a, "r", 1, id(b)), 1);
	cr_assert_eq(t_holder_wait_granted(&hb), 0);
	cr_assert_eq(t_holder_release(&hb), 0);
	cr_assert_eq(t_held_by(a, "r", 1, id(d)), 1);
	cr_assert_eq(t_holder_wait_granted(&hd), 0);
	cr_assert_eq(t_holder_release(&hd), 0);
	t_holder_join(&hb);
	t_holder_join(&hc);
	t_holder_join(&hd);
	wlk_signal_free(s);
}

Test(abort, abort_after_grant_is_ignored, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_signal *s = new_signal();
	struct wlk_options o = { 0 };
	struct wlk_lock *l = NULL, *lb = (struct wlk_lock *)&lb;
	struct wlk_options ia = { .if_available = true };

	o.signal = s;
	T_ASSERT_RC(wlk_acquire(a, "r", 1, &o, &l), 0);
	wlk_signal_abort(s, 0);
	cr_assert_not(wlk_lock_stolen(l));
	cr_assert_eq(t_held_by(a, "r", 1, id(a)), 1, "abort dropped a grant");
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &ia, &lb), 0);
	cr_assert_null(lb);
	T_ASSERT_RC(wlk_release(l), 0);
	wlk_signal_free(s);
}

struct self_abort {
	struct wlk_signal *s;
	int runs;
};

static int cb_abort_self(struct wlk_lock *lock, void *arg)
{
	struct self_abort *sa = arg;

	sa->runs++;
	wlk_signal_abort(sa->s, -99);
	return wlk_lock_stolen(lock) ? -1 : 5;
}

Test(abort, abort_inside_callback_is_ignored, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct self_abort sa = { .s = new_signal() };
	struct wlk_options o = { 0 };

	o.signal = sa.s;
	T_ASSERT_RC(wlk_request(m, "r", 1, &o, cb_abort_self, &sa), 5);
	cr_assert_eq(sa.runs, 1);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	wlk_signal_free(sa.s);
}

Test(abort, one_signal_aborts_several_waiters, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_manager *d = t_open();
	struct wlk_signal *s = new_signal();
	struct wlk_options o = { 0 }, os = { .mode = WLK_SHARED };
	struct wlk_lock *lr = NULL, *lq = NULL;
	struct t_holder hb, hc, hd;

	o.signal = s;
	os.signal = s;
	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &lr), 0);
	T_ASSERT_RC(wlk_acquire(a, "q", 1, NULL, &lq), 0);
	t_holder_start(&hb, b, "r", 1, &o);
	t_holder_start(&hc, c, "r", 1, &os);
	t_holder_start(&hd, d, "q", 1, &o);
	cr_assert(t_wait_pending(a, NULL, 0, 3));
	wlk_signal_abort(s, -31);
	cr_assert_eq(t_holder_wait_granted(&hb), 0);
	cr_assert_eq(t_holder_wait_granted(&hc), 0);
	cr_assert_eq(t_holder_wait_granted(&hd), 0);
	T_ASSERT_RC(hb.acq_rc, -31);
	T_ASSERT_RC(hc.acq_rc, -31);
	T_ASSERT_RC(hd.acq_rc, -31);
	cr_assert_eq(t_pending_n(a, NULL, 0), 0);
	cr_assert_eq(t_held_n(a, NULL, 0), 2);
	t_holder_join(&hb);
	t_holder_join(&hc);
	t_holder_join(&hd);
	T_ASSERT_RC(wlk_release(lr), 0);
	T_ASSERT_RC(wlk_release(lq), 0);
	wlk_signal_free(s);
}

static int cb_count(struct wlk_lock *lock, void *arg)
{
	(*(int *)arg)++;
	return 0;
}

Test(abort, timeout_while_pending_is_etimedout_and_leaves_queue, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_options o = { .timeout_ns = 50000000 };
	struct wlk_lock *la = NULL, *lb = (struct wlk_lock *)&lb;
	uint64_t t0, el;
	int runs = 0;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	t0 = t_now_ns();
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &o, &lb), WLK_ETIMEDOUT);
	el = t_now_ns() - t0;
	cr_assert_eq(lb, (struct wlk_lock *)&lb);
	cr_assert_geq(el, o.timeout_ns, "gave up after %lu ns",
		      (unsigned long)el);
	cr_assert_eq(t_pending_n(a, NULL, 0), 0, "timed-out request queued");
	T_ASSERT_RC(wlk_request(b, "r", 1, &o, cb_count, &runs),
		    WLK_ETIMEDOUT);
	cr_assert_eq(runs, 0);
	cr_assert_eq(t_pending_n(a, NULL, 0), 0);
	T_ASSERT_RC(wlk_release(la), 0);
	cr_assert_eq(t_held_n(a, NULL, 0), 0, "timed-out request got the lock");
}

/*
 * Whether @n requests are pending on "r" while @hb's (with a timeout) still
 * waits: false if its timeout ran out first (a stalled machine).
 */
static bool pending_in_time(struct wlk_manager *a, size_t n,
			    struct t_holder *hb)
{
	uint64_t end = t_now_ns() + (uint64_t)T_WAIT_MS * 1000000u;

	while (t_now_ns() < end) {
		if (t_pending_n(a, "r", 1) == n)
			return true;
		if (t_holder_granted_now(hb))
			return false;
		t_nap_ms(1);
	}
	return false;
}

Test(abort, timeout_of_queued_exclusive_grants_shared_behind_it, T_FIX,
     .timeout = 60)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_options o = { .timeout_ns = 1000000000 };
	struct wlk_lock *la = NULL;
	struct t_holder hb, hc;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, &sh, &la), 0);
	/* The shared request must queue within the exclusive one's timeout;
	 * on a machine stalled that long, try again with a longer one. */
	for (int tries = 1;; tries++) {
		bool in_time, started_hc = false;

		t_holder_start(&hb, b, "r", 1, &o);
		in_time = pending_in_time(a, 1, &hb);
		if (in_time) {
			t_holder_start(&hc, c, "r", 1, &sh);
			started_hc = true;
			in_time = pending_in_time(a, 2, &hb);
		}
		if (in_time)
			break;
		cr_assert_lt(tries, 4, "machine too slow, %d tries", tries);
		/* The exclusive one timed out; the shared one, if asked, got
		 * the lock beside the shared holder. */
		t_holder_join(&hb);
		if (started_hc) {
			cr_assert_eq(t_holder_wait_granted(&hc), 0);
			cr_assert_eq(t_holder_release(&hc), 0);
			t_holder_join(&hc);
		}
		o.timeout_ns *= 2;
	}
	cr_assert_eq(t_holder_wait_granted(&hb), 0);
	T_ASSERT_RC(hb.acq_rc, WLK_ETIMEDOUT);
	cr_assert_eq(t_holder_wait_granted(&hc), 0, "shared one not granted");
	T_ASSERT_RC(hc.acq_rc, 0);
	cr_assert_eq(t_held_n(a, "r", 1), 2);
	cr_assert_eq(t_pending_n(a, "r", 1), 0);
	cr_assert_eq(t_holder_release(&hc), 0);
	t_holder_join(&hb);
	t_holder_join(&hc);
	T_ASSERT_RC(wlk_release(la), 0);
}

Test(abort, timeout_does_not_fire_when_granted_in_time, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_options o = { .timeout_ns = 5000000000ull };
	struct wlk_lock *la = NULL;
	struct t_holder h;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	t_holder_start(&h, b, "r", 1, &o);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	T_ASSERT_RC(wlk_release(la), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	T_ASSERT_RC(h.acq_rc, 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
	T_ASSERT_RC(h.rel_rc, 0);
}

/* UINT64_MAX is "forever": the deadline must not wrap to the past. */
Test(abort, timeout_of_uint64_max_waits_until_granted, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_options o = { .timeout_ns = UINT64_MAX };
	struct wlk_lock *la = NULL;
	struct t_holder h;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	t_holder_start(&h, b, "r", 1, &o);
	t_nap_ms(100);
	cr_assert_not(t_holder_granted_now(&h), "returned %s at once",
		      t_ename(h.acq_rc));
	cr_assert_eq(t_pending_n(a, "r", 1), 1);
	T_ASSERT_RC(wlk_release(la), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	T_ASSERT_RC(h.acq_rc, 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
	T_ASSERT_RC(h.rel_rc, 0);
}

static int cb_outlive(struct wlk_lock *lock, void *arg)
{
	/* Stay past the request's timeout; it must not matter any more. */
	t_nap_ms(60);
	return wlk_lock_stolen(lock) ? -1 : 3;
}

Test(abort, timeout_is_ignored_after_grant, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_options o = { .timeout_ns = 10000000 };
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_request(m, "r", 1, &o, cb_outlive, NULL), 3);
	T_ASSERT_RC(wlk_acquire(m, "r", 1, &o, &l), 0);
	t_nap_ms(60);
	cr_assert_not(wlk_lock_stolen(l));
	cr_assert_eq(t_held_n(m, "r", 1), 1, "timeout dropped a grant");
	T_ASSERT_RC(wlk_release(l), 0);
}

static struct wlk_signal *handler_signal;

static void on_sigusr1(int sig)
{
	(void)sig;
	wlk_signal_abort(handler_signal, -7);
}

Test(abort, abort_from_a_signal_handler_wakes_the_waiter, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_options o = { 0 };
	struct sigaction sa;
	struct wlk_lock *la = NULL;
	struct t_holder h;

	handler_signal = new_signal();
	o.signal = handler_signal;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigusr1;
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	t_holder_start(&h, b, "r", 1, &o);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	cr_assert_eq(kill(getpid(), SIGUSR1), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0, "handler abort lost");
	T_ASSERT_RC(h.acq_rc, -7);
	cr_assert_eq(t_pending_n(a, NULL, 0), 0);
	t_holder_join(&h);
	T_ASSERT_RC(wlk_release(la), 0);
	wlk_signal_free(handler_signal);
}

Test(abort, signal_is_reusable_across_requests_until_aborted, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_signal *s = new_signal();
	struct wlk_options o = { 0 };
	struct wlk_lock *l = NULL;
	int i, runs = 0;

	o.signal = s;
	for (i = 0; i < 3; i++) {
		T_ASSERT_RC(wlk_acquire(m, "r", 1, &o, &l), 0);
		T_ASSERT_RC(wlk_release(l), 0);
		T_ASSERT_RC(wlk_request(m, "r", 1, &o, cb_count, &runs), 0);
	}
	cr_assert_eq(runs, 3);
	wlk_signal_abort(s, 0);
	T_ASSERT_RC(wlk_acquire(m, "r", 1, &o, &l), WLK_EABORTED);
	wlk_signal_free(s);
}

struct racer {
	struct wlk_manager *m;
	struct wlk_options o;
	int rc;
	atomic_int runs;
	struct t_pipe done;
};

static int cb_race(struct wlk_lock *lock, void *arg)
{
	struct racer *r = arg;

	atomic_fetch_add(&r->runs, 1);
	return 8;
}

static void *race_thread(void *arg)
{
	struct racer *r = arg;

	r->rc = wlk_request(r->m, "r", 1, &r->o, cb_race, r);
	t_put_byte(r->done.wr, 'd');
	return NULL;
}

/*
 * Abort right after the grant: the waiter is in the held set but may not
 * have started its callback yet. Either the callback ran and its value is
 * returned, or the reason is returned, the callback never runs and the lock
 * is released; never a mix.
 */
Test(abort, abort_racing_the_grant_is_all_or_nothing, T_FIX, .timeout = 30)
{
	struct wlk_manager *a = t_open();
	int i, ran = 0, aborted = 0;

	for (i = 0; i < 40; i++) {
		struct racer r = { .m = t_open(), .rc = 1 };
		struct wlk_signal *s = new_signal();
		struct wlk_lock *la = NULL;
		pthread_t th;

		r.o.signal = s;
		t_pipe_open(&r.done);
		T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
		cr_assert_eq(pthread_create(&th, NULL, race_thread, &r), 0);
		cr_assert(t_wait_pending(a, "r", 1, 1));
		T_ASSERT_RC(wlk_release(la), 0);
		wlk_signal_abort(s, -66);
		cr_assert_eq(t_get_byte(r.done.rd), 'd');
		pthread_join(th, NULL);
		if (r.rc == 8) {
			cr_assert_eq(atomic_load(&r.runs), 1);
			ran++;
		} else {
			T_ASSERT_RC(r.rc, -66);
			cr_assert_eq(atomic_load(&r.runs), 0);
			aborted++;
		}
		cr_assert_eq(t_held_n(a, NULL, 0), 0, "round %d: lock left", i);
		cr_assert_eq(t_pending_n(a, NULL, 0), 0);
		t_close(r.m);
		t_pipe_close(&r.done);
		wlk_signal_free(s);
	}
	cr_log_info("callback ran %d times, aborted %d times", ran, aborted);
}
