/* SPDX-License-Identifier: MIT */
/*
 * recover.c - rebuild the derived state of a segment from its authoritative
 * slot words, after a process died inside a critical section.
 *
 * Authoritative: the state word and fields of every agent, client, name and
 * request slot, and the intent record. Derived: free lists, hash chains,
 * client lists, queues, held lists, counts. Recovery re-derives everything,
 * drops slots whose references dangle (a request of a freed client, a
 * client of a freed agent), redoes an interrupted steal, and re-runs the
 * grant algorithm on every name. It changes nothing authoritative that is
 * consistent, so it is idempotent: a recoverer killed halfway leaves
 * EOWNERDEAD for the next one, which starts again from the top. Segment
 * creation uses the same rebuild on an all-FREE segment.
 */
#include <errno.h>

#include "repair.h"

/* Owners' tags in the chunks' marks (wlk__text_mark()): nonzero. */
#define NAME_TAG(i) ((i) + 1u)
#define CLIENT_TAG(i) ((i) | 0x80000000u)
_Static_assert(WLK_LIMIT_MAX_NAMES < 0x80000000u, "tags apart");

static void rebuild_agents(struct wlk__bucket *b)
{
	struct wlk_seg_header *h = b->hdr;

	h->free_agents = WLK_NIL;
	h->n_agents = 0;
	for (uint32_t i = b->geo.max_agents; i-- > 0;) {
		struct wlk_seg_agent *a = wlk__agent(b, i);

		if (WLK_WORD_STATE(a->word) == WLK_SLOT_USED) {
			a->next = WLK_NIL; /* rebuild_clients() fills it */
			h->n_agents++;
			continue;
		}
		if (WLK_WORD_STATE(a->word) != WLK_SLOT_FREE)
			a->word = WLK_WORD(WLK_WORD_GEN(a->word) + 1,
					   WLK_SLOT_FREE);
		a->next = h->free_agents;
		h->free_agents = i;
	}
}

static void rebuild_clients(struct wlk__bucket *b)
{
	struct wlk_seg_header *h = b->hdr;

	h->free_clients = WLK_NIL;
	h->n_clients = 0;
	for (uint32_t i = b->geo.max_clients; i-- > 0;) {
		struct wlk_seg_client *c = wlk__client(b, i);
		uint32_t ai = c->agent;

		c->reqs = WLK_NIL; /* rebuild_requests() fills it */
		if (WLK_WORD_STATE(c->word) == WLK_SLOT_USED &&
		    wlk__agent_live(b, ai, c->agent_gen) && c->id_len &&
		    c->id_len <= WLK_CLIENT_ID_MAX &&
		    wlk__text_mark(b, c->id, c->id_len, CLIENT_TAG(i))) {
			/* Its agent's list (layout.h, AGENT LISTS). */
			c->next = wlk__agent(b, ai)->next;
			wlk__agent(b, ai)->next = i;
			h->n_clients++;
			continue;
		}
		if (WLK_WORD_STATE(c->word) != WLK_SLOT_FREE)
			c->word = WLK_WORD(WLK_WORD_GEN(c->word) + 1,
					   WLK_SLOT_FREE);
		c->next = h->free_clients;
		h->free_clients = i;
	}
}

/* A name slot whose word or length is damaged is freed, gen + 1, as an
 * evicted one is, its tokens carried. */
static void name_drop(struct wlk__bucket *b, struct wlk_seg_name *n)
{
	wlk__name_tokens_carry(b, n);
	n->word = WLK_WORD(WLK_WORD_GEN(n->word) + 1, WLK_SLOT_FREE);
}

/*
 * Names: clear derived fields, claim their text, re-hash; their lists
 * come after requests. A name whose text is broken is dropped.
 */
static void rebuild_names(struct wlk__bucket *b)
{
	for (uint32_t i = 0; i < b->geo.max_names; i++) {
		struct wlk_seg_name *n = wlk__name(b, i);
		uint32_t state = WLK_WORD_STATE(n->word), len = n->len;

		wlk__name_reset(n);
		if (state == WLK_SLOT_FREE)
			continue;
		if (state != WLK_SLOT_USED || len > b->geo.max_name_len ||
		    wlk__name_rehash(b, n, len, &n->hash) ||
		    (wlk__name_chunks(len) &&
		     !wlk__text_mark(b, n->chunk, len, NAME_TAG(i)))) {
			name_drop(b, n);
			continue;
		}
	}
}

/*
 * Whether a request's references hold; if not it is dropped. @state and
 * @name are the slot's, read once by the caller, which uses them after.
 */
static bool request_sane(struct wlk__bucket *b, struct wlk_seg_request *r,
			 uint32_t state, uint32_t name)
{
	if (state < WLK_SLOT_PENDING || state > WLK_SLOT_FAST ||
	    r->mode > WLK_SHARED ||
	    !wlk__client_live(b, r->client, r->client_gen))
		return false;
	/* A stolen lock is in no list; its name may be gone. A slot kept
	 * for the fast path, or claimed by it, is in no list either. */
	return state >= WLK_SLOT_STOLEN ||
	       (wlk__name_at(b, name) &&
		wlk__name(b, name)->word ==
			WLK_WORD(r->name_gen, WLK_SLOT_USED));
}

/*
 * Whether the scope of member @ri holds together (layout.h, SCOPES): its
 * ring closes after its count of members, every one of them sane, live
 * (pending, held or stolen: a mix is a grant or steal in progress, which
 * the intent record's redo finishes) and of one client, one the lead. A
 * scope that does not is dropped whole: each member, looked at in turn,
 * finds the same fault, or a member freed before it.
 */
static bool scope_sane(struct wlk__bucket *b, uint32_t ri)
{
	const struct wlk_seg_request *first = wlk__req(b, ri);
	uint32_t i = ri, n = 0, leads = 0;

	do {
		struct wlk_seg_request *r = wlk__req_at(b, i);
		uint32_t state;

		if (!r || n == first->scope_n)
			return false;
		state = WLK_WORD_STATE(r->word);
		if (!(r->flags & WLK_REQF_SCOPE) || state < WLK_SLOT_PENDING ||
		    state > WLK_SLOT_STOLEN || r->client != first->client ||
		    r->client_gen != first->client_gen ||
		    !request_sane(b, r, state, r->name))
			return false;
		leads += (r->flags & WLK_REQF_LEAD) != 0;
		n++;
		i = r->scope;
	} while (i != ri);
	return n == first->scope_n && leads == 1;
}

/* Insert a pending request into its queue, keeping request order. */
static void queue_insert(struct wlk__bucket *b, struct wlk_seg_name *n,
			 uint32_t ri)
{
	struct wlk_seg_request *r = wlk__req(b, ri);
	uint32_t after = n->q_tail;

	while (after != WLK_NIL &&
	       WLK_SEQ_AFTER(wlk__req(b, after)->seq, r->seq))
		after = wlk__req(b, after)->prev;
	r->prev = after;
	r->next = after == WLK_NIL ? n->q_head : wlk__req(b, after)->next;
	if (r->next == WLK_NIL)
		n->q_tail = ri;
	else
		wlk__req(b, r->next)->prev = ri;
	if (after == WLK_NIL)
		n->q_head = ri;
	else
		wlk__req(b, after)->next = ri;
	n->n_pending++;
}

/* A fast holder or waiter @s of a live client becomes HELD or PENDING,
 * as an inflation adopts it (queue.c); the lists are linked below. */
static void rebuild_one(struct wlk__bucket *b, struct wlk_seg_name *n,
			uint32_t s, uint32_t state)
{
	struct wlk_seg_request *r;

	if (s == WLK_NIL)
		return;
	r = wlk__req(b, s);
	if (wlk__client_live(b, r->client, r->client_gen))
		wlk__adopt_slot(n, r, state);
}

/*
 * Fast words: every fast holder becomes an ordinary held request and every
 * fast waiter a pending one after it, linked below with the others (so an
 * inflation a dead process left halfway is finished), and every fast path
 * is turned off; idle names get theirs back once the lists are rebuilt.
 * Live fast paths race with this: CAS. A waiter whose holder is gone is
 * granted when the queues are processed.
 */
static void rebuild_fast(struct wlk__bucket *b)
{
	for (uint32_t i = 0; i < b->geo.max_names; i++) {
		struct wlk_seg_name *n = wlk__name(b, i);
		uint32_t s = WLK_NIL, w = WLK_NIL;

		if (WLK_WORD_STATE(n->word) == WLK_SLOT_USED)
			s = wlk__fast_off(b, i, &w);
		rebuild_one(b, n, s, WLK_SLOT_HELD);
		rebuild_one(b, n, w, WLK_SLOT_PENDING);
		wlk__fast_reset(n);
	}
}

static void rebuild_requests(struct wlk__bucket *b)
{
	struct wlk_seg_header *h = b->hdr;

	h->free_requests = WLK_NIL;
	h->n_requests = 0;
	for (uint32_t i = b->geo.max_requests; i-- > 0;) {
		struct wlk_seg_request *r = wlk__req(b, i);
		uint32_t word = r->word, name = r->name;
		uint32_t state = WLK_WORD_STATE(word);

		if (state != WLK_SLOT_FREE &&
		    (!request_sane(b, r, state, name) ||
		     ((r->flags & WLK_REQF_SCOPE) && !scope_sane(b, i)))) {
			r->word = WLK_WORD(WLK_WORD_GEN(word) + 1,
					   WLK_SLOT_FREE);
			state = WLK_SLOT_FREE;
		}
		r->cprev = r->cnext = WLK_NIL;
		if (state == WLK_SLOT_FREE) {
			r->prev = WLK_NIL;
			r->next = h->free_requests;
			h->free_requests = i;
			continue;
		}
		h->n_requests++;
		r->prev = r->next = WLK_NIL;
		/* Its client lives (request_sane()). */
		wlk__client_push(b, i);
		if (state == WLK_SLOT_PENDING)
			queue_insert(b, wlk__name(b, name), i);
		else if (state == WLK_SLOT_HELD)
			/* The lists were emptied: appending cannot fail. */
			(void)wlk__held_add(b, wlk__name(b, name), i);
	}
}

/* Names nobody refers to are idle, the rest busy, in slot order (NAME
 * LISTS); all are counted. */
static void rebuild_name_lists(struct wlk__bucket *b)
{
	struct wlk_seg_header *h = b->hdr;
	uint32_t *heads = wlk__hash_heads(b);

	h->free_names = WLK_NIL;
	h->idle_head = h->idle_tail = WLK_NIL;
	h->busy_head = h->busy_tail = WLK_NIL;
	h->n_names = 0;
	h->name_bytes = 0;
	for (uint32_t i = 0; i < b->geo.hash_buckets; i++)
		heads[i] = WLK_NIL;
	for (uint32_t i = b->geo.max_names; i-- > 0;) {
		struct wlk_seg_name *n = wlk__name(b, i);
		uint32_t *head;

		if (WLK_WORD_STATE(n->word) != WLK_SLOT_USED) {
			n->chain = h->free_names;
			h->free_names = i;
			continue;
		}
		h->n_names++;
		h->name_bytes += n->len;
		head = &heads[n->hash & (b->geo.hash_buckets - 1)];
		n->chain = *head;
		*head = i;
	}
	for (uint32_t i = 0; i < b->geo.max_names; i++) {
		struct wlk_seg_name *n = wlk__name(b, i);

		n->list = WLK_LIST_NONE;
		if (WLK_WORD_STATE(n->word) != WLK_SLOT_USED)
			continue;
		if (!wlk__name_idle(n)) {
			wlk__name_list_put(b, i, WLK_LIST_BUSY);
			continue;
		}
		wlk__name_list_put(b, i, WLK_LIST_IDLE);
		wlk__fast_deflate(b, i);
	}
}

/*
 * rebuild() - re-derive every derived field from the slot words.
 * Return: 0, or WLK_ECORRUPT if the header itself no longer matches the
 * geometry this process validated.
 */
static int rebuild(struct wlk__bucket *b)
{
	struct wlk_seg_header *h = b->hdr;

	if (h->max_requests != b->geo.max_requests ||
	    h->max_names != b->geo.max_names ||
	    h->max_name_len != b->geo.max_name_len ||
	    h->max_chunks != b->geo.max_chunks ||
	    h->segment_size != b->geo.size)
		return WLK_ECORRUPT;
	rebuild_agents(b);
	wlk__text_unmark(b);
	rebuild_clients(b);
	rebuild_names(b);
	wlk__text_rebuild(b);
	rebuild_fast(b);
	rebuild_requests(b);
	rebuild_name_lists(b);
	/* No query copies while we hold the mutex: one that died copying
	 * left it set (layout.h, QUERY). */
	uatomic_set(&h->freeze, 0);
	return 0;
}

/*
 * wlk__segment_format() - initialise the derived state of a freshly zeroed
 * segment. Return: 0, or WLK_ECORRUPT if its header changed under us.
 */
int wlk__segment_format(struct wlk__bucket *b)
{
	int rc = rebuild(b);

	b->hdr->intent_op = WLK_INTENT_NONE;
	return rc;
}

/*
 * Redo a steal that its requester did not finish, or a scope's grant,
 * drop or steal that their thread did not; undo a scope being made (its
 * requester is gone with that thread's process, or finds its request
 * gone). The rebuild before has linked whatever members were PENDING or
 * HELD; a freed member keeps its ring links (scope.c). The queues of the
 * names it touched run afterwards, with every other. Return: 0 or
 * WLK_ECORRUPT.
 */
static int redo_intent(struct wlk__bucket *b, struct wlk__wake *wake)
{
	struct wlk_seg_header *h = b->hdr;
	uint32_t ri = h->intent_args[0], gen = h->intent_args[1], w;
	struct wlk__names names = {0};
	uint32_t op = h->intent_op;
	int rc = 0;

	if (op == WLK_INTENT_NONE || !wlk__req_at(b, ri))
		goto done;
	w = wlk__req(b, ri)->word;
	/* A scope being made names its lead, made first; one being dropped
	 * names the member its drop frees first (gen + 1 then). Nothing is
	 * allocated before recovery, so the slot is still that member. */
	if (op == WLK_INTENT_SCOPE_DROP || op == WLK_INTENT_SCOPE_NEW) {
		if (WLK_WORD_GEN(w) == gen ||
		    (op == WLK_INTENT_SCOPE_DROP && WLK_WORD_GEN(w) == gen + 1))
			rc = wlk__scope_drop(b, ri, WLK_NIL, wake);
	} else if (w == WLK_WORD(gen, WLK_SLOT_PENDING) ||
		   w == WLK_WORD(gen, WLK_SLOT_HELD)) {
		if (op == WLK_INTENT_STEAL)
			rc = wlk__steal_apply(b, ri, &names, wake);
		else if (op == WLK_INTENT_SCOPE_STEAL)
			rc = wlk__scope_steal_apply(b, ri, &names, wake);
		else if (op == WLK_INTENT_SCOPE_GRANT)
			rc = wlk__scope_grant(b, ri, wake);
	}
done:
	h->intent_op = WLK_INTENT_NONE;
	return rc;
}

/*
 * wlk__recover() - repair the segment under its mutex (EOWNERDEAD or a bad
 * index seen by an operation). Every waiter is woken afterwards to re-check.
 * Return: 0, or WLK_ECORRUPT if the segment cannot be repaired: the state
 * just rebuilt does not hold together.
 */
int wlk__recover(struct wlk__bucket *b, struct wlk__wake *wake)
{
	struct wlk_seg_header *h = b->hdr;
	int rc;

	rc = rebuild(b);
	if (rc)
		return rc;
	/* Cleared here, not at the end: damage the steps below meet (a
	 * reaped client's queues) stays flagged for the next locker. */
	uatomic_set(&h->needs_repair, 0);
	WLK_FAILPOINT(recover_mid);
	rc = redo_intent(b, wake);
	if (rc)
		return rc;
	/* The dead thread's process is often dead as a whole. Dead agents
	 * beyond one batch are left to the next pass (attach, query, or a
	 * waiter their lifeline wakes): not an error. */
	(void)wlk__reap_all(b, wake);
	for (uint32_t i = 0; i < b->geo.max_names; i++) {
		if (WLK_WORD_STATE(wlk__name(b, i)->word) != WLK_SLOT_USED)
			continue;
		rc = wlk__process_queue(b, i, wake);
		if (rc)
			return rc;
	}
	h->recovery_epoch++;
	wake->sweep = true;
	return 0;
}
