/* SPDX-License-Identifier: MIT */
/*
 * atonce.c - if_available, decided at once by a Txn with compares (the
 * mapping: etcd.h): its compares say the request is clear on each of its
 * names (a scope's: every one, scope.c): no entry of the name
 * (exclusive), or no exclusive one (shared, which makes every entry a
 * held shared one and the queue empty). steal is steal.c's.
 *
 * The Txn also ranges the names: finding its own key there proves that a
 * Txn sent twice (http.c's failover) applied the first time.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etcd.h"

/* Compares that say the name of @l's key @i would have the request
 * clear: no entry under it (exclusive), or no exclusive one (shared, a
 * steal's "0x" or another's "1x"). 0 or -ENOMEM. */
static int add_clear(struct json_object *cmp, const struct wlk__etcd_lock *l,
		     unsigned int i)
{
	size_t len, n;
	const char *key = wlk__etcd_key(l, i, &len);
	char *x = malloc((n = len - KEY_TAIL) + 3);
	int rc = 0;

	if (!x)
		return -ENOMEM;
	memcpy(x, key, n);
	for (int c = 0; c < 2 && !rc; c++) {
		struct json_object *o;

		if (l->base.mode == WLK_EXCLUSIVE && c)
			break;
		if (l->base.mode == WLK_EXCLUSIVE) {
			o = wlk__etcd_cmp(x, n, true, "CREATE", "EQUAL", 0);
		} else {
			memcpy(x + n, c ? "1x" : "0x", 3);
			o = wlk__etcd_cmp(x, n + 2, true, "CREATE", "EQUAL",
					  0);
		}
		if (!o || json_object_array_add(cmp, o)) {
			json_object_put(o);
			rc = -ENOMEM;
		}
	}
	free(x);
	return rc;
}

int wlk__etcd_if_available(struct wlk__etcd_req *r, bool *held)
{
	struct json_object *cmp = json_object_new_array();
	struct json_object *ok = json_object_new_array();
	struct json_object *fail = json_object_new_array();
	struct wlk__etcd_kvs k = { 0 };
	bool applied;
	int rc = cmp && ok && fail ? 0 : -ENOMEM;

	/* Every name clear: a scope's members are then all held. */
	for (unsigned int i = 0; !rc && i < wlk__etcd_nkeys(r->l); i++)
		rc = add_clear(cmp, r->l, i);
	if (!rc)
		rc = wlk__etcd_add_puts(ok, r);
	if (!rc)
		rc = wlk__etcd_add_ranges(ok, r->l);
	if (!rc)
		rc = wlk__etcd_add_ranges(fail, r->l);
	if (rc) {
		json_object_put(cmp);
		json_object_put(ok);
		json_object_put(fail);
		return rc;
	}
	rc = wlk__etcd_txn(r, cmp, ok, fail, &applied, &k);
	if (rc)
		return rc;
	/* Failed, and our key absent: a miss. Present: a repeat of a Txn
	 * that applied, and an entry once held stays held until deleted. */
	wlk__etcd_classify(&k);
	if (applied || wlk__etcd_kvs_find(&k, r->l->key, r->l->key_len)) {
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
