/* SPDX-License-Identifier: MIT */
/*
 * acquire.c - a request and a release on etcd (the mapping: etcd.h).
 *
 *  - A plain request is one Txn: put the entry unless it exists, and range
 *    the name; held at once, or it waits for the agent's wake-ups (a
 *    deletion in the bucket), its signal, its manager's close or its
 *    deadline, and ranges the name again. Its entry vanished (the lease was
 *    lost) is WLK_EABORTED.
 *  - if_available is one Txn whose compares say the request is grantable:
 *    no entry of the name (exclusive), or no exclusive one (shared, which
 *    makes every entry a held shared one and the queue empty).
 *  - steal reads the name, then one Txn deletes the holders it saw and puts
 *    a class-0 entry, if the name's keys are as read (no key put since,
 *    every holder still there); otherwise it reads again.
 *
 * Every Txn may be sent twice (http.c tries another member when one did
 * not answer, and the first may have applied): each one also ranges the
 * name, and finding its own key there is the proof that it applied.
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
/* etcd's default --max-txn-ops: a steal deletes at most this many holders
 * minus the compare on the range and its own put. */
#define TXN_OPS_MAX 128
/* A steal's optimistic rounds before it gives up with WLK_EFULL (a name
 * changing faster than a round trip). */
#define STEAL_ROUNDS 64
/* "<m> <pid> <clientId>" */
#define VALUE_MAX (2 + 11 + 1 + WLK_CLIENT_ID_MAX + 1)
/* "<c><m>-<16 hex>-<16 hex>" */
#define TAIL_MAX 40
/* Tries of a request whose lease was found lost: the first, and one on
 * a new lease. */
#define LEASE_ROUNDS 2

struct req {
	struct wlk__etcd_manager *m;
	struct wlk__etcd_lock *l;
	char *np; /* the name's prefix */
	size_t np_len;
	char value[VALUE_MAX];
	uint64_t lease;
};

static struct json_object *op_put(struct req *r)
{
	struct json_object *op = json_object_new_object();
	struct json_object *p = json_object_new_object();
	char *v = wlk__etcd_b64(r->value, strlen(r->value));

	if (!op || !p || !v) {
		json_object_put(op);
		json_object_put(p);
		free(v);
		return NULL;
	}
	json_object_object_add(p, "key", wlk__etcd_jkey(r->l->key,
							r->l->key_len));
	json_object_object_add(p, "value", json_object_new_string(v));
	json_object_object_add(p, "lease", wlk__etcd_jstr_int(
						   (int64_t)r->lease));
	json_object_object_add(op, "request_put", p);
	free(v);
	return op;
}

static struct json_object *op_delete(const char *key, size_t len)
{
	struct json_object *op = json_object_new_object();
	struct json_object *d = json_object_new_object();

	if (!op || !d) {
		json_object_put(op);
		json_object_put(d);
		return NULL;
	}
	json_object_object_add(d, "key", wlk__etcd_jkey(key, len));
	json_object_object_add(op, "request_delete_range", d);
	return op;
}

/* A Txn of @cmp, @ok, @fail (consumed); the name's entries after it. */
static int txn(struct req *r, struct json_object *cmp, struct json_object *ok,
	       struct json_object *fail, bool *succeeded,
	       struct wlk__etcd_kvs *kvs)
{
	struct json_object *t = json_object_new_object(), *rep;
	int rc;

	if (!t || !cmp || !ok || !fail) {
		json_object_put(t);
		json_object_put(cmp);
		json_object_put(ok);
		json_object_put(fail);
		return -ENOMEM;
	}
	json_object_object_add(t, "compare", cmp);
	json_object_object_add(t, "success", ok);
	json_object_object_add(t, "failure", fail);
	rc = wlk__etcd_call(&r->m->conn, "/v3/kv/txn", t, &rep);
	json_object_put(t);
	if (rc)
		return rc;
	rc = wlk__etcd_txn_reply(rep, r->m->prefix, r->m->prefix_len,
				 succeeded, kvs);
	json_object_put(rep);
	return rc;
}

/* [@a, @b, @c], NULLs ending it early; NULL if out of memory. */
static struct json_object *list(struct json_object *a, struct json_object *b,
				struct json_object *c)
{
	struct json_object *l = json_object_new_array();
	struct json_object *v[3] = { a, b, c };
	bool bad = !l;

	for (int i = 0; i < 3; i++) {
		if (!v[i])
			continue;
		if (bad || json_object_array_add(l, v[i]))
			json_object_put(v[i]);
	}
	if (bad)
		return NULL;
	return l;
}

static void forget_key(struct wlk__etcd_lock *l)
{
	free(l->key);
	l->key = NULL;
}

/* Delete @l's key, whatever state it is in (an abort, a timeout, a
 * close). Errors are the lease's to mend: the key goes with it. */
int wlk__etcd_delete(struct wlk__etcd_manager *m, struct wlk__etcd_lock *l)
{
	struct json_object *d = json_object_new_object(), *rep;
	int rc;

	if (!d)
		return -ENOMEM;
	json_object_object_add(d, "key", wlk__etcd_jkey(l->key, l->key_len));
	rc = wlk__etcd_call(&m->conn, "/v3/kv/deleterange", d, &rep);
	json_object_put(d);
	if (!rc)
		json_object_put(rep);
	return rc;
}

/*
 * wlk__etcd_grant_of() - whether @l's entry is held in @k (classified):
 * then its token is the revision of @k. An entry that is gone while its
 * lease is not was held, and stolen, before this read (a steal deletes
 * holders only): a grant, stolen already, whose token is the entry's
 * creation (below the stealer's, and so refused by a fenced resource).
 * Gone with its lease: WLK_EABORTED.
 */
int wlk__etcd_grant_of(struct wlk__etcd_manager *m, struct wlk__etcd_lock *l,
		       struct wlk__etcd_kvs *k, bool *held)
{
	struct wlk__etcd_entry *e = wlk__etcd_kvs_find(k, l->key, l->key_len);
	int64_t put = uatomic_read(&l->put_rev);

	if (!e) {
		if (!put || l->lease != uatomic_read(&m->lease))
			return WLK_EABORTED;
		uatomic_set(&l->gone, 1);
		l->base.token = (uint64_t)put;
		*held = true;
		return 0;
	}
	uatomic_set(&l->put_rev, e->create_rev);
	*held = e->held;
	if (e->held)
		l->base.token = (uint64_t)k->revision;
	return 0;
}

/* Our entry in @k, held: the grant. */
static int grant_if_held(struct req *r, struct wlk__etcd_kvs *k, bool *held)
{
	wlk__etcd_classify(k);
	return wlk__etcd_grant_of(r->m, r->l, k, held);
}

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

static int request(struct req *r, const struct wlk_options *o, bool wait,
		   bool *held)
{
	struct wlk__etcd_manager *m = r->m;
	uint64_t deadline = wlk__deadline_ns(o->timeout_ns);
	uint32_t ev = uatomic_read(&m->events);
	struct wlk__etcd_kvs k = { 0 };
	bool ok;
	int rc;

	rc = txn(r,
		 list(wlk__etcd_cmp(r->l->key, r->l->key_len, false, "CREATE",
				    "EQUAL", 0),
		      NULL, NULL),
		 list(op_put(r), wlk__etcd_op_range(r->np, r->np_len), NULL),
		 list(wlk__etcd_op_range(r->np, r->np_len), NULL, NULL), &ok,
		 &k);
	for (;;) {
		int why;

		if (!rc)
			rc = grant_if_held(r, &k, held);
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
		ev = uatomic_read(&m->events);
		rc = wlk__etcd_range(m, r->np, r->np_len, &k);
	}
	/* The spec: a signal found aborted after the grant, before the
	 * callback, releases the lock. */
	if (!rc && *held && o->signal && uatomic_read(&o->signal->reason)) {
		rc = uatomic_read(&o->signal->reason);
		*held = false;
	}
	if (rc && rc != -ENOENT) /* -ENOENT: the put's lease was gone */
		(void)wlk__etcd_delete(m, r->l);
	return rc;
}

static int if_available(struct req *r, bool *held)
{
	size_t n = r->np_len;
	char *x0 = malloc(n + 3), *x1 = malloc(n + 3);
	struct json_object *cmp;
	struct wlk__etcd_kvs k = { 0 };
	bool ok;
	int rc;

	if (!x0 || !x1) {
		free(x0);
		free(x1);
		return -ENOMEM;
	}
	/* The steal entries ("0x-...") and the exclusive ones ("1x-..."). */
	memcpy(x0, r->np, n);
	memcpy(x0 + n, "0x", 3);
	memcpy(x1, r->np, n);
	memcpy(x1 + n, "1x", 3);
	if (r->l->base.mode == WLK_EXCLUSIVE)
		cmp = list(wlk__etcd_cmp(r->np, n, true, "CREATE", "EQUAL", 0),
			   NULL, NULL);
	else
		cmp = list(wlk__etcd_cmp(x0, n + 2, true, "CREATE", "EQUAL", 0),
			   wlk__etcd_cmp(x1, n + 2, true, "CREATE", "EQUAL", 0),
			   NULL);
	free(x0);
	free(x1);
	rc = txn(r, cmp, list(op_put(r), wlk__etcd_op_range(r->np, n), NULL),
		 list(wlk__etcd_op_range(r->np, n), NULL, NULL), &ok, &k);
	if (rc)
		return rc;
	/* Failed, and our key absent: a miss. Present: a repeat of a Txn
	 * that applied, and an entry once held stays held until deleted. */
	wlk__etcd_classify(&k);
	if (ok || wlk__etcd_kvs_find(&k, r->l->key, r->l->key_len)) {
		rc = grant_if_held(r, &k, held);
		if (!rc && !*held)
			rc = -EPROTO; /* the cluster broke the rule */
	} else {
		*held = false;
	}
	wlk__etcd_kvs_free(&k);
	if (rc == -EPROTO)
		(void)wlk__etcd_delete(r->m, r->l);
	return rc;
}

/* One round of a steal, from the name as @k has it: 0 with *@done, or
 * an error. */
static int steal_round(struct req *r, struct wlk__etcd_kvs *k, bool *done)
{
	struct json_object *cmp = json_object_new_array();
	struct json_object *ok = json_object_new_array();
	struct wlk__etcd_kvs after = { 0 };
	size_t holders = 0;
	bool applied;
	int rc;

	if (!cmp || !ok) {
		json_object_put(cmp);
		json_object_put(ok);
		return -ENOMEM;
	}
	json_object_array_add(cmp, wlk__etcd_cmp(r->np, r->np_len, true,
						 "MOD", "LESS",
						 k->revision + 1));
	for (size_t i = 0; i < k->n && k->e[i].held; i++, holders++) {
		const struct wlk__etcd_entry *e = &k->e[i];

		json_object_array_add(cmp, wlk__etcd_cmp(e->key, e->key_len,
							 false, "VERSION",
							 "GREATER", 0));
		json_object_array_add(ok, op_delete(e->key, e->key_len));
	}
	if (holders + 2 > TXN_OPS_MAX) {
		json_object_put(cmp);
		json_object_put(ok);
		return WLK_EFULL;
	}
	json_object_array_add(ok, op_put(r));
	json_object_array_add(ok, wlk__etcd_op_range(r->np, r->np_len));
	rc = txn(r, cmp, ok,
		 list(wlk__etcd_op_range(r->np, r->np_len), NULL, NULL),
		 &applied, &after);
	if (rc)
		return rc;
	/* Managers of this process know at once (others by their watch). */
	for (size_t i = 0; applied && i < holders; i++)
		wlk__etcd_local_gone(k->e[i].key, k->e[i].key_len);
	wlk__etcd_kvs_free(k);
	*k = after;
	wlk__etcd_classify(k);
	*done = applied || wlk__etcd_kvs_find(k, r->l->key, r->l->key_len);
	return 0;
}

static int steal(struct req *r, bool *held)
{
	struct wlk__etcd_kvs k = { 0 };
	bool done = false;
	int rc = wlk__etcd_range(r->m, r->np, r->np_len, &k);

	if (!rc)
		wlk__etcd_classify(&k);
	for (int i = 0; !rc && !done && i < STEAL_ROUNDS; i++)
		rc = steal_round(r, &k, &done);
	if (!rc && !done)
		rc = WLK_EFULL;
	if (!rc) {
		rc = grant_if_held(r, &k, held);
		if (!rc && !*held)
			rc = WLK_ESTOLEN; /* stolen in turn, at once */
	}
	wlk__etcd_kvs_free(&k);
	return rc;
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
	struct req r = { .m = m, .l = l };
	char m_ch = pl->mode == WLK_EXCLUSIVE ? 'x' : 's';
	int rc;

	r.np = wlk__etcd_name_prefix(m->prefix, m->prefix_len, pl->name,
				     pl->name_len, &r.np_len);
	if (!r.np)
		return -ENOMEM;
	snprintf(r.value, sizeof(r.value), "%c %d %s", m_ch, (int)getpid(),
		 m->base.client_id);
	*queued = false;
	/* A lease found lost by the request itself (before the agent's
	 * keepalive noticed): renewed, and the request made once more. */
	for (int round = 0; round < LEASE_ROUNDS; round++) {
		l->gone = 0;
		l->put_rev = 0;
		l->releasing = false;
		r.lease = uatomic_read(&m->lease);
		l->lease = r.lease;
		snprintf(tail, sizeof(tail), "%c%c-%016llx-%016llx",
			 o->steal ? '0' : '1', m_ch,
			 (unsigned long long)r.lease,
			 (unsigned long long)uatomic_add_return(&m->seq, 1));
		l->key_len = r.np_len + strlen(tail);
		l->key = malloc(l->key_len + 1);
		if (!l->key) {
			rc = -ENOMEM;
			break;
		}
		memcpy(l->key, r.np, r.np_len);
		memcpy(l->key + r.np_len, tail, strlen(tail) + 1);
		track(m, l, true);
		if (o->steal)
			rc = steal(&r, held);
		else if (o->if_available)
			rc = if_available(&r, held);
		else
			rc = request(&r, o, wait, held);
		*queued = !rc && !*held && !wait && !o->steal &&
			  !o->if_available;
		if (!rc && (*held || *queued))
			break;
		track(m, l, false);
		forget_key(l);
		if (rc != -ENOENT || uatomic_read(&m->base.closed))
			break;
		rc = wlk__etcd_lease_renew(m, r.lease);
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
 * range of its name): 0 with *@held, or an error (WLK_EABORTED: its entry
 * went with a lost lease).
 */
int wlk__etcd_check(struct wlk__etcd_manager *m, struct wlk_lock *pl,
		    bool *held)
{
	struct req r = { .m = m, .l = wlk__etcd_l(pl) };
	struct wlk__etcd_kvs k = { 0 };
	int rc;

	r.np = wlk__etcd_name_prefix(m->prefix, m->prefix_len, pl->name,
				     pl->name_len, &r.np_len);
	if (!r.np)
		return -ENOMEM;
	rc = wlk__etcd_range(m, r.np, r.np_len, &k);
	if (!rc)
		rc = grant_if_held(&r, &k, held);
	wlk__etcd_kvs_free(&k);
	free(r.np);
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
	(void)wlk__etcd_delete(m, l);
	forget_key(l);
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
	struct req r = { .m = m, .l = l };
	bool ok = false;
	int rc;

	pthread_mutex_lock(&m->lmu);
	l->releasing = true;
	cds_list_del(&l->link);
	pthread_mutex_unlock(&m->lmu);
	if (uatomic_read(&m->base.closed)) {
		forget_key(l);
		return WLK_ESTATE;
	}
	rc = txn(&r,
		 list(wlk__etcd_cmp(l->key, l->key_len, false, "VERSION",
				    "GREATER", 0),
		      NULL, NULL),
		 list(op_delete(l->key, l->key_len), NULL, NULL),
		 json_object_new_array(), &ok, NULL);
	if (!rc && (!ok || uatomic_read(&l->gone)))
		rc = WLK_ESTOLEN;
	forget_key(l);
	return rc;
}
