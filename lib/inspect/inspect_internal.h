/* SPDX-License-Identifier: MIT */
/*
 * inspect_internal.h - the lookers at a segment: the inspector (inspect.c,
 * inspect_copy.c, the public weblocks/inspect.h), the validator
 * (validate.c) and the snapshot of wlk_query() (query.c). Above attach;
 * the shared-memory engine (lib/shm) uses the last two.
 */
#ifndef WLK_INSPECT_INTERNAL_H
#define WLK_INSPECT_INTERNAL_H

#include "engine.h"
#include "attach.h"
#include "weblocks/inspect.h"

/* An open segment: a bucket view that is not an agent. */
struct wlk_inspect {
	struct wlk__bucket b;
	unsigned int flags;
	unsigned int generation;
	char path[sizeof("/dev/shm/") + WLK_SHM_NAME_MAX];
};

/* query.c */
int wlk__snapshot_take(struct wlk__bucket *b, struct wlk_snapshot **out)
	WLK_INTERNAL;

/* validate.c */
int wlk__validate(struct wlk__bucket *b, bool lock, wlk_violation_cb cb,
		  void *arg) WLK_INTERNAL;

#endif /* WLK_INSPECT_INTERNAL_H */
