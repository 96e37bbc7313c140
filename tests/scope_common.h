/* SPDX-License-Identifier: MIT */
/*
 * scope_common.h - what the scope tests share: a name literal, and
 * asynchronous requests (weblocks/async.h) as a way to have many requests
 * queued from one thread, each recording how it completed.
 */
#ifndef WLK_TESTS_SCOPE_COMMON_H
#define WLK_TESTS_SCOPE_COMMON_H

#include <stdatomic.h>

#include "common.h"
#include "weblocks/async.h"

#define N(s) { (s), WLK_NUL_TERMINATED }

static const struct wlk_options sh = {.mode = WLK_SHARED};

/* One asynchronous request: how it completed. */
struct rec {
	atomic_int calls;
	int status;
	struct wlk_lock *lock;
};

static inline void rec_done(struct wlk_async *req, int status,
			    struct wlk_lock *lock, void *arg)
{
	struct rec *r = arg;

	(void)req;
	r->status = status;
	r->lock = lock;
	atomic_fetch_add(&r->calls, 1);
}

static inline void rec_scope(struct wlk_manager *m,
			     const struct wlk_name *names, size_t n,
			     const struct wlk_options *o, struct rec *r)
{
	T_ASSERT_RC(wlk_request_scope_async(m, names, n, o, rec_done, r,
					    NULL),
		    0);
}

static inline void rec_single(struct wlk_manager *m, const char *name,
			      const struct wlk_options *o, struct rec *r)
{
	T_ASSERT_RC(wlk_request_async(m, name, WLK_NUL_TERMINATED, o, rec_done,
				      r, NULL),
		    0);
}

/* Dispatch @m until @r completed, which it must with @status. */
static inline void rec_wait(struct wlk_manager *m, struct rec *r, int status)
{
	cr_assert(t_pump(m, &r->calls, 1, T_WAIT_MS), "never completed");
	T_ASSERT_RC(r->status, status);
}

/* Whether @r has completed, after dispatching what @m has ready. */
static inline bool rec_now(struct wlk_manager *m, struct rec *r)
{
	cr_assert_geq(t_dispatch_ready(m), 0);
	return atomic_load(&r->calls) > 0;
}

static inline void rec_release(struct rec *r)
{
	cr_assert_not_null(r->lock);
	T_ASSERT_RC(wlk_release(r->lock), 0);
	r->lock = NULL;
}

#endif /* WLK_TESTS_SCOPE_COMMON_H */
