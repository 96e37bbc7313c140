/* SPDX-License-Identifier: MIT */
/*
 * request.c - LockManager.request() as blocking calls: wlk_request(),
 * wlk_acquire(), wlk_release(), their one-argument forms for FFI callers
 * (wlk_call_acquire(), wlk_call_release()), and the Lock accessors.
 *
 * The checks are the spec's and the manager's; the request itself, its
 * wait and the release are the bucket's engine's (engine.h).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "api.h"

/*
 * Spec 3.2.1 steps 5-9, after the argument checks (WLK_EINVAL) and the
 * manager check (WLK_ESTATE) that precede them. Inline in begin(): the
 * uncontended pair makes no call for it. The two checks that can fail
 * only a steal or an if_available request are skipped together for the
 * others; the order of the errors is the spec's.
 */
static inline __attribute__((always_inline)) int
validate(struct wlk_manager *m, const char *name, size_t *len,
	 const struct wlk_options *o)
{
	if (*len == WLK_NUL_TERMINATED)
		*len = strlen(name);
	if (*len > 0 && name[0] == '-')
		return WLK_ENOTSUPPORTED;
	if (caa_unlikely(o->steal || o->if_available)) {
		if (o->steal &&
		    (o->if_available || o->mode != WLK_EXCLUSIVE))
			return WLK_ENOTSUPPORTED;
		if (o->signal || o->timeout_ns)
			return WLK_ENOTSUPPORTED;
	}
	if (o->signal && uatomic_read(&o->signal->reason))
		return uatomic_read(&o->signal->reason);
	if (*len > m->max_name_len)
		return WLK_ENAMETOOLONG;
	return 0;
}

/*
 * wlk__acquire_begin() - the start of a request: its options read (*@o
 * then points at @copy, or the defaults), the checks in the spec's order
 * (arguments, then the manager, then spec 3.2.1 steps 5-9), a reference
 * to the manager for the call, and a new handle in *@out. On error
 * nothing is kept. With @pinned, for a blocking acquire on an engine that
 * pins (engine.h, PINS), no reference is taken: the handle is not
 * counted, and the engine counts it when it must.
 */
static inline __attribute__((always_inline)) int
begin(struct wlk_manager *m, const char *name, size_t len,
      const struct wlk_options **o, struct wlk_options *copy,
      struct wlk_lock **out, bool pinned)
{
	const struct wlk_options *opt = *o;
	struct wlk_lock *l;
	int rc;

	if (wlk__options_read(&opt, copy))
		return WLK_EINVAL;
	if (!m || !name ||
	    (opt->mode != WLK_EXCLUSIVE && opt->mode != WLK_SHARED))
		return WLK_EINVAL;
	pinned = pinned && m->e->pins;
	if (pinned ? !wlk__manager_usable(m) : !wlk__manager_enter(m))
		return WLK_ESTATE;
	rc = validate(m, name, &len, opt);
	l = rc ? NULL : wlk__lock_new(m, name, len, opt->mode);
	if (!rc && !l)
		rc = -ENOMEM;
	if (rc) {
		if (!pinned)
			wlk__manager_leave(m);
		return rc;
	}
	l->counted = !pinned;
	*o = opt;
	*out = l;
	return 0;
}

/* The async path's begin (async.c); the blocking one inlines begin(). */
int wlk__acquire_begin(struct wlk_manager *m, const char *name, size_t len,
		       const struct wlk_options **o, struct wlk_options *copy,
		       struct wlk_lock **out)
{
	return begin(m, name, len, o, copy, out, false);
}

/* Inline in both callers: the uncontended path keeps one frame here. */
static inline __attribute__((always_inline)) int
acquire(struct wlk_manager *m, const char *name, size_t len,
	const struct wlk_options *o, struct wlk_lock **out)
{
	struct wlk_options copy;
	struct wlk_lock *l;
	int rc;

	rc = begin(m, name, len, &o, &copy, &l, true);
	return rc ? rc : wlk__acquire_with(m, l, o, out);
}

WLK_EXPORT int wlk_acquire(struct wlk_manager *m, const char *name,
			   size_t name_len, const struct wlk_options *o,
			   struct wlk_lock **out)
{
	struct wlk_lock *l;
	int rc;

	if (!out)
		return WLK_EINVAL;
	rc = acquire(m, name, name_len, o, &l);
	if (!rc)
		*out = l;
	return rc;
}

WLK_EXPORT int wlk_release(struct wlk_lock *l)
{
	struct wlk_manager *m;
	bool counted;
	int rc = WLK_ESTATE;

	if (!l)
		return 0;
	m = l->m;
	/* Read first: a lock its engine keeps @m for may take @m with it
	 * (engine.h, PINS). */
	counted = l->counted;
	/* In a fork child the lock is the parent's: touch nothing shared. */
	if (m->fork_gen == wlk__fork_gen()) {
		if (l->watched)
			uatomic_read(&m->async)->unwatch(l);
		rc = m->e->release(l);
	} else if (m->e->forget) {
		m->e->forget(l);
	}
	wlk__lock_free(l);
	if (counted)
		wlk__manager_leave(m);
	return rc;
}

WLK_EXPORT int wlk_call_acquire(struct wlk_call *c)
{
	struct wlk_lock *l;
	int rc;

	/* A block holding a lock would lose its handle. */
	if (!c || c->lock)
		return WLK_EINVAL;
	rc = acquire(c->m, c->name, c->name_len, c->o, &l);
	if (!rc)
		c->lock = l;
	return rc;
}

WLK_EXPORT int wlk_call_release(struct wlk_call *c)
{
	struct wlk_lock *l;

	if (!c)
		return WLK_EINVAL;
	l = c->lock;
	c->lock = NULL;
	return wlk_release(l);
}

/* wlk_request()'s acquire, out of line: its frame holds a cancellation
 * cleanup, which an inlined acquire() would have to survive. */
static __attribute__((noinline)) int
acquire_for_request(struct wlk_manager *m, const char *name, size_t len,
		    const struct wlk_options *o, struct wlk_lock **out)
{
	return acquire(m, name, len, o, out);
}

/* A thread cancelled inside the callback must not keep the lock. */
static void release_on_cancel(void *arg)
{
	wlk_release(arg);
}

/*
 * wlk__request_run() - the callback part of wlk_request() and
 * wlk_request_scope(): run @cb with lock @l (NULL for an if_available
 * miss), then release it. Return: @cb's value, or the release's code
 * that stands for the spec's released promise rejecting.
 */
int wlk__request_run(struct wlk_lock *l, wlk_callback cb, void *arg)
{
	int rc, ret;

	pthread_cleanup_push(release_on_cancel, l);
	ret = cb(l, arg);
	pthread_cleanup_pop(0);
	if (!l)
		return ret;
	rc = wlk_release(l);
	/* The spec's released promise rejects if the lock was stolen; a
	 * closed manager released the lock under the callback. */
	return rc == WLK_ESTOLEN || rc == WLK_ESTATE || rc == WLK_ECORRUPT
		       ? rc
		       : ret;
}

WLK_EXPORT int wlk_request(struct wlk_manager *m, const char *name,
			   size_t name_len, const struct wlk_options *o,
			   wlk_callback cb, void *arg)
{
	struct wlk_lock *l = NULL;
	int rc;

	if (!cb)
		return WLK_EINVAL;
	rc = acquire_for_request(m, name, name_len, o, &l);
	return rc ? rc : wlk__request_run(l, cb, arg);
}

WLK_EXPORT const char *wlk_lock_name(const struct wlk_lock *l, size_t *len)
{
	if (len)
		*len = l->name_len;
	return l->name;
}

WLK_EXPORT enum wlk_mode wlk_lock_mode(const struct wlk_lock *l)
{
	return l->mode;
}

WLK_EXPORT bool wlk_lock_stolen(const struct wlk_lock *l)
{
	return l->m->e->stolen(l);
}

WLK_EXPORT uint64_t wlk_lock_token(const struct wlk_lock *l)
{
	return l->token;
}
