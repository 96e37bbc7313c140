/* SPDX-License-Identifier: MIT */
/*
 * acquire.c - a request and a release on etcd (the mapping: etcd.h).
 *
 *  - A plain request's first Txn puts the entry only if its name has no
 *    entry (then it is held: put_if_free()), and ranges the name
 *    otherwise; on a busy name a second Txn puts the entry unless it
 *    exists, and ranges the name. Held at once, or it waits for the
 *    agent's wake-ups (a deletion in the bucket), its signal, its
 *    manager's close or its deadline, and ranges the name again. Its
 *    entry vanished (the lease was lost) is WLK_EABORTED.
 *  - if_available and steal are decided at once (atonce.c, steal.c).
 *  - A manager with detect_deadlocks checks the bucket first, and puts
 *    only if it is unchanged (deadlock.c).
 *  - A scope (scope.c) is the same with a key per name: its Txn puts
 *    them all and ranges every name, and so does each read after.
 *
 * Every Txn may be sent twice (http.c tries another member when one did
 * not answer, and the first may have applied): each one that puts also
 * ranges the name, and finding its own key there is the proof that it
 * applied; put_if_free()'s put applies only on a name with no entry, so
 * a second send finds the first's entry in its range.
 *
 * SERIALS. A key's tail ends in a serial of its manager. etcd keeps a
 * deleted key in its index, as a tombstone, until the cluster is
 * compacted, and a range over a name walks them all: with a new key per
 * request, every read and Txn of a busy name grew with its history. So a
 * manager takes back the serial of a lock's keys once they are surely
 * gone, and its next request, on any name, uses it again: a process that
 * takes and releases a name puts one key over and over, as with etcd's
 * own lock service (whose key is the lease's).
 *
 * Surely gone means that no call about them may still apply: a call
 * that failed, went to a second member or was sent on a new connection
 * (http.c, wlk__etcd_unsure) may apply late, and a late delete would take
 * the next lock's entry, so that serial is never used again. A deletion
 * that a watch reports after the key was put anew is told from one of
 * the new entry by its revision (gone.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "etcd.h"

/* A waiter reads its name again at least this often, whatever the watch
 * says: a bound on a wake-up lost with a broken stream. */
#define RECHECK_NS (1000 * 1000000ull)
/* "<c><m>-<16 hex>-<16 hex>" */
#define TAIL_MAX 40
/* Tries of a request whose lease was found lost: the first, and one on
 * a new lease. */
#define LEASE_ROUNDS 2

/* Why a waiting request stops: its manager closed, its signal, its
 * deadline; or 0. */
static int why_stop(struct wlk__etcd_manager *m, const struct wlk_options *o,
		    uint64_t deadline)
{
	if (uatomic_read(&m->base.closed))
		return WLK_ESTATE;
	if (o->signal && uatomic_read(&o->signal->reason))
		return uatomic_read(&o->signal->reason);
	if (deadline && wlk__now_ns() >= deadline)
		return WLK_ETIMEDOUT;
	return 0;
}

/* One Txn: put every key of @r's request unless its first exists, and
 * range each of its names into @k. */
static int put_all(struct wlk__etcd_req *r, struct wlk__etcd_kvs *k)
{
	struct json_object *ok = json_object_new_array();
	struct json_object *fail = json_object_new_array();
	bool applied;

	if (!ok || !fail || wlk__etcd_add_puts(ok, r) ||
	    wlk__etcd_add_ranges(ok, r->l) ||
	    wlk__etcd_add_ranges(fail, r->l)) {
		json_object_put(ok);
		json_object_put(fail);
		return -ENOMEM;
	}
	return wlk__etcd_txn(r,
			     wlk__etcd_list(wlk__etcd_cmp(r->l->key,
							  r->l->key_len,
							  false, "CREATE",
							  "EQUAL", 0),
					    NULL, NULL),
			     ok, fail, &applied, k);
}

/*
 * A plain request's first Txn: put its entry only if its name has no
 * entry at all (a compare over the name's keys), else range the name. A
 * free name, the common case, so costs the smallest Txn and reply there
 * are (the gateway's JSON is most of a call's cost): the entry is then
 * the only one, held at the Txn's revision. A busy name is put with
 * put_all(), one more round trip before a wait; unless the range shows
 * the entry there already, put by an earlier send of this Txn.
 */
static int put_if_free(struct wlk__etcd_req *r, struct wlk__etcd_kvs *k)
{
	struct wlk__etcd_lock *l = r->l;
	struct json_object *none = wlk__etcd_cmp(r->np, r->np_len, true,
						  "VERSION", "EQUAL", 0);
	struct json_object *cmp = json_object_new_array();
	struct json_object *ok = json_object_new_array();
	struct json_object *fail = json_object_new_array();
	bool bad = !none || !cmp || json_object_array_add(cmp, none);
	bool was_free;
	int rc;

	if (bad)
		json_object_put(none); /* not in cmp */
	if (bad || !ok || !fail || wlk__etcd_add_puts(ok, r) ||
	    wlk__etcd_add_ranges(fail, l)) {
		json_object_put(cmp);
		json_object_put(ok);
		json_object_put(fail);
		return -ENOMEM;
	}
	rc = wlk__etcd_txn_bare(r, cmp, ok, fail, &was_free, k);
	if (rc)
		return rc;
	if (was_free)
		return wlk__etcd_kvs_own(k, r->m->prefix, l->key, l->key_len,
					 r->value);
	if (wlk__etcd_kvs_find(k, l->key, l->key_len))
		return 0;
	wlk__etcd_kvs_free(k);
	return put_all(r, k);
}

/*
 * What a waiter's next read of its names must show (wlk__etcd_read()'s
 * @since), once woken by a deletion: a state at or after that deletion
 * and after the request's own put, which the member its watch and calls
 * use has applied before it sent the event, so it may answer alone. Any
 * state at or after those shows a grant that a linearizable read would
 * show then or earlier, and what it shows held was held at its revision
 * (held stays held until deleted, and a deletion after it reaches the
 * watch as a steal does), so its revision is a token above every earlier
 * grant of the name. 0 (a linearizable read) while either is unknown. A
 * waiter not woken (the recheck of RECHECK_NS, which stands for a
 * wake-up lost with a broken stream) reads linearizably: a member cut
 * off from the others would answer from its old state.
 */
static int64_t since(struct wlk__etcd_manager *m, struct wlk__etcd_lock *l)
{
	int64_t woke, put;

	cmm_smp_rmb(); /* the revision was stored before the count rose */
	woke = uatomic_read(&m->woke_rev);
	put = uatomic_read(&l->put_rev);
	if (!put || woke <= 0)
		return 0;
	return woke > put ? woke : put;
}

static int request(struct wlk__etcd_req *r, const struct wlk_options *o,
		   bool wait, bool *held)
{
	struct wlk__etcd_manager *m = r->m;
	uint64_t deadline = wlk__deadline_ns(o->timeout_ns);
	uint32_t ev = uatomic_read(&m->events);
	struct wlk__etcd_kvs k = { 0 };
	int rc;

	if (m->detect)
		rc = wlk__etcd_put_checked(r, &k);
	else
		rc = r->l->mem ? put_all(r, &k) : put_if_free(r, &k);
	for (;;) {
		uint32_t now;
		bool woken;
		int why;

		if (!rc)
			rc = wlk__etcd_grant_if_held(r, &k, held);
		wlk__etcd_kvs_free(&k);
		if (rc || *held || !wait)
			break;
		why = why_stop(m, o, deadline);
		if (!why) {
			struct wlk__waitv v[3] = {
				{ &m->events, ev },
				{ &m->base.close_word,
				  uatomic_read(&m->base.close_word) },
			};
			unsigned int n = 2;
			uint64_t until = wlk__now_ns() + RECHECK_NS;

			if (o->signal)
				v[n++] = (struct wlk__waitv){
					&o->signal->word,
					uatomic_read(&o->signal->word)
				};
			if (deadline && deadline < until)
				until = deadline;
			why = why_stop(m, o, deadline);
			if (!why && uatomic_read(&m->events) == ev)
				(void)wlk__futex_wait(v, n, until);
			why = why_stop(m, o, deadline);
		}
		if (why) {
			rc = why;
			break;
		}
		now = uatomic_read(&m->events);
		woken = now != ev;
		ev = now;
		rc = wlk__etcd_read(m, r->l, woken ? since(m, r->l) : 0, &k);
	}
	/* The spec: a signal found aborted after the grant, before the
	 * callback, releases the lock. */
	if (!rc && *held && o->signal && uatomic_read(&o->signal->reason)) {
		rc = uatomic_read(&o->signal->reason);
		*held = false;
	}
	/* -ENOENT: the put's lease was gone; WLK_EDEADLK: refused before
	 * its put (deadlock.c). */
	if (rc && rc != -ENOENT && rc != WLK_EDEADLK)
		(void)wlk__etcd_delete(m, r->l, NULL);
	return rc;
}

/* A serial for a new request of @m (SERIALS above). */
static uint32_t serial_get(struct wlk__etcd_manager *m)
{
	uint32_t s;

	pthread_mutex_lock(&m->lmu);
	s = m->n_spare ? m->spare[--m->n_spare] : ++m->seq;
	pthread_mutex_unlock(&m->lmu);
	return s;
}

/*
 * The end of @l's keys (of @m), gone or never put: their serial goes back
 * to @m, unless a call about them may still apply (SERIALS above) or @m
 * is closed; then the keys are freed.
 */
static void forget(struct wlk__etcd_manager *m, struct wlk__etcd_lock *l)
{
	if (!l->unsure && l->key) {
		pthread_mutex_lock(&m->lmu);
		if (!uatomic_read(&m->base.closed) &&
		    m->n_spare < WLK_ETCD_SPARE_SERIALS)
			m->spare[m->n_spare++] = l->serial;
		pthread_mutex_unlock(&m->lmu);
	}
	wlk__etcd_forget_keys(l);
}

static void track(struct wlk__etcd_manager *m, struct wlk__etcd_lock *l,
		  bool on)
{
	pthread_mutex_lock(&m->lmu);
	if (on)
		cds_list_add(&l->link, &m->locks);
	else
		cds_list_del(&l->link);
	pthread_mutex_unlock(&m->lmu);
}

/*
 * wlk__etcd_submit() - make @pl's request: granted (*@held), queued
 * (*@queued: an async request that waits, its entry in place), or
 * neither (an if_available miss); with @wait, wait for the grant as
 * wlk_acquire() does. On error, and on a miss, nothing is left.
 */
int wlk__etcd_submit(struct wlk__etcd_manager *m, struct wlk_lock *pl,
		     const struct wlk_options *o, bool wait, bool *held,
		     bool *queued)
{
	struct wlk__etcd_lock *l = wlk__etcd_l(pl);
	char tail[TAIL_MAX];
	struct wlk__etcd_req r = { .m = m, .l = l };
	char m_ch = pl->mode == WLK_EXCLUSIVE ? 'x' : 's';
	char count[4] = "";
	int rc;

	l->mem = NULL;
	l->key = NULL;
	r.np = wlk__etcd_name_prefix(m->prefix, m->prefix_len, pl->name,
				     pl->name_len, &r.np_len);
	if (!r.np)
		return -ENOMEM;
	/* A scope's members say how many they are (scope.c). */
	if (pl->scope)
		snprintf(count, sizeof(count), "%u", (unsigned int)pl->n_scope);
	snprintf(r.value, sizeof(r.value), "%c%s %d %s", m_ch, count,
		 (int)getpid(), m->base.client_id);
	*queued = false;
	/* A lease found lost by the request itself (before the agent's
	 * keepalive noticed): renewed, and the request made once more. */
	for (int round = 0; round < LEASE_ROUNDS; round++) {
		l->gone = 0;
		l->put_rev = 0;
		l->del_rev = 0;
		l->releasing = false;
		l->unsure = false;
		r.lease = wlk__etcd_lease(m);
		l->lease = r.lease;
		l->serial = serial_get(m);
		/* The seq's high digits are the manager's number: managers
		 * of a process share its lease, and a key names its
		 * manager (deadlock.c) with both. */
		snprintf(tail, sizeof(tail), "%c%c-%016llx-%08x%08x",
			 o->steal ? '0' : '1', m_ch,
			 (unsigned long long)r.lease, (unsigned int)m->no,
			 (unsigned int)l->serial);
		if (pl->scope) {
			rc = wlk__etcd_scope_keys(m, l, tail, strlen(tail));
			if (rc)
				break;
		} else {
			l->key_len = r.np_len + strlen(tail);
			l->key = malloc(l->key_len + 1);
			if (!l->key) {
				rc = -ENOMEM;
				break;
			}
			memcpy(l->key, r.np, r.np_len);
			memcpy(l->key + r.np_len, tail, strlen(tail) + 1);
		}
		track(m, l, true);
		if (o->steal)
			rc = wlk__etcd_steal(&r, held);
		else if (o->if_available)
			rc = wlk__etcd_if_available(&r, held);
		else
			rc = request(&r, o, wait, held);
		*queued = !rc && !*held && !wait && !o->steal &&
			  !o->if_available;
		/* Closed meanwhile: the close deleted the keys it found,
		 * maybe before this put (the lease lives on for the
		 * process's other managers). */
		if (!rc && (*held || *queued) &&
		    uatomic_read(&m->base.closed)) {
			(void)wlk__etcd_delete(m, l, NULL);
			*held = *queued = false;
			rc = WLK_ESTATE;
		}
		if (!rc && (*held || *queued))
			break;
		track(m, l, false);
		forget(m, l);
		if (rc != -ENOENT || uatomic_read(&m->base.closed))
			break;
		rc = wlk__etcd_lease_renew(m->a, r.lease);
		if (rc)
			break;
		rc = WLK_EABORTED;
	}
	free(r.np);
	if (rc == -ENOENT)
		rc = uatomic_read(&m->base.closed) ? WLK_ESTATE : WLK_EABORTED;
	return rc;
}

int wlk__etcd_acquire(struct wlk_manager *pub, struct wlk_lock *pl,
		      const struct wlk_options *o, bool *held)
{
	bool queued;

	return wlk__etcd_submit(wlk__etcd_m(pub), pl, o, true, held, &queued);
}

/*
 * wlk__etcd_check() - whether @pl's queued request is granted now (one
 * read of its names): 0 with *@held, or an error (WLK_EABORTED: its entry
 * went with a lost lease).
 */
int wlk__etcd_check(struct wlk__etcd_manager *m, struct wlk_lock *pl,
		    bool *held)
{
	struct wlk__etcd_req r = { .m = m, .l = wlk__etcd_l(pl) };
	struct wlk__etcd_kvs k = { 0 };
	int rc = wlk__etcd_read(m, r.l, 0, &k);

	if (!rc)
		rc = wlk__etcd_grant_if_held(&r, &k, held);
	wlk__etcd_kvs_free(&k);
	return rc;
}

/* wlk__etcd_drop() - give up @pl's request or lock: its entry deleted,
 * the manager no longer tracking it. */
void wlk__etcd_drop(struct wlk__etcd_manager *m, struct wlk_lock *pl)
{
	struct wlk__etcd_lock *l = wlk__etcd_l(pl);

	if (!l->key)
		return;
	track(m, l, false);
	(void)wlk__etcd_delete(m, l, NULL);
	forget(m, l);
}

/*
 * wlk__etcd_release() - delete the lock's entry if it is still there:
 * 0; WLK_ESTOLEN if it was not (stolen, or lost with the lease);
 * WLK_ESTATE if the manager was closed (which released it); or an error
 * of the call (the lease then deletes the entry).
 */
int wlk__etcd_release(struct wlk_lock *pl)
{
	struct wlk__etcd_manager *m = wlk__etcd_m(pl->m);
	struct wlk__etcd_lock *l = wlk__etcd_l(pl);
	int64_t deleted = 0;
	int rc;

	pthread_mutex_lock(&m->lmu);
	l->releasing = true;
	cds_list_del(&l->link);
	pthread_mutex_unlock(&m->lmu);
	if (uatomic_read(&m->base.closed)) {
		forget(m, l);
		return WLK_ESTATE;
	}
	/* Nothing deleted: someone else did (a steal, the lease's end), or
	 * this delete did, sent twice (http.c's failover): its first reply
	 * lost, the second finds the key gone. History tells (deleter.c). */
	rc = wlk__etcd_delete(m, l, &deleted);
	if (!rc && (uatomic_read(&l->gone) ||
		    (!deleted && !wlk__etcd_deleted_by_us(m, l))))
		rc = WLK_ESTOLEN;
	forget(m, l);
	return rc;
}
