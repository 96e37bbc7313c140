/* SPDX-License-Identifier: MIT */
/*
 * agent.c - a manager's agent thread: it keeps the manager's lease alive
 * and reads its watch stream (watch.c).
 *
 * Keepalive every TTL/3. A lease the cluster no longer knows (expired
 * during a partition or a pause), or no acknowledgement for a whole TTL
 * (the cluster may have expired it meanwhile), is a lost lease: every
 * lock on it is marked gone (its holder sees it stolen), and a new lease
 * is granted for the requests that follow.
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
		wlk__etcd_wake(m);
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
	uint64_t period = (uint64_t)m->ttl * 1000000000u / 3;
	uint64_t now = wlk__now_ns(), next_ka = now + period, acked = now;
	CURLM *multi = m->wake;
	struct wlk__etcd_watch *w = &m->w;
	bool restarted = false;
	uint64_t retry_at = 0;

	memset(w, 0, sizeof(*w));
	w->m = m;

	while (!uatomic_read(&m->stop)) {
		int running = 0, left;
		CURLMsg *msg;

		now = wlk__now_ns();
		if (!w->h && now >= retry_at) {
			if (wlk__etcd_watch_begin(multi, w))
				retry_at = now + RETRY_MS * 1000000u;
			else if (restarted) {
				wlk__etcd_resync(m);
				wlk__etcd_wake(m);
			}
		}
		curl_multi_perform(multi, &running);
		while ((msg = curl_multi_info_read(multi, &left))) {
			if (msg->msg != CURLMSG_DONE || msg->easy_handle != w->h)
				continue;
			/* The stream ended: resume elsewhere, or from the
			 * present after a compaction. */
			if (w->compacted)
				m->watch_rev = 0;
			uatomic_set(&m->conn.cur,
				    (w->member + 1) % m->conn.n_url);
			wlk__etcd_watch_end(multi, w);
			restarted = true;
			retry_at = wlk__now_ns() + RETRY_MS * 1000000u;
		}
		if (w->h && w->failed) {
			wlk__etcd_watch_end(multi, w);
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
			if (w->h && uatomic_read(&m->conn.cur) != w->member) {
				wlk__etcd_watch_end(multi, w);
				restarted = true;
			}
		}
		/* Woken for the next keepalive on time: the lease's TTL
		 * left is then never below 2/3 of it while the process
		 * lives, and a dead process's lease ends within its TTL of
		 * the last keepalive, which was at most TTL/3 before. */
		now = wlk__now_ns();
		curl_multi_poll(multi, NULL, 0,
				next_ka <= now ? 0 :
				next_ka - now >= POLL_MS * 1000000ull ?
				POLL_MS : (int)((next_ka - now) / 1000000u) + 1,
				NULL);
	}
	wlk__etcd_watch_end(multi, w);
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
