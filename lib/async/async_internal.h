/* SPDX-License-Identifier: MIT */
/*
 * async_internal.h - what the asynchronous request files share.
 */
#ifndef WLK_ASYNC_INTERNAL_H
#define WLK_ASYNC_INTERNAL_H

#include "api.h"

/* dispatch.c */
int wlk__async_get(struct wlk_manager *m) WLK_INTERNAL;

#endif /* WLK_ASYNC_INTERNAL_H */
