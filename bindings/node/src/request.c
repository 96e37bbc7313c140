/* SPDX-License-Identifier: MIT */
/*
 * request.c - asynchronous requests, their completions and the locks.
 *
 * A request is made with wlk_request_async() and completes through
 * granted(), run by wlk_manager_dispatch() from the poll callback. JS
 * identifies requests and locks by a number it chose (the id), so the C
 * side keeps no JS objects per request: one onGrant and one onStolen
 * function per manager receive every completion.
 */
#include <stdlib.h>

#include "addon.h"

static void request_unref(struct wn_request *r)
{
	if (--r->refs > 0)
		return;
	wn_manager_unref(r->mgr);
	free(r);
}

static void request_finalize(napi_env env, void *data, void *hint)
{
	(void)env;
	(void)hint;
	request_unref(data);
}

static void lock_finalize(napi_env env, void *data, void *hint)
{
	struct wn_lock *l = data;

	(void)env;
	(void)hint;
	/* JS always releases; this only covers a lock lost at teardown. */
	if (l->lock) {
		wlk_lock_on_stolen(l->lock, NULL, NULL);
		wlk_release(l->lock);
		wn_manager_busy(l->mgr, -1);
	}
	wn_manager_unref(l->mgr);
	free(l);
}

static void stolen(struct wlk_lock *lock, void *arg)
{
	struct wn_lock *l = arg;
	napi_value id;

	(void)lock;
	if (wn_quiet(l->mgr) || napi_create_double(l->mgr->env, l->id, &id))
		return;
	wn_call(l->mgr, l->mgr->on_stolen, 1, &id);
}

/*
 * Make the JS side of a granted lock (counted in mgr->busy): its external.
 * The external owns the lock: if JS never gets it, its finalizer releases
 * it; if there is no external, it is released here. (The token is read
 * only if JS asks, with token(): most callers never do, and a BigInt per
 * grant is garbage the uncontended path can do without.)
 */
static napi_status lock_values(struct wn_manager *mgr, struct wn_request *r,
			       struct wlk_lock *lock, napi_value *ext)
{
	napi_env env = mgr->env;
	struct wn_lock *l = calloc(1, sizeof(*l));
	napi_status st = napi_generic_failure;

	if (l) {
		l->mgr = mgr;
		l->lock = lock;
		l->token = wlk_lock_token(lock);
		l->id = r->id;
		mgr->refs++;
		st = napi_create_external(env, l, lock_finalize, NULL, ext);
	}
	if (st != napi_ok) {
		if (l) {
			wn_manager_unref(mgr);
			free(l);
		}
		wlk_release(lock);
		wn_manager_busy(mgr, -1);
		return st;
	}
	/* Told at the next dispatch if a steal takes it from us. */
	wlk_lock_on_stolen(lock, stolen, l);
	return napi_ok;
}

/* The request completed: onGrant(id, status, lock | null). */
static void granted(struct wlk_async *req, int status, struct wlk_lock *lock,
		    void *arg)
{
	struct wn_request *r = arg;
	struct wn_manager *mgr = r->mgr;
	napi_env env = mgr->env;
	napi_value argv[3];
	napi_status st;

	(void)req;
	r->done = true;
	if (lock && wn_quiet(mgr)) {
		wlk_release(lock);
		lock = NULL;
	}
	if (!lock)
		wn_manager_busy(mgr, -1);
	if (wn_quiet(mgr))
		goto out;
	st = napi_create_double(env, r->id, &argv[0]);
	if (st == napi_ok)
		st = wn_int(env, status, &argv[1]);
	if (st == napi_ok && lock)
		st = lock_values(mgr, r, lock, &argv[2]);
	else if (st == napi_ok)
		st = napi_get_null(env, &argv[2]);
	/* On failure the lock is not left held (lock_values()). */
	if (st == napi_ok)
		wn_call(mgr, mgr->on_grant, 3, argv);
out:
	request_unref(r);
}

/*
 * request(manager, name, shared, ifAvailable, steal, timeoutMs, id): a
 * request external (for cancel()), or a negative code if nothing was
 * queued. Arguments are validated in JS.
 */
napi_value wn_request(napi_env env, napi_callback_info info)
{
	struct wlk_options o = WLK_OPTIONS_INIT;
	struct wn_manager *mgr;
	struct wn_request *r;
	napi_value argv[7], ret;
	size_t argc = 7, len;
	bool shared, if_available, steal;
	double timeout_ms, id;
	char buf[WN_WTF8_BUF], *name;
	int rc;

	WN_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
	mgr = wn_manager_get(env, argv[0]);
	WN_CHECK(env, napi_get_value_bool(env, argv[2], &shared));
	WN_CHECK(env, napi_get_value_bool(env, argv[3], &if_available));
	WN_CHECK(env, napi_get_value_bool(env, argv[4], &steal));
	WN_CHECK(env, napi_get_value_double(env, argv[5], &timeout_ms));
	WN_CHECK(env, napi_get_value_double(env, argv[6], &id));
	if (!mgr || !mgr->m) {
		WN_CHECK(env, wn_int(env, WLK_ESTATE, &ret));
		return ret;
	}
	o.mode = shared ? WLK_SHARED : WLK_EXCLUSIVE;
	o.if_available = if_available;
	o.steal = steal;
	/* Checked in JS: finite, >= 0; the library ignores absurd ones. */
	o.timeout_ns = timeout_ms > 0 ? (uint64_t)(timeout_ms * 1e6) : 0;
	rc = wn_manager_poll(mgr);
	if (rc) {
		WN_CHECK(env, wn_int(env, rc, &ret));
		return ret;
	}
	if (wn_to_wtf8(env, argv[1], buf, &name, &len))
		return NULL;
	r = calloc(1, sizeof(*r));
	if (!r) {
		if (name != buf)
			free(name);
		WN_CHECK(env, wn_int(env, -12, &ret));
		return ret;
	}
	r->mgr = mgr;
	r->id = id;
	r->refs = 1; /* the library's, until granted() */
	/* Busy before the call: a close() during it completes the request. */
	wn_manager_busy(mgr, 1);
	rc = wlk_request_async(mgr->m, name, len, &o, granted, r, &r->async);
	if (name != buf)
		free(name);
	if (rc) {
		wn_manager_busy(mgr, -1);
		free(r);
		WN_CHECK(env, wn_int(env, rc, &ret));
		return ret;
	}
	mgr->refs++;
	r->refs++; /* the external's */
	WN_CHECK(env, napi_create_external(env, r, request_finalize, NULL,
					   &ret));
	return ret;
}

/* cancel(request): the AbortSignal fired; harmless once completed. */
napi_value wn_cancel(napi_env env, napi_callback_info info)
{
	struct wn_request *r = NULL;
	napi_value argv[1];
	size_t argc = 1;

	WN_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
	WN_CHECK(env, napi_get_value_external(env, argv[0], (void **)&r));
	if (!r->done)
		wlk_async_cancel(r->async);
	return NULL;
}

/* release(lock): 0, WLK_ESTOLEN or WLK_ESTATE; a second call returns 0. */
napi_value wn_release(napi_env env, napi_callback_info info)
{
	struct wn_lock *l = NULL;
	napi_value argv[1], ret;
	size_t argc = 1;
	int rc = 0;

	WN_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
	WN_CHECK(env, napi_get_value_external(env, argv[0], (void **)&l));
	if (l->lock) {
		wlk_lock_on_stolen(l->lock, NULL, NULL);
		rc = wlk_release(l->lock);
		l->lock = NULL;
		wn_manager_busy(l->mgr, -1);
	}
	WN_CHECK(env, wn_int(env, rc, &ret));
	return ret;
}

/*
 * acquire(manager, name, shared, id): the uncontended path. Takes the lock
 * only if it is grantable at once (wlk_acquire() with if_available, which
 * honours the queue, so it never overtakes a waiter), and returns its
 * external; null if not grantable (the caller then queues
 * with request(), or reports null to an ifAvailable callback); or a
 * negative code. It saves the round trip through the descriptor that an
 * asynchronous request always makes, even when granted at once.
 */
napi_value wn_acquire(napi_env env, napi_callback_info info)
{
	struct wlk_options o = WLK_OPTIONS_INIT;
	struct wn_manager *mgr;
	struct wn_request r = { 0 };
	struct wlk_lock *lock = NULL;
	napi_value argv[4], ret;
	size_t argc = 4, len;
	bool shared;
	char buf[WN_WTF8_BUF], *name;
	int rc;

	WN_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
	mgr = wn_manager_get(env, argv[0]);
	WN_CHECK(env, napi_get_value_bool(env, argv[2], &shared));
	WN_CHECK(env, napi_get_value_double(env, argv[3], &r.id));
	rc = mgr && mgr->m ? 0 : WLK_ESTATE;
	/* Steals are reported through the descriptor. */
	if (rc == 0)
		rc = wn_manager_poll(mgr);
	if (rc) {
		WN_CHECK(env, wn_int(env, rc, &ret));
		return ret;
	}
	if (wn_to_wtf8(env, argv[1], buf, &name, &len))
		return NULL;
	o.mode = shared ? WLK_SHARED : WLK_EXCLUSIVE;
	o.if_available = true;
	rc = wlk_acquire(mgr->m, name, len, &o, &lock);
	if (name != buf)
		free(name);
	if (rc) {
		WN_CHECK(env, wn_int(env, rc, &ret));
		return ret;
	}
	if (!lock) {
		WN_CHECK(env, napi_get_null(env, &ret));
		return ret;
	}
	wn_manager_busy(mgr, 1);
	WN_CHECK(env, lock_values(mgr, &r, lock, &ret));
	return ret;
}

/* token(lock): the grant's fencing token, a BigInt; also after release. */
napi_value wn_token(napi_env env, napi_callback_info info)
{
	struct wn_lock *l = NULL;
	napi_value argv[1], ret;
	size_t argc = 1;

	WN_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
	WN_CHECK(env, napi_get_value_external(env, argv[0], (void **)&l));
	WN_CHECK(env, napi_create_bigint_uint64(env, l->token, &ret));
	return ret;
}
