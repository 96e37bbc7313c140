/* SPDX-License-Identifier: MIT */
/*
 * query.c - wlk_query() and wlk_manager_validate() on etcd: one
 * linearizable range over the bucket's prefix is the state of the whole
 * bucket at one revision, classified name by name (etcd.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

struct snap {
	struct wlk_snapshot base;
	char *text; /* the names and clientIds */
};

static void snap_free(struct wlk_snapshot *s)
{
	struct snap *p = (struct snap *)s;

	free(p->base.held);
	free(p->base.pending);
	free(p->text);
	free(p);
}

/* The entries as LockInfo; @k classified. */
static int build(const struct wlk__etcd_kvs *k, struct snap *s)
{
	size_t bytes = 0, nh = 0;
	char *t;

	for (size_t i = 0; i < k->n; i++) {
		/* An escaped name is no shorter than its bytes. */
		bytes += k->e[i].name_len + 1 + strlen(k->e[i].client_id) + 1;
		nh += k->e[i].held;
	}
	/* At least one of each: malloc(0) may be NULL. */
	s->base.held = calloc(nh ? nh : 1, sizeof(*s->base.held));
	s->base.pending = calloc(k->n - nh ? k->n - nh : 1,
				 sizeof(*s->base.pending));
	s->text = t = malloc(bytes ? bytes : 1);
	if (!s->base.held || !s->base.pending || !t)
		return -ENOMEM;
	for (size_t i = 0; i < k->n; i++) {
		const struct wlk__etcd_entry *e = &k->e[i];
		struct wlk_lock_info *li =
			e->held ? &s->base.held[s->base.n_held++]
				: &s->base.pending[s->base.n_pending++];
		size_t cl = strlen(e->client_id) + 1;

		/* parse_key() checked the escapes. */
		(void)wlk__etcd_unesc(e->key + k->prefix_len, e->name_len, t,
				      &li->name_len);
		li->name = t;
		t[li->name_len] = '\0';
		t += li->name_len + 1;
		memcpy(t, e->client_id, cl);
		li->client_id = t;
		t += cl;
		li->mode = e->mode;
		li->pid = e->pid;
		/* A scope's members share their creation (scope.c), and no
		 * other request was created at it. */
		li->scope = e->scope_n ? (uint64_t)e->create_rev : 0;
	}
	return 0;
}

int wlk__etcd_query(struct wlk_manager *pub, struct wlk_snapshot **out)
{
	struct wlk__etcd_manager *m = wlk__etcd_m(pub);
	struct wlk__etcd_kvs k = { 0 };
	struct snap *s;
	int rc = wlk__etcd_range(m, m->prefix, m->prefix_len, &k);

	if (rc)
		return rc;
	wlk__etcd_classify(&k);
	s = calloc(1, sizeof(*s));
	rc = s ? build(&k, s) : -ENOMEM;
	wlk__etcd_kvs_free(&k);
	if (rc) {
		if (s)
			snap_free(&s->base);
		return rc;
	}
	s->base.free = snap_free;
	*out = &s->base;
	return 0;
}

/* Whether a scope of @k has members missing, or not of one Txn (its keys
 * come and go together: scope.c). Quadratic in the scopes' members. */
static bool torn_scope(const struct wlk__etcd_kvs *k)
{
	for (size_t i = 0; i < k->n; i++) {
		const struct wlk__etcd_entry *e = &k->e[i];
		unsigned int n = 0;

		for (size_t j = 0; e->scope_n && j < k->n; j++) {
			const struct wlk__etcd_entry *f = &k->e[j];

			if (!wlk__etcd_same_scope(e, f))
				continue;
			if (f->scope_n != e->scope_n ||
			    f->create_rev != e->create_rev)
				return true;
			n++;
		}
		if (n != e->scope_n)
			return true;
	}
	return false;
}

/*
 * wlk__etcd_validate() - what can be wrong with a bucket on etcd is a key
 * or a value under its prefix that no manager wrote (parse_key() and
 * parse_value() refuse them), or a scope in part; the grant rule itself
 * holds by construction (nobody grants: held-ness is computed from the
 * entries).
 */
int wlk__etcd_validate(struct wlk_manager *pub, wlk_violation_cb cb,
		       void *arg)
{
	struct wlk__etcd_manager *m = wlk__etcd_m(pub);
	struct wlk__etcd_kvs k = { 0 };
	int rc = wlk__etcd_range(m, m->prefix, m->prefix_len, &k);

	if (rc == -EPROTO) {
		if (cb)
			cb("a key or value under the bucket's prefix is not "
			   "an entry of this library",
			   arg);
		return WLK_ECORRUPT;
	}
	if (!rc && torn_scope(&k)) {
		if (cb)
			cb("a scope's entries are not all under the bucket's "
			   "prefix, or not of one transaction",
			   arg);
		rc = WLK_ECORRUPT;
	}
	wlk__etcd_kvs_free(&k);
	return rc;
}
