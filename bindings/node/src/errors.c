/* SPDX-License-Identifier: MIT */
/*
 * errors.c - Node-API failures and exceptions thrown by JS callbacks.
 *
 * Library error codes are not thrown here: they go back to JS as negative
 * numbers, and lib/errors.js makes the DOMException the spec names, so the
 * one place that decides which exception a browser would raise is in JS.
 */
#include "addon.h"

/* Throw an Error for a failed Node-API call, unless one is pending. */
napi_value wn_throw_napi(napi_env env, napi_status st)
{
	const napi_extended_error_info *info = NULL;
	bool pending = false;

	napi_is_exception_pending(env, &pending);
	if (pending)
		return NULL;
	napi_get_last_error_info(env, &info);
	napi_throw_error(env, NULL,
			 info && info->error_message ? info->error_message
						     : "Node-API call failed");
	(void)st;
	return NULL;
}

/*
 * A JS function called from the event loop (not from JS) threw: nobody up
 * the stack can catch it, so it becomes an uncaught exception, as an
 * exception thrown by a timer callback would.
 */
void wn_report(napi_env env, napi_status st)
{
	napi_value err;
	bool pending = false;

	if (st == napi_ok)
		return;
	napi_is_exception_pending(env, &pending);
	if (pending && napi_get_and_clear_last_exception(env, &err) == napi_ok)
		napi_fatal_exception(env, err);
}

napi_status wn_int(napi_env env, int v, napi_value *out)
{
	return napi_create_int32(env, v, out);
}
