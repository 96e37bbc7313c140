/* SPDX-License-Identifier: MIT */
/*
 * queue.c - the spec's "process the lock request queue" (4.4) and the
 * steal branch of "request a lock" (4.1), over a name's lists (list.c),
 * with scopes (scope.c) in them.
 *
 * All of it runs under the segment mutex, as the spec's steps run on the
 * lock task queue.
 */
#include <errno.h>

#include "spec.h"

/* Shared requests at the head that are granted as one run, not one by
 * one (two: then none of them can be the name's only request). */
#define RUN_MIN 2

/* Grant a request that is in no list, and wake its waiter. */
static int grant(struct wlk__bucket *b, struct wlk_seg_name *n, uint32_t ri,
		 struct wlk__wake *wake)
{
	int rc = wlk__grant_one(b, n, ri);

	if (!rc)
		wlk__wake_add(b, wake, ri);
	return rc;
}

/*
 * Grant the last request of a name that nobody else holds through the
 * name's fast word (layout.h, FAST PATH): the name goes back to the fast
 * path at once, held, and its holder's thread (shm/acquire.c) releases it
 * there, or hands it to a fast waiter. Two processes taking turns on a
 * name thus leave the mutex as soon as one of them finds it free.
 */
static int grant_fast(struct wlk__bucket *b, uint32_t ni, uint32_t ri,
		      struct wlk__wake *wake)
{
	struct wlk_seg_name *n = wlk__name(b, ni);
	struct wlk_seg_request *r = wlk__req(b, ri);
	uint32_t gen = WLK_WORD_GEN(r->word);

	r->token = uatomic_add_return(&n->token, 1);
	r->stamp_ns = wlk__stamp_ns();
	/*
	 * The fast word first: FAST means held only while the fast word
	 * names the slot, and the requester takes the lock as soon as it
	 * sees FAST. A process that dies between the two stores leaves a
	 * PENDING request out of the queue, which recovery queues again.
	 */
	wlk__fast_grant(b, ni, ri, gen, (enum wlk_mode)r->mode);
	wlk__word_store(&r->word, WLK_WORD(gen, WLK_SLOT_FAST));
	wlk__name_put(b, ni);
	wlk__wake_add(b, wake, ri);
	return 0;
}

/*
 * The run of plain shared requests that opens name @n's queue at @ri:
 * how many (at most until a scope member, an exclusive request or the
 * end), and its last. A batch grant of them all is the same as granting
 * them one by one, none of them alone on the name (so none through the
 * fast word). Return: the count, 0 if the walk finds damage.
 */
static uint32_t shared_run(struct wlk__bucket *b, uint32_t ri,
			   uint32_t *last)
{
	uint32_t k = 0;

	for (; ri != WLK_NIL; k++) {
		const struct wlk_seg_request *r = wlk__req_at(b, ri);

		if (!r || !wlk__walk_ok(b, k))
			return 0;
		if (r->mode != WLK_SHARED || (r->flags & WLK_REQF_SCOPE))
			break;
		*last = ri;
		ri = r->next;
	}
	return k;
}

/*
 * Spec 4.4: grant requests from the head of the name's queue for as long
 * as they are grantable. Without scopes that is the head, again and again.
 * A scope member is granted with its whole scope when every member is
 * clear (layout.h, SCOPES); a shared one that is not is passed over, and
 * the shared requests behind it are still granted (the draft's rule), but
 * nothing exclusive is.
 */
static int grant_from_head(struct wlk__bucket *b, uint32_t ni,
			   struct wlk__wake *wake)
{
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint32_t ri = n->q_head;
	bool first = true; /* nothing passed over yet */

	for (uint32_t steps = 0; ri != WLK_NIL; steps++) {
		struct wlk_seg_request *r = wlk__req_at(b, ri);
		uint32_t next, last, k;
		int rc;

		if (!r || !wlk__walk_ok(b, steps))
			return wlk__corrupt(b);
		next = r->next;
		if (!wlk__head_grantable(n, r->mode) ||
		    (!first && r->mode != WLK_SHARED))
			return 0;
		if (r->flags & WLK_REQF_SCOPE) {
			rc = wlk__scope_grant_if_clear(b, ri, wake);
			if (rc == 0) { /* passed over */
				if (r->mode != WLK_SHARED)
					return 0;
				first = false;
				ri = next;
				continue;
			}
			rc = rc < 0 ? rc : 0;
		} else if (r->mode == WLK_SHARED && ri == n->q_head &&
			   (k = shared_run(b, ri, &last)) >= RUN_MIN) {
			rc = wlk__grant_run(b, n, ri, last, k, wake);
			next = rc ? WLK_NIL : n->q_head;
		} else {
			rc = wlk__dequeue(b, n, ri);
			if (!rc && wlk__name_idle(n) &&
			    (r->flags & WLK_REQF_LANE))
				return grant_fast(b, ni, ri, wake);
			if (!rc)
				rc = grant(b, n, ri, wake);
		}
		if (rc)
			return rc;
		ri = next;
	}
	return 0;
}

/*
 * wlk__process_queue() - spec 4.4 for name @ni (grant_from_head()); then
 * the request first in its queue, if its blocked waiter watches only the
 * agents nearest the head as they were when it queued further back
 * (WLK_REQF_PARTIAL, repair/reap.c), is woken to look again: those that
 * block it now are its to watch.
 */
int wlk__process_queue(struct wlk__bucket *b, uint32_t ni,
		       struct wlk__wake *wake)
{
	struct wlk_seg_name *n = wlk__name(b, ni);
	int rc = grant_from_head(b, ni, wake);
	uint32_t hi = n->q_head;
	struct wlk_seg_request *h;

	if (rc || hi == WLK_NIL || !(h = wlk__req_at(b, hi)))
		return rc;
	if ((h->flags & (WLK_REQF_PARTIAL | WLK_REQF_ASYNC)) ==
	    WLK_REQF_PARTIAL) {
		/* Once: its new look clears the mark, or sets it again. */
		h->flags = (uint8_t)(h->flags & ~WLK_REQF_PARTIAL);
		wlk__wake_add(b, wake, hi);
	}
	return 0;
}

/*
 * wlk__steal_apply() - the steal branch of spec 4.1 for request @ri, which
 * is pending at the head of its queue or already held: every other lock held
 * on the name leaves the held set as STOLEN, and @ri is granted. Idempotent,
 * so recovery can redo it from the intent record.
 */
int wlk__steal_apply(struct wlk__bucket *b, uint32_t ri,
		     struct wlk__names *names, struct wlk__wake *wake)
{
	struct wlk_seg_request *r = wlk__req(b, ri);
	struct wlk_seg_name *n;
	uint32_t ni;
	int rc;

	n = wlk__name_of(b, r, &ni);
	if (!n)
		return WLK_ECORRUPT;
	rc = wlk__steal_holders(b, n, ri, names, wake);
	if (rc || WLK_WORD_STATE(r->word) != WLK_SLOT_PENDING)
		return rc;
	rc = wlk__dequeue(b, n, ri);
	if (!rc)
		rc = grant(b, n, ri, wake);
	return rc;
}

/*
 * wlk__steal_holders() - every lock held on @n but @ri's leaves the held
 * set as STOLEN; a scope's, on all its names (the names for their queues
 * to run go to @names). Idempotent.
 */
int wlk__steal_holders(struct wlk__bucket *b, struct wlk_seg_name *n,
		       uint32_t ri, struct wlk__names *names,
		       struct wlk__wake *wake)
{
	uint32_t hi = n->h_head;
	int rc;

	for (uint32_t steps = 0; hi != WLK_NIL; steps++) {
		struct wlk_seg_request *h = wlk__req_at(b, hi);
		uint32_t next;

		if (!h || !wlk__walk_ok(b, steps))
			return wlk__corrupt(b);
		next = h->next;
		if (hi != ri && (h->flags & WLK_REQF_SCOPE)) {
			rc = wlk__scope_steal_holder(b, hi, names, wake);
			if (rc)
				return rc;
		} else if (hi != ri) {
			rc = wlk__ungrant(b, n, hi);
			if (rc)
				return rc;
			wlk__word_store(&h->word,
					WLK_WORD(WLK_WORD_GEN(h->word),
						 WLK_SLOT_STOLEN));
			wlk__wake_add(b, wake, hi);
			WLK_FAILPOINT(steal_mid);
		}
		hi = next;
	}
	return 0;
}

/* Wake every pending request of a name, so its waiter looks again. */
void wlk__wake_queue(struct wlk__bucket *b, struct wlk_seg_name *n,
		       struct wlk__wake *wake)
{
	uint32_t ri = n->q_head;
	const struct wlk_seg_request *r;

	for (uint32_t steps = 0;
	     (r = wlk__req_at(b, ri)) && wlk__walk_ok(b, steps); steps++) {
		wlk__wake_add(b, wake, ri);
		ri = r->next;
	}
}

/* The steal branch of spec 4.1, bracketed by the redo intent. */
int wlk__steal(struct wlk__bucket *b, struct wlk_seg_name *n, uint32_t ri,
		 struct wlk__wake *wake)
{
	struct wlk_seg_header *h = b->hdr;
	struct wlk_seg_request *r = wlk__req(b, ri);
	struct wlk__names names = {0};
	int rc;

	rc = wlk__queue_prepend(b, n, ri);
	if (rc)
		return rc;
	h->intent_args[0] = ri;
	h->intent_args[1] = WLK_WORD_GEN(r->word);
	wlk__word_store(&h->intent_op, WLK_INTENT_STEAL);
	WLK_FAILPOINT(steal_after_intent);
	rc = wlk__steal_apply(b, ri, &names, wake);
	/* The stealer is a new holder the waiters do not watch yet. */
	wlk__wake_queue(b, n, wake);
	wlk__word_store(&h->intent_op, WLK_INTENT_NONE);
	/* The other names of scopes it stole: their held sets shrank. */
	return rc ? rc : wlk__names_run(b, &names, WLK_NIL, wake);
}

/* Append a new request to its name's queue and run the queue (spec 4.1
 * steps 5.2 and 6). */
int wlk__enqueue(struct wlk__bucket *b, uint32_t ni, uint32_t ri,
		 struct wlk__wake *wake)
{
	int rc = wlk__queue_append(b, wlk__name(b, ni), ri);

	return rc ? rc : wlk__process_queue(b, ni, wake);
}

/*
 * wlk__names_run() - process the queues of the names in @s (all names in
 * use if it overflowed) and put those left without requests, but @skip.
 * Return: 0 or WLK_ECORRUPT.
 */
int wlk__names_run(struct wlk__bucket *b, struct wlk__names *s,
		   uint32_t skip, struct wlk__wake *wake)
{
	int rc = 0;

	if (s->all) {
		for (uint32_t i = 0; i < b->geo.max_names && !rc; i++)
			if (i != skip && WLK_WORD_STATE(wlk__name(b, i)->word) ==
						 WLK_SLOT_USED)
				rc = wlk__process_queue(b, i, wake);
		return rc;
	}
	for (uint32_t i = 0; i < s->n && !rc; i++) {
		if (s->idx[i] == skip)
			continue;
		rc = wlk__process_queue(b, s->idx[i], wake);
		wlk__name_put(b, s->idx[i]);
	}
	return rc;
}
