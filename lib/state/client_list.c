/* SPDX-License-Identifier: MIT */
/*
 * client_list.c - each client's list of its request slots (layout.h,
 * CLIENT LISTS), so that a manager's close and the reaping of a dead
 * process cost the client's own slots, not the whole request table.
 *
 * The links are derived state: a link that does not point back, or out
 * of bounds, is damage. It is flagged for repair (recovery rebuilds the
 * lists) and never followed; the slot leaves the list all the same.
 * Everything here runs under the segment mutex.
 */
#include "state.h"

/*
 * wlk__client_push() - request slot @ri, just taken from the free list
 * for its client (r->client, r->client_gen: live), joins the client's
 * list, at its head.
 */
void wlk__client_push(struct wlk__bucket *b, uint32_t ri)
{
	struct wlk_seg_request *r = wlk__req(b, ri);
	struct wlk_seg_client *c = wlk__client_at(b, r->client);
	struct wlk_seg_request *first;

	r->cprev = r->cnext = WLK_NIL;
	if (!c)
		return;
	first = wlk__req_at(b, c->reqs);
	if (!first && c->reqs != WLK_NIL)
		wlk__corrupt(b); /* the rest of its list is lost: repair */
	if (first) {
		first->cprev = ri;
		r->cnext = c->reqs;
	}
	c->reqs = ri;
}

/*
 * wlk__client_unlink() - request slot @ri leaves its client's list, if
 * its client is still there; a slot whose client went first (a closed
 * client's slot left to its live owner) is on no list.
 */
void wlk__client_unlink(struct wlk__bucket *b, uint32_t ri)
{
	struct wlk_seg_request *r = wlk__req(b, ri);
	uint32_t prev = r->cprev, next = r->cnext;
	struct wlk_seg_request *p = wlk__req_at(b, prev);
	struct wlk_seg_request *n = wlk__req_at(b, next);
	struct wlk_seg_client *c;

	r->cprev = r->cnext = WLK_NIL;
	if (!wlk__client_live(b, r->client, r->client_gen))
		return;
	c = wlk__client(b, r->client);
	if (prev == WLK_NIL && c->reqs == ri)
		c->reqs = next;
	else if (p && p->cnext == ri)
		p->cnext = next;
	else
		wlk__corrupt(b); /* not on its client's list */
	if (n && n->cprev == ri)
		n->cprev = prev;
	else if (next != WLK_NIL)
		wlk__corrupt(b);
}

/*
 * wlk__client_next() - the slot after @ri on client @ci's list (gen @gen),
 * WLK_NIL after the last; @ri WLK_NIL for the first. @steps counts the
 * walk. Return: false if the list is damaged there (a link out of
 * bounds or not pointing back, a slot not the client's, or a walk longer
 * than the table): the caller walks the table instead.
 */
bool wlk__client_next(struct wlk__bucket *b, uint32_t ci, uint32_t gen,
		      uint32_t ri, uint32_t *next, uint32_t steps)
{
	const struct wlk_seg_client *c = wlk__client(b, ci);
	uint32_t i = ri == WLK_NIL ? c->reqs : wlk__req(b, ri)->cnext;
	const struct wlk_seg_request *r;

	*next = i;
	if (i == WLK_NIL)
		return true;
	r = wlk__req_at(b, i);
	if (!r || !wlk__walk_ok(b, steps) || r->client != ci ||
	    r->client_gen != gen || r->cprev != ri ||
	    WLK_WORD_STATE(uatomic_read(&r->word)) == WLK_SLOT_FREE) {
		wlk__corrupt(b);
		return false;
	}
	return true;
}
