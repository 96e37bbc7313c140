/* SPDX-License-Identifier: MIT */
/*
 * spec.h - the spec's algorithms over the tables, all under the segment
 * mutex: request, release, abort and steal (ops.c), the lock request
 * queue and its processing (queue.c), and a name's passage between the
 * fast path and the queue (inflate.c).
 */
#ifndef WLK_SPEC_H
#define WLK_SPEC_H

#include "state.h"

/* queue.c and ops.c: the spec's algorithms; all under the segment mutex. */
struct wlk__enqueue {
	uint32_t client, client_gen;
	uint8_t flags; /* WLK_REQF_* */
	const void *name;
	uint32_t name_len;
	enum wlk_mode mode;
	bool if_available;
	bool steal;
	uint64_t hash; /* wlk__name_hash() of the name, by the caller */
	uint32_t own, own_gen; /* a slot the client keeps in reserve, to use
				* first; WLK_NIL: none */
	bool probed; /* the holders of an if_available miss were reaped */
	bool detect; /* refuse it if it would close a cycle (deadlock.c) */
};
/* What wlk__request_lock() did when it did not fail (errors are < 0). */
enum wlk__requested {
	WLK__REQUESTED = 0,   /* held or pending: read the slot's word */
	WLK__UNAVAILABLE = 1, /* an if_available miss: nothing allocated */
	WLK__UNPROBED = 2,    /* a miss, its holders not probed (reap.c) */
};
int wlk__request_lock(struct wlk__bucket *b, const struct wlk__enqueue *e,
		      struct wlk__wake *wake, uint32_t *slot,
		      uint32_t *gen) WLK_INTERNAL;
/* deadlock.c */
int wlk__would_deadlock(struct wlk__bucket *b, const struct wlk__enqueue *e,
			uint32_t ni) WLK_INTERNAL;
int wlk__release_lock(struct wlk__bucket *b, uint32_t slot, uint32_t gen,
		      bool keep, struct wlk__wake *wake) WLK_INTERNAL;
int wlk__abort_request(struct wlk__bucket *b, uint32_t slot, uint32_t gen,
		       bool closing, struct wlk__wake *wake) WLK_INTERNAL;
int wlk__process_queue(struct wlk__bucket *b, uint32_t n,
		       struct wlk__wake *wake) WLK_INTERNAL;
bool wlk__head_grantable(const struct wlk_seg_name *n, uint8_t mode)
	WLK_INTERNAL;
struct wlk_seg_name *wlk__name_of(struct wlk__bucket *b,
				  struct wlk_seg_request *r,
				  uint32_t *ni) WLK_INTERNAL;
int wlk__enqueue(struct wlk__bucket *b, uint32_t ni, uint32_t ri,
		 struct wlk__wake *wake) WLK_INTERNAL;
int wlk__dequeue(struct wlk__bucket *b, struct wlk_seg_name *n,
		 uint32_t ri) WLK_INTERNAL;
int wlk__ungrant(struct wlk__bucket *b, struct wlk_seg_name *n,
		 uint32_t ri) WLK_INTERNAL;
int wlk__held_add(struct wlk__bucket *b, struct wlk_seg_name *n,
		  uint32_t ri) WLK_INTERNAL;
void wlk__adopt_slot(struct wlk_seg_name *n, struct wlk_seg_request *r,
		     uint32_t state) WLK_INTERNAL;
int wlk__adopt(struct wlk__bucket *b, struct wlk_seg_name *n,
	       uint32_t ri) WLK_INTERNAL;
int wlk__adopt_waiter(struct wlk__bucket *b, struct wlk_seg_name *n,
		      uint32_t ri) WLK_INTERNAL;
int wlk__steal(struct wlk__bucket *b, struct wlk_seg_name *n, uint32_t ri,
	       struct wlk__wake *wake) WLK_INTERNAL;
void wlk__drop_client(struct wlk__bucket *b, uint32_t c, bool dead,
		      struct wlk__wake *wake) WLK_INTERNAL;
int wlk__steal_apply(struct wlk__bucket *b, uint32_t r,
		     struct wlk__wake *wake) WLK_INTERNAL;

/* queue.c */
void wlk__wake_add(struct wlk__bucket *b, struct wlk__wake *wake, uint32_t r)
	WLK_INTERNAL;

/* inflate.c */
void wlk__fast_discard(struct wlk__bucket *b, uint32_t s, uint32_t g)
	WLK_INTERNAL;
int wlk__name_inflate(struct wlk__bucket *b, uint32_t ni) WLK_INTERNAL;
int wlk__idle_inflate(struct wlk__bucket *b) WLK_INTERNAL;
uint32_t wlk__stash_reclaim(struct wlk__bucket *b) WLK_INTERNAL;

#endif /* WLK_SPEC_H */
