/* SPDX-License-Identifier: MIT */
/*
 * handle.c - lock handles (struct wlk_lock): allocated per request, freed
 * by wlk_release(), with one spare kept per thread so that an uncontended
 * acquire+release pair does no malloc() or free().
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

/*
 * One spare lock handle per thread, for names of up to WLK_SHORT_NAME bytes:
 * an acquire+release pair then costs no malloc()/free(). A thread's spare
 * is freed when it exits, through a key destructor registered the first
 * time it keeps one. A handle is its engine's lock struct (the engine's
 * lock_size) followed by the name: the spare serves an engine whose
 * handles are as large (where its name starts says).
 */
/*
 * AddressSanitizer cannot see a second wlk_release() of a handle kept as
 * the spare (it would release whichever later lock reuses it): its builds
 * free every handle, so that it reports the use after free.
 */
#if defined(__SANITIZE_ADDRESS__)
#define KEEP_SPARE false
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KEEP_SPARE false
#endif
#endif
#ifndef KEEP_SPARE
#define KEEP_SPARE true
#endif

static WLK_TLS struct wlk_lock *spare;
static WLK_TLS bool spare_registered;
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
static bool spare_key_ok;

static void spare_exit(void *unused)
{
	(void)unused;
	free(spare);
	spare = NULL;
}

static void spare_key_init(void)
{
	spare_key_ok = pthread_key_create(&spare_key, spare_exit) == 0;
}

/* Free a handle from wlk__lock_new(), or keep it as the thread's spare;
 * like free(), nothing for NULL. */
void wlk__lock_free(struct wlk_lock *l)
{
	if (!l)
		return;
	if (!KEEP_SPARE || l->name_len > WLK_SHORT_NAME || spare || l->scope) {
		free(l);
		return;
	}
	if (!spare_registered) {
		pthread_once(&spare_once, spare_key_init);
		if (!spare_key_ok ||
		    pthread_setspecific(spare_key, (void *)1) != 0) {
			free(l);
			return;
		}
		spare_registered = true;
	}
	spare = l;
}

/* The base of a new handle but its name (the engine's part is its own). */
static inline void handle_init(struct wlk_lock *l, struct wlk_manager *m,
			       enum wlk_mode mode,
			       struct wlk__lock_name *scope, uint32_t n_scope)
{
	l->m = m;
	l->mode = mode;
	l->watched = false;
	l->on_stolen = NULL;
	l->scope = scope;
	l->n_scope = n_scope;
	l->counted = true; /* the caller's reference; see wlk__acquire_begin() */
}

struct wlk_lock *wlk__lock_new(struct wlk_manager *m, const char *name,
			       size_t len, enum wlk_mode mode)
{
	size_t head = m->e->lock_size;
	struct wlk_lock *l = NULL;

	if (len <= WLK_SHORT_NAME) {
		if (spare && (size_t)(spare->name - (char *)spare) == head) {
			l = spare;
			spare = NULL;
		}
		if (!l)
			l = malloc(head + WLK_SHORT_NAME + 1);
	} else {
		l = malloc(head + len + 1);
	}
	if (!l)
		return NULL;
	handle_init(l, m, mode, NULL, 0);
	l->name_len = len;
	l->name = (char *)l + head;
	memcpy(l->name, name, len);
	l->name[len] = '\0';
	return l;
}

/*
 * wlk__lock_new_scope() - a handle for the scope @names[0..n) (n >= 2, in
 * byte order, unique): one allocation, the names copied after the
 * engine's part and the table; never the spare.
 */
struct wlk_lock *wlk__lock_new_scope(struct wlk_manager *m,
				     const struct wlk_name *names, size_t n,
				     enum wlk_mode mode)
{
	size_t head = m->e->lock_size, bytes = 0, table;
	struct wlk_lock *l;
	char *p;

	for (size_t i = 0; i < n; i++)
		bytes += names[i].len + 1;
	table = n * sizeof(struct wlk__lock_name);
	l = malloc(head + table + bytes);
	if (!l)
		return NULL;
	handle_init(l, m, mode, (struct wlk__lock_name *)((char *)l + head),
		    (uint32_t)n);
	p = (char *)l->scope + table;
	for (size_t i = 0; i < n; i++) {
		memcpy(p, names[i].name, names[i].len);
		p[names[i].len] = '\0';
		l->scope[i] = (struct wlk__lock_name){.name = p,
						      .len = names[i].len};
		p += names[i].len + 1;
	}
	l->name = (char *)l->scope[0].name;
	l->name_len = l->scope[0].len;
	return l;
}
