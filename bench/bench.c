/* SPDX-License-Identifier: MIT */
/* bench.c - the helpers of bench.h. */
#include <errno.h>
#include <math.h>
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <weblocks.h>

#include "bench.h"

#define CHILD_TIMEOUT_S 120

struct bench_opts bopt;
static FILE *out;
static const char *progname;

void bench_init(int argc, char **argv, const char *prog)
{
	bench_init_ex(argc, argv, prog, "", NULL);
}

void bench_init_ex(int argc, char **argv, const char *prog,
		   const char *extra, void (*cb)(int opt, const char *arg))
{
	const char *q = getenv("BENCH_QUICK");
	char optstr[64];
	int opt;

	progname = prog;
	bopt.quick = q && *q && strcmp(q, "0");
	bopt.passes = 0;
	snprintf(optstr, sizeof(optstr), "o:qp:%s", extra);
	while ((opt = getopt(argc, argv, optstr)) != -1) {
		if (opt == 'o')
			bopt.out = optarg;
		else if (opt == 'q')
			bopt.quick = true;
		else if (opt == 'p')
			bopt.passes = atoi(optarg);
		else if (opt != '?' && cb)
			cb(opt, optarg);
		else
			die("usage: %s [-o FILE] [-q] [-p PASSES] (see the "
			    "top of %s.c)", prog, prog);
	}
	if (bopt.passes < 1)
		bopt.passes = QN(3, 2);
	if (bopt.passes > MAX_PASSES)
		bopt.passes = MAX_PASSES;
	out = stdout;
	if (bopt.out) {
		out = fopen(bopt.out, "a");
		if (!out)
			die("%s: %s", bopt.out, strerror(errno));
	}
	/* Records must not interleave with a forked child's buffer. */
	setvbuf(out, NULL, _IOLBF, 0);
}

void bench_fini(void)
{
	if (out && out != stdout)
		fclose(out);
	out = NULL;
}

void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", progname ? progname : "bench");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

void check(int rc, const char *what)
{
	if (rc)
		die("%s: %s", what, wlk_strerror(rc));
}

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

void spin_until(uint64_t t)
{
	while (now_ns() < t)
		__builtin_ia32_pause();
}

uint64_t clock_overhead_ns(void)
{
	double v[101];

	for (int i = 0; i < 101; i++) {
		uint64_t t0 = now_ns();

		for (int k = 0; k < 64; k++)
			(void)now_ns();
		v[i] = (double)(now_ns() - t0) / 65.0;
	}
	return (uint64_t)median(v, 101);
}

void pin_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	if (cpu < 0) {
		for (int i = 0; i < CPU_SETSIZE && i < ncpus(); i++)
			CPU_SET(i, &set);
	} else {
		CPU_SET(cpu % ncpus(), &set);
	}
	if (sched_setaffinity(0, sizeof(set), &set) < 0)
		die("sched_setaffinity: %s", strerror(errno));
}

int ncpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (int)n : 1;
}

void fwait(volatile uint32_t *w, uint32_t val)
{
	syscall(SYS_futex, w, FUTEX_WAIT, val, NULL, NULL, 0);
}

void fwake(volatile uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void *shared_alloc(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap %zu: %s", size, strerror(errno));
	return p;
}

void bench_origin(char *buf, size_t cap, const char *tag)
{
	snprintf(buf, cap, "https://%s-%d.bench.invalid", tag, (int)getpid());
}

void bench_lockfile(char *buf, size_t cap, const char *tag)
{
	snprintf(buf, cap, "/dev/shm/wlkbench-%s-%d.lock", tag, (int)getpid());
}

pid_t spawn(int (*fn)(void *), void *arg)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		alarm(CHILD_TIMEOUT_S); /* a wedged child must not hang make */
		_exit(fn(arg));
	}
	return pid;
}

void reap(pid_t pid, const char *what)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			die("waitpid: %s", strerror(errno));
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		die("%s: child failed (status %#x)", what, st);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Nearest rank, so that a p99 is always a value that was measured. */
double quantile(double *v, size_t n, double q)
{
	size_t k;

	if (!n)
		return NAN;
	qsort(v, n, sizeof(*v), cmp_double);
	k = (size_t)ceil(q * (double)n);
	return v[k ? k - 1 : 0];
}

double median(double *v, size_t n)
{
	if (!n)
		return NAN;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void samples_add(struct samples *s, double x)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 1024;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		if (!s->v)
			die("out of memory");
	}
	s->v[s->n++] = x;
}

void samples_reset(struct samples *s)
{
	s->n = 0;
}

void samples_free(struct samples *s)
{
	free(s->v);
	*s = (struct samples){0};
}

double rep_batches(void (*fn)(void *arg, long n), void *arg, long batch,
		   uint64_t dur, uint64_t clk, struct samples *pass)
{
	struct samples rep = {0};
	uint64_t end = now_ns() + dur;
	double m;

	do {
		uint64_t t0 = now_ns(), t;

		fn(arg, batch);
		t = now_ns() - t0;
		t = t > clk ? t - clk : 0;
		samples_add(&rep, (double)t / (double)batch);
		samples_add(pass, (double)t / (double)batch);
	} while (now_ns() < end);
	m = median(rep.v, rep.n);
	samples_free(&rep);
	return m;
}

void fig_add(struct fig *f, double med, double p99)
{
	if (f->n < MAX_PASSES) {
		f->med[f->n] = med;
		f->p99[f->n] = p99;
		f->n++;
	}
}

struct summary fig_sum(const struct fig *f)
{
	struct summary s = {.passes = f->n};
	double m[MAX_PASSES], p[MAX_PASSES];
	int np = 0;

	for (int i = 0; i < f->n; i++) {
		m[i] = f->med[i];
		if (!isnan(f->p99[i]))
			p[np++] = f->p99[i];
	}
	s.median = median(m, (size_t)f->n); /* sorts m: ends are the range */
	s.lo = f->n ? m[0] : NAN;
	s.hi = f->n ? m[f->n - 1] : NAN;
	s.p99 = median(p, (size_t)np);
	return s;
}

struct summary sum_one(double v)
{
	return (struct summary){v, NAN, v, v, 1};
}

static void put_sum(const struct summary *s)
{
	fprintf(out, "\t%.10g\t%.10g\t%.10g\t%.10g\t%d\n", s->median, s->p99,
		s->lo, s->hi, s->passes);
}

void emit_fig(const char *key, const char *part, const char *label,
	      const char *unit, const struct summary *s)
{
	fprintf(out, "fig\t%s\t%s\t%s\t%s", key, part, label, unit);
	put_sum(s);
}

void emit_anchor(const char *key, const char *label, const char *unit,
		 const struct summary *s)
{
	fprintf(out, "anc\t%s\t%s\t%s", key, label, unit);
	put_sum(s);
}

void emit_target(const char *key, const char *target, bool met,
		 const char *fmt, ...)
{
	va_list ap;

	fprintf(out, "tgt\t%s\t%s\t%s\t", key, target, met ? "met" : "MISSED");
	va_start(ap, fmt);
	vfprintf(out, fmt, ap);
	va_end(ap);
	fputc('\n', out);
}

void emit_ratio_target(const char *key, const char *target, double x,
		       double bound, bool at_least)
{
	emit_target(key, target, at_least ? x >= bound : x <= bound, "%.*fx",
		    ratio_decimals(x, bound), x);
}

void emit_note(const char *fmt, ...)
{
	va_list ap;

	fprintf(out, "note\t%s\t", progname);
	va_start(ap, fmt);
	vfprintf(out, fmt, ap);
	va_end(ap);
	fputc('\n', out);
}

void emit_limit(const char *key, const char *fmt, ...)
{
	va_list ap;

	fprintf(out, "lim\t%s\t", key);
	va_start(ap, fmt);
	vfprintf(out, fmt, ap);
	va_end(ap);
	fputc('\n', out);
}

void emit_point(const char *curve, double x, const struct summary *s)
{
	fprintf(out, "pt\t%s\t%.10g", curve, x);
	put_sum(s);
}

void emit_setup(const char *key, const char *fmt, ...)
{
	va_list ap;

	fprintf(out, "setup\t%s\t", key);
	va_start(ap, fmt);
	vfprintf(out, fmt, ap);
	va_end(ap);
	fputc('\n', out);
}
