/* SPDX-License-Identifier: MIT */
/*
 * render.c - what the text and the JSON renderings of a snapshot share,
 * and the JSON one (its format is documented in shm-inspect(1)).
 *
 * The snapshot lists each name's held requests, then its queue in order,
 * then the stolen requests; a run of entries sharing one name pointer is
 * one name. Everything in it came from shared memory, so strings go
 * through the escapers and indices are bounded before use.
 */
#include <inttypes.h>
#include <string.h>

#include "shm-inspect.h"

const char *liveness_name(enum wlk_liveness l)
{
	switch (l) {
	case WLK_ALIVE:
		return "alive";
	case WLK_DEAD:
		return "dead";
	default:
		return "unknown";
	}
}

void json_identity(struct json *j, const struct wlk_inspect_header *h)
{
	json_str(j, "origin", h->origin);
	json_str(j, "bucket", h->bucket);
	json_str(j, "partition", h->partition);
	json_u64(j, "generation", h->generation);
	json_u64(j, "layout_version", h->layout_version);
	json_u64(j, "size", h->segment_size);
}

const char *state_name(const struct wlk_inspect_header *h)
{
	if (h->poisoned)
		return "poisoned";
	return h->needs_repair ? "needs_repair" : "ok";
}

const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

const char *mode_name(enum wlk_mode m)
{
	return m == WLK_SHARED ? "shared" : "exclusive";
}

/* The agent of a request's client, or NULL. */
const struct wlk_inspect_agent *
req_agent(const struct wlk_inspect_snapshot *s,
	  const struct wlk_inspect_request *q)
{
	int a;

	if (q->client < 0 || (size_t)q->client >= s->n_clients)
		return NULL;
	a = s->clients[q->client].agent;
	if (a < 0 || (size_t)a >= s->n_agents)
		return NULL;
	return &s->agents[a];
}

/* The end of the run of non-stolen requests on the name of request @i. */
size_t name_end(const struct wlk_inspect_snapshot *s, size_t i)
{
	const char *name = s->requests[i].name;
	size_t e = i + 1;

	if (s->requests[i].state == WLK_REQ_STOLEN)
		return e;
	while (name && e < s->n_requests &&
	       s->requests[e].state != WLK_REQ_STOLEN &&
	       s->requests[e].name == name)
		e++;
	return e;
}

/* Whether holder @h keeps pending @p from being granted (the spec). */
bool conflicts(const struct wlk_inspect_request *p,
	       const struct wlk_inspect_request *h)
{
	return p->mode == WLK_EXCLUSIVE || h->mode == WLK_EXCLUSIVE;
}

/* now - then, or false when @then is unset or in the future (damage). */
bool since(uint64_t now, uint64_t then, uint64_t *d)
{
	if (!then || then > now)
		return false;
	*d = now - then;
	return true;
}

void count_snapshot(const struct wlk_inspect_snapshot *s, struct counts *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < s->n_agents; i++) {
		if (s->agents[i].liveness == WLK_ALIVE)
			c->alive++;
		else if (s->agents[i].liveness == WLK_DEAD)
			c->dead++;
		else
			c->unknown++;
	}
	for (size_t i = 0; i < s->n_requests; i++) {
		if (s->requests[i].state == WLK_REQ_HELD)
			c->held++;
		else if (s->requests[i].state == WLK_REQ_PENDING)
			c->pending++;
		else
			c->stolen++;
	}
}

/* ---- the JSON document: keep in step with shm-inspect(1) ---- */

static void json_header(struct json *j, const struct wlk_inspect_snapshot *s)
{
	const struct wlk_inspect_header *h = &s->header;
	static const char *const tables[] = {"agents", "clients", "names",
					     "requests"};
	const uint32_t used[] = {h->agents, h->clients, h->names, h->requests};
	const uint32_t max[] = {h->max_agents, h->max_clients, h->max_names,
				h->max_requests};

	json_object(j, "segment");
	json_str(j, "path", h->path);
	json_str(j, "name", base_name(h->path));
	json_identity(j, h);
	json_u64(j, "created_realtime_ns", h->created_realtime_ns);
	json_str(j, "state", state_name(h));
	json_bool(j, "locked", h->locked);
	json_u64(j, "now_ns", h->now_ns);
	json_object(j, "mutex");
	json_i64(j, "owner_tid", h->mutex_owner_tid);
	json_bool(j, "owner_dead", h->mutex_owner_dead);
	json_end(j);
	json_u64(j, "recovery_epoch", h->recovery_epoch);
	json_u64(j, "reaped_agents", h->reaped_agents);
	json_u64(j, "last_token", h->last_token);
	json_u64(j, "max_name_len", h->max_name_len);
	json_object(j, "tables");
	for (size_t i = 0; i < 4; i++) {
		json_object(j, tables[i]);
		json_u64(j, "used", used[i]);
		json_u64(j, "max", max[i]);
		json_end(j);
	}
	json_end(j);
	json_object(j, "arena");
	json_u64(j, "used_bytes", s->arena_used);
	json_u64(j, "bytes", s->arena_bytes);
	json_end(j);
	json_end(j);
}

const char *agent_command(const struct wlk_inspect_agent *a, char *buf,
			  size_t size)
{
	char path[64];
	size_t n;
	FILE *f;

	/* A dead agent's pid may belong to another process by now. */
	if (a->liveness != WLK_ALIVE || a->pid <= 0 || size < 2)
		return NULL;
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)a->pid);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	n = fread(buf, 1, size - 1, f);
	fclose(f);
	while (n && buf[n - 1] == '\n')
		n--;
	buf[n] = '\0';
	return n ? buf : NULL;
}

static void json_agents(struct json *j, const struct wlk_inspect_snapshot *s)
{
	char comm[COMM_SIZE];

	json_array(j, "agents");
	for (size_t i = 0; i < s->n_agents; i++) {
		const struct wlk_inspect_agent *a = &s->agents[i];

		json_object(j, NULL);
		json_u64(j, "slot", a->slot);
		json_i64(j, "pid", a->pid);
		json_i64(j, "anchor_tid", a->anchor_tid);
		json_u64(j, "attached_realtime_ns", a->attached_realtime_ns);
		json_str(j, "liveness", liveness_name(a->liveness));
		json_str(j, "command",
			 agent_command(a, comm, sizeof(comm)));
		json_array_flat(j, "client_ids");
		for (size_t c = 0; c < s->n_clients; c++)
			if (s->clients[c].agent == (int)i)
				json_str(j, NULL, s->clients[c].client_id);
		json_end(j);
		json_end(j);
	}
	json_end(j);
	json_array(j, "clients");
	for (size_t i = 0; i < s->n_clients; i++) {
		const struct wlk_inspect_client *c = &s->clients[i];

		json_object(j, NULL);
		json_u64(j, "slot", c->slot);
		json_str(j, "client_id", c->client_id);
		json_i64(j, "pid", c->pid);
		if (c->agent >= 0 && (size_t)c->agent < s->n_agents)
			json_u64(j, "agent_slot", s->agents[c->agent].slot);
		else
			json_null(j, "agent_slot");
		json_u64(j, "opened_realtime_ns", c->opened_realtime_ns);
		json_end(j);
	}
	json_end(j);
}

/* The members every request object has. */
static void json_req_common(struct json *j,
			    const struct wlk_inspect_snapshot *s,
			    const struct wlk_inspect_request *q)
{
	const struct wlk_inspect_agent *a = req_agent(s, q);

	uint64_t scope = s->scopes[q - s->requests];

	json_u64(j, "slot", q->slot);
	/* A scope's member: its first name's slot, the same under each of
	 * its names (weblocks.h, SCOPES); null for a single name. */
	if (scope)
		json_u64(j, "scope", (scope & UINT32_MAX) - 1);
	else
		json_null(j, "scope");
	json_str(j, "mode", mode_name(q->mode));
	if (q->client >= 0) {
		json_str(j, "client_id", q->client_id);
		json_i64(j, "pid", q->pid);
	} else {
		json_null(j, "client_id");
		json_null(j, "pid");
	}
	json_str(j, "liveness", a ? liveness_name(a->liveness) : NULL);
	json_u64(j, "requested_ns", q->requested_ns);
}

static void json_duration(struct json *j, const char *key, uint64_t now,
			  uint64_t then)
{
	uint64_t d;

	if (since(now, then, &d))
		json_u64(j, key, d);
	else
		json_null(j, key);
}

static void json_granted(struct json *j, const struct wlk_inspect_snapshot *s,
			 const struct wlk_inspect_request *q)
{
	json_u64(j, "token", q->token);
	json_u64(j, "granted_ns", q->granted_ns);
	json_duration(j, "held_ns", s->header.now_ns, q->granted_ns);
}

static void json_pending(struct json *j, const struct wlk_inspect_snapshot *s,
			 size_t b, size_t e, size_t k)
{
	const struct wlk_inspect_request *p = &s->requests[k];

	json_object(j, NULL);
	json_u64(j, "position", p->position);
	json_req_common(j, s, p);
	json_duration(j, "waited_ns", s->header.now_ns, p->requested_ns);
	json_object(j, "blocked_by");
	json_array_flat(j, "holders");
	for (size_t i = b; i < e; i++)
		if (s->requests[i].state == WLK_REQ_HELD &&
		    conflicts(p, &s->requests[i]))
			json_u64(j, NULL, s->requests[i].slot);
	json_end(j);
	json_array_flat(j, "ahead");
	for (size_t i = b; i < k; i++)
		if (s->requests[i].state == WLK_REQ_PENDING &&
		    conflicts(p, &s->requests[i]))
			json_u64(j, NULL, s->requests[i].slot);
	json_end(j);
	json_end(j);
	json_end(j);
}

static void json_name(struct json *j, const struct wlk_inspect_snapshot *s,
		      size_t b, size_t e)
{
	const struct wlk_inspect_request *first = &s->requests[b];

	json_object(j, NULL);
	json_bytes(j, "name", first->name, first->name_len);
	json_hex(j, "name_hex", first->name, first->name_len);
	json_array(j, "held");
	for (size_t i = b; i < e; i++) {
		if (s->requests[i].state != WLK_REQ_HELD)
			continue;
		json_object(j, NULL);
		json_req_common(j, s, &s->requests[i]);
		json_granted(j, s, &s->requests[i]);
		json_end(j);
	}
	json_end(j);
	json_array(j, "pending");
	for (size_t i = b; i < e; i++)
		if (s->requests[i].state == WLK_REQ_PENDING)
			json_pending(j, s, b, e, i);
	json_end(j);
	json_end(j);
}

void dump_json(struct json *j, const struct wlk_inspect_snapshot *s)
{
	json_header(j, s);
	json_agents(j, s);
	json_array(j, "names");
	for (size_t i = 0, e; i < s->n_requests; i = e) {
		e = name_end(s, i);
		if (s->requests[i].state != WLK_REQ_STOLEN)
			json_name(j, s, i, e);
	}
	json_end(j);
	json_array(j, "stolen");
	for (size_t i = 0; i < s->n_requests; i++) {
		const struct wlk_inspect_request *q = &s->requests[i];

		if (q->state != WLK_REQ_STOLEN)
			continue;
		json_object(j, NULL);
		json_bytes(j, "name", q->name, q->name_len);
		json_hex(j, "name_hex", q->name, q->name_len);
		json_req_common(j, s, q);
		json_granted(j, s, q);
		json_end(j);
	}
	json_end(j);
	json_deadlocks(j, s);
}
