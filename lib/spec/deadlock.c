/* SPDX-License-Identifier: MIT */
/*
 * deadlock.c - the opt-in refusal of a request that would close a cycle of
 * clients waiting for each other (wlk_manager_options.detect_deadlocks,
 * WLK_EDEADLK). An extension: the spec has no such error.
 *
 * The waits-for graph is shm-inspect's (tools/deadlock.c): a pending
 * request waits for the other clients that hold a conflicting lock on its
 * name or are queued ahead of it with a conflicting request. A new request
 * that would wait closes a cycle if its own client is reachable from the
 * clients it would wait for. The search runs under the segment mutex over
 * the busy names (layout.h, NAME LISTS), growing the set of reachable
 * clients until it stops growing: a bitmap of the client table on the
 * stack, no allocation. It costs O(clients x pending x queue) at worst,
 * paid only by requests of managers that ask for it.
 *
 * Fast waiters (FAST PATH) are in no queue: names with one are inflated
 * first, so that they are. A manager with detection never waits that way
 * itself (shm/acquire.c), so a cycle of such managers is always seen by
 * the request that closes it. A cycle closed by a request of a manager
 * without detection is not refused; and a client may wait for something
 * other than a lock of this bucket, which no graph here can see.
 */
#include "spec.h"

/* One bit per client slot. */
#define REACH_WORDS ((WLK_MAX_CLIENTS + 63) / 64)

struct reach {
	uint64_t bit[REACH_WORDS];
	bool grew;
};

static bool reach_has(const struct reach *x, uint32_t c)
{
	return c < WLK_MAX_CLIENTS && (x->bit[c / 64] >> (c % 64)) & 1;
}

static void reach_add(struct reach *x, uint32_t c)
{
	if (c < WLK_MAX_CLIENTS && !reach_has(x, c)) {
		x->bit[c / 64] |= 1ull << (c % 64);
		x->grew = true;
	}
}

static bool conflict(uint8_t a, uint8_t b)
{
	return a != WLK_SHARED || b != WLK_SHARED;
}

/*
 * Add to @x the clients that a request of @client in @mode waits for on
 * name @n: conflicting holders, and conflicting requests queued ahead of
 * @upto (WLK_NIL: all of the queue). Return: false on a bad link.
 */
static bool waits_for(struct wlk__bucket *b, const struct wlk_seg_name *n,
		      uint32_t client, uint8_t mode, uint32_t upto,
		      struct reach *x)
{
	uint32_t lists[2] = {n->h_head, n->q_head};

	for (int l = 0; l < 2; l++) {
		uint32_t i = lists[l];

		for (uint32_t steps = 0; i != WLK_NIL && i != upto; steps++) {
			const struct wlk_seg_request *r = wlk__req_at(b, i);

			if (!r || !wlk__walk_ok(b, steps))
				return false;
			if (r->client != client && conflict(mode, r->mode))
				reach_add(x, r->client);
			i = r->next;
		}
	}
	return true;
}

/* One pass over the busy names: what the clients in @x wait for joins
 * @x. Return: false on a bad link. */
static bool grow(struct wlk__bucket *b, struct reach *x)
{
	uint32_t ni = b->hdr->busy_head;

	for (uint32_t steps = 0; ni != WLK_NIL; steps++) {
		const struct wlk_seg_name *n = wlk__name_at(b, ni);
		uint32_t ri;

		if (!n || steps >= b->geo.max_names)
			return false;
		ri = n->q_head;
		for (uint32_t k = 0; ri != WLK_NIL; k++) {
			const struct wlk_seg_request *r = wlk__req_at(b, ri);

			if (!r || !wlk__walk_ok(b, k))
				return false;
			if (reach_has(x, r->client) &&
			    !waits_for(b, n, r->client, r->mode, ri, x))
				return false;
			ri = r->next;
		}
		ni = n->list_next;
	}
	return true;
}

/* Names waited for by a fast waiter join the queues (idle names only: a
 * busy name has no fast path). Return: 0, or WLK_ECORRUPT. */
static int queue_fast_waiters(struct wlk__bucket *b)
{
	uint32_t ni = b->hdr->idle_head;

	for (uint32_t steps = 0; ni != WLK_NIL; steps++) {
		struct wlk_seg_name *n = wlk__name_at(b, ni);
		uint32_t next;
		int rc;

		if (!n || steps >= b->geo.max_names)
			return wlk__corrupt(b);
		next = n->list_next;
		if (uatomic_read(&n->waiter)) {
			rc = wlk__name_inflate(b, ni);
			if (rc)
				return rc;
		}
		ni = next;
	}
	return 0;
}

/*
 * wlk__would_deadlock() - under the mutex: whether request @e, about to be
 * queued on name @ni (WLK_NIL: a new name, which nobody holds), would wait
 * for a client that waits, directly or not, for @e's own client.
 * Return: 0 (no cycle), WLK_EDEADLK, or WLK_ECORRUPT.
 */
int wlk__would_deadlock(struct wlk__bucket *b, const struct wlk__enqueue *e,
			uint32_t ni)
{
	struct reach x = {{0}, false};
	const struct wlk_seg_name *n = wlk__name_at(b, ni);
	int rc;

	if (!n)
		return 0;
	rc = queue_fast_waiters(b);
	if (rc)
		return rc;
	if (!waits_for(b, n, e->client, (uint8_t)e->mode, WLK_NIL, &x))
		return wlk__corrupt(b);
	while (x.grew && !reach_has(&x, e->client)) {
		x.grew = false;
		if (!grow(b, &x))
			return wlk__corrupt(b);
	}
	return reach_has(&x, e->client) ? WLK_EDEADLK : 0;
}
