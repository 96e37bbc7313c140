/* SPDX-License-Identifier: MIT */
/*
 * async_dispatch.c - a manager's async context: created on first use,
 * wlk_manager_dispatch(), the stolen-lock watch, and what closing a manager
 * does to its asynchronous requests.
 *
 * Dispatch never trusts the reason it was woken: it drains the descriptor,
 * then settles each outstanding request from its state in the segment, its
 * signal, its deadline and its cancel flag, by the decision a blocking
 * waiter makes after a wake-up (wlk__after_wait(), wait.c). Callbacks run
 * last, with no lock held.
 */
#include <errno.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "async_internal.h"

static void actx_free(struct wlk__actx *a)
{
	wlk__watcher_del(a);
	for (unsigned int i = 0; i < a->n_pid; i++)
		close(a->pid[i].fd);
	if (a->epfd >= 0)
		close(a->epfd);
	wlk__bell_close(&a->bell);
	if (a->tfd >= 0)
		close(a->tfd);
	free(a);
}

/* Publish the doorbell in our client slot, so granters ring it. */
static int bell_publish(struct wlk_manager *m, const struct wlk__bell *bl)
{
	struct wlk__wake wake;
	int rc = wlk__lock(m->b, &wake);

	if (rc)
		return rc;
	if (wlk__client_live(m->b, m->client, m->client_gen)) {
		struct wlk_seg_client *c = wlk__client(m->b, m->client);

		c->bell_key = bl->key;
		c->bell_fd = (uint32_t)bl->efd;
		c->bell_dgrams = 0;
		c->doorbell = bl->id;
	} else
		rc = WLK_ESTATE;
	wlk__unlock(m->b, &wake);
	return rc;
}

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
 * The async state of @m, created on first use; under m->amu. The hooks are
 * in place before the context is: whoever sees a context or a watched lock
 * finds them.
 */
int wlk__actx_get(struct wlk_manager *m, struct wlk__actx **out)
{
	struct wlk__actx *a = m->actx;
	int rc;

	if (a) {
		*out = a;
		return 0;
	}
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	CDS_INIT_LIST_HEAD(&a->pending);
	CDS_INIT_LIST_HEAD(&a->watching);
	a->bell.efd = a->bell.sock = -1;
	a->epfd = epoll_create1(EPOLL_CLOEXEC);
	a->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	rc = a->epfd < 0 || a->tfd < 0 ? wlk__errno(errno) : 0;
	if (!rc)
		rc = wlk__bell_open(&a->bell);
	if (!rc)
		rc = wlk__epoll_add(a->epfd, a->bell.sock, EPOLLIN);
	if (!rc)
		rc = wlk__epoll_add(a->epfd, a->tfd, EPOLLIN);
	if (!rc)
		rc = wlk__watcher_add(a);
	if (!rc)
		rc = bell_publish(m, &a->bell);
	if (rc) {
		actx_free(a);
		return rc;
	}
	uatomic_set(&m->async, &hooks);
	m->actx = *out = a;
	return 0;
}

/* Arm the timer for the earliest deadline of a pending request. */
void wlk__timer_arm(struct wlk__actx *a)
{
	struct itimerspec its = {{0, 0}, {0, 0}};
	struct wlk_async *r;
	uint64_t next = 0;

	cds_list_for_each_entry(r, &a->pending, link)
		if (r->deadline && (!next || r->deadline < next))
			next = r->deadline;
	if (a->recheck && (!next || a->recheck < next))
		next = a->recheck;
	if (next) {
		its.it_value.tv_sec = (time_t)(next / WLK_NSEC_PER_SEC);
		its.it_value.tv_nsec = (long)(next % WLK_NSEC_PER_SEC);
	}
	/* Disarming an unarmed timer is a system call for nothing. */
	if (next || a->timer_armed)
		timerfd_settime(a->tfd, TFD_TIMER_ABSTIME, &its, NULL);
	a->timer_armed = next != 0;
}

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
		wlk__lock_free(r->l);
		r->l = NULL;
	}
	r->status = status;
	r->settled = true;
}

/* Settle @r if it completed; the segment mutex is taken as needed. */
static void settle(struct wlk_manager *m, struct wlk_async *r, uint64_t now)
{
	struct wlk__bucket *b = m->b;
	bool pending;
	int why, rc;

	if (r->settled)
		return;
	pending = wlk__word_load(&wlk__req(b, r->l->slot)->word) ==
		  WLK_WORD(r->l->gen, WLK_SLOT_PENDING);
	why = why_stop(r, now);
	if (pending && !why)
		return;
	rc = wlk__after_wait(m, r->l->slot, r->l->gen, pending, why, false);
	if (!rc)
		r->l->token = wlk__req(b, r->l->slot)->token;
	settle_as(r, rc);
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
		actx_free(a);
}
