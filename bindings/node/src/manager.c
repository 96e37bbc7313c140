/* SPDX-License-Identifier: MIT */
/*
 * manager.c - LockManager's native side: open, close, clientId, and the
 * end of an env (process exit, a worker's end), which closes what is open.
 */
#include <stdlib.h>
#include <string.h>

#include "addon.h"

void wn_manager_unref(struct wn_manager *mgr)
{
	if (--mgr->refs == 0)
		free(mgr);
}

/*
 * Close the wlk_manager: its queued requests complete with WLK_ESTATE
 * (calling back into JS, unless at teardown), its locks are released.
 * Returns whether a poll close is under way.
 */
static bool manager_close(struct wn_manager *mgr)
{
	struct wlk_manager *m = mgr->m;

	if (!m)
		return false;
	*mgr->pprev = mgr->next;
	if (mgr->next)
		mgr->next->pprev = mgr->pprev;
	wlk_manager_close(m);
	mgr->m = NULL;
	napi_delete_reference(mgr->env, mgr->on_grant);
	napi_delete_reference(mgr->env, mgr->on_stolen);
	napi_delete_reference(mgr->env, mgr->resource);
	napi_async_destroy(mgr->env, mgr->actx);
	if (!mgr->poll)
		return false;
	mgr->refs++; /* dropped by poll_closed() */
	mgr->counted = mgr->inst->teardown;
	uv_poll_stop(mgr->poll);
	uv_close((uv_handle_t *)mgr->poll, wn_poll_closed);
	mgr->poll = NULL;
	return true;
}

static void manager_finalize(napi_env env, void *data, void *hint)
{
	struct wn_manager *mgr = data;

	(void)env;
	(void)hint;
	/*
	 * No JS may run in a finalizer. A manager still open here has
	 * nothing outstanding (its callbacks are strong references that
	 * would have kept it reachable), so nobody misses a completion.
	 */
	mgr->quiet = true;
	manager_close(mgr);
	wn_manager_unref(mgr);
}

struct wn_manager *wn_manager_get(napi_env env, napi_value v)
{
	void *p = NULL;

	if (napi_get_value_external(env, v, &p) != napi_ok)
		return NULL;
	return p;
}

/* Copy an optional string argument; NULL for undefined. */
static int opt_string(napi_env env, napi_value v, char **out)
{
	napi_valuetype t;
	size_t n;

	*out = NULL;
	if (napi_typeof(env, v, &t) != napi_ok)
		return -1;
	if (t == napi_undefined || t == napi_null)
		return 0;
	if (napi_get_value_string_utf8(env, v, NULL, 0, &n) != napi_ok)
		return -1;
	*out = malloc(n + 1);
	if (!*out)
		return -1;
	napi_get_value_string_utf8(env, v, *out, n + 1, &n);
	return 0;
}

/*
 * open(origin, bucket, partition, clientId, onGrant, onStolen): a manager
 * external, or a negative code from wlk_manager_open(). The strings are
 * validated in JS (no NUL inside).
 */
napi_value wn_open(napi_env env, napi_callback_info info)
{
	struct wlk_manager_options o = WLK_MANAGER_OPTIONS_INIT;
	struct wn_instance *inst;
	struct wn_manager *mgr = NULL;
	napi_value argv[6], ret, res, rname;
	size_t argc = 6;
	char *s[4] = { 0 };
	int i, rc = 0;

	WN_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
	WN_CHECK(env, napi_get_instance_data(env, (void **)&inst));
	for (i = 0; i < 4; i++)
		if (opt_string(env, argv[i], &s[i]))
			rc = -12;
	if (rc == 0) {
		o.bucket = s[1];
		o.partition = s[2];
		o.client_id = s[3];
		mgr = calloc(1, sizeof(*mgr));
		rc = mgr ? wlk_manager_open(s[0], &o, &mgr->m) : -12;
		if (rc && mgr)
			free(mgr);
	}
	for (i = 0; i < 4; i++)
		free(s[i]);
	if (rc) {
		WN_CHECK(env, wn_int(env, rc, &ret));
		return ret;
	}
	mgr->env = env;
	mgr->inst = inst;
	mgr->refs = 1;
	napi_create_reference(env, argv[4], 1, &mgr->on_grant);
	napi_create_reference(env, argv[5], 1, &mgr->on_stolen);
	napi_create_object(env, &res);
	napi_create_reference(env, res, 1, &mgr->resource);
	napi_create_string_utf8(env, "weblocks:LockManager", NAPI_AUTO_LENGTH,
				&rname);
	napi_async_init(env, res, rname, &mgr->actx);
	mgr->next = inst->managers;
	if (mgr->next)
		mgr->next->pprev = &mgr->next;
	mgr->pprev = &inst->managers;
	inst->managers = mgr;
	WN_CHECK(env, napi_create_external(env, mgr, manager_finalize, NULL,
					   &ret));
	return ret;
}

/* close(manager): terminate its locks and requests (spec 2.6). */
napi_value wn_close(napi_env env, napi_callback_info info)
{
	struct wn_manager *mgr;
	napi_value argv[1];
	size_t argc = 1;

	WN_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
	mgr = wn_manager_get(env, argv[0]);
	if (mgr)
		manager_close(mgr);
	return NULL;
}

napi_value wn_client_id(napi_env env, napi_callback_info info)
{
	struct wn_manager *mgr;
	napi_value argv[1], ret;
	size_t argc = 1;

	WN_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
	mgr = wn_manager_get(env, argv[0]);
	if (!mgr || !mgr->m)
		return NULL;
	WN_CHECK(env, napi_create_string_utf8(env,
					      wlk_manager_client_id(mgr->m),
					      NAPI_AUTO_LENGTH, &ret));
	return ret;
}

/* bucketRemove(origin, bucket, partition): 0 or a negative code. */
napi_value wn_bucket_remove(napi_env env, napi_callback_info info)
{
	struct wlk_manager_options o = WLK_MANAGER_OPTIONS_INIT;
	napi_value argv[3], ret;
	size_t argc = 3;
	char *s[3] = { 0 };
	int i, rc = 0;

	WN_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
	for (i = 0; i < 3; i++)
		if (opt_string(env, argv[i], &s[i]))
			rc = -12;
	if (rc == 0) {
		o.bucket = s[1];
		o.partition = s[2];
		rc = wlk_bucket_remove(s[0], &o);
	}
	for (i = 0; i < 3; i++)
		free(s[i]);
	WN_CHECK(env, wn_int(env, rc, &ret));
	return ret;
}

/*
 * The env is going (process exit, or a worker ending): close every manager
 * still open so that other processes and threads get its locks at once,
 * without JS (none may run now), then wait for the polls to be closed.
 */
static void teardown(napi_async_cleanup_hook_handle hook, void *arg)
{
	struct wn_instance *inst = arg;

	inst->teardown = true;
	inst->hook = hook;
	inst->closing = 1; /* held until every close is started */
	while (inst->managers)
		if (manager_close(inst->managers))
			inst->closing++;
	if (--inst->closing == 0) {
		napi_remove_async_cleanup_hook(hook);
		inst->hook = NULL;
	}
}

void wn_instance_init(napi_env env, struct wn_instance *inst)
{
	napi_add_async_cleanup_hook(env, teardown, inst, NULL);
}
