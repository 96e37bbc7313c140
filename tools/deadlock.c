/* SPDX-License-Identifier: MIT */
/*
 * deadlock.c - deadlocks in a snapshot: cycles of the waits-for graph over
 * clients (managers).
 *
 * A pending request waits for the clients holding a lock on its name that
 * conflicts with it, and for the clients of the requests queued ahead of it
 * whose requests conflict with it (spec 4.4: the queue is served in order).
 * A client waits for everyone else its pending requests wait for. A cycle
 * in that graph is a deadlock: none of its clients can get what it waits
 * for until another on the cycle lets go.
 *
 * What the graph cannot see. A manager shared by threads is one client:
 * a request queued behind its own client's lock (another thread's, which
 * will let go) is no edge at all, and a cycle can pass through a client
 * whose waiting thread is not the one holding, which may still let go.
 * And a client may wait for something other than a lock of this bucket
 * (another bucket, a pipe, a thread that holds nothing here): a stuck
 * client outside every cycle may still be waiting for good.
 *
 * Each client that is the lowest (in the snapshot's order) on some cycle
 * gets one such cycle reported: a depth-first search from it keeps to the
 * clients above it. A client on several cycles may show on one only; every
 * deadlocked set of clients shows at least once. The snapshot's clients
 * number at most the bucket's capacity (1024 by default); the search is
 * quadratic in them at worst.
 */
#include <stdlib.h>
#include <string.h>

#include "shm-inspect.h"

/* One edge: client @from waits, through pending request @req, for client
 * @to, which holds or is queued ahead with request @by. */
struct edge {
	int from, to;
	size_t req, by;
};

struct graph {
	struct edge *e;
	size_t n, cap;
	size_t *first; /* per client: its first edge (edges sorted by from) */
	size_t n_clients;
};

static int edge_add(struct graph *g, int from, int to, size_t req, size_t by)
{
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 64;
		struct edge *e = realloc(g->e, cap * sizeof(*e));

		if (!e)
			return -1;
		g->e = e;
		g->cap = cap;
	}
	g->e[g->n++] = (struct edge){from, to, req, by};
	return 0;
}

/* The edges of pending request @k of the name whose requests are
 * [@b, @e): holders first, then those ahead of it. */
static int edges_of(struct graph *g, const struct wlk_inspect_snapshot *s,
		    size_t b, size_t k)
{
	const struct wlk_inspect_request *p = &s->requests[k];

	for (size_t i = b; i < k; i++) {
		const struct wlk_inspect_request *q = &s->requests[i];

		if (q->client < 0 || q->client == p->client ||
		    !conflicts(p, q))
			continue;
		if (edge_add(g, p->client, q->client, k, i))
			return -1;
	}
	return 0;
}

static int cmp_edge(const void *a, const void *b)
{
	const struct edge *x = a, *y = b;

	if (x->from != y->from)
		return x->from < y->from ? -1 : 1;
	return x->req < y->req ? -1 : x->req > y->req;
}

static int graph_build(struct graph *g, const struct wlk_inspect_snapshot *s)
{
	memset(g, 0, sizeof(*g));
	g->n_clients = s->n_clients;
	for (size_t i = 0, e; i < s->n_requests; i = e) {
		e = name_end(s, i);
		for (size_t k = i; k < e; k++) {
			const struct wlk_inspect_request *p = &s->requests[k];

			if (p->state == WLK_REQ_PENDING && p->name &&
			    p->client >= 0 &&
			    (size_t)p->client < s->n_clients &&
			    edges_of(g, s, i, k))
				return -1;
		}
	}
	if (g->n)
		qsort(g->e, g->n, sizeof(*g->e), cmp_edge);
	g->first = calloc(g->n_clients + 1, sizeof(*g->first));
	if (!g->first)
		return -1;
	for (size_t c = 0, i = 0; c <= g->n_clients; c++) {
		while (i < g->n && (size_t)g->e[i].from < c)
			i++;
		g->first[c] = i;
	}
	return 0;
}

static void graph_free(struct graph *g)
{
	free(g->e);
	free(g->first);
}

/* The search from @root: @path holds the edges taken, @on the clients on
 * it. Return: the cycle's length once an edge back to @root closes it. */
struct search {
	const struct graph *g;
	int root;
	size_t *path;
	bool *on;
};

static size_t dfs(struct search *x, int c, size_t depth)
{
	const struct graph *g = x->g;

	for (size_t i = g->first[c]; i < g->first[c + 1]; i++) {
		int to = g->e[i].to;

		if (to < x->root || (size_t)to >= g->n_clients)
			continue;
		x->path[depth] = i;
		if (to == x->root)
			return depth + 1; /* never 1: no edge to oneself */
		if (x->on[to])
			continue;
		x->on[to] = true;
		size_t n = dfs(x, to, depth + 1);

		if (n)
			return n;
	}
	return 0;
}

/*
 * find_deadlocks() - call @cb (or nobody, for NULL) with each cycle of
 * @s's waits-for graph found: its edges, as (waiting request, blocking
 * request) index pairs into s->requests, @n of them. Return: the cycles
 * found, or -1 (no memory).
 */
long find_deadlocks(const struct wlk_inspect_snapshot *s,
		    void (*cb)(const struct wlk_inspect_snapshot *s,
			       const size_t *req, const size_t *by, size_t n,
			       void *arg),
		    void *arg)
{
	struct graph g;
	struct search x = {0};
	size_t *req = NULL, *by = NULL;
	long found = 0;

	if (graph_build(&g, s))
		found = -1;
	if (!found && s->n_clients) {
		x.g = &g;
		x.path = calloc(s->n_clients + 1, sizeof(*x.path));
		x.on = calloc(s->n_clients, sizeof(*x.on));
		req = calloc(s->n_clients + 1, sizeof(*req));
		by = calloc(s->n_clients + 1, sizeof(*by));
		if (!x.path || !x.on || !req || !by)
			found = -1;
	}
	for (int c = 0; found >= 0 && (size_t)c < s->n_clients; c++) {
		size_t n;

		memset(x.on, 0, s->n_clients * sizeof(*x.on));
		x.root = c;
		x.on[c] = true;
		n = dfs(&x, c, 0);
		if (!n)
			continue;
		for (size_t i = 0; i < n; i++) {
			req[i] = g.e[x.path[i]].req;
			by[i] = g.e[x.path[i]].by;
		}
		if (cb)
			cb(s, req, by, n, arg);
		found++;
	}
	free(x.path);
	free(x.on);
	free(req);
	free(by);
	graph_free(&g);
	return found;
}

/* "pid 12 "client"" for the owner of request @q. */
static void put_who(FILE *f, const struct wlk_inspect_request *q)
{
	fprintf(f, "pid %d \"", (int)q->pid);
	esc_c(f, q->client_id, strlen(q->client_id));
	fputc('"', f);
}

static void text_cycle(const struct wlk_inspect_snapshot *s,
		       const size_t *req, const size_t *by, size_t n,
		       void *arg)
{
	FILE *f = arg;

	fprintf(f, "  a cycle of %zu client%s:\n", n, n == 1 ? "" : "s");
	for (size_t i = 0; i < n; i++) {
		const struct wlk_inspect_request *p = &s->requests[req[i]];
		const struct wlk_inspect_request *q = &s->requests[by[i]];

		fputs("    ", f);
		put_who(f, p);
		fprintf(f, " waits for \"");
		esc_c(f, p->name, p->name_len);
		fprintf(f, "\" (%s), %s by ", mode_name(p->mode),
			q->state == WLK_REQ_HELD ? "held" : "queued ahead");
		put_who(f, q);
		fprintf(f, " (%s)\n", mode_name(q->mode));
	}
}

/*
 * text_deadlocks() - "Deadlocks:" and each cycle, if there is one.
 * Return: the cycles, or -1 (no memory: nothing printed).
 */
long text_deadlocks(FILE *f, const struct wlk_inspect_snapshot *s)
{
	long n = find_deadlocks(s, NULL, NULL);

	if (n > 0) {
		fprintf(f, "Deadlocks: %ld\n", n);
		find_deadlocks(s, text_cycle, f);
	}
	return n;
}

static void json_cycle(const struct wlk_inspect_snapshot *s,
		       const size_t *req, const size_t *by, size_t n,
		       void *arg)
{
	struct json *j = arg;

	json_array(j, NULL);
	for (size_t i = 0; i < n; i++) {
		const struct wlk_inspect_request *p = &s->requests[req[i]];
		const struct wlk_inspect_request *q = &s->requests[by[i]];

		json_object(j, NULL);
		json_i64(j, "pid", p->pid);
		json_str(j, "client_id", p->client_id);
		json_bytes(j, "name", p->name, p->name_len);
		json_str(j, "mode", mode_name(p->mode));
		json_u64(j, "slot", p->slot);
		json_object(j, "blocked_by");
		json_i64(j, "pid", q->pid);
		json_str(j, "client_id", q->client_id);
		json_str(j, "state", q->state == WLK_REQ_HELD ? "held"
							      : "pending");
		json_str(j, "mode", mode_name(q->mode));
		json_u64(j, "slot", q->slot);
		json_end(j);
		json_end(j);
	}
	json_end(j);
}

/* json_deadlocks() - "deadlocks": an array of cycles, each an array of
 * edges (a waiting request and what blocks it). */
void json_deadlocks(struct json *j, const struct wlk_inspect_snapshot *s)
{
	json_array(j, "deadlocks");
	find_deadlocks(s, json_cycle, j);
	json_end(j);
}
