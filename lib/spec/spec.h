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

/* One name of a scope request (scope_new.c): what the caller gives, and
 * the member slot it gets. */
struct wlk__scope_item {
	const void *name;
	uint32_t len;
	uint64_t hash;     /* wlk__name_hash(), by the caller */
	uint32_t slot, gen; /* out: its member */
};

struct wlk__enqueue {
	uint32_t client, client_gen;
	uint8_t flags; /* WLK_REQF_* */
	const void *name;
	uint32_t name_len;
	enum wlk_mode mode;
	bool if_available;
	bool steal;
	uint64_t hash; /* wlk__name_hash() of the name, by the caller */
	uint32_t own, own_gen; /* a slot of the client's reserve it claimed
				* (FAST in own_gen), to use first; WLK_NIL:
				* none */
	bool probed; /* the holders of an if_available miss were reaped */
	bool detect; /* refuse it if it would close a cycle (deadlock.c) */
	/* A scope (layout.h, SCOPES): @n_items names in byte order, unique,
	 * at least two; @name is the first. 0: a single-name request. */
	struct wlk__scope_item *items;
	uint32_t n_items;
};

/* Names whose queues are to run once an operation is done (scope.c). */
#define WLK__NAMES_MAX (2u * WLK_SCOPE_MEMBERS_MAX)
struct wlk__names {
	uint32_t n;
	bool all; /* overflowed: every name in use */
	uint32_t idx[WLK__NAMES_MAX];
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
/* ops.c */
int wlk__unqueue(struct wlk__bucket *b, uint32_t ri,
		 struct wlk__wake *wake) WLK_INTERNAL;
int wlk__unhold(struct wlk__bucket *b, uint32_t ri,
		struct wlk__wake *wake) WLK_INTERNAL;
int wlk__abort_queued(struct wlk__bucket *b, uint32_t ri, uint32_t ci,
		      uint32_t cgen, struct wlk__names *names,
		      struct wlk__wake *wake) WLK_INTERNAL;
/* terminate.c */
void wlk__drop_client(struct wlk__bucket *b, uint32_t c, bool dead,
		      struct wlk__wake *wake) WLK_INTERNAL;
int wlk__steal_apply(struct wlk__bucket *b, uint32_t r,
		     struct wlk__names *names,
		     struct wlk__wake *wake) WLK_INTERNAL;
int wlk__steal_holders(struct wlk__bucket *b, struct wlk_seg_name *n,
		       uint32_t ri, struct wlk__names *names,
		       struct wlk__wake *wake) WLK_INTERNAL;
int wlk__grant_one(struct wlk__bucket *b, struct wlk_seg_name *n,
		   uint32_t ri) WLK_INTERNAL;
int wlk__grant_run(struct wlk__bucket *b, struct wlk_seg_name *n,
		   uint32_t first, uint32_t last, uint32_t k,
		   struct wlk__wake *wake) WLK_INTERNAL;
int wlk__queue_append(struct wlk__bucket *b, struct wlk_seg_name *n,
		      uint32_t ri) WLK_INTERNAL;
int wlk__queue_prepend(struct wlk__bucket *b, struct wlk_seg_name *n,
		       uint32_t ri) WLK_INTERNAL;
void wlk__wake_queue(struct wlk__bucket *b, struct wlk_seg_name *n,
		     struct wlk__wake *wake) WLK_INTERNAL;

/* scope.c, scope_ops.c: requests for a set of names (layout.h, SCOPES) */
int wlk__scope_members(struct wlk__bucket *b, uint32_t ri,
		       uint32_t *out) WLK_INTERNAL;
uint64_t wlk__scope_id(struct wlk__bucket *b, uint32_t ri) WLK_INTERNAL;
uint32_t wlk__scope_lead(struct wlk__bucket *b, const uint32_t *m,
			 int k) WLK_INTERNAL;
bool wlk__member_clear(struct wlk__bucket *b, const struct wlk_seg_name *n,
		       uint32_t ri) WLK_INTERNAL;
int wlk__scope_grant_if_clear(struct wlk__bucket *b, uint32_t ri,
			      struct wlk__wake *wake) WLK_INTERNAL;
int wlk__scope_grant(struct wlk__bucket *b, uint32_t ri,
		     struct wlk__wake *wake) WLK_INTERNAL;
int wlk__grant_members(struct wlk__bucket *b, const uint32_t *m, int k,
		       struct wlk__wake *wake) WLK_INTERNAL;
int wlk__scope_free(struct wlk__bucket *b, uint32_t ri,
		    struct wlk__names *names) WLK_INTERNAL;
int wlk__scope_drop(struct wlk__bucket *b, uint32_t ri, uint32_t skip,
		    struct wlk__wake *wake) WLK_INTERNAL;
int wlk__scope_cut(struct wlk__bucket *b, uint32_t ri,
		   struct wlk__names *names, struct wlk__wake *wake) WLK_INTERNAL;
int wlk__scope_abort(struct wlk__bucket *b, uint32_t ri,
		     struct wlk__wake *wake) WLK_INTERNAL;
int wlk__scope_steal_holder(struct wlk__bucket *b, uint32_t hi,
			    struct wlk__names *names,
			    struct wlk__wake *wake) WLK_INTERNAL;
int wlk__scope_steal_apply(struct wlk__bucket *b, uint32_t ri,
			   struct wlk__names *names,
			   struct wlk__wake *wake) WLK_INTERNAL;
bool wlk__name_available(struct wlk__bucket *b, const struct wlk_seg_name *n,
			 enum wlk_mode mode) WLK_INTERNAL;
void wlk__names_add(struct wlk__names *s, uint32_t ni) WLK_INTERNAL;
int wlk__names_run(struct wlk__bucket *b, struct wlk__names *s,
		   uint32_t skip, struct wlk__wake *wake) WLK_INTERNAL;
int wlk__request_scope(struct wlk__bucket *b, const struct wlk__enqueue *e,
		       struct wlk__wake *wake, uint32_t *slot,
		       uint32_t *gen) WLK_INTERNAL;

/* list.c */
void wlk__wake_add(struct wlk__bucket *b, struct wlk__wake *wake, uint32_t r)
	WLK_INTERNAL;

/* inflate.c */
void wlk__fast_discard(struct wlk__bucket *b, uint32_t s, uint32_t g)
	WLK_INTERNAL;
int wlk__name_inflate(struct wlk__bucket *b, uint32_t ni) WLK_INTERNAL;
int wlk__idle_inflate(struct wlk__bucket *b) WLK_INTERNAL;
int wlk__text_make_room(struct wlk__bucket *b, uint32_t chunks) WLK_INTERNAL;
uint32_t wlk__stash_reclaim(struct wlk__bucket *b) WLK_INTERNAL;

#endif /* WLK_SPEC_H */
