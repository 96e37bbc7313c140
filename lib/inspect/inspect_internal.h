/* SPDX-License-Identifier: MIT */
/*
 * inspect_internal.h - what the leaf of lookers shares: the inspector
 * (inspect.c, inspect_copy.c), the validator (validate.c) and query.c.
 */
#ifndef WLK_INSPECT_INTERNAL_H
#define WLK_INSPECT_INTERNAL_H

#include "api.h"
#include "weblocks/inspect.h"

/* An open segment: a bucket view that is not an agent. */
struct wlk_inspect {
	struct wlk__bucket b;
	unsigned int flags;
	unsigned int generation;
	char path[sizeof("/dev/shm/") + WLK_SHM_NAME_MAX];
};

/* validate.c */
int wlk__validate(struct wlk__bucket *b, bool lock, wlk_violation_cb cb,
		  void *arg) WLK_INTERNAL;

#endif /* WLK_INSPECT_INTERNAL_H */
