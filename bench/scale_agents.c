/* SPDX-License-Identifier: MIT */
/*
 * scale_agents.c - part 5, agents: what changes as more processes attach
 * to one bucket, from 1 to 256 (the per-bucket maximum, WLK_MAX_AGENTS in
 * lib/format/layout.h): the uncontended exclusive pair of the measuring process
 * (against a robust mutex pair timed beside it), wlk_query() (which probes
 * every agent's lifeline), and attaching one more process (the time its
 * wlk_manager_open() takes, measured inside the new process).
 *
 * Each added agent is a child that opens a manager, reports how long that
 * took, and sleeps until the parent closes the gate pipe. The parent
 * (pinned to CPU 0) is the first agent. Per pass every agent is added
 * anew; the points cannot interleave, so the robust pair timed at each
 * point shows whether the machine drifted meanwhile.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "locks.h"

#define MAX_AGENTS 256
#define BATCH 32

static const int points[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
#define NPOINTS (sizeof(points) / sizeof(points[0]))

struct point {
	struct fig pair, robust, query, attach;
};

static struct point pt[NPOINTS];
static struct wlk_manager *me;
static uint64_t clk;
static int gate[2], rep[2];
static pid_t kids[MAX_AGENTS + 1];
static int nkids;

struct report {
	int rc;
	double open_us;
};

static int agent(void *arg)
{
	struct wlk_manager *m = NULL;
	struct report r;
	uint64_t t0;
	char c;

	(void)arg;
	close(gate[1]);
	t0 = now_ns();
	r.rc = wlk_manager_open(lkw.origin, NULL, &m);
	r.open_us = (double)(now_ns() - t0) / 1e3;
	if (write(rep[1], &r, sizeof(r)) != sizeof(r))
		return 1;
	while (read(gate[0], &c, 1) < 0 && errno == EINTR)
		;
	wlk_manager_close(m);
	return 0;
}

/* Add one agent; returns its report. */
static struct report add_agent(void)
{
	struct report r;

	kids[nkids++] = spawn(agent, NULL);
	if (read(rep[0], &r, sizeof(r)) != sizeof(r))
		die("agent report");
	return r;
}

static void wlk_pairs(void *arg, long n)
{
	for (long i = 0; i < n; i++) {
		struct wlk_lock *x;

		check(wlk_acquire(me, "x", 1, NULL, &x), "acquire");
		check(wlk_release(x), "release");
	}
}

static void queries(void *arg, long n)
{
	for (long i = 0; i < n; i++) {
		struct wlk_snapshot *s;

		check(wlk_query(me, &s), "query");
		wlk_snapshot_free(s);
	}
}

static void measure(struct point *p, int reps, uint64_t dur,
		    struct samples *attach)
{
	struct samples pp[3] = {{0}}, pm[3] = {{0}};
	static void (*const fn[3])(void *, long) = {wlk_pairs, lk_robust_pairs,
						    queries};
	static const long batch[3] = {BATCH, BATCH, 4};
	struct fig *f[3] = {&p->pair, &p->robust, &p->query};

	for (int k = 0; k < reps; k++)
		for (int w = 0; w < 3; w++)
			samples_add(&pm[w], rep_batches(fn[w], NULL, batch[w],
							dur, clk, &pp[w]));
	for (int w = 0; w < 3; w++) {
		double scale = w == 2 ? 1e-3 : 1; /* query in us */

		fig_add(f[w], scale * median(pm[w].v, pm[w].n),
			scale * quantile(pp[w].v, pp[w].n, 0.99));
		samples_free(&pp[w]);
		samples_free(&pm[w]);
	}
	fig_add(&p->attach, median(attach->v, attach->n),
		quantile(attach->v, attach->n, 0.99));
}

/* One pass: grow to 256 agents, then try one more, then let all go. */
static int one_pass(int reps, uint64_t dur)
{
	struct samples attach = {0};
	uint64_t t0;
	struct report r;
	int full_rc;

	if (pipe(gate) < 0 || pipe(rep) < 0)
		die("pipe: %s", strerror(errno));
	t0 = now_ns();
	check(wlk_manager_open(lkw.origin, NULL, &me), "open");
	samples_add(&attach, (double)(now_ns() - t0) / 1e3);
	for (size_t i = 0; i < NPOINTS; i++) {
		while (nkids + 1 < points[i]) {
			r = add_agent();
			check(r.rc, "agent open");
			samples_add(&attach, r.open_us);
		}
		measure(&pt[i], reps, dur, &attach);
		samples_reset(&attach);
	}
	full_rc = add_agent().rc;
	close(gate[1]);
	for (int i = 0; i < nkids; i++)
		reap(kids[i], "agent");
	nkids = 0;
	close(gate[0]);
	close(rep[0]);
	close(rep[1]);
	wlk_manager_close(me);
	samples_free(&attach);
	return full_rc;
}

static void row(const char *key, const char *label, const char *unit,
		const struct fig *at_max, const struct fig *at_one,
		const char *one_label)
{
	struct summary s = fig_sum(at_max);

	emit_fig(key, "5", label, unit, &s);
	s = fig_sum(at_one);
	emit_anchor(key, one_label, unit, &s);
}

static void report(int full_rc)
{
	struct point *one = &pt[0], *max = &pt[NPOINTS - 1];
	struct summary s;

	for (size_t i = 0; i < NPOINTS; i++) {
		s = fig_sum(&pt[i].pair);
		emit_point("agents.pair", points[i], &s);
		s = fig_sum(&pt[i].robust);
		emit_point("agents.robust", points[i], &s);
		s = fig_sum(&pt[i].query);
		emit_point("agents.query", points[i], &s);
		s = fig_sum(&pt[i].attach);
		emit_point("agents.attach", points[i], &s);
	}
	row("p5.agents.pair", "acquire+release, 256 agents (processes) "
	    "attached", "ns/pair", &max->pair, &one->pair,
	    "weblocks, 1 agent attached (same run)");
	s = fig_sum(&max->robust);
	emit_anchor("p5.agents.pair", "robust pshared pthread mutex pair, "
		    "measured beside it", "ns/pair", &s);
	row("p5.agents.query", "wlk_query() + free, 256 agents attached",
	    "us", &max->query, &one->query,
	    "wlk_query(), 1 agent attached (same run)");
	row("p5.agents.attach", "attach: wlk_manager_open() in a new "
	    "process, 129..256th agent", "us", &max->attach, &one->attach,
	    "the same for the first agent (creates the segment)");
	emit_note("a 257th process opening the bucket gets %s (%s)",
		  wlk_error_name(full_rc), wlk_strerror(full_rc));
}

int main(int argc, char **argv)
{
	int reps, full_rc = 0;
	uint64_t dur;

	bench_init(argc, argv, "scale_agents");
	reps = QN(3, 2);
	dur = QN(6, 3) * 1000000ull;
	pin_cpu(0);
	lk_world_init("p5a");
	clk = clock_overhead_ns();
	for (int p = 0; p < bopt.passes; p++) {
		full_rc = one_pass(reps, dur);
		/* Segment created afresh for the next pass's first agent. */
		wlk_bucket_remove(lkw.origin, NULL);
	}
	report(full_rc);
	lk_world_fini();
	bench_fini();
	return 0;
}
