/* SPDX-License-Identifier: MIT */
/*
 * api.h - the public API above the engines: what its files (lib/api, and
 * the async leaf above it) share. The objects are engine.h's; the lock
 * state is an engine's, reached only through struct wlk__engine.
 */
#ifndef WLK_API_H
#define WLK_API_H

#include <string.h>

#include "engine.h"

/* request.c */
int wlk__request_run(struct wlk_lock *l, wlk_callback cb, void *arg)
	WLK_INTERNAL;
int wlk__acquire_begin(struct wlk_manager *m, const char *name, size_t len,
		       const struct wlk_options **o, struct wlk_options *copy,
		       struct wlk_lock **out) WLK_INTERNAL;

/*
 * handle.c: lock handles, one spare kept per thread (handle.c says why).
 * The uncontended pair takes and keeps the spare inline; the rest is
 * handle.c's.
 *
 * AddressSanitizer cannot see a second wlk_release() of a handle kept as
 * the spare (it would release whichever later lock reuses it): its builds
 * free every handle, so that it reports the use after free.
 */
#if defined(__SANITIZE_ADDRESS__)
#define WLK__KEEP_SPARE false
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define WLK__KEEP_SPARE false
#endif
#endif
#ifndef WLK__KEEP_SPARE
#define WLK__KEEP_SPARE true
#endif
extern WLK_TLS struct wlk_lock *wlk__spare WLK_INTERNAL;
extern WLK_TLS bool wlk__spare_registered WLK_INTERNAL;
struct wlk_lock *wlk__lock_alloc(size_t head, size_t len) WLK_INTERNAL;
void wlk__lock_free_slow(struct wlk_lock *l) WLK_INTERNAL;
struct wlk_lock *wlk__lock_new_scope(struct wlk_manager *m,
				     const struct wlk_name *names, size_t n,
				     enum wlk_mode mode) WLK_INTERNAL;

/* The base of a new handle but its name (the engine's part is its own). */
static inline void wlk__handle_init(struct wlk_lock *l, struct wlk_manager *m,
				    enum wlk_mode mode,
				    struct wlk__lock_name *scope,
				    uint32_t n_scope)
{
	l->m = m;
	l->mode = mode;
	l->watched = false;
	l->on_stolen = NULL;
	l->scope = scope;
	l->n_scope = n_scope;
	l->counted = true; /* the caller's reference; see wlk__acquire_begin() */
}

/* Whether handle @l may be kept as a spare: a short name's, no scope's. */
static inline bool wlk__spare_keeps(const struct wlk_lock *l)
{
	return l->name_len <= WLK_SHORT_NAME && !l->scope;
}

/*
 * wlk__lock_new() - a new handle for @name (@len bytes) in @mode, for @m's
 * engine: the thread's spare if it fits (a short name, an engine whose
 * handles are as large: where its name starts says), else malloc()'s.
 * Return: the handle, or NULL (out of memory).
 */
static inline struct wlk_lock *wlk__lock_new(struct wlk_manager *m,
					     const char *name, size_t len,
					     enum wlk_mode mode)
{
	size_t head = m->e->lock_size;
	struct wlk_lock *l = wlk__spare;

	if (caa_likely(l && len <= WLK_SHORT_NAME &&
		       (size_t)(l->name - (char *)l) == head)) {
		wlk__spare = NULL;
	} else {
		l = wlk__lock_alloc(head, len);
		if (!l)
			return NULL;
	}
	wlk__handle_init(l, m, mode, NULL, 0);
	l->name_len = len;
	l->name = (char *)l + head;
	wlk__bytes_copy(l->name, name, len);
	l->name[len] = '\0';
	return l;
}

/* wlk__lock_free() - free a handle from wlk__lock_new(), or keep it as the
 * thread's spare; like free(), nothing for NULL. */
static inline void wlk__lock_free(struct wlk_lock *l)
{
	if (WLK__KEEP_SPARE && caa_likely(l && !wlk__spare &&
					  wlk__spare_registered &&
					  wlk__spare_keeps(l))) {
		wlk__spare = l;
		return;
	}
	wlk__lock_free_slow(l);
}

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
