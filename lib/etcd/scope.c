/* SPDX-License-Identifier: MIT */
/*
 * scope.c - scopes on etcd (weblocks.h, SCOPES): one request for a set of
 * names, granted on all of them at once.
 *
 * The design, on the mapping of etcd.h:
 *
 *  - Members. A scope of n names is n entries, one under each name, put
 *    in one Txn: they share a creation revision, and their keys share one
 *    tail "<c><m>-<lease>-<seq>" (one request number: etcd.h). The value says
 *    how many members there are, "<m><n> <pid> <clientId>" (a single
 *    name's is "<m> <pid> ..."), so that a reader of the whole bucket
 *    knows a scope, and a scope it sees only part of. Every change to a
 *    scope is one Txn, or the lease's end, which deletes all of its keys
 *    in one revision too: no read ever shows part of a scope.
 *  - The grant rule, derived as for a single name (nobody grants). On its
 *    name, an entry is clear when, exclusive, it is the first entry, or,
 *    shared, no exclusive entry comes before it: the early draft's rule
 *    (layout.h SCOPES, spec/scope.c) once one sees that every entry is
 *    held or pending, so "first in the queue and nothing held" is "first",
 *    and "nothing exclusive held and no exclusive request ahead" is "no
 *    exclusive entry ahead". A single name's entry is held when clear (the
 *    Working Draft's rule, exactly); a scope's entries are held when every
 *    member is clear, all of them at once. Clear depends only on the
 *    entries before it on its name, never on which are held, so there is
 *    no fixed point to find, and a shared request behind a scope that
 *    waits for another name is granted, as the draft says.
 *  - Held stays held until deleted: a new entry comes after every entry
 *    of its names (it clears nothing before it), a deletion only takes
 *    away what comes before others. The one exception is a steal, whose
 *    class-0 entries go first: steal.c deletes every holder of its names,
 *    whole scopes, and makes sure that no scope waiting on them is
 *    granted between its read and its Txn.
 *  - Reading. A scope's waiter reads all of its names in one Txn of
 *    ranges (one revision); its token on each name is that revision, as a
 *    single name's is. query() reads the bucket, and shows a scope's
 *    entries with their creation revision as the scope value, and
 *    wlk_manager_validate() reports a scope it sees in part. A reader
 *    of one name sees a scope member's clear, never its held: only its
 *    own entries' grants come from such reads, and those are single.
 *  - Options, all at once: if_available (atonce.c) puts every member iff
 *    compares on every name say each would be clear; steal (steal.c);
 *    a signal, timeout, cancel or release deletes every key in one Txn.
 *  - Losing it: the agent marks the whole lock gone when any member's key
 *    is deleted by someone else, or the lease is lost (agent.c, gone.c);
 *    its holder sees it stolen, its waiter gets WLK_EABORTED.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

/*
 * wlk__etcd_scope_keys() - @l's keys for its scope: each name's prefix
 * and @tail. 0 or -ENOMEM (nothing kept).
 */
int wlk__etcd_scope_keys(struct wlk__etcd_manager *m,
			 struct wlk__etcd_lock *l, const char *tail,
			 size_t tail_len)
{
	uint32_t n = l->base.n_scope;
	struct wlk__etcd_member *mem = calloc(n, sizeof(*mem));

	if (!mem)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		size_t np_len;
		char *np = wlk__etcd_name_prefix(m->prefix, m->prefix_len,
						 l->base.scope[i].name,
						 l->base.scope[i].len,
						 &np_len);
		char *k = np ? realloc(np, np_len + tail_len + 1) : NULL;

		if (!k) {
			free(np);
			for (uint32_t j = 0; j < i; j++)
				free(mem[j].key);
			free(mem);
			return -ENOMEM;
		}
		memcpy(k + np_len, tail, tail_len);
		k[np_len + tail_len] = '\0';
		mem[i] = (struct wlk__etcd_member){ k, np_len + tail_len };
	}
	l->mem = mem;
	l->key = mem[0].key;
	l->key_len = mem[0].len;
	return 0;
}

/* wlk__etcd_forget_keys() - free @l's keys, a scope's or a name's. */
void wlk__etcd_forget_keys(struct wlk__etcd_lock *l)
{
	if (l->mem) {
		for (uint32_t i = 0; i < l->base.n_scope; i++)
			free(l->mem[i].key);
		free(l->mem);
	} else {
		free(l->key);
	}
	l->mem = NULL;
	l->key = NULL;
	l->key_len = 0;
}

/* Append the put of each of @r's keys to @ops: 0 or -ENOMEM. */
int wlk__etcd_add_puts(struct json_object *ops, struct wlk__etcd_req *r)
{
	for (unsigned int i = 0; i < wlk__etcd_nkeys(r->l); i++) {
		size_t len;
		const char *k = wlk__etcd_key(r->l, i, &len);
		struct json_object *op = wlk__etcd_op_put_key(r, k, len);

		if (!op || json_object_array_add(ops, op)) {
			json_object_put(op);
			return -ENOMEM;
		}
	}
	return 0;
}

/* Append a range of each of @l's names to @ops: 0 or -ENOMEM. */
int wlk__etcd_add_ranges(struct json_object *ops,
			 const struct wlk__etcd_lock *l)
{
	for (unsigned int i = 0; i < wlk__etcd_nkeys(l); i++) {
		size_t len;
		const char *k = wlk__etcd_key(l, i, &len);
		struct json_object *op = wlk__etcd_op_range(k, len - KEY_TAIL);

		if (!op || json_object_array_add(ops, op)) {
			json_object_put(op);
			return -ENOMEM;
		}
	}
	return 0;
}

/*
 * wlk__etcd_read() - the entries of every name of @l at one revision: one
 * range for a single name, a Txn of ranges for a scope. @since: 0, or a
 * revision that a state at or after it will do for (a single name's
 * range may then be served by the member alone: wlk__etcd_range_since()).
 * 0, or as wlk__etcd_range().
 */
int wlk__etcd_read(struct wlk__etcd_manager *m, struct wlk__etcd_lock *l,
		   int64_t since, struct wlk__etcd_kvs *out)
{
	struct wlk__etcd_req r = { .m = m, .l = l };
	struct json_object *ranges;
	bool ok;

	if (!l->mem && since > 0)
		return wlk__etcd_range_since(m, l->key, l->key_len - KEY_TAIL,
					     since, out);
	if (!l->mem)
		return wlk__etcd_range(m, l->key, l->key_len - KEY_TAIL, out);
	ranges = json_object_new_array();
	if (!ranges || wlk__etcd_add_ranges(ranges, l)) {
		json_object_put(ranges);
		return -ENOMEM;
	}
	return wlk__etcd_txn(&r, json_object_new_array(), ranges,
			     json_object_new_array(), &ok, out);
}

/* wlk__etcd_on_names() - whether @e is under one of @l's names. */
bool wlk__etcd_on_names(const struct wlk__etcd_lock *l,
		     const struct wlk__etcd_entry *e)
{
	for (unsigned int i = 0; i < wlk__etcd_nkeys(l); i++) {
		size_t len;
		const char *key = wlk__etcd_key(l, i, &len);

		if (e->key_len > len - KEY_TAIL &&
		    !memcmp(e->key, key, len - KEY_TAIL))
			return true;
	}
	return false;
}
