/* SPDX-License-Identifier: MIT */
/*
 * query.c - LockManager.query() over a segment: spec 4.5 "snapshot the
 * lock state", for the shared-memory engine.
 *
 * The copy is made under the segment mutex into buffers allocated before
 * taking it, sized from the segment's usage counters (read without the
 * mutex, so possibly stale): if they turn out too small, the mutex is
 * released, the buffers grow, and the copy starts over. The API objects are
 * built after unlocking.
 *
 * The copy is one instant's state: while it runs the freeze word is set,
 * and fast operations that complete meanwhile wait for it (layout.h,
 * QUERY).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "inspect_internal.h"

struct qent {
	size_t name_off;
	uint32_t name_len;
	uint32_t cid;  /* index into qbuf.cids */
	uint8_t mode;
	bool held;
	uint64_t scope; /* wlk__scope_id(), or 0 */
};

struct qcid {
	char id[WLK_CLIENT_ID_MAX + 1];
	pid_t pid;
	uint32_t agent; /* its process's agent slot (reap_owners()) */
};

struct qbuf {
	char *names;
	size_t names_cap, names_used;
	struct qent *ents;
	size_t ents_cap, ents_used;
	struct qcid *cids;
	size_t cids_cap, cids_used;
	uint32_t *cmap; /* client slot -> index into cids, or WLK_NIL */
};

/* A snapshot of a segment: the API's, and the buffers its infos point
 * into. */
struct seg_snapshot {
	struct wlk_snapshot s;
	struct qbuf buf;
};

static void qbuf_free(struct qbuf *q)
{
	free(q->names);
	free(q->ents);
	free(q->cids);
	free(q->cmap);
	*q = (struct qbuf){0};
}

static int qbuf_alloc(struct qbuf *q, size_t names, size_t ents, size_t cids,
		      uint32_t max_clients)
{
	qbuf_free(q);
	q->names_cap = names;
	q->ents_cap = ents;
	q->cids_cap = cids;
	/* At least one of each: malloc(0) may return NULL, which is not
	 * "out of memory". */
	q->names = malloc(names ? names : 1);
	q->ents = malloc((ents ? ents : 1) * sizeof(*q->ents));
	q->cids = malloc((cids ? cids : 1) * sizeof(*q->cids));
	q->cmap = malloc((max_clients ? max_clients : 1) * sizeof(*q->cmap));
	if (!q->names || !q->ents || !q->cids || !q->cmap) {
		qbuf_free(q);
		return -ENOMEM;
	}
	return 0;
}

/* Copy the client of a request once; returns its index or WLK_NIL. */
static uint32_t copy_client(struct wlk__bucket *b, struct qbuf *q,
			    uint32_t ci)
{
	const struct wlk_seg_client *c = wlk__client_at(b, ci);
	uint32_t len;

	if (!c)
		return WLK_NIL;
	if (q->cmap[ci] != WLK_NIL)
		return q->cmap[ci];
	if (q->cids_used == q->cids_cap)
		return WLK_NIL;
	len = c->id_len;
	if (!len || len > WLK_CLIENT_ID_MAX ||
	    wlk__text_copy(b, c->id, len, q->cids[q->cids_used].id))
		return WLK_NIL;
	q->cids[q->cids_used].id[len] = '\0';
	q->cids[q->cids_used].pid = (pid_t)c->pid;
	q->cids[q->cids_used].agent = c->agent;
	q->cmap[ci] = (uint32_t)q->cids_used;
	return (uint32_t)q->cids_used++;
}

/* Append the requests of one list of a name. */
static int copy_list(struct wlk__bucket *b, struct qbuf *q, uint32_t head,
		     size_t name_off, uint32_t name_len, bool held)
{
	uint32_t ri = head;

	for (uint32_t steps = 0; ri != WLK_NIL; steps++) {
		const struct wlk_seg_request *r = wlk__req_at(b, ri);
		struct qent *e;

		if (!r || !wlk__walk_ok(b, steps))
			return wlk__corrupt(b);
		if (q->ents_used == q->ents_cap)
			return -ENOSPC;
		e = &q->ents[q->ents_used];
		e->cid = copy_client(b, q, r->client);
		if (e->cid == WLK_NIL)
			return q->cids_used == q->cids_cap ? -ENOSPC
							   : wlk__corrupt(b);
		e->name_off = name_off;
		e->name_len = name_len;
		e->mode = r->mode == WLK_SHARED ? WLK_SHARED : WLK_EXCLUSIVE;
		e->held = held;
		e->scope = r->flags & WLK_REQF_SCOPE ? wlk__scope_id(b, ri) : 0;
		q->ents_used++;
		ri = r->next;
	}
	return 0;
}

/* Copy name @ni and its lists. -ENOSPC: the buffers are too small. */
static int copy_name(struct wlk__bucket *b, struct qbuf *q, uint32_t ni)
{
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint32_t len = n->len;
	size_t off = q->names_used;
	int rc;

	if (WLK_WORD_STATE(n->word) != WLK_SLOT_USED ||
	    len > b->geo.max_name_len)
		return wlk__corrupt(b);
	if (q->names_cap - q->names_used < (size_t)len + 1)
		return -ENOSPC;
	if (wlk__name_copy(b, n, len, q->names + off))
		return wlk__corrupt(b);
	q->names[off + len] = '\0';
	q->names_used += (size_t)len + 1;
	rc = copy_list(b, q, n->h_head, off, len, true);
	if (!rc)
		rc = copy_list(b, q, n->q_head, off, len, false);
	return rc;
}

/*
 * The copy itself, under the mutex. -ENOSPC: the buffers are too small.
 * It walks the name lists (layout.h, NAME LISTS), not the table: a lock
 * held through a fast word is on an idle name, and joins the held set (the
 * name moves to the busy list); then every busy name is copied.
 */
static int copy_state(struct wlk__bucket *b, struct qbuf *q)
{
	uint32_t ni = b->hdr->idle_head, steps = 0;
	int rc;

	q->names_used = q->ents_used = q->cids_used = 0;
	memset(q->cmap, 0xff, b->geo.max_clients * sizeof(*q->cmap));
	for (; ni != WLK_NIL; steps++) {
		struct wlk_seg_name *n = wlk__name_at(b, ni);
		uint32_t next;

		if (!n || steps >= b->geo.max_names)
			return wlk__corrupt(b);
		next = n->list_next;
		if (wlk__fast_held(n)) {
			rc = wlk__name_inflate(b, ni);
			if (rc)
				return rc;
		}
		ni = next;
	}
	ni = b->hdr->busy_head;
	for (steps = 0; ni != WLK_NIL; steps++) {
		struct wlk_seg_name *n = wlk__name_at(b, ni);

		if (!n || steps >= b->geo.max_names)
			return wlk__corrupt(b);
		rc = copy_name(b, q, ni);
		if (rc)
			return rc;
		ni = n->list_next;
	}
	return 0;
}

static int snapshot_build(struct seg_snapshot *ss)
{
	struct wlk_snapshot *s = &ss->s;
	struct qbuf *q = &ss->buf;
	size_t nh = 0, np = 0;

	for (size_t i = 0; i < q->ents_used; i++)
		q->ents[i].held ? nh++ : np++;
	s->held = calloc(nh ? nh : 1, sizeof(*s->held));
	s->pending = calloc(np ? np : 1, sizeof(*s->pending));
	if (!s->held || !s->pending)
		return -ENOMEM;
	for (size_t i = 0; i < q->ents_used; i++) {
		const struct qent *e = &q->ents[i];
		struct wlk_lock_info *li = e->held ? &s->held[s->n_held++]
						   : &s->pending[s->n_pending++];

		li->name = q->names + e->name_off;
		li->name_len = e->name_len;
		li->mode = (enum wlk_mode)e->mode;
		li->client_id = q->cids[e->cid].id;
		li->pid = q->cids[e->cid].pid;
		li->scope = e->scope;
	}
	return 0;
}

/* Buffer sizes: what the copy may need, and the most it can. */
struct qsize {
	size_t names, ents, cids;
};

static size_t cap(size_t n, size_t most)
{
	return n < most ? n : most;
}

static size_t grow(size_t n, size_t most)
{
	return n >= most / 2 ? most : n * 2;
}

/*
 * The sizes to start from, from the usage counters, and the most the
 * geometry allows (a name's bytes and NUL each, a request, a client). The
 * counters are derived state: a count the geometry cannot reach is damage,
 * flagged for repair (recover.c rebuilds them).
 * Return: 0, or WLK_ECORRUPT.
 */
static int qsize_first(struct wlk__bucket *b, struct qsize *want,
		       struct qsize *most)
{
	struct wlk_seg_header *h = b->hdr;
	uint64_t bytes = uatomic_read(&h->name_bytes);
	uint32_t names = uatomic_read(&h->n_names);
	uint32_t reqs = uatomic_read(&h->n_requests);
	uint32_t clients = uatomic_read(&h->n_clients);

	most->names = (size_t)b->geo.max_names * (b->geo.max_name_len + 1);
	most->ents = b->geo.max_requests;
	most->cids = b->geo.max_clients;
	if (names > b->geo.max_names ||
	    bytes > (uint64_t)b->geo.max_names * b->geo.max_name_len ||
	    reqs > b->geo.max_requests || clients > b->geo.max_clients)
		return wlk__corrupt(b);
	want->names = cap((size_t)bytes + names + QUERY_SLACK, most->names);
	want->ents = cap((size_t)reqs + QUERY_SLACK, most->ents);
	want->cids = cap((size_t)clients + QUERY_SLACK, most->cids);
	return 0;
}

/* The copy, under the mutex, with the fast path frozen. */
static int copy_frozen(struct wlk__bucket *b, struct qbuf *q)
{
	struct wlk_seg_header *h = b->hdr;
	int rc;

	uatomic_set(&h->freeze, 1);
	cmm_smp_mb(); /* the freeze, then the fast words (layout.h, QUERY) */
	WLK_FAILPOINT(query_frozen);
	rc = copy_state(b, q);
	cmm_smp_mb(); /* every read of the copy, then the thaw */
	uatomic_set(&h->freeze, 0);
	return rc;
}

/*
 * Dead processes hold nothing: probe the processes whose managers the copy
 * shows, under the same hold of the mutex, and reap those found dead.
 * Only those: a query costs what the bucket holds, not the processes
 * attached to it. Return: true if one was dead (or left for another pass,
 * the wake list being full): the copy is stale, take it again.
 */
static bool reap_owners(struct wlk__bucket *b, const struct qbuf *q,
			struct wlk__wake *wake)
{
	bool stale = false;

	for (size_t i = 0; i < q->cids_used; i++)
		stale |= wlk__reap_agent(b, q->cids[i].agent, wake);
	return stale || wake->n_reaped == WLK_REAP_BATCH;
}

static int snapshot_copy(struct wlk__bucket *b, struct qbuf *q)
{
	struct qsize want = {0}, most = {0};
	struct wlk__wake wake;
	int rc = qsize_first(b, &want, &most);

	if (rc) {
		/* Read before locking, they would stop every later call
		 * here if nobody else locked: repair them now (wlk__lock()
		 * does, or poisons the segment). */
		if (!wlk__lock(b, &wake))
			wlk__unlock(b, &wake);
		return rc;
	}
	for (;;) {
		rc = qbuf_alloc(q, want.names, want.ents, want.cids,
				b->geo.max_clients);
		if (rc)
			return rc;
		rc = wlk__lock(b, &wake);
		if (rc)
			return rc;
		rc = copy_frozen(b, q);
		if (!rc && reap_owners(b, q, &wake)) {
			wlk__unlock(b, &wake);
			continue;
		}
		/* Room for all a sound segment holds, and still too little:
		 * lists that share requests, or the like. */
		if (rc == -ENOSPC && want.names == most.names &&
		    want.ents == most.ents && want.cids == most.cids)
			rc = wlk__corrupt(b);
		wlk__unlock(b, &wake);
		if (rc != -ENOSPC)
			return rc;
		want.names = grow(want.names, most.names);
		want.ents = grow(want.ents, most.ents);
		want.cids = grow(want.cids, most.cids);
	}
}

static void snapshot_free(struct wlk_snapshot *s)
{
	struct seg_snapshot *ss = caa_container_of(s, struct seg_snapshot, s);

	qbuf_free(&ss->buf);
	free(s->held);
	free(s->pending);
	free(ss);
}

/*
 * wlk__snapshot_take() - spec 4.5 over the segment of @b: a snapshot of
 * its lock state, for wlk_query() (through the shared-memory engine).
 * Return: 0 with *@out set, -ENOMEM, or an error from the segment.
 */
int wlk__snapshot_take(struct wlk__bucket *b, struct wlk_snapshot **out)
{
	struct seg_snapshot *ss = calloc(1, sizeof(*ss));
	int rc;

	if (!ss)
		return -ENOMEM;
	ss->s.free = snapshot_free;
	rc = snapshot_copy(b, &ss->buf);
	if (!rc)
		rc = snapshot_build(ss);
	if (rc) {
		snapshot_free(&ss->s);
		return rc;
	}
	*out = &ss->s;
	return 0;
}
