/* SPDX-License-Identifier: MIT */
/*
 * validate.c - check every invariant of a segment, report each violation.
 *
 * Run under the segment mutex for a consistent view. It only reads, bounds
 * every index and every walk, and never trusts a derived field it has not
 * checked against the authoritative slot words. Tests run it after every
 * multi-process test and after every fail point; it is the oracle of the
 * crash-consistency work.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect_internal.h"

struct vctx {
	struct wlk__bucket *b;
	unsigned int count;
	uint8_t *seen; /* per request slot: listed once */
	/* Per request slot: the claim (gen bits + 1) seen as some name's
	 * fast holder or waiter; a lane slot may move on to another name
	 * while we look, with a new claim. */
	uint16_t *fast_seen;
	uint8_t *idle_seen; /* per name slot: on the idle list */
	char (*msgs)[REPORT_LEN];
};

__attribute__((format(printf, 2, 3)))
static void bad(struct vctx *v, const char *fmt, ...)
{
	va_list ap;

	if (v->count++ >= REPORT_KEPT)
		return;
	va_start(ap, fmt);
	vsnprintf(v->msgs[v->count - 1], REPORT_LEN, fmt, ap);
	va_end(ap);
}

/* A free list: every member FREE, no cycle, and exactly @want long. */
static void check_free_list(struct vctx *v, const char *what, uint32_t head,
			    uint32_t max, uint32_t want,
			    uint32_t (*word)(struct wlk__bucket *, uint32_t),
			    uint32_t (*next)(struct wlk__bucket *, uint32_t))
{
	uint32_t n = 0, i = head;

	for (; i != WLK_NIL; i = next(v->b, i)) {
		if (i >= max || n >= max) {
			bad(v, "%s free list: bad index or cycle at %u", what,
			    i);
			return;
		}
		if (WLK_WORD_STATE(word(v->b, i)) != WLK_SLOT_FREE)
			bad(v, "%s %u on the free list is not free", what, i);
		n++;
	}
	if (n != want)
		bad(v, "%s free list has %u entries, %u slots are free", what,
		    n, want);
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

static uint32_t name_word(struct wlk__bucket *b, uint32_t i)
{
	return wlk__name(b, i)->word;
}

static uint32_t name_next(struct wlk__bucket *b, uint32_t i)
{
	return wlk__name(b, i)->chain;
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
	uint32_t ai = uatomic_read(&c->agent);

	return ai < b->geo.max_agents &&
	       wlk__agent(b, ai)->word == WLK_WORD(c->agent_gen, WLK_SLOT_USED);
}

static void check_agents_clients(struct vctx *v)
{
	struct wlk__bucket *b = v->b;
	uint32_t used = 0;

	for (uint32_t i = 0; i < b->geo.max_agents; i++) {
		uint32_t s = WLK_WORD_STATE(wlk__agent(b, i)->word);

		if (s == WLK_SLOT_USED)
			used++;
		else if (s != WLK_SLOT_FREE)
			bad(v, "agent %u: state %u", i, s);
	}
	if (used != b->hdr->n_agents)
		bad(v, "n_agents %u, %u agents in use", b->hdr->n_agents, used);
	check_free_list(v, "agent", b->hdr->free_agents, b->geo.max_agents,
			b->geo.max_agents - used, agent_word, agent_next);
	used = 0;
	for (uint32_t i = 0; i < b->geo.max_clients; i++) {
		struct wlk_seg_client *c = wlk__client(b, i);
		uint32_t s = WLK_WORD_STATE(c->word);

		if (s == WLK_SLOT_FREE)
			continue;
		used++;
		if (s != WLK_SLOT_USED)
			bad(v, "client %u: state %u", i, s);
		else if (!agent_live(b, c))
			bad(v, "client %u: its agent %u is gone", i, c->agent);
		if (c->id_len > WLK_CLIENT_ID_MAX)
			bad(v, "client %u: id length %u", i, c->id_len);
	}
	if (used != b->hdr->n_clients)
		bad(v, "n_clients %u, %u clients in use", b->hdr->n_clients,
		    used);
	check_free_list(v, "client", b->hdr->free_clients, b->geo.max_clients,
			b->geo.max_clients - used, client_word, client_next);
}

/* One list of a name: links, membership, state; returns the length. */
static uint32_t check_list(struct vctx *v, uint32_t ni, bool held,
			   uint32_t *excl, uint32_t *shared)
{
	struct wlk__bucket *b = v->b;
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint32_t i = held ? n->h_head : n->q_head, prev = WLK_NIL, len = 0;
	uint32_t want = held ? WLK_SLOT_HELD : WLK_SLOT_PENDING;
	uint64_t last_seq = 0;

	for (; i != WLK_NIL; prev = i, i = wlk__req(b, i)->next) {
		struct wlk_seg_request *r;

		if (i >= b->geo.max_requests || len >= b->geo.max_requests) {
			bad(v, "name %u: bad index or cycle at %u", ni, i);
			return len;
		}
		r = wlk__req(b, i);
		if (v->seen[i]++)
			bad(v, "request %u is listed twice", i);
		if (r->prev != prev)
			bad(v, "request %u: prev %u, want %u", i, r->prev,
			    prev);
		if (r->word != WLK_WORD(WLK_WORD_GEN(r->word), want))
			bad(v, "request %u: state %u in a %s list", i,
			    WLK_WORD_STATE(r->word), held ? "held" : "queue");
		if (r->name != ni || r->name_gen != WLK_WORD_GEN(n->word))
			bad(v, "request %u: listed under name %u, refers to %u",
			    i, ni, r->name);
		if (!held && r->seq <= last_seq)
			bad(v, "name %u: queue out of request order at %u", ni,
			    i);
		last_seq = r->seq;
		if (r->mode == WLK_SHARED)
			(*shared)++;
		else
			(*excl)++;
		len++;
	}
	if ((held ? n->h_tail : n->q_tail) != prev)
		bad(v, "name %u: %s tail %u, want %u", ni,
		    held ? "held" : "queue", held ? n->h_tail : n->q_tail,
		    prev);
	return len;
}

/* Whether fast word part @who was seen already (on another name). */
static bool seen_twice(struct vctx *v, uint64_t who)
{
	uint32_t s = WLK_FAST_HOLDER1(who) - 1;
	uint16_t mark = (uint16_t)(WLK_FAST_SGEN(who) + 1);

	if (v->fast_seen[s] == mark)
		return true;
	v->fast_seen[s] = mark;
	return false;
}

/*
 * The name's fast word (layout.h, FAST PATH) and waiter word: what is
 * wrong with them, or NULL. The fast path goes on while we hold the
 * mutex, so this is believed only if both words stay the same meanwhile
 * (a slot's gen changes with every claim).
 */
static const char *fast_verdict(struct vctx *v, uint32_t ni, bool idle,
				uint64_t f, uint64_t c)
{
	struct wlk__bucket *b = v->b;
	uint32_t h1 = WLK_FAST_HOLDER1(f), w1 = WLK_FAST_HOLDER1(c);

	if (WLK_FAST_NGEN(f) != WLK_WORD_GEN(wlk__name(b, ni)->word))
		return "fast word of another name gen";
	/* Off while idle is allowed: a name is deflated when a request goes. */
	if (!(f & WLK_FAST_ON))
		return h1 ? "fast path off with a holder" : NULL;
	if (!idle)
		return "fast path on with a held set or queue";
	if (h1 && !wlk__fast_holds(b, ni, h1 - 1))
		return "fast holder is not its fast request";
	if (!(f & WLK_FAST_WAIT))
		return NULL;
	if (!h1)
		return "a fast waiter but no holder";
	if (!w1 || !wlk__fast_waits(b, ni, w1 - 1))
		return "fast waiter is not its fast request";
	return NULL;
}

static void check_fast(struct vctx *v, uint32_t ni, bool idle)
{
	struct wlk_seg_name *n = wlk__name(v->b, ni);

	for (int tries = 0; tries < VALIDATE_FAST_TRIES; tries++) {
		uint64_t f, c, f2, c2;
		const char *why;

		if (!wlk__fast_words(n, &f, &c))
			continue;
		why = fast_verdict(v, ni, idle, f, c);
		if (!wlk__fast_words(n, &f2, &c2) || f2 != f || c2 != c)
			continue; /* it moved: look again */
		if (why)
			bad(v, "name %u: %s (fast word %#llx, waiter %#llx)",
			    ni, why, (unsigned long long)f,
			    (unsigned long long)c);
		else if ((f & WLK_FAST_ON) && WLK_FAST_HOLDER1(f) &&
			 seen_twice(v, f))
			bad(v, "name %u: fast holder %u of two names", ni,
			    WLK_FAST_HOLDER1(f) - 1);
		else if ((f & WLK_FAST_ON) && (f & WLK_FAST_WAIT) &&
			 seen_twice(v, c))
			bad(v, "name %u: fast waiter %u of two names", ni,
			    WLK_FAST_HOLDER1(c) - 1);
		return;
	}
}

static void check_name(struct vctx *v, uint32_t ni, uint64_t *bytes)
{
	struct wlk__bucket *b = v->b;
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint32_t ex = 0, sh = 0, qex = 0, qsh = 0, q, i, steps = 0;

	if (n->len > b->geo.max_name_len) {
		bad(v, "name %u: length %u", ni, n->len);
		return;
	}
	*bytes += n->len;
	if (n->hash != wlk__name_hash(b, wlk__name_bytes(n), n->len))
		bad(v, "name %u: stale hash", ni);
	for (i = wlk__hash_heads(b)[n->hash & (b->geo.hash_buckets - 1)];
	     i != ni && i < b->geo.max_names && steps < b->geo.max_names;
	     i = wlk__name(b, i)->chain, steps++)
		;
	if (i != ni)
		bad(v, "name %u: not on its hash chain", ni);
	check_list(v, ni, true, &ex, &sh);
	q = check_list(v, ni, false, &qex, &qsh);
	if (ex != n->n_excl || sh != n->n_shared || q != n->n_pending)
		bad(v, "name %u: counts %u/%u/%u, lists %u/%u/%u", ni,
		    n->n_excl, n->n_shared, n->n_pending, ex, sh, q);
	if (ex > 1 || (ex && sh))
		bad(v, "name %u: %u exclusive and %u shared holders", ni, ex,
		    sh);
	check_fast(v, ni, !ex && !sh && !q);
	if ((!ex && !sh && !q) != v->idle_seen[ni])
		bad(v, "name %u: %s the idle list", ni,
		    v->idle_seen[ni] ? "referenced, yet on" : "idle, not on");
	/* Process the lock request queue must have run to completion. */
	i = uatomic_read(&n->q_head);
	if (i < b->geo.max_requests) {
		const struct wlk_seg_request *head = wlk__req(b, i);

		if (!ex && (head->mode == WLK_SHARED || !sh))
			bad(v, "name %u: grantable request %u left pending",
			    ni, i);
	}
}

/* The idle list: used names, each once, linked both ways. */
static void check_idle(struct vctx *v)
{
	struct wlk__bucket *b = v->b;
	uint32_t i = b->hdr->idle_head, prev = WLK_NIL, n = 0;

	for (; i != WLK_NIL; prev = i, i = wlk__name(b, i)->idle_next) {
		if (i >= b->geo.max_names || n++ >= b->geo.max_names) {
			bad(v, "idle list: bad index or cycle at %u", i);
			return;
		}
		if (WLK_WORD_STATE(wlk__name(b, i)->word) != WLK_SLOT_USED)
			bad(v, "idle list: name %u is not in use", i);
		if (wlk__name(b, i)->idle_prev != prev)
			bad(v, "idle list: name %u prev %u, want %u", i,
			    wlk__name(b, i)->idle_prev, prev);
		if (v->idle_seen[i]++)
			bad(v, "idle list: name %u twice", i);
	}
	if (b->hdr->idle_tail != prev)
		bad(v, "idle list: tail %u, want %u", b->hdr->idle_tail, prev);
}

static void check_names(struct vctx *v)
{
	struct wlk__bucket *b = v->b;
	uint32_t used = 0, chained = 0;
	uint64_t bytes = 0;

	check_idle(v);
	for (uint32_t i = 0; i < b->geo.max_names; i++) {
		uint32_t s = WLK_WORD_STATE(wlk__name(b, i)->word);

		if (s == WLK_SLOT_USED) {
			used++;
			check_name(v, i, &bytes);
		} else if (s != WLK_SLOT_FREE) {
			bad(v, "name %u: state %u", i, s);
		}
	}
	for (uint32_t h = 0; h < b->geo.hash_buckets; h++) {
		uint32_t i = wlk__hash_heads(b)[h];

		for (; i != WLK_NIL; i = wlk__name(b, i)->chain) {
			if (i >= b->geo.max_names || chained > used) {
				bad(v, "hash chain %u: bad index or cycle", h);
				break;
			}
			if (WLK_WORD_STATE(wlk__name(b, i)->word) !=
			    WLK_SLOT_USED)
				bad(v, "hash chain %u: free name %u", h, i);
			chained++;
		}
	}
	if (chained != used)
		bad(v, "%u names on hash chains, %u in use", chained, used);
	if (used != b->hdr->n_names || bytes != b->hdr->name_bytes)
		bad(v, "n_names %u / name_bytes %llu, counted %u / %llu",
		    b->hdr->n_names, (unsigned long long)b->hdr->name_bytes,
		    used, (unsigned long long)bytes);
	check_free_list(v, "name", b->hdr->free_names, b->geo.max_names,
			b->geo.max_names - used, name_word, name_next);
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

static void check_requests(struct vctx *v)
{
	struct wlk__bucket *b = v->b;
	uint32_t used = 0;

	for (uint32_t i = 0; i < b->geo.max_requests; i++) {
		struct wlk_seg_request *r = wlk__req(b, i);
		uint32_t s = WLK_WORD_STATE(r->word);

		if (s == WLK_SLOT_FREE)
			continue;
		used++;
		if (s < WLK_SLOT_PENDING || s > WLK_SLOT_FAST) {
			bad(v, "request %u: state %u", i, s);
			continue;
		}
		if (r->mode > WLK_SHARED)
			bad(v, "request %u: mode %u", i, r->mode);
		if (!wlk__client_live(b, r->client, r->client_gen))
			bad(v, "request %u: its client %u is gone", i,
			    r->client);
		/* Stolen, reserved and fast requests are in no list; a fast
		 * one holds its name only if the name's fast word says so
		 * (check_fast()), else its acquire is in flight. */
		if (s < WLK_SLOT_STOLEN && !v->seen[i])
			bad(v, "request %u: in no list", i);
		if (s >= WLK_SLOT_STOLEN && v->seen[i])
			bad(v, "request %u in state %u is listed", i, s);
		if ((s == WLK_SLOT_HELD || s == WLK_SLOT_STOLEN) &&
		    !token_ok(b, r))
			bad(v, "request %u: token %llu", i,
			    (unsigned long long)r->token);
	}
	if (used != b->hdr->n_requests)
		bad(v, "n_requests %u, %u requests in use",
		    b->hdr->n_requests, used);
	check_free_list(v, "request", b->hdr->free_requests,
			b->geo.max_requests, b->geo.max_requests - used,
			req_word, req_next);
}

/* Every check, under the mutex: no allocation, no callback. */
static void validate_locked(struct vctx *v)
{
	struct wlk_seg_header *h = v->b->hdr;

	if (uatomic_read(&h->seg_state) != WLK_SEG_READY)
		bad(v, "segment state %u", h->seg_state);
	if (h->intent_op != WLK_INTENT_NONE)
		bad(v, "unfinished intent %u", h->intent_op);
	check_agents_clients(v);
	check_names(v);
	check_requests(v);
}

/*
 * wlk__validate() - check every invariant of @b, under its mutex if @lock
 * (otherwise racing writers may show as violations), then report each
 * violation to @cb (after unlocking).
 * Return: 0, WLK_ECORRUPT if anything was violated, or another error.
 */
int wlk__validate(struct wlk__bucket *b, bool lock, wlk_violation_cb cb,
		  void *arg)
{
	struct vctx v = {.b = b};
	struct wlk__wake wake;
	int rc;

	v.seen = calloc(b->geo.max_requests, 1);
	v.fast_seen = calloc(b->geo.max_requests, sizeof(*v.fast_seen));
	v.idle_seen = calloc(b->geo.max_names, 1);
	v.msgs = calloc(REPORT_KEPT, sizeof(*v.msgs));
	rc = !v.seen || !v.fast_seen || !v.idle_seen || !v.msgs ? -ENOMEM
	     : lock			    ? wlk__lock(b, &wake)
					    : 0;
	if (rc == WLK_ECORRUPT && cb)
		cb(uatomic_read(&b->hdr->seg_state) == WLK_SEG_POISONED
			   ? "segment poisoned: found unrepairable"
			   : "segment mutex unusable, or repair failed",
		   arg);
	if (!rc) {
		validate_locked(&v);
		if (lock)
			wlk__unlock(b, &wake);
		for (unsigned int i = 0; cb && i < v.count; i++) {
			if (i == REPORT_KEPT) {
				char more[REPORT_LEN];

				snprintf(more, sizeof(more),
					 "... and %u more", v.count - i);
				cb(more, arg);
				break;
			}
			cb(v.msgs[i], arg);
		}
		rc = v.count ? WLK_ECORRUPT : 0;
	}
	free(v.seen);
	free(v.fast_seen);
	free(v.idle_seen);
	free(v.msgs);
	return rc;
}
