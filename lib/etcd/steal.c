/* SPDX-License-Identifier: MIT */
/*
 * steal.c - a steal on etcd, of one name or of a scope's (scope.c): read
 * the bucket, then one Txn deletes every request holding one of its names,
 * whole (a scope that holds one of them loses all of its names), and puts
 * the stealer's class-0 entries, which go first on each name (etcd.h); if
 * what it decided on is still so, else it reads again.
 *
 * What the Txn compares, so that what it decided on still holds:
 *
 *  - no key put under its names since the read (a new entry there could
 *    be held, and would not be deleted);
 *  - every key it deletes still there (a holder gone since, and what
 *    waited behind it granted, is a new holder);
 *  - a scope that waits with a member clear on one of its names (a
 *    shared scope behind shared holders, waiting for another name): every
 *    entry that keeps one of its members from being clear is still there.
 *    Were one deleted, the scope would be granted, and then lose its grant
 *    to the class-0 entries without being deleted: held must stay held
 *    until deleted.
 *
 * Nothing else can change what it decides: a grant depends only on the
 * entries before an entry on its names, and new ones come after.
 *
 * It reads the whole bucket (its scopes' other names are anywhere in it),
 * so a steal costs in proportion to the bucket's entries. The Txn ranges
 * the bucket too: finding its own key there proves that a Txn sent twice
 * (http.c's failover) applied the first time.
 */
#include <errno.h>
#include <string.h>

#include "etcd.h"

/* etcd's default --max-txn-ops: operations in each of a Txn's lists. */
#define TXN_OPS_MAX 128
/* A steal's optimistic rounds before it gives up with WLK_EFULL (a
 * bucket changing faster than a round trip). */
#define STEAL_ROUNDS 64
/* entry.mark: deleted by the steal, or compared to be still there */
#define VICTIM 1
#define GUARD 2

/* The Txn being built: its compares and success ops, counted. */
struct txn {
	struct json_object *cmp, *ok;
	size_t n_cmp, n_ok;
	int rc;
};

static void push(struct json_object *a, size_t *n, struct json_object *o,
		 int *rc)
{
	if (!*rc && (!o || json_object_array_add(a, o)))
		*rc = -ENOMEM;
	if (*rc)
		json_object_put(o);
	else
		(*n)++;
}

/* @e still there, and (a victim) deleted by the Txn. */
static void keep(struct txn *t, struct wlk__etcd_entry *e, int why)
{
	e->mark = (uint8_t)why;
	push(t->cmp, &t->n_cmp,
	     wlk__etcd_cmp(e->key, e->key_len, false, "VERSION", "GREATER", 0),
	     &t->rc);
	if (why == VICTIM)
		push(t->ok, &t->n_ok, wlk__etcd_op_delete(e->key, e->key_len),
		     &t->rc);
}

/* The compares and deletes of a steal from @k (classified). */
static void decide(struct wlk__etcd_req *r, struct wlk__etcd_kvs *k,
		   struct txn *t)
{
	const struct wlk__etcd_lock *l = r->l;

	for (unsigned int i = 0; i < wlk__etcd_nkeys(l); i++) {
		size_t len;
		const char *key = wlk__etcd_key(l, i, &len);

		push(t->cmp, &t->n_cmp,
		     wlk__etcd_cmp(key, len - KEY_TAIL, true, "MOD", "LESS",
				   k->revision + 1),
		     &t->rc);
	}
	for (size_t i = 0; i < k->n; i++)
		k->e[i].mark = 0;
	/* The holders of its names, each with all of its keys. */
	for (size_t i = 0; i < k->n; i++) {
		struct wlk__etcd_entry *e = &k->e[i];

		if (!e->held || e->mark || !wlk__etcd_on_names(l, e))
			continue;
		for (size_t j = 0; j < k->n; j++)
			if (j == i || wlk__etcd_same_scope(e, &k->e[j]))
				keep(t, &k->e[j], VICTIM);
	}
	/* A scope waiting with a member clear here: what keeps each of its
	 * members from being clear stays. */
	for (size_t i = 0; i < k->n; i++) {
		struct wlk__etcd_entry *e = &k->e[i];

		if (!e->scope_n || !e->clear || e->held ||
		    !wlk__etcd_on_names(l, e))
			continue;
		for (size_t j = 0; j < k->n; j++) {
			struct wlk__etcd_entry *f = &k->e[j];

			if (!wlk__etcd_same_scope(e, f))
				continue;
			for (size_t x = j;
			     x-- > 0 && wlk__etcd_same_name(f, &k->e[x],
							    k->prefix_len);) {
				struct wlk__etcd_entry *g = &k->e[x];

				if (!g->mark && (f->mode == WLK_EXCLUSIVE ||
						 g->mode == WLK_EXCLUSIVE))
					keep(t, g, GUARD);
			}
		}
	}
}

/* One round of a steal, from the bucket as @k has it: 0 with *@done, or
 * an error. */
static int steal_round(struct wlk__etcd_req *r, struct wlk__etcd_kvs *k,
		       bool *done)
{
	struct txn t = { .cmp = json_object_new_array(),
			 .ok = json_object_new_array() };
	struct json_object *fail = wlk__etcd_list(
		wlk__etcd_op_range(r->m->prefix, r->m->prefix_len), NULL,
		NULL);
	struct wlk__etcd_kvs after = { 0 };
	bool applied;
	int rc;

	t.rc = t.cmp && t.ok && fail ? 0 : -ENOMEM;
	if (!t.rc)
		decide(r, k, &t);
	if (!t.rc)
		t.rc = wlk__etcd_add_puts(t.ok, r);
	t.n_ok += wlk__etcd_nkeys(r->l);
	push(t.ok, &t.n_ok, wlk__etcd_op_range(r->m->prefix, r->m->prefix_len),
	     &t.rc);
	if (!t.rc && (t.n_cmp > TXN_OPS_MAX || t.n_ok > TXN_OPS_MAX))
		t.rc = WLK_EFULL;
	if (t.rc) {
		json_object_put(t.cmp);
		json_object_put(t.ok);
		json_object_put(fail);
		return t.rc;
	}
	rc = wlk__etcd_txn(r, t.cmp, t.ok, fail, &applied, &after);
	if (rc)
		return rc;
	/* Managers of this process know at once (others by their watch). */
	for (size_t i = 0; applied && i < k->n; i++)
		if (k->e[i].mark == VICTIM)
			wlk__etcd_local_gone(k->e[i].key, k->e[i].key_len,
					     after.revision);
	wlk__etcd_kvs_free(k);
	*k = after;
	wlk__etcd_classify(k);
	*done = applied || wlk__etcd_kvs_find(k, r->l->key, r->l->key_len);
	return 0;
}

int wlk__etcd_steal(struct wlk__etcd_req *r, bool *held)
{
	struct wlk__etcd_kvs k = { 0 };
	bool done = false;
	int rc = wlk__etcd_range(r->m, r->m->prefix, r->m->prefix_len, &k);

	if (!rc)
		wlk__etcd_classify(&k);
	for (int i = 0; !rc && !done && i < STEAL_ROUNDS; i++)
		rc = steal_round(r, &k, &done);
	if (!rc && !done)
		rc = WLK_EFULL;
	if (!rc) {
		rc = wlk__etcd_grant_if_held(r, &k, held);
		if (!rc && !*held)
			rc = WLK_ESTOLEN; /* stolen in turn, at once */
	}
	wlk__etcd_kvs_free(&k);
	return rc;
}
