/* SPDX-License-Identifier: MIT */
/*
 * select.c - which engine keeps a bucket's lock state. The one place that
 * names the engines: a new one is a folder beside lib/shm that fills a
 * struct wlk__engine (engine.h), and a line here.
 */
#include "engine.h"

/*
 * wlk__engine_for() - the engine of @origin's bucket, by @o (read through
 * the size rule; never NULL). Today every bucket is a shared-memory
 * segment on this machine.
 */
const struct wlk__engine *
wlk__engine_for(const char *origin, const struct wlk_manager_options *o)
{
	(void)origin;
	(void)o;
	return &wlk__shm_engine;
}
