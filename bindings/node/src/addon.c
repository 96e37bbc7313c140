/* SPDX-License-Identifier: MIT */
/*
 * addon.c - the module's entry point: its functions and per-env state.
 *
 * The module is context-aware (NAPI_MODULE_INIT): each worker thread that
 * loads it gets its own instance, whose managers are its own clients and
 * are closed when the worker ends.
 */
#include <stdlib.h>

#include "addon.h"

static napi_value error_name(napi_env env, napi_callback_info info)
{
	napi_value argv[1], ret;
	size_t argc = 1;
	int32_t code;

	WN_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
	WN_CHECK(env, napi_get_value_int32(env, argv[0], &code));
	WN_CHECK(env, napi_create_string_utf8(env, wlk_error_name(code),
					      NAPI_AUTO_LENGTH, &ret));
	return ret;
}

static napi_value strerror_(napi_env env, napi_callback_info info)
{
	napi_value argv[1], ret;
	size_t argc = 1;
	int32_t code;

	WN_CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));
	WN_CHECK(env, napi_get_value_int32(env, argv[0], &code));
	WN_CHECK(env, napi_create_string_utf8(env, wlk_strerror(code),
					      NAPI_AUTO_LENGTH, &ret));
	return ret;
}

static void instance_finalize(napi_env env, void *data, void *hint)
{
	(void)env;
	(void)hint;
	free(data);
}

NAPI_MODULE_INIT()
{
	static const struct {
		const char *name;
		napi_callback fn;
	} fns[] = {
		{ "open", wn_open },
		{ "close", wn_close },
		{ "clientId", wn_client_id },
		{ "bucketRemove", wn_bucket_remove },
		{ "request", wn_request },
		{ "acquire", wn_acquire },
		{ "cancel", wn_cancel },
		{ "release", wn_release },
		{ "token", wn_token },
		{ "query", wn_query },
		{ "errorName", error_name },
		{ "strerror", strerror_ },
	};
	struct wn_instance *inst = calloc(1, sizeof(*inst));
	napi_value f, v;
	size_t i;

	if (!inst ||
	    napi_set_instance_data(env, inst, instance_finalize, NULL)) {
		free(inst);
		napi_throw_error(env, NULL, "weblocks: out of memory");
		return NULL;
	}
	wn_instance_init(env, inst);
	for (i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		if (napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH,
					 fns[i].fn, NULL, &f) ||
		    napi_set_named_property(env, exports, fns[i].name, f))
			return NULL;
	}
	if (napi_create_string_utf8(env, wlk_version_string(),
				    NAPI_AUTO_LENGTH, &v) == napi_ok)
		napi_set_named_property(env, exports, "version", v);
	return exports;
}
