/* SPDX-License-Identifier: MIT */
/*
 * queue.c - the spec's algorithms (section 4) over the segment's tables:
 * request a lock, release the lock, abort the request, process the lock
 * request queue, and terminate a client's locks and requests.
 *
 * All of it runs under the segment mutex, as the spec's steps run on the
 * lock task queue. Each name entry has two derived lists threaded through
 * the request slots: its queue (pending requests in request order) and its
 * held set, with counts of exclusive and shared holders. Woken requests are
 * collected in a struct wlk__wake and woken after unlocking.
 */
#include <errno.h>

#include "internal.h"

void wlk__wake_add(struct wlk__wake *wake, uint32_t r)
{
	/* A request granted while its own thread holds the mutex: that
	 * thread reads the word itself. No system call on this path. */
	if (r + 1 == wake->self1)
		return;
	if (wake->n < WLK_WAKE_BATCH)
		wake->idx[wake->n++] = r;
	else
		wake->sweep = true;
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

static bool idx_ok(struct wlk__bucket *b, uint32_t i)
{
	return i == WLK_NIL || i < b->geo.max_requests;
}

static int list_append(struct wlk__bucket *b, struct list l, uint32_t ri)
{
	struct wlk_seg_request *r = wlk__req(b, ri);
	uint32_t tail = *l.tail;

	if (!idx_ok(b, tail))
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

	if (!idx_ok(b, head))
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

	if (!idx_ok(b, prev) || !idx_ok(b, next))
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
static struct wlk_seg_name *name_of(struct wlk__bucket *b,
				    struct wlk_seg_request *r, uint32_t *ni)
{
	uint32_t i = r->name;

	if (i >= b->geo.max_names ||
	    wlk__name(b, i)->word != WLK_WORD(r->name_gen, WLK_SLOT_USED)) {
		wlk__corrupt(b);
		return NULL;
	}
	*ni = i;
	return wlk__name(b, i);
}

/* Move a request that is in no list into the held set. */
static int grant(struct wlk__bucket *b, struct wlk_seg_name *n, uint32_t ri,
		 struct wlk__wake *wake)
{
	struct wlk_seg_request *r = wlk__req(b, ri);
	int rc = list_append(b, held_of(n), ri);

	if (rc)
		return rc;
	if (r->mode == WLK_SHARED)
		n->n_shared++;
	else
		n->n_excl++;
	r->token = ++b->hdr->next_token;
	r->grant_ns = wlk__now_ns();
	WLK_FAILPOINT(grant_after_list);
	wlk__word_store(&r->word, WLK_WORD(WLK_WORD_GEN(r->word),
					   WLK_SLOT_HELD));
	wlk__wake_add(wake, ri);
	return 0;
}

/* Remove a held request from the held set (it stays allocated). */
static int ungrant(struct wlk__bucket *b, struct wlk_seg_name *n, uint32_t ri)
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
static bool head_grantable(const struct wlk_seg_name *n, uint8_t mode)
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
		int rc;

		if (ri == WLK_NIL)
			return 0;
		if (ri >= b->geo.max_requests || steps >= b->geo.max_requests)
			return wlk__corrupt(b);
		if (!head_grantable(n, wlk__req(b, ri)->mode))
			return 0;
		rc = list_remove(b, queue_of(n), ri);
		if (!rc)
			rc = grant(b, n, ri, wake);
		if (rc)
			return rc;
		if (n->n_pending)
			n->n_pending--;
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

	n = name_of(b, r, &ni);
	if (!n)
		return WLK_ECORRUPT;
	hi = n->h_head;
	for (uint32_t steps = 0; hi != WLK_NIL; steps++) {
		uint32_t next;
		struct wlk_seg_request *h;

		if (hi >= b->geo.max_requests || steps >= b->geo.max_requests)
			return wlk__corrupt(b);
		h = wlk__req(b, hi);
		next = h->next;
		if (hi != ri) {
			rc = ungrant(b, n, hi);
			if (rc)
				return rc;
			wlk__word_store(&h->word,
					WLK_WORD(WLK_WORD_GEN(h->word),
						 WLK_SLOT_STOLEN));
			wlk__wake_add(wake, hi);
			WLK_FAILPOINT(steal_mid);
		}
		hi = next;
	}
	if (WLK_WORD_STATE(r->word) != WLK_SLOT_PENDING)
		return 0;
	rc = list_remove(b, queue_of(n), ri);
	if (!rc)
		rc = grant(b, n, ri, wake);
	if (!rc && n->n_pending)
		n->n_pending--;
	return rc;
}

/* Wake every pending request of a name, so its waiter looks again. */
static void wake_queue(struct wlk__bucket *b, struct wlk_seg_name *n,
		       struct wlk__wake *wake)
{
	uint32_t ri = n->q_head;

	for (uint32_t steps = 0; ri < b->geo.max_requests &&
				 steps < b->geo.max_requests; steps++) {
		wlk__wake_add(wake, ri);
		ri = wlk__req(b, ri)->next;
	}
}

/* The steal branch of spec 4.1, bracketed by the redo intent. */
static int steal(struct wlk__bucket *b, struct wlk_seg_name *n, uint32_t ri,
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

/* If-available test: grantable without waiting (spec 2.5 with an empty
 * queue requirement, since the request is not in the queue yet). */
static bool available(const struct wlk_seg_name *n, enum wlk_mode mode)
{
	return n->q_head == WLK_NIL && head_grantable(n, (uint8_t)mode);
}

/*
 * wlk__request_lock() - spec 4.1 "request a lock", steps 3.1-3.6.
 * @b:    the bucket, locked.
 * @e:    what is requested, validated by the caller.
 * @wake: collects wake-ups.
 * @slot: receives the request slot; @gen its generation.
 *
 * Return: 0 (the request is held or pending: read its word), 1 for an
 * if_available miss (nothing allocated), WLK_ESTATE if the client is gone,
 * WLK_EFULL with nothing changed, or WLK_ECORRUPT.
 */
int wlk__request_lock(struct wlk__bucket *b, const struct wlk__enqueue *e,
		      struct wlk__wake *wake, uint32_t *slot, uint32_t *gen)
{
	struct wlk_seg_header *h = b->hdr;
	uint64_t hash = wlk__name_hash(b, e->name, e->name_len);
	struct wlk_seg_request *r;
	struct wlk_seg_name *n = NULL;
	uint32_t ni, ri;
	int rc;

	if (!wlk__client_live(b, e->client, e->client_gen))
		return WLK_ESTATE;
	rc = wlk__name_find(b, e->name, e->name_len, hash, &ni);
	if (rc && rc != -ENOENT)
		return rc;
	if (!rc)
		n = wlk__name(b, ni);
	/* Refuse only for live holders: a dead one is reaped first. */
	if (e->if_available && n && !available(n, e->mode) &&
	    wlk__reap_name(b, ni, wake)) {
		rc = wlk__name_find(b, e->name, e->name_len, hash, &ni);
		if (rc && rc != -ENOENT)
			return rc;
		n = rc ? NULL : wlk__name(b, ni);
	}
	if (e->if_available && n && !available(n, e->mode))
		return 1;
	/* Check every table before changing anything. */
	if (h->free_requests == WLK_NIL || (!n && h->free_names == WLK_NIL))
		return WLK_EFULL;
	if (!n) {
		rc = wlk__name_new(b, e->name, e->name_len, hash, &ni);
		if (rc)
			return rc;
		n = wlk__name(b, ni);
		WLK_FAILPOINT(request_after_name);
	}
	ri = wlk__req_alloc(b);
	if (ri == WLK_NIL)
		return WLK_ECORRUPT; /* checked above: the list is bad */
	r = wlk__req(b, ri);
	r->mode = (uint8_t)e->mode;
	r->client = e->client;
	r->client_gen = e->client_gen;
	r->name = ni;
	r->name_gen = WLK_WORD_GEN(n->word);
	r->seq = ++h->next_seq;
	r->token = 0;
	r->enq_ns = wlk__now_ns();
	r->grant_ns = 0;
	r->prev = r->next = WLK_NIL;
	wlk__word_store(&r->word, WLK_WORD(WLK_WORD_GEN(r->word),
					   WLK_SLOT_PENDING));
	*slot = ri;
	*gen = WLK_WORD_GEN(r->word);
	WLK_FAILPOINT(request_after_commit);
	wake->self1 = ri + 1;
	if (e->steal) {
		rc = steal(b, n, ri, wake);
	} else {
		rc = list_append(b, queue_of(n), ri);
		if (!rc) {
			n->n_pending++;
			rc = wlk__process_queue(b, ni, wake);
		}
	}
	wake->self1 = 0;
	return rc;
}

/* Take a pending request out of its queue and free it (spec 4.3). */
static int unqueue(struct wlk__bucket *b, uint32_t ri, struct wlk__wake *wake)
{
	struct wlk_seg_name *n;
	uint32_t ni;
	int rc;

	n = name_of(b, wlk__req(b, ri), &ni);
	if (!n)
		return WLK_ECORRUPT;
	rc = list_remove(b, queue_of(n), ri);
	if (rc)
		return rc;
	if (n->n_pending)
		n->n_pending--;
	WLK_FAILPOINT(unqueue_after_remove);
	wlk__req_free(b, ri);
	rc = wlk__process_queue(b, ni, wake);
	wlk__name_put(b, ni);
	return rc;
}

/* Take a held request out of the held set and free it (spec 4.2). */
static int unhold(struct wlk__bucket *b, uint32_t ri, struct wlk__wake *wake)
{
	struct wlk_seg_name *n;
	uint32_t ni;
	int rc;

	n = name_of(b, wlk__req(b, ri), &ni);
	if (!n)
		return WLK_ECORRUPT;
	rc = ungrant(b, n, ri);
	if (rc)
		return rc;
	WLK_FAILPOINT(release_after_ungrant);
	wlk__req_free(b, ri);
	rc = wlk__process_queue(b, ni, wake);
	wlk__name_put(b, ni);
	return rc;
}

/*
 * wlk__release_lock() - spec 4.2 "release the lock".
 * Return: 0; WLK_ESTOLEN if it had been stolen (the slot is freed and
 * nothing else changes); WLK_ESTATE if it is no longer ours; WLK_ECORRUPT.
 */
int wlk__release_lock(struct wlk__bucket *b, uint32_t ri, uint32_t gen,
		      struct wlk__wake *wake)
{
	uint32_t w;

	if (ri >= b->geo.max_requests)
		return WLK_ESTATE;
	w = wlk__req(b, ri)->word;
	if (w == WLK_WORD(gen, WLK_SLOT_STOLEN)) {
		wlk__req_free(b, ri);
		return WLK_ESTOLEN;
	}
	if (w != WLK_WORD(gen, WLK_SLOT_HELD))
		return WLK_ESTATE;
	return unhold(b, ri, wake);
}

/*
 * wlk__abort_request() - spec 4.3 "abort the request", if it is still
 * pending. Return: 0 if it was pending and is gone; 1 if it was granted
 * meanwhile (held or stolen; the caller owns it); WLK_ESTATE if the slot is
 * no longer ours; WLK_ECORRUPT.
 */
int wlk__abort_request(struct wlk__bucket *b, uint32_t ri, uint32_t gen,
		       struct wlk__wake *wake)
{
	uint32_t w;

	if (ri >= b->geo.max_requests)
		return WLK_ESTATE;
	w = wlk__req(b, ri)->word;
	if (w == WLK_WORD(gen, WLK_SLOT_PENDING))
		return unqueue(b, ri, wake);
	if (w == WLK_WORD(gen, WLK_SLOT_HELD) ||
	    w == WLK_WORD(gen, WLK_SLOT_STOLEN))
		return 1;
	return WLK_ESTATE;
}

/*
 * wlk__drop_client() - spec 2.6 "terminate remaining locks and requests"
 * for one client: abort its requests, release its locks, then forget it.
 * Every slot is visited once. When releasing slot k grants other requests,
 * the client's own requests below k are already gone, so any of them it
 * grants sits above k and is released when the scan gets there.
 */
void wlk__drop_client(struct wlk__bucket *b, uint32_t ci,
		      struct wlk__wake *wake)
{
	uint32_t gen = WLK_WORD_GEN(wlk__client(b, ci)->word);

	for (uint32_t ri = 0; ri < b->geo.max_requests; ri++) {
		struct wlk_seg_request *r = wlk__req(b, ri);
		uint32_t state = WLK_WORD_STATE(r->word);

		if (state == WLK_SLOT_FREE || r->client != ci ||
		    r->client_gen != gen)
			continue;
		wlk__wake_add(wake, ri);
		WLK_FAILPOINT(drop_client_mid);
		if (state == WLK_SLOT_PENDING)
			unqueue(b, ri, wake);
		else if (state == WLK_SLOT_HELD)
			unhold(b, ri, wake);
		else
			wlk__req_free(b, ri);
	}
	wlk__client_free(b, ci);
}
