/* SPDX-License-Identifier: MIT */
/*
 * remove.c - shm-inspect rm and gc: remove a bucket's segment, or every
 * segment no live process uses (ipcrm and LMDB's mdb_stat -rr for
 * weblocks), and what makes a segment stale, which list and check show.
 *
 * A segment in use is refused unless --force: unlinking one that live
 * processes have mapped splits its bucket in two (weblocks.h, CAVEATS).
 * The bucket's current segment is removed through wlk_bucket_remove(),
 * which also refuses one that a process is opening at that moment (the
 * tool cannot see that from the agent table); a superseded generation,
 * which no opener ever maps again, is unlinked directly.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shm-inspect.h"

bool segment_stale(const struct wlk_inspect_snapshot *s)
{
	for (size_t i = 0; i < s->n_agents; i++)
		if (s->agents[i].liveness != WLK_DEAD)
			return false;
	return true;
}

static size_t live_agents(const struct wlk_inspect_snapshot *s)
{
	size_t n = 0;

	for (size_t i = 0; i < s->n_agents; i++)
		n += s->agents[i].liveness != WLK_DEAD;
	return n;
}

static void say(const char *what, const char *path)
{
	printf("%s ", what);
	esc_c(stdout, path, strlen(path));
	fputc('\n', stdout);
}

static int refuse_busy(const char *path, size_t live)
{
	fprintf(stderr, "%s: ", progname);
	esc_c(stderr, path, strlen(path));
	if (live)
		fprintf(stderr, ": in use by %zu live process%s", live,
			live == 1 ? "" : "es");
	else
		fputs(": a process has it open", stderr);
	fputs("; --force removes it all the same\n", stderr);
	return EXIT_BUSY;
}

static int unlink_path(const char *path)
{
	if (unlink(path) == 0) {
		say("removed", path);
		return EXIT_OK;
	}
	report(path, -errno);
	return EXIT_OPEN;
}

/* The path of the current segment of @s's bucket, or NULL. */
static char *current_path(const struct wlk_inspect_snapshot *s)
{
	const struct wlk_inspect_header *h = &s->header;
	struct target t = {.arg = h->origin};
	struct wlk_inspect_snapshot *cur = NULL;
	struct wlk_inspect *in = NULL;
	char *path = NULL;

	t.mo.bucket = h->bucket;
	t.mo.partition = h->partition;
	if (!open_target(&t, &in) && !take_snapshot(in, false, &cur))
		path = strdup(cur->header.path);
	wlk_inspect_snapshot_free(cur);
	wlk_inspect_close(in);
	return path;
}

/* Remove the segment @s was taken from; the exit status. */
static int remove_segment(const struct wlk_inspect_snapshot *s, bool force)
{
	const struct wlk_inspect_header *h = &s->header;
	struct wlk_manager_options o = WLK_MANAGER_OPTIONS_INIT;
	char *cur;
	int rc;

	if (!force && !segment_stale(s))
		return refuse_busy(h->path, live_agents(s));
	cur = current_path(s);
	if (!cur || strcmp(cur, h->path) != 0) {
		free(cur);
		return unlink_path(h->path);
	}
	free(cur);
	o.bucket = h->bucket;
	o.partition = h->partition;
	rc = wlk_bucket_remove(h->origin, &o);
	if (rc == -EBUSY && force)
		return unlink_path(h->path);
	if (rc == -EBUSY)
		return refuse_busy(h->path, 0);
	if (rc) {
		report(h->path, rc);
		return exit_status(rc);
	}
	say("removed", h->path);
	return EXIT_OK;
}

int cmd_rm(const struct target *t, bool force)
{
	struct wlk_inspect_snapshot *s = NULL;
	struct wlk_inspect *in = NULL;
	int rc = open_target(t, &in);

	if (!rc)
		rc = take_snapshot(in, false, &s);
	wlk_inspect_close(in);
	if (rc) {
		/* A segment that cannot be read cannot say whether it is in
		 * use; only --force removes it, by its file name. */
		report(t->arg, rc);
		target_hint(stderr, t, rc);
		if (force && t->segment && rc != -ENOENT) {
			char path[4096];

			snprintf(path, sizeof(path), "/dev/shm/%s",
				 segment_base(t->arg));
			return unlink_path(path);
		}
		if (rc != -ENOENT && t->segment)
			fprintf(stderr, "%s: --force removes it unread\n",
				progname);
		return exit_status(rc);
	}
	rc = remove_segment(s, force);
	wlk_inspect_snapshot_free(s);
	return rc;
}

struct gc {
	bool dry_run;
	int status;
};

static int gc_one(const char *path, void *arg)
{
	struct wlk_inspect_snapshot *s = NULL;
	struct wlk_inspect *in = NULL;
	struct gc *g = arg;
	int rc = open_segment(path, &in);

	if (!rc)
		rc = take_snapshot(in, false, &s);
	wlk_inspect_close(in);
	if (rc == -ENOENT)
		return 0; /* removed since it was listed */
	if (rc) {
		/* Damaged ones are for a person to look at, and rm --force. */
		fprintf(stderr, "%s: skipped: ", progname);
		esc_c(stderr, path, strlen(path));
		fprintf(stderr, ": %s (%s)\n", error_text(rc), error_name(rc));
		return 0;
	}
	if (segment_stale(s) && g->dry_run) {
		say("would remove", s->header.path);
	} else if (segment_stale(s)) {
		rc = remove_segment(s, false);
		/* One that came back to life in between is not an error. */
		if (rc != EXIT_OK && rc != EXIT_BUSY)
			g->status = rc;
	}
	wlk_inspect_snapshot_free(s);
	return 0;
}

int cmd_gc(bool dry_run)
{
	struct gc g = {.dry_run = dry_run, .status = EXIT_OK};
	int rc = wlk_inspect_list(gc_one, &g);

	if (rc) {
		report("/dev/shm", rc);
		return EXIT_OPEN;
	}
	if (fflush(stdout) || ferror(stdout))
		return EXIT_OPEN;
	return g.status;
}
