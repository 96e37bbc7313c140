/* SPDX-License-Identifier: MIT */
/*
 * addon.h - what the files of the Node-API addon share.
 *
 * The addon is thin on purpose: the JS layer (lib/index.js) does the
 * spec's argument conversion, validation order, promises and AbortSignal;
 * the C side only turns calls into libweblocks calls and the manager's
 * descriptor into libuv events. Every handle crosses into JS as an
 * napi_external; its finalizer releases what JS forgot.
 */
#ifndef WN_ADDON_H
#define WN_ADDON_H

#define NAPI_VERSION 8
#include <node_api.h>
#include <uv.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <weblocks.h>
#include <weblocks/async.h>

/* The addon's state in one env (the main thread or one worker). */
struct wn_instance {
	struct wn_manager *managers; /* open managers, for env teardown */
	napi_async_cleanup_hook_handle hook;
	unsigned int closing;        /* polls still to be closed at teardown */
	bool teardown;               /* the env is going: call no more JS */
};

/*
 * One LockManager: a wlk_manager, its descriptor's poll handle and the JS
 * functions that completions are delivered to.
 */
struct wn_manager {
	struct wlk_manager *m;
	napi_env env;
	struct wn_instance *inst;
	struct wn_manager *next, **pprev; /* in inst->managers while open */
	uv_poll_t *poll;       /* NULL until the first request; freed on close */
	size_t busy;           /* requests pending + locks held: ref'd while > 0 */
	napi_ref on_grant;     /* (id, status, lock external | null) */
	napi_ref on_stolen;    /* (id) */
	napi_ref resource;     /* the async resource of the callback scope */
	napi_async_context actx;
	int refs;              /* its external + every wn_request and wn_lock */
	bool quiet;            /* being finalized: call no JS */
	bool counted;          /* its poll close is awaited by the teardown */
};

/* One request until its completion, shared by the library and JS. */
struct wn_request {
	struct wn_manager *mgr;
	struct wlk_async *async;
	double id;
	int refs;              /* the library until completion + the external */
	bool done;
};

/* One granted lock, owned by its external. */
struct wn_lock {
	struct wn_manager *mgr;
	struct wlk_lock *lock; /* NULL once released */
	uint64_t token;        /* kept for Lock.weblocksToken after release */
	double id;
};

/* errors.c */
napi_value wn_throw_napi(napi_env env, napi_status st);
void wn_report(napi_env env, napi_status st);
napi_status wn_int(napi_env env, int v, napi_value *out);

/* wtf8.c */
#define WN_WTF8_BUF 400 /* bytes: a name of 128 units fits in it */
int wn_to_wtf8(napi_env env, napi_value s, char *buf, char **out,
	       size_t *len);
napi_status wn_from_wtf8(napi_env env, const char *s, size_t len,
			 napi_value *out);

/* poll.c */
void wn_manager_busy(struct wn_manager *mgr, int delta);
int wn_manager_poll(struct wn_manager *mgr);
void wn_poll_closed(uv_handle_t *h);
bool wn_quiet(struct wn_manager *mgr);
napi_status wn_call(struct wn_manager *mgr, napi_ref fn, size_t argc,
		    const napi_value *argv);

/* manager.c */
void wn_manager_unref(struct wn_manager *mgr);
struct wn_manager *wn_manager_get(napi_env env, napi_value v);
napi_value wn_open(napi_env env, napi_callback_info info);
napi_value wn_close(napi_env env, napi_callback_info info);
napi_value wn_client_id(napi_env env, napi_callback_info info);
napi_value wn_bucket_remove(napi_env env, napi_callback_info info);
void wn_instance_init(napi_env env, struct wn_instance *inst);

/* request.c */
napi_value wn_request(napi_env env, napi_callback_info info);
napi_value wn_acquire(napi_env env, napi_callback_info info);
napi_value wn_cancel(napi_env env, napi_callback_info info);
napi_value wn_release(napi_env env, napi_callback_info info);
napi_value wn_token(napi_env env, napi_callback_info info);

/* query.c */
napi_value wn_query(napi_env env, napi_callback_info info);

/* Return early from a napi_callback when a Node-API call fails. */
#define WN_CHECK(env, call)                                                    \
	do {                                                                   \
		napi_status wn__st = (call);                                   \
		if (wn__st != napi_ok)                                         \
			return wn_throw_napi((env), wn__st);                   \
	} while (0)

#endif /* WN_ADDON_H */
