/* SPDX-License-Identifier: MIT */
/*
 * queue.c - the queues and held sets of names, and the spec's "process the
 * lock request queue" (4.4) and the steal branch of "request a lock" (4.1)
 * over them.
 *
 * All of it runs under the segment mutex, as the spec's steps run on the
 * lock task queue. Each name entry has two derived lists threaded through
 * the request slots: its queue (pending requests in request order) and its
 * held set, with counts of exclusive and shared holders. Woken requests are
 * collected in a struct wlk__wake and woken after unlocking.
 */
#include <errno.h>

#include "spec.h"

/* Ring the doorbell of the client of request @r, if it has one. */
static void bell_add(struct wlk__bucket *b, struct wlk__wake *wake,
		     uint32_t r)
{
	uint32_t ci = wlk__req(b, r)->client;
	struct wlk_seg_client *c = wlk__client_at(b, ci);

	if (!c || !c->doorbell)
		return;
	for (uint32_t i = 0; i < wake->n_bells; i++)
		if (wake->bells[i].id == c->doorbell)
			return;
	if (wake->n_bells < WLK_WAKE_BATCH)
		wake->bells[wake->n_bells++] = wlk__bell_of(c, ci);
	else
		wake->bell_sweep = true;
}

/* Broadcast on name @ni's grants word at the flush; a sweep if too many
 * names (an index out of range is for the flush to bound). */
static void name_add(struct wlk__wake *wake, uint32_t ni)
{
	for (uint32_t i = 0; i < wake->n_names; i++)
		if (wake->names[i] == ni)
			return;
	if (wake->n_names < WLK_WAKE_NAMES)
		wake->names[wake->n_names++] = ni;
	else
		wake->sweep = true;
}

/*
 * wlk__wake_add() - request @r changed state: wake its waiter once the
 * mutex is released, by futex for a blocking waiter, by doorbell for an
 * event loop (shm/async.c).
 */
void wlk__wake_add(struct wlk__bucket *b, struct wlk__wake *wake, uint32_t r)
{
	/* A request granted while its own thread holds the mutex: that
	 * thread reads the word itself. No system call on this path. */
	if (r + 1 == wake->self1)
		return;
	bell_add(b, wake, r);
	if (wlk__req(b, r)->flags & WLK_REQF_ASYNC)
		return; /* nobody sleeps on its word */
	if (wake->n < WLK_WAKE_BATCH)
		wake->idx[wake->n++] = r;
	else
		name_add(wake, wlk__req(b, r)->name);
}

/*
 * Doubly linked lists of request slots, with head and tail in the name
 * entry. Every index is bounded; a bad one reports corruption.
 */
struct list {
	uint32_t *head;
	uint32_t *tail;
};

static struct list queue_of(struct wlk_seg_name *n)
{
	return (struct list){&n->q_head, &n->q_tail};
}

static struct list held_of(struct wlk_seg_name *n)
{
	return (struct list){&n->h_head, &n->h_tail};
}

/*
 * Whether @end, one end of a list whose other end is @other, can take a
 * new neighbour: the ends agree (both WLK_NIL or neither) and @end has no
 * neighbour outward. Linking to anything else would leave the request
 * unreachable from the head, never granted.
 */
static bool end_ok(struct wlk__bucket *b, uint32_t end, uint32_t other,
		   bool tail)
{
	const struct wlk_seg_request *e;

	if (end == WLK_NIL)
		return other == WLK_NIL;
	e = wlk__req_at(b, end);
	if (!e || other == WLK_NIL)
		return false;
	return (tail ? e->next : e->prev) == WLK_NIL;
}

static int list_append(struct wlk__bucket *b, struct list l, uint32_t ri)
{
	struct wlk_seg_request *r = wlk__req(b, ri);
	uint32_t tail = *l.tail;

	if (!end_ok(b, tail, *l.head, true))
		return wlk__corrupt(b);
	r->prev = tail;
	r->next = WLK_NIL;
	if (tail == WLK_NIL)
		*l.head = ri;
	else
		wlk__req(b, tail)->next = ri;
	*l.tail = ri;
	return 0;
}

static int list_prepend(struct wlk__bucket *b, struct list l, uint32_t ri)
{
	struct wlk_seg_request *r = wlk__req(b, ri);
	uint32_t head = *l.head;

	if (!end_ok(b, head, *l.tail, false))
		return wlk__corrupt(b);
	r->prev = WLK_NIL;
	r->next = head;
	if (head == WLK_NIL)
		*l.tail = ri;
	else
		wlk__req(b, head)->prev = ri;
	*l.head = ri;
	return 0;
}

static int list_remove(struct wlk__bucket *b, struct list l, uint32_t ri)
{
	struct wlk_seg_request *r = wlk__req(b, ri);
	uint32_t prev = r->prev, next = r->next;

	if (!wlk__link_ok(b, prev) || !wlk__link_ok(b, next))
		return wlk__corrupt(b);
	if (prev == WLK_NIL)
		*l.head = next;
	else
		wlk__req(b, prev)->next = next;
	if (next == WLK_NIL)
		*l.tail = prev;
	else
		wlk__req(b, next)->prev = prev;
	r->prev = r->next = WLK_NIL;
	return 0;
}

/* The name entry a live request refers to, or NULL if that is corrupt. */
struct wlk_seg_name *wlk__name_of(struct wlk__bucket *b,
				    struct wlk_seg_request *r, uint32_t *ni)
{
	uint32_t i = r->name;
	struct wlk_seg_name *n = wlk__name_at(b, i);

	if (!n || n->word != WLK_WORD(r->name_gen, WLK_SLOT_USED)) {
		wlk__corrupt(b);
		return NULL;
	}
	*ni = i;
	return n;
}

/* wlk__held_add() - append a request that is in no list to the held set
 * of @n, and count it. */
int wlk__held_add(struct wlk__bucket *b, struct wlk_seg_name *n, uint32_t ri)
{
	int rc = list_append(b, held_of(n), ri);

	if (rc)
		return rc;
	if (wlk__req(b, ri)->mode == WLK_SHARED)
		n->n_shared++;
	else
		n->n_excl++;
	return 0;
}

/* Move a request that is in no list into the held set. */
static int grant(struct wlk__bucket *b, struct wlk_seg_name *n, uint32_t ri,
		 struct wlk__wake *wake)
{
	struct wlk_seg_request *r = wlk__req(b, ri);
	int rc = wlk__held_add(b, n, ri);

	if (rc)
		return rc;
	r->token = uatomic_add_return(&n->token, 1);
	r->grant_ns = wlk__stamp_ns();
	WLK_FAILPOINT(grant_after_list);
	wlk__word_store(&r->word, WLK_WORD(WLK_WORD_GEN(r->word),
					   WLK_SLOT_HELD));
	wlk__wake_add(b, wake, ri);
	return 0;
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
	r->grant_ns = wlk__stamp_ns();
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
 * wlk__adopt_slot() - the slot's side of adopting fast holder or fast
 * waiter @r of @n as an ordinary request in @state (HELD or PENDING), for
 * an inflation and a recovery alike; the caller links it. Its place in the
 * name's order; a holder's grant stands, and so does its token, which it
 * is given here if it has none yet (state/fastword.c: the fast path's
 * thread may not have got that far, and a waiter handed the lock may never
 * look at the fast word again); a waiter keeps LANE: it waits in a lane's
 * slot, and may be granted through the fast word again.
 */
void wlk__adopt_slot(struct wlk_seg_name *n, struct wlk_seg_request *r,
		     uint32_t state)
{
	if (state == WLK_SLOT_HELD)
		wlk__token_give(n, r);
	r->seq = ++n->seq;
	r->sleeping = 0;
	r->flags = state == WLK_SLOT_HELD ? 0 : WLK_REQF_LANE;
	wlk__word_store(&r->word, WLK_WORD(WLK_WORD_GEN(r->word), state));
}

/* wlk__adopt() - a lock held through the fast path (FAST, in no list)
 * becomes an ordinary held request. */
int wlk__adopt(struct wlk__bucket *b, struct wlk_seg_name *n, uint32_t ri)
{
	int rc = wlk__held_add(b, n, ri);

	if (!rc)
		wlk__adopt_slot(n, wlk__req(b, ri), WLK_SLOT_HELD);
	return rc;
}

/*
 * wlk__adopt_waiter() - a name's fast waiter (FAST, in no list) becomes an
 * ordinary pending request at the tail of the queue (the queue is empty
 * when a name is inflated: its waiter is the first in it).
 */
int wlk__adopt_waiter(struct wlk__bucket *b, struct wlk_seg_name *n,
		      uint32_t ri)
{
	int rc = list_append(b, queue_of(n), ri);

	if (rc)
		return rc;
	n->n_pending++;
	wlk__adopt_slot(n, wlk__req(b, ri), WLK_SLOT_PENDING);
	return 0;
}

/* Remove a held request from the held set (it stays allocated). */
int wlk__ungrant(struct wlk__bucket *b, struct wlk_seg_name *n, uint32_t ri)
{
	int rc = list_remove(b, held_of(n), ri);

	if (rc)
		return rc;
	if (wlk__req(b, ri)->mode == WLK_SHARED) {
		if (n->n_shared)
			n->n_shared--;
	} else if (n->n_excl) {
		n->n_excl--;
	}
	return 0;
}

/* Spec 2.5 "grantable", for the request at the head of the queue. */
bool wlk__head_grantable(const struct wlk_seg_name *n, uint8_t mode)
{
	if (mode == WLK_SHARED)
		return n->n_excl == 0;
	return n->n_excl == 0 && n->n_shared == 0;
}

/*
 * wlk__process_queue() - spec 4.4: grant requests from the head of the
 * name's queue for as long as the head is grantable.
 */
int wlk__process_queue(struct wlk__bucket *b, uint32_t ni,
		       struct wlk__wake *wake)
{
	struct wlk_seg_name *n = wlk__name(b, ni);

	for (uint32_t steps = 0;; steps++) {
		uint32_t ri = n->q_head;
		struct wlk_seg_request *r;
		int rc;

		if (ri == WLK_NIL)
			return 0;
		r = wlk__req_at(b, ri);
		if (!r || !wlk__walk_ok(b, steps))
			return wlk__corrupt(b);
		if (!wlk__head_grantable(n, r->mode))
			return 0;
		rc = wlk__dequeue(b, n, ri);
		if (!rc && wlk__name_idle(n) && (r->flags & WLK_REQF_LANE))
			return grant_fast(b, ni, ri, wake);
		if (!rc)
			rc = grant(b, n, ri, wake);
		if (rc)
			return rc;
	}
}

/*
 * wlk__steal_apply() - the steal branch of spec 4.1 for request @ri, which
 * is pending at the head of its queue or already held: every other lock held
 * on the name leaves the held set as STOLEN, and @ri is granted. Idempotent,
 * so recovery can redo it from the intent record.
 */
int wlk__steal_apply(struct wlk__bucket *b, uint32_t ri,
		     struct wlk__wake *wake)
{
	struct wlk_seg_request *r = wlk__req(b, ri);
	struct wlk_seg_name *n;
	uint32_t ni, hi;
	int rc;

	n = wlk__name_of(b, r, &ni);
	if (!n)
		return WLK_ECORRUPT;
	hi = n->h_head;
	for (uint32_t steps = 0; hi != WLK_NIL; steps++) {
		struct wlk_seg_request *h = wlk__req_at(b, hi);
		uint32_t next;

		if (!h || !wlk__walk_ok(b, steps))
			return wlk__corrupt(b);
		next = h->next;
		if (hi != ri) {
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
	if (WLK_WORD_STATE(r->word) != WLK_SLOT_PENDING)
		return 0;
	rc = wlk__dequeue(b, n, ri);
	if (!rc)
		rc = grant(b, n, ri, wake);
	return rc;
}

/* Wake every pending request of a name, so its waiter looks again. */
static void wake_queue(struct wlk__bucket *b, struct wlk_seg_name *n,
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
	int rc;

	rc = list_prepend(b, queue_of(n), ri);
	if (rc)
		return rc;
	n->n_pending++;
	h->intent_args[0] = ri;
	h->intent_args[1] = WLK_WORD_GEN(r->word);
	wlk__word_store(&h->intent_op, WLK_INTENT_STEAL);
	WLK_FAILPOINT(steal_after_intent);
	rc = wlk__steal_apply(b, ri, wake);
	/* The stealer is a new holder the waiters do not watch yet. */
	wake_queue(b, n, wake);
	wlk__word_store(&h->intent_op, WLK_INTENT_NONE);
	return rc;
}

/* Append a new request to its name's queue and run the queue (spec 4.1
 * steps 5.2 and 6). */
int wlk__enqueue(struct wlk__bucket *b, uint32_t ni, uint32_t ri,
		 struct wlk__wake *wake)
{
	struct wlk_seg_name *n = wlk__name(b, ni);
	int rc = list_append(b, queue_of(n), ri);

	if (rc)
		return rc;
	n->n_pending++;
	return wlk__process_queue(b, ni, wake);
}

/* Take a pending request out of its name's queue. */
int wlk__dequeue(struct wlk__bucket *b, struct wlk_seg_name *n, uint32_t ri)
{
	int rc = list_remove(b, queue_of(n), ri);

	if (!rc && n->n_pending)
		n->n_pending--;
	return rc;
}
