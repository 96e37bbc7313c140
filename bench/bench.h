/* SPDX-License-Identifier: MIT */
/*
 * bench.h - what every benchmark program shares: clocks, pinning, shared
 * memory, statistics, and the result records bench/report.awk turns into
 * the one table.
 *
 * METHOD. A figure is measured in several passes. Within a pass, the
 * methods being compared run in interleaved repetitions, so that a drift
 * of the machine's speed hits them all alike; a pass yields a median (of
 * the repetition medians) and a p99 (over every sample of the pass). The
 * figure is the median of the pass medians and of the pass p99s, with the
 * range of the pass medians. Every ratio compares figures of one run.
 */
#ifndef BENCH_H
#define BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ratio.h"

#define NSEC_PER_SEC 1000000000ull
#define NSEC_PER_USEC 1000ull
#define MAX_PASSES 16

/* Command line of every program: -o FILE (append records), -q (quick),
 * -p PASSES. BENCH_QUICK=1 in the environment also selects quick. */
struct bench_opts {
	const char *out;
	bool quick;
	int passes;
};

extern struct bench_opts bopt;

void bench_init(int argc, char **argv, const char *prog);
/* The same with more options: @extra in getopt(3) syntax, each one found
 * is passed to @cb. */
void bench_init_ex(int argc, char **argv, const char *prog,
		   const char *extra, void (*cb)(int opt, const char *arg));
void bench_fini(void);
/* Pick the normal or the quick value of a parameter. */
#define QN(n, q) (bopt.quick ? (q) : (n))

void die(const char *fmt, ...) __attribute__((format(printf, 1, 2),
					       noreturn));
/* Exit with a message if a weblocks call failed. */
void check(int rc, const char *what);

uint64_t now_ns(void);
/* Busy-wait: sleeping would change what is measured. */
void spin_until(uint64_t t);
/* What one now_ns() pair costs, subtracted from timed batches. */
uint64_t clock_overhead_ns(void);

/* Pin the calling thread to one CPU; -1 allows every CPU. */
void pin_cpu(int cpu);
int ncpus(void);

/* Shared (not private) futex wait and wake: parking the helper threads of
 * a benchmark so that they do not compete for the CPUs being measured. */
void fwait(volatile uint32_t *w, uint32_t val);
void fwake(volatile uint32_t *w);

/* Zeroed memory shared with the children forked after the call. */
void *shared_alloc(size_t size);

/* Unique per run: origins, bucket names and lock files carry the pid. */
void bench_origin(char *buf, size_t cap, const char *tag);
void bench_lockfile(char *buf, size_t cap, const char *tag);

/* Fork a child that runs fn(arg) and exits with its return value. */
pid_t spawn(int (*fn)(void *), void *arg);
/* Wait for a child; die unless it exited with status 0. */
void reap(pid_t pid, const char *what);

/* Statistics over doubles; they sort @v in place. */
double quantile(double *v, size_t n, double q);
double median(double *v, size_t n);

/* A growable list of samples. */
struct samples {
	double *v;
	size_t n, cap;
};

void samples_add(struct samples *s, double x);
void samples_reset(struct samples *s);
void samples_free(struct samples *s);

/*
 * One repetition of about @dur: time batches of @batch calls of fn(arg,
 * batch), minus the clock's cost @clk; append each batch's ns per call to
 * @pass and return the median batch.
 */
double rep_batches(void (*fn)(void *arg, long n), void *arg, long batch,
		   uint64_t dur, uint64_t clk, struct samples *pass);

/* One figure over passes. */
struct fig {
	double med[MAX_PASSES];
	double p99[MAX_PASSES];
	int n;
};

struct summary {
	double median; /* median over passes of the pass medians */
	double p99;    /* median over passes of the pass p99s; NAN if none */
	double lo, hi; /* range of the pass medians */
	int passes;
};

void fig_add(struct fig *f, double med, double p99);
struct summary fig_sum(const struct fig *f);
/* A single value (a count, a size): no spread. */
struct summary sum_one(double v);

/*
 * Result records, one tab-separated line each (see report.awk):
 * a figure of weblocks, an anchor beside it (the ratio is figure/anchor),
 * a target verdict, a note for results.md, what limits a missed target, a
 * point of a plotted curve, a setup line.
 */
void emit_fig(const char *key, const char *part, const char *label,
	      const char *unit, const struct summary *s);
void emit_anchor(const char *key, const char *label, const char *unit,
		 const struct summary *s);
void emit_target(const char *key, const char *target, bool met,
		 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* emit_target() for ratio @x against @bound: met if @x <= @bound, or
 * @x >= @bound with @at_least; the verdict's ratio has three decimals
 * where two would round it onto @bound. */
void emit_ratio_target(const char *key, const char *target, double x,
		       double bound, bool at_least);
void emit_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* What limits a missed target, with the measurement that shows it. */
void emit_limit(const char *key, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void emit_point(const char *curve, double x, const struct summary *s);
void emit_setup(const char *key, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* BENCH_H */
