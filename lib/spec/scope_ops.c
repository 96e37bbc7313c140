/* SPDX-License-Identifier: MIT */
/*
 * scope_ops.c - the spec's operations on a scope (layout.h, SCOPES), over
 * scope.c's: request a lock (4.1: look every name up, check every table
 * before changing anything, make the members, queue them, or steal, and
 * grant the scope if it is grantable), and release, abort and steal, each
 * followed by the runs of the queues they touched (queue.c). Under the
 * segment mutex.
 */
#include <errno.h>

#include "spec.h"

/* The request's names' entries, inflated; WLK_NIL for one not in the
 * table. Return: 0 or an error. */
static int lookup_all(struct wlk__bucket *b, const struct wlk__enqueue *e,
		      uint32_t *ni, uint32_t *missing)
{
	*missing = 0;
	for (uint32_t i = 0; i < e->n_items; i++) {
		const struct wlk__scope_item *it = &e->items[i];
		int rc = wlk__name_find(b, it->name, it->len, it->hash, &ni[i]);

		if (rc == -ENOENT) {
			ni[i] = WLK_NIL;
			(*missing)++;
			continue;
		}
		if (!rc)
			rc = wlk__name_inflate(b, ni[i]);
		if (rc)
			return rc;
	}
	return 0;
}

/* Give the names looked up for nothing back to the fast path. */
static void settle_all(struct wlk__bucket *b, const struct wlk__enqueue *e,
		       const uint32_t *ni)
{
	for (uint32_t i = 0; i < e->n_items; i++)
		if (wlk__name_at(b, ni[i]) &&
		    WLK_WORD_STATE(wlk__name(b, ni[i])->word) == WLK_SLOT_USED)
			wlk__name_put(b, ni[i]);
}

/* Whether every name would grant the request now (if_available). */
static bool available_all(struct wlk__bucket *b,
			  const struct wlk__enqueue *e, const uint32_t *ni)
{
	for (uint32_t i = 0; i < e->n_items; i++)
		if (ni[i] != WLK_NIL &&
		    !wlk__name_available(b, wlk__name(b, ni[i]), e->mode))
			return false;
	return true;
}

/* How many of a list's entries there are, up to @want: @link gives the
 * next of entry @i (name entries when @names, else request slots). */
static uint32_t count_upto(struct wlk__bucket *b, uint32_t i, uint32_t want,
			   bool names, bool idle)
{
	uint32_t n = 0;

	while (n < want) {
		if (names) {
			const struct wlk_seg_name *e = wlk__name_at(b, i);

			if (!e)
				break;
			i = idle ? e->list_next : e->chain;
		} else {
			const struct wlk_seg_request *r = wlk__req_at(b, i);

			if (!r)
				break;
			i = r->next;
		}
		n++;
	}
	return n;
}

/*
 * Room for @k members and @missing new names, checked after the names
 * already there were taken off the idle list (an idle name of the scope
 * is not one to evict). Return: 0 or WLK_EFULL with nothing changed.
 */
static int make_room(struct wlk__bucket *b, uint32_t k, uint32_t missing)
{
	struct wlk_seg_header *h = b->hdr;
	uint32_t names;

	if (count_upto(b, h->free_requests, k, false, false) < k)
		wlk__stash_reclaim(b);
	if (count_upto(b, h->free_requests, k, false, false) < k)
		return WLK_EFULL;
	names = count_upto(b, h->free_names, missing, true, false);
	if (names < missing)
		names += count_upto(b, h->idle_head, missing - names, true,
				    true);
	return names < missing ? WLK_EFULL : 0;
}

/* The chunks the text of the names not in the table yet takes. */
static uint32_t text_needed(const struct wlk__enqueue *e, const uint32_t *ni)
{
	uint32_t chunks = 0;

	for (uint32_t i = 0; i < e->n_items; i++)
		if (ni[i] == WLK_NIL)
			chunks += wlk__name_chunks(e->items[i].len);
	return chunks;
}

/* The checks before anything changes: room, and the deadlock test. */
static int admit(struct wlk__bucket *b, const struct wlk__enqueue *e,
		 const uint32_t *ni, uint32_t missing)
{
	int rc = 0;

	for (uint32_t i = 0; i < e->n_items && !rc; i++)
		if (ni[i] != WLK_NIL)
			rc = wlk__name_touch(b, ni[i]);
	if (!rc)
		rc = wlk__text_make_room(b, text_needed(e, ni));
	if (!rc)
		rc = make_room(b, e->n_items, missing);
	for (uint32_t i = 0; i < e->n_items && !rc; i++)
		if (e->detect && !e->steal && !e->if_available &&
		    ni[i] != WLK_NIL)
			rc = wlk__would_deadlock(b, e, ni[i]);
	return rc;
}

/* Make the names not in the table yet. */
static int names_new(struct wlk__bucket *b, const struct wlk__enqueue *e,
		     uint32_t *ni)
{
	for (uint32_t i = 0; i < e->n_items; i++) {
		const struct wlk__scope_item *it = &e->items[i];
		int rc;

		if (ni[i] != WLK_NIL)
			continue;
		rc = b->hdr->free_names == WLK_NIL ? wlk__idle_inflate(b) : 0;
		if (!rc)
			rc = wlk__name_new(b, it->name, it->len, it->hash,
					   &ni[i]);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * Make member @i of the scope on name @ni and queue it; the first one is
 * the lead, the ring's first link. Return: its slot, or WLK_NIL (the free
 * list, checked before, is damaged).
 */
static uint32_t member_new(struct wlk__bucket *b, const struct wlk__enqueue *e,
			   uint32_t i, uint32_t ni, uint32_t lead)
{
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint32_t ri = wlk__req_alloc(b);
	struct wlk_seg_request *r;

	if (ri == WLK_NIL)
		return WLK_NIL;
	r = wlk__req(b, ri);
	wlk__req_init(b, ri, e->client, e->client_gen, e->mode,
		      (uint8_t)(e->flags | WLK_REQF_SCOPE |
				(i == 0 ? WLK_REQF_LEAD : 0)));
	r->name = ni;
	r->name_gen = WLK_WORD_GEN(n->word);
	r->seq = (uint32_t)++n->seq;
	r->scope_n = (uint8_t)e->n_items;
	r->stamp_ns = wlk__stamp_ns();
	if (i == 0) {
		r->scope = ri;
		/* From here a crash undoes the scope (recover.c). */
		b->hdr->intent_args[0] = ri;
		b->hdr->intent_args[1] = WLK_WORD_GEN(r->word);
		wlk__word_store(&b->hdr->intent_op, WLK_INTENT_SCOPE_NEW);
	} else {
		r->scope = wlk__req(b, lead)->scope;
		wlk__req(b, lead)->scope = ri;
	}
	wlk__word_store(&r->word,
			WLK_WORD(WLK_WORD_GEN(r->word), WLK_SLOT_PENDING));
	if ((e->steal ? wlk__queue_prepend(b, n, ri)
		      : wlk__queue_append(b, n, ri)) != 0)
		return WLK_NIL;
	WLK_FAILPOINT(scope_new_mid);
	return ri;
}

/*
 * wlk__scope_drop() - release, abort or forget (stolen) the whole scope of
 * member @ri (scope.c, wlk__scope_free()), then run the queues of its
 * names (but @skip, whose queue the caller runs) in case the drop made
 * requests there grantable. Return: 0 or WLK_ECORRUPT.
 */
int wlk__scope_drop(struct wlk__bucket *b, uint32_t ri, uint32_t skip,
		    struct wlk__wake *wake)
{
	struct wlk__names names = {0};
	int rc = wlk__scope_free(b, ri, &names);

	return rc ? rc : wlk__names_run(b, &names, skip, wake);
}

/*
 * wlk__scope_cut() - wlk__scope_free() for a scope its requester does not
 * drop itself (a closing manager, a dead process): its waiter, on the
 * lead, is woken to see it gone; the names whose queues are to run go to
 * @names, for the caller to run once the client's other requests are
 * gone too (spec 2.6: none of them is granted on the way out).
 */
int wlk__scope_cut(struct wlk__bucket *b, uint32_t ri,
		   struct wlk__names *names, struct wlk__wake *wake)
{
	uint32_t m[WLK_SCOPE_MEMBERS_MAX];
	int k = wlk__scope_members(b, ri, m);

	if (k < 0)
		return k;
	wlk__wake_add(b, wake, wlk__scope_lead(b, m, k));
	return wlk__scope_free(b, ri, names);
}

/* wlk__scope_abort() - wlk__scope_cut(), and the queues run at once. */
int wlk__scope_abort(struct wlk__bucket *b, uint32_t ri,
		     struct wlk__wake *wake)
{
	struct wlk__names names = {0};
	int rc = wlk__scope_cut(b, ri, &names, wake);

	return rc ? rc : wlk__names_run(b, &names, WLK_NIL, wake);
}

/*
 * wlk__scope_steal_apply() - the steal branch of spec 4.1 for the scope of
 * member @ri, on every name: every other lock held on them is stolen
 * (whole scopes), and the scope is granted. Idempotent, for recovery.
 */
int wlk__scope_steal_apply(struct wlk__bucket *b, uint32_t ri,
			   struct wlk__names *names, struct wlk__wake *wake)
{
	uint32_t m[WLK_SCOPE_MEMBERS_MAX];
	int k = wlk__scope_members(b, ri, m);

	for (int i = 0; i < k; i++) {
		struct wlk_seg_name *n;
		uint32_t ni;
		int rc;

		n = wlk__name_of(b, wlk__req(b, m[i]), &ni);
		if (!n)
			return WLK_ECORRUPT;
		rc = wlk__steal_holders(b, n, m[i], names, wake);
		if (rc)
			return rc;
	}
	return k < 0 ? k : wlk__grant_members(b, m, k, wake);
}

/* The steal of a scope, bracketed by its redo intent. */
static int steal(struct wlk__bucket *b, uint32_t lead, const uint32_t *ni,
		 uint32_t k, struct wlk__wake *wake)
{
	struct wlk__names names = {0};
	int rc;

	b->hdr->intent_args[0] = lead;
	b->hdr->intent_args[1] = WLK_WORD_GEN(wlk__req(b, lead)->word);
	wlk__word_store(&b->hdr->intent_op, WLK_INTENT_SCOPE_STEAL);
	WLK_FAILPOINT(steal_after_intent);
	rc = wlk__scope_steal_apply(b, lead, &names, wake);
	/* The stealer is a new holder the waiters do not watch yet. */
	for (uint32_t i = 0; i < k && !rc; i++)
		wlk__wake_queue(b, wlk__name(b, ni[i]), wake);
	wlk__word_store(&b->hdr->intent_op, WLK_INTENT_NONE);
	return rc ? rc : wlk__names_run(b, &names, WLK_NIL, wake);
}

/*
 * wlk__request_scope() - wlk__request_lock() for a scope: @e->items, in
 * byte order, unique. On WLK__REQUESTED, *@slot and *@gen are the lead's
 * (the first name's member), which the requester waits on and releases
 * by, and every item has its member's slot and gen.
 * Return: as wlk__request_lock().
 */
int wlk__request_scope(struct wlk__bucket *b, const struct wlk__enqueue *e,
		       struct wlk__wake *wake, uint32_t *slot, uint32_t *gen)
{
	uint32_t ni[WLK_SCOPE_MEMBERS_MAX], missing, lead = WLK_NIL;
	int rc;

	if (!wlk__client_live(b, e->client, e->client_gen))
		return WLK_ESTATE;
	rc = lookup_all(b, e, ni, &missing);
	if (!rc && e->if_available && !available_all(b, e, ni))
		rc = e->probed ? WLK__UNAVAILABLE : WLK__UNPROBED;
	if (!rc)
		rc = admit(b, e, ni, missing);
	if (rc) {
		settle_all(b, e, ni);
		return rc;
	}
	rc = names_new(b, e, ni);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < e->n_items; i++) {
		uint32_t ri = member_new(b, e, i, ni[i], lead);

		if (ri == WLK_NIL)
			return wlk__corrupt(b); /* the repair undoes it */
		if (i == 0)
			lead = ri;
		e->items[i].slot = ri;
		e->items[i].gen = WLK_WORD_GEN(wlk__req(b, ri)->word);
	}
	*slot = lead;
	*gen = e->items[0].gen;
	wake->self1 = lead + 1;
	if (e->steal) {
		rc = steal(b, lead, ni, e->n_items, wake);
	} else {
		wlk__word_store(&b->hdr->intent_op, WLK_INTENT_NONE);
		/* Queued at the tails: nothing else can have become
		 * grantable, only the scope itself. */
		rc = wlk__scope_grant_if_clear(b, lead, wake);
		rc = rc < 0 ? rc : 0;
	}
	wake->self1 = 0;
	return rc;
}
