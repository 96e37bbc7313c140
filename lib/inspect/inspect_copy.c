/* SPDX-License-Identifier: MIT */
/*
 * inspect_copy.c - wlk_inspect_snapshot(): copy a segment's state out.
 *
 * The copy is made in two steps. First the raw bytes are copied into
 * buffers allocated beforehand (under the segment mutex when locked, so no
 * allocation or system call happens there; without it, every index and
 * length is read once into a local and bounded, and every walk is bounded,
 * so a segment changing underneath yields an odd copy, never a crash). Then
 * the public structures are built and each agent's liveness is checked.
 */
#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "inspect_internal.h"

struct raw_agent {
	uint32_t slot, pid, lifeline;
	uint64_t attached;
};

struct raw_client {
	uint32_t slot, agent, pid;
	uint64_t opened;
	char id[WLK_CLIENT_ID_MAX + 1];
};

struct raw_req {
	uint32_t slot, name_len, position, client;
	size_t name_off; /* SIZE_MAX: no name */
	uint8_t mode, state;
	uint64_t token, requested, granted;
	uint64_t scope;
};

/* The public snapshot and everything it points to. */
struct snap {
	struct wlk_inspect_snapshot pub; /* first: freed through it */
	struct wlk_seg_header hdr;       /* copy of the header */
	char path[sizeof("/dev/shm/") + WLK_SHM_NAME_MAX];
	char origin[WLK_ORIGIN_MAX + 1];
	char bucket[WLK_BUCKET_MAX + 1];
	char partition[WLK_PARTITION_MAX + 1];
	struct raw_agent *ra;
	struct raw_client *rc;
	struct raw_req *rr;
	char *names;
	size_t n_ra, n_rc, n_rr, names_used, rr_cap, names_cap;
	uint32_t mutex; /* its lock word before we took it ourselves */
	uint64_t max_token; /* largest token of the names in use */
	uint32_t spare;     /* reserved or fast slots, held ones excluded */
};

static uint32_t load32(const uint32_t *p)
{
	return uatomic_read(p);
}

static void copy_agents_clients(struct wlk__bucket *b, struct snap *s)
{
	for (uint32_t i = 0; i < b->geo.max_agents; i++) {
		struct wlk_seg_agent *a = wlk__agent(b, i);

		if (WLK_WORD_STATE(load32(&a->word)) != WLK_SLOT_USED)
			continue;
		s->ra[s->n_ra++] = (struct raw_agent){
			i, a->pid, load32(wlk__lifeline_word(b, i)),
			a->start_ns};
	}
	for (uint32_t i = 0; i < b->geo.max_clients; i++) {
		struct wlk_seg_client *c = wlk__client(b, i);
		struct raw_client *r = &s->rc[s->n_rc];
		uint32_t len = c->id_len;

		if (WLK_WORD_STATE(load32(&c->word)) != WLK_SLOT_USED)
			continue;
		/* A chain broken (or changing, without the mutex): no id. */
		if (len > WLK_CLIENT_ID_MAX ||
		    wlk__text_copy(b, c->id, len, r->id))
			len = 0;
		r->slot = i;
		r->agent = c->agent;
		r->pid = c->pid;
		r->opened = c->opened_ns;
		r->id[len] = '\0';
		s->n_rc++;
	}
}

/*
 * The scope id of request @ri (wlk_inspect_snapshot.scopes): 0 for a
 * single name, else its lead's slot + 1 and gen, found by the ring's links
 * read once each and bounded (without the mutex the ring may change
 * underneath: an odd id, never a crash).
 */
static uint64_t scope_of(struct wlk__bucket *b, uint32_t ri)
{
	uint32_t i = ri;

	for (uint32_t k = 0; k < WLK_SCOPE_MEMBERS_MAX; k++) {
		const struct wlk_seg_request *r = wlk__req(b, i);
		uint8_t f = uatomic_read(&r->flags);

		if (!(f & WLK_REQF_SCOPE))
			return k ? (uint64_t)ri + 1 : 0;
		if (f & WLK_REQF_LEAD)
			return (uint64_t)WLK_WORD_GEN(load32(&r->word)) << 32 |
			       (i + 1u);
		i = load32(&r->scope);
		if (i >= b->geo.max_requests)
			break;
	}
	return (uint64_t)ri + 1;
}

static int add_req(struct wlk__bucket *b, struct snap *s, uint32_t ri,
		   size_t name_off, uint32_t name_len, uint8_t state,
		   uint32_t position)
{
	struct wlk_seg_request *r = wlk__req(b, ri);

	if (s->n_rr == s->rr_cap)
		return -ENOSPC;
	s->rr[s->n_rr++] = (struct raw_req){
		.slot = ri, .name_len = name_len, .position = position,
		.client = r->client, .name_off = name_off,
		.mode = r->mode == WLK_SHARED ? WLK_SHARED : WLK_EXCLUSIVE,
		.state = state, .token = r->token,
		/* One stamp (layout.h): the request's time while pending,
		 * the grant's after. */
		.requested = state == WLK_REQ_PENDING ? r->stamp_ns : 0,
		.granted = state == WLK_REQ_PENDING ? 0 : r->stamp_ns,
		.scope = scope_of(b, ri)};
	return 0;
}

/* One list of a name, walked with a bound. */
static int copy_list(struct wlk__bucket *b, struct snap *s, uint32_t head,
		     size_t off, uint32_t len, uint8_t state)
{
	uint32_t ri = head;

	for (uint32_t pos = 0; ri < b->geo.max_requests &&
			       pos < b->geo.max_requests; pos++) {
		int rc = add_req(b, s, ri, off, len, state,
				 state == WLK_REQ_PENDING ? pos : 0);

		if (rc)
			return rc;
		ri = load32(&wlk__req(b, ri)->next);
	}
	return 0;
}

/* A fast word's holder or waiter part @who, if it names a FAST slot. */
static uint32_t fast_slot(struct wlk__bucket *b, uint64_t who)
{
	uint32_t s1 = WLK_FAST_HOLDER1(who);

	if (!s1 || s1 - 1 >= b->geo.max_requests ||
	    WLK_WORD_STATE(load32(&wlk__req(b, s1 - 1)->word)) !=
		    WLK_SLOT_FAST)
		return WLK_NIL;
	return s1 - 1;
}

/* A lock held through the name's fast word (layout.h, FAST PATH), and the
 * request waiting by it. */
static int copy_fast(struct wlk__bucket *b, struct snap *s, uint32_t ni,
		     size_t off, uint32_t len)
{
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint64_t f, c;
	uint32_t h, w = WLK_NIL;
	int rc;

	(void)wlk__fast_words(n, &f, &c); /* a private copy: it holds */
	h = fast_slot(b, f);
	if (h == WLK_NIL)
		return 0;
	if (f & WLK_FAST_WAIT)
		w = fast_slot(b, c);
	s->spare--; /* counted among the reserved, but it is held */
	rc = add_req(b, s, h, off, len, WLK_REQ_HELD, 0);
	if (rc || w == WLK_NIL || w == h)
		return rc;
	s->spare--; /* and this one waits */
	return add_req(b, s, w, off, len, WLK_REQ_PENDING, 0);
}

static int copy_names(struct wlk__bucket *b, struct snap *s)
{
	for (uint32_t i = 0; i < b->geo.max_names; i++) {
		struct wlk_seg_name *n = wlk__name(b, i);
		uint32_t len = n->len;
		size_t off = s->names_used;
		int rc;

		if (WLK_WORD_STATE(load32(&n->word)) != WLK_SLOT_USED ||
		    len > b->geo.max_name_len)
			continue;
		if (s->names_cap - s->names_used < (size_t)len + 1)
			return -ENOSPC;
		if (wlk__name_copy(b, n, len, s->names + off))
			continue; /* broken, or changing without the mutex */
		s->names[off + len] = '\0';
		s->names_used += (size_t)len + 1;
		if (uatomic_read(&n->token) > s->max_token)
			s->max_token = uatomic_read(&n->token);
		rc = copy_fast(b, s, i, off, len);
		if (!rc)
			rc = copy_list(b, s, load32(&n->h_head), off, len,
				       WLK_REQ_HELD);
		if (!rc)
			rc = copy_list(b, s, load32(&n->q_head), off, len,
				       WLK_REQ_PENDING);
		if (rc)
			return rc;
	}
	/* Stolen requests are in no list; their names may be gone. */
	for (uint32_t i = 0; i < b->geo.max_requests; i++) {
		struct wlk_seg_request *r = wlk__req(b, i);
		uint32_t w = load32(&r->word), ni = r->name, len;
		size_t off = SIZE_MAX;

		if (WLK_WORD_STATE(w) == WLK_SLOT_RESERVED ||
		    WLK_WORD_STATE(w) == WLK_SLOT_FAST)
			s->spare++;
		if (WLK_WORD_STATE(w) != WLK_SLOT_STOLEN)
			continue;
		len = ni < b->geo.max_names ? wlk__name(b, ni)->len : 0;
		if (ni < b->geo.max_names && len <= b->geo.max_name_len &&
		    load32(&wlk__name(b, ni)->word) ==
			    WLK_WORD(r->name_gen, WLK_SLOT_USED)) {
			if (s->names_cap - s->names_used < (size_t)len + 1)
				return -ENOSPC;
			off = s->names_used;
			if (wlk__name_copy(b, wlk__name(b, ni), len,
					   s->names + off)) {
				off = SIZE_MAX;
			} else {
				s->names[off + len] = '\0';
				s->names_used += (size_t)len + 1;
			}
		}
		if (add_req(b, s, i, off, off == SIZE_MAX ? 0 : len,
			    WLK_REQ_STOLEN, 0))
			return -ENOSPC;
	}
	return 0;
}

/* Buffers for the raw copy; the request and name ones may grow. */
static int raw_alloc(struct wlk__bucket *b, struct snap *s, size_t reqs,
		     size_t bytes)
{
	free(s->rr);
	free(s->names);
	s->rr_cap = reqs;
	s->names_cap = bytes;
	s->rr = malloc(reqs * sizeof(*s->rr));
	s->names = malloc(bytes);
	if (!s->ra)
		s->ra = malloc(b->geo.max_agents * sizeof(*s->ra));
	if (!s->rc)
		s->rc = malloc(b->geo.max_clients * sizeof(*s->rc));
	return s->rr && s->names && s->ra && s->rc ? 0 : -ENOMEM;
}

static int copy_once(struct wlk__bucket *b, struct snap *s, bool lock)
{
	struct wlk__wake wake;
	int rc;

	s->mutex = load32((const uint32_t *)&b->hdr->sync.mutex);
	rc = lock ? wlk__lock(b, &wake) : 0;
	if (rc)
		return rc;
	s->n_ra = s->n_rc = s->n_rr = s->names_used = 0;
	s->max_token = 0;
	s->spare = 0;
	memcpy(&s->hdr, b->hdr, sizeof(s->hdr));
	copy_agents_clients(b, s);
	rc = copy_names(b, s);
	if (lock)
		wlk__unlock(b, &wake);
	return rc;
}

static int raw_copy(struct wlk__bucket *b, struct snap *s, bool lock)
{
	const struct wlk__geo *g = &b->geo;
	size_t reqs = (size_t)g->max_requests, bytes;
	size_t max_bytes = (size_t)g->max_names * (g->max_name_len + 1);
	size_t want = (size_t)load32(&b->hdr->n_requests) * 2 + 64;
	uint64_t used = uatomic_read(&b->hdr->name_bytes);
	int rc;

	/* A damaged count must not wrap the sum: a size of 0 never grows. */
	if (used > max_bytes)
		used = max_bytes;
	bytes = (size_t)used * 2 + (size_t)load32(&b->hdr->n_names) + 1024;
	if (want < reqs)
		reqs = want;
	if (bytes > max_bytes)
		bytes = max_bytes;
	for (;;) {
		rc = raw_alloc(b, s, reqs, bytes);
		if (!rc)
			rc = copy_once(b, s, lock);
		if (rc != -ENOSPC)
			return rc;
		if (reqs == g->max_requests && bytes == max_bytes)
			return WLK_ECORRUPT; /* more than can exist */
		reqs = reqs * 2 > g->max_requests ? g->max_requests : reqs * 2;
		bytes = bytes * 2 > max_bytes ? max_bytes : bytes * 2;
	}
}

static enum wlk_liveness liveness(const struct raw_agent *a, bool our_ns)
{
	pid_t tid = (pid_t)(a->lifeline & FUTEX_TID_MASK);

	if (a->lifeline & FUTEX_OWNER_DIED || !tid)
		return WLK_DEAD;
	if (!our_ns)
		return WLK_UNKNOWN;
	/* Signal 0 checks that the thread exists in that process. */
	if (syscall(SYS_tgkill, (pid_t)a->pid, tid, 0) == 0 || errno == EPERM)
		return WLK_ALIVE;
	return WLK_DEAD;
}

/* A header string, bounded and NUL-terminated whatever the length says. */
static void ident(char *dst, size_t cap, const char *src, uint32_t len,
		  size_t src_cap)
{
	size_t n = len < src_cap ? len : src_cap;

	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

/*
 * The public header of @s: what the segment header says, bounded (its
 * strings NUL-terminated in @s), with what the copy counted and the time
 * it was taken.
 */
static void build_header(const struct wlk_inspect *in, struct snap *s)
{
	const struct wlk_seg_header *h = &s->hdr;
	const struct wlk__geo *g = &in->b.geo;
	uint32_t mutex = s->mutex;
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	memcpy(s->path, in->path, sizeof(s->path));
	ident(s->origin, sizeof(s->origin), h->origin, h->origin_len,
	      sizeof(h->origin));
	ident(s->bucket, sizeof(s->bucket), h->bucket, h->bucket_len,
	      sizeof(h->bucket));
	ident(s->partition, sizeof(s->partition), h->partition,
	      h->partition_len, sizeof(h->partition));
	s->pub.header = (struct wlk_inspect_header){
		.path = s->path, .generation = in->generation,
		.layout_version = h->layout_version,
		.segment_size = g->size,
		.created_realtime_ns = h->created_ns,
		.origin = s->origin, .bucket = s->bucket,
		.partition = s->partition,
		.poisoned = h->seg_state != WLK_SEG_READY,
		.needs_repair = h->needs_repair != 0,
		.recovery_epoch = h->recovery_epoch,
		.reaped_agents = h->reaped_agents,
		.last_token = h->next_token > s->max_token ? h->next_token
							    : s->max_token,
		.max_agents = g->max_agents,
		.max_clients = g->max_clients,
		.max_names = g->max_names,
		.max_requests = g->max_requests,
		.max_name_len = g->max_name_len,
		.agents = (uint32_t)s->n_ra, .clients = (uint32_t)s->n_rc,
		.names = h->n_names,
		.requests = h->n_requests > s->spare ? h->n_requests - s->spare
						    : 0,
		.mutex_owner_tid = (pid_t)(mutex & FUTEX_TID_MASK),
		.mutex_owner_dead = (mutex & FUTEX_OWNER_DIED) != 0,
		.locked = in->flags & WLK_INSPECT_LOCKED,
		.now_ns = (uint64_t)now.tv_sec * WLK_NSEC_PER_SEC +
			  (uint64_t)now.tv_nsec,
	};
	s->pub.arena_bytes = (uint64_t)g->max_chunks * WLK_CHUNK_SIZE;
	/* A count the table cannot hold is damage: shown as full. */
	s->pub.arena_used = (uint64_t)(h->n_chunks < g->max_chunks
					       ? h->n_chunks
					       : g->max_chunks) *
			    WLK_CHUNK_SIZE;
}

static int build(struct wlk_inspect *in, struct snap *s)
{
	struct wlk_inspect_snapshot *p = &s->pub;
	bool our_ns = wlk__same_pidns(&s->hdr);

	p->agents = calloc(s->n_ra + 1, sizeof(*p->agents));
	p->clients = calloc(s->n_rc + 1, sizeof(*p->clients));
	p->requests = calloc(s->n_rr + 1, sizeof(*p->requests));
	p->scopes = calloc(s->n_rr + 1, sizeof(*p->scopes));
	if (!p->agents || !p->clients || !p->requests || !p->scopes)
		return -ENOMEM;
	build_header(in, s);
	for (size_t i = 0; i < s->n_ra; i++)
		p->agents[i] = (struct wlk_inspect_agent){
			s->ra[i].slot, (pid_t)s->ra[i].pid,
			(pid_t)(s->ra[i].lifeline & FUTEX_TID_MASK),
			s->ra[i].attached, liveness(&s->ra[i], our_ns)};
	p->n_agents = s->n_ra;
	for (size_t i = 0; i < s->n_rc; i++) {
		struct wlk_inspect_client *c = &p->clients[i];

		*c = (struct wlk_inspect_client){
			s->rc[i].slot, -1, (pid_t)s->rc[i].pid, s->rc[i].id,
			s->rc[i].opened};
		for (size_t a = 0; a < s->n_ra; a++)
			if (s->ra[a].slot == s->rc[i].agent)
				c->agent = (int)a;
	}
	p->n_clients = s->n_rc;
	return 0;
}

static void build_requests(struct snap *s)
{
	struct wlk_inspect_snapshot *p = &s->pub;

	for (size_t i = 0; i < s->n_rr; i++) {
		const struct raw_req *r = &s->rr[i];
		struct wlk_inspect_request *q = &p->requests[i];

		*q = (struct wlk_inspect_request){
			.slot = r->slot, .mode = (enum wlk_mode)r->mode,
			.state = (enum wlk_request_state)r->state,
			.position = r->position, .client = -1,
			.client_id = "", .token = r->token,
			.requested_ns = r->requested, .granted_ns = r->granted};
		p->scopes[i] = r->scope;
		if (r->name_off != SIZE_MAX) {
			q->name = s->names + r->name_off;
			q->name_len = r->name_len;
		}
		for (size_t c = 0; c < p->n_clients; c++) {
			if (p->clients[c].slot == r->client) {
				q->client = (int)c;
				q->client_id = p->clients[c].client_id;
				q->pid = p->clients[c].pid;
			}
		}
	}
	p->n_requests = s->n_rr;
}

WLK_EXPORT int wlk_inspect_snapshot(struct wlk_inspect *in,
				    struct wlk_inspect_snapshot **out)
{
	struct snap *s;
	int rc;

	if (!in || !out)
		return WLK_EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	rc = raw_copy(&in->b, s, in->flags & WLK_INSPECT_LOCKED);
	if (!rc)
		rc = build(in, s);
	if (rc) {
		wlk_inspect_snapshot_free(&s->pub);
		return rc;
	}
	build_requests(s);
	*out = &s->pub;
	return 0;
}

WLK_EXPORT void wlk_inspect_snapshot_free(struct wlk_inspect_snapshot *p)
{
	struct snap *s = (struct snap *)p;

	if (!s)
		return;
	free(p->agents);
	free(p->clients);
	free(p->requests);
	free(p->scopes);
	free(s->ra);
	free(s->rc);
	free(s->rr);
	free(s->names);
	free(s);
}
