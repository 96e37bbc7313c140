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
 * stack, no allocation. A pass costs one walk of every busy name's lists
 * (and 16-word bitmap ORs), and the set grows at least once per pass:
 * O(clients x held and pending requests) at worst, paid only by requests
 * of managers that ask for it.
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
 * Add to @x the clients other than @client that a new request of @client
 * in @mode would wait for on name @n: those holding it, or queued for it,
 * in a conflicting mode. Return: false on a bad link.
 */
static bool waits_for(struct wlk__bucket *b, const struct wlk_seg_name *n,
		      uint32_t client, uint8_t mode, struct reach *x)
{
	uint32_t lists[2] = {n->h_head, n->q_head};

	for (int l = 0; l < 2; l++) {
		uint32_t i = lists[l];

		for (uint32_t steps = 0; i != WLK_NIL; steps++) {
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

static void reach_or(struct reach *x, const struct reach *y)
{
	for (unsigned int i = 0; i < REACH_WORDS; i++) {
		uint64_t add = y->bit[i] & ~x->bit[i];

		x->bit[i] |= add;
		x->grew |= add != 0;
	}
}

/*
 * What the requests of name @n whose clients are in @x wait for joins @x,
 * in one walk of its lists: the clients of its holders and of the
 * requests queued so far, all of them and the exclusive ones, are kept as
 * it goes (an exclusive request waits for all, a shared one for the
 * exclusive ones). A client's wait for itself adds nothing: it is in @x.
 * Return: false on a bad link.
 */
static bool grow_name(struct wlk__bucket *b, const struct wlk_seg_name *n,
		      struct reach *x)
{
	struct reach all = {{0}, false}, excl = {{0}, false};
	uint32_t lists[2] = {n->h_head, n->q_head};

	for (int l = 0; l < 2; l++) {
		uint32_t i = lists[l];

		for (uint32_t steps = 0; i != WLK_NIL; steps++) {
			const struct wlk_seg_request *r = wlk__req_at(b, i);

			if (!r || !wlk__walk_ok(b, steps))
				return false;
			if (l == 1 && reach_has(x, r->client))
				reach_or(x, r->mode == WLK_SHARED ? &excl
								  : &all);
			reach_add(&all, r->client);
			if (r->mode != WLK_SHARED)
				reach_add(&excl, r->client);
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

		if (!n || steps >= b->geo.max_names || !grow_name(b, n, x))
			return false;
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
	if (!waits_for(b, n, e->client, (uint8_t)e->mode, &x))
		return wlk__corrupt(b);
	while (x.grew && !reach_has(&x, e->client)) {
		x.grew = false;
		if (!grow(b, &x))
			return wlk__corrupt(b);
	}
	return reach_has(&x, e->client) ? WLK_EDEADLK : 0;
}
