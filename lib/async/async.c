/* SPDX-License-Identifier: MIT */
/*
 * async.c - asynchronous requests (weblocks/async.h).
 *
 * A manager used asynchronously gets a doorbell (doorbell.c), an eventfd
 * that granters ring directly and that is its descriptor, and an inner
 * epoll instance holding a timer for deadlines, the event descriptors of
 * abort signals, pidfds of the processes its pending requests wait behind
 * and the doorbell's fallback socket, which the process's watcher thread
 * turns into a ring (watcher.c). Everything that can complete a request
 * makes the descriptor readable; wlk_manager_dispatch() then looks at the
 * state of each outstanding request in the segment and runs the callbacks
 * of those that completed. All the process-local bookkeeping is under
 * m->amu, which is taken before the segment mutex, never after; no
 * callback runs under either.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "async_internal.h"

WLK_EXPORT int wlk_manager_fd(struct wlk_manager *m)
{
	struct wlk__actx *a;
	int rc;

	if (!m)
		return WLK_EINVAL;
	if (!wlk__manager_enter(m))
		return WLK_ESTATE;
	pthread_mutex_lock(&m->amu);
	rc = wlk__actx_get(m, &a);
	pthread_mutex_unlock(&m->amu);
	wlk__manager_leave(m);
	return rc ? rc : a->bell.efd;
}

/* The signal's event descriptor, created once; or a negative errno. */
static int signal_fd(struct wlk_signal *s)
{
	int fd = uatomic_read(&s->efd), mine;

	if (fd >= 0)
		return fd;
	mine = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (mine < 0)
		return wlk__errno(errno);
	fd = uatomic_cmpxchg(&s->efd, -1, mine);
	if (fd != -1) {
		close(mine); /* another thread won */
		return fd;
	}
	/* Aborted before the descriptor existed: make it readable now. */
	if (uatomic_read(&s->reason))
		(void)!write(mine, &(uint64_t){1}, sizeof(uint64_t));
	return mine;
}

/* Queue under the mutex; a request settled at once rings our own bell. */
static int enqueue(struct wlk_manager *m, struct wlk_async *r,
		   const struct wlk_options *o)
{
	struct wlk__wake wake;
	struct wlk__enqueue e = {
		.client = m->client, .client_gen = m->client_gen,
		.flags = WLK_REQF_ASYNC, .name = r->l->name,
		.name_len = (uint32_t)r->l->name_len, .mode = o->mode,
		.if_available = o->if_available, .steal = o->steal,
		.hash = wlk__name_hash(m->b, r->l->name, r->l->name_len),
		.own = WLK_NIL,
	};
	int rc = wlk__lock_until(m->b, &wake, r->deadline,
				 r->sig ? &r->sig->reason : NULL);

	if (!rc) {
		rc = wlk__request_reaping(m->b, &e, &wake, &r->l->slot,
					  &r->l->gen);
		wlk__unlock(m->b, &wake);
	} else if (rc == WLK_ETIMEDOUT ||
		   (r->sig && rc == uatomic_read(&r->sig->reason))) {
		/* Timed out or aborted while the mutex's owner was stopped
		 * inside it: never queued; the callback says so. */
		r->status = rc;
		rc = 1;
	}
	if (rc == 1) { /* settled at once: if_available miss, or given up */
		r->settled = true;
		wlk__lock_free(r->l);
		r->l = NULL;
		rc = 0;
	}
	return rc;
}

WLK_EXPORT int wlk_request_async(struct wlk_manager *m, const char *name,
				 size_t name_len, const struct wlk_options *o,
				 wlk_granted_cb cb, void *arg,
				 struct wlk_async **out)
{
	struct wlk_options copy;
	struct wlk__actx *a;
	struct wlk_async *r;
	int rc;

	if (!cb)
		return WLK_EINVAL;
	rc = wlk__options_read(&o, &copy);
	if (!rc)
		rc = wlk__acquire_begin(m, name, &name_len, o);
	if (rc)
		return rc;
	r = calloc(1, sizeof(*r));
	if (r)
		r->l = wlk__lock_new(m, name, name_len, o->mode);
	if (!r || !r->l) {
		free(r);
		wlk__manager_leave(m);
		return -ENOMEM;
	}
	*r = (struct wlk_async){.m = m, .l = r->l, .cb = cb, .arg = arg,
				.sig = o->signal};
	r->deadline = wlk__deadline_ns(o->timeout_ns);
	pthread_mutex_lock(&m->amu);
	rc = wlk__actx_get(m, &a);
	if (!rc && r->sig) {
		int fd = signal_fd(r->sig);

		rc = fd < 0 ? fd : wlk__epoll_add(a->epfd, fd,
						 EPOLLIN | EPOLLET);
	}
	if (!rc)
		rc = enqueue(m, r, o);
	if (!rc) {
		cds_list_add_tail(&r->link, &a->pending);
		if (r->deadline)
			wlk__timer_arm(a);
		/* Settled at once: complete through dispatch all the same.
		 * Pending: watch whom it waits for (a granter rings). */
		if (r->settled || wlk__req(m->b, r->l->slot)->word !=
				       WLK_WORD(r->l->gen, WLK_SLOT_PENDING))
			wlk__bell_ring_self(&a->bell);
		else
			wlk__pidwatch_update(m, a);
	}
	pthread_mutex_unlock(&m->amu);
	if (rc) {
		wlk__lock_free(r->l);
		free(r);
		wlk__manager_leave(m);
		return rc;
	}
	if (out)
		*out = r;
	return 0; /* the manager reference is r's until its callback */
}

WLK_EXPORT int wlk_async_cancel(struct wlk_async *r)
{
	struct wlk_manager *m;

	if (!r)
		return WLK_EINVAL;
	m = r->m;
	pthread_mutex_lock(&m->amu);
	if (!r->cancel && m->actx) {
		r->cancel = true;
		wlk__bell_ring_self(&m->actx->bell);
	}
	pthread_mutex_unlock(&m->amu);
	return 0;
}
