/* SPDX-License-Identifier: MIT */
/*
 * reap.c - which agents are alive, and the termination of dead ones (spec
 * 2.6 "terminate remaining locks and requests").
 *
 * Each agent (process) keeps its lifeline, a robust mutex in its agent
 * slot, locked by a library-owned thread for as long as it is attached
 * (anchor.c). A trylock tells the rest: EBUSY means alive; EOWNERDEAD means
 * the process died (SIGKILL, crash, exit or exec without detaching) and the
 * prober now owns the lifeline. A stopped or slow process is alive.
 *
 * Reaping a dead agent, under the segment mutex: release its locks, abort
 * its requests, free its clients and its slot, mark the lifeline
 * consistent. The lifeline itself is unlocked after the segment mutex is
 * released (mutex.c, wlk__unlock()), since unlocking it may wake
 * watchers, and then every watcher of it is woken. A reaper that dies
 * halfway leaves the lifeline owner-dead again and the segment mutex
 * owner-dead too: the next locker repairs and reaps again.
 *
 * Waiters watch the lifelines of the agents blocking them (wlk__watch_set())
 * so that a death wakes them without polling: they set FUTEX_WAITERS in
 * the lifeline's lock word, exactly as a glibc waiter would before
 * sleeping, and the kernel's robust-list processing wakes a waiter of a
 * dead owner's word.
 *
 * A waiter looks for its blockers among the first WLK_WATCH_WALK holders
 * and requests of its name only, so that queueing costs the same behind
 * any number of requests. A waiter further back watches the agents
 * nearest the head, which are the ones that block longest, and its
 * request is marked WLK_REQF_PARTIAL: when it becomes the first pending
 * request, the granter wakes it to look again (spec/queue.c). A dead
 * agent further back in the queue blocks nobody before it reaches the
 * head. Behind more holders than the walk (shared ones), and for a
 * scope, a waiter re-checks every WLK_RECHECK_NS instead.
 */
#include <errno.h>
#include <string.h>

#include "repair.h"

/* The futex word of a lifeline: glibc's lock word, tid | flags. */
uint32_t *wlk__lifeline_word(struct wlk__bucket *b, uint32_t ai)
{
	return (uint32_t *)&wlk__agent(b, ai)->u.lifeline.__data.__lock;
}

/*
 * The dead agent's clients, by its list (layout.h, AGENT LISTS): each
 * leaves it as wlk__drop_client() frees it. Return: false if the list is
 * damaged, or a client did not leave it: the caller walks the table.
 */
static bool drop_listed(struct wlk__bucket *b, uint32_t ai, uint32_t gen,
			struct wlk__wake *wake)
{
	uint32_t ci;

	for (uint32_t steps = 0;; steps++) {
		if (!wlk__agent_first(b, ai, gen, &ci, steps))
			return false;
		if (ci == WLK_NIL)
			return true;
		wlk__drop_client(b, ci, true, wake);
		if (wlk__agent(b, ai)->next == ci)
			return false;
	}
}

/* Terminate what dead agent @ai had (spec 2.6 for each of its clients),
 * then free its slot. A list found damaged, or damage found on the way
 * (flagged for repair), has the whole client table walked after it: a
 * client dropped already is FREE there. */
static void reap(struct wlk__bucket *b, uint32_t ai, struct wlk__wake *wake)
{
	uint32_t gen = WLK_WORD_GEN(wlk__agent(b, ai)->word);

	if (!drop_listed(b, ai, gen, wake) ||
	    uatomic_read(&b->hdr->needs_repair))
		for (uint32_t ci = 0; ci < b->geo.max_clients; ci++) {
			struct wlk_seg_client *c = wlk__client(b, ci);

			if (WLK_WORD_STATE(c->word) == WLK_SLOT_USED &&
			    c->agent == ai && c->agent_gen == gen)
				wlk__drop_client(b, ci, true, wake);
		}
	wlk__agent_free(b, ai, gen);
	WLK_FAILPOINT(reap_after_free);
}

/*
 * wlk__reap_agent() - probe agent @ai (any index: a bad one, a free slot,
 * our own are left alone), and reap it if it is dead. Return: true if it
 * was dead and is reaped; false if alive, or not probed because the wake
 * list has no room for its lifeline (WLK_REAP_BATCH: the next pass gets
 * it; the caller looks at wake->n_reaped).
 */
bool wlk__reap_agent(struct wlk__bucket *b, uint32_t ai,
		     struct wlk__wake *wake)
{
	struct wlk_seg_agent *a = wlk__agent_at(b, ai);
	int rc;

	if (!a || ai == b->agent || WLK_WORD_STATE(a->word) != WLK_SLOT_USED)
		return false;
	if (wake->n_reaped == WLK_REAP_BATCH)
		return false; /* the next pass gets it */
	rc = wlk__mutex_trylock(&a->u.lifeline);
	if (rc == EBUSY)
		return false;
	if (rc != 0 && rc != EOWNERDEAD)
		return false; /* ENOTRECOVERABLE, damaged: not ours to judge */
	/* Dead (EOWNERDEAD), or a slot whose owner unlocked without
	 * detaching: either way nobody keeps it alive. We own it now. */
	if (rc == EOWNERDEAD)
		/* Fails only (EINVAL) for a mutex not robust or not left
		 * inconsistent: this one is both, and ours. Should it fail
		 * after all, the lifeline cannot be locked again and the
		 * allocator (table.c) skips the slot: one agent slot lost,
		 * nothing held wrongly. */
		(void)pthread_mutex_consistent(&a->u.lifeline);
	reap(b, ai, wake);
	wake->reaped[wake->n_reaped++] = ai;
	uatomic_inc(&b->hdr->reaped_agents);
	return true;
}

/*
 * wlk__reap_all() - probe every attached agent (at attach, in recovery,
 * and for a request or an open refused for a full table). Return: true if
 * the wake list filled up and dead agents may be left for another pass
 * (after wlk__unlock()).
 */
bool wlk__reap_all(struct wlk__bucket *b, struct wlk__wake *wake)
{
	for (uint32_t ai = 0; ai < b->geo.max_agents; ai++)
		wlk__reap_agent(b, ai, wake);
	return wake->n_reaped == WLK_REAP_BATCH;
}

/* Add the agent of request @ri to @set unless present; false if full. */
static bool set_add(struct wlk__bucket *b, uint32_t ri, uint32_t *set,
		    unsigned int *n, unsigned int max)
{
	struct wlk_seg_request *r = wlk__req(b, ri);
	const struct wlk_seg_client *c = wlk__client_at(b, r->client);
	uint32_t ai;

	if (!c)
		return true;
	ai = c->agent;
	if (!wlk__agent_at(b, ai) || ai == b->agent)
		return true;
	for (unsigned int i = 0; i < *n; i++)
		if (set[i] == ai)
			return true;
	if (*n == max)
		return false;
	set[(*n)++] = ai;
	return true;
}

/*
 * The agents that can keep request @ri of name @ni waiting: holders of the
 * name and requests ahead of @ri in the queue (all of them for WLK_NIL).
 * Later arrivals cannot, except a stealer, and a steal wakes every waiter
 * of the name to look again. @walk: how many holders and requests to look
 * at, at most; *@capped (if not NULL) is set if the walk ended in the
 * queue. Return:
 * false if there were more than @max, or than @walk.
 */
static bool blockers(struct wlk__bucket *b, uint32_t ni, uint32_t ri,
		     uint32_t *set, unsigned int *n, unsigned int max,
		     uint32_t walk, bool *capped)
{
	const struct wlk_seg_name *nm = wlk__name_at(b, ni);
	uint32_t lists[2];
	bool fits = true;

	if (!nm)
		return false;
	lists[0] = nm->h_head;
	lists[1] = nm->q_head;
	for (int l = 0; l < 2; l++) {
		uint32_t i = lists[l];

		for (uint32_t steps = 0; i != WLK_NIL && i != ri; steps++) {
			const struct wlk_seg_request *r = wlk__req_at(b, i);

			if (!r || !wlk__walk_ok(b, steps)) {
				wlk__corrupt(b);
				return false;
			}
			if (!walk--) {
				/* Cut short in the queue: partial until at
				 * the head. Among more holders than the walk
				 * (shared ones): no wake at the head helps,
				 * as none joins them before it; the caller
				 * re-checks on the short timer. */
				if (capped)
					*capped = l == 1;
				return false;
			}
			fits = set_add(b, i, set, n, max) && fits;
			i = r->next;
		}
	}
	return fits;
}

/* The agents ahead of pending request @ri, at most @max (capped), looking
 * at WLK_WATCH_WALK holders and requests at most per name (*@capped, if
 * not NULL, set if the walk ended in a queue); of a scope's member, ahead
 * of any member on its name (layout.h, SCOPES). */
static bool blockers_of(struct wlk__bucket *b, uint32_t ri, uint32_t *set,
			unsigned int *k, unsigned int max, bool *capped)
{
	uint32_t m[WLK_SCOPE_MEMBERS_MAX];
	int n = 1;
	bool fits = true;

	if (max > WLK_WATCH_MAX)
		max = WLK_WATCH_MAX;
	*k = 0;
	m[0] = ri;
	if (wlk__req(b, ri)->flags & WLK_REQF_SCOPE)
		n = wlk__scope_members(b, ri, m);
	if (n < 0)
		return false;
	for (int i = 0; i < n; i++)
		fits = blockers(b, wlk__req(b, m[i])->name, m[i], set, k,
				max, WLK_WATCH_WALK, capped) && fits;
	return fits;
}

/*
 * wlk__watch_set() - reap the dead among the agents blocking pending
 * request @ri and arm the lifelines of the live ones for watching: on
 * return @v[0..*n) are lifeline words with the value to sleep on. The
 * request is marked WLK_REQF_PARTIAL if its queue was longer than the
 * walk (top of file).
 * Return: false if not every blocker could be watched (the caller then
 * re-checks on a timer).
 */
bool wlk__watch_set(struct wlk__bucket *b, uint32_t ri, struct wlk__wake *wake,
		    struct wlk__waitv *v, unsigned int max, unsigned int *n)
{
	uint32_t set[WLK_WATCH_MAX];
	unsigned int k = 0;
	struct wlk_seg_request *r = wlk__req(b, ri);
	/* A scope waits on its lead's word, which no head of a member's
	 * queue names: it re-checks on the short timer instead. */
	bool scope = r->flags & WLK_REQF_SCOPE;
	bool capped = false;
	/* Cut short by the walk alone, the set is all the waiter needs
	 * until it reaches the head: no faster re-check for that. */
	bool all = blockers_of(b, ri, set, &k, max, &capped) ||
		   (capped && k < max && !scope);

	r->flags = (uint8_t)(capped && !scope
				     ? r->flags | WLK_REQF_PARTIAL
				     : r->flags & ~WLK_REQF_PARTIAL);

	*n = 0;
	for (unsigned int i = 0; i < k; i++) {
		uint32_t *w = wlk__lifeline_word(b, set[i]);
		bool armed = false;

		for (int tries = 0; tries < WLK_ARM_TRIES && !armed; tries++) {
			uint32_t want;
			enum wlk__arm rc;

			if (wlk__reap_agent(b, set[i], wake))
				break; /* dead and reaped: no longer blocks */
			rc = wlk__lifeline_arm(w, &want);
			if (rc == WLK__FREE)
				break; /* it just detached: its requests went */
			if (rc == WLK__ARMED) {
				v[(*n)++] = (struct wlk__waitv){w, want};
				armed = true;
			}
			/* DIED since the probe, or MOVED: again. */
		}
		if (!armed && WLK_WORD_STATE(wlk__agent(b, set[i])->word) ==
				      WLK_SLOT_USED)
			all = false; /* the caller re-checks on a timer */
	}
	return all;
}

/*
 * Probe the agents holding or queueing on name @ni (an if_available
 * request about to be refused). Return: true if any was dead; the name
 * entry may then be gone.
 */
static bool reap_name(struct wlk__bucket *b, uint32_t ni,
		      struct wlk__wake *wake)
{
	uint32_t set[WLK_WATCH_MAX], before = wake->n_reaped;
	unsigned int k = 0;

	blockers(b, ni, WLK_NIL, set, &k, WLK_WATCH_MAX, UINT32_MAX, NULL);
	for (unsigned int i = 0; i < k; i++)
		wlk__reap_agent(b, set[i], wake);
	return wake->n_reaped != before;
}

/*
 * wlk__request_reaping() - wlk__request_lock(), but an if_available request
 * is refused only for live holders: when it would be refused, the dead
 * holders and waiters of its name are reaped first. Their release may give
 * the name back to the fast path (or grant it through the fast word), so
 * the request is then looked at again from the start.
 *
 * A request refused as closing a cycle (WLK_EDEADLK), or for a full table
 * (WLK_EFULL), is asked again once the dead agents are reaped, if there
 * were any: a dead process waits for nothing, and keeps no slot.
 *
 * Return: as wlk__request_lock(), never WLK__UNPROBED.
 */
int wlk__request_reaping(struct wlk__bucket *b, const struct wlk__enqueue *e,
			 struct wlk__wake *wake, uint32_t *slot, uint32_t *gen)
{
	struct wlk__enqueue probed = *e;
	uint32_t ni, before = wake->n_reaped;
	int rc = wlk__request_lock(b, e, wake, slot, gen);

	/* A cycle through a dead process is none, and a table full of a
	 * dead process's slots (a stolen lock it never released, requests
	 * it left) is not full: they go when it is reaped. */
	if (rc == WLK_EDEADLK || rc == WLK_EFULL) {
		wlk__reap_all(b, wake);
		if (wake->n_reaped != before)
			rc = wlk__request_lock(b, e, wake, slot, gen);
	}
	if (rc != WLK__UNPROBED)
		return rc;
	/* Refused, and the name is still there, inflated: reap its dead.
	 * Asking again settles the name if it is refused still. */
	if (e->n_items) /* a scope's names: every dead agent */
		(void)wlk__reap_all(b, wake);
	else if (!wlk__name_find(b, e->name, e->name_len, e->hash, &ni))
		reap_name(b, ni, wake);
	probed.probed = true;
	return wlk__request_lock(b, &probed, wake, slot, gen);
}

/* A client slot for @id, and room for its text. */
static int client_take(struct wlk__bucket *b, const char *id, size_t id_len,
		       uint64_t now, uint32_t *out)
{
	int rc = wlk__text_make_room(b, wlk__chunks_for((uint32_t)id_len));

	return rc ? rc : wlk__client_alloc(b, id, id_len, now, out);
}

/*
 * wlk__client_reaping() - a client slot for @id (and room for its text)
 * under the mutex, for a manager's open. As for a request
 * (wlk__request_reaping()), a table full of dead processes' managers is
 * not full: they are reaped (a query reaps only the processes it shows, a
 * waiter those blocking it), and the take is tried once more.
 * Return: 0 with *@out set, WLK_EFULL, or an error from the segment.
 */
int wlk__client_reaping(struct wlk__bucket *b, const char *id, uint64_t now,
			uint32_t *out, struct wlk__wake *wake)
{
	size_t id_len = strlen(id);
	uint32_t before = wake->n_reaped;
	int rc = client_take(b, id, id_len, now, out);

	if (rc != WLK_EFULL)
		return rc;
	(void)wlk__reap_all(b, wake);
	return wake->n_reaped == before ? rc
					 : client_take(b, id, id_len, now, out);
}

/*
 * wlk__blockers_live() - the live agents blocking pending request @ri,
 * after reaping the dead ones (for event loops, which watch them through
 * pidfds). As for a blocked waiter, only the first WLK_WATCH_WALK holders
 * and requests of its name are looked at; an event loop recomputes the
 * set at each dispatch, and re-checks on a timer when it did not see
 * them all (async_pid.c).
 * Return: false if there were more than @max, or than the walk saw.
 */
bool wlk__blockers_live(struct wlk__bucket *b, uint32_t ri,
			struct wlk__wake *wake, uint32_t *agents,
			unsigned int max, unsigned int *n)
{
	uint32_t set[WLK_WATCH_MAX];
	unsigned int k = 0;
	bool all = blockers_of(b, ri, set, &k, max, NULL);

	*n = 0;
	for (unsigned int i = 0; i < k; i++)
		if (!wlk__reap_agent(b, set[i], wake))
			agents[(*n)++] = set[i];
	return all;
}
