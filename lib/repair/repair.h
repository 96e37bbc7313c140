/* SPDX-License-Identifier: MIT */
/*
 * repair.h - making the segment whole again: the one entry point that
 * locks the segment mutex and repairs what a dead owner left (mutex.c),
 * reaping dead processes (reap.c), and rebuilding the lists from the slot
 * words (recover.c).
 */
#ifndef WLK_REPAIR_H
#define WLK_REPAIR_H

#include "spec.h"

/* mutex.c: the only place that locks the segment mutex. */
int wlk__lock_until(struct wlk__bucket *b, struct wlk__wake *wake,
		    uint64_t deadline, const int *stop)
	WLK_INTERNAL;
/* Without a deadline or signal: waits for the mutex as long as it takes. */
static inline int wlk__lock(struct wlk__bucket *b, struct wlk__wake *wake)
{
	return wlk__lock_until(b, wake, 0, NULL);
}
void wlk__unlock(struct wlk__bucket *b, struct wlk__wake *wake) WLK_INTERNAL;
void wlk__segment_poison(struct wlk__bucket *b) WLK_INTERNAL;

/* reap.c, for async_pid.c */
bool wlk__blockers_live(struct wlk__bucket *b, uint32_t ri,
			struct wlk__wake *wake, uint32_t *agents,
			unsigned int max, unsigned int *n) WLK_INTERNAL;

/* reap.c */
uint32_t *wlk__lifeline_word(struct wlk__bucket *b, uint32_t ai) WLK_INTERNAL;
bool wlk__reap_all(struct wlk__bucket *b, struct wlk__wake *wake) WLK_INTERNAL;
bool wlk__reap_agent(struct wlk__bucket *b, uint32_t ai,
		     struct wlk__wake *wake) WLK_INTERNAL;
int wlk__client_reaping(struct wlk__bucket *b, const char *id, uint64_t now,
			uint32_t *out, struct wlk__wake *wake) WLK_INTERNAL;
int wlk__request_reaping(struct wlk__bucket *b, const struct wlk__enqueue *e,
			 struct wlk__wake *wake, uint32_t *slot,
			 uint32_t *gen) WLK_INTERNAL;
bool wlk__watch_set(struct wlk__bucket *b, uint32_t ri, struct wlk__wake *wake,
		    struct wlk__waitv *v, unsigned int max,
		    unsigned int *n) WLK_INTERNAL;

/* recover.c */
int wlk__recover(struct wlk__bucket *b, struct wlk__wake *wake) WLK_INTERNAL;
int wlk__segment_format(struct wlk__bucket *b) WLK_INTERNAL;

#endif /* WLK_REPAIR_H */
