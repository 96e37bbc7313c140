/* SPDX-License-Identifier: MIT */
/*
 * uncontended.c - part 1: one process, no contention, the cost of an
 * acquire+release pair (exclusive and shared) and the system calls it
 * makes, against a robust process-shared pthread mutex pair in shm, flock(2)
 * on an open fd, open+flock+close per acquire, and a broker process over an
 * AF_UNIX socket (on the same CPU: context switches; on the other CPU:
 * cross-CPU wake-ups).
 *
 * The process is pinned to CPU 0. Per pass, each method runs REPS
 * repetitions of about REP_NS, interleaved; a repetition times batches of
 * pairs lasting about BATCH_NS each (so the clock's own cost is small and
 * subtracted), and reports the median batch. The p99 is over the batches of
 * a pass. Two variant rows, used only in the notes on a missed target,
 * time the weblocks pair with some of the library's libc calls stubbed.
 */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "locks.h"
#include "syscount.h"

#define BATCH_NS 2000.0
/* Target: each weblocks pair at most this many robust mutex pairs. */
#define PAIR_TARGET 2.5

struct row {
	const char *label;
	enum lk_kind kind;
	bool shared;
	int broker_cpu; /* LK_BROKER: which CPU the server runs on */
	const char *fig;
	bool is_fig;
	int variant; /* STUB_* of the library calls answered by stubs */
	struct lk l;
	struct broker b;
	bool used;
	long batch;
	struct fig f;
	struct samples pass, repmeds;
};

#define ROW(lbl, k, sh, cpu, f, isfig)                                         \
	{.label = (lbl), .kind = (k), .shared = (sh), .broker_cpu = (cpu),     \
	 .fig = (f), .is_fig = (isfig)}
#define VARIANT(lbl, v)                                                        \
	{.label = (lbl), .kind = LK_WLK, .fig = "", .variant = (v)}

enum { STUB_CLOCK = 1, STUB_CANCEL = 2 };

static struct row rows[] = {
	ROW("weblocks exclusive", LK_WLK, false, 0, "p1.ex", true),
	ROW("weblocks shared", LK_WLK, true, 0, "p1.sh", true),
	ROW("robust pshared pthread mutex pair in shm", LK_ROBUST, false, 0,
	    "p1.*", false),
	ROW("flock(2) LOCK_EX/LOCK_UN on an open fd", LK_FLOCK, false, 0,
	    "p1.ex", false),
	ROW("flock(2) LOCK_SH/LOCK_UN on an open fd", LK_FLOCK, true, 0,
	    "p1.sh", false),
	ROW("open+flock LOCK_EX/LOCK_UN+close per acquire", LK_OPENFLOCK,
	    false, 0, "p1.ex", false),
	ROW("open+flock LOCK_SH/LOCK_UN+close per acquire", LK_OPENFLOCK, true,
	    0, "p1.sh", false),
	ROW("broker over AF_UNIX seqpacket, same CPU", LK_BROKER, false, 0,
	    "p1.ex", false),
	ROW("broker over AF_UNIX seqpacket, same CPU", LK_BROKER, true, 0,
	    "p1.sh", false),
	ROW("broker over AF_UNIX seqpacket, other CPU", LK_BROKER, false, 1,
	    "p1.ex", false),
	VARIANT("exclusive, clock_gettime stubbed", STUB_CLOCK),
	VARIANT("exclusive, clock_gettime and setcancelstate stubbed",
		STUB_CLOCK | STUB_CANCEL),
};

#define ROW_VAR_CLOCK 10
#define ROW_VAR_BOTH 11

/*
 * Variants for finding what limits the pair, without touching lib/: the
 * library's calls of these two functions go through the PLT, and a
 * definition in the executable comes first in symbol lookup. While a
 * variant row runs, they return at once; otherwise they pass through.
 */
static volatile int stubs;

int clock_gettime(clockid_t id, struct timespec *ts)
{
	static int (*real)(clockid_t, struct timespec *);

	if (stubs & STUB_CLOCK) {
		ts->tv_sec = 1;
		ts->tv_nsec = 0;
		return 0;
	}
	if (!real)
		real = (int (*)(clockid_t, struct timespec *))dlsym(
			RTLD_NEXT, "clock_gettime");
	return real(id, ts);
}

int pthread_setcancelstate(int state, int *old)
{
	static int (*real)(int, int *);

	if (stubs & STUB_CANCEL) {
		if (old)
			*old = PTHREAD_CANCEL_ENABLE;
		return 0;
	}
	if (!real)
		real = (int (*)(int, int *))dlsym(RTLD_NEXT,
						   "pthread_setcancelstate");
	return real(state, old);
}

#define NROWS (sizeof(rows) / sizeof(rows[0]))

static uint64_t clk;

static void pairs(void *arg, long n)
{
	struct row *r = arg;

	stubs = r->variant;
	for (long i = 0; i < n; i++)
		if (lk_acquire(&r->l) || lk_release(&r->l))
			die("%s: acquire/release failed", r->label);
	stubs = 0;
}

static void reopen(void *arg)
{
	struct row *r = arg;

	lk_open(&r->l, r->kind, r->shared, 0, 0);
}

static void calibrate(struct row *r)
{
	long n = r->kind == LK_BROKER ? 20 : 2000;
	uint64_t t0 = now_ns();
	double per;

	pairs(r, n);
	per = (double)(now_ns() - t0) / (double)n;
	r->batch = (long)(BATCH_NS / (per > 1 ? per : 1));
	if (r->batch < 1)
		r->batch = 1;
}

static void emit_row(struct row *r, const char *key, struct summary *s)
{
	if (r->is_fig) {
		char label[128];

		snprintf(label, sizeof(label),
			 "uncontended %s acquire+release, 1 process",
			 r->label + strlen("weblocks "));
		emit_fig(key, "1", label, "ns/pair", s);
	} else {
		emit_anchor(key, r->label, "ns/pair", s);
	}
}

static void syscalls(struct row *r, struct row *figs)
{
	long n = r->kind == LK_BROKER ? 200 : 5000;
	struct summary s = sum_one(sc_per_op(pairs, r, n));

	if (isnan(s.median)) {
		if (r->is_fig)
			emit_note("system calls per %s pair: not counted (no "
				  "raw_syscalls:sys_enter tracepoint: tracefs "
				  "not mounted, or perf_event_open refused); "
				  "the seccomp check below still runs",
				  r->shared ? "shared" : "exclusive");
		return;
	}
	if (r->is_fig) {
		char key[32], label[96];

		snprintf(key, sizeof(key), "%s.sys", r->fig);
		snprintf(label, sizeof(label), "system calls per %s pair",
			 r->shared ? "shared" : "exclusive");
		emit_fig(key, "1", label, "syscalls/pair", &s);
		emit_target(key, "0 syscalls", s.median == 0,
			    "%.2f (perf raw_syscalls:sys_enter, this thread)",
			    s.median);
		return;
	}
	for (int i = 0; i < 2; i++) {
		char key[32];

		if (strcmp(r->fig, "p1.*") && strcmp(r->fig, figs[i].fig))
			continue;
		snprintf(key, sizeof(key), "%s.sys", figs[i].fig);
		emit_anchor(key, r->label, "syscalls/pair", &s);
	}
}

/* Two parts of the path timed alone, for scale: an atomic add, and a
 * malloc+free of a handle-sized block. */
static volatile uint64_t counter;
static void *volatile sink;

static void rmw(void *arg, long n)
{
	for (long i = 0; i < n; i++)
		__atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST);
}

static void alloc(void *arg, long n)
{
	for (long i = 0; i < n; i++) {
		sink = malloc(48);
		free(sink);
	}
}

static double alone(void (*fn)(void *, long))
{
	struct samples pass = {0}, meds = {0};
	double m;

	for (int k = 0; k < 9; k++)
		samples_add(&meds, rep_batches(fn, NULL, 256, 2000000, clk,
					       &pass));
	m = median(meds.v, meds.n);
	samples_free(&pass);
	samples_free(&meds);
	return m;
}

/*
 * Acquire and release each take the segment mutex: two robust mutex
 * sections are the floor of a pair. The variants show what the library's
 * clock and cancellation-state calls cost; the profile (run.sh) and the
 * instruction counts (callgrind, run.sh) show the rest.
 */
static void limit(const struct summary *w, const struct summary *mu,
		  const char *key)
{
	struct summary vc = fig_sum(&rows[ROW_VAR_CLOCK].f);
	struct summary vb = fig_sum(&rows[ROW_VAR_BOTH].f);

	emit_limit(key, "%.0f ns per pair = %.1fx the robust mutex pair "
		   "(%.1f ns), the target allows %.0f ns. The pair takes "
		   "no mutex (the fast path: CASes on the name's fast word "
		   "and the reserved request slot), but makes 4 locked "
		   "instructions where the mutex pair makes 2 (%.0f ns "
		   "would be 2 mutex pairs). Variants timed in the same "
		   "passes, with "
		   "the library's calls answered by stubs in the benchmark: "
		   "clock_gettime() stubbed %.0f ns (%.1fx), also "
		   "pthread_setcancelstate() stubbed %.0f ns (%.1fx). The "
		   "rest is the library's own work (instructions per pair in "
		   "the table, profile in the notes); for scale, timed alone "
		   "here, an "
		   "atomic add costs %.1f ns and a malloc+free %.0f ns",
		   w->median, w->median / mu->median, mu->median,
		   PAIR_TARGET * mu->median, 2 * mu->median, vc.median,
		   vc.median / mu->median, vb.median, vb.median / mu->median,
		   alone(rmw), alone(alloc));
}

/* Target: each weblocks pair at most PAIR_TARGET robust mutex pairs. */
static void targets(void)
{
	struct summary mu = fig_sum(&rows[2].f);

	for (int i = 0; i < 2; i++) {
		struct summary w = fig_sum(&rows[i].f);
		double x = w.median / mu.median;

		emit_ratio_target(rows[i].fig, "<= 2.5x robust mutex pair", x,
				  PAIR_TARGET, false);
		if (x > PAIR_TARGET)
			limit(&w, &mu, rows[i].fig);
	}
}

/* Cross-check the count: the weblocks pairs under a kill-on-syscall
 * filter, in a child that opens its own manager. */
static void seccomp_check(void)
{
	for (int i = 0; i < 2; i++) {
		int ok = sc_seccomp_clean(reopen, pairs, &rows[i], 10000);

		emit_note("seccomp check, 10000 %s pairs under a filter that "
			  "kills on any system call: %s",
			  rows[i].shared ? "shared" : "exclusive",
			  ok == 1 ? "no system call" :
			  ok == 0 ? "KILLED (a system call was made)" :
				    "could not run");
	}
}

/*
 * For run.sh: -P runs weblocks exclusive pairs for a second (perf record);
 * -I N runs N of them, -K N as many shared pairs and -J N as many robust
 * mutex pairs (callgrind: the difference of two counts is the instructions
 * of the pairs alone).
 */
static int solo_row = -1;
static long solo_n;

static void option(int opt, const char *arg)
{
	solo_row = opt == 'J' ? 2 : opt == 'K' ? 1 : 0;
	solo_n = opt == 'P' ? -1 : atol(arg);
}

static int solo(void)
{
	struct row *r = &rows[solo_row];
	uint64_t end = now_ns() + NSEC_PER_SEC;

	pin_cpu(0);
	lk_world_init("p1p");
	lk_open(&r->l, r->kind, r->shared, 0, 0);
	if (solo_n >= 0)
		pairs(r, solo_n);
	while (solo_n < 0 && now_ns() < end)
		pairs(r, 1000);
	lk_close(&r->l);
	lk_world_fini();
	return 0;
}

int main(int argc, char **argv)
{
	int reps;
	uint64_t rep_ns;

	bench_init_ex(argc, argv, "uncontended", "PI:J:K:", option);
	if (solo_row >= 0)
		return solo();
	reps = QN(9, 3);
	rep_ns = QN(20, 8) * 1000000ull;
	pin_cpu(0);
	lk_world_init("p1");
	clk = clock_overhead_ns();
	for (size_t i = 0; i < NROWS; i++) {
		struct row *r = &rows[i];

		if (r->kind == LK_BROKER) {
			if (r->broker_cpu >= ncpus())
				continue;
			broker_start(&r->b, 1, r->broker_cpu);
			lkw.broker = &r->b;
		}
		lk_open(&r->l, r->kind, r->shared, 0, 0);
		r->used = true;
		calibrate(r);
	}
	for (int p = 0; p < bopt.passes; p++) {
		for (size_t i = 0; i < NROWS; i++) {
			samples_reset(&rows[i].pass);
			samples_reset(&rows[i].repmeds);
		}
		for (int k = 0; k < reps; k++) {
			for (size_t i = 0; i < NROWS; i++) {
				struct row *r = &rows[i];

				if (!r->used)
					continue;
				samples_add(&r->repmeds,
					    rep_batches(pairs, r, r->batch,
							rep_ns, clk, &r->pass));
			}
		}
		for (size_t i = 0; i < NROWS; i++) {
			struct row *r = &rows[i];

			if (r->used)
				fig_add(&r->f,
					median(r->repmeds.v, r->repmeds.n),
					quantile(r->pass.v, r->pass.n, 0.99));
		}
	}
	for (size_t i = 0; i < NROWS; i++) {
		struct row *r = &rows[i];
		struct summary s;

		if (!r->used)
			continue;
		s = fig_sum(&r->f);
		if (r->variant)
			continue; /* only in the limit notes */
		if (!strcmp(r->fig, "p1.*")) {
			emit_row(r, "p1.ex", &s);
			emit_row(r, "p1.sh", &s);
		} else {
			emit_row(r, r->fig, &s);
		}
	}
	targets();
	for (size_t i = 0; i < NROWS; i++)
		if (rows[i].used && !rows[i].variant)
			syscalls(&rows[i], rows);
	seccomp_check();
	for (size_t i = 0; i < NROWS; i++) {
		struct row *r = &rows[i];

		if (!r->used)
			continue;
		lk_close(&r->l);
		if (r->kind == LK_BROKER)
			broker_stop(&r->b);
		samples_free(&r->pass);
		samples_free(&r->repmeds);
	}
	lk_world_fini();
	bench_fini();
	return 0;
}
