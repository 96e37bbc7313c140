/* SPDX-License-Identifier: MIT */
/*
 * validate_names.c - the validator's checks of the name table: each
 * name's held and queue lists, counts and fast words, the idle list and
 * the hash chains. The requests' own checks (validate_slots.c) run after
 * these, as they look at which requests a list holds.
 */
#include "inspect_internal.h"

static uint32_t name_word(struct wlk__bucket *b, uint32_t i)
{
	return wlk__name(b, i)->word;
}

static uint32_t name_next(struct wlk__bucket *b, uint32_t i)
{
	return wlk__name(b, i)->chain;
}

/* One list of a name: links, membership, state; returns the length. */
static uint32_t check_list(struct wlk__vctx *v, uint32_t ni, bool held,
			   uint32_t *excl, uint32_t *shared)
{
	struct wlk__bucket *b = v->b;
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint32_t i = held ? n->h_head : n->q_head, prev = WLK_NIL, len = 0;
	uint32_t want = held ? WLK_SLOT_HELD : WLK_SLOT_PENDING;
	uint32_t last_seq = 0;

	for (; i != WLK_NIL; prev = i, i = wlk__req(b, i)->next) {
		struct wlk_seg_request *r;

		if (i >= b->geo.max_requests || len >= b->geo.max_requests) {
			wlk__bad(v, "name %u: bad index or cycle at %u", ni, i);
			return len;
		}
		r = wlk__req(b, i);
		if (v->seen[i]++)
			wlk__bad(v, "request %u is listed twice", i);
		if (r->prev != prev)
			wlk__bad(v, "request %u: prev %u, want %u", i, r->prev,
				 prev);
		if (r->word != WLK_WORD(WLK_WORD_GEN(r->word), want))
			wlk__bad(v, "request %u: state %u in a %s list", i,
				 WLK_WORD_STATE(r->word),
				 held ? "held" : "queue");
		if (r->name != ni || r->name_gen != WLK_WORD_GEN(n->word))
			wlk__bad(v, "request %u: listed under name %u, "
				    "refers to %u", i, ni, r->name);
		if (!held && len && !WLK_SEQ_AFTER(r->seq, last_seq))
			wlk__bad(v, "name %u: queue out of request order at %u",
				 ni, i);
		last_seq = r->seq;
		if (r->mode == WLK_SHARED)
			(*shared)++;
		else
			(*excl)++;
		len++;
	}
	if ((held ? n->h_tail : n->q_tail) != prev)
		wlk__bad(v, "name %u: %s tail %u, want %u", ni,
			 held ? "held" : "queue", held ? n->h_tail : n->q_tail,
			 prev);
	return len;
}

/* Whether fast word part @who was seen already (on another name). */
static bool seen_twice(struct wlk__vctx *v, uint64_t who)
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
static const char *fast_verdict(struct wlk__vctx *v, uint32_t ni, bool idle,
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

static void check_fast(struct wlk__vctx *v, uint32_t ni, bool idle)
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
			wlk__bad(v,
				 "name %u: %s (fast word %#llx, waiter %#llx)",
				 ni, why, (unsigned long long)f,
				 (unsigned long long)c);
		else if ((f & WLK_FAST_ON) && WLK_FAST_HOLDER1(f) &&
			 seen_twice(v, f))
			wlk__bad(v, "name %u: fast holder %u of two names", ni,
				 WLK_FAST_HOLDER1(f) - 1);
		else if ((f & WLK_FAST_ON) && (f & WLK_FAST_WAIT) &&
			 seen_twice(v, c))
			wlk__bad(v, "name %u: fast waiter %u of two names", ni,
				 WLK_FAST_HOLDER1(c) - 1);
		return;
	}
}

static void check_name(struct wlk__vctx *v, uint32_t ni, uint64_t *bytes)
{
	struct wlk__bucket *b = v->b;
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint32_t ex = 0, sh = 0, qex = 0, qsh = 0, q, i, steps = 0;
	uint64_t hash;
	bool idle;

	if (n->len > b->geo.max_name_len) {
		wlk__bad(v, "name %u: length %u", ni, n->len);
		return;
	}
	*bytes += n->len;
	if (wlk__name_rehash(b, n, n->len, &hash))
		wlk__bad(v, "name %u: its text leaves the chunk table", ni);
	else if (n->hash != hash)
		wlk__bad(v, "name %u: stale hash", ni);
	for (i = wlk__hash_heads(b)[n->hash & (b->geo.hash_buckets - 1)];
	     i != ni && i < b->geo.max_names && steps < b->geo.max_names;
	     i = wlk__name(b, i)->chain, steps++)
		;
	if (i != ni)
		wlk__bad(v, "name %u: not on its hash chain", ni);
	check_list(v, ni, true, &ex, &sh);
	q = check_list(v, ni, false, &qex, &qsh);
	if (ex != n->n_excl || sh != n->n_shared || q != n->n_pending)
		wlk__bad(v, "name %u: counts %u/%u/%u, lists %u/%u/%u", ni,
			 n->n_excl, n->n_shared, n->n_pending, ex, sh, q);
	if (ex > 1 || (ex && sh))
		wlk__bad(v, "name %u: %u exclusive and %u shared holders", ni,
			 ex, sh);
	check_fast(v, ni, !ex && !sh && !q);
	idle = !ex && !sh && !q;
	if (v->idle_seen[ni] != (idle ? WLK_LIST_IDLE : WLK_LIST_BUSY))
		wlk__bad(v, "name %u: %s, yet on %s", ni,
			 idle ? "idle" : "referenced",
			 v->idle_seen[ni] == WLK_LIST_IDLE   ? "the idle list"
			 : v->idle_seen[ni] == WLK_LIST_BUSY ? "the busy list"
							     : "neither list");
	else if (n->list != v->idle_seen[ni])
		wlk__bad(v, "name %u: on list %u, says %u", ni,
			 v->idle_seen[ni], n->list);
	/* Process the lock request queue must have run to completion. */
	i = uatomic_read(&n->q_head);
	if (i < b->geo.max_requests) {
		const struct wlk_seg_request *head = wlk__req(b, i);

		if (!ex && (head->mode == WLK_SHARED || !sh))
			wlk__bad(v,
				 "name %u: grantable request %u left pending",
				 ni, i);
	}
}

/* A name list (layout.h, NAME LISTS): used names, each on one list once,
 * linked both ways. */
static void check_list_of(struct wlk__vctx *v, enum wlk_name_list l)
{
	struct wlk__bucket *b = v->b;
	const char *what = l == WLK_LIST_IDLE ? "idle" : "busy";
	uint32_t i = l == WLK_LIST_IDLE ? b->hdr->idle_head : b->hdr->busy_head;
	uint32_t tail = l == WLK_LIST_IDLE ? b->hdr->idle_tail
					   : b->hdr->busy_tail;
	uint32_t prev = WLK_NIL, n = 0;

	for (; i != WLK_NIL; prev = i, i = wlk__name(b, i)->list_next) {
		if (i >= b->geo.max_names || n++ >= b->geo.max_names) {
			wlk__bad(v, "%s list: bad index or cycle at %u", what,
				 i);
			return;
		}
		if (WLK_WORD_STATE(wlk__name(b, i)->word) != WLK_SLOT_USED)
			wlk__bad(v, "%s list: name %u is not in use", what, i);
		if (wlk__name(b, i)->list_prev != prev)
			wlk__bad(v, "%s list: name %u prev %u, want %u", what,
				 i, wlk__name(b, i)->list_prev, prev);
		if (v->idle_seen[i])
			wlk__bad(v, "%s list: name %u seen before", what, i);
		v->idle_seen[i] = (uint8_t)l;
	}
	if (tail != prev)
		wlk__bad(v, "%s list: tail %u, want %u", what, tail, prev);
}

/* wlk__check_names() - the name table, its lists and hash chains, and
 * every name in use (check_name()). */
void wlk__check_names(struct wlk__vctx *v)
{
	struct wlk__bucket *b = v->b;
	uint32_t used = 0, chained = 0;
	uint64_t bytes = 0;

	check_list_of(v, WLK_LIST_IDLE);
	check_list_of(v, WLK_LIST_BUSY);
	for (uint32_t i = 0; i < b->geo.max_names; i++) {
		uint32_t s = WLK_WORD_STATE(wlk__name(b, i)->word);

		if (s == WLK_SLOT_USED) {
			used++;
			check_name(v, i, &bytes);
		} else if (s != WLK_SLOT_FREE) {
			wlk__bad(v, "name %u: state %u", i, s);
		}
	}
	for (uint32_t h = 0; h < b->geo.hash_buckets; h++) {
		uint32_t i = wlk__hash_heads(b)[h];

		for (; i != WLK_NIL; i = wlk__name(b, i)->chain) {
			if (i >= b->geo.max_names || chained > used) {
				wlk__bad(v, "hash chain %u: bad index or cycle",
					 h);
				break;
			}
			if (WLK_WORD_STATE(wlk__name(b, i)->word) !=
			    WLK_SLOT_USED)
				wlk__bad(v, "hash chain %u: free name %u", h,
					 i);
			chained++;
		}
	}
	if (chained != used)
		wlk__bad(v, "%u names on hash chains, %u in use", chained,
			 used);
	if (used != b->hdr->n_names || bytes != b->hdr->name_bytes)
		wlk__bad(v, "n_names %u / name_bytes %llu, counted %u / %llu",
			 b->hdr->n_names,
			 (unsigned long long)b->hdr->name_bytes, used,
			 (unsigned long long)bytes);
	wlk__check_free_list(v, "name", b->hdr->free_names, b->geo.max_names,
			     b->geo.max_names - used, name_word, name_next);
}
