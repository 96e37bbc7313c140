/* SPDX-License-Identifier: MIT */
/*
 * agent_list.c - each agent's list of its clients (layout.h, AGENT
 * LISTS), so that reaping a dead process costs the managers it had open,
 * not a walk of the whole client table.
 *
 * The list runs through the slots' free-list links, which a slot in use
 * needs for nothing else: a live agent's @next is its first client, a
 * live client's @next its agent's next client. It is singly linked: a
 * client leaves it by a walk of its agent's list, as long as the number
 * of managers its process has open on the bucket. The links are derived
 * state, as the client lists are (client_list.c): a link out of bounds,
 * to a client not the agent's, or a client not found on its list, is
 * damage, flagged for repair (recovery rebuilds the lists) and not
 * followed. Everything here runs under the segment mutex.
 */
#include "state.h"

/* The agent of live client @c, if it is live in the client's generation
 * of it; NULL otherwise (it was freed first: the client is on no list). */
static struct wlk_seg_agent *agent_of(struct wlk__bucket *b,
				      const struct wlk_seg_client *c)
{
	return wlk__agent_live(b, c->agent, c->agent_gen)
		       ? wlk__agent(b, c->agent)
		       : NULL;
}

/*
 * wlk__agent_push() - client @ci, just taken for its agent (live), joins
 * the agent's list, at its head.
 */
void wlk__agent_push(struct wlk__bucket *b, uint32_t ci)
{
	struct wlk_seg_client *c = wlk__client(b, ci);
	struct wlk_seg_agent *a = agent_of(b, c);

	c->next = WLK_NIL;
	if (!a)
		return;
	c->next = a->next;
	a->next = ci;
}

/*
 * wlk__agent_unlink() - client @ci leaves its agent's list, if its agent
 * is still there. The walk is bounded by the client table.
 */
void wlk__agent_unlink(struct wlk__bucket *b, uint32_t ci)
{
	struct wlk_seg_client *c = wlk__client(b, ci);
	struct wlk_seg_agent *a = agent_of(b, c);
	uint32_t *link;

	if (!a)
		return;
	link = &a->next;
	for (uint32_t steps = 0; *link != WLK_NIL; steps++) {
		struct wlk_seg_client *x = wlk__client_at(b, *link);

		if (!x || steps >= b->geo.max_clients)
			break;
		if (*link == ci) {
			*link = c->next;
			c->next = WLK_NIL;
			return;
		}
		link = &x->next;
	}
	c->next = WLK_NIL;
	wlk__corrupt(b); /* not on its agent's list */
}

/*
 * wlk__agent_first() - the first client on agent @ai's list (gen @gen),
 * or WLK_NIL if it has none. @steps counts the caller's walk, which takes
 * the first client off the list each time (it is freed). Return: false
 * if the list is damaged there (a link out of bounds, a client not live
 * or not the agent's, or more steps than the table has slots): the
 * caller walks the table instead.
 */
bool wlk__agent_first(struct wlk__bucket *b, uint32_t ai, uint32_t gen,
		      uint32_t *ci, uint32_t steps)
{
	uint32_t i = wlk__agent(b, ai)->next;
	const struct wlk_seg_client *c;

	*ci = i;
	if (i == WLK_NIL)
		return true;
	c = wlk__client_at(b, i);
	if (!c || steps >= b->geo.max_clients ||
	    WLK_WORD_STATE(c->word) != WLK_SLOT_USED || c->agent != ai ||
	    c->agent_gen != gen) {
		wlk__corrupt(b);
		return false;
	}
	return true;
}
