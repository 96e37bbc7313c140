/* SPDX-License-Identifier: MIT */
/*
 * list.c - shm-inspect list: every segment of this user, one line each.
 *
 * Segments are opened one at a time, read-only and without a lock; one
 * that cannot be read is listed with its error and the listing goes on,
 * since the damaged ones are what a person running this is looking for.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "shm-inspect.h"

struct paths {
	char **v;
	size_t n, cap;
};

static int collect(const char *path, void *arg)
{
	struct paths *p = arg;

	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16;
		char **v = realloc(p->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n] = strdup(path);
	return p->v[p->n++] ? 0 : -ENOMEM;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* One segment: its snapshot, or the error that kept us from it. */
static int look(const char *path, struct wlk_inspect_snapshot **s)
{
	struct wlk_inspect *in = NULL;
	int rc = open_segment(path, &in);

	if (!rc)
		rc = take_snapshot(in, false, s);
	wlk_inspect_close(in);
	return rc;
}

static void text_row(const char *path, int width,
		     const struct wlk_inspect_snapshot *s, int rc)
{
	const struct wlk_inspect_header *h;
	struct counts c;
	char agents[32], state[32];

	printf("%-*s ", width, base_name(path));
	if (rc) {
		printf("error: %s (%s)\n", error_text(rc), error_name(rc));
		return;
	}
	h = &s->header;
	count_snapshot(s, &c);
	snprintf(agents, sizeof(agents), "%zu/%zu", c.alive, s->n_agents);
	/* Stale: nobody alive has it open (shm-inspect gc removes it). */
	snprintf(state, sizeof(state), "%s%s", state_name(h),
		 segment_stale(s) ? ",stale" : "");
	printf("%3" PRIu32 " %3u %9" PRIu64 " %-12s %7s %5zu %7zu \"",
	       h->layout_version, h->generation, h->segment_size, state,
	       agents, c.held, c.pending);
	esc_c(stdout, h->origin, strlen(h->origin));
	fputs("\" \"", stdout);
	esc_c(stdout, h->bucket, strlen(h->bucket));
	fputs("\" \"", stdout);
	esc_c(stdout, h->partition, strlen(h->partition));
	fputs("\"\n", stdout);
}

static void json_entry(struct json *j, const char *path,
		       const struct wlk_inspect_snapshot *s, int rc)
{
	const struct wlk_inspect_header *h;
	struct counts c;

	json_object(j, NULL);
	json_str(j, "path", path);
	json_str(j, "name", base_name(path));
	json_bool(j, "ok", !rc);
	if (rc) {
		json_object(j, "error");
		json_str(j, "name", error_name(rc));
		if (rc == ERR_SIGBUS)
			json_null(j, "code");
		else
			json_i64(j, "code", rc);
		json_str(j, "message", error_text(rc));
		json_u64(j, "exit_status", (uint64_t)exit_status(rc));
		json_end(j);
		json_end(j);
		return;
	}
	h = &s->header;
	count_snapshot(s, &c);
	json_identity(j, h);
	json_str(j, "state", state_name(h));
	json_bool(j, "stale", segment_stale(s));
	json_object(j, "agents");
	json_u64(j, "total", s->n_agents);
	json_u64(j, "alive", c.alive);
	json_u64(j, "dead", c.dead);
	json_u64(j, "unknown", c.unknown);
	json_end(j);
	json_u64(j, "clients", s->n_clients);
	json_u64(j, "names", h->names);
	json_u64(j, "held", c.held);
	json_u64(j, "pending", c.pending);
	json_u64(j, "stolen", c.stolen);
	json_end(j);
}

int cmd_list(bool json)
{
	struct paths p = {0};
	struct json j;
	int rc, width = 4;

	rc = wlk_inspect_list(collect, &p);
	if (rc) {
		report("/dev/shm", rc);
		for (size_t i = 0; i < p.n; i++)
			free(p.v[i]);
		free(p.v);
		return EXIT_OPEN;
	}
	if (p.n)
		qsort(p.v, p.n, sizeof(*p.v), by_name);
	for (size_t i = 0; i < p.n; i++)
		if ((int)strlen(base_name(p.v[i])) > width)
			width = (int)strlen(base_name(p.v[i]));
	if (json) {
		json_init(&j, stdout);
		json_object(&j, NULL);
		json_str(&j, "format", FORMAT_ID);
		json_str(&j, "command", "list");
		json_array(&j, "segments");
	} else {
		printf("%-*s VER GEN      SIZE STATE         AGENTS  HELD "
		       "PENDING ORIGIN BUCKET PARTITION\n",
		       width, "NAME");
	}
	for (size_t i = 0; i < p.n; i++) {
		struct wlk_inspect_snapshot *s = NULL;

		/* -ENOENT: removed since it was listed. */
		rc = look(p.v[i], &s);
		if (json && rc != -ENOENT)
			json_entry(&j, p.v[i], s, rc);
		else if (rc != -ENOENT)
			text_row(p.v[i], width, s, rc);
		wlk_inspect_snapshot_free(s);
		free(p.v[i]);
	}
	free(p.v);
	if (json) {
		json_end(&j);
		json_end(&j);
	}
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "%s: cannot write the output\n", progname);
		return EXIT_OPEN;
	}
	return EXIT_OK;
}
