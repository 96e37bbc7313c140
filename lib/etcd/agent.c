/* SPDX-License-Identifier: MIT */
/*
 * agent.c - a manager's agent thread: it keeps the manager's lease alive
 * and watches the deletions in its bucket.
 *
 *  - Keepalive every TTL/3. A lease the cluster no longer knows (expired
 *    during a partition or a pause), or no acknowledgement for a whole TTL
 *    (the cluster may have expired it meanwhile), is a lost lease: every
 *    lock of the manager is marked gone (its holder sees it stolen), and
 *    a new lease is granted for the requests that follow.
 *  - One watch stream per manager on its bucket's prefix, deletions only.
 *    A deleted key that is one of the manager's locks, not being released
 *    by us, marks that lock gone; every deletion bumps m->events, on which
 *    the manager's waiters sleep, so that they read their name again. The
 *    stream resumes from the revision after the last event it delivered
 *    when it breaks (a member killed or restarted: the next member), and
 *    starts at the present after a compaction; after every restart the
 *    locks are checked against one range (deletions in between), and the
 *    waiters woken.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "etcd.h"

/* Longest wait in the agent's poll: how soon it sees a stop without a
 * wakeup, and checks its keepalive clock. */
#define POLL_MS 200
/* A watch that could not be set up is tried again after this long. */
#define RETRY_MS 100
/* Bytes of one watch message at most (json-c keeps the partial one). */
#define MESSAGE_MAX (16u << 20)
/* Nesting of a watch message: result.events[].kv is 4 deep. */
#define JSON_DEPTH 16

/* The process's open managers, so that a steal marks the locks it took
 * from managers of this very process stolen before it returns, as the
 * shared-memory engine does (other processes learn it from their watch). */
static pthread_mutex_t all_mu = PTHREAD_MUTEX_INITIALIZER;
static CDS_LIST_HEAD(open_managers); /* struct wlk__etcd_manager */

struct watch {
	struct wlk__etcd_manager *m;
	CURL *h;
	json_tokener *tok;
	char *body;
	size_t pending; /* bytes of the message being parsed */
	unsigned int member;
	bool failed; /* a message we could not read: restart */
	bool compacted;
};

int wlk__etcd_lease_grant(struct wlk__etcd_conn *c, unsigned int ttl,
			  uint64_t *id)
{
	struct json_object *req = json_object_new_object(), *rep;
	int64_t v = 0, t = 0;
	int rc;

	if (!req)
		return -ENOMEM;
	json_object_object_add(req, "TTL", wlk__etcd_jstr_int(ttl));
	rc = wlk__etcd_call(c, "/v3/lease/grant", req, &rep);
	json_object_put(req);
	if (rc)
		return rc;
	rc = wlk__etcd_int64(rep, "ID", &v);
	if (!rc)
		rc = wlk__etcd_int64(rep, "TTL", &t);
	json_object_put(rep);
	if (!rc && (v <= 0 || t <= 0))
		rc = -EPROTO;
	if (!rc)
		*id = (uint64_t)v;
	return rc;
}

/* Mark gone every lock whose key is @key (or every lock, for NULL),
 * except those we are releasing. */
/* The length of @key's name prefix (up to its last '/'), or 0. */
static size_t name_part(const char *key, size_t len)
{
	while (len && key[len - 1] != '/')
		len--;
	return len;
}

/*
 * wlk__etcd_mark_gone() - mark gone every lock whose key is @key (or
 * every lock, for NULL), except those we are releasing. Return: whether
 * a request or lock of @m is on @key's name (its waiters should look).
 */
bool wlk__etcd_mark_gone(struct wlk__etcd_manager *m, const char *key,
			 size_t len)
{
	size_t np = key ? name_part(key, len) : 0;
	struct wlk__etcd_lock *l;
	bool any = false, near = false;

	pthread_mutex_lock(&m->lmu);
	cds_list_for_each_entry(l, &m->locks, link) {
		near |= key && l->key_len > np && !memcmp(l->key, key, np) &&
			name_part(l->key, l->key_len) == np;
		if (l->releasing)
			continue;
		if (!key || (l->key_len == len && !memcmp(l->key, key, len))) {
			uatomic_set(&l->gone, 1);
			any = true;
		}
	}
	pthread_mutex_unlock(&m->lmu);
	if (any) /* a watched lock's stolen callback */
		wlk__etcd_ring(m);
	return near || any;
}

/* Blocked requests read their names again; async ones at the next
 * dispatch, which the ring causes. */
static void wake_waiters(struct wlk__etcd_manager *m)
{
	uatomic_inc(&m->events);
	wlk__futex_wake(&m->events, INT32_MAX);
	wlk__etcd_ring(m);
}

/* Every lock put at or before @rev whose key the bucket lacks is gone. */
static void resync(struct wlk__etcd_manager *m)
{
	struct wlk__etcd_kvs k = { 0 };
	struct wlk__etcd_lock *l;

	if (wlk__etcd_range(m, m->prefix, m->prefix_len, &k))
		return; /* the next restart tries again */
	pthread_mutex_lock(&m->lmu);
	cds_list_for_each_entry(l, &m->locks, link) {
		int64_t put = uatomic_read(&l->put_rev);

		if (!l->releasing && put && put <= k.revision &&
		    !wlk__etcd_kvs_find(&k, l->key, l->key_len))
			uatomic_set(&l->gone, 1);
	}
	pthread_mutex_unlock(&m->lmu);
	wlk__etcd_kvs_free(&k);
}

/* One message of the stream. */
static void on_message(struct watch *w, struct json_object *msg)
{
	struct wlk__etcd_manager *m = w->m;
	struct json_object *r, *ev, *x;
	bool near = false;
	int64_t v;

	if (!json_object_object_get_ex(msg, "result", &r) ||
	    !json_object_is_type(r, json_type_object)) {
		w->failed = true; /* {"error": ...}: the member gave up */
		return;
	}
	if (json_object_object_get_ex(r, "created", &x) &&
	    json_object_get_boolean(x) &&
	    uatomic_cmpxchg(&m->watching, 0, 1) == 0)
		wlk__futex_wake(&m->watching, INT32_MAX);
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
			return;
		}
		/* Only a deletion on a name we wait for can grant us. */
		near |= wlk__etcd_mark_gone(m, k, n);
		free(k);
		if (v >= m->watch_rev)
			m->watch_rev = v + 1;
	}
	if (near)
		wake_waiters(m);
}

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
	struct watch *w = arg;
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

static void watch_end(CURLM *multi, struct watch *w)
{
	if (w->h) {
		curl_multi_remove_handle(multi, w->h);
		curl_easy_cleanup(w->h);
	}
	if (w->tok)
		json_tokener_free(w->tok);
	free(w->body);
	w->h = NULL;
	w->tok = NULL;
	w->body = NULL;
}

static int watch_begin(CURLM *multi, struct watch *w,
		       struct curl_slist *hdr)
{
	struct wlk__etcd_manager *m = w->m;
	struct json_object *req = json_object_new_object();
	struct json_object *c = json_object_new_object();
	struct json_object *f = json_object_new_array();
	char *end = wlk__etcd_range_end(m->prefix, m->prefix_len);
	char url[sizeof("http://") + WLK_ETCD_HOST_MAX + 16];
	int rc = -ENOMEM;

	w->failed = w->compacted = false;
	w->pending = 0;
	if (!req || !c || !f || !end)
		goto out;
	json_object_object_add(c, "key",
			       wlk__etcd_jkey(m->prefix, m->prefix_len));
	json_object_object_add(c, "range_end",
			       wlk__etcd_jkey(end, m->prefix_len));
	if (m->watch_rev)
		json_object_object_add(c, "start_revision",
				       wlk__etcd_jstr_int(m->watch_rev));
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
	w->member = uatomic_read(&m->conn.cur) % m->conn.n_url;
	snprintf(url, sizeof(url), "%s/v3/watch", m->conn.url[w->member]);
	curl_easy_setopt(w->h, CURLOPT_URL, url);
	curl_easy_setopt(w->h, CURLOPT_POSTFIELDS, w->body);
	curl_easy_setopt(w->h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(w->h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(w->h, CURLOPT_WRITEDATA, w);
	curl_easy_setopt(w->h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(w->h, CURLOPT_CONNECTTIMEOUT_MS, 500L);
	curl_easy_setopt(w->h, CURLOPT_PROTOCOLS_STR, "http");
	curl_easy_setopt(w->h, CURLOPT_TCP_KEEPALIVE, 1L);
	rc = curl_multi_add_handle(multi, w->h) == CURLM_OK ? 0 : -ENOMEM;
out:
	json_object_put(req);
	json_object_put(c);
	json_object_put(f);
	free(end);
	if (rc)
		watch_end(multi, w);
	return rc;
}

/* 0: renewed; 1: the lease is gone; <0: no answer. */
static int keepalive(struct wlk__etcd_manager *m, uint64_t lease)
{
	struct json_object *req = json_object_new_object(), *rep, *r;
	int64_t ttl = 0;
	int rc;

	if (!req)
		return -ENOMEM;
	json_object_object_add(req, "ID", wlk__etcd_jstr_int((int64_t)lease));
	rc = wlk__etcd_call(&m->conn, "/v3/lease/keepalive", req, &rep);
	json_object_put(req);
	if (rc == -ENOENT)
		return 1;
	if (rc)
		return rc;
	if (!json_object_object_get_ex(rep, "result", &r) ||
	    wlk__etcd_int64(r, "TTL", &ttl))
		rc = -EPROTO;
	json_object_put(rep);
	return rc ? rc : ttl > 0 ? 0 : 1;
}

/* Whether @l's key is on lease @id: the first 16 hex digits of its
 * tail (etcd.h). */
static bool on_lease(const struct wlk__etcd_lock *l, uint64_t id)
{
	char hex[LEASE_DIGITS + 1];

	snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)id);
	return l->key_len > KEY_TAIL &&
	       !memcmp(l->key + l->key_len - KEY_TAIL + 3, hex, LEASE_DIGITS);
}

/*
 * wlk__etcd_lease_renew() - lease @old is lost (the cluster said so, or
 * did not answer for a TTL): so are the locks on it, which are marked
 * gone; a new lease for what follows, unless another thread got one
 * already. 0, or as wlk__etcd_lease_grant() (the next call tries again).
 */
int wlk__etcd_lease_renew(struct wlk__etcd_manager *m, uint64_t old)
{
	struct wlk__etcd_lock *l;
	uint64_t id;
	int rc = 0;

	pthread_mutex_lock(&m->lease_mu);
	if (uatomic_read(&m->lease) == old) {
		pthread_mutex_lock(&m->lmu);
		cds_list_for_each_entry(l, &m->locks, link)
			if (!l->releasing && on_lease(l, old))
				uatomic_set(&l->gone, 1);
		pthread_mutex_unlock(&m->lmu);
		wake_waiters(m);
		rc = wlk__etcd_lease_grant(&m->conn, m->ttl, &id);
		if (!rc) {
			uatomic_set(&m->lease, id);
			rc = wlk__etcd_bucket_join(m, m->base.max_name_len,
						   NULL);
		}
	}
	pthread_mutex_unlock(&m->lease_mu);
	return rc;
}

static void *agent_main(void *arg)
{
	struct wlk__etcd_manager *m = arg;
	struct curl_slist hdr = { .data = (char *)"Content-Type: "
						   "application/json" };
	uint64_t period = (uint64_t)m->ttl * 1000000000u / 3;
	uint64_t now = wlk__now_ns(), next_ka = now + period, acked = now;
	CURLM *multi = m->wake;
	struct watch w = { .m = m };
	bool restarted = false;
	uint64_t retry_at = 0;

	while (!uatomic_read(&m->stop)) {
		int running = 0, left;
		CURLMsg *msg;

		now = wlk__now_ns();
		if (!w.h && now >= retry_at) {
			if (watch_begin(multi, &w, &hdr))
				retry_at = now + RETRY_MS * 1000000u;
			else if (restarted) {
				resync(m);
				wake_waiters(m);
			}
		}
		curl_multi_perform(multi, &running);
		while ((msg = curl_multi_info_read(multi, &left))) {
			if (msg->msg != CURLMSG_DONE || msg->easy_handle != w.h)
				continue;
			/* The stream ended: resume elsewhere, or from the
			 * present after a compaction. */
			if (w.compacted)
				m->watch_rev = 0;
			uatomic_set(&m->conn.cur,
				    (w.member + 1) % m->conn.n_url);
			watch_end(multi, &w);
			restarted = true;
			retry_at = wlk__now_ns() + RETRY_MS * 1000000u;
		}
		if (w.h && w.failed) {
			watch_end(multi, &w);
			restarted = true;
		}
		now = wlk__now_ns();
		if (now >= next_ka) {
			uint64_t lease = uatomic_read(&m->lease);
			int rc = keepalive(m, lease);

			if (rc == 0)
				acked = now;
			if (rc == 1 || (rc < 0 && wlk__now_ns() - acked >=
							  period * 3)) {
				(void)wlk__etcd_lease_renew(m, lease);
				acked = wlk__now_ns();
			}
			next_ka = now + period;
			/* The keepalive went elsewhere: so does the watch,
			 * from the member that answers. */
			if (w.h && uatomic_read(&m->conn.cur) != w.member) {
				watch_end(multi, &w);
				restarted = true;
			}
		}
		curl_multi_poll(multi, NULL, 0, POLL_MS, NULL);
	}
	watch_end(multi, &w);
	return NULL;
}

/*
 * wlk__etcd_agent_start() - start @m's agent (its lease granted) and wait
 * until its watch is in place, so that no deletion after the open is
 * missed. Return: 0, -EHOSTUNREACH (no watch within the call timeout),
 * -ENOMEM, -EAGAIN (no thread).
 */
int wlk__etcd_agent_start(struct wlk__etcd_manager *m)
{
	uint64_t deadline = wlk__now_ns() + m->conn.timeout_ms * 1000000u;
	sigset_t all, old;
	int rc;

	m->wake = curl_multi_init();
	if (!m->wake)
		return -ENOMEM;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&m->agent, NULL, agent_main, m);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		curl_multi_cleanup(m->wake);
		m->wake = NULL;
		return wlk__errno(rc);
	}
	m->agent_on = true;
	while (!uatomic_read(&m->watching)) {
		struct wlk__waitv v = { &m->watching, 0 };

		if (wlk__now_ns() >= deadline) {
			wlk__etcd_agent_stop(m);
			return -EHOSTUNREACH;
		}
		(void)wlk__futex_wait(&v, 1, deadline);
	}
	return 0;
}

void wlk__etcd_agent_stop(struct wlk__etcd_manager *m)
{
	if (!m->agent_on)
		return;
	uatomic_set(&m->stop, 1);
	curl_multi_wakeup(m->wake);
	pthread_join(m->agent, NULL);
	curl_multi_cleanup(m->wake);
	m->wake = NULL;
	m->agent_on = false;
}

void wlk__etcd_local_add(struct wlk__etcd_manager *m, bool on)
{
	pthread_mutex_lock(&all_mu);
	if (on)
		cds_list_add(&m->all, &open_managers);
	else
		cds_list_del(&m->all);
	pthread_mutex_unlock(&all_mu);
}

/* A steal deleted @key: the lock of a manager of this process is gone. */
void wlk__etcd_local_gone(const char *key, size_t len)
{
	struct wlk__etcd_manager *m;

	pthread_mutex_lock(&all_mu);
	cds_list_for_each_entry(m, &open_managers, all)
		wlk__etcd_mark_gone(m, key, len);
	pthread_mutex_unlock(&all_mu);
}
