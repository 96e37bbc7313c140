/* SPDX-License-Identifier: MIT */
/*
 * deleter.c - who deleted a lock's key: its release, or a stealer (or the
 * lease's end)? A release whose delete finds nothing asks it here.
 *
 * A delete may be sent twice (http.c tries another member when the first
 * gave no reply, and the first may have applied): the second then finds
 * nothing, exactly as after a steal. etcd's history tells them apart:
 *
 *  - the revision D at which the key was deleted is the first event of a
 *    watch on the key from its creation (one short stream);
 *  - a steal is one Txn that deletes the holders and puts the stealer's
 *    entries, so an entry of the bucket created at D is a steal (one
 *    range at revision D; the bucket's, since a steal of another name of
 *    a scope deletes all of its keys, scope.c);
 *  - a scope's keys go in one Txn: the first key's history is the
 *    scope's;
 *  - the lease's end deletes the key too, and puts nothing: a lease that
 *    is gone is counted as a loss.
 *
 * Anything this cannot read (history compacted, no member answered, a
 * reply that is not etcd's) counts as a loss, as before it existed: a
 * release may say WLK_ESTOLEN of a lock it did let go, never the reverse.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"
#include "libcurl.h"

/* One attempt at the watch on one member (history is sent at once). */
#define CONNECT_MS 500
#define ATTEMPT_MS 2000
/* Bytes of one watch message at most, and its nesting (as watch.c). */
#define MESSAGE_MAX (1u << 20)
#define JSON_DEPTH 16

/* The watch's state while curl feeds it. */
struct hist {
	json_tokener *tok;
	size_t pending;
	int64_t deleted_at; /* D, once found */
	bool done;          /* found, or the stream can tell us nothing */
};

static void on_message(struct hist *h, struct json_object *msg)
{
	struct json_object *r, *ev, *e, *kv, *x;
	int64_t v;

	if (!json_object_object_get_ex(msg, "result", &r) ||
	    !json_object_is_type(r, json_type_object) ||
	    (json_object_object_get_ex(r, "canceled", &x) &&
	     json_object_get_boolean(x))) {
		h->done = true; /* an error, or compacted: unknown */
		return;
	}
	if (!json_object_object_get_ex(r, "events", &ev) ||
	    !json_object_is_type(ev, json_type_array) ||
	    json_object_array_length(ev) == 0)
		return; /* "created", or a progress notice */
	e = json_object_array_get_idx(ev, 0);
	/* The watch is on the key alone, deletions only: its first event
	 * is the one. */
	if (json_object_is_type(e, json_type_object) &&
	    json_object_object_get_ex(e, "kv", &kv) &&
	    !wlk__etcd_int64(kv, "mod_revision", &v) && v > 0)
		h->deleted_at = v;
	h->done = true;
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
	struct hist *h = arg;
	size_t n = size * nmemb, off = 0;

	while (off < n && !h->done) {
		struct json_object *o;
		size_t len = n - off;

		o = json_tokener_parse_ex(h->tok, data + off, (int)len);
		if (o) {
			off += json_tokener_get_parse_end(h->tok);
			h->pending = 0;
			if (json_object_is_type(o, json_type_object))
				on_message(h, o);
			else
				h->done = true;
			json_object_put(o);
		} else if (json_tokener_get_error(h->tok) ==
			   json_tokener_continue) {
			h->pending += len;
			h->done = h->pending > MESSAGE_MAX;
			break;
		} else {
			h->done = true;
		}
	}
	return h->done ? 0 : n; /* 0 ends the transfer */
}

/* The revision at which @l's key was deleted: 0 with *@rev, or an error
 * (-ENODATA: history that does not say, as after a compaction). */
static int deleted_at(struct wlk__etcd_manager *m, struct wlk__etcd_lock *l,
		      int64_t *rev)
{
	struct json_object *req = json_object_new_object();
	struct json_object *c = json_object_new_object();
	struct json_object *f = json_object_new_array();
	char url[sizeof("http://") + WLK_ETCD_HOST_MAX + 16];
	struct hist h = { .tok = json_tokener_new_ex(JSON_DEPTH) };
	unsigned int first = uatomic_read(&m->conn.cur);
	const char *body;
	CURL *e = wlk__etcd_handle_new();
	int rc = -ENOMEM;

	if (!req || !c || !f || !h.tok || !e)
		goto out;
	json_object_object_add(c, "key", wlk__etcd_jkey(l->key, l->key_len));
	json_object_object_add(c, "start_revision",
			       wlk__etcd_jstr_int(uatomic_read(&l->put_rev)));
	json_object_array_add(f, json_object_new_string("NOPUT"));
	json_object_object_add(c, "filters", f);
	f = NULL;
	json_object_object_add(req, "create_request", c);
	c = NULL;
	body = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	if (!body)
		goto out;
	rc = -EHOSTUNREACH;
	for (unsigned int i = 0; i < m->conn.n_url && !h.done; i++) {
		snprintf(url, sizeof(url), "%s/v3/watch",
			 m->conn.url[(first + i) % m->conn.n_url]);
		wlk__etcd_post_setup(e, url, body, on_data, &h,
				     (long)CONNECT_MS, (long)ATTEMPT_MS);
		json_tokener_reset(h.tok);
		h.pending = 0;
		(void)wlk__curl.easy_perform(e); /* ended by on_data, or failed */
	}
	if (h.done)
		rc = h.deleted_at ? 0 : -ENODATA;
	if (!rc)
		*rev = h.deleted_at;
out:
	if (e)
		wlk__curl.easy_cleanup(e);
	if (h.tok)
		json_tokener_free(h.tok);
	json_object_put(req);
	json_object_put(c);
	json_object_put(f);
	return rc;
}

/* How many entries of the bucket were created at revision @rev: 0 with
 * *@n, or an error (a compacted @rev is -EPROTO). The bucket's, not the
 * name's: a steal of a scope's other name deletes this key too. */
static int created_at(struct wlk__etcd_manager *m, int64_t rev, int64_t *n)
{
	struct json_object *req = json_object_new_object(), *rep;
	char *end = wlk__etcd_range_end(m->prefix, m->prefix_len);
	int rc = -ENOMEM;

	if (req && end) {
		json_object_object_add(req, "key",
				       wlk__etcd_jkey(m->prefix,
						      m->prefix_len));
		json_object_object_add(req, "range_end",
				       wlk__etcd_jkey(end, m->prefix_len));
		json_object_object_add(req, "revision",
				       wlk__etcd_jstr_int(rev));
		json_object_object_add(req, "min_create_revision",
				       wlk__etcd_jstr_int(rev));
		json_object_object_add(req, "max_create_revision",
				       wlk__etcd_jstr_int(rev));
		json_object_object_add(req, "count_only",
				       json_object_new_boolean(true));
		rc = wlk__etcd_call(&m->conn, "/v3/kv/range", req, &rep);
		if (!rc) {
			rc = wlk__etcd_int64(rep, "count", n);
			json_object_put(rep);
		}
	}
	json_object_put(req);
	free(end);
	return rc;
}

/* Whether @lease is still alive: 0 with *@alive, or an error. */
static int lease_alive(struct wlk__etcd_manager *m, uint64_t lease,
		       bool *alive)
{
	struct json_object *req = json_object_new_object(), *rep, *ttl;
	int rc = -ENOMEM;

	if (!req)
		return rc;
	json_object_object_add(req, "ID", wlk__etcd_jstr_int((int64_t)lease));
	rc = wlk__etcd_call(&m->conn, "/v3/lease/timetolive", req, &rep);
	json_object_put(req);
	if (rc)
		return rc;
	/* TTL is -1 for a lease that expired or was revoked. */
	if (!json_object_object_get_ex(rep, "TTL", &ttl))
		rc = -EPROTO;
	else
		*alive = json_object_get_int64(ttl) > 0;
	json_object_put(rep);
	return rc;
}

/*
 * wlk__etcd_deleted_by_us() - whether @l's key, found absent by a
 * release's delete, was deleted by an earlier try of that delete (true),
 * or by a stealer or the lease's end, or it cannot be told (false).
 */
bool wlk__etcd_deleted_by_us(struct wlk__etcd_manager *m,
			     struct wlk__etcd_lock *l)
{
	int64_t d = 0, n = 0;
	bool alive = false;

	if (!uatomic_read(&l->put_rev) || l->key_len < KEY_TAIL)
		return false;
	if (deleted_at(m, l, &d) || created_at(m, d, &n) || n != 0)
		return false;
	return !lease_alive(m, l->lease, &alive) && alive;
}
