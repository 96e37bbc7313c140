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

/* order.c */
void wlk__async_settled(struct wlk_async *r) WLK_INTERNAL;
void wlk__async_join(struct wlk_manager *m, struct wlk_async *r,
		     const struct wlk_options *o) WLK_INTERNAL;
void wlk__async_leave(struct wlk_async *r) WLK_INTERNAL;
void wlk__async_loosen(struct wlk_manager *m, struct wlk_async *r) WLK_INTERNAL;
size_t wlk__async_collect_ordered(struct wlk_manager *m,
				  struct cds_list_head *done) WLK_INTERNAL;
void wlk__async_sort(struct cds_list_head *list) WLK_INTERNAL;
void wlk__async_collect_all(struct wlk_manager *m,
			    struct cds_list_head *done) WLK_INTERNAL;

#endif /* WLK_ASYNC_INTERNAL_H */
