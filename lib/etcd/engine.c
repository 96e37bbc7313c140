/* SPDX-License-Identifier: MIT */
/*
 * engine.c - the etcd engine as the API layer sees it (struct
 * wlk__engine, engine.h): a manager is a client of its process's agent
 * of the cluster (registry.c: one lease and one thread per process and
 * cluster, one watch per bucket), a lock an entry (acquire.c), a query
 * one range (query.c), the async path an epoll set the agent rings
 * (async.c). What is left is here: becoming a client and leaving.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etcd.h"
#include "libcurl.h"

/* struct wlk_manager_options.permissions: read/write bits only, the
 * owner's included. */
#define PERM_ALLOWED 0666u
#define PERM_OWNER 0600u

static unsigned int lease_ttl(void)
{
	const char *s = getenv(WLK_ETCD_TTL_ENV);
	char *end;
	unsigned long v;

	if (!s || !*s)
		return WLK_ETCD_TTL_DEFAULT;
	v = strtoul(s, &end, 10);
	return *end || v == 0 || v > WLK_ETCD_TTL_MAX ? WLK_ETCD_TTL_DEFAULT
						     : (unsigned int)v;
}

/* The parts open and remove share: the members and the prefix. */
static int setup(struct wlk__etcd_manager *m, const char *origin,
		 const struct wlk_manager_options *o)
{
	const char *b = wlk__etcd_backend(o);
	int rc;

	if (!b)
		return WLK_EINVAL;
	rc = wlk__etcd_bucket_prefix(origin, o, &m->prefix, &m->prefix_len);
	if (rc)
		return rc;
	rc = wlk__etcd_conn_init(&m->conn, b);
	if (rc) {
		free(m->prefix);
		m->prefix = NULL;
	}
	return rc;
}

static void teardown(struct wlk__etcd_manager *m)
{
	wlk__etcd_conn_fini(&m->conn);
	free(m->prefix);
	m->prefix = NULL;
}

/* The options every engine checks, as the shared-memory one does: a
 * segment's permissions (a subset of 0666 with the owner's 0600) and
 * capacities mean nothing on etcd, but a value out of range is an error
 * on every engine. */
static int options_ok(const struct wlk_manager_options *o)
{
	if (o->permissions &&
	    ((o->permissions & ~PERM_ALLOWED) ||
	     (o->permissions & PERM_OWNER) != PERM_OWNER))
		return WLK_EINVAL;
	if (o->max_names > WLK_LIMIT_MAX_NAMES ||
	    o->max_requests > WLK_LIMIT_MAX_REQUESTS ||
	    o->max_name_len > WLK_LIMIT_MAX_NAME_LEN)
		return WLK_EINVAL;
	return 0;
}

static int etcd_open(struct wlk_manager *pub, const char *origin,
		     const struct wlk_manager_options *o)
{
	struct wlk__etcd_manager *m = wlk__etcd_m(pub);
	uint32_t max_name_len = o->max_name_len ? o->max_name_len
					       : WLK_DEFAULT_MAX_NAME_LEN;
	int rc;

	m->efd = m->ring_fd = -1;
	rc = options_ok(o);
	if (rc)
		return rc;
	rc = setup(m, origin, o);
	if (rc)
		return rc;
	rc = wlk__curl_load(); /* after the arguments' checks */
	if (rc) {
		teardown(m);
		return rc;
	}
	CDS_INIT_LIST_HEAD(&m->locks);
	rc = pthread_mutex_init(&m->lmu, NULL);
	if (rc) {
		teardown(m);
		return wlk__errno(rc);
	}
	m->detect = o->detect_deadlocks;
	rc = wlk__etcd_agent_join(m, wlk__etcd_backend(o), lease_ttl(),
				  max_name_len, &max_name_len);
	if (rc) {
		pthread_mutex_destroy(&m->lmu);
		teardown(m);
		return rc;
	}
	pub->max_name_len = max_name_len;
	wlk__etcd_local_add(m, true);
	return 0;
}

/* Leaving the agent deletes every entry of the manager, in one revision
 * (one Txn, or the lease's revocation if it was the agent's last
 * manager): its requests and its locks at once, so that none of its
 * requests is granted on the way out. */
static void etcd_close(struct wlk_manager *pub)
{
	struct wlk__etcd_manager *m = wlk__etcd_m(pub);
	struct wlk__etcd_lock *l, *lt;
	struct wlk_async *r;

	wlk__etcd_local_add(m, false);
	wlk__etcd_agent_leave(m);
	/* The async close, next, frees the handles of the requests still
	 * owed a callback (waiting, or granted and not yet dispatched) as
	 * it settles them with WLK_ESTATE, without the engine: their keys
	 * are gone now. (A blocking request's thread deletes its key on its
	 * way out: the close may have come before its put.) */
	pthread_mutex_lock(&pub->amu);
	cds_list_for_each_entry(r, &pub->pending, link) {
		if (r->l && (!r->settled || !r->status)) {
			struct wlk__etcd_lock *el = wlk__etcd_l(r->l);

			wlk__etcd_forget_keys(el);
		}
	}
	pthread_mutex_unlock(&pub->amu);
	/* Its requests and locks are no longer the manager's: a lock
	 * released after the close unlinks only itself (from itself). */
	pthread_mutex_lock(&m->lmu);
	cds_list_for_each_entry_safe(l, lt, &m->locks, link)
		cds_list_del_init(&l->link);
	pthread_mutex_unlock(&m->lmu);
}

static void etcd_free(struct wlk_manager *pub)
{
	struct wlk__etcd_manager *m = wlk__etcd_m(pub);

	/* A fork child's copy leaves its parent's agent alone (its thread
	 * and lease are the parent's). A manager never closed (the API
	 * closes every one it opened) is still a client. */
	if (pub->fork_gen == wlk__fork_gen() && m->a) {
		if (m->w)
			wlk__etcd_local_add(m, false);
		wlk__etcd_agent_leave(m);
		wlk__etcd_agent_drop(m);
	}
	if (m->efd >= 0)
		close(m->efd);
	pthread_mutex_destroy(&m->lmu);
	teardown(m);
}

/* The bucket's marker goes (bucket.c): its next opener sets its
 * max_name_len afresh. A bucket with a manager open is -EBUSY. */
static int etcd_remove(const char *origin,
		       const struct wlk_manager_options *o)
{
	struct wlk__etcd_manager *m = calloc(1, sizeof(*m));
	int rc;

	if (!m)
		return -ENOMEM;
	rc = setup(m, origin, o);
	if (!rc) {
		rc = wlk__curl_load();
		if (!rc)
			rc = wlk__etcd_bucket_remove(m);
		teardown(m);
	}
	free(m);
	return rc;
}

static bool etcd_stolen(const struct wlk_lock *pub)
{
	return uatomic_read(&((const struct wlk__etcd_lock *)pub)->gone);
}

const struct wlk__engine wlk__etcd_engine = {
	.name = "etcd",
	.manager_size = sizeof(struct wlk__etcd_manager),
	.lock_size = sizeof(struct wlk__etcd_lock),
	.open = etcd_open,
	.close = etcd_close,
	.free = etcd_free,
	.remove = etcd_remove,
	.acquire = wlk__etcd_acquire,
	.release = wlk__etcd_release,
	.stolen = etcd_stolen,
	.query = wlk__etcd_query,
	.validate = wlk__etcd_validate,
	.async_open = wlk__etcd_async_open,
	.async_fd = wlk__etcd_async_fd,
	.async_watch_fd = wlk__etcd_async_watch_fd,
	.async_ring = wlk__etcd_async_ring,
	.async_request = wlk__etcd_async_request,
	.async_drain = wlk__etcd_async_drain,
	.async_settle = wlk__etcd_async_settle,
	.async_arm = wlk__etcd_async_arm,
	.async_close = wlk__etcd_async_close,
};
