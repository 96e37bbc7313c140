/* SPDX-License-Identifier: MIT */
/*
 * watch.c - a bucket's watch stream, deletions only, one per process and
 * bucket in use, shared by the process's managers of the bucket and read
 * by their agent's thread (agent.c, registry.c). A deleted key that is
 * one of a manager's locks, not being released by it, marks that lock
 * gone; a deletion on a name a manager has a request on wakes its waiters
 * (gone.c). The stream resumes from the revision after the last event it
 * delivered when it breaks (a member killed or restarted: the next
 * member), or after the revision it was created at if it delivered none,
 * and starts at the present after a compaction. Once a restarted stream
 * is created, the locks of its managers are checked against one range
 * read (deletions in between): read after the creation, so that every
 * deletion is in the range or on the stream. Messages are untrusted:
 * bounded, parsed with checks, and one that is not etcd's ends the
 * stream (and a new one starts).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"
#include "libcurl.h"

/* Connecting the watch to a member (as http.c's calls). */
#define CONNECT_MS 500
/* Bytes of one watch message at most (json-c keeps the partial one). */
#define MESSAGE_MAX (16u << 20)
/* Nesting of a watch message: result.events[].kv is 4 deep. */
#define JSON_DEPTH 16

/* Every lock of @m put at or before @k's revision whose key @k (the
 * bucket) lacks is gone. */
static void resync(struct wlk__etcd_manager *m, struct wlk__etcd_kvs *k)
{
	struct wlk__etcd_lock *l;

	pthread_mutex_lock(&m->lmu);
	cds_list_for_each_entry(l, &m->locks, link) {
		int64_t put = uatomic_read(&l->put_rev);

		if (!l->releasing && put && put <= k->revision &&
		    !wlk__etcd_kvs_find(k, l->key, l->key_len))
			uatomic_set(&l->gone, 1);
	}
	pthread_mutex_unlock(&m->lmu);
}

/* Whether @m is a manager of @w's bucket. */
static bool on(const struct wlk__etcd_manager *m,
	       const struct wlk__etcd_watch *w)
{
	return m->w == w;
}

/*
 * wlk__etcd_watch_resync() - @w's stream is back after a break: the locks
 * of its managers are checked against one read of the bucket, and their
 * waiters woken. Under @w's agent's mu.
 */
void wlk__etcd_watch_resync(struct wlk__etcd_watch *w)
{
	struct wlk__etcd_kvs k = { 0 };
	struct wlk__etcd_manager *m;
	bool tried = false, read = false;

	cds_list_for_each_entry(m, &w->a->managers, peer) {
		if (!on(m, w))
			continue;
		/* A read that fails: the next restart tries again. */
		if (!tried) {
			tried = true;
			read = !wlk__etcd_range(m, w->prefix, w->prefix_len,
						&k);
		}
		if (read)
			resync(m, &k);
		wlk__etcd_wake(m);
	}
	wlk__etcd_kvs_free(&k);
	w->restarted = !read;
}

/* A deletion of @key in @w's bucket, at revision @rev: each manager of
 * the bucket told (gone.c); those it concerns are woken once the message
 * is read. */
static void deleted(struct wlk__etcd_watch *w, const char *key, size_t n,
		    int64_t rev)
{
	struct wlk__etcd_manager *m;

	cds_list_for_each_entry(m, &w->a->managers, peer)
		/* Only a deletion on a name we wait for can grant us. Its
		 * revision goes first: a woken waiter reads no older state
		 * (acquire.c, since()). */
		if (on(m, w) && wlk__etcd_mark_gone(m, key, n, rev)) {
			m->woken = true;
			if (rev > uatomic_read(&m->woke_rev))
				uatomic_set(&m->woke_rev, rev);
		}
}

/* One wake-up per message, not per deletion: each one costs a waiter a
 * read of its names. */
static void wake_woken(struct wlk__etcd_watch *w)
{
	struct wlk__etcd_manager *m;

	cds_list_for_each_entry(m, &w->a->managers, peer) {
		if (on(m, w) && m->woken) {
			m->woken = false;
			wlk__etcd_wake(m);
		}
	}
}

/*
 * The stream is in place. One that was given no revision to start from
 * delivers the deletions after the revision it was created at (etcd's
 * header): a stream that breaks before it delivered any resumes from
 * there, not from the present, which would skip those in between.
 */
static void on_created(struct wlk__etcd_watch *w, struct json_object *r)
{
	struct json_object *hd;
	int64_t v;

	if (!w->rev && json_object_object_get_ex(r, "header", &hd) &&
	    !wlk__etcd_int64(hd, "revision", &v) && v >= 0)
		w->rev = v + 1;
	w->live = true;
	if (uatomic_cmpxchg(&w->created, 0, 1) == 0)
		wlk__futex_wake(&w->created, INT32_MAX);
}

/* One message of the stream. */
static void on_message(struct wlk__etcd_watch *w, struct json_object *msg)
{
	struct json_object *r, *ev, *x;
	int64_t v;

	if (!json_object_object_get_ex(msg, "result", &r) ||
	    !json_object_is_type(r, json_type_object)) {
		w->failed = true; /* {"error": ...}: the member gave up */
		return;
	}
	if (json_object_object_get_ex(r, "created", &x) &&
	    json_object_get_boolean(x))
		on_created(w, r);
	if (json_object_object_get_ex(r, "canceled", &x) &&
	    json_object_get_boolean(x)) {
		w->failed = true;
		if (!wlk__etcd_int64(r, "compact_revision", &v) && v > 0)
			w->compacted = true;
		return;
	}
	if (!json_object_object_get_ex(r, "events", &ev))
		return;
	if (!json_object_is_type(ev, json_type_array)) {
		w->failed = true;
		return;
	}
	for (size_t i = 0; i < json_object_array_length(ev); i++) {
		struct json_object *e = json_object_array_get_idx(ev, i), *kv,
				   *key;
		char *k;
		size_t n;

		if (!json_object_is_type(e, json_type_object) ||
		    !json_object_object_get_ex(e, "kv", &kv) ||
		    !json_object_object_get_ex(kv, "key", &key) ||
		    !json_object_is_type(key, json_type_string) ||
		    wlk__etcd_int64(kv, "mod_revision", &v) ||
		    wlk__etcd_unb64(json_object_get_string(key), &k, &n)) {
			w->failed = true;
			break;
		}
		deleted(w, k, n, v);
		free(k);
		if (v >= w->rev)
			w->rev = v + 1;
	}
	wake_woken(w);
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
	struct wlk__etcd_watch *w = arg;
	size_t n = size * nmemb, off = 0;

	while (off < n && !w->failed) {
		struct json_object *o;
		enum json_tokener_error err;
		size_t len = n - off;

		o = json_tokener_parse_ex(w->tok, data + off, (int)len);
		err = json_tokener_get_error(w->tok);
		if (o) {
			off += json_tokener_get_parse_end(w->tok);
			w->pending = 0;
			if (json_object_is_type(o, json_type_object))
				on_message(w, o);
			else
				w->failed = true;
			json_object_put(o);
		} else if (err == json_tokener_continue) {
			w->pending += len;
			if (w->pending > MESSAGE_MAX)
				w->failed = true;
			break;
		} else {
			w->failed = true;
		}
	}
	return w->failed ? 0 : n;
}

void wlk__etcd_watch_end(void *multi, struct wlk__etcd_watch *w)
{
	if (w->h) {
		wlk__curl.multi_remove_handle(multi, w->h);
		wlk__curl.easy_cleanup(w->h);
	}
	if (w->tok)
		json_tokener_free(w->tok);
	wlk__curl.slist_free_all(w->hdr);
	w->hdr = NULL;
	free(w->body);
	w->h = NULL;
	w->tok = NULL;
	w->body = NULL;
}

/* @w, which no manager uses any more: its stream ended, off its agent's
 * list, and freed. Under its agent's mu. */
void wlk__etcd_watch_free(void *multi, struct wlk__etcd_watch *w)
{
	wlk__etcd_watch_end(multi, w);
	cds_list_del(&w->link);
	free(w->prefix);
	free(w);
}

int wlk__etcd_watch_begin(void *multi, struct wlk__etcd_watch *w)
{
	struct wlk__etcd_agent *a = w->a;
	struct json_object *req = json_object_new_object();
	struct json_object *c = json_object_new_object();
	struct json_object *f = json_object_new_array();
	char *end = wlk__etcd_range_end(w->prefix, w->prefix_len);
	char url[sizeof("http://") + WLK_ETCD_HOST_MAX + 16];
	int rc = -ENOMEM;

	w->failed = w->compacted = w->live = false;
	w->pending = 0;
	if (!req || !c || !f || !end)
		goto out;
	json_object_object_add(c, "key",
			       wlk__etcd_jkey(w->prefix, w->prefix_len));
	json_object_object_add(c, "range_end",
			       wlk__etcd_jkey(end, w->prefix_len));
	if (w->rev)
		json_object_object_add(c, "start_revision",
				       wlk__etcd_jstr_int(w->rev));
	json_object_array_add(f, json_object_new_string("NOPUT"));
	json_object_object_add(c, "filters", f);
	f = NULL;
	json_object_object_add(req, "create_request", c);
	c = NULL;
	w->body = strdup(json_object_to_json_string_ext(
		req, JSON_C_TO_STRING_PLAIN));
	w->tok = json_tokener_new_ex(JSON_DEPTH);
	w->h = wlk__etcd_handle_new();
	if (!w->body || !w->tok || !w->h)
		goto out;
	w->member = uatomic_read(&a->conn.cur) % a->conn.n_url;
	snprintf(url, sizeof(url), "%s/v3/watch", a->conn.url[w->member]);
	wlk__curl.easy_setopt(w->h, CURLOPT_URL, url);
	wlk__curl.easy_setopt(w->h, CURLOPT_POSTFIELDS, w->body);
	w->hdr = wlk__curl.slist_append(NULL, "Content-Type: application/json");
	if (!w->hdr) {
		rc = -ENOMEM;
		goto out;
	}
	wlk__curl.easy_setopt(w->h, CURLOPT_HTTPHEADER, w->hdr);
	wlk__curl.easy_setopt(w->h, CURLOPT_WRITEFUNCTION, on_data);
	wlk__curl.easy_setopt(w->h, CURLOPT_WRITEDATA, w);
	wlk__curl.easy_setopt(w->h, CURLOPT_NOSIGNAL, 1L);
	wlk__curl.easy_setopt(w->h, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_MS);
	wlk__curl.easy_setopt(w->h, CURLOPT_PROTOCOLS_STR, "http");
	wlk__curl.easy_setopt(w->h, CURLOPT_TCP_KEEPALIVE, 1L);
	rc = wlk__curl.multi_add_handle(multi, w->h) == CURLM_OK ? 0 : -ENOMEM;
out:
	json_object_put(req);
	json_object_put(c);
	json_object_put(f);
	free(end);
	if (rc)
		wlk__etcd_watch_end(multi, w);
	return rc;
}
