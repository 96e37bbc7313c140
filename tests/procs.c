/* SPDX-License-Identifier: MIT */
/* procs.c - see procs.h. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <weblocks.h>

#include "procs.h"

/* How often the reaper looks for exited processes. */
#define REAP_POLL_NS (NSEC_PER_SEC / 100)

uint64_t procs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

void procs_nap(uint64_t ns)
{
	struct timespec ts = {.tv_sec = (time_t)(ns / NSEC_PER_SEC),
			      .tv_nsec = (long)(ns % NSEC_PER_SEC)};

	nanosleep(&ts, NULL);
}

int procs_reap(pid_t *pid, int n, int grace_s, const char *who)
{
	uint64_t deadline = procs_now_ns() + (uint64_t)grace_s * NSEC_PER_SEC;
	int stuck = 0, left = 0;

	for (int i = 0; i < n; i++)
		left += pid[i] > 0;
	while (left && procs_now_ns() < deadline) {
		for (int i = 0; i < n; i++) {
			int st;

			if (pid[i] > 0 && waitpid(pid[i], &st, WNOHANG) > 0) {
				if (!WIFEXITED(st) || WEXITSTATUS(st))
					fprintf(stderr, "%s: process %d: "
						"status %d\n", who, i, st);
				pid[i] = 0;
				left--;
			}
		}
		procs_nap(REAP_POLL_NS);
	}
	for (int i = 0; i < n; i++) {
		if (pid[i] > 0) {
			stuck++;
			kill(pid[i], SIGKILL);
			waitpid(pid[i], NULL, 0);
		}
	}
	return stuck;
}

static void print_violation(const char *what, void *arg)
{
	fprintf(stderr, "%s: invalid segment: %s\n", (const char *)arg, what);
}

/*
 * On etcd a killed process's entries stay until its lease expires: wait
 * for the bucket to empty, up to the lease's TTL (WEBLOCKS_ETCD_TTL,
 * default 10 s) and ETCD_EXPIRY_SLACK_S more.
 */
#define ETCD_EXPIRY_SLACK_S 5

static void wait_for_leases(struct wlk_manager *m)
{
	const char *b = getenv("WEBLOCKS_BACKEND");
	const char *t = getenv("WEBLOCKS_ETCD_TTL");
	uint64_t end = procs_now_ns() +
		       (uint64_t)((t ? atoi(t) : 10) + ETCD_EXPIRY_SLACK_S) *
			       NSEC_PER_SEC;

	if (!b || strncmp(b, "etcd://", 7))
		return;
	while (procs_now_ns() < end) {
		struct wlk_snapshot *s;
		bool empty = false;

		if (wlk_query(m, &s) == 0) {
			empty = !wlk_snapshot_held_count(s) &&
				!wlk_snapshot_pending_count(s);
			wlk_snapshot_free(s);
		}
		if (empty)
			return;
		procs_nap(NSEC_PER_SEC / 10);
	}
}

int procs_final_check(const char *origin, const char *who)
{
	struct wlk_manager *m;
	struct wlk_snapshot *s;
	int bad = 0, rc = wlk_manager_open(origin, NULL, &m);

	if (rc) {
		fprintf(stderr, "%s: open after the run: %s\n", who,
			wlk_strerror(rc));
		return 1;
	}
	if (wlk_manager_validate(m, print_violation, (void *)who))
		bad = 1;
	wait_for_leases(m);
	rc = wlk_query(m, &s);
	if (rc == 0) {
		if (wlk_snapshot_held_count(s) ||
		    wlk_snapshot_pending_count(s)) {
			fprintf(stderr, "%s: held or pending after the run\n",
				who);
			bad = 1;
		}
		wlk_snapshot_free(s);
	} else {
		fprintf(stderr, "%s: query after the run: %s\n", who,
			wlk_strerror(rc));
		bad = 1;
	}
	wlk_manager_close(m);
	return bad;
}
