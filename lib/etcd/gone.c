/* SPDX-License-Identifier: MIT */
/*
 * gone.c - what a manager learns it has lost, and who is told: its locks
 * whose keys were deleted by someone else are marked gone (their holders
 * see them stolen), its waiters are woken to read their names again, and
 * its async descriptor is rung. And the process's open managers, so that
 * a steal marks the locks it took from managers of this very process
 * stolen before it returns, as the shared-memory engine does (other
 * processes learn it from their watch, watch.c).
 */
#include <string.h>

#include "etcd.h"

static pthread_mutex_t all_mu = PTHREAD_MUTEX_INITIALIZER;
static CDS_LIST_HEAD(open_managers); /* struct wlk__etcd_manager */

/* The length of @key's name prefix (up to its last '/'), or 0. */
static size_t name_part(const char *key, size_t len)
{
	while (len && key[len - 1] != '/')
		len--;
	return len;
}

/*
 * Whether a deletion of a lock's key at revision @rev took this lock's
 * entry: the key was put before it. A manager reuses its keys (acquire.c,
 * SERIALS), so a deletion seen late may be that of an earlier lock's.
 * The put's revision not known yet (its reply is on its way), @rev waits
 * in del_rev for wlk__etcd_put_at(). Under m->lmu.
 */
static bool took(struct wlk__etcd_lock *l, int64_t rev)
{
	int64_t put = uatomic_read(&l->put_rev);

	if (!put) {
		if (rev > l->del_rev)
			l->del_rev = rev;
		return false;
	}
	return rev > put;
}

/*
 * wlk__etcd_mark_gone() - mark gone every lock whose key (one of whose
 * keys) is @key, deleted at revision @rev, and put before it (or every
 * lock, for NULL), except those we are releasing. Return: whether
 * a request or lock of @m is on @key's name (its waiters should look).
 */
bool wlk__etcd_mark_gone(struct wlk__etcd_manager *m, const char *key,
			 size_t len, int64_t rev)
{
	size_t np = key ? name_part(key, len) : 0;
	struct wlk__etcd_lock *l;
	bool any = false, near = false;

	pthread_mutex_lock(&m->lmu);
	cds_list_for_each_entry(l, &m->locks, link) {
		bool hit = !key;

		/* A scope's lock is lost with any of its keys (they go
		 * together: scope.c). */
		for (unsigned int i = 0; key && i < wlk__etcd_nkeys(l); i++) {
			size_t kl;
			const char *k = wlk__etcd_key(l, i, &kl);

			near |= kl > np && !memcmp(k, key, np) &&
				name_part(k, kl) == np;
			hit |= kl == len && !memcmp(k, key, len);
		}
		if (l->releasing || !hit || (key && !took(l, rev)))
			continue;
		uatomic_set(&l->gone, 1);
		any = true;
	}
	pthread_mutex_unlock(&m->lmu);
	if (any) /* a watched lock's stolen callback */
		wlk__etcd_ring(m);
	return near || any;
}

/*
 * wlk__etcd_put_at() - @l's entry (a scope's entries) was put at revision
 * @rev: a deletion of its key seen before this, but made after @rev,
 * took it (took() above).
 */
void wlk__etcd_put_at(struct wlk__etcd_manager *m, struct wlk__etcd_lock *l,
		      int64_t rev)
{
	bool lost;

	pthread_mutex_lock(&m->lmu);
	uatomic_set(&l->put_rev, rev);
	lost = l->del_rev > rev && !l->releasing;
	if (lost)
		uatomic_set(&l->gone, 1);
	pthread_mutex_unlock(&m->lmu);
	if (lost)
		wlk__etcd_ring(m);
}

/* Blocked requests read their names again; async ones at the next
 * dispatch, which the ring causes. */
void wlk__etcd_wake(struct wlk__etcd_manager *m)
{
	uatomic_inc(&m->events);
	wlk__futex_wake(&m->events, INT32_MAX);
	wlk__etcd_ring(m);
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

/*
 * wlk__etcd_local_forget() - in a fork child, from its fork hook (the one
 * thread there): the parent's managers are none of its own (their
 * handles return WLK_ESTATE, and free them without this list), so the
 * list starts empty, and its mutex afresh (a parent's thread may have held
 * it at the fork).
 */
void wlk__etcd_local_forget(void)
{
	pthread_mutex_init(&all_mu, NULL);
	CDS_INIT_LIST_HEAD(&open_managers);
}

/* A steal deleted @key at revision @rev: the lock of a manager of this
 * process is gone. */
void wlk__etcd_local_gone(const char *key, size_t len, int64_t rev)
{
	struct wlk__etcd_manager *m;

	pthread_mutex_lock(&all_mu);
	cds_list_for_each_entry(m, &open_managers, all)
		wlk__etcd_mark_gone(m, key, len, rev);
	pthread_mutex_unlock(&all_mu);
}
