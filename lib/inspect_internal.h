/* SPDX-License-Identifier: MIT */
/*
 * inspect_internal.h - what inspect.c and inspect_copy.c share.
 */
#ifndef WLK_INSPECT_INTERNAL_H
#define WLK_INSPECT_INTERNAL_H

#include "internal.h"
#include "weblocks/inspect.h"

/* An open segment: a bucket view that is not an agent. */
struct wlk_inspect {
	struct wlk__bucket b;
	unsigned int flags;
	unsigned int generation;
	char path[sizeof("/dev/shm/") + WLK_SHM_NAME_MAX];
};

#endif /* WLK_INSPECT_INTERNAL_H */
