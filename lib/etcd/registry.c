/* SPDX-License-Identifier: MIT */
/*
 * registry.c - this process's agents. The managers of one cluster in a
 * process share one agent (struct wlk__etcd_agent): one lease, on which
 * all their keys are put, kept alive by one thread (agent.c), and one
 * watch stream per bucket in use (watch.c), both reference-counted. The
 * first manager of a cluster creates its agent (the lease granted, the
 * thread started); a manager closed while others remain deletes its own
 * keys (bucket.c); the last one's close stops the thread and revokes the
 * lease, which deletes whatever is left on it in one revision. The
 * agent's memory lasts until its last manager is freed: a closed
 * manager's blocked requests, still running, read its lease (revoked:
 * their puts fail, and nothing renews it).
 *
 * The registry is a list under a mutex, unlike the shared-memory
 * engine's RCU table of mapped buckets (lib/attach/registry.c): it is
 * read by open and close only, never on a request's path, and holds one
 * entry per cluster in use.
 *
 * fork: the child inherits its parent's agents without their threads.
 * The fork generation, bumped by the child's hook, marks them: they are
 * never found in the child nor touched there (every call on an inherited
 * handle returns WLK_ESTATE, api/manager.c), and they stay listed, so
 * that they are reachable, not leaked, when the child exits.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"
#include "libcurl.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int init_error;
/* Guards the list and every agent's users; held while an agent is made,
 * so that a cluster gets one (a lease grant: a call's timeout at most). */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static CDS_LIST_HEAD(agents);

static void before_fork(void)
{
	pthread_mutex_lock(&reg_mu);
}

static void after_fork_parent(void)
{
	pthread_mutex_unlock(&reg_mu);
}

/* Managers record the fork generation they were opened in; the child
 * must see it move on, whichever engines the process uses. */
static void after_fork_child(void)
{
	wlk__fork_gen_bump();
	wlk__etcd_local_forget();
	pthread_mutex_unlock(&reg_mu);
}

static void init_once(void)
{
	init_error = -pthread_atfork(before_fork, after_fork_parent,
				     after_fork_child);
}

static void agent_free(struct wlk__etcd_agent *a)
{
	wlk__etcd_conn_fini(&a->conn);
	free(a->guard_path);
	pthread_mutex_destroy(&a->mu);
	pthread_mutex_destroy(&a->lease_mu);
	free(a->backend);
	free(a);
}

/* A new agent of @backend, its lease granted and its thread running;
 * under reg_mu. */
static int agent_new(const char *backend, unsigned int ttl,
		     struct wlk__etcd_agent **out)
{
	struct wlk__etcd_agent *a = calloc(1, sizeof(*a));
	int rc;

	if (!a)
		return -ENOMEM;
	a->backend = strdup(backend);
	if (!a->backend) {
		free(a);
		return -ENOMEM;
	}
	rc = wlk__etcd_conn_init(&a->conn, backend);
	if (rc) {
		free(a->backend);
		free(a);
		return rc;
	}
	(void)pthread_mutex_init(&a->lease_mu, NULL);
	(void)pthread_mutex_init(&a->mu, NULL);
	CDS_INIT_LIST_HEAD(&a->managers);
	CDS_INIT_LIST_HEAD(&a->watches);
	a->ttl = ttl;
	a->users = 1;
	a->refs = 1;
	a->fork_gen = wlk__fork_gen();
	rc = wlk__etcd_guard_init(a);
	if (!rc)
		rc = wlk__etcd_agent_start(a);
	if (rc) {
		agent_free(a);
		return rc;
	}
	cds_list_add(&a->link, &agents);
	*out = a;
	return 0;
}

/* The agent of @backend in this process, a reference taken. */
static int agent_get(const char *backend, unsigned int ttl,
		     struct wlk__etcd_agent **out)
{
	struct wlk__etcd_agent *a;
	int rc = 0;

	pthread_once(&once, init_once);
	if (init_error)
		return init_error;
	pthread_mutex_lock(&reg_mu);
	cds_list_for_each_entry(a, &agents, link) {
		if (a->fork_gen == wlk__fork_gen() &&
		    !strcmp(a->backend, backend)) {
			a->users++;
			uatomic_inc(&a->refs);
			*out = a;
			goto out;
		}
	}
	rc = agent_new(backend, ttl, out);
out:
	pthread_mutex_unlock(&reg_mu);
	return rc;
}

/* One user less: the last one stops the thread and revokes the lease.
 * Return: whether it was the last. */
static bool agent_unuse(struct wlk__etcd_agent *a)
{
	bool last;

	pthread_mutex_lock(&reg_mu);
	last = --a->users == 0;
	if (last)
		cds_list_del(&a->link);
	pthread_mutex_unlock(&reg_mu);
	if (last)
		wlk__etcd_agent_stop(a);
	return last;
}

/* Drop a reference to @a's memory. */
static void agent_unref(struct wlk__etcd_agent *a)
{
	if (!uatomic_sub_return(&a->refs, 1))
		agent_free(a);
}

/* @m among its agent's managers, on its bucket's watch (made if it is
 * the first manager of the bucket here: the agent thread starts it). */
static int attach(struct wlk__etcd_manager *m)
{
	struct wlk__etcd_agent *a = m->a;
	struct wlk__etcd_watch *w;
	int rc = 0;

	pthread_mutex_lock(&a->mu);
	cds_list_for_each_entry(w, &a->watches, link)
		if (w->users && w->prefix_len == m->prefix_len &&
		    !memcmp(w->prefix, m->prefix, m->prefix_len))
			goto found;
	w = calloc(1, sizeof(*w));
	if (w)
		w->prefix = malloc(m->prefix_len);
	if (!w || !w->prefix) {
		free(w);
		rc = -ENOMEM;
		goto out;
	}
	memcpy(w->prefix, m->prefix, m->prefix_len);
	w->prefix_len = m->prefix_len;
	w->a = a;
	cds_list_add(&w->link, &a->watches);
found:
	w->users++;
	m->w = w;
	m->no = ++a->next_no;
	cds_list_add(&m->peer, &a->managers);
out:
	pthread_mutex_unlock(&a->mu);
	if (!rc)
		wlk__curl.multi_wakeup(a->multi);
	return rc;
}

/* Wait until @m's watch is in place, so that no deletion after the open
 * is missed: 0 or -EHOSTUNREACH (not within the call timeout). */
static int wait_watch(struct wlk__etcd_manager *m)
{
	uint64_t deadline = wlk__now_ns() + m->conn.timeout_ms * 1000000u;

	while (!uatomic_read(&m->w->created)) {
		struct wlk__waitv v = { &m->w->created, 0 };

		if (wlk__now_ns() >= deadline)
			return -EHOSTUNREACH;
		(void)wlk__futex_wait(&v, 1, deadline);
	}
	return 0;
}

/*
 * wlk__etcd_agent_join() - make @m (its prefix and conn set) a client of
 * @backend through this process's agent: its presence key put on the
 * agent's lease, with the bucket's marker (*@out: the bucket's
 * max_name_len, bucket.c), and its bucket's watch in place. Return: 0,
 * -ENOMEM, -EAGAIN (no thread), -EHOSTUNREACH (no watch), or as
 * wlk__etcd_call(). Nothing is left on error.
 */
int wlk__etcd_agent_join(struct wlk__etcd_manager *m, const char *backend,
			 unsigned int ttl, uint32_t max_name_len,
			 uint32_t *out)
{
	int rc = agent_get(backend, ttl, &m->a);

	if (rc)
		return rc;
	rc = attach(m);
	if (rc) {
		(void)agent_unuse(m->a);
		agent_unref(m->a);
		m->a = NULL;
		return rc;
	}
	/* The lease cannot change under the put (a renewal puts the
	 * presence keys of the managers it finds anew). */
	pthread_mutex_lock(&m->a->lease_mu);
	rc = wlk__etcd_bucket_join(m, max_name_len, out);
	pthread_mutex_unlock(&m->a->lease_mu);
	if (!rc)
		rc = wait_watch(m);
	if (rc) {
		wlk__etcd_agent_leave(m);
		wlk__etcd_agent_drop(m);
	}
	return rc;
}

/*
 * wlk__etcd_agent_leave() - @m is no client any more: the agent no longer
 * looks at it, and its keys go (its presence and every request and lock
 * on its list): deleted, or with the lease if it was the agent's last
 * manager. A key that cannot be deleted stays until the process ends.
 * Once only; m->a stays for wlk__etcd_agent_drop().
 */
void wlk__etcd_agent_leave(struct wlk__etcd_manager *m)
{
	struct wlk__etcd_agent *a = m->a;
	uint64_t lease;

	if (!a || !m->w)
		return;
	pthread_mutex_lock(&a->lease_mu);
	pthread_mutex_lock(&a->mu);
	cds_list_del(&m->peer);
	m->w->users--; /* at 0, the agent thread ends and frees it */
	m->w = NULL;
	pthread_mutex_unlock(&a->mu);
	lease = uatomic_read(&a->lease);
	pthread_mutex_unlock(&a->lease_mu);
	wlk__curl.multi_wakeup(a->multi);
	if (!agent_unuse(a))
		(void)wlk__etcd_bucket_leave(m, lease);
}

/* wlk__etcd_agent_drop() - @m, which left, is freed: its reference to its
 * agent goes. */
void wlk__etcd_agent_drop(struct wlk__etcd_manager *m)
{
	if (m->a)
		agent_unref(m->a);
	m->a = NULL;
}
