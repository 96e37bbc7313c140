/* SPDX-License-Identifier: MIT */
/*
 * async.c - the shared-memory engine's async context (shm.h, struct
 * wlk__actx): created on first use, the requests it queues, how it learns
 * that they may have completed, and how it settles them.
 *
 * A granter rings the manager's doorbell, published in its client slot;
 * what else can complete a request (a deadline, a signal, a blocker's
 * death) sits in the inner epoll instance, which the watcher thread turns
 * into a ring (watcher.c, async_pid.c). Settling never trusts the reason
 * for the wake-up: it reads the request's word in the segment and decides
 * as a blocking waiter does after a wake-up (wlk__after_wait(), wait.c).
 * All under m->pub.amu, which is taken before the segment mutex, never
 * after.
 */
#include <errno.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "shm.h"

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
static int bell_publish(struct wlk__shm_manager *m, const struct wlk__bell *bl)
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

int wlk__shm_async_open(struct wlk_manager *pub)
{
	struct wlk__shm_manager *m = wlk__shm_m(pub);
	struct wlk__actx *a = calloc(1, sizeof(*a));
	int rc;

	if (!a)
		return -ENOMEM;
	a->bell.efd = a->bell.sock = -1;
	a->epoch = uatomic_read(&m->b->hdr->recovery_epoch);
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
	m->actx = a;
	return 0;
}

int wlk__shm_async_fd(struct wlk_manager *pub)
{
	return wlk__shm_m(pub)->actx->bell.efd;
}

int wlk__shm_async_watch_fd(struct wlk_manager *pub, int fd)
{
	return wlk__epoll_add(wlk__shm_m(pub)->actx->epfd, fd,
			      EPOLLIN | EPOLLET);
}

void wlk__shm_async_ring(struct wlk_manager *pub)
{
	wlk__bell_ring_self(&wlk__shm_m(pub)->actx->bell);
}

/* Arm the timer for the earliest deadline of a pending request. */
static void timer_arm(struct wlk__shm_manager *m, struct wlk__actx *a)
{
	struct itimerspec its = {{0, 0}, {0, 0}};
	struct wlk_async *r;
	uint64_t next = 0;

	cds_list_for_each_entry(r, &m->pub.timed, tlink)
		if (!next || r->deadline < next)
			next = r->deadline;
	if (a->recheck && (!next || a->recheck < next))
		next = a->recheck;
	if (next) {
		its.it_value.tv_sec = (time_t)(next / WLK_NSEC_PER_SEC);
		its.it_value.tv_nsec = (long)(next % WLK_NSEC_PER_SEC);
	}
	/* Disarming an unarmed timer, or arming it again for the same
	 * time, is a system call for nothing. */
	if (next == a->timer_at)
		return;
	timerfd_settime(a->tfd, TFD_TIMER_ABSTIME, &its, NULL);
	a->timer_at = next;
}

void wlk__shm_async_arm(struct wlk_manager *pub)
{
	struct wlk__shm_manager *m = wlk__shm_m(pub);

	wlk__pidwatch_update(m, m->actx);
	timer_arm(m, m->actx);
}

/*
 * Whether a watched blocker may have exited, so that its pidfd may be
 * readable: its agent slot changed, or its lifeline's owner died (the
 * kernel marks the lock word before the pidfd becomes readable).
 */
static bool pid_maybe_fired(struct wlk__shm_manager *m, struct wlk__actx *a)
{
	for (unsigned int i = 0; i < a->n_pid; i++) {
		uint32_t ai = a->pid[i].agent, w;

		const struct wlk_seg_agent *ag = wlk__agent_at(m->b, ai);

		if (!ag || wlk__word_load(&ag->word) !=
			    WLK_WORD(a->pid[i].gen, WLK_SLOT_USED))
			return true;
		w = uatomic_read(wlk__lifeline_word(m->b, ai));
		if ((w & FUTEX_OWNER_DIED) || !(w & FUTEX_TID_MASK))
			return true;
	}
	return false;
}

/*
 * Empty every source of the descriptor; forget pidfds that fired. Return:
 * true if only grants can have come (engine.h, ASYNC ORDER): no inner
 * source fired (a deadline, a signal, a blocker's death) and no repair
 * ran (it may have dropped any request).
 */
bool wlk__shm_async_drain(struct wlk_manager *pub)
{
	struct wlk__shm_manager *m = wlk__shm_m(pub);
	struct wlk__actx *a = m->actx;
	struct wlk_seg_client *c = wlk__client_at(m->b, m->client);
	struct epoll_event ev[EVENTS_BATCH];
	uint64_t ticks, epoch = uatomic_read(&m->b->hdr->recovery_epoch);
	bool repaired = epoch != a->epoch;
	int n;

	a->epoch = epoch;
	wlk__bell_drain(&a->bell, c ? &c->bell_dgrams : NULL);
	/* The inner sources only when the watcher saw one (the common
	 * grant takes no more system calls), or a watched blocker may have
	 * exited before the watcher got to it. */
	if (!uatomic_xchg(&a->inner_fired, 0) &&
	    !(a->n_pid && pid_maybe_fired(m, a)))
		return !repaired;
	if (a->timer_at && read(a->tfd, &ticks, sizeof(ticks)) > 0)
		a->timer_at = 0; /* it fired: armed no more */
	while ((n = epoll_wait(a->epfd, ev, EVENTS_BATCH, 0)) > 0) {
		for (int i = 0; i < n; i++)
			wlk__pidwatch_fired(a, ev[i].data.fd);
		if (n < EVENTS_BATCH)
			break;
	}
	wlk__watcher_rearm(a);
	return false;
}

/* Settle @r if it completed; the segment mutex is taken as needed. */
void wlk__shm_async_settle(struct wlk_manager *pub, struct wlk_async *r,
			   int why)
{
	struct wlk__shm_manager *m = wlk__shm_m(pub);
	struct wlk__shm_lock *l = wlk__shm_l(r->l);
	struct wlk__bucket *b = m->b;
	bool pending = wlk__word_load(&wlk__req(b, l->slot)->word) ==
		       WLK_WORD(l->gen, WLK_SLOT_PENDING);
	int rc;

	if (pending && !why)
		return;
	rc = wlk__after_wait(m, l->slot, l->gen, pending, why, false);
	if (!rc)
		l->pub.token = wlk__req(b, l->slot)->token;
	if (!rc && l->pub.scope)
		wlk__shm_scope_tokens(b, l);
	r->status = rc;
	r->settled = true;
}

/* @r completed without being queued, with @status: through dispatch all
 * the same. */
static int settled_at_once(struct wlk__shm_manager *m, struct wlk_async *r,
			   int status)
{
	r->status = status;
	r->settled = true;
	wlk__bell_ring_self(&m->actx->bell);
	return 0;
}

/*
 * Queue @r (already on m->pub.pending) under the mutex. Settled at once
 * (an if_available miss, or given up before it was queued): r->settled;
 * the API layer completes it through dispatch all the same. Pending:
 * watch whom it waits for (a granter rings).
 */
int wlk__shm_async_request(struct wlk_manager *pub, struct wlk_async *r,
			   const struct wlk_options *o)
{
	struct wlk__shm_manager *m = wlk__shm_m(pub);
	struct wlk__shm_lock *l = wlk__shm_l(r->l);
	struct wlk__wake wake;
	struct wlk__enqueue e = {
		.client = m->client, .client_gen = m->client_gen,
		.flags = WLK_REQF_ASYNC, .name = l->pub.name,
		.name_len = (uint32_t)l->pub.name_len, .mode = o->mode,
		.if_available = o->if_available, .steal = o->steal,
		.detect = m->detect,
		.hash = wlk__name_hash(m->b, l->pub.name, l->pub.name_len),
		.own = WLK_NIL,
	};
	struct wlk__scope_item items[WLK_SCOPE_MAX];
	int rc;

	wlk__shm_lock_init(l);
	if (l->pub.scope)
		wlk__shm_scope_items(m, l, items, &e);
	rc = wlk__lock_until(m->b, &wake, r->deadline,
			     r->sig ? &r->sig->reason : NULL);
	if (rc == WLK_ETIMEDOUT ||
	    (rc && r->sig && rc == uatomic_read(&r->sig->reason)))
		/* Timed out or aborted while the mutex's owner was stopped
		 * inside it: never queued; the callback says so. */
		return settled_at_once(m, r, rc);
	if (rc)
		return rc;
	rc = wlk__request_reaping(m->b, &e, &wake, &l->slot, &l->gen);
	if (rc == 0 && l->pub.scope)
		wlk__shm_scope_members(l, items);
	wlk__unlock(m->b, &wake);
	if (rc == WLK__UNAVAILABLE)
		return settled_at_once(m, r, 0); /* an if_available miss */
	if (rc)
		return rc;
	if (wlk__req(m->b, l->slot)->word != WLK_WORD(l->gen, WLK_SLOT_PENDING))
		wlk__bell_ring_self(&m->actx->bell);
	else
		wlk__pidwatch_update(m, m->actx);
	/* Its deadline, or the re-check of blockers not all watched. */
	timer_arm(m, m->actx);
	return 0;
}

void wlk__shm_async_close(struct wlk_manager *pub)
{
	struct wlk__shm_manager *m = wlk__shm_m(pub);

	if (m->actx)
		actx_free(m->actx);
	m->actx = NULL;
}
