/* SPDX-License-Identifier: MIT */
/*
 * api.h - the public API above the engines: what its files (lib/api, and
 * the async leaf above it) share. The objects are engine.h's; the lock
 * state is an engine's, reached only through struct wlk__engine.
 */
#ifndef WLK_API_H
#define WLK_API_H

#include "engine.h"

/* request.c */
int wlk__request_run(struct wlk_lock *l, wlk_callback cb, void *arg)
	WLK_INTERNAL;
int wlk__acquire_begin(struct wlk_manager *m, const char *name, size_t len,
		       const struct wlk_options **o, struct wlk_options *copy,
		       struct wlk_lock **out) WLK_INTERNAL;

/* handle.c */
struct wlk_lock *wlk__lock_new(struct wlk_manager *m, const char *name,
			       size_t len, enum wlk_mode mode) WLK_INTERNAL;
void wlk__lock_free(struct wlk_lock *l) WLK_INTERNAL;
struct wlk_lock *wlk__lock_new_scope(struct wlk_manager *m,
				     const struct wlk_name *names, size_t n,
				     enum wlk_mode mode) WLK_INTERNAL;

/* scope.c: a scope's checks and its sorted, unique names (free() them). */
int wlk__scope_begin(struct wlk_manager *m, const struct wlk_name *names,
		     size_t n, const struct wlk_options **o,
		     struct wlk_options *copy, struct wlk_lock **out)
	WLK_INTERNAL;

/* manager.c */
bool wlk__manager_enter(struct wlk_manager *m) WLK_INTERNAL;
void wlk__manager_leave(struct wlk_manager *m) WLK_INTERNAL;

/* Whether @m takes calls: open, and this process's (not a fork child's
 * inherited copy). A call that takes no reference checks this (PINS). */
static inline bool wlk__manager_usable(const struct wlk_manager *m)
{
	return m->fork_gen == wlk__fork_gen() && !uatomic_read(&m->closed);
}

/*
 * wlk__acquire_with() - the engine's acquire of new handle @l, after the
 * checks: 0 with *@out the lock, or NULL for an if_available miss (@l
 * freed and its manager reference, if it took one, dropped); an error,
 * likewise.
 * Inline: the uncontended path keeps one frame.
 */
static inline __attribute__((always_inline)) int
wlk__acquire_with(struct wlk_manager *m, struct wlk_lock *l,
		  const struct wlk_options *o, struct wlk_lock **out)
{
	bool held = false;
	int rc = m->e->acquire(m, l, o, &held);

	if (rc || !held) {
		/* Without a reference, the engine let go of @m already: it
		 * may be gone (a close meanwhile). */
		bool counted = l->counted;

		wlk__lock_free(l);
		if (counted)
			wlk__manager_leave(m);
		*out = NULL;
		return rc;
	}
	*out = l; /* keeps its manager reference, or its engine's pin */
	return 0;
}

#endif /* WLK_API_H */
