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
WLK_TLS struct wlk_lock *wlk__spare;
WLK_TLS bool wlk__spare_registered;
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
static bool spare_key_ok;

static void spare_exit(void *unused)
{
	(void)unused;
	free(wlk__spare);
	wlk__spare = NULL;
}

static void spare_key_init(void)
{
	spare_key_ok = pthread_key_create(&spare_key, spare_exit) == 0;
}

/* wlk__lock_free()'s rest (api.h): free @l, or keep it as the thread's
 * first spare once its exit can free it. */
void wlk__lock_free_slow(struct wlk_lock *l)
{
	if (!l)
		return;
	if (!WLK__KEEP_SPARE || !wlk__spare_keeps(l) || wlk__spare_registered) {
		free(l);
		return;
	}
	pthread_once(&spare_once, spare_key_init);
	if (!spare_key_ok || pthread_setspecific(spare_key, (void *)1) != 0) {
		free(l);
		return;
	}
	wlk__spare_registered = true;
	wlk__spare = l;
}

/* wlk__lock_new()'s rest (api.h): a handle of @head + @len bytes and a
 * NUL, from malloc(); a short name's has room for any short name, so
 * that it may be kept as the spare. */
struct wlk_lock *wlk__lock_alloc(size_t head, size_t len)
{
	return malloc(head + (len <= WLK_SHORT_NAME ? WLK_SHORT_NAME : len) +
		      1);
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
	wlk__handle_init(l, m, mode,
			 (struct wlk__lock_name *)((char *)l + head),
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
