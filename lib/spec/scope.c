/* SPDX-License-Identifier: MIT */
/*
 * scope.c - requests for a set of names at once (layout.h, SCOPES): their
 * members' ring, the draft's grant rule per name, and the grant, drop and
 * steal of a whole scope. All under the segment mutex.
 *
 * A member is an ordinary request of one name: it sits in that name's
 * queue or held set, so everything that walks a name (query, validation,
 * the deadlock graph, the blockers a waiter watches) sees it as it sees
 * any request. What is new is only that the members move together, each
 * move under an intent record that recovery finishes.
 */
#include <errno.h>

#include "spec.h"

/* The intent record's two words for scope @lead, stored before its op. */
static void intent_set(struct wlk__bucket *b, enum wlk_intent_op op,
		       uint32_t lead)
{
	struct wlk_seg_header *h = b->hdr;

	h->intent_args[0] = lead;
	h->intent_args[1] = WLK_WORD_GEN(wlk__req(b, lead)->word);
	wlk__word_store(&h->intent_op, op);
}

static void intent_clear(struct wlk__bucket *b)
{
	wlk__word_store(&b->hdr->intent_op, WLK_INTENT_NONE);
}

/*
 * wlk__scope_members() - the members of the scope whose member @ri is, in
 * ring order from @ri: @out[0] is @ri. Every index is bounded, and every
 * member must be a scope member of the same client; their states are not
 * looked at (recovery walks rings whose members are partly freed: a freed
 * slot keeps its links until it is used again, and nothing is allocated
 * before recovery ends). Return: the count (at most
 * WLK_SCOPE_MEMBERS_MAX), or WLK_ECORRUPT.
 */
int wlk__scope_members(struct wlk__bucket *b, uint32_t ri, uint32_t *out)
{
	const struct wlk_seg_request *first = wlk__req_at(b, ri);
	uint32_t i = ri, n = 0;

	if (!first || !(first->flags & WLK_REQF_SCOPE))
		goto bad;
	do {
		const struct wlk_seg_request *r = wlk__req_at(b, i);

		if (!r || n == WLK_SCOPE_MEMBERS_MAX ||
		    !(r->flags & WLK_REQF_SCOPE) || r->client != first->client ||
		    r->client_gen != first->client_gen)
			goto bad;
		out[n++] = i;
		i = r->scope;
	} while (i != ri);
	if (n == first->scope_n)
		return (int)n;
bad:
	(void)wlk__corrupt(b);
	return WLK_ECORRUPT;
}

/* The lead among members @m[0..k): the one its requester waits on. */
uint32_t wlk__scope_lead(struct wlk__bucket *b, const uint32_t *m, int k)
{
	for (int i = 0; i < k; i++)
		if (wlk__req(b, m[i])->flags & WLK_REQF_LEAD)
			return m[i];
	return m[0]; /* damage: waking another is harmless */
}

/*
 * wlk__scope_id() - what names the scope of member @ri in a query: its
 * lead's slot + 1 and gen, the same from every member, never 0, and no
 * other live request's. A damaged ring gives its own slot's.
 */
uint64_t wlk__scope_id(struct wlk__bucket *b, uint32_t ri)
{
	uint32_t m[WLK_SCOPE_MEMBERS_MAX], lead = ri;
	int k = wlk__scope_members(b, ri, m);

	if (k > 0)
		lead = wlk__scope_lead(b, m, k);
	return (uint64_t)WLK_WORD_GEN(wlk__req(b, lead)->word) << 32 |
	       (lead + 1u);
}

/*
 * wlk__member_clear() - the draft's rule for request @ri on its name @n
 * (layout.h, SCOPES): exclusive, first in the queue with nothing held;
 * shared, nothing exclusive held and no exclusive request ahead. The walk
 * ahead is bounded by the queue (only a shared scope member's check
 * walks: the queue's head answers the rest).
 */
bool wlk__member_clear(struct wlk__bucket *b, const struct wlk_seg_name *n,
		       uint32_t ri)
{
	uint32_t i = n->q_head;

	if (wlk__req(b, ri)->mode != WLK_SHARED)
		return i == ri && n->n_excl == 0 && n->n_shared == 0;
	if (n->n_excl)
		return false;
	for (uint32_t steps = 0; i != ri; steps++) {
		const struct wlk_seg_request *r = wlk__req_at(b, i);

		if (!r || !wlk__walk_ok(b, steps)) {
			wlk__corrupt(b);
			return false;
		}
		if (r->mode != WLK_SHARED)
			return false;
		i = r->next;
	}
	return true;
}

/* Whether every member @m[0..k) of a pending scope is clear. */
static bool members_clear(struct wlk__bucket *b, const uint32_t *m, int k)
{
	for (int i = 0; i < k; i++) {
		struct wlk_seg_request *r = wlk__req(b, m[i]);
		struct wlk_seg_name *n;
		uint32_t ni;

		if (r->word != WLK_WORD(WLK_WORD_GEN(r->word), WLK_SLOT_PENDING))
			return false;
		n = wlk__name_of(b, r, &ni);
		if (!n || !wlk__member_clear(b, n, m[i]))
			return false;
	}
	return k > 0;
}

/*
 * Grant every pending member of scope @m[0..k), the lead last: its waiter
 * takes the lead's word HELD to mean that every member is, and reads
 * their tokens. Only the lead's waiter is woken: nobody waits on the
 * other members' words. Idempotent: recovery redoes it from the intent
 * record.
 */
int wlk__grant_members(struct wlk__bucket *b, const uint32_t *m, int k,
			 struct wlk__wake *wake)
{
	uint32_t lead = wlk__scope_lead(b, m, k);

	for (int j = 0; j < k; j++) {
		uint32_t ri = j == k - 1 ? lead : m[j] == lead ? m[k - 1] : m[j];
		struct wlk_seg_request *r = wlk__req(b, ri);
		struct wlk_seg_name *n;
		uint32_t ni;
		int rc;

		if (r->word != WLK_WORD(WLK_WORD_GEN(r->word), WLK_SLOT_PENDING))
			continue;
		n = wlk__name_of(b, r, &ni);
		if (!n)
			return WLK_ECORRUPT;
		rc = wlk__dequeue(b, n, ri);
		if (!rc)
			rc = wlk__grant_one(b, n, ri);
		if (rc)
			return rc;
		WLK_FAILPOINT(scope_grant_mid);
	}
	wlk__wake_add(b, wake, lead);
	return 0;
}

/* Grant scope @m[0..k) of member @ri under the grant's intent record. */
static int grant_scope(struct wlk__bucket *b, uint32_t ri, const uint32_t *m,
		       int k, struct wlk__wake *wake)
{
	int rc;

	intent_set(b, WLK_INTENT_SCOPE_GRANT, ri);
	rc = wlk__grant_members(b, m, k, wake);
	intent_clear(b);
	return rc;
}

/*
 * wlk__scope_grant() - grant the scope of pending member @ri on all its
 * names at once, clear or not (recovery redoes a grant it found begun).
 */
int wlk__scope_grant(struct wlk__bucket *b, uint32_t ri,
		     struct wlk__wake *wake)
{
	uint32_t m[WLK_SCOPE_MEMBERS_MAX];
	int k = wlk__scope_members(b, ri, m);

	return k < 0 ? k : grant_scope(b, ri, m, k, wake);
}

/*
 * wlk__scope_grant_if_clear() - grant the scope of pending member @ri if
 * every member is clear (layout.h, SCOPES), with one walk of its ring.
 * Return: 1 granted, 0 not clear, or WLK_ECORRUPT.
 */
int wlk__scope_grant_if_clear(struct wlk__bucket *b, uint32_t ri,
			      struct wlk__wake *wake)
{
	uint32_t m[WLK_SCOPE_MEMBERS_MAX];
	int k = wlk__scope_members(b, ri, m), rc;

	if (k < 0)
		return k;
	if (!members_clear(b, m, k))
		return 0;
	rc = grant_scope(b, ri, m, k, wake);
	return rc ? rc : 1;
}

/*
 * Take every member of scope @m[0..k) out of its queue or held set and
 * free it; its names go to @names. Idempotent (a freed member is passed
 * over): recovery redoes it from the intent record.
 */
static int drop_members(struct wlk__bucket *b, const uint32_t *m, int k,
			struct wlk__names *names)
{
	for (int i = 0; i < k; i++) {
		struct wlk_seg_request *r = wlk__req(b, m[i]);
		uint32_t state = WLK_WORD_STATE(r->word), ni;
		struct wlk_seg_name *n;
		int rc = 0;

		if (state == WLK_SLOT_FREE)
			continue;
		if (state == WLK_SLOT_PENDING || state == WLK_SLOT_HELD) {
			n = wlk__name_of(b, r, &ni);
			if (!n)
				return WLK_ECORRUPT;
			rc = state == WLK_SLOT_HELD ? wlk__ungrant(b, n, m[i])
						    : wlk__dequeue(b, n, m[i]);
			if (rc)
				return rc;
			wlk__names_add(names, ni);
		}
		wlk__req_free(b, m[i]);
		WLK_FAILPOINT(scope_drop_mid);
	}
	return 0;
}

/*
 * wlk__scope_free() - take the whole scope of member @ri out of its
 * queues or held sets (or, stolen, out of nowhere) and free its members,
 * under the drop's intent record; the names whose queues may now grant go
 * to @names, for the caller to run (queue.c). Return: 0 or WLK_ECORRUPT.
 */
int wlk__scope_free(struct wlk__bucket *b, uint32_t ri,
		    struct wlk__names *names)
{
	uint32_t m[WLK_SCOPE_MEMBERS_MAX];
	int k = wlk__scope_members(b, ri, m), rc;

	if (k < 0)
		return k;
	intent_set(b, WLK_INTENT_SCOPE_DROP, ri);
	rc = drop_members(b, m, k, names);
	/* Done before the queues run: a grant there is a scope's own
	 * intent, and recovery runs every queue anyway. */
	intent_clear(b);
	return rc;
}

/*
 * wlk__scope_steal_holder() - the steal of held scope member @hi (whose
 * name a steal takes): every member of its scope leaves its held set as
 * STOLEN, the one on the stolen name last, so that a steal redone after a
 * crash finds the scope still held there and finishes it. The other names
 * go to @names, for their queues to run once the steal is done.
 * Return: 0 or WLK_ECORRUPT.
 */
int wlk__scope_steal_holder(struct wlk__bucket *b, uint32_t hi,
			    struct wlk__names *names, struct wlk__wake *wake)
{
	uint32_t m[WLK_SCOPE_MEMBERS_MAX];
	int k = wlk__scope_members(b, hi, m);

	if (k <= 0)
		return k < 0 ? k : wlk__corrupt(b);
	/* m[0] is @hi: from the one after it round to it. */
	for (int j = 1; j <= k; j++) {
		uint32_t i = m[j % k], ni;
		struct wlk_seg_request *r = wlk__req(b, i);
		struct wlk_seg_name *n;
		int rc;

		if (r->word != WLK_WORD(WLK_WORD_GEN(r->word), WLK_SLOT_HELD))
			continue;
		n = wlk__name_of(b, r, &ni);
		if (!n)
			return WLK_ECORRUPT;
		rc = wlk__ungrant(b, n, i);
		if (rc)
			return rc;
		wlk__word_store(&r->word,
				WLK_WORD(WLK_WORD_GEN(r->word), WLK_SLOT_STOLEN));
		if (i != hi)
			wlk__names_add(names, ni);
		WLK_FAILPOINT(steal_mid);
	}
	/* Its holder watches its lead. */
	wlk__wake_add(b, wake, wlk__scope_lead(b, m, k));
	return 0;
}

/*
 * wlk__name_available() - an if_available request's test on name @n: the
 * grant rule (wlk__member_clear()) for a request at the queue's tail.
 */
bool wlk__name_available(struct wlk__bucket *b, const struct wlk_seg_name *n,
			 enum wlk_mode mode)
{
	uint32_t i = n->q_head;

	if (mode != WLK_SHARED)
		return i == WLK_NIL && n->n_excl == 0 && n->n_shared == 0;
	if (n->n_excl)
		return false;
	/* Only scope members wait in a queue with nothing exclusive held,
	 * so this walk is empty unless scopes are about. */
	for (uint32_t steps = 0; i != WLK_NIL; steps++) {
		const struct wlk_seg_request *r = wlk__req_at(b, i);

		if (!r || !wlk__walk_ok(b, steps)) {
			wlk__corrupt(b);
			return false;
		}
		if (r->mode != WLK_SHARED)
			return false;
		i = r->next;
	}
	return true;
}
