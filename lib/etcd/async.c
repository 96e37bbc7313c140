/* SPDX-License-Identifier: MIT */
/*
 * async.c - the async path on etcd (weblocks/async.h): a manager's
 * descriptor is an epoll set of an eventfd that the agent thread rings
 * whenever a deletion in the bucket may have granted a request or a lock
 * was lost, a timer for the earliest deadline, and the abort signals'
 * eventfds (edge-triggered: readable once, when aborted).
 *
 * A request's entry is put at once (acquire.c, without waiting); whether
 * it is granted is read again, one range of its name, when a dispatch
 * settles it after a ring. A grant found at once completes through the
 * next dispatch, as on shared memory.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "etcd.h"

/* Events consumed per epoll_wait() while draining. */
#define ETCD_EVENTS_BATCH 16

struct wlk__etcd_actx {
	int epfd; /* the descriptor */
	int tfd;  /* the earliest deadline */
	bool timer_armed;
	/* The bucket as a dispatch found it: read once in drain, for every
	 * request settled, dropped in arm. */
	struct wlk__etcd_kvs seen;
	bool seen_ok;
};

static int add(int epfd, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };

	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) && errno != EEXIST)
		return wlk__errno(errno);
	return 0;
}

int wlk__etcd_async_open(struct wlk_manager *pub)
{
	struct wlk__etcd_manager *m = wlk__etcd_m(pub);
	struct wlk__etcd_actx *a = calloc(1, sizeof(*a));
	int efd = -1, rc;

	if (!a)
		return -ENOMEM;
	a->epfd = epoll_create1(EPOLL_CLOEXEC);
	a->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	/* The eventfd lives as long as the manager: the agent may ring it
	 * until it is stopped (etcd_free()). */
	if (m->efd < 0)
		m->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	efd = m->efd;
	rc = a->epfd < 0 || a->tfd < 0 || efd < 0 ? wlk__errno(errno) : 0;
	if (!rc)
		rc = add(a->epfd, efd, EPOLLIN);
	if (!rc)
		rc = add(a->epfd, a->tfd, EPOLLIN);
	if (rc) {
		if (a->epfd >= 0)
			close(a->epfd);
		if (a->tfd >= 0)
			close(a->tfd);
		free(a);
		return rc;
	}
	m->actx = a;
	uatomic_set(&m->ring_fd, efd);
	return 0;
}

int wlk__etcd_async_fd(struct wlk_manager *pub)
{
	return wlk__etcd_m(pub)->actx->epfd;
}

int wlk__etcd_async_watch_fd(struct wlk_manager *pub, int fd)
{
	return add(wlk__etcd_m(pub)->actx->epfd, fd, EPOLLIN | EPOLLET);
}

void wlk__etcd_async_ring(struct wlk_manager *pub)
{
	wlk__etcd_ring(wlk__etcd_m(pub));
}

static void timer_arm(struct wlk__etcd_manager *m)
{
	struct wlk__etcd_actx *a = m->actx;
	struct itimerspec its = { { 0, 0 }, { 0, 0 } };
	struct wlk_async *r;
	uint64_t next = 0;

	cds_list_for_each_entry(r, &m->base.pending, link)
		if (!r->settled && r->deadline &&
		    (!next || r->deadline < next))
			next = r->deadline;
	if (next) {
		its.it_value.tv_sec = (time_t)(next / 1000000000u);
		its.it_value.tv_nsec = (long)(next % 1000000000u);
	}
	if (next || a->timer_armed)
		timerfd_settime(a->tfd, TFD_TIMER_ABSTIME, &its, NULL);
	a->timer_armed = next != 0;
}

void wlk__etcd_async_arm(struct wlk_manager *pub)
{
	struct wlk__etcd_manager *m = wlk__etcd_m(pub);

	if (m->actx->seen_ok)
		wlk__etcd_kvs_free(&m->actx->seen);
	m->actx->seen_ok = false;
	timer_arm(m);
}

/* Return: false, every request is looked at: this engine learns its news
 * from one read of the bucket, which tells them all. */
bool wlk__etcd_async_drain(struct wlk_manager *pub)
{
	struct wlk__etcd_manager *m = wlk__etcd_m(pub);
	struct wlk__etcd_actx *a = m->actx;
	struct epoll_event ev[ETCD_EVENTS_BATCH];
	uint64_t v;

	(void)!read(m->efd, &v, sizeof(v));
	if (a->timer_armed)
		(void)!read(a->tfd, &v, sizeof(v));
	/* The signals' edges, so that the set is not readable for them
	 * again until the next one. */
	while (epoll_wait(a->epfd, ev, ETCD_EVENTS_BATCH, 0) ==
	       ETCD_EVENTS_BATCH)
		;
	/* One read for all the requests this dispatch settles (not for a
	 * dispatch without any). */
	if (a->seen_ok)
		wlk__etcd_kvs_free(&a->seen);
	a->seen_ok = !cds_list_empty(&m->base.pending) &&
		     !wlk__etcd_range(m, m->prefix, m->prefix_len, &a->seen);
	if (a->seen_ok)
		wlk__etcd_classify(&a->seen);
	return false;
}

int wlk__etcd_async_request(struct wlk_manager *pub, struct wlk_async *r,
			    const struct wlk_options *o)
{
	struct wlk__etcd_manager *m = wlk__etcd_m(pub);
	struct wlk__etcd_lock *l = wlk__etcd_l(r->l);
	bool held = false, queued = false;
	int rc;

	l->key = NULL;
	l->mem = NULL;
	l->granted = false;
	rc = wlk__etcd_submit(m, r->l, o, false, &held, &queued);
	if (rc)
		return rc;
	if (!held && !queued) { /* an if_available miss */
		r->status = 0;
		r->settled = true;
	}
	l->granted = held;
	if (held || r->settled)
		wlk__etcd_ring(m);
	else if (r->deadline)
		timer_arm(m);
	return 0;
}

/*
 * Settle @r: granted, it is (unless @why is its cancel or signal, which
 * release it, as the spec's abort after the grant does; a deadline after
 * the grant is ignored); queued, it is given up for @why, or read again.
 */
void wlk__etcd_async_settle(struct wlk_manager *pub, struct wlk_async *r,
			    int why)
{
	struct wlk__etcd_manager *m = wlk__etcd_m(pub);
	struct wlk__etcd_lock *l = wlk__etcd_l(r->l);
	bool held = l->granted;
	int rc = 0;

	/* Not known granted: read it (a deadline that passed after the
	 * grant is ignored, so a timeout reads too). */
	if (!held && (!why || why == WLK_ETIMEDOUT)) {
		if (m->actx->seen_ok)
			rc = wlk__etcd_grant_of(m, l, &m->actx->seen, &held);
		else
			rc = wlk__etcd_check(m, r->l, &held);
		if (!rc && !held && !why)
			return; /* still waiting */
	}
	if (held && why == WLK_ETIMEDOUT)
		why = 0;
	if (!rc && why)
		rc = why;
	if (rc)
		wlk__etcd_drop(m, r->l);
	r->status = rc;
	r->settled = true;
}

void wlk__etcd_async_close(struct wlk_manager *pub)
{
	struct wlk__etcd_manager *m = wlk__etcd_m(pub);
	struct wlk__etcd_actx *a = m->actx;

	uatomic_set(&m->ring_fd, -1);
	if (a->seen_ok)
		wlk__etcd_kvs_free(&a->seen);
	close(a->epfd);
	close(a->tfd);
	free(a);
	m->actx = NULL;
}
