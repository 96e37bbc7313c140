/* SPDX-License-Identifier: MIT */
/*
 * async.c - asynchronous requests (weblocks/async.h).
 *
 * A manager used asynchronously gets an async context from its engine
 * (engine.h), with a descriptor that everything that can complete a
 * request makes readable; wlk_manager_dispatch() (dispatch.c) then has the
 * engine settle each outstanding request and runs the callbacks of those
 * that completed. All the process-local bookkeeping is under m->amu,
 * which is taken before any lock of the engine, never after; no callback
 * runs under either.
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
	int rc;

	if (!m)
		return WLK_EINVAL;
	if (!wlk__manager_enter(m))
		return WLK_ESTATE;
	pthread_mutex_lock(&m->amu);
	rc = wlk__async_get(m);
	if (!rc)
		rc = m->e->async_fd(m);
	pthread_mutex_unlock(&m->amu);
	wlk__manager_leave(m);
	return rc;
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

/* Queue the request for handle @l (the begin's manager reference is the
 * request's until its callback, or dropped here on error). */
static int submit(struct wlk_manager *m, struct wlk_lock *l,
		  const struct wlk_options *o, wlk_granted_cb cb, void *arg,
		  struct wlk_async **out)
{
	struct wlk_async *r;
	int rc;

	r = calloc(1, sizeof(*r));
	if (!r) {
		wlk__lock_free(l);
		wlk__manager_leave(m);
		return -ENOMEM;
	}
	*r = (struct wlk_async){.m = m, .l = l, .cb = cb, .arg = arg,
				.sig = o->signal};
	r->deadline = wlk__deadline_ns(o->timeout_ns);
	pthread_mutex_lock(&m->amu);
	rc = wlk__async_get(m);
	if (!rc && r->sig) {
		int fd = signal_fd(r->sig);

		rc = fd < 0 ? fd : m->e->async_watch_fd(m, fd);
	}
	if (!rc) {
		/* Filed first: the engine watches what the filed requests
		 * wait for, this one's too. */
		cds_list_add_tail(&r->link, &m->pending);
		wlk__async_join(m, r, o);
		rc = m->e->async_request(m, r, o);
		if (rc)
			wlk__async_leave(r);
		else if (r->settled)
			wlk__async_loosen(m, r);
	}
	if (!rc && r->settled) { /* never granted: no lock */
		wlk__lock_free(r->l);
		r->l = NULL;
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

WLK_EXPORT int wlk_request_async(struct wlk_manager *m, const char *name,
				 size_t name_len, const struct wlk_options *o,
				 wlk_granted_cb cb, void *arg,
				 struct wlk_async **out)
{
	struct wlk_options copy;
	struct wlk_lock *l;
	int rc;

	if (!cb)
		return WLK_EINVAL;
	rc = wlk__acquire_begin(m, name, name_len, &o, &copy, &l);
	return rc ? rc : submit(m, l, o, cb, arg, out);
}

WLK_EXPORT int wlk_request_scope_async(struct wlk_manager *m,
				       const struct wlk_name *names, size_t n,
				       const struct wlk_options *o,
				       wlk_granted_cb cb, void *arg,
				       struct wlk_async **out)
{
	struct wlk_options copy;
	struct wlk_lock *l;
	int rc;

	if (!cb)
		return WLK_EINVAL;
	rc = wlk__scope_begin(m, names, n, &o, &copy, &l);
	return rc ? rc : submit(m, l, o, cb, arg, out);
}

WLK_EXPORT int wlk_async_cancel(struct wlk_async *r)
{
	struct wlk_manager *m;

	if (!r)
		return WLK_EINVAL;
	m = r->m;
	pthread_mutex_lock(&m->amu);
	if (!r->cancel && m->async_on) {
		r->cancel = true;
		/* Settled out of order (engine.h, ASYNC ORDER). */
		m->async_all = true;
		wlk__async_give_up(m, r, WLK_EABORTED);
		m->e->async_ring(m);
	}
	pthread_mutex_unlock(&m->amu);
	return 0;
}
