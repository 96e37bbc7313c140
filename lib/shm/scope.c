/* SPDX-License-Identifier: MIT */
/*
 * scope.c - the shared-memory engine's part of a scope's handle (layout.h,
 * SCOPES): its names as the request's items, its members' slots, and their
 * tokens once granted. The handle's own slot and gen are the lead's, the
 * first name's member: the wait, the abort and the release go by it, as
 * for a single name, and spec/ takes the rest of the scope along.
 */
#include "shm.h"

/* @e's scope, from @l's names (in byte order, unique): hashed here, not
 * under the mutex. */
void wlk__shm_scope_items(struct wlk__shm_manager *m,
			  const struct wlk__shm_lock *l,
			  struct wlk__scope_item *items, struct wlk__enqueue *e)
{
	for (uint32_t i = 0; i < l->pub.n_scope; i++) {
		const struct wlk__lock_name *n = &l->pub.scope[i];

		items[i] = (struct wlk__scope_item){
			.name = n->name,
			.len = (uint32_t)n->len,
			.hash = wlk__name_hash(m->b, n->name, n->len),
			.slot = WLK_NIL,
		};
	}
	e->items = items;
	e->n_items = l->pub.n_scope;
	e->name = items[0].name;
	e->name_len = items[0].len;
	e->hash = items[0].hash;
}

/* Queued: remember each name's member. */
void wlk__shm_scope_members(struct wlk__shm_lock *l,
			    const struct wlk__scope_item *items)
{
	for (uint32_t i = 0; i < l->pub.n_scope; i++) {
		l->pub.scope[i].slot = items[i].slot;
		l->pub.scope[i].gen = items[i].gen;
	}
}

/*
 * Granted: each name's token, from its member. The members were granted
 * with the lead, under the mutex, before the lead's word said so; a
 * member no longer in that gen (the scope was stolen and the manager
 * closed since) keeps token 0, which nobody is given.
 */
void wlk__shm_scope_tokens(struct wlk__bucket *b, struct wlk__shm_lock *l)
{
	for (uint32_t i = 0; i < l->pub.n_scope; i++) {
		struct wlk__lock_name *n = &l->pub.scope[i];
		const struct wlk_seg_request *r = wlk__req_at(b, n->slot);
		uint32_t w = r ? wlk__word_load(&r->word) : 0;

		n->token = 0;
		if (r && WLK_WORD_GEN(w) == n->gen &&
		    WLK_WORD_STATE(w) != WLK_SLOT_PENDING)
			n->token = uatomic_read(&r->token);
	}
	l->pub.token = l->pub.scope[0].token;
}
