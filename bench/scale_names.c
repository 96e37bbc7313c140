/* SPDX-License-Identifier: MIT */
/*
 * scale_names.c - part 5, names: the cost of an uncontended exclusive
 * acquire+release of one more name while N other names are held (by
 * another client of the same process), and of wlk_query() with N held
 * entries, against reading /proc/locks with N flock(2) entries (what a
 * flock user would read to list locks). N = 1 .. 100k.
 *
 * The bucket is created with max_names = max_requests = 2^17 (so that
 * 100k fit; the hard limits are 2^20 and 2^22) and max_name_len = 32 (the
 * default 1024 would make a 150 MB segment). The process is pinned to
 * CPU 0. Per pass, N grows through the points; at each point the weblocks
 * pair and a robust mutex pair run in interleaved repetitions (the robust
 * pair says whether the machine's speed drifted between points).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench.h"
#include "locks.h"

#define CAPACITY (1u << 17)
#define NAME_LEN 32
#define BATCH 32

static const long points[] = {1, 10, 100, 1000, 10000, 100000};
#define NPOINTS (sizeof(points) / sizeof(points[0]))

struct point {
	struct fig pair, robust, query, proc;
};

static struct point pt[NPOINTS];
static struct wlk_manager *holder, *prober;
static struct wlk_lock **held;
static long nheld;
static uint64_t clk;
static int *fds;
static long nfds, max_fds;

static void hold_until(long n)
{
	static const struct wlk_options ifa = {.if_available = true};
	char name[NAME_LEN];

	for (; nheld < n; nheld++) {
		int len = snprintf(name, sizeof(name), "held-%ld", nheld);

		check(wlk_acquire(holder, name, (size_t)len, &ifa,
				  &held[nheld]), "hold");
		if (!held[nheld])
			die("held-%ld is not free", nheld);
	}
}

static void wlk_pairs(void *arg, long n)
{
	for (long i = 0; i < n; i++) {
		struct wlk_lock *x;

		check(wlk_acquire(prober, "probe", 5, NULL, &x), "acquire");
		check(wlk_release(x), "release");
	}
}

static double time_query(void)
{
	struct wlk_snapshot *s;
	uint64_t t0 = now_ns();

	check(wlk_query(prober, &s), "query");
	if (wlk_snapshot_held_count(s) < (size_t)nheld)
		die("query: %zu held, want %ld", wlk_snapshot_held_count(s),
		    nheld);
	wlk_snapshot_free(s);
	return (double)(now_ns() - t0) / 1e3;
}

/*
 * /proc/locks with n flock entries, one per file: flock(2) on n open file
 * descriptions of one file would take time quadratic in n to set up. The
 * files are unlinked at once; their locks live as long as the fds.
 */
static double time_proc_locks(long n)
{
	static char buf[1 << 16];
	uint64_t t0;
	int fd;

	for (; nfds < n && nfds < max_fds; nfds++) {
		char path[128];

		snprintf(path, sizeof(path), "%s.%ld", lkw.files[0], nfds);
		fds[nfds] = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
		if (fds[nfds] < 0)
			die("%s: %s", path, strerror(errno));
		unlink(path);
		if (flock(fds[nfds], LOCK_EX) < 0)
			die("flock %ld: %s", nfds, strerror(errno));
	}
	if (nfds < n)
		return NAN;
	t0 = now_ns();
	fd = open("/proc/locks", O_RDONLY);
	if (fd < 0)
		return NAN;
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
	return (double)(now_ns() - t0) / 1e3;
}

/* Time-bounded repetitions of a slow call: at least 3, about @dur. */
static double rep_slow(double (*fn)(long), long n, uint64_t dur,
		       struct samples *pass)
{
	struct samples rep = {0};
	uint64_t end = now_ns() + dur;
	double m;

	do {
		double v = fn(n);

		if (isnan(v))
			break;
		samples_add(&rep, v);
		samples_add(pass, v);
	} while (rep.n < 3 || now_ns() < end);
	m = median(rep.v, rep.n);
	samples_free(&rep);
	return m;
}

static double query_fn(long n)
{
	(void)n;
	return time_query();
}

static void one_pass(int reps, uint64_t dur)
{
	for (size_t i = 0; i < NPOINTS; i++) {
		struct samples pp[2] = {{0}}, pm[2] = {{0}}, q = {0}, pr = {0};
		double qm, pm_proc;

		hold_until(points[i]);
		for (int k = 0; k < reps; k++)
			for (int w = 0; w < 2; w++)
				samples_add(&pm[w], rep_batches(
					w ? lk_robust_pairs : wlk_pairs, NULL,
					BATCH, dur, clk, &pp[w]));
		fig_add(&pt[i].pair, median(pm[0].v, pm[0].n),
			quantile(pp[0].v, pp[0].n, 0.99));
		fig_add(&pt[i].robust, median(pm[1].v, pm[1].n),
			quantile(pp[1].v, pp[1].n, 0.99));
		qm = rep_slow(query_fn, points[i], 3 * dur, &q);
		fig_add(&pt[i].query, qm, quantile(q.v, q.n, 0.99));
		pm_proc = rep_slow(time_proc_locks, points[i], 3 * dur, &pr);
		if (!isnan(pm_proc))
			fig_add(&pt[i].proc, pm_proc,
				quantile(pr.v, pr.n, 0.99));
		for (int w = 0; w < 2; w++) {
			samples_free(&pp[w]);
			samples_free(&pm[w]);
		}
		samples_free(&q);
		samples_free(&pr);
	}
	for (long i = 0; i < nheld; i++)
		check(wlk_release(held[i]), "release");
	nheld = 0;
	for (long i = 0; i < nfds; i++)
		close(fds[i]);
	nfds = 0;
}

static size_t index_of(long n)
{
	for (size_t i = 0; i < NPOINTS; i++)
		if (points[i] == n)
			return i;
	die("no point %ld", n);
}

/*
 * What a held entry adds to a query: (the query with @n entries - the
 * query with 1) / (n - 1). A difference below zero is the noise of two
 * medians, not a negative cost; it is said so rather than printed.
 */
static void per_entry(const char *label, double us_n, double us_1, long n)
{
	double d = us_n - us_1;

	if (d < 0)
		emit_note("%s: no cost per held entry measurable (%.0f us, "
			  "less than the %.0f us with 1 entry: the scan of "
			  "all 2^17 name slots dominates both)", label, us_n,
			  us_1);
	else
		emit_note("%s: %.0f ns per held entry beyond the first (the "
			  "rest is the same with 1 entry: the scan of all "
			  "2^17 name slots)", label, d * 1e3 / (double)(n - 1));
}

static void report(void)
{
	static const long rows[] = {1000, 100000};
	struct summary s;

	for (size_t i = 0; i < NPOINTS; i++) {
		double x = (double)points[i];

		s = fig_sum(&pt[i].pair);
		emit_point("names.weblocks", x, &s);
		s = fig_sum(&pt[i].robust);
		emit_point("names.robust", x, &s);
		s = fig_sum(&pt[i].query);
		emit_point("query.weblocks", x, &s);
		if (pt[i].proc.n) {
			s = fig_sum(&pt[i].proc);
			emit_point("query.proclocks", x, &s);
		}
	}
	for (size_t r = 0; r < 2; r++) {
		size_t i = index_of(rows[r]);
		const char *n = r ? "100k" : "1k";
		char key[32], label[96];

		snprintf(key, sizeof(key), "p5.names.%s", n);
		snprintf(label, sizeof(label),
			 "acquire+release of one more name, %s names held", n);
		s = fig_sum(&pt[i].pair);
		emit_fig(key, "5", label, "ns/pair", &s);
		s = fig_sum(&pt[0].pair);
		emit_anchor(key, "weblocks, 1 name held (same run)", "ns/pair",
			    &s);
		s = fig_sum(&pt[i].robust);
		emit_anchor(key, "robust pshared pthread mutex pair, measured "
			    "beside it", "ns/pair", &s);
	}
	for (size_t r = 0; r < 2; r++) {
		size_t i = index_of(rows[r]);
		const char *n = r ? "100k" : "1k";
		char key[32], label[96];

		snprintf(key, sizeof(key), "p5.query.%s", n);
		snprintf(label, sizeof(label),
			 "wlk_query() + free, %s held entries", n);
		s = fig_sum(&pt[i].query);
		emit_fig(key, "5", label, "us", &s);
		per_entry(label, s.median, fig_sum(&pt[0].query).median,
			  rows[r]);
		s = fig_sum(&pt[0].query);
		emit_anchor(key, "wlk_query(), 1 held entry (same run)", "us",
			    &s);
		if (pt[i].proc.n) {
			s = fig_sum(&pt[i].proc);
			snprintf(label, sizeof(label),
				 "read /proc/locks with %s flock(2) entries",
				 n);
			emit_anchor(key, label, "us", &s);
		}
	}
}

int main(int argc, char **argv)
{
	struct wlk_manager_options o = {
		.max_names = CAPACITY,
		.max_requests = CAPACITY,
		.max_name_len = NAME_LEN,
	};
	struct rlimit rl;
	uint64_t dur;
	int reps;

	bench_init(argc, argv, "scale_names");
	reps = QN(5, 2);
	dur = QN(10, 4) * 1000000ull;
	pin_cpu(0);
	lk_world_init("p5n");
	clk = clock_overhead_ns();
	check(wlk_manager_open(lkw.origin, &o, &holder), "open");
	check(wlk_manager_open(lkw.origin, &o, &prober), "open");
	held = calloc((size_t)points[NPOINTS - 1], sizeof(*held));
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	max_fds = (long)rl.rlim_cur - 64;
	fds = calloc((size_t)(max_fds > 0 ? max_fds : 1), sizeof(*fds));
	if (!held || !fds)
		die("out of memory");
	for (int p = 0; p < bopt.passes; p++)
		one_pass(reps, dur);
	report();
	wlk_manager_close(holder);
	wlk_manager_close(prober);
	free(held);
	free(fds);
	lk_world_fini();
	bench_fini();
	return 0;
}
