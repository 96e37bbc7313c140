/* SPDX-License-Identifier: MIT */
/*
 * text.c - a snapshot as text for people, in the manner of mdb_stat:
 * "Key: value" lines, then one line per agent, lock and waiter.
 *
 * The text is ASCII whatever the segment holds: names, clientIds and
 * identities go through esc_c().
 */
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "shm-inspect.h"

#define NSEC UINT64_C(1000000000)
/* Requests ahead listed by name in "who blocks whom". */
#define AHEAD_SHOWN 3

static void put_str(FILE *f, const char *s, size_t n)
{
	fputc('"', f);
	esc_c(f, s, n);
	fputc('"', f);
}

static void put_cstr(FILE *f, const char *s)
{
	put_str(f, s, strlen(s));
}

static void put_time(FILE *f, uint64_t realtime_ns)
{
	time_t t = (time_t)(realtime_ns / NSEC);
	struct tm tm;
	char buf[64];

	if (realtime_ns && localtime_r(&t, &tm) &&
	    strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S %z", &tm))
		fputs(buf, f);
	else
		fputs("?", f);
}

static void put_dur(FILE *f, uint64_t now, uint64_t then)
{
	uint64_t d;

	if (!since(now, then, &d))
		fputs("?", f);
	else
		fprintf(f, "%" PRIu64 ".%03" PRIu64 "s", d / NSEC,
			d / 1000000u % 1000u);
}

/* "pid 12 "client" (dead)" for a request's owner. */
static void put_owner(FILE *f, const struct wlk_inspect_snapshot *s,
		      const struct wlk_inspect_request *q)
{
	const struct wlk_inspect_agent *a = req_agent(s, q);

	if (q->client < 0) {
		fputs("unknown client", f);
		return;
	}
	fprintf(f, "pid %d ", (int)q->pid);
	put_cstr(f, q->client_id);
	if (!a)
		fputs(" (no agent)", f);
	else if (a->liveness != WLK_ALIVE)
		fprintf(f, " (%s)", liveness_name(a->liveness));
}

static void text_header(FILE *f, const struct wlk_inspect_snapshot *s)
{
	const struct wlk_inspect_header *h = &s->header;

	fprintf(f, "Segment: ");
	esc_c(f, h->path, strlen(h->path));
	fprintf(f, "\n  Origin: ");
	put_cstr(f, h->origin);
	fprintf(f, "\n  Bucket: ");
	put_cstr(f, h->bucket);
	fprintf(f, "\n  Partition: ");
	put_cstr(f, h->partition);
	fprintf(f, "\n  Layout version: %" PRIu32 "\n  Generation: %u\n"
		   "  Size: %" PRIu64 " bytes\n  Created: ",
		h->layout_version, h->generation, h->segment_size);
	put_time(f, h->created_realtime_ns);
	fprintf(f, "\n  State: %s\n  Snapshot: %s\n  Mutex: ", state_name(h),
		h->locked ? "locked (consistent)" :
			    "unlocked (may catch an operation halfway)");
	if (!h->mutex_owner_tid)
		fprintf(f, "free");
	else
		fprintf(f, "held by thread %d%s", (int)h->mutex_owner_tid,
			h->mutex_owner_dead ?
				", which died (the next locker repairs)" : "");
	if (h->locked && h->mutex_owner_tid)
		fprintf(f, " (before this snapshot took it)");
	fprintf(f, "\n  Recovery epoch: %" PRIu64 "\n  Reaped agents: %" PRIu64
		   "\n  Last token: %" PRIu64 "\n",
		h->recovery_epoch, h->reaped_agents, h->last_token);
	fprintf(f, "  Agents used: %" PRIu32 "/%" PRIu32 "\n"
		   "  Clients used: %" PRIu32 "/%" PRIu32 "\n"
		   "  Names used: %" PRIu32 "/%" PRIu32
		   " (at most %" PRIu32 " bytes each)\n"
		   "  Requests used: %" PRIu32 "/%" PRIu32 "\n"
		   "  Arena used: %" PRIu64 "/%" PRIu64
		   " bytes (long names, client ids)\n",
		h->agents, h->max_agents, h->clients, h->max_clients, h->names,
		h->max_names, h->max_name_len, h->requests, h->max_requests,
		s->arena_used, s->arena_bytes);
}

static void text_agents(FILE *f, const struct wlk_inspect_snapshot *s)
{
	fprintf(f, "Agents: %zu\n", s->n_agents);
	for (size_t i = 0; i < s->n_agents; i++) {
		const struct wlk_inspect_agent *a = &s->agents[i];
		char comm[COMM_SIZE];
		const char *cmd = agent_command(a, comm, sizeof(comm));

		fprintf(f, "  slot %" PRIu32 ": pid %d, %s", a->slot,
			(int)a->pid, liveness_name(a->liveness));
		if (cmd) {
			fputs(", command ", f);
			put_cstr(f, cmd);
		}
		fputs(", clients", f);
		for (size_t c = 0; c < s->n_clients; c++) {
			if (s->clients[c].agent != (int)i)
				continue;
			fputc(' ', f);
			put_cstr(f, s->clients[c].client_id);
		}
		fprintf(f, "; attached ");
		put_time(f, a->attached_realtime_ns);
		fputc('\n', f);
	}
	for (size_t c = 0; c < s->n_clients; c++) {
		if (s->clients[c].agent >= 0)
			continue;
		fprintf(f, "  client without an agent: pid %d ",
			(int)s->clients[c].pid);
		put_cstr(f, s->clients[c].client_id);
		fputc('\n', f);
	}
}

/*
 * A scope's member: ", scope @S of N names", S its first name's request
 * slot, the same under each of its names (weblocks.h, SCOPES).
 */
static void put_scope(FILE *f, const struct wlk_inspect_snapshot *s,
		      const struct wlk_inspect_request *q)
{
	uint64_t id = s->scopes[q - s->requests];
	size_t n = 0;

	if (!id)
		return;
	for (size_t i = 0; i < s->n_requests; i++)
		n += s->scopes[i] == id;
	fprintf(f, ", scope @%" PRIu32 " of %zu names",
		(uint32_t)(id & UINT32_MAX) - 1, n);
}

static void text_request(FILE *f, const struct wlk_inspect_snapshot *s,
			 const struct wlk_inspect_request *q)
{
	uint64_t now = s->header.now_ns;
	char state[32];

	if (q->state == WLK_REQ_PENDING)
		snprintf(state, sizeof(state), "pending #%" PRIu32,
			 q->position);
	else
		snprintf(state, sizeof(state), "%s",
			 q->state == WLK_REQ_HELD ? "held" : "stolen");
	fprintf(f, "    %-10s %-9s ", state, mode_name(q->mode));
	put_owner(f, s, q);
	put_scope(f, s, q);
	if (q->state == WLK_REQ_PENDING) {
		fputs(", waited ", f);
		put_dur(f, now, q->requested_ns);
	} else {
		fprintf(f, ", token %" PRIu64 ", held ", q->token);
		put_dur(f, now, q->granted_ns);
	}
	fputc('\n', f);
}

static void text_locks(FILE *f, const struct wlk_inspect_snapshot *s)
{
	struct counts c;
	size_t names = 0;

	count_snapshot(s, &c);
	for (size_t i = 0; i < s->n_requests; i = name_end(s, i))
		if (s->requests[i].state != WLK_REQ_STOLEN)
			names++;
	fprintf(f, "Locks: %zu held, %zu pending, %zu stolen on %zu name%s\n",
		c.held, c.pending, c.stolen, names, names == 1 ? "" : "s");
	for (size_t i = 0, e; i < s->n_requests; i = e) {
		const struct wlk_inspect_request *q = &s->requests[i];

		e = name_end(s, i);
		if (q->state == WLK_REQ_STOLEN)
			continue;
		fputs("  ", f);
		if (q->name)
			put_str(f, q->name, q->name_len);
		else
			fputs("(no name)", f);
		fputc('\n', f);
		for (size_t k = i; k < e; k++)
			text_request(f, s, &s->requests[k]);
	}
	if (c.stolen)
		fprintf(f, "Stolen, not yet released by their holders: %zu\n",
			c.stolen);
	for (size_t i = 0; i < s->n_requests; i++) {
		const struct wlk_inspect_request *q = &s->requests[i];

		if (q->state != WLK_REQ_STOLEN)
			continue;
		fputs("  ", f);
		if (q->name)
			put_str(f, q->name, q->name_len);
		else
			fputs("(name not known)", f);
		fputc('\n', f);
		text_request(f, s, q);
	}
}

/* Pending @k of the name run [@b, @e): whom it waits for. */
static void text_blocked(FILE *f, const struct wlk_inspect_snapshot *s,
			 size_t b, size_t e, size_t k)
{
	const struct wlk_inspect_request *p = &s->requests[k];
	size_t ahead = 0, shown = 0, holders = 0;

	fputs("  ", f);
	put_owner(f, s, p);
	fprintf(f, " (%s, #%" PRIu32 " on ", mode_name(p->mode), p->position);
	put_str(f, p->name, p->name_len);
	fputs(") waits for", f);
	for (size_t i = b; i < e; i++) {
		const struct wlk_inspect_request *h = &s->requests[i];

		if (h->state != WLK_REQ_HELD || !conflicts(p, h))
			continue;
		fputs(holders++ ? ", " : " ", f);
		put_owner(f, s, h);
		fprintf(f, " (holds %s, token %" PRIu64 ")", mode_name(h->mode),
			h->token);
	}
	/* A shared request ahead does not keep a shared one waiting: they
	 * are granted together. Only conflicting ones count. */
	for (size_t i = b; i < k; i++)
		ahead += s->requests[i].state == WLK_REQ_PENDING &&
			 conflicts(p, &s->requests[i]);
	if (ahead)
		fprintf(f, "%s%zu request%s ahead:", holders ? "; " : " ",
			ahead, ahead == 1 ? "" : "s");
	for (size_t i = k; i-- > b && shown < AHEAD_SHOWN;) {
		const struct wlk_inspect_request *q = &s->requests[i];

		if (q->state != WLK_REQ_PENDING || !conflicts(p, q))
			continue;
		fputs(shown++ ? ", " : " ", f);
		put_owner(f, s, q);
		fprintf(f, " (%s, #%" PRIu32 ")", mode_name(q->mode),
			q->position);
	}
	if (ahead > shown)
		fprintf(f, ", ...");
	if (!holders && !ahead)
		fputs(" nothing (an operation in progress, or damage)", f);
	fputc('\n', f);
}

static void text_blocks(FILE *f, const struct wlk_inspect_snapshot *s)
{
	bool any = false;

	for (size_t i = 0, e; i < s->n_requests; i = e) {
		e = name_end(s, i);
		for (size_t k = i; k < e; k++) {
			if (s->requests[k].state != WLK_REQ_PENDING ||
			    !s->requests[k].name)
				continue;
			if (!any)
				fputs("Who blocks whom:\n", f);
			any = true;
			text_blocked(f, s, i, e, k);
		}
	}
}

void dump_text(FILE *f, const struct wlk_inspect_snapshot *s)
{
	text_header(f, s);
	text_agents(f, s);
	text_locks(f, s);
	text_blocks(f, s);
	text_deadlocks(f, s);
}
