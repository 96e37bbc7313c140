/* SPDX-License-Identifier: MIT */
/*
 * async_internal.h - what the asynchronous request files share.
 */
#ifndef WLK_ASYNC_INTERNAL_H
#define WLK_ASYNC_INTERNAL_H

#include "api.h"

/* dispatch.c */
int wlk__async_get(struct wlk_manager *m) WLK_INTERNAL;
void wlk__async_give_up(struct wlk_manager *m, struct wlk_async *r,
			int why) WLK_INTERNAL;

#endif /* WLK_ASYNC_INTERNAL_H */
