/* SPDX-License-Identifier: MIT */
/*
 * manager.c - lock managers (navigator.locks of one context): open, close,
 * clientId, and the reference counting that keeps a closed manager's memory
 * alive while threads and lock handles still use it. The bucket's engine
 * (engine.h) does the rest: becoming its client and leaving it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "api.h"

/* Bytes of randomness in a generated clientId (formatted as a UUID). */
#define CLIENT_ID_RANDOM 16

static int make_client_id(char *buf, size_t cap)
{
	uint8_t r[CLIENT_ID_RANDOM];

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return wlk__errno(errno);
	r[6] = (uint8_t)((r[6] & 0x0f) | 0x40); /* UUID version 4 */
	r[8] = (uint8_t)((r[8] & 0x3f) | 0x80); /* RFC 4122 variant */
	snprintf(buf, cap,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		 "%02x%02x%02x%02x%02x%02x",
		 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9],
		 r[10], r[11], r[12], r[13], r[14], r[15]);
	return 0;
}

static int set_client_id(struct wlk_manager *m,
			 const struct wlk_manager_options *o)
{
	int rc;

	if (!o || !o->client_id)
		return make_client_id(m->client_id, sizeof(m->client_id));
	if (!*o->client_id)
		return WLK_EINVAL;
	rc = wlk__check_ident(o->client_id, WLK_CLIENT_ID_MAX);
	if (!rc)
		memcpy(m->client_id, o->client_id, strlen(o->client_id) + 1);
	return rc;
}

static int manager_open(const char *origin,
			const struct wlk_manager_options *o,
			struct wlk_manager **out)
{
	struct wlk_manager_options copy;
	const struct wlk__engine *e;
	struct wlk_manager *m;
	int rc;

	if (!origin || !out || wlk__manager_options_read(&o, &copy))
		return WLK_EINVAL;
	e = wlk__engine_for(origin, o);
	m = calloc(1, e->manager_size);
	if (!m)
		return -ENOMEM;
	m->e = e;
	m->refs = 1;
	m->fork_gen = wlk__fork_gen();
	CDS_INIT_LIST_HEAD(&m->pending);
	CDS_INIT_LIST_HEAD(&m->groups);
	CDS_INIT_LIST_HEAD(&m->loose);
	CDS_INIT_LIST_HEAD(&m->timed);
	CDS_INIT_LIST_HEAD(&m->watching);
	rc = pthread_mutex_init(&m->amu, NULL);
	if (rc) {
		free(m);
		return wlk__errno(rc);
	}
	rc = set_client_id(m, o);
	if (!rc)
		rc = e->open(m, origin, o);
	if (rc) {
		pthread_mutex_destroy(&m->amu);
		free(m);
		return rc;
	}
	*out = m;
	return 0;
}

WLK_EXPORT int wlk_manager_open(const char *origin,
				const struct wlk_manager_options *o,
				struct wlk_manager **out)
{
	int rc, cancel;

	/*
	 * Opening waits for a concurrent opener's init lock (fcntl, a
	 * cancellation point) with the process's registry lock held: a
	 * thread cancelled there would hang every later open for good.
	 */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	rc = manager_open(origin, o, out);
	pthread_setcancelstate(cancel, NULL);
	return rc;
}

/*
 * wlk__manager_enter() - start a call on @m: false if it is closed or was
 * inherited through fork(); otherwise it stays allocated until the matching
 * wlk__manager_leave().
 */
bool wlk__manager_enter(struct wlk_manager *m)
{
	if (m->fork_gen != wlk__fork_gen() || uatomic_read(&m->closed))
		return false;
	uatomic_inc(&m->refs);
	return true;
}

void wlk__manager_leave(struct wlk_manager *m)
{
	wlk__manager_unref(m);
}

WLK_EXPORT void wlk_manager_close(struct wlk_manager *m)
{
	const struct wlk__async_hooks *hooks;
	int cancel;

	if (!m)
		return;
	if (uatomic_xchg(&m->closed, WLK__CLOSING))
		return; /* closed twice: the first call did the work */
	/* The engine's pins become references before any release may see
	 * CLOSED and drop one (engine.h, PINS); the exchange orders both. */
	if (m->e->pins) {
		uatomic_add(&m->refs, m->e->pins);
		uatomic_xchg(&m->closed, WLK__CLOSED);
	}
	/* Half a close (cancelled in close() or an RCU grace period's
	 * sleep, with a lock held) could not be finished by anyone. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	if (m->fork_gen == wlk__fork_gen()) {
		/* Wake our blocked threads; they will find the client gone. */
		uatomic_inc(&m->close_word);
		wlk__futex_wake(&m->close_word, INT32_MAX);
		m->e->close(m);
		/* Callbacks still owed run now, with WLK_ESTATE. Under amu:
		 * a context being created now is seen with its hooks. */
		pthread_mutex_lock(&m->amu);
		hooks = m->async;
		pthread_mutex_unlock(&m->amu);
		if (hooks)
			hooks->close(m);
	}
	if (m->e->seal)
		m->e->seal(m);
	wlk__manager_unref(m);
	pthread_setcancelstate(cancel, NULL);
}

WLK_EXPORT const char *wlk_manager_client_id(const struct wlk_manager *m)
{
	return m ? m->client_id : NULL;
}

WLK_EXPORT int wlk_bucket_remove(const char *origin,
				 const struct wlk_manager_options *o)
{
	struct wlk_manager_options copy;
	int rc, cancel;

	if (!origin)
		return WLK_EINVAL;
	rc = wlk__manager_options_read(&o, &copy);
	if (rc)
		return rc;
	/* It waits for openers' init locks too; an fd must not leak. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	rc = wlk__engine_for(origin, o)->remove(origin, o);
	pthread_setcancelstate(cancel, NULL);
	return rc;
}
