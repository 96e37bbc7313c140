/* SPDX-License-Identifier: MIT */
/*
 * ops.c - the spec's operations on one request (section 4): request a lock
 * (4.1), release the lock (4.2), abort the request (4.3); terminate.c
 * does a client's remaining locks and requests (2.6) with them. They
 * change the tables and leave the granting to queue.c's
 * process-the-queue. All run under the segment mutex.
 */
#include <errno.h>

#include "spec.h"


/* The name entry a request goes to, inflated (FAST PATH: its mutex-side
 * state is all of it then), or *@ni = WLK_NIL if there is none yet. */
static int lookup(struct wlk__bucket *b, const struct wlk__enqueue *e,
		  uint32_t *ni)
{
	int rc = wlk__name_find(b, e->name, e->name_len, e->hash, ni);

	if (rc == -ENOENT) {
		*ni = WLK_NIL;
		return 0;
	}
	return rc ? rc : wlk__name_inflate(b, *ni);
}

/* lookup(), and an if_available request's verdict. Return: 0,
 * WLK__UNAVAILABLE or WLK__UNPROBED (enum wlk__requested), or an error. */
static int find_name(struct wlk__bucket *b, const struct wlk__enqueue *e,
		     uint32_t *ni)
{
	int rc = lookup(b, e, ni);

	if (rc || *ni == WLK_NIL || !e->if_available ||
	    wlk__name_available(b, wlk__name(b, *ni), e->mode))
		return rc;
	/* Refuse only for live holders: the caller reaps the dead ones
	 * (reap.c) and asks again. */
	return e->probed ? WLK__UNAVAILABLE : WLK__UNPROBED;
}

/* Fill a free request slot and publish it as pending. */
static void request_fill(struct wlk__bucket *b, uint32_t ri, uint32_t ni,
			 const struct wlk__enqueue *e)
{
	struct wlk_seg_request *r = wlk__req(b, ri);

	/* A blocking request in a lane's slot may be granted through the
	 * fast word; a steal is granted as it is, with the holders it
	 * stole from beside it. */
	wlk__req_init(b, ri, e->client, e->client_gen, e->mode,
		      (uint8_t)(e->flags |
				(e->own == ri && !e->steal &&
						 !(e->flags & WLK_REQF_ASYNC)
					 ? WLK_REQF_LANE
					 : 0)));
	r->name = ni;
	r->name_gen = WLK_WORD_GEN(wlk__name(b, ni)->word);
	r->seq = (uint32_t)++wlk__name(b, ni)->seq;
	r->stamp_ns = wlk__stamp_ns();
	wlk__word_store(&r->word, WLK_WORD(WLK_WORD_GEN(r->word),
					   WLK_SLOT_PENDING));
}

/* Whether the caller offered a slot of its reserve that it claimed (FAST,
 * on no name yet: shm/lane.c, wlk__lane_offer()) and that is still its
 * own. */
static bool own_slot(struct wlk__bucket *b, const struct wlk__enqueue *e)
{
	const struct wlk_seg_request *r = wlk__req_at(b, e->own);

	return r && r->word == WLK_WORD(e->own_gen, WLK_SLOT_FAST) &&
	       r->client == e->client && r->client_gen == e->client_gen;
}

/*
 * Check every table before changing anything: a request slot (the
 * caller's own, a free one, or one reclaimed from the clients' reserves)
 * and, for a name not in the table (@ni WLK_NIL), a free or an idle name
 * entry. Return: 0, or WLK_EFULL with nothing changed.
 */
static int make_room(struct wlk__bucket *b, const struct wlk__enqueue *e,
		     uint32_t ni)
{
	struct wlk_seg_header *h = b->hdr;
	bool own = own_slot(b, e);
	int rc;

	if (ni == WLK_NIL) {
		rc = wlk__text_make_room(b, wlk__name_chunks(e->name_len));
		if (rc)
			return rc;
	}
	if (!own && h->free_requests == WLK_NIL)
		wlk__stash_reclaim(b);
	if ((!own && h->free_requests == WLK_NIL) ||
	    (ni == WLK_NIL && h->free_names == WLK_NIL &&
	     h->idle_head == WLK_NIL))
		return WLK_EFULL;
	return 0;
}

/*
 * wlk__request_lock() - spec 4.1 "request a lock", steps 3.1-3.6.
 * @b:    the bucket, locked.
 * @e:    what is requested, validated by the caller.
 * @wake: collects wake-ups.
 * @slot: receives the request slot; @gen its generation.
 *
 * Return: an enum wlk__requested: WLK__REQUESTED (the request is held or
 * pending: read its word), WLK__UNAVAILABLE for an if_available miss
 * (nothing allocated), WLK__UNPROBED for a miss whose
 * holders were not probed (@e->probed false; nothing allocated, the name
 * left inflated: wlk__request_reaping() probes and asks again), WLK_ESTATE
 * if the client is gone, WLK_EFULL or (with @e->detect) WLK_EDEADLK with
 * nothing changed, or WLK_ECORRUPT.
 */
int wlk__request_lock(struct wlk__bucket *b, const struct wlk__enqueue *e,
		      struct wlk__wake *wake, uint32_t *slot, uint32_t *gen)
{
	uint32_t ni = WLK_NIL, ri;
	int rc;

	if (e->n_items)
		return wlk__request_scope(b, e, wake, slot, gen);
	if (!wlk__client_live(b, e->client, e->client_gen))
		return WLK_ESTATE;
	rc = find_name(b, e, &ni);
	if (rc == WLK__UNPROBED)
		return rc; /* still inflated, for the probe */
	if (!rc)
		rc = make_room(b, e, ni);
	if (!rc && e->detect && !e->if_available && !e->steal)
		rc = wlk__would_deadlock(b, e, ni);
	if (rc) {
		/* Inflated for nothing: give the fast path its name back. */
		if (wlk__name_at(b, ni) &&
		    WLK_WORD_STATE(wlk__name(b, ni)->word) == WLK_SLOT_USED)
			wlk__name_settle(b, ni);
		return rc;
	}
	if (ni != WLK_NIL) {
		rc = wlk__name_touch(b, ni);
	} else {
		rc = b->hdr->free_names == WLK_NIL ? wlk__idle_inflate(b) : 0;
		if (!rc)
			rc = wlk__name_new(b, e->name, e->name_len, e->hash,
					   &ni);
		if (!rc)
			WLK_FAILPOINT(request_after_name);
	}
	if (rc)
		return rc;
	ri = own_slot(b, e) ? e->own : wlk__req_alloc(b);
	if (ri == WLK_NIL)
		return WLK_ECORRUPT; /* checked above: the list is bad */
	request_fill(b, ri, ni, e);
	*slot = ri;
	*gen = WLK_WORD_GEN(wlk__req(b, ri)->word);
	WLK_FAILPOINT(request_after_commit);
	wake->self1 = ri + 1;
	if (e->steal)
		rc = wlk__steal(b, wlk__name(b, ni), ri, wake);
	else
		rc = wlk__enqueue(b, ni, ri, wake);
	wake->self1 = 0;
	return rc;
}

/*
 * Take a request out of its queue (pending: spec 4.3) or the held set (held:
 * spec 4.2), free it, and run the name's queue.
 */
static int drop(struct wlk__bucket *b, uint32_t ri, bool held, bool keep,
		struct wlk__wake *wake)
{
	struct wlk_seg_name *n;
	uint32_t ni;
	int rc;

	/* A scope goes as a whole, on every name (scope.c). */
	if (wlk__req(b, ri)->flags & WLK_REQF_SCOPE)
		return wlk__scope_drop(b, ri, WLK_NIL, wake);
	n = wlk__name_of(b, wlk__req(b, ri), &ni);
	if (!n)
		return WLK_ECORRUPT;
	rc = held ? wlk__ungrant(b, n, ri) : wlk__dequeue(b, n, ri);
	if (rc)
		return rc;
	if (held)
		WLK_FAILPOINT(release_after_ungrant);
	else
		WLK_FAILPOINT(unqueue_after_remove);
	/* Kept for its client only while that client lives (not closed). */
	if (keep && wlk__client_live(b, wlk__req(b, ri)->client,
				     wlk__req(b, ri)->client_gen))
		wlk__req_keep(b, ri);
	else
		wlk__req_free(b, ri);
	rc = wlk__process_queue(b, ni, wake);
	wlk__name_put(b, ni);
	return rc;
}

/* wlk__unqueue(), wlk__unhold() - drop() a pending or held request. */
int wlk__unqueue(struct wlk__bucket *b, uint32_t ri, struct wlk__wake *wake)
{
	return drop(b, ri, false, false, wake);
}

int wlk__unhold(struct wlk__bucket *b, uint32_t ri, struct wlk__wake *wake)
{
	return drop(b, ri, true, false, wake);
}

/*
 * wlk__release_lock() - spec 4.2 "release the lock".
 * @keep: the slot goes back to its client's reserve (RESERVED, gen + 1)
 *        rather than to the free list: the releaser's lane takes it.
 * Return: 0; WLK_ESTOLEN if it had been stolen (the slot is freed and
 * nothing else changes); WLK_ESTATE if it is no longer ours; WLK_ECORRUPT
 * (a held slot whose name index is out of bounds is freed).
 */
int wlk__release_lock(struct wlk__bucket *b, uint32_t ri, uint32_t gen,
		      bool keep, struct wlk__wake *wake)
{
	uint32_t w;

	if (!wlk__req_at(b, ri))
		return WLK_ESTATE;
	w = wlk__req(b, ri)->word;
	/* Held through the fast path: make it an ordinary lock first. */
	if (w == WLK_WORD(gen, WLK_SLOT_FAST)) {
		uint32_t ni = uatomic_read(&wlk__req(b, ri)->name);
		int rc;

		/* Its name index was damaged: which name it holds is not
		 * known. Free it; the repair this asks for turns off the
		 * fast word that may still name it. */
		if (!wlk__name_at(b, ni)) {
			wlk__req_free(b, ri);
			return wlk__corrupt(b);
		}
		rc = wlk__name_inflate(b, ni);
		if (rc)
			return rc;
		w = wlk__req(b, ri)->word;
	}
	if (w == WLK_WORD(gen, WLK_SLOT_STOLEN)) {
		if (wlk__req(b, ri)->flags & WLK_REQF_SCOPE) {
			int rc = wlk__scope_drop(b, ri, WLK_NIL, wake);

			return rc ? rc : WLK_ESTOLEN;
		}
		wlk__req_free(b, ri);
		return WLK_ESTOLEN;
	}
	if (w != WLK_WORD(gen, WLK_SLOT_HELD))
		return WLK_ESTATE;
	return drop(b, ri, true, keep, wake);
}

/*
 * wlk__abort_queued() - spec 2.6 step 1 for client @ci (gen @cgen), whose
 * request @ri is pending: abort it and every other request of the client
 * in the same queue, then process that queue once, so that none of them
 * is granted on the way out. Return: 0 or WLK_ECORRUPT.
 */
int wlk__abort_queued(struct wlk__bucket *b, uint32_t ri, uint32_t ci,
		      uint32_t cgen, struct wlk__names *names,
		      struct wlk__wake *wake)
{
	struct wlk_seg_name *n;
	uint32_t ni, i;
	int rc;

	n = wlk__name_of(b, wlk__req(b, ri), &ni);
	if (!n)
		return WLK_ECORRUPT;
	i = n->q_head;
	for (uint32_t steps = 0; i != WLK_NIL; steps++) {
		struct wlk_seg_request *r = wlk__req_at(b, i);
		uint32_t next;

		if (!r || !wlk__walk_ok(b, steps))
			return wlk__corrupt(b);
		next = r->next;
		if (r->client == ci && r->client_gen == cgen &&
		    (r->flags & WLK_REQF_SCOPE)) {
			/* Its other names' queues run when the client's
			 * requests are all gone; this one below. */
			rc = wlk__scope_cut(b, i, names, wake);
			if (rc)
				return rc;
		} else if (r->client == ci && r->client_gen == cgen) {
			wlk__wake_add(b, wake, i);
			rc = wlk__dequeue(b, n, i);
			if (rc)
				return rc;
			WLK_FAILPOINT(unqueue_after_remove);
			wlk__req_free(b, i);
		}
		i = next;
	}
	rc = wlk__process_queue(b, ni, wake);
	wlk__name_put(b, ni);
	return rc;
}

/* wlk__abort_queued() of a closing manager's request @ri, and the queues
 * of the names of the scopes it cut. */
static int abort_closing(struct wlk__bucket *b, uint32_t ri,
			 struct wlk__wake *wake)
{
	struct wlk_seg_request *r = wlk__req(b, ri);
	struct wlk__names names = {0};
	int rc = wlk__abort_queued(b, ri, r->client, r->client_gen, &names,
				   wake);

	return rc ? rc : wlk__names_run(b, &names, WLK_NIL, wake);
}

/*
 * wlk__abort_request() - spec 4.3 "abort the request", if it is still
 * pending.
 * @closing: its manager is closing: as in spec 2.6 step 1, every request
 *           of its client in that queue goes too (wlk__abort_queued()).
 * Return: 0 if it was pending and is gone; 1 if it was granted meanwhile
 * (held, stolen or fast; the caller owns it); WLK_ESTATE if the slot is no
 * longer ours; WLK_ECORRUPT.
 */
int wlk__abort_request(struct wlk__bucket *b, uint32_t ri, uint32_t gen,
		       bool closing, struct wlk__wake *wake)
{
	struct wlk_seg_request *r = wlk__req_at(b, ri);
	uint32_t w;

	if (!r)
		return WLK_ESTATE;
	w = r->word;
	if (w == WLK_WORD(gen, WLK_SLOT_PENDING))
		return closing ? abort_closing(b, ri, wake)
			       : wlk__unqueue(b, ri, wake);
	/* FAST: granted through the fast word (queue.c). */
	if (w == WLK_WORD(gen, WLK_SLOT_HELD) ||
	    w == WLK_WORD(gen, WLK_SLOT_STOLEN) ||
	    w == WLK_WORD(gen, WLK_SLOT_FAST))
		return 1;
	return WLK_ESTATE;
}
