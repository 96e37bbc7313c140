/* SPDX-License-Identifier: MIT */
/*
 * async_dispatch.c - wlk_manager_dispatch(), the stolen-lock watch, and
 * what closing a manager does to its asynchronous requests.
 *
 * Dispatch never trusts the reason it was woken: it drains the descriptor,
 * then settles each outstanding request from its state in the segment, its
 * signal, its deadline and its cancel flag, exactly as a blocking waiter
 * does after a wake-up (request.c). Callbacks run last, with no lock held.
 */
#include <errno.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "async_internal.h"

/*
 * Whether a watched blocker may have exited, so that its pidfd may be
 * readable: its agent slot changed, or its lifeline's owner died (the
 * kernel marks the lock word before the pidfd becomes readable).
 */
static bool pid_maybe_fired(struct wlk_manager *m, struct wlk__actx *a)
{
	for (unsigned int i = 0; i < a->n_pid; i++) {
		uint32_t ai = a->pid[i].agent, w;

		if (ai >= m->b->geo.max_agents ||
		    wlk__word_load(&wlk__agent(m->b, ai)->word) !=
			    WLK_WORD(a->pid[i].gen, WLK_SLOT_USED))
			return true;
		w = uatomic_read(wlk__lifeline_word(m->b, ai));
		if ((w & FUTEX_OWNER_DIED) || !(w & FUTEX_TID_MASK))
			return true;
	}
	return false;
}

/* Empty every source of the descriptor; forget pidfds that fired. */
static void drain(struct wlk_manager *m, struct wlk__actx *a)
{
	struct epoll_event ev[EVENTS_BATCH];
	uint64_t ticks;
	int n;

	wlk__bell_drain(&a->bell,
			m->client < m->b->geo.max_clients
				? &wlk__client(m->b, m->client)->bell_dgrams
				: NULL);
	/* The inner sources only when the watcher saw one (the common
	 * grant takes no more system calls), or a watched blocker may have
	 * exited before the watcher got to it. */
	if (!uatomic_xchg(&a->inner_fired, 0) &&
	    !(a->n_pid && pid_maybe_fired(m, a)))
		return;
	if (a->timer_armed)
		(void)!read(a->tfd, &ticks, sizeof(ticks));
	while ((n = epoll_wait(a->epfd, ev, EVENTS_BATCH, 0)) > 0) {
		for (int i = 0; i < n; i++)
			wlk__pidwatch_fired(a, ev[i].data.fd);
		if (n < EVENTS_BATCH)
			break;
	}
	wlk__watcher_rearm(a);
}

/* Why a pending request should stop waiting, or 0. */
static int why_stop(const struct wlk_async *r, uint64_t now)
{
	if (r->cancel)
		return WLK_EABORTED;
	if (r->sig && uatomic_read(&r->sig->reason))
		return uatomic_read(&r->sig->reason);
	if (r->deadline && now >= r->deadline)
		return WLK_ETIMEDOUT;
	return 0;
}

static void settle_as(struct wlk_async *r, int status)
{
	if (status) {
		free(r->l);
		r->l = NULL;
	}
	r->status = status;
	r->settled = true;
}

/* Settle @r if it completed; the segment mutex is taken as needed. */
static void settle(struct wlk_manager *m, struct wlk_async *r, uint64_t now)
{
	struct wlk__bucket *b = m->b;
	uint32_t w, gen;
	int why, rc;

	if (r->settled)
		return;
	gen = r->l->gen;
	w = wlk__word_load(&wlk__req(b, r->l->slot)->word);
	why = why_stop(r, now);
	if (w == WLK_WORD(gen, WLK_SLOT_PENDING)) {
		if (!why)
			return;
		rc = wlk__give_up(b, r->l->slot, gen, false);
		if (rc <= 0) {
			settle_as(r, rc ? rc : why);
			return;
		}
		/* Granted meanwhile: a timeout came too late. */
		if (why == WLK_ETIMEDOUT)
			why = 0;
		w = WLK_WORD(gen, WLK_SLOT_HELD);
	}
	/* Held or stolen is a grant (a stolen one's release says so). */
	if (WLK_WORD_GEN(w) != gen || WLK_WORD_STATE(w) < WLK_SLOT_HELD) {
		settle_as(r, wlk__dropped(m));
		return;
	}
	/* Granted in time, noticed late: the deadline does not apply. */
	if (why == WLK_ETIMEDOUT)
		why = 0;
	/* Spec 4.4 step 14.1: aborted before the callback runs. */
	if (why) {
		wlk__release_slot(b, r->l->slot, gen, false);
		settle_as(r, why);
		return;
	}
	r->l->token = wlk__req(b, r->l->slot)->token;
	settle_as(r, 0);
}

/* Under amu: move what completed onto @done and @stolen. */
static void collect(struct wlk_manager *m, struct wlk__actx *a,
		    struct cds_list_head *done, struct cds_list_head *stolen)
{
	struct wlk_async *r, *rt;
	struct wlk_lock *l, *lt;
	uint64_t now = wlk__now_ns();

	cds_list_for_each_entry_safe(r, rt, &a->pending, link) {
		settle(m, r, now);
		if (r->settled) {
			cds_list_del(&r->link);
			cds_list_add_tail(&r->link, done);
		}
	}
	cds_list_for_each_entry_safe(l, lt, &a->watching, watch) {
		if (wlk__word_load(&wlk__req(m->b, l->slot)->word) ==
		    WLK_WORD(l->gen, WLK_SLOT_STOLEN)) {
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
	struct wlk__actx *a;
	int count;

	if (!m)
		return WLK_EINVAL;
	if (!wlk__manager_enter(m))
		return WLK_ESTATE;
	pthread_mutex_lock(&m->amu);
	a = m->actx;
	if (a) {
		drain(m, a);
		collect(m, a, &done, &stolen);
		wlk__pidwatch_update(m, a);
		wlk__timer_arm(a);
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
	struct wlk__actx *a;
	int rc;

	if (!l)
		return WLK_EINVAL;
	m = l->m;
	if (!wlk__manager_enter(m))
		return WLK_ESTATE;
	pthread_mutex_lock(&m->amu);
	rc = wlk__actx_get(m, &a);
	if (!rc) {
		if (l->watched)
			cds_list_del(&l->watch);
		l->watched = cb != NULL;
		l->on_stolen = cb;
		l->stolen_arg = arg;
		if (cb)
			cds_list_add_tail(&l->watch, &a->watching);
		/* Stolen already? Then the next dispatch tells. */
		wlk__bell_ring_self(&a->bell);
	}
	pthread_mutex_unlock(&m->amu);
	wlk__manager_leave(m);
	return rc;
}

/* wlk_release(): a released lock is watched no more. */
void wlk__async_unwatch(struct wlk_lock *l)
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
 * wlk__async_close() - wlk_manager_close(), after the client's requests
 * were dropped: every outstanding callback runs now with WLK_ESTATE, on the
 * closing thread, and the descriptor goes away.
 */
void wlk__async_close(struct wlk_manager *m)
{
	CDS_LIST_HEAD(done);
	CDS_LIST_HEAD(none);
	struct wlk_async *r, *rt;
	struct wlk_lock *l, *lt;
	struct wlk__actx *a;

	pthread_mutex_lock(&m->amu);
	a = m->actx;
	m->actx = NULL;
	if (a) {
		cds_list_for_each_entry_safe(r, rt, &a->pending, link) {
			cds_list_del(&r->link);
			if (!r->settled || !r->status)
				settle_as(r, WLK_ESTATE);
			cds_list_add_tail(&r->link, &done);
		}
		cds_list_for_each_entry_safe(l, lt, &a->watching, watch) {
			cds_list_del(&l->watch);
			l->watched = false;
		}
	}
	pthread_mutex_unlock(&m->amu);
	run(m, &done, &none);
	if (a)
		wlk__actx_free(a);
}
