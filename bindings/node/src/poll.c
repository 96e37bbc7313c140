/* SPDX-License-Identifier: MIT */
/*
 * poll.c - a manager's descriptor in the event loop.
 *
 * Each manager has one descriptor (wlk_manager_fd()) however many requests
 * it has outstanding; one uv_poll_t watches it and runs
 * wlk_manager_dispatch(), which calls the completions back into JS. The
 * poll is referenced only while the manager is busy (a request pending or
 * a lock held), so an idle manager never keeps the process alive, and a
 * held lock does, as the callback's pending promise does in a browser tab.
 */
#include <stdlib.h>

#include "addon.h"

/* A request was made or completed, a lock granted or released. */
void wn_manager_busy(struct wn_manager *mgr, int delta)
{
	size_t was = mgr->busy;

	mgr->busy += delta;
	if (!mgr->poll || uv_is_closing((uv_handle_t *)mgr->poll))
		return;
	if (was == 0 && mgr->busy > 0)
		uv_ref((uv_handle_t *)mgr->poll);
	else if (was > 0 && mgr->busy == 0)
		uv_unref((uv_handle_t *)mgr->poll);
}

/* Whether completions must not reach JS (finalizer, env teardown). */
bool wn_quiet(struct wn_manager *mgr)
{
	return mgr->quiet || mgr->inst->teardown;
}

/*
 * Call a JS function of the manager. From the poll callback this runs
 * inside the callback scope opened there, which drains the microtask queue
 * afterwards; from a JS call (close()) it is a plain nested call. During
 * env teardown no JS may run, and nobody is left to tell.
 */
napi_status wn_call(struct wn_manager *mgr, napi_ref fn, size_t argc,
		    const napi_value *argv)
{
	napi_env env = mgr->env;
	napi_value f, recv, ret;
	napi_status st;

	if (mgr->quiet || mgr->inst->teardown)
		return napi_ok;
	st = napi_get_reference_value(env, fn, &f);
	if (st == napi_ok)
		st = napi_get_undefined(env, &recv);
	if (st == napi_ok)
		st = napi_call_function(env, recv, f, argc, argv, &ret);
	wn_report(env, st);
	return st;
}

static void on_readable(uv_poll_t *p, int status, int events)
{
	struct wn_manager *mgr = p->data;
	napi_env env = mgr->env;
	napi_handle_scope hs;
	napi_callback_scope cs;
	napi_value res;

	(void)status;
	(void)events;
	if (!mgr->m || napi_open_handle_scope(env, &hs) != napi_ok)
		return;
	if (napi_get_reference_value(env, mgr->resource, &res) == napi_ok &&
	    napi_open_callback_scope(env, res, mgr->actx, &cs) == napi_ok) {
		/* Completions call back into JS from in here. */
		wlk_manager_dispatch(mgr->m);
		/* Closing the scope runs the microtasks they queued. */
		napi_close_callback_scope(env, cs);
	}
	napi_close_handle_scope(env, hs);
}

/*
 * Start watching the descriptor: done at the first request, since a
 * manager only used for query() needs none (wlk_manager_fd() starts
 * library threads). Returns 0 or a negative code.
 */
int wn_manager_poll(struct wn_manager *mgr)
{
	struct uv_loop_s *loop;
	int fd;

	if (mgr->poll)
		return 0;
	fd = wlk_manager_fd(mgr->m);
	if (fd < 0)
		return fd;
	if (napi_get_uv_event_loop(mgr->env, &loop) != napi_ok)
		return WLK_ESTATE;
	mgr->poll = calloc(1, sizeof(*mgr->poll));
	if (!mgr->poll)
		return -12; /* -ENOMEM */
	if (uv_poll_init(loop, mgr->poll, fd) ||
	    uv_poll_start(mgr->poll, UV_READABLE, on_readable)) {
		free(mgr->poll);
		mgr->poll = NULL;
		return WLK_ESTATE;
	}
	mgr->poll->data = mgr;
	if (mgr->busy == 0)
		uv_unref((uv_handle_t *)mgr->poll);
	return 0;
}

/* The close callback of a manager's poll (started by manager.c). */
void wn_poll_closed(uv_handle_t *h)
{
	struct wn_manager *mgr = h->data;
	/* Only a poll closed by the teardown may look at the instance: the
	 * teardown waits for it, so the instance is still there. */
	struct wn_instance *inst = mgr->counted ? mgr->inst : NULL;

	free(h);
	wn_manager_unref(mgr);
	/* At teardown the env waits for the last poll it closed. */
	if (inst && --inst->closing == 0 && inst->hook) {
		napi_remove_async_cleanup_hook(inst->hook);
		inst->hook = NULL;
	}
}
