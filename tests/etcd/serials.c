/* SPDX-License-Identifier: MIT */
/*
 * serials.c - a manager puts its released locks' keys again (lib/etcd/
 * acquire.c, SERIALS), so that a busy name does not pile up deleted keys
 * in etcd's index, which every range of the name walks; and the reuse
 * changes nothing a program sees:
 *
 *  - one name taken and released over and over by one manager: one key;
 *  - two requests of one manager on one name at once: two entries;
 *  - the deletion of a reused key, reported by the watch after the key
 *    was put again, is not taken for a steal of the new lock;
 *  - a steal of a reused key is a steal;
 *  - a key whose delete may have applied twice is never put again.
 *
 * The keys are the ones the proxy (proxy.c) sees in the puts it passes
 * on: new_keys counts the puts whose key differs from the put before.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy.h"

/* Pairs that must put no new key. */
#define PAIRS 40
/* Pairs each racing its predecessor's deletion on the watch. */
#define RACE_PAIRS 300

static void pair(struct wlk_manager *m, const char *name)
{
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(m, name, strlen(name), NULL, &l), 0);
	T_ASSERT_RC(wlk_release(l), 0);
}

Test(serials, one_manager_puts_one_key_for_a_name, T_FIX, .timeout = 60)
{
	static struct proxy p;
	struct wlk_manager *m;
	int before;

	proxy_start(&p);
	m = proxy_open(&p, false);
	pair(m, "s");
	before = atomic_load(&p.new_keys);
	for (int i = 0; i < PAIRS; i++)
		pair(m, "s");
	cr_assert_eq(atomic_load(&p.new_keys), before,
		     "%d pairs put %d new keys", PAIRS,
		     atomic_load(&p.new_keys) - before);
	wlk_manager_close(m);
	proxy_stop(&p);
}

Test(serials, two_requests_of_a_manager_on_a_name_are_two_entries, T_FIX,
     .timeout = 60)
{
	struct wlk_options sh = { .size = sizeof(sh), .mode = WLK_SHARED };
	struct wlk_manager *m = t_open();
	struct wlk_lock *a = NULL, *b = NULL;

	pair(m, "s");
	T_ASSERT_RC(wlk_acquire(m, "s", 1, &sh, &a), 0);
	T_ASSERT_RC(wlk_acquire(m, "s", 1, &sh, &b), 0);
	cr_assert(t_wait_held(m, "s", 1, 2), "one entry for both");
	T_ASSERT_RC(wlk_release(a), 0);
	cr_assert_not(wlk_lock_stolen(b), "the first release took both");
	T_ASSERT_RC(wlk_release(b), 0);
}

Test(serials, a_late_deletion_of_a_reused_key_is_no_steal, T_FIX,
     .timeout = 120)
{
	struct wlk_manager *m = t_open();

	/* Each release's deletion reaches the watch about when the next
	 * request puts the same key again. */
	for (int i = 0; i < RACE_PAIRS; i++) {
		struct wlk_lock *l = NULL;

		T_ASSERT_RC(wlk_acquire(m, "s", 1, NULL, &l), 0);
		cr_assert_not(wlk_lock_stolen(l), "pair %d: stolen", i);
		T_ASSERT_RC(wlk_release(l), 0);
	}
}

Test(serials, a_steal_of_a_reused_key_is_a_steal, T_FIX, .timeout = 60)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	int waited = 0;

	pair(m, "s");
	pair(m, "s");
	T_ASSERT_RC(wlk_acquire(m, "s", 1, NULL, &l), 0);
	cr_assert_eq(t_wait(t_fork(t_stealer, (char[]){ "s" }), 30000), 0,
		     "the stealer");
	while (!wlk_lock_stolen(l) && waited++ < T_WAIT_MS)
		t_nap_ms(1);
	cr_assert(wlk_lock_stolen(l), "the steal was not seen");
	T_ASSERT_RC(wlk_release(l), WLK_ESTOLEN);
}

Test(serials, a_key_whose_delete_was_resent_is_not_put_again, T_FIX,
     .timeout = 60)
{
	static struct proxy p;
	struct wlk_manager *m;
	struct wlk_lock *l = NULL;
	int before;

	proxy_start(&p);
	m = proxy_open(&p, false);
	pair(m, "s");
	T_ASSERT_RC(wlk_acquire(m, "s", 1, NULL, &l), 0);
	before = atomic_load(&p.new_keys);
	/* Its delete applies, its reply is lost, the next member finds
	 * nothing: the first might still apply late. */
	atomic_store(&p.drop_armed, 1);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(atomic_load(&p.dropped), 1, "no reply was dropped");
	pair(m, "s");
	cr_assert_eq(atomic_load(&p.new_keys), before + 1,
		     "the key of the resent delete was put again");
	/* The new key is reused as any other. */
	pair(m, "s");
	cr_assert_eq(atomic_load(&p.new_keys), before + 1);
	wlk_manager_close(m);
	proxy_stop(&p);
}
