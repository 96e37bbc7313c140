/* SPDX-License-Identifier: MIT */
/*
 * terminate.c - spec 2.6 "terminate remaining locks and requests" of a
 * client: its manager closed, or its process died and was reaped. Its
 * slots are found by its list (layout.h, CLIENT LISTS), so the cost is
 * what the client has, not the size of the bucket. Runs under the
 * segment mutex.
 */
#include "spec.h"

/*
 * The slots a client keeps for the fast path (layout.h, FAST PATH): a
 * reserved one is freed; one its fast path claimed is a held lock or a
 * waiting request if its name's fast word says so (inflated, then released
 * or aborted like any other), and otherwise an acquire in flight, which
 * only a dead owner leaves behind: a live owner finds its client gone and
 * discards the slot itself. Return: 0 or WLK_ECORRUPT.
 */
static int drop_fast(struct wlk__bucket *b, uint32_t ri, uint32_t w,
		     bool dead, struct wlk__wake *wake)
{
	struct wlk_seg_request *r = wlk__req(b, ri);
	uint32_t ni = r->name;
	int rc;

	if (WLK_WORD_STATE(w) == WLK_SLOT_RESERVED) {
		wlk__req_reclaim(b, ri, w);
		return 0;
	}
	if (wlk__name_at(b, ni) &&
	    (wlk__fast_holds(b, ni, ri) || wlk__fast_waits(b, ni, ri))) {
		uint32_t now;

		rc = wlk__name_inflate(b, ni);
		if (rc)
			return rc;
		now = wlk__req(b, ri)->word;
		if (now == WLK_WORD(WLK_WORD_GEN(w), WLK_SLOT_HELD))
			return wlk__unhold(b, ri, wake);
		if (now == WLK_WORD(WLK_WORD_GEN(w), WLK_SLOT_PENDING))
			return wlk__unqueue(b, ri, wake);
		return 0;
	}
	if (dead) {
		wlk__fast_unclaim(b, ri);
		wlk__req_free(b, ri);
	}
	return 0;
}

/* Step 1 for one slot of the client: abort it if it is a request, pending
 * or its name's fast waiter (inflated: then it is pending). Return: 0 or
 * WLK_ECORRUPT. */
static int abort_own(struct wlk__bucket *b, uint32_t ri, uint32_t ci,
		     uint32_t cgen, struct wlk__names *names,
		     struct wlk__wake *wake)
{
	struct wlk_seg_request *r = wlk__req(b, ri);
	uint32_t w = uatomic_read(&r->word);

	if (WLK_WORD_STATE(w) == WLK_SLOT_FAST) {
		uint32_t ni = uatomic_read(&r->name);
		int rc;

		if (!wlk__name_at(b, ni) || !wlk__fast_waits(b, ni, ri))
			return 0;
		rc = wlk__name_inflate(b, ni);
		if (rc)
			return rc;
		w = uatomic_read(&r->word);
	}
	if (WLK_WORD_STATE(w) == WLK_SLOT_PENDING)
		return wlk__abort_queued(b, ri, ci, cgen, names, wake);
	return 0;
}

/* Whether @ri is still client @ci's (gen @gen), on its list. */
static bool still_own(struct wlk__bucket *b, uint32_t ri, uint32_t ci,
		      uint32_t gen)
{
	const struct wlk_seg_request *r = wlk__req(b, ri);

	return WLK_WORD_STATE(uatomic_read(&r->word)) != WLK_SLOT_FREE &&
	       r->client == ci && r->client_gen == gen;
}

/*
 * Step 2 for one slot @ri of client @ci (@gen), after step 1: release it if
 * held, drop it if still pending (damage: in no queue) or kept for the fast
 * path. Return: whether damage was found.
 */
static bool drop_own(struct wlk__bucket *b, uint32_t ri, uint32_t ci,
		     uint32_t gen, bool dead, struct wlk__wake *wake)
{
	struct wlk_seg_request *r = wlk__req(b, ri);
	uint32_t w = uatomic_read(&r->word);
	uint32_t state = WLK_WORD_STATE(w);

	if (!still_own(b, ri, ci, gen))
		return false;
	if (state == WLK_SLOT_RESERVED || state == WLK_SLOT_FAST)
		return drop_fast(b, ri, w, dead, wake) != 0;
	if (r->flags & WLK_REQF_SCOPE)
		/* The whole scope, on every name; its other members are
		 * FREE when the walk comes to them. */
		return wlk__scope_abort(b, ri, wake) != 0;
	wlk__wake_add(b, wake, ri);
	WLK_FAILPOINT(drop_client_mid);
	if (state == WLK_SLOT_PENDING)
		return wlk__unqueue(b, ri, wake) != 0;
	if (state == WLK_SLOT_HELD)
		return wlk__unhold(b, ri, wake) != 0;
	wlk__req_free(b, ri);
	return false;
}

/* Whether damage was found since the mutex was taken (which repairs). */
static bool flagged(struct wlk__bucket *b)
{
	return uatomic_read(&b->hdr->needs_repair) != 0;
}

/*
 * Step 1 over the client's list (layout.h, CLIENT LISTS). An aborted
 * request leaves the list, and so do the client's others in its queue:
 * the walk goes on from the last slot that stayed, which step 1 never
 * frees (it is held, kept, or a request in no queue). Return: false if
 * the list is damaged, or that slot went after all: the caller walks
 * the table (abort_own() again is a no-op on what it did).
 */
static bool abort_listed(struct wlk__bucket *b, uint32_t ci, uint32_t gen,
			 struct wlk__names *names, struct wlk__wake *wake,
			 bool *damaged)
{
	uint32_t stayed = WLK_NIL, ri;

	for (uint32_t steps = 0;; steps++) {
		if (stayed != WLK_NIL && !still_own(b, stayed, ci, gen))
			return false;
		if (!wlk__client_next(b, ci, gen, stayed, &ri, steps))
			return false;
		if (ri == WLK_NIL)
			return true;
		if (abort_own(b, ri, ci, gen, names, wake))
			*damaged = true;
		if (still_own(b, ri, ci, gen))
			stayed = ri;
	}
}

/*
 * Step 2 over the client's list: each slot leaves it as drop_own() frees
 * it, or is taken off (an acquire in flight on the fast path, which its
 * live owner frees: drop_fast()). Return: false if the list is damaged:
 * the caller walks the table.
 */
static bool drop_listed(struct wlk__bucket *b, uint32_t ci, uint32_t gen,
			bool dead, struct wlk__wake *wake, bool *damaged)
{
	uint32_t ri;

	for (uint32_t steps = 0;; steps++) {
		if (!wlk__client_next(b, ci, gen, WLK_NIL, &ri, steps))
			return false;
		if (ri == WLK_NIL)
			return true;
		*damaged |= drop_own(b, ri, ci, gen, dead, wake);
		if (wlk__client(b, ci)->reqs == ri)
			wlk__client_unlink(b, ri);
	}
}

/*
 * wlk__drop_client() - spec 2.6 "terminate remaining locks and requests"
 * for one client: abort its requests, release its locks, then forget it.
 * @dead: its process is gone (reaped), rather than closing the manager.
 * Two steps over its slots, in the spec's order: releasing a lock first
 * would grant the client's own request queued behind it for an instant,
 * and give it a fencing token. The queues of the other names of the scopes
 * the first step aborts run once it is done, for the same reason. The
 * second step also drops what the first could not (a request in no queue:
 * damage that recovery repairs).
 * The steps walk the client's list of its slots (layout.h, CLIENT LISTS),
 * so a close costs what the client has, not the size of the bucket. A
 * step that finds damage, in the list or anywhere (a link that an unlink
 * found broken leaves a list that looks whole, and short), walks the
 * whole table after it: what it did, done again, changes nothing.
 * A step that finds damage does not stop the others: the client goes
 * anyway, and the segment is flagged for repair by the next locker.
 */
void wlk__drop_client(struct wlk__bucket *b, uint32_t ci, bool dead,
		      struct wlk__wake *wake)
{
	uint32_t gen = WLK_WORD_GEN(wlk__client(b, ci)->word);
	struct wlk__names names = {0};
	bool damaged = false;

	if (!abort_listed(b, ci, gen, &names, wake, &damaged) || flagged(b))
		for (uint32_t ri = 0; ri < b->geo.max_requests; ri++)
			if (still_own(b, ri, ci, gen) &&
			    abort_own(b, ri, ci, gen, &names, wake))
				damaged = true;
	if (wlk__names_run(b, &names, WLK_NIL, wake))
		damaged = true;
	if (!drop_listed(b, ci, gen, dead, wake, &damaged) || flagged(b))
		for (uint32_t ri = 0; ri < b->geo.max_requests; ri++)
			damaged |= drop_own(b, ri, ci, gen, dead, wake);
	wlk__client_free(b, ci);
	if (damaged)
		wlk__corrupt(b);
}
