/* SPDX-License-Identifier: MIT */
/*
 * atonce.c - the requests decided at once, each by a Txn with compares
 * (the mapping: etcd.h):
 *
 *  - if_available: one Txn whose compares say the request is grantable:
 *    no entry of the name (exclusive), or no exclusive one (shared, which
 *    makes every entry a held shared one and the queue empty).
 *  - steal: read the name, then one Txn deletes the holders it saw and
 *    puts a class-0 entry, if the name's keys are as read (no key put
 *    since, every holder still there); otherwise read again.
 *
 * Each Txn also ranges the name: finding its own key there proves that a
 * Txn sent twice (http.c's failover) applied the first time.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etcd.h"

/* etcd's default --max-txn-ops: a steal deletes at most this many holders
 * minus the compare on the range and its own put. */
#define TXN_OPS_MAX 128
/* A steal's optimistic rounds before it gives up with WLK_EFULL (a name
 * changing faster than a round trip). */
#define STEAL_ROUNDS 64

int wlk__etcd_if_available(struct wlk__etcd_req *r, bool *held)
{
	size_t n = r->np_len;
	char *x0 = malloc(n + 3), *x1 = malloc(n + 3);
	struct json_object *cmp;
	struct wlk__etcd_kvs k = { 0 };
	bool ok;
	int rc;

	if (!x0 || !x1) {
		free(x0);
		free(x1);
		return -ENOMEM;
	}
	/* The steal entries ("0x-...") and the exclusive ones ("1x-..."). */
	memcpy(x0, r->np, n);
	memcpy(x0 + n, "0x", 3);
	memcpy(x1, r->np, n);
	memcpy(x1 + n, "1x", 3);
	if (r->l->base.mode == WLK_EXCLUSIVE)
		cmp = wlk__etcd_list(wlk__etcd_cmp(r->np, n, true, "CREATE", "EQUAL", 0),
			   NULL, NULL);
	else
		cmp = wlk__etcd_list(wlk__etcd_cmp(x0, n + 2, true, "CREATE", "EQUAL", 0),
			   wlk__etcd_cmp(x1, n + 2, true, "CREATE", "EQUAL", 0),
			   NULL);
	free(x0);
	free(x1);
	rc = wlk__etcd_txn(r, cmp,
			   wlk__etcd_list(wlk__etcd_op_put(r),
					  wlk__etcd_op_range(r->np, n), NULL),
		 wlk__etcd_list(wlk__etcd_op_range(r->np, n), NULL, NULL), &ok, &k);
	if (rc)
		return rc;
	/* Failed, and our key absent: a miss. Present: a repeat of a Txn
	 * that applied, and an entry once held stays held until deleted. */
	wlk__etcd_classify(&k);
	if (ok || wlk__etcd_kvs_find(&k, r->l->key, r->l->key_len)) {
		rc = wlk__etcd_grant_if_held(r, &k, held);
		if (!rc && !*held)
			rc = -EPROTO; /* the cluster broke the rule */
	} else {
		*held = false;
	}
	wlk__etcd_kvs_free(&k);
	if (rc == -EPROTO)
		(void)wlk__etcd_delete(r->m, r->l, NULL);
	return rc;
}

/* One round of a steal, from the name as @k has it: 0 with *@done, or
 * an error. */
static int steal_round(struct wlk__etcd_req *r, struct wlk__etcd_kvs *k,
		       bool *done)
{
	struct json_object *cmp = json_object_new_array();
	struct json_object *ok = json_object_new_array();
	struct wlk__etcd_kvs after = { 0 };
	size_t holders = 0;
	bool applied;
	int rc;

	if (!cmp || !ok) {
		json_object_put(cmp);
		json_object_put(ok);
		return -ENOMEM;
	}
	json_object_array_add(cmp, wlk__etcd_cmp(r->np, r->np_len, true,
						 "MOD", "LESS",
						 k->revision + 1));
	for (size_t i = 0; i < k->n && k->e[i].held; i++, holders++) {
		const struct wlk__etcd_entry *e = &k->e[i];

		json_object_array_add(cmp, wlk__etcd_cmp(e->key, e->key_len,
							 false, "VERSION",
							 "GREATER", 0));
		json_object_array_add(ok, wlk__etcd_op_delete(e->key, e->key_len));
	}
	if (holders + 2 > TXN_OPS_MAX) {
		json_object_put(cmp);
		json_object_put(ok);
		return WLK_EFULL;
	}
	json_object_array_add(ok, wlk__etcd_op_put(r));
	json_object_array_add(ok, wlk__etcd_op_range(r->np, r->np_len));
	rc = wlk__etcd_txn(r, cmp, ok,
		 wlk__etcd_list(wlk__etcd_op_range(r->np, r->np_len), NULL, NULL),
		 &applied, &after);
	if (rc)
		return rc;
	/* Managers of this process know at once (others by their watch). */
	for (size_t i = 0; applied && i < holders; i++)
		wlk__etcd_local_gone(k->e[i].key, k->e[i].key_len);
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
	int rc = wlk__etcd_range(r->m, r->np, r->np_len, &k);

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
