/* SPDX-License-Identifier: MIT */
/*
 * resume.c - a bucket's watch stream that breaks and starts again
 * (lib/etcd/watch.c) misses no deletion made meanwhile, even one made
 * while the new stream was being set up, and even when the old stream had
 * delivered nothing yet.
 *
 * The manager under test reaches the cluster only through a proxy in the
 * test (proxy_start_alone()), which cuts its watch stream, then holds the
 * new stream's request back. Meanwhile, the engine has done whatever it
 * does before the new stream is in place; the lock's key is deleted then
 * (from another process, as a steal or a lease's end would), and the new
 * stream let go. The holder must see its lock stolen: the new stream
 * resumes from where the old one was created, or the locks are read again
 * once it is created. A stream that started at the present instead, with
 * the locks read before it was created, would never tell.
 */
#include <stdio.h>
#include <string.h>

#include "proxy.h"

/* Poll (bounded, T_WAIT_MS) until @flag is set: whether it is. */
static bool wait_flag(atomic_int *flag)
{
	for (int i = 0; i < T_WAIT_MS && !atomic_load(flag); i++)
		t_nap_ms(1);
	return atomic_load(flag);
}

Test(resume, a_deletion_while_the_watch_starts_again_is_seen, T_FIX,
     .timeout = 60)
{
	static struct proxy p;
	struct wlk_manager *m;
	struct wlk_lock *l = NULL;
	char key[512], end[512];

	proxy_start_alone(&p);
	m = proxy_open(&p, false);
	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);

	atomic_store(&p.hold_watch_armed, 1);
	atomic_store(&p.cut_watch, 1);
	cr_assert(wait_flag(&p.holding_watch), "the watch did not start again");

	/* Every key of "r", deleted by another process. */
	t_etcd_name_prefix(key, sizeof(key), "r");
	snprintf(end, sizeof(end), "%s", key);
	end[strlen(end) - 1]++; /* the prefix's range end: '/' + 1 */
	t_etcd_post("/v3/kv/deleterange", key, "range_end", end);
	atomic_store(&p.let_go, 1);

	cr_assert(t_stolen_within(&l, 1, T_WAIT_MS),
		  "the holder was not told its key was deleted");
	T_ASSERT_RC(wlk_release(l), WLK_ESTOLEN);
	wlk_manager_close(m);
	proxy_stop(&p);
}
