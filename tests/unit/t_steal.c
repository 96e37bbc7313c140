/* SPDX-License-Identifier: MIT */
/* t_steal.c - the steal option: preemption, stolen holders, recovery. */
#include <string.h>

#include "../common.h"

static const struct wlk_options steal = { .steal = true };
static const struct wlk_options sh = { .mode = WLK_SHARED };

static const char *id(struct wlk_manager *m)
{
	return wlk_manager_client_id(m);
}

Test(steal, holder_is_marked_stolen_and_leaves_held_set, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *la = NULL, *lb = NULL;
	size_t len = 0;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	cr_assert_not(wlk_lock_stolen(la));
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &steal, &lb), 0);
	cr_assert_not_null(lb);
	cr_assert(wlk_lock_stolen(la), "victim not marked stolen");
	cr_assert_not(wlk_lock_stolen(lb));
	cr_assert_eq(wlk_lock_mode(lb), WLK_EXCLUSIVE);
	cr_assert_eq(t_held_n(a, "r", 1), 1);
	cr_assert_eq(t_held_by(a, "r", 1, id(b)), 1);
	/* The stolen handle still answers. */
	cr_assert_str_eq(wlk_lock_name(la, &len), "r");
	cr_assert_eq(len, 1);
	cr_assert_eq(wlk_lock_mode(la), WLK_EXCLUSIVE);

	T_ASSERT_RC(wlk_release(la), WLK_ESTOLEN);
	cr_assert_eq(t_held_by(a, "r", 1, id(b)), 1,
		     "stolen release dropped the stealer's lock");
	T_ASSERT_RC(wlk_release(lb), 0);
	cr_assert_eq(t_held_n(a, NULL, 0), 0);
}

Test(steal, every_shared_holder_is_stolen, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_lock *la = NULL, *lb = NULL, *lc = NULL;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, &sh, &la), 0);
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &sh, &lb), 0);
	T_ASSERT_RC(wlk_acquire(c, "r", 1, &steal, &lc), 0);
	cr_assert(wlk_lock_stolen(la));
	cr_assert(wlk_lock_stolen(lb));
	cr_assert_eq(t_held_n(a, "r", 1), 1);
	cr_assert_eq(t_held_by(a, "r", 1, id(c)), 1);
	T_ASSERT_RC(wlk_release(la), WLK_ESTOLEN);
	T_ASSERT_RC(wlk_release(lb), WLK_ESTOLEN);
	cr_assert_eq(t_held_by(a, "r", 1, id(c)), 1);
	T_ASSERT_RC(wlk_release(lc), 0);
}

Test(steal, stealer_is_granted_ahead_of_the_queue, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_manager *d = t_open();
	struct wlk_lock *la = NULL, *ld = NULL;
	struct t_holder hb, hc;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	t_holder_start(&hb, b, "r", 1, NULL);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	t_holder_start(&hc, c, "r", 1, &sh);
	cr_assert(t_wait_pending(a, "r", 1, 2));

	T_ASSERT_RC(wlk_acquire(d, "r", 1, &steal, &ld), 0);
	cr_assert(wlk_lock_stolen(la));
	cr_assert_eq(t_held_n(a, "r", 1), 1);
	cr_assert_eq(t_held_by(a, "r", 1, id(d)), 1);
	/* The queue stays behind the stealer, in order. */
	cr_assert_eq(t_pending_n(a, "r", 1), 2);
	cr_assert_not(t_holder_granted_now(&hb));
	T_ASSERT_RC(wlk_release(la), WLK_ESTOLEN);
	cr_assert_eq(t_pending_n(a, "r", 1), 2, "stolen release granted");
	cr_assert_not(t_holder_granted_now(&hb));

	T_ASSERT_RC(wlk_release(ld), 0);
	cr_assert_eq(t_held_by(a, "r", 1, id(b)), 1);
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

Test(steal, steal_of_a_free_lock_is_a_plain_grant, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open();
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, &steal, &l), 0);
	cr_assert_not_null(l);
	cr_assert_not(wlk_lock_stolen(l));
	cr_assert_eq(t_held_n(a, "r", 1), 1);
	T_ASSERT_RC(wlk_release(l), 0);
}

Test(steal, steal_touches_only_its_name, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *lr = NULL, *ls = NULL, *lb = NULL;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &lr), 0);
	T_ASSERT_RC(wlk_acquire(a, "s", 1, NULL, &ls), 0);
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &steal, &lb), 0);
	cr_assert(wlk_lock_stolen(lr));
	cr_assert_not(wlk_lock_stolen(ls));
	cr_assert_eq(t_held_by(a, "s", 1, id(a)), 1);
	T_ASSERT_RC(wlk_release(ls), 0);
	T_ASSERT_RC(wlk_release(lr), WLK_ESTOLEN);
	T_ASSERT_RC(wlk_release(lb), 0);
}

Test(steal, manager_may_steal_from_itself, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open();
	struct wlk_lock *l1 = NULL, *l2 = NULL;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &l1), 0);
	T_ASSERT_RC(wlk_acquire(a, "r", 1, &steal, &l2), 0);
	cr_assert(wlk_lock_stolen(l1));
	cr_assert_eq(t_held_n(a, "r", 1), 1);
	T_ASSERT_RC(wlk_release(l1), WLK_ESTOLEN);
	cr_assert_eq(t_held_n(a, "r", 1), 1);
	T_ASSERT_RC(wlk_release(l2), 0);
}

Test(steal, stealer_token_is_above_the_victims, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *la = NULL, *lb = NULL;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &steal, &lb), 0);
	cr_assert_gt(wlk_lock_token(lb), wlk_lock_token(la));
	T_ASSERT_RC(wlk_release(la), WLK_ESTOLEN);
	T_ASSERT_RC(wlk_release(lb), 0);
}

struct victim {
	struct wlk_manager *m;
	int rc;
	bool stolen_seen;
	bool timed_out;
	struct t_pipe in;
	struct t_pipe go;
};

static int cb_victim(struct wlk_lock *lock, void *arg)
{
	struct victim *v = arg;
	char c;

	t_put_byte(v->in.wr, 'i');
	if (t_get(v->go.rd, &c, 1, T_WAIT_MS) != 0)
		v->timed_out = true;
	v->stolen_seen = wlk_lock_stolen(lock);
	return 7;
}

static void *victim_thread(void *arg)
{
	struct victim *v = arg;

	v->rc = wlk_request(v->m, "r", 1, NULL, cb_victim, v);
	return NULL;
}

Test(steal, request_returns_estolen_when_stolen_during_callback, T_FIX,
     .timeout = 10)
{
	struct victim v = { .m = t_open(), .rc = 1 };
	struct wlk_manager *b = t_open();
	struct wlk_lock *lb = NULL;
	pthread_t th;

	t_pipe_open(&v.in);
	t_pipe_open(&v.go);
	cr_assert_eq(pthread_create(&th, NULL, victim_thread, &v), 0);
	cr_assert_eq(t_get_byte(v.in.rd), 'i');
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &steal, &lb), 0);
	cr_assert_eq(t_held_by(b, "r", 1, id(b)), 1);
	t_put_byte(v.go.wr, 'g');
	pthread_join(th, NULL);
	cr_assert_not(v.timed_out);
	cr_assert(v.stolen_seen, "callback did not see wlk_lock_stolen");
	T_ASSERT_RC(v.rc, WLK_ESTOLEN);
	/* The victim's end did not release the stealer's lock. */
	cr_assert_eq(t_held_by(b, "r", 1, id(b)), 1);
	T_ASSERT_RC(wlk_release(lb), 0);
	t_pipe_close(&v.in);
	t_pipe_close(&v.go);
}

/*
 * The spec's recovery scenario: a holder stops responding while holding
 * the lock; a coordinator steals it and repairs the resource. The resource
 * uses fencing tokens, so the old holder's late write is refused, and the
 * old holder learns it lost the lock.
 */
struct resource {
	uint64_t last_token;
	int value;
};

static bool resource_write(struct resource *r, struct wlk_lock *l, int v)
{
	if (wlk_lock_stolen(l) || wlk_lock_token(l) < r->last_token)
		return false;
	r->last_token = wlk_lock_token(l);
	r->value = v;
	return true;
}

static int cb_recover(struct wlk_lock *lock, void *arg)
{
	struct resource *r = arg;

	return resource_write(r, lock, 2) ? 0 : -1;
}

Test(steal, steal_recovers_from_an_unresponsive_holder, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *tab = t_open(), *sw = t_open(), *other = t_open();
	struct resource res = { 0 };
	struct wlk_lock *hung = NULL;
	struct t_holder waiter;

	T_ASSERT_RC(wlk_acquire(tab, "doc", 3, NULL, &hung), 0);
	cr_assert(resource_write(&res, hung, 1));
	/* Someone else queues behind the hung tab. */
	t_holder_start(&waiter, other, "doc", 3, NULL);
	cr_assert(t_wait_pending(sw, "doc", 3, 1));

	/* Recovery. */
	T_ASSERT_RC(wlk_request(sw, "doc", 3, &steal, cb_recover, &res), 0);
	cr_assert_eq(res.value, 2);
	/* The waiter gets it after the recovery, not before. */
	cr_assert_eq(t_holder_wait_granted(&waiter), 0);
	T_ASSERT_RC(waiter.acq_rc, 0);
	cr_assert_gt(waiter.token, res.last_token);

	/* The hung tab wakes up: its write is refused, release says so. */
	cr_assert_not(resource_write(&res, hung, 3));
	cr_assert_eq(res.value, 2);
	T_ASSERT_RC(wlk_release(hung), WLK_ESTOLEN);
	cr_assert_eq(t_held_by(sw, "doc", 3, id(other)), 1);
	cr_assert_eq(t_holder_release(&waiter), 0);
	t_holder_join(&waiter);
	T_ASSERT_RC(waiter.rel_rc, 0);
}

Test(steal, stolen_holder_thread_sees_estolen_on_release, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *lb = NULL;
	struct t_holder h;

	t_holder_start(&h, a, "r", 1, NULL);
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &steal, &lb), 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
	cr_assert(h.stolen);
	T_ASSERT_RC(h.rel_rc, WLK_ESTOLEN);
	cr_assert_eq(t_held_by(b, "r", 1, id(b)), 1);
	T_ASSERT_RC(wlk_release(lb), 0);
}
