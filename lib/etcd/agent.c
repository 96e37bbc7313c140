/* SPDX-License-Identifier: MIT */
/*
 * agent.c - an agent's thread (one per process and cluster, registry.c):
 * it keeps the agent's lease alive and reads the watch streams of the
 * buckets its managers use (watch.c), one per bucket.
 *
 * Keepalive every TTL/3. A lease the cluster no longer knows (expired
 * during a partition or a pause), or no acknowledgement for a whole TTL
 * (the cluster may have expired it meanwhile), is a lost lease: every
 * lock on it, of every manager of the agent, is marked gone (its holder
 * sees it stolen), and a new lease is granted for the requests that
 * follow. The last manager's close stops the thread and revokes the
 * lease.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"
#include "libcurl.h"

/* Longest wait in the agent's poll: how soon it sees a stop without a
 * wakeup, and checks its keepalive clock. */
#define POLL_MS 200
/* A watch that could not be set up is tried again after this long. */
#define RETRY_MS 100
#define RETRY_NS (RETRY_MS * UINT64_C(1000000))
/* A restarted stream's read of its locks that failed is tried again
 * after this long: a read of the whole bucket, which a reply too large
 * or not etcd's would fail every time. */
#define RESYNC_RETRY_MS 1000
#define RESYNC_RETRY_NS (RESYNC_RETRY_MS * UINT64_C(1000000))
/* The thread's name (/proc/PID/task/TID/comm, weblocks.h: ETCD ENGINE);
 * 15 bytes at most. */
#define THREAD_NAME "wlk-etcd"

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
static int keepalive(struct wlk__etcd_agent *a, uint64_t lease)
{
	struct json_object *req = json_object_new_object(), *rep, *r;
	int64_t ttl = 0;
	int rc;

	if (!req)
		return -ENOMEM;
	json_object_object_add(req, "ID", wlk__etcd_jstr_int((int64_t)lease));
	rc = wlk__etcd_call(&a->conn, "/v3/lease/keepalive", req, &rep);
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
 * wlk__etcd_lease_alive() - whether the cluster still has @lease (it is
 * renewed by the asking, as the agent thread would). Return: 0 alive,
 * 1 gone (expired, revoked), or as wlk__etcd_call().
 */
int wlk__etcd_lease_alive(struct wlk__etcd_agent *a, uint64_t lease)
{
	return keepalive(a, lease);
}

static int lease_revoke(struct wlk__etcd_agent *a)
{
	struct json_object *req = json_object_new_object();
	int rc;

	if (!req)
		return -ENOMEM;
	json_object_object_add(req, "ID", wlk__etcd_jstr_int(
						  (int64_t)uatomic_read(
							  &a->lease)));
	rc = wlk__etcd_call(&a->conn, "/v3/lease/revoke", req, NULL);
	json_object_put(req);
	return rc;
}

/*
 * wlk__etcd_lease_renew() - lease @old is lost (the cluster said so, or
 * did not answer for a TTL): so are the locks on it, of every manager of
 * @a, which are marked gone; a new lease for what follows, with each
 * manager's presence key put on it, unless another thread got one
 * already. 0, or as wlk__etcd_lease_grant() (the next call tries again).
 */
int wlk__etcd_lease_renew(struct wlk__etcd_agent *a, uint64_t old)
{
	struct wlk__etcd_manager *m;
	struct wlk__etcd_lock *l;
	uint64_t id;
	int rc = 0;

	pthread_mutex_lock(&a->lease_mu);
	if (a->dead) {
		rc = -ENOENT; /* its last manager closed */
		goto out;
	}
	if (uatomic_read(&a->lease) != old)
		goto out;
	pthread_mutex_lock(&a->mu);
	cds_list_for_each_entry(m, &a->managers, peer) {
		pthread_mutex_lock(&m->lmu);
		cds_list_for_each_entry(l, &m->locks, link)
			if (!l->releasing && on_lease(l, old))
				uatomic_set(&l->gone, 1);
		pthread_mutex_unlock(&m->lmu);
		wlk__etcd_wake(m);
	}
	pthread_mutex_unlock(&a->mu);
	rc = wlk__etcd_lease_grant(&a->conn, a->ttl, &id);
	if (rc)
		goto out;
	uatomic_set(&a->lease, id);
	wlk__etcd_guard_lease(a, id);
	pthread_mutex_lock(&a->mu);
	cds_list_for_each_entry(m, &a->managers, peer) {
		int err = wlk__etcd_bucket_join(m, m->base.max_name_len, NULL);

		if (!rc)
			rc = err;
	}
	pthread_mutex_unlock(&a->mu);
out:
	pthread_mutex_unlock(&a->lease_mu);
	return rc;
}

/* The streams of @a's watches, under a->mu: the unused ones ended and
 * freed, the others (re)started when due. */
static void tend_watches(struct wlk__etcd_agent *a, CURLM *multi)
{
	struct wlk__etcd_watch *w, *wt;
	uint64_t now = wlk__now_ns();

	cds_list_for_each_entry_safe(w, wt, &a->watches, link) {
		if (!w->users) {
			wlk__etcd_watch_free(multi, w);
			continue;
		}
		if (w->h || now < w->retry_at)
			continue;
		if (wlk__etcd_watch_begin(multi, w))
			w->retry_at = now + RETRY_NS;
	}
}

/* A restarted stream, once created, has its managers' locks checked:
 * deletions before its creation are not on it (watch.c). Under a->mu;
 * a read that fails is tried again after RESYNC_RETRY_NS. */
static void resync_watches(struct wlk__etcd_agent *a)
{
	struct wlk__etcd_watch *w;
	uint64_t now = wlk__now_ns();

	cds_list_for_each_entry(w, &a->watches, link) {
		if (!w->h || !w->live || !w->restarted || now < w->retry_at)
			continue;
		wlk__etcd_watch_resync(w);
		if (w->restarted)
			w->retry_at = now + RESYNC_RETRY_NS;
	}
}

/* What curl says of the streams, under a->mu: one that ended resumes
 * elsewhere, or from the present after a compaction; one that failed
 * (a message we could not read) starts anew. */
static void reap_watches(struct wlk__etcd_agent *a, CURLM *multi)
{
	struct wlk__etcd_watch *w;
	CURLMsg *msg;
	int left;

	while ((msg = wlk__curl.multi_info_read(multi, &left))) {
		if (msg->msg != CURLMSG_DONE)
			continue;
		cds_list_for_each_entry(w, &a->watches, link) {
			if (msg->easy_handle != w->h)
				continue;
			if (w->compacted)
				w->rev = 0;
			uatomic_set(&a->conn.cur,
				    (w->member + 1) % a->conn.n_url);
			wlk__etcd_watch_end(multi, w);
			w->restarted = true;
			w->retry_at = wlk__now_ns() + RETRY_NS;
			break;
		}
	}
	cds_list_for_each_entry(w, &a->watches, link) {
		if (w->h && w->failed) {
			wlk__etcd_watch_end(multi, w);
			w->restarted = true;
		}
	}
}

/* The keepalive went elsewhere: so do the streams, from the member that
 * answers. */
static void follow_member(struct wlk__etcd_agent *a, CURLM *multi)
{
	struct wlk__etcd_watch *w;

	pthread_mutex_lock(&a->mu);
	cds_list_for_each_entry(w, &a->watches, link) {
		if (w->h && uatomic_read(&a->conn.cur) != w->member) {
			wlk__etcd_watch_end(multi, w);
			w->restarted = true;
		}
	}
	pthread_mutex_unlock(&a->mu);
}

static void *agent_main(void *arg)
{
	struct wlk__etcd_agent *a = arg;
	uint64_t period = (uint64_t)a->ttl * 1000000000u / 3;
	uint64_t now = wlk__now_ns(), next_ka = now + period, acked = now;
	CURLM *multi = a->multi;
	struct wlk__etcd_watch *w;

	(void)pthread_setname_np(pthread_self(), THREAD_NAME);
	while (!uatomic_read(&a->stop)) {
		int running = 0;

		/* The streams' callbacks (watch.c) tell the managers of
		 * their bucket, which close and open do not change
		 * meanwhile. */
		pthread_mutex_lock(&a->mu);
		tend_watches(a, multi);
		wlk__curl.multi_perform(multi, &running);
		reap_watches(a, multi);
		resync_watches(a);
		pthread_mutex_unlock(&a->mu);
		now = wlk__now_ns();
		if (now >= next_ka) {
			uint64_t lease = uatomic_read(&a->lease);
			int rc = keepalive(a, lease);

			if (rc == 0)
				acked = now;
			if (rc == 1 || (rc < 0 && wlk__now_ns() - acked >=
							  period * 3)) {
				(void)wlk__etcd_lease_renew(a, lease);
				acked = wlk__now_ns();
			}
			next_ka = now + period;
			follow_member(a, multi);
			wlk__etcd_guard_tend(a);
		}
		/* Woken for the next keepalive on time: the lease's TTL
		 * left is then never below 2/3 of it while the process
		 * lives, and a dead process's lease ends within its TTL of
		 * the last keepalive, which was at most TTL/3 before. */
		now = wlk__now_ns();
		wlk__curl.multi_poll(multi, NULL, 0,
				next_ka <= now ? 0 :
				next_ka - now >= POLL_MS * 1000000ull ?
				POLL_MS : (int)((next_ka - now) / 1000000u) + 1,
				NULL);
	}
	pthread_mutex_lock(&a->mu);
	cds_list_for_each_entry(w, &a->watches, link)
		wlk__etcd_watch_end(multi, w);
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

/*
 * wlk__etcd_agent_start() - grant @a's lease and start its thread.
 * Return: 0, -ENOMEM, -EAGAIN (no thread), or as wlk__etcd_call().
 */
int wlk__etcd_agent_start(struct wlk__etcd_agent *a)
{
	sigset_t all, old;
	uint64_t lease;
	int rc;

	rc = wlk__etcd_lease_grant(&a->conn, a->ttl, &lease);
	if (rc)
		return rc;
	a->lease = lease;
	/* Without its guard, the lease still ends at its expiry. */
	(void)wlk__etcd_guard_start(a);
	a->multi = wlk__curl.multi_init();
	if (!a->multi) {
		(void)lease_revoke(a);
		wlk__etcd_guard_stop(a);
		return -ENOMEM;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&a->thread, NULL, agent_main, a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		wlk__curl.multi_cleanup(a->multi);
		a->multi = NULL;
		(void)lease_revoke(a);
		wlk__etcd_guard_stop(a);
		return wlk__errno(rc);
	}
	return 0;
}

/* Stop @a's thread (its streams ended, their memory freed) and revoke
 * its lease: the keys left on it go in one revision, so that none of
 * its requests is granted on the way out. */
void wlk__etcd_agent_stop(struct wlk__etcd_agent *a)
{
	struct wlk__etcd_watch *w, *wt;

	uatomic_set(&a->stop, 1);
	wlk__curl.multi_wakeup(a->multi);
	pthread_join(a->thread, NULL);
	cds_list_for_each_entry_safe(w, wt, &a->watches, link) {
		cds_list_del(&w->link);
		free(w->prefix);
		free(w);
	}
	wlk__curl.multi_cleanup(a->multi);
	a->multi = NULL;
	pthread_mutex_lock(&a->lease_mu);
	a->dead = true;
	(void)lease_revoke(a);
	wlk__etcd_guard_stop(a);
	pthread_mutex_unlock(&a->lease_mu);
}
