/* SPDX-License-Identifier: MIT */
/*
 * dispatch.c - a manager's async context (created on first use),
 * wlk_manager_dispatch(), the stolen-lock watch, and what closing a manager
 * does to its asynchronous requests.
 *
 * Dispatch never trusts the reason it was woken: it has the engine drain
 * the descriptor, then settle each outstanding request from its state, its
 * signal, its deadline and its cancel flag. Callbacks run last, with no
 * lock held.
 */
#include <stdlib.h>

#include "async_internal.h"

static void async_close(struct wlk_manager *m);
static void async_unwatch(struct wlk_lock *l);

/*
 * What manager.c and request.c call of the async path, through m->async:
 * they sit below it and never call it by name.
 */
static const struct wlk__async_hooks hooks = {
	.close = async_close,
	.unwatch = async_unwatch,
};

/*
 * wlk__async_get() - the engine's async context of @m, created on first
 * use; under m->amu. The hooks are set with it, under amu too: whoever
 * finds a context, or a lock watched through one, finds them.
 */
int wlk__async_get(struct wlk_manager *m)
{
	int rc;

	if (m->async_on)
		return 0;
	rc = m->e->async_open(m);
	if (rc)
		return rc;
	uatomic_set(&m->async, &hooks);
	m->async_on = true;
	return 0;
}

/*
 * wlk__async_give_up() - under amu: settle pending request @r for @why
 * now (wlk_async_cancel()): it leaves its queue before the call returns,
 * as the spec's abort does, and its callback runs at the next dispatch.
 */
void wlk__async_give_up(struct wlk_manager *m, struct wlk_async *r, int why)
{
	if (r->settled)
		return;
	m->e->async_settle(m, r, why);
	if (r->settled)
		wlk__async_settled(r);
}

/* Under amu: move what completed onto @done (looking at every request
 * unless @ordered says only grants came: engine.h, ASYNC ORDER; and at
 * every request all the same if none completed in order), and the
 * watched locks stolen onto @stolen. */
static void collect(struct wlk_manager *m, bool ordered,
		    struct cds_list_head *done, struct cds_list_head *stolen)
{
	struct wlk_lock *l, *lt;

	if (!ordered || !wlk__async_collect_ordered(m, done))
		wlk__async_collect_all(m, done);
	else
		wlk__async_sort(done); /* callbacks run in request order */
	cds_list_for_each_entry_safe(l, lt, &m->watching, watch) {
		if (m->e->stolen(l)) {
			cds_list_del(&l->watch);
			l->watched = false;
			cds_list_add_tail(&l->watch, stolen);
		}
	}
}

/* Run callbacks; a granted request's manager reference goes to its lock. */
static int run(struct wlk_manager *m, struct cds_list_head *done,
	       struct cds_list_head *stolen)
{
	struct wlk_async *r, *rt;
	struct wlk_lock *l, *lt;
	int count = 0;

	cds_list_for_each_entry_safe(r, rt, done, link) {
		struct wlk_lock *lock = r->status ? NULL : r->l;

		r->cb(r, r->status, lock, r->arg);
		if (!lock)
			wlk__manager_leave(m);
		free(r);
		count++;
	}
	cds_list_for_each_entry_safe(l, lt, stolen, watch) {
		cds_list_del(&l->watch);
		l->on_stolen(l, l->stolen_arg);
		count++;
	}
	return count;
}

WLK_EXPORT int wlk_manager_dispatch(struct wlk_manager *m)
{
	CDS_LIST_HEAD(done);
	CDS_LIST_HEAD(stolen);
	int count;

	if (!m)
		return WLK_EINVAL;
	if (!wlk__manager_enter(m))
		return WLK_ESTATE;
	pthread_mutex_lock(&m->amu);
	if (m->async_on) {
		bool ordered = m->e->async_drain(m) && !m->async_all;

		m->async_all = false;
		collect(m, ordered, &done, &stolen);
		m->e->async_arm(m);
	}
	pthread_mutex_unlock(&m->amu);
	count = run(m, &done, &stolen);
	wlk__manager_leave(m);
	return count;
}

WLK_EXPORT int wlk_lock_on_stolen(struct wlk_lock *l, wlk_stolen_cb cb,
				  void *arg)
{
	struct wlk_manager *m;
	int rc;

	if (!l)
		return WLK_EINVAL;
	m = l->m;
	if (!wlk__manager_enter(m))
		return WLK_ESTATE;
	pthread_mutex_lock(&m->amu);
	rc = wlk__async_get(m);
	if (!rc) {
		if (l->watched)
			cds_list_del(&l->watch);
		l->watched = cb != NULL;
		l->on_stolen = cb;
		l->stolen_arg = arg;
		if (cb)
			cds_list_add_tail(&l->watch, &m->watching);
		/* Stolen already? Then the next dispatch tells. */
		m->e->async_ring(m);
	}
	pthread_mutex_unlock(&m->amu);
	wlk__manager_leave(m);
	return rc;
}

/* wlk_release(): a released lock is watched no more. */
static void async_unwatch(struct wlk_lock *l)
{
	struct wlk_manager *m = l->m;

	pthread_mutex_lock(&m->amu);
	if (l->watched) {
		cds_list_del(&l->watch);
		l->watched = false;
	}
	pthread_mutex_unlock(&m->amu);
}

/*
 * wlk_manager_close(), after the client's requests were dropped: every
 * outstanding callback runs now with WLK_ESTATE, on the closing thread, and
 * the descriptor goes away.
 */
static void async_close(struct wlk_manager *m)
{
	CDS_LIST_HEAD(done);
	CDS_LIST_HEAD(none);
	struct wlk_async *r, *rt;
	struct wlk_lock *l, *lt;

	pthread_mutex_lock(&m->amu);
	cds_list_for_each_entry_safe(r, rt, &m->pending, link) {
		wlk__async_leave(r);
		if (!r->settled || !r->status) {
			r->status = WLK_ESTATE;
			r->settled = true;
			wlk__async_settled(r);
		}
		cds_list_add_tail(&r->link, &done);
	}
	cds_list_for_each_entry_safe(l, lt, &m->watching, watch) {
		cds_list_del(&l->watch);
		l->watched = false;
	}
	if (m->async_on)
		m->e->async_close(m);
	m->async_on = false;
	pthread_mutex_unlock(&m->amu);
	run(m, &done, &none);
}
