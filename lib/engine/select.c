/* SPDX-License-Identifier: MIT */
/*
 * select.c - which engine keeps a bucket's lock state. The one place that
 * names the engines: a new one is a folder beside lib/shm that fills a
 * struct wlk__engine (engine.h), and a line here.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine.h"

/* A backend string's scheme, and the one that means this machine. */
#define ETCD_SCHEME "etcd://"
#define SHM_BACKEND "shm"

static int refuse_open(struct wlk_manager *m, const char *origin,
		       const struct wlk_manager_options *o)
{
	(void)m;
	(void)origin;
	(void)o;
	return WLK_ENOTSUPPORTED;
}

static int refuse_remove(const char *origin,
			 const struct wlk_manager_options *o)
{
	(void)origin;
	(void)o;
	return WLK_ENOTSUPPORTED;
}

/* A backend this build does not have (an unknown scheme, or etcd without
 * --enable-etcd): opening and removing fail, so nothing else is called. */
static const struct wlk__engine refused = {
	.name = "none",
	.manager_size = sizeof(struct wlk_manager),
	.lock_size = sizeof(struct wlk_lock),
	.open = refuse_open,
	.remove = refuse_remove,
};

/*
 * wlk__engine_for() - the engine of @origin's bucket, by @o (read through
 * the size rule; never NULL): its backend, or else the environment's
 * (WLK_BACKEND_ENV); none, or "shm", is a shared-memory segment on this
 * machine; "etcd://..." an etcd cluster.
 */
const struct wlk__engine *
wlk__engine_for(const char *origin, const struct wlk_manager_options *o)
{
	const char *b = o->backend;

	(void)origin;
	if (!b || !*b)
		b = getenv(WLK_BACKEND_ENV);
	if (!b || !*b || !strcmp(b, SHM_BACKEND))
		return &wlk__shm_engine;
#ifdef WLK_HAVE_ETCD
	if (!strncasecmp(b, ETCD_SCHEME, strlen(ETCD_SCHEME)))
		return &wlk__etcd_engine;
#endif
	return &refused;
}
