/* SPDX-License-Identifier: MIT */
/*
 * deadlock.c - detect_deadlocks on etcd (weblocks.h, DEADLOCKS): a
 * request of a manager that asks for it is refused with WLK_EDEADLK,
 * nothing put, when it would close a cycle of managers waiting for each
 * other.
 *
 * The graph is the shared-memory engine's (spec/deadlock.c), read from
 * one read of the bucket: a manager is its client digits, its lease (its
 * process's, shared by the process's managers of the cluster) and its
 * number in the process (every key of a manager carries both: etcd.h);
 * a pending entry waits for the other managers with an entry before it
 * on its name in a conflicting mode (held, or queued ahead: a held entry
 * after a pending one is shared behind a shared one, no conflict). A new
 * request comes after every entry of its names, so it would wait for
 * every other manager with a conflicting entry there, and closes a cycle
 * if its own manager is reachable from those.
 *
 * The check and the put must be one step, as under the segment mutex:
 * two managers that each read the bucket before the other's put could
 * each close half of a cycle. So the put's Txn compares that no key of
 * the bucket was put since the read (a deletion takes edges away, and
 * cannot make a cycle); if one was, its failure branch reads the bucket
 * again, and the check is made anew. A bucket that changes at every
 * round, CHECK_ROUNDS times in a row, is WLK_EFULL, as for a steal.
 * Cost: a read of the whole bucket per request of such a manager, and
 * O(managers x entries) to walk it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

/* Rounds of read and compared put before WLK_EFULL (as steal.c's). */
#define CHECK_ROUNDS 64

static bool conflict(enum wlk_mode a, enum wlk_mode b)
{
	return a != WLK_SHARED || b != WLK_SHARED;
}

/* The manager of an entry: its client digits in its key's tail. */
static const char *client_of(const struct wlk__etcd_entry *e)
{
	return e->key + e->key_len - KEY_TAIL + 3;
}

static bool same_client(const struct wlk__etcd_entry *a,
			const struct wlk__etcd_entry *b)
{
	return !memcmp(client_of(a), client_of(b), CLIENT_DIGITS);
}

/* Mark every entry of @e's manager reached. */
static void reach(struct wlk__etcd_kvs *k, const struct wlk__etcd_entry *e,
		  bool *in, bool *grew)
{
	for (size_t i = 0; i < k->n; i++)
		if (!in[i] && same_client(&k->e[i], e)) {
			in[i] = true;
			*grew = true;
		}
}

/*
 * Whether @l, a request of the manager whose client is @me (hex digits),
 * would close a cycle in @k (the bucket, classified, without @l): 0 with
 * *@cycle, or -ENOMEM.
 */
static int closes_cycle(const struct wlk__etcd_lock *l, const char *me,
			struct wlk__etcd_kvs *k, bool *cycle)
{
	bool *in = calloc(k->n ? k->n : 1, sizeof(*in)), grew = false;

	if (!in)
		return -ENOMEM;
	for (size_t i = 0; i < k->n; i++) {
		const struct wlk__etcd_entry *e = &k->e[i];

		if (memcmp(client_of(e), me, CLIENT_DIGITS) != 0 &&
		    conflict(e->mode, l->base.mode) && wlk__etcd_on_names(l, e))
			reach(k, e, in, &grew);
	}
	while (grew) {
		grew = false;
		for (size_t p = 0; p < k->n; p++) {
			const struct wlk__etcd_entry *w = &k->e[p];

			if (!in[p] || w->held)
				continue;
			for (size_t x = p; x-- > 0 &&
			     wlk__etcd_same_name(w, &k->e[x], k->prefix_len);)
				if (!in[x] && conflict(k->e[x].mode, w->mode) &&
				    !same_client(&k->e[x], w))
					reach(k, &k->e[x], in, &grew);
		}
	}
	*cycle = false;
	for (size_t i = 0; i < k->n; i++)
		*cycle |= in[i] && !memcmp(client_of(&k->e[i]), me,
					   CLIENT_DIGITS);
	free(in);
	return 0;
}

/* The put of @r's keys if the bucket is as @b read it: its Txn, with the
 * names' ranges (applied) or the bucket's (not) into @out. */
static int put_if_unchanged(struct wlk__etcd_req *r,
			    const struct wlk__etcd_kvs *b, bool *applied,
			    struct wlk__etcd_kvs *out)
{
	struct wlk__etcd_manager *m = r->m;
	struct json_object *ok = json_object_new_array();

	if (!ok || wlk__etcd_add_puts(ok, r) ||
	    wlk__etcd_add_ranges(ok, r->l)) {
		json_object_put(ok);
		return -ENOMEM;
	}
	return wlk__etcd_txn(
		r,
		wlk__etcd_list(wlk__etcd_cmp(r->l->key, r->l->key_len, false,
					     "CREATE", "EQUAL", 0),
			       wlk__etcd_cmp(m->prefix, m->prefix_len, true,
					     "MOD", "LESS", b->revision + 1),
			       NULL),
		ok,
		wlk__etcd_list(wlk__etcd_op_range(m->prefix, m->prefix_len),
			       NULL, NULL),
		applied, out);
}

/*
 * wlk__etcd_put_checked() - put @r's keys, as acquire.c's put does, unless
 * that would close a cycle: 0 with the entries of its names (or of the
 * bucket) in *@k, WLK_EDEADLK with nothing put, WLK_EFULL, or an error of
 * the calls.
 */
int wlk__etcd_put_checked(struct wlk__etcd_req *r, struct wlk__etcd_kvs *k)
{
	struct wlk__etcd_manager *m = r->m;
	struct wlk__etcd_kvs b = { 0 };
	char me[CLIENT_DIGITS + 1];
	int rc = wlk__etcd_range(m, m->prefix, m->prefix_len, &b);

	snprintf(me, sizeof(me), "%016llx-%08x", (unsigned long long)r->lease,
		 (unsigned int)m->no);
	for (int round = 0; !rc && round < CHECK_ROUNDS; round++) {
		struct wlk__etcd_kvs next = { 0 };
		bool cycle = false, applied = false;

		wlk__etcd_classify(&b);
		/* A Txn sent twice (http.c's failover) applied the first
		 * time. */
		if (wlk__etcd_kvs_find(&b, r->l->key, r->l->key_len)) {
			*k = b;
			return 0;
		}
		rc = closes_cycle(r->l, me, &b, &cycle);
		if (!rc && cycle)
			rc = WLK_EDEADLK;
		if (!rc)
			rc = put_if_unchanged(r, &b, &applied, &next);
		wlk__etcd_kvs_free(&b);
		if (rc)
			return rc;
		b = next;
		if (applied) {
			*k = b;
			return 0;
		}
	}
	wlk__etcd_kvs_free(&b);
	return rc ? rc : WLK_EFULL;
}
