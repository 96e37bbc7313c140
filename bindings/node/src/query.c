/* SPDX-License-Identifier: MIT */
/*
 * query.c - LockManager.query(): a snapshot of the bucket as JS objects.
 *
 * wlk_query() copies the bucket under its mutex, which is held only for
 * the copy (never while a lock is awaited), so it runs on the JS thread;
 * the JS layer still resolves the promise asynchronously, as the spec's
 * lock task queue would.
 */
#include "addon.h"

static napi_status info_object(napi_env env, const struct wlk_lock_info *i,
			       napi_value *out)
{
	napi_value name, mode, client;
	napi_status st;

	st = napi_create_object(env, out);
	if (st == napi_ok)
		st = wn_from_wtf8(env, i->name, i->name_len, &name);
	if (st == napi_ok)
		st = napi_create_string_utf8(env,
					     i->mode == WLK_SHARED ? "shared"
								   : "exclusive",
					     NAPI_AUTO_LENGTH, &mode);
	if (st == napi_ok)
		st = napi_create_string_utf8(env, i->client_id,
					     NAPI_AUTO_LENGTH, &client);
	/* The spec's LockInfo members, in its order. */
	if (st == napi_ok)
		st = napi_set_named_property(env, *out, "name", name);
	if (st == napi_ok)
		st = napi_set_named_property(env, *out, "mode", mode);
	if (st == napi_ok)
		st = napi_set_named_property(env, *out, "clientId", client);
	return st;
}

typedef const struct wlk_lock_info *(*entry_fn)(const struct wlk_snapshot *,
						 size_t);

static napi_status list(napi_env env, const struct wlk_snapshot *s, size_t n,
			entry_fn entry, napi_value *out)
{
	napi_status st = napi_create_array_with_length(env, n, out);
	napi_value o;
	size_t i;

	for (i = 0; st == napi_ok && i < n; i++) {
		st = info_object(env, entry(s, i), &o);
		if (st == napi_ok)
			st = napi_set_element(env, *out, (uint32_t)i, o);
	}
	return st;
}

/* query(manager): { held, pending }, or a negative code. */
napi_value wn_query(napi_env env, napi_callback_info info)
{
	struct wlk_snapshot *s;
	struct wn_manager *mgr;
	napi_value argv[1], ret, held, pending;
	size_t argc = 1;
	napi_status st;
	int rc;

	WN_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
	mgr = wn_manager_get(env, argv[0]);
	rc = mgr && mgr->m ? wlk_query(mgr->m, &s) : WLK_ESTATE;
	if (rc) {
		WN_CHECK(env, wn_int(env, rc, &ret));
		return ret;
	}
	st = list(env, s, wlk_snapshot_held_count(s), wlk_snapshot_held, &held);
	if (st == napi_ok)
		st = list(env, s, wlk_snapshot_pending_count(s),
			  wlk_snapshot_pending, &pending);
	wlk_snapshot_free(s);
	WN_CHECK(env, st);
	WN_CHECK(env, napi_create_object(env, &ret));
	WN_CHECK(env, napi_set_named_property(env, ret, "held", held));
	WN_CHECK(env, napi_set_named_property(env, ret, "pending", pending));
	return ret;
}
