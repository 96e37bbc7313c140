/* SPDX-License-Identifier: MIT */
/*
 * check.c - shm-inspect check: the library's invariant checks; --repair
 * goes through the library's public recovery path, never by writing bytes.
 *
 * Repair is what any process of the bucket would do: open a manager (the
 * opener reaps dead agents, and taking the segment mutex repairs what an
 * owner that died inside it left half done), query (reaps again), then
 * validate under the mutex. The tool only reports what changed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "shm-inspect.h"

/* Unlocked checks race with writers: looks before a violation counts. */
#define LOOKS 3
#define LOOK_GAP_NS 20000000L

struct vlist {
	char **v;
	size_t n, cap;
};

static void on_violation(const char *what, void *arg)
{
	struct vlist *l = arg;
	char *copy = strdup(what);

	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		char **v = realloc(l->v, cap * sizeof(*v));

		if (!v) {
			free(copy);
			return;
		}
		l->v = v;
		l->cap = cap;
	}
	if (copy)
		l->v[l->n++] = copy;
}

static void vlist_clear(struct vlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	l->n = 0;
}

static void vlist_free(struct vlist *l)
{
	vlist_clear(l);
	free(l->v);
	l->v = NULL;
	l->cap = 0;
}

/*
 * Without the mutex a busy segment can show violations that pass; only
 * those seen on every one of LOOKS looks are reported (the last look's).
 */
static int check_segment(struct wlk_inspect *in, bool locked, struct vlist *l)
{
	struct timespec gap = {0, LOOK_GAP_NS};

	for (int i = 1;; i++) {
		int rc;

		vlist_clear(l);
		rc = run_check(in, locked, on_violation, l);
		if (rc != WLK_ECORRUPT || locked || i == LOOKS)
			return rc;
		nanosleep(&gap, NULL);
	}
}

static void print_violations(const char *label, const struct vlist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		esc_c(stdout, label, strlen(label));
		fputs(": ", stdout);
		esc_c(stdout, l->v[i], strlen(l->v[i]));
		fputc('\n', stdout);
	}
}

/* Violations found: the library reports 64, then "... and N more". */
static size_t vlist_total(const struct vlist *l)
{
	unsigned int more;

	if (l->n && l->v &&
	    sscanf(l->v[l->n - 1], "... and %u more", &more) == 1)
		return l->n - 1 + more;
	return l->n;
}

/* "LABEL: ok" or "LABEL: N violations"; the exit status. */
static int summary(const char *label, int rc, const struct vlist *l,
		   const char *when)
{
	size_t n = vlist_total(l);

	esc_c(stdout, label, strlen(label));
	if (!rc)
		printf(": ok%s\n", when);
	else if (n)
		printf(": %zu violation%s%s\n", n, n == 1 ? "" : "s", when);
	else
		printf(": %s%s\n", error_text(rc), when);
	return rc ? EXIT_DAMAGED : EXIT_OK;
}

/* The bucket's current segment, and a snapshot of it. */
static int look_bucket(const char *origin, const struct wlk_manager_options *o,
		       struct wlk_inspect_snapshot **s)
{
	struct target t = {.arg = origin, .mo = *o};
	struct wlk_inspect *in = NULL;
	int rc = open_target(&t, &in);

	if (!rc)
		rc = take_snapshot(in, false, s);
	wlk_inspect_close(in);
	return rc;
}

/* " (pid 1, 2)": the dead agents of @b that are gone from @a. */
static void print_gone(const struct wlk_inspect_snapshot *b,
		       const struct wlk_inspect_snapshot *a)
{
	size_t gone = 0;

	for (size_t i = 0; i < b->n_agents; i++) {
		bool still = false;

		if (b->agents[i].liveness != WLK_DEAD)
			continue;
		for (size_t k = 0; k < a->n_agents; k++)
			still |= a->agents[k].slot == b->agents[i].slot &&
				 a->agents[k].pid == b->agents[i].pid;
		if (!still)
			printf("%s%d", gone++ ? ", " : " (pid ",
			       (int)b->agents[i].pid);
	}
	if (gone)
		fputc(')', stdout);
}

/*
 * What the repair changed, from snapshots before and after. An opener
 * that finds nobody attached re-initialises the segment (its content is
 * stale), which shows as a new creation time and counters back to 0.
 */
static void report_repair(const char *label,
			  const struct wlk_inspect_snapshot *b,
			  const struct wlk_inspect_snapshot *a)
{
	const struct wlk_inspect_header *hb = &b->header, *ha = &a->header;
	struct counts cb, ca;

	count_snapshot(b, &cb);
	count_snapshot(a, &ca);
	esc_c(stdout, label, strlen(label));
	if (strcmp(hb->path, ha->path) != 0) {
		printf(": repaired: the bucket moved to a new generation, ");
		esc_c(stdout, ha->path, strlen(ha->path));
		fputc('\n', stdout);
		return;
	}
	if (ha->created_realtime_ns != hb->created_realtime_ns) {
		printf(": repaired: no live process had it open, so it was "
		       "re-initialised: %zu dead agent%s dropped",
		       cb.dead, cb.dead == 1 ? "" : "s");
	} else {
		printf(": repaired: %" PRIu64 " dead agent%s reaped",
		       ha->reaped_agents - hb->reaped_agents,
		       ha->reaped_agents - hb->reaped_agents == 1 ? "" : "s");
	}
	print_gone(b, a);
	printf("; held %zu -> %zu, pending %zu -> %zu; recovery epoch "
	       "%" PRIu64 " -> %" PRIu64 "\n",
	       cb.held, ca.held, cb.pending, ca.pending, hb->recovery_epoch,
	       ha->recovery_epoch);
}

static int repair(const char *label, const struct wlk_inspect_snapshot *b)
{
	const struct wlk_inspect_header *h = &b->header;
	struct wlk_manager_options o = {
		.bucket = h->bucket,
		.partition = h->partition,
		.client_id = "shm-inspect",
	};
	struct wlk_inspect_snapshot *cur = NULL, *a = NULL;
	struct wlk_manager *m = NULL;
	struct wlk_snapshot *q = NULL;
	struct vlist l = {0};
	struct stat st;
	int rc, status;

	/* A manager can only open the bucket's current segment. */
	rc = look_bucket(h->origin, &o, &cur);
	if (!rc && strcmp(cur->header.path, h->path) != 0) {
		fprintf(stderr, "%s: ", progname);
		esc_c(stderr, label, strlen(label));
		fprintf(stderr, ": not the current segment of its bucket (");
		esc_c(stderr, cur->header.path, strlen(cur->header.path));
		fprintf(stderr, " is); repair that one\n");
		wlk_inspect_snapshot_free(cur);
		return EXIT_OPEN;
	}
	wlk_inspect_snapshot_free(cur);
	/* Openers must not ask for tighter permissions than it has. */
	if (stat(h->path, &st) == 0)
		o.permissions = st.st_mode & 0666;
	if (!rc)
		rc = wlk_manager_open(h->origin, &o, &m);
	if (!rc)
		rc = wlk_query(m, &q);
	wlk_snapshot_free(q);
	if (!rc)
		rc = wlk_manager_validate(m, on_violation, &l);
	wlk_manager_close(m);
	if (rc && rc != WLK_ECORRUPT) {
		report(label, rc);
		vlist_free(&l);
		return exit_status(rc);
	}
	if (!look_bucket(h->origin, &o, &a))
		report_repair(label, b, a);
	print_violations(label, &l);
	status = summary(label, rc, &l, " after repair");
	wlk_inspect_snapshot_free(a);
	vlist_free(&l);
	return status;
}

/*
 * Deadlocks in @in: a cycle seen on every look (an unlocked copy may catch
 * a grant halfway; a deadlock stays), printed from the last. Return: the
 * exit status, EXIT_DEADLOCK if there is one.
 */
static int check_deadlocks(struct wlk_inspect *in, bool locked,
			   const char *label)
{
	struct timespec gap = {0, LOOK_GAP_NS};
	struct wlk_inspect_snapshot *s = NULL;
	long n = 0;

	for (int i = 1; i <= LOOKS; i++) {
		wlk_inspect_snapshot_free(s);
		s = NULL;
		if (take_snapshot(in, locked, &s))
			return EXIT_OK; /* reported by the checks already */
		n = find_deadlocks(s, NULL, NULL);
		if (n <= 0 || locked)
			break;
		nanosleep(&gap, NULL);
	}
	if (n > 0) {
		esc_c(stdout, label, strlen(label));
		printf(": ");
		text_deadlocks(stdout, s);
	}
	wlk_inspect_snapshot_free(s);
	return n > 0 ? EXIT_DEADLOCK : EXIT_OK;
}

/*
 * What a sound segment can still hold that needs a person: locks held by
 * processes that died (the library releases them only when someone asks
 * for them, queries, or opens the bucket; --repair does it now), and no
 * live process attached at all (shm-inspect rm or gc removes it). Return:
 * the exit status, EXIT_STALE if either.
 */
static int check_stale(const struct wlk_inspect_snapshot *s,
		       const char *label)
{
	size_t dead = 0;

	for (size_t i = 0; i < s->n_requests; i++) {
		const struct wlk_inspect_request *q = &s->requests[i];
		const struct wlk_inspect_agent *a = req_agent(s, q);

		if (q->state != WLK_REQ_HELD || !a ||
		    a->liveness != WLK_DEAD)
			continue;
		dead++;
		esc_c(stdout, label, strlen(label));
		fputs(": warning: \"", stdout);
		esc_c(stdout, q->name ? q->name : "", q->name ? q->name_len : 0);
		printf("\" held %s by pid %d, which is dead (--repair "
		       "releases it)\n", mode_name(q->mode), (int)a->pid);
	}
	if (segment_stale(s)) {
		esc_c(stdout, label, strlen(label));
		fputs(": warning: stale: no live process has it open "
		      "(shm-inspect rm removes it)\n", stdout);
	}
	return dead || segment_stale(s) ? EXIT_STALE : EXIT_OK;
}

int cmd_check(const struct target *t, bool repairing)
{
	bool locked = t->flags & WLK_INSPECT_LOCKED;
	struct wlk_inspect_snapshot *s = NULL;
	struct wlk_inspect *in = NULL;
	struct vlist l = {0};
	const char *label = t->arg;
	int rc, snap_rc, status;

	rc = open_target(t, &in);
	if (rc) {
		report(t->arg, rc);
		target_hint(stderr, t, rc);
		return exit_status(rc);
	}
	/* For its path, and for --repair its bucket and dead agents. */
	snap_rc = take_snapshot(in, locked, &s);
	if (!snap_rc)
		label = s->header.path;
	rc = check_segment(in, locked, &l);
	if (rc && rc != WLK_ECORRUPT) {
		report(label, rc);
		status = exit_status(rc);
	} else {
		print_violations(label, &l);
		status = summary(label, rc, &l, repairing ? " before repair" :
							     "");
	}
	if (status == EXIT_OK && !repairing)
		status = check_deadlocks(in, locked, label);
	if (status == EXIT_OK && !repairing && s)
		status = check_stale(s, label);
	wlk_inspect_close(in);
	vlist_free(&l);
	if (repairing && (status == EXIT_OK || status == EXIT_DAMAGED)) {
		if (s) {
			status = repair(label, s);
		} else {
			report(label, snap_rc);
			status = exit_status(snap_rc);
		}
	}
	wlk_inspect_snapshot_free(s);
	return status;
}
