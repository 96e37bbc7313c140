/* SPDX-License-Identifier: MIT */
/*
 * list.c - a name's two request lists (its queue, in request order, and
 * its held set, with counts of exclusive and shared holders), threaded
 * through the request slots, and the moves of one request between them:
 * queue, dequeue, grant (with its token), ungrant, adopt from the fast
 * path; and the wake-ups a change of a request's state owes its waiter.
 *
 * All of it runs under the segment mutex. Every index is bounded; a bad
 * one reports corruption. Woken requests are collected in a struct
 * wlk__wake and woken after unlocking. What decides which requests move
 * (the spec's algorithms) is queue.c's, ops.c's and scope.c's.
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
	else if (wlk__req(b, r)->mode == WLK_SHARED)
		name_add(wake, wlk__req(b, r)->name);
	else
		wake->sweep = true; /* not on the grants word (shm/wait.c) */
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

/* wlk__grant_one() - move a request that is in no list into the held
 * set, with its token; nobody is woken. */
int wlk__grant_one(struct wlk__bucket *b, struct wlk_seg_name *n, uint32_t ri)
{
	struct wlk_seg_request *r = wlk__req(b, ri);
	int rc = wlk__held_add(b, n, ri);

	if (rc)
		return rc;
	r->token = uatomic_add_return(&n->token, 1);
	r->stamp_ns = wlk__stamp_ns();
	WLK_FAILPOINT(grant_after_list);
	wlk__word_store(&r->word, WLK_WORD(WLK_WORD_GEN(r->word),
					   WLK_SLOT_HELD));
	return 0;
}

/*
 * wlk__grant_run() - grant the @k pending requests that open @n's queue,
 * @first to @last in queue order, all granted in one go (queue.c says
 * which): one splice moves them to the end of the held set and one
 * atomic add takes their tokens, in order; then each is stamped, marked
 * HELD and given to @wake, as wlk__grant_one() does one at a time. A
 * process that dies before the marks leaves held requests marked PENDING;
 * recovery, which derives the lists from the marks, queues them again.
 */
int wlk__grant_run(struct wlk__bucket *b, struct wlk_seg_name *n,
		   uint32_t first, uint32_t last, uint32_t k,
		   struct wlk__wake *wake)
{
	struct wlk_seg_request *f = wlk__req(b, first), *l = wlk__req(b, last);
	uint32_t after = l->next, tail = n->h_tail, ri = first;
	uint64_t token, now = wlk__stamp_ns();

	if (n->q_head != first || f->prev != WLK_NIL ||
	    !wlk__link_ok(b, after) || (after == WLK_NIL && n->q_tail != last) ||
	    !end_ok(b, tail, n->h_head, true))
		return wlk__corrupt(b);
	n->q_head = after;
	if (after == WLK_NIL)
		n->q_tail = WLK_NIL;
	else
		wlk__req(b, after)->prev = WLK_NIL;
	n->n_pending = n->n_pending > k ? n->n_pending - k : 0;
	f->prev = tail;
	l->next = WLK_NIL;
	if (tail == WLK_NIL)
		n->h_head = first;
	else
		wlk__req(b, tail)->next = first;
	n->h_tail = last;
	n->n_shared += k;
	token = uatomic_add_return(&n->token, k) - k;
	for (uint32_t i = 0; i < k; i++) {
		struct wlk_seg_request *r = wlk__req_at(b, ri);

		if (!r)
			return wlk__corrupt(b);
		r->token = ++token;
		r->stamp_ns = now;
		wlk__word_store(&r->word, WLK_WORD(WLK_WORD_GEN(r->word),
						   WLK_SLOT_HELD));
		wlk__wake_add(b, wake, ri);
		ri = r->next;
		if (i == 0)
			WLK_FAILPOINT(grant_run_mid);
	}
	return 0;
}

/*
 * wlk__adopt_slot() - the slot's side of adopting fast holder or fast
 * waiter @r of @n as an ordinary request in @state (HELD or PENDING), for
 * an inflation and a recovery alike; the caller links it. Its place in the
 * name's order; a holder's grant stands, and so does its token, stored
 * here if its thread has not stored it yet: the name's token, which the
 * holder's CAS counted up (layout.h, TOKENS ON THE FAST PATH); a waiter
 * keeps LANE: it waits in a lane's slot, and may be granted through the
 * fast word again.
 */
void wlk__adopt_slot(struct wlk_seg_name *n, struct wlk_seg_request *r,
		     uint32_t state)
{
	if (state == WLK_SLOT_HELD)
		wlk__token_adopt(n, r);
	r->seq = (uint32_t)++n->seq;
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

/* wlk__queue_prepend() - put a pending request in no list at the head
 * of its name's queue (a steal); wlk__queue_append(), at the tail. */
int wlk__queue_prepend(struct wlk__bucket *b, struct wlk_seg_name *n,
		       uint32_t ri)
{
	int rc = list_prepend(b, queue_of(n), ri);

	if (!rc)
		n->n_pending++;
	return rc;
}

int wlk__queue_append(struct wlk__bucket *b, struct wlk_seg_name *n,
		      uint32_t ri)
{
	int rc = list_append(b, queue_of(n), ri);

	if (!rc)
		n->n_pending++;
	return rc;
}

/* Take a pending request out of its name's queue. */
int wlk__dequeue(struct wlk__bucket *b, struct wlk_seg_name *n, uint32_t ri)
{
	int rc = list_remove(b, queue_of(n), ri);

	if (!rc && n->n_pending)
		n->n_pending--;
	return rc;
}

/* Remember name @ni for a later wlk__names_run(). */
void wlk__names_add(struct wlk__names *s, uint32_t ni)
{
	for (uint32_t i = 0; i < s->n; i++)
		if (s->idx[i] == ni)
			return;
	if (s->n < WLK__NAMES_MAX)
		s->idx[s->n++] = ni;
	else
		s->all = true;
}
