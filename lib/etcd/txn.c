/* SPDX-License-Identifier: MIT */
/*
 * txn.c - the pieces a request's transactions are built of (acquire.c,
 * atonce.c, steal.c, scope.c): a put of the request's entry on its lease,
 * a delete (a scope's: all of its keys in one Txn), a Txn and its reply,
 * and the reading of a grant from its names' entries.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etcd.h"

/* The put of @r's entry under @key (one of its keys: etcd.h). */
struct json_object *wlk__etcd_op_put_key(struct wlk__etcd_req *r,
					 const char *key, size_t len)
{
	struct json_object *op = json_object_new_object();
	struct json_object *p = json_object_new_object();
	char *v = wlk__etcd_b64(r->value, strlen(r->value));

	if (!op || !p || !v) {
		json_object_put(op);
		json_object_put(p);
		free(v);
		return NULL;
	}
	json_object_object_add(p, "key", wlk__etcd_jkey(key, len));
	json_object_object_add(p, "value", json_object_new_string(v));
	json_object_object_add(p, "lease", wlk__etcd_jstr_int(
						   (int64_t)r->lease));
	json_object_object_add(op, "request_put", p);
	free(v);
	return op;
}

struct json_object *wlk__etcd_op_delete(const char *key, size_t len)
{
	struct json_object *op = json_object_new_object();
	struct json_object *d = json_object_new_object();

	if (!op || !d) {
		json_object_put(op);
		json_object_put(d);
		return NULL;
	}
	json_object_object_add(d, "key", wlk__etcd_jkey(key, len));
	json_object_object_add(op, "request_delete_range", d);
	return op;
}

static int txn(struct wlk__etcd_req *r, struct json_object *cmp,
	       struct json_object *ok, struct json_object *fail, bool bare_ok,
	       bool *succeeded, struct wlk__etcd_kvs *kvs)
{
	struct json_object *t = json_object_new_object(), *rep;
	int rc;

	if (!t || !cmp || !ok || !fail) {
		json_object_put(t);
		json_object_put(cmp);
		json_object_put(ok);
		json_object_put(fail);
		return -ENOMEM;
	}
	json_object_object_add(t, "compare", cmp);
	json_object_object_add(t, "success", ok);
	json_object_object_add(t, "failure", fail);
	rc = wlk__etcd_call(&r->m->conn, "/v3/kv/txn", t, &rep);
	json_object_put(t);
	if (r->l)
		r->l->unsure |= wlk__etcd_unsure;
	if (rc)
		return rc;
	rc = wlk__etcd_txn_reply(rep, r->m->prefix, r->m->prefix_len,
				 bare_ok, succeeded, kvs);
	json_object_put(rep);
	return rc;
}

/* A Txn of @cmp, @ok, @fail (consumed); the name's entries after it. */
int wlk__etcd_txn(struct wlk__etcd_req *r, struct json_object *cmp,
		  struct json_object *ok, struct json_object *fail,
		  bool *succeeded, struct wlk__etcd_kvs *kvs)
{
	return txn(r, cmp, ok, fail, false, succeeded, kvs);
}

/* wlk__etcd_txn(), for a Txn whose success branch ranges nothing: @kvs
 * is then empty, at the Txn's revision. */
int wlk__etcd_txn_bare(struct wlk__etcd_req *r, struct json_object *cmp,
		       struct json_object *ok, struct json_object *fail,
		       bool *succeeded, struct wlk__etcd_kvs *kvs)
{
	return txn(r, cmp, ok, fail, true, succeeded, kvs);
}

/* [@a, @b, @c], NULLs ending it early; NULL if out of memory. */
struct json_object *wlk__etcd_list(struct json_object *a,
				   struct json_object *b,
				   struct json_object *c)
{
	struct json_object *l = json_object_new_array();
	struct json_object *v[3] = { a, b, c };
	bool bad = !l;

	for (int i = 0; i < 3; i++) {
		if (!v[i])
			continue;
		if (bad || json_object_array_add(l, v[i]))
			json_object_put(v[i]);
	}
	if (bad)
		return NULL;
	return l;
}

/* The "deleted" of each response of a TxnResponse @rep, summed. */
static int deleted_sum(struct json_object *rep, int64_t *sum)
{
	struct json_object *rs;

	*sum = 0;
	if (!json_object_object_get_ex(rep, "responses", &rs) ||
	    !json_object_is_type(rs, json_type_array))
		return -EPROTO;
	for (size_t i = 0; i < json_object_array_length(rs); i++) {
		struct json_object *r = json_object_array_get_idx(rs, i), *d;
		int64_t n = 0;

		if (!json_object_is_type(r, json_type_object) ||
		    !json_object_object_get_ex(r, "response_delete_range",
					       &d))
			return -EPROTO;
		if (wlk__etcd_int64(d, "deleted", &n)) /* absent: 0 */
			return -EPROTO;
		*sum += n;
	}
	return 0;
}

/* Delete every key of @l's scope in one Txn; how many were there in
 * *@deleted (if not NULL): all or none, since a scope's keys come and go
 * together. */
static int scope_delete(struct wlk__etcd_manager *m, struct wlk__etcd_lock *l,
			int64_t *deleted)
{
	struct json_object *t = json_object_new_object(), *rep;
	struct json_object *ops = json_object_new_array();
	int64_t n = 0;
	int rc = t && ops ? 0 : -ENOMEM;

	for (uint32_t i = 0; !rc && i < l->base.n_scope; i++) {
		struct json_object *op = wlk__etcd_op_delete(l->mem[i].key,
							     l->mem[i].len);

		if (!op || json_object_array_add(ops, op)) {
			json_object_put(op);
			rc = -ENOMEM;
		}
	}
	if (rc) {
		json_object_put(t);
		json_object_put(ops);
		return rc;
	}
	json_object_object_add(t, "success", ops);
	rc = wlk__etcd_call(&m->conn, "/v3/kv/txn", t, &rep);
	json_object_put(t);
	l->unsure |= wlk__etcd_unsure;
	if (rc)
		return rc;
	rc = deleted_sum(rep, &n);
	json_object_put(rep);
	if (!rc && deleted)
		*deleted = n;
	return rc;
}

/* Delete @l's key (a scope's keys: one Txn), whatever state it is in (a
 * release, an abort, a timeout), and say in *@deleted (if not NULL)
 * whether it was there. After an error the lease mends it: the key goes
 * with it. */
int wlk__etcd_delete(struct wlk__etcd_manager *m, struct wlk__etcd_lock *l,
		     int64_t *deleted)
{
	struct json_object *d, *rep;
	int64_t n = 0;
	int rc;

	if (l->mem)
		return scope_delete(m, l, deleted);
	d = json_object_new_object();
	if (!d)
		return -ENOMEM;
	json_object_object_add(d, "key", wlk__etcd_jkey(l->key, l->key_len));
	rc = wlk__etcd_call(&m->conn, "/v3/kv/deleterange", d, &rep);
	json_object_put(d);
	l->unsure |= wlk__etcd_unsure;
	if (rc)
		return rc;
	rc = wlk__etcd_int64(rep, "deleted", &n);
	json_object_put(rep);
	if (!rc && deleted)
		*deleted = n;
	return rc;
}

/*
 * wlk__etcd_grant_of() - whether @l's entry (a scope's entries, all of
 * them) is held in @k (classified, with every name of @l): then its token
 * is the revision of @k, on each name. An entry that is gone while its
 * lease is not was held, and stolen, before this read (a steal deletes
 * holders only): a grant, stolen already, whose token is the entry's
 * creation (below the stealer's, and so refused by a fenced resource).
 * Gone with its lease: WLK_EABORTED. The process's idea of its lease may
 * be late (it was stopped, or its keepalive has not failed yet), so the
 * cluster is asked before a gone entry counts as stolen. Part of a scope:
 * -EPROTO (its keys come and go in one revision).
 */
int wlk__etcd_grant_of(struct wlk__etcd_manager *m, struct wlk__etcd_lock *l,
		       struct wlk__etcd_kvs *k, bool *held)
{
	int64_t put = uatomic_read(&l->put_rev), created = 0;
	unsigned int n = wlk__etcd_nkeys(l), found = 0;
	uint64_t token;
	bool all = true;
	int rc;

	for (unsigned int i = 0; i < n; i++) {
		size_t len;
		const char *key = wlk__etcd_key(l, i, &len);
		struct wlk__etcd_entry *e = wlk__etcd_kvs_find(k, key, len);

		if (!e)
			continue;
		found++;
		all &= e->held;
		created = e->create_rev;
	}
	if (found && found != n)
		return -EPROTO;
	if (!found) {
		if (!put || l->lease != wlk__etcd_lease(m))
			return WLK_EABORTED;
		rc = wlk__etcd_lease_alive(m->a, l->lease);
		if (rc)
			return rc == 1 ? WLK_EABORTED : rc;
		uatomic_set(&l->gone, 1);
		token = (uint64_t)put;
		*held = true;
	} else {
		if (created != put)
			wlk__etcd_put_at(m, l, created);
		*held = all;
		token = (uint64_t)k->revision;
	}
	if (*held) {
		l->base.token = token;
		for (uint32_t i = 0; l->base.scope && i < l->base.n_scope; i++)
			l->base.scope[i].token = token;
	}
	return 0;
}

/* Our entry in @k, held: the grant. */
int wlk__etcd_grant_if_held(struct wlk__etcd_req *r, struct wlk__etcd_kvs *k,
			    bool *held)
{
	wlk__etcd_classify(k);
	return wlk__etcd_grant_of(r->m, r->l, k, held);
}
