/* SPDX-License-Identifier: MIT */
/*
 * bucket.c - a bucket on etcd besides its entries: a marker key that its
 * first opener puts (its value: the bucket's max_name_len, which later
 * openers get, as a segment's geometry is its creator's), one presence
 * key per open manager (on its agent's lease, named by the lease and the
 * manager's number), deleted by its close (with its requests and locks,
 * when other managers of the process keep the lease alive), and
 * wlk_bucket_remove(), which deletes the marker unless a manager is
 * present. Both keys lie outside
 * the bucket's range of entries: the prefix ends in '/', they in '#' and
 * '!', which no escaped identifier has (codec.c, ESCAPES).
 *
 * And the process's managers, so that a steal marks the locks it took
 * from managers of this very process stolen before it returns, as the
 * shared-memory engine does (another process's managers learn it from
 * their watch).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

#define MARKER_TAIL '#'
#define PRESENCE_TAIL '!'
/* The marker's value: a decimal max_name_len. */
#define MARKER_DIGITS 10

/* "<lease>-<manager>": a presence key's tail (CLIENT_DIGITS). */
#define PRESENCE_ID_MAX (CLIENT_DIGITS + 1)

/* The bucket's prefix with its '/' made @tail, and the client @id of
 * (lease, no) in hex if the lease is not 0. */
static char *key_of(const char *prefix, size_t len, char tail, uint64_t id,
		    uint32_t no, size_t *out_len)
{
	char *k = malloc(len + PRESENCE_ID_MAX);

	if (!k)
		return NULL;
	memcpy(k, prefix, len);
	k[len - 1] = tail;
	if (id)
		snprintf(k + len, PRESENCE_ID_MAX, "%016llx-%08x",
			 (unsigned long long)id, (unsigned int)no);
	else
		k[len] = '\0';
	*out_len = strlen(k);
	return k;
}

static struct json_object *op(const char *kind, const char *key, size_t len,
			      const char *value, uint64_t lease)
{
	struct json_object *o = json_object_new_object();
	struct json_object *r = json_object_new_object();

	if (!o || !r) {
		json_object_put(o);
		json_object_put(r);
		return NULL;
	}
	json_object_object_add(r, "key", wlk__etcd_jkey(key, len));
	if (value) {
		char *v = wlk__etcd_b64(value, strlen(value));

		json_object_object_add(r, "value",
				       v ? json_object_new_string(v) : NULL);
		free(v);
	}
	if (lease)
		json_object_object_add(r, "lease",
				       wlk__etcd_jstr_int((int64_t)lease));
	json_object_object_add(o, kind, r);
	return o;
}

static struct json_object *arr(struct json_object *a, struct json_object *b,
			       struct json_object *c)
{
	struct json_object *l = json_object_new_array();

	if (l) {
		if (a)
			json_object_array_add(l, a);
		if (b)
			json_object_array_add(l, b);
		if (c)
			json_object_array_add(l, c);
	}
	return l;
}

/* The marker's max_name_len in the txn reply @rep; 0 or -EPROTO. */
static int marker_value(struct json_object *rep, uint32_t *out)
{
	struct json_object *rs, *r, *kvs, *kv, *v;
	char *s = NULL, *end;
	size_t n;
	unsigned long x;
	int rc = -EPROTO;

	if (!json_object_object_get_ex(rep, "responses", &rs) ||
	    !json_object_is_type(rs, json_type_array) ||
	    json_object_array_length(rs) < 2)
		return -EPROTO;
	r = json_object_array_get_idx(rs, json_object_array_length(rs) - 1);
	if (!json_object_object_get_ex(r, "response_range", &r) ||
	    !json_object_object_get_ex(r, "kvs", &kvs) ||
	    !json_object_is_type(kvs, json_type_array) ||
	    json_object_array_length(kvs) != 1)
		return -EPROTO;
	kv = json_object_array_get_idx(kvs, 0);
	if (!json_object_object_get_ex(kv, "value", &v) ||
	    !json_object_is_type(v, json_type_string) ||
	    wlk__etcd_unb64(json_object_get_string(v), &s, &n))
		return -EPROTO;
	x = strtoul(s, &end, 10);
	if (n && n <= MARKER_DIGITS && !*end && x &&
	    x <= WLK_LIMIT_MAX_NAME_LEN) {
		*out = (uint32_t)x;
		rc = 0;
	}
	free(s);
	return rc;
}

/*
 * wlk__etcd_bucket_join() - put @m's presence key (on its lease), and the
 * bucket's marker with @max_name_len if there is none; the bucket's
 * max_name_len into *@out. 0, or as wlk__etcd_call(), -EPROTO.
 */
int wlk__etcd_bucket_join(struct wlk__etcd_manager *m, uint32_t max_name_len,
			  uint32_t *out)
{
	uint64_t lease = wlk__etcd_lease(m);
	size_t ml = 0, pl = 0;
	char *mk = key_of(m->prefix, m->prefix_len, MARKER_TAIL, 0, 0, &ml);
	char *pk = key_of(m->prefix, m->prefix_len, PRESENCE_TAIL, lease,
			  m->no, &pl);
	char val[MARKER_DIGITS + 1];
	struct json_object *t = json_object_new_object(), *rep;
	int rc = -ENOMEM;

	snprintf(val, sizeof(val), "%u", max_name_len);
	if (!mk || !pk || !t)
		goto out;
	json_object_object_add(t, "compare",
			       arr(wlk__etcd_cmp(mk, ml, false, "CREATE",
						 "EQUAL", 0),
				   NULL, NULL));
	json_object_object_add(t, "success",
			       arr(op("request_put", mk, ml, val, 0),
				   op("request_put", pk, pl, m->base.client_id,
				      lease),
				   op("request_range", mk, ml, NULL, 0)));
	json_object_object_add(t, "failure",
			       arr(op("request_put", pk, pl, m->base.client_id,
				      lease),
				   op("request_range", mk, ml, NULL, 0), NULL));
	rc = wlk__etcd_call(&m->conn, "/v3/kv/txn", t, &rep);
	if (!rc) {
		rc = out ? marker_value(rep, out) : 0;
		json_object_put(rep);
	}
out:
	json_object_put(t);
	free(mk);
	free(pk);
	return rc;
}

/*
 * wlk__etcd_bucket_remove() - delete the marker of @m's bucket (only
 * m->conn and m->prefix set) unless a manager is present: 0, -EBUSY,
 * -ENOENT (no marker), or as wlk__etcd_call().
 */
int wlk__etcd_bucket_remove(struct wlk__etcd_manager *m)
{
	size_t ml = 0, pl = 0;
	char *mk = key_of(m->prefix, m->prefix_len, MARKER_TAIL, 0, 0, &ml);
	char *pk = key_of(m->prefix, m->prefix_len, PRESENCE_TAIL, 0, 0, &pl);
	struct json_object *t = json_object_new_object(), *rep, *rs, *d;
	int64_t deleted = 0;
	bool ok = false;
	int rc = -ENOMEM;

	if (!mk || !pk || !t)
		goto out;
	/* A range of presence keys: "X!" up to "X\"". */
	json_object_object_add(t, "compare",
			       arr(wlk__etcd_cmp(pk, pl, true, "CREATE",
						 "EQUAL", 0),
				   NULL, NULL));
	json_object_object_add(t, "success",
			       arr(op("request_delete_range", mk, ml, NULL, 0),
				   NULL, NULL));
	rc = wlk__etcd_call(&m->conn, "/v3/kv/txn", t, &rep);
	if (rc)
		goto out;
	d = NULL;
	if (json_object_object_get_ex(rep, "succeeded", &rs))
		ok = json_object_get_boolean(rs);
	if (ok && json_object_object_get_ex(rep, "responses", &rs) &&
	    json_object_is_type(rs, json_type_array) &&
	    json_object_array_length(rs) == 1)
		json_object_object_get_ex(json_object_array_get_idx(rs, 0),
					  "response_delete_range", &d);
	if (!ok)
		rc = -EBUSY;
	else if (!d || wlk__etcd_int64(d, "deleted", &deleted))
		rc = -EPROTO;
	else
		rc = deleted ? 0 : -ENOENT;
	json_object_put(rep);
out:
	json_object_put(t);
	free(mk);
	free(pk);
	return rc;
}

/* Deletions in one Txn at most: etcd's default --max-txn-ops is 128. */
#define LEAVE_OPS 100

/* Send the deletions in @ops (an array, taken) as one Txn. */
static int delete_txn(struct wlk__etcd_manager *m, struct json_object *ops)
{
	struct json_object *t = json_object_new_object();
	int rc;

	if (!t) {
		json_object_put(ops);
		return -ENOMEM;
	}
	json_object_object_add(t, "success", ops);
	rc = wlk__etcd_call(&m->conn, "/v3/kv/txn", t, NULL);
	json_object_put(t);
	return rc;
}

/*
 * wlk__etcd_bucket_leave() - @m closes while its agent's @lease lives on
 * (its other managers): its presence key on @lease and the keys of its
 * requests and locks go, a Txn for LEAVE_OPS of them (one, but for a
 * manager with many). 0, -ENOMEM, or as wlk__etcd_call(): a key left
 * behind goes with the lease.
 */
int wlk__etcd_bucket_leave(struct wlk__etcd_manager *m, uint64_t lease)
{
	size_t pl = 0;
	char *pk = key_of(m->prefix, m->prefix_len, PRESENCE_TAIL, lease,
			  m->no, &pl);
	struct json_object *ops = json_object_new_array();
	struct wlk__etcd_lock *l;
	int rc = 0, err;

	if (!pk || !ops) {
		free(pk);
		json_object_put(ops);
		return -ENOMEM;
	}
	json_object_array_add(ops, op("request_delete_range", pk, pl, NULL, 0));
	free(pk);
	pthread_mutex_lock(&m->lmu);
	cds_list_for_each_entry(l, &m->locks, link) {
		for (unsigned int i = 0; i < wlk__etcd_nkeys(l); i++) {
			size_t kl;
			const char *k = wlk__etcd_key(l, i, &kl);

			if (json_object_array_length(ops) == LEAVE_OPS) {
				/* The manager's mutex is not the segment's:
				 * a call under it only holds up the watch. */
				err = delete_txn(m, ops);
				rc = rc ? rc : err;
				ops = json_object_new_array();
				if (!ops) {
					pthread_mutex_unlock(&m->lmu);
					return -ENOMEM;
				}
			}
			json_object_array_add(ops, op("request_delete_range",
						      k, kl, NULL, 0));
		}
	}
	pthread_mutex_unlock(&m->lmu);
	err = delete_txn(m, ops);
	return rc ? rc : err;
}
