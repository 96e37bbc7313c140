/* SPDX-License-Identifier: MIT */
/*
 * validate_slots.c - the validator's checks of the slot tables but the
 * names (validate_names.c): agents, clients and requests, each table's
 * count and free list; and the report of one violation, which every
 * check makes.
 */
#include <stdarg.h>
#include <stdio.h>

#include "inspect_internal.h"

/* wlk__bad() - report a violation: kept up to REPORT_KEPT, then only
 * counted. */
void wlk__bad(struct wlk__vctx *v, const char *fmt, ...)
{
	va_list ap;

	if (v->count++ >= REPORT_KEPT)
		return;
	va_start(ap, fmt);
	vsnprintf(v->msgs[v->count - 1], REPORT_LEN, fmt, ap);
	va_end(ap);
}

/*
 * wlk__check_free_list() - a free list of @what, from @head in a table of
 * @max slots (@word and @next read a slot's): every member FREE, no
 * cycle, and exactly @want long.
 */
void wlk__check_free_list(struct wlk__vctx *v, const char *what,
			  uint32_t head, uint32_t max, uint32_t want,
			  uint32_t (*word)(struct wlk__bucket *, uint32_t),
			  uint32_t (*next)(struct wlk__bucket *, uint32_t))
{
	uint32_t n = 0, i = head;

	for (; i != WLK_NIL; i = next(v->b, i)) {
		if (i >= max || n >= max) {
			wlk__bad(v, "%s free list: bad index or cycle at %u",
				 what, i);
			return;
		}
		if (WLK_WORD_STATE(word(v->b, i)) != WLK_SLOT_FREE)
			wlk__bad(v, "%s %u on the free list is not free", what,
				 i);
		n++;
	}
	if (n != want)
		wlk__bad(v, "%s free list has %u entries, %u slots are free",
			 what, n, want);
}

static uint32_t agent_word(struct wlk__bucket *b, uint32_t i)
{
	return wlk__agent(b, i)->word;
}

static uint32_t agent_next(struct wlk__bucket *b, uint32_t i)
{
	return wlk__agent(b, i)->next;
}

static uint32_t client_word(struct wlk__bucket *b, uint32_t i)
{
	return wlk__client(b, i)->word;
}

static uint32_t client_next(struct wlk__bucket *b, uint32_t i)
{
	return wlk__client(b, i)->next;
}

static uint32_t req_word(struct wlk__bucket *b, uint32_t i)
{
	return wlk__req(b, i)->word;
}

static uint32_t req_next(struct wlk__bucket *b, uint32_t i)
{
	return wlk__req(b, i)->next;
}

/*
 * Indices are read once, bounded, then used: without the mutex
 * (wlk_inspect_check()) the segment changes under the checks.
 */
static bool agent_live(struct wlk__bucket *b, const struct wlk_seg_client *c)
{
	return wlk__agent_live(b, uatomic_read(&c->agent), c->agent_gen);
}

/*
 * Each live agent's list of its clients (layout.h, AGENT LISTS): bounded,
 * only its own live clients, and every one of the @live clients (in use,
 * their agent live) on one list.
 */
static void check_agent_lists(struct wlk__vctx *v, uint32_t live)
{
	struct wlk__bucket *b = v->b;
	uint32_t listed = 0;

	for (uint32_t ai = 0; ai < b->geo.max_agents; ai++) {
		const struct wlk_seg_agent *a = wlk__agent(b, ai);
		uint32_t w = uatomic_read(&a->word);
		uint32_t i = uatomic_read(&a->next);

		if (WLK_WORD_STATE(w) != WLK_SLOT_USED)
			continue;
		for (uint32_t steps = 0; i != WLK_NIL; steps++) {
			const struct wlk_seg_client *c;

			if (i >= b->geo.max_clients ||
			    steps >= b->geo.max_clients) {
				wlk__bad(v, "agent %u: client list: bad index "
					 "or cycle at %u", ai, i);
				break;
			}
			c = wlk__client(b, i);
			if (WLK_WORD_STATE(uatomic_read(&c->word)) !=
				    WLK_SLOT_USED ||
			    c->agent != ai ||
			    c->agent_gen != WLK_WORD_GEN(w))
				wlk__bad(v, "agent %u: client %u on its list "
					 "is not its own", ai, i);
			listed++;
			i = uatomic_read(&c->next);
		}
	}
	if (listed != live)
		wlk__bad(v, "agents' client lists hold %u clients, %u are in "
			 "use", listed, live);
}

/* wlk__check_agents_clients() - the agent and client tables: states,
 * counts, free lists, each client's agent alive, and the agents' lists
 * of their clients. */
void wlk__check_agents_clients(struct wlk__vctx *v)
{
	struct wlk__bucket *b = v->b;
	uint32_t used = 0, live = 0;

	for (uint32_t i = 0; i < b->geo.max_agents; i++) {
		uint32_t s = WLK_WORD_STATE(wlk__agent(b, i)->word);

		if (s == WLK_SLOT_USED)
			used++;
		else if (s != WLK_SLOT_FREE)
			wlk__bad(v, "agent %u: state %u", i, s);
	}
	if (used != b->hdr->n_agents)
		wlk__bad(v, "n_agents %u, %u agents in use", b->hdr->n_agents,
			 used);
	wlk__check_free_list(v, "agent", b->hdr->free_agents, b->geo.max_agents,
			     b->geo.max_agents - used, agent_word, agent_next);
	used = 0;
	for (uint32_t i = 0; i < b->geo.max_clients; i++) {
		struct wlk_seg_client *c = wlk__client(b, i);
		uint32_t s = WLK_WORD_STATE(c->word);

		if (s == WLK_SLOT_FREE)
			continue;
		used++;
		if (s != WLK_SLOT_USED)
			wlk__bad(v, "client %u: state %u", i, s);
		else if (!agent_live(b, c))
			wlk__bad(v, "client %u: its agent %u is gone", i,
				 c->agent);
		else
			live++;
		if (c->id_len > WLK_CLIENT_ID_MAX)
			wlk__bad(v, "client %u: id length %u", i, c->id_len);
	}
	if (used != b->hdr->n_clients)
		wlk__bad(v, "n_clients %u, %u clients in use",
			 b->hdr->n_clients, used);
	wlk__check_free_list(v, "client", b->hdr->free_clients,
			     b->geo.max_clients, b->geo.max_clients - used,
			     client_word, client_next);
	check_agent_lists(v, live);
}

/* Tokens come from the name's counter: at least 1, at most its last. */
static bool token_ok(struct wlk__bucket *b, const struct wlk_seg_request *r)
{
	uint32_t ni = uatomic_read(&r->name);

	if (!r->token)
		return false;
	if (ni >= b->geo.max_names ||
	    wlk__name(b, ni)->word != WLK_WORD(r->name_gen, WLK_SLOT_USED))
		return true; /* stolen, and the name went since */
	return r->token <= wlk__name(b, ni)->token;
}

/*
 * The ring of scope lead @li (layout.h, SCOPES): every member a live scope
 * member of the same client, mode and state as the lead, on a name of its
 * own, and no other lead; the ring closes within WLK_SCOPE_MEMBERS_MAX.
 * Return: how many members it has (0 if it does not close).
 */
static uint32_t check_scope(struct wlk__vctx *v, uint32_t li)
{
	struct wlk__bucket *b = v->b;
	const struct wlk_seg_request *lead = wlk__req(b, li);
	uint32_t names[WLK_SCOPE_MEMBERS_MAX], n = 0, i = li;

	do {
		const struct wlk_seg_request *r = wlk__req(b, i);
		uint32_t next = uatomic_read(&r->scope);

		if (!(r->flags & WLK_REQF_SCOPE) ||
		    WLK_WORD_STATE(r->word) != WLK_WORD_STATE(lead->word) ||
		    r->client != lead->client ||
		    r->client_gen != lead->client_gen ||
		    r->mode != lead->mode ||
		    (i != li && (r->flags & WLK_REQF_LEAD)))
			wlk__bad(v, "scope of request %u: member %u differs",
				 li, i);
		for (uint32_t j = 0; j < n; j++)
			if (names[j] == r->name)
				wlk__bad(v, "scope of request %u: name %u twice",
					 li, r->name);
		names[n++] = r->name;
		if (next >= b->geo.max_requests || n == WLK_SCOPE_MEMBERS_MAX) {
			if (next != li)
				wlk__bad(v, "scope of request %u: its ring "
					    "does not close", li);
			return next == li ? n : 0;
		}
		i = next;
	} while (i != li);
	if (n < 2 || n != lead->scope_n)
		wlk__bad(v, "scope of request %u: %u members, %u counted", li,
			 n, lead->scope_n);
	return n;
}

/*
 * Each live client's list of its request slots (layout.h, CLIENT LISTS):
 * bounded, linked both ways, only its own slots, none free. @owned: the
 * slots in use whose client lives, all of which must be listed.
 */
static void check_client_lists(struct wlk__vctx *v, uint32_t owned)
{
	struct wlk__bucket *b = v->b;
	uint32_t listed = 0;

	for (uint32_t ci = 0; ci < b->geo.max_clients; ci++) {
		const struct wlk_seg_client *c = wlk__client(b, ci);
		uint32_t w = uatomic_read(&c->word), prev = WLK_NIL;
		uint32_t gen = WLK_WORD_GEN(w);

		if (WLK_WORD_STATE(w) != WLK_SLOT_USED)
			continue;
		for (uint32_t i = c->reqs, n = 0; i != WLK_NIL; n++) {
			const struct wlk_seg_request *r = wlk__req_at(b, i);

			if (!r || n >= b->geo.max_requests) {
				wlk__bad(v, "client %u's list: bad index or "
					 "cycle at %u", ci, i);
				break;
			}
			if (WLK_WORD_STATE(r->word) == WLK_SLOT_FREE ||
			    r->client != ci || r->client_gen != gen)
				wlk__bad(v, "client %u's list has request %u, "
					 "not its own", ci, i);
			if (r->cprev != prev)
				wlk__bad(v, "request %u: cprev %u, not %u", i,
					 r->cprev, prev);
			listed++;
			prev = i;
			i = r->cnext;
		}
	}
	if (listed != owned)
		wlk__bad(v, "%u requests on their clients' lists, %u in use "
			 "by live clients", listed, owned);
}

/*
 * wlk__check_requests() - the request table: states, modes, clients,
 * tokens, count and free list; and each request listed where its state
 * says (after wlk__check_names(), which marks the listed ones), and on
 * its client's list.
 */
void wlk__check_requests(struct wlk__vctx *v)
{
	struct wlk__bucket *b = v->b;
	uint32_t used = 0, members = 0, ringed = 0, owned = 0;

	for (uint32_t i = 0; i < b->geo.max_requests; i++) {
		struct wlk_seg_request *r = wlk__req(b, i);
		uint32_t s = WLK_WORD_STATE(r->word);

		if (s == WLK_SLOT_FREE)
			continue;
		used++;
		if (r->flags & WLK_REQF_SCOPE) {
			members++;
			if (r->flags & WLK_REQF_LEAD)
				ringed += check_scope(v, i);
		}
		if (s < WLK_SLOT_PENDING || s > WLK_SLOT_FAST) {
			wlk__bad(v, "request %u: state %u", i, s);
			continue;
		}
		if (r->mode > WLK_SHARED)
			wlk__bad(v, "request %u: mode %u", i, r->mode);
		if (!wlk__client_live(b, r->client, r->client_gen))
			wlk__bad(v, "request %u: its client %u is gone", i,
				 r->client);
		else
			owned++;
		/* Stolen, reserved and fast requests are in no list; a fast
		 * one holds its name only if the name's fast word says so
		 * (validate_names.c), else its acquire is in flight. */
		if (s < WLK_SLOT_STOLEN && !v->seen[i])
			wlk__bad(v, "request %u: in no list", i);
		if (s >= WLK_SLOT_STOLEN && v->seen[i])
			wlk__bad(v, "request %u in state %u is listed", i, s);
		if ((s == WLK_SLOT_HELD || s == WLK_SLOT_STOLEN) &&
		    !token_ok(b, r))
			wlk__bad(v, "request %u: token %llu", i,
				 (unsigned long long)r->token);
	}
	if (members != ringed)
		wlk__bad(v, "%u scope members, %u in a lead's ring", members,
			 ringed);
	check_client_lists(v, owned);
	if (used != b->hdr->n_requests)
		wlk__bad(v, "n_requests %u, %u requests in use",
			 b->hdr->n_requests, used);
	wlk__check_free_list(v, "request", b->hdr->free_requests,
			     b->geo.max_requests, b->geo.max_requests - used,
			     req_word, req_next);
}
