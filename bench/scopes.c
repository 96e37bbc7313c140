/* SPDX-License-Identifier: MIT */
/*
 * scopes.c - part 6, scopes (weblocks.h, SCOPES): an uncontended
 * wlk_acquire_scope() + wlk_release() of 2 and of 16 names, against taking
 * the same names one by one (N wlk_acquire() in name order, then N
 * wlk_release()), and against a robust mutex pair, measured beside them.
 *
 * One process pinned to CPU 0, one manager. Per pass, the three methods of
 * each size run in interleaved repetitions of batches. A scope always
 * takes the segment mutex (once to be granted, once to be released); a
 * single uncontended name takes the fast path, without it: the one-by-one
 * figure is what the scope's atomicity is weighed against.
 */
#include <stdio.h>

#include "bench.h"
#include "locks.h"

#define BATCH 16
#define MAX_N 16

static const int sizes[] = {2, 16};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static struct wlk_manager *m;
static struct wlk_name names[MAX_N];
static char bytes[MAX_N][8];
static uint64_t clk;

struct size_figs {
	struct fig scope, singles, robust;
};
static struct size_figs figs[NSIZES];

static void scope_pairs(void *arg, long n)
{
	size_t k = (size_t)(long)arg;

	for (long i = 0; i < n; i++) {
		struct wlk_lock *l;

		check(wlk_acquire_scope(m, names, k, NULL, &l), "scope");
		check(wlk_release(l), "release");
	}
}

static void single_pairs(void *arg, long n)
{
	size_t k = (size_t)(long)arg;
	struct wlk_lock *l[MAX_N];

	for (long i = 0; i < n; i++) {
		for (size_t j = 0; j < k; j++)
			check(wlk_acquire(m, names[j].name, names[j].len,
					  NULL, &l[j]),
			      "acquire");
		for (size_t j = k; j-- > 0;)
			check(wlk_release(l[j]), "release");
	}
}

static void one_pass(int reps, uint64_t dur)
{
	for (size_t s = 0; s < NSIZES; s++) {
		void *arg = (void *)(long)sizes[s];
		struct samples pass[3] = {{0}}, meds[3] = {{0}};

		for (int r = 0; r < reps; r++) {
			samples_add(&meds[0], rep_batches(scope_pairs, arg,
							  BATCH, dur, clk,
							  &pass[0]));
			samples_add(&meds[1], rep_batches(single_pairs, arg,
							  BATCH, dur, clk,
							  &pass[1]));
			samples_add(&meds[2], rep_batches(lk_robust_pairs,
							  NULL, BATCH, dur,
							  clk, &pass[2]));
		}
		fig_add(&figs[s].scope, median(meds[0].v, meds[0].n),
			quantile(pass[0].v, pass[0].n, 0.99));
		fig_add(&figs[s].singles, median(meds[1].v, meds[1].n),
			quantile(pass[1].v, pass[1].n, 0.99));
		fig_add(&figs[s].robust, median(meds[2].v, meds[2].n),
			quantile(pass[2].v, pass[2].n, 0.99));
		for (int w = 0; w < 3; w++) {
			samples_free(&pass[w]);
			samples_free(&meds[w]);
		}
	}
}

static void report(void)
{
	for (size_t s = 0; s < NSIZES; s++) {
		struct summary sc = fig_sum(&figs[s].scope);
		struct summary si = fig_sum(&figs[s].singles);
		struct summary ro = fig_sum(&figs[s].robust);
		char key[32], label[128];

		snprintf(key, sizeof(key), "p6.scope.%d", sizes[s]);
		snprintf(label, sizeof(label),
			 "wlk_acquire_scope()+wlk_release(), %d names, "
			 "uncontended", sizes[s]);
		emit_fig(key, "6", label, "ns/pair", &sc);
		snprintf(label, sizeof(label),
			 "the same %d names one by one: %d wlk_acquire(), "
			 "then %d wlk_release()", sizes[s], sizes[s], sizes[s]);
		emit_anchor(key, label, "ns", &si);
		emit_anchor(key, "robust pshared pthread mutex pair, measured "
			    "beside it", "ns/pair", &ro);
		emit_note("scope of %d names: %.0f ns a pair, %.0f ns a name; "
			  "one by one %.0f ns a name (each by the fast path, "
			  "without the segment mutex)", sizes[s], sc.median,
			  sc.median / sizes[s], si.median / sizes[s]);
	}
}

int main(int argc, char **argv)
{
	int reps;
	uint64_t dur;

	bench_init(argc, argv, "scopes");
	reps = QN(5, 2);
	dur = QN(10, 4) * 1000000ull;
	pin_cpu(0);
	lk_world_init("p6s");
	clk = clock_overhead_ns();
	check(wlk_manager_open(lkw.origin, NULL, &m), "open");
	for (int i = 0; i < MAX_N; i++) {
		int len = snprintf(bytes[i], sizeof(bytes[i]), "n%02d", i);

		names[i] = (struct wlk_name){bytes[i], (size_t)len};
	}
	for (int p = 0; p < bopt.passes; p++)
		one_pass(reps, dur);
	report();
	wlk_manager_close(m);
	lk_world_fini();
	bench_fini();
	return 0;
}
