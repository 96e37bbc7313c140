/* SPDX-License-Identifier: MIT */
/*
 * scale_shared.c - part 5, shared queues: N shared requests (N = 1 ..
 * 1000, threads of one process on CPU 1) are queued behind an exclusive
 * holder (the parent, on CPU 0). Measured:
 *
 *  - release -> all N granted: from the holder's release call to the
 *    latest return of the N acquire calls (one release grants them all).
 *    Each thread then only counts itself and waits until all are
 *    granted before it releases, as the anchor's threads only count
 *    themselves: the N threads share one CPU, and releases of the first
 *    ones would otherwise run before the last ones are woken, and count;
 *  - the release call itself (it issues the N wake-ups);
 *  - enqueue + abort behind N pending: an exclusive request with a 1 ns
 *    timeout from another client of the parent, which joins the tail of
 *    the queue, arms its wait, times out and leaves; the per-operation
 *    cost of a queue N long, with no system call and no sleep.
 *
 * A cycle: the holder waits (wlk_query) until N requests are pending,
 * runs the probes, lets 100 us pass so the waiters are asleep, releases,
 * waits until all N have counted themselves granted, lets them release,
 * and requests exclusively again; it is granted once all N have released,
 * and then lets the threads queue again.
 *
 * The anchor of "release -> all N granted", measured the same way in the
 * same passes (interleaved): N threads of the same kind of process, on
 * CPU 1, sleep in FUTEX_WAIT on one shared word; the parent waits until
 * all N are about to sleep, lets 100 us pass, reads the clock and makes
 * one FUTEX_WAKE(INT_MAX) on the word; each thread reads the clock when
 * its wait returns. The floor of waking N threads of another process.
 *
 * Targets: release -> all 1000 granted at most 1.5x that anchor; the
 * release call that grants 1000 at most 20x the one that grants 1 (a
 * batch grant wakes in O(1) system calls).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "locks.h"
#include "syscount.h"

#define SETTLE_NS (100 * NSEC_PER_USEC)
#define MAX_WAITERS 1000
#define PROBES 64

static const int points[] = {1, 10, 100, 1000};
#define NPOINTS (sizeof(points) / sizeof(points[0]))
/*
 * The cycle word's value that tells the threads to quit. Quitting must
 * change the word the threads sleep on: a separate flag set between a
 * thread's check of it and its futex wait would never wake that thread.
 */
#define CYCLE_QUIT UINT32_MAX

struct burst {
	uint32_t cycle; /* threads queue once per cycle; CYCLE_QUIT */
	uint32_t gate;	  /* the anchor's threads sleep on it */
	uint32_t arrived; /* the anchor's threads about to sleep */
	uint32_t done;	  /* threads woken (anchor) or granted */
	uint32_t let_go;  /* granted threads release once it changes */
	uint64_t granted_ns[MAX_WAITERS];
};

/* What is measured at each point: the three figures, and the anchor. */
enum { ALL, REL, PROBE, FUTEX, NWHAT };

struct point {
	struct fig f[NWHAT];
	long sys, releases; /* system calls of the release calls */
};

static struct burst *bu;
static struct wlk_manager *tm; /* the threads' manager */
static bool futex_mode;	       /* the child runs the anchor's threads */
static int nthreads;	       /* in the child */
static struct point pt[NPOINTS];
static struct sc rel_sc;

/* Wait for the parent's next cycle (past *@seen); false: quit. */
static bool next_cycle(uint32_t *seen)
{
	uint32_t c;

	while ((c = __atomic_load_n(&bu->cycle, __ATOMIC_ACQUIRE)) == *seen)
		fwait(&bu->cycle, *seen);
	*seen = c;
	return c != CYCLE_QUIT;
}

static void *shared_thread(void *arg)
{
	static const struct wlk_options sh = {.mode = WLK_SHARED};
	int me = (int)(intptr_t)arg;
	uint32_t seen = 0;

	while (next_cycle(&seen)) {
		struct wlk_lock *l;
		uint32_t g = __atomic_load_n(&bu->let_go, __ATOMIC_ACQUIRE);

		check(wlk_acquire(tm, "q", 1, &sh, &l), "acquire");
		bu->granted_ns[me] = now_ns();
		/* Hold until all are granted, doing no more than the
		 * anchor's threads do, so that releases of the first ones
		 * do not delay the grants of the last on this CPU. */
		if (__atomic_add_fetch(&bu->done, 1, __ATOMIC_ACQ_REL) ==
		    (uint32_t)nthreads)
			fwake(&bu->done);
		while (__atomic_load_n(&bu->let_go, __ATOMIC_ACQUIRE) == g)
			fwait(&bu->let_go, g);
		check(wlk_release(l), "release");
	}
	return NULL;
}

/* The anchor's thread: as shared_thread, a futex wait for the lock. */
static void *futex_thread(void *arg)
{
	int me = (int)(intptr_t)arg;
	uint32_t seen = 0;

	while (next_cycle(&seen)) {
		uint32_t g;

		/* The parent opens the gate only after all have arrived. */
		g = __atomic_load_n(&bu->gate, __ATOMIC_ACQUIRE);
		__atomic_add_fetch(&bu->arrived, 1, __ATOMIC_RELEASE);
		while (__atomic_load_n(&bu->gate, __ATOMIC_ACQUIRE) == g)
			fwait(&bu->gate, g);
		bu->granted_ns[me] = now_ns();
		if (__atomic_add_fetch(&bu->done, 1, __ATOMIC_ACQ_REL) ==
		    (uint32_t)nthreads)
			fwake(&bu->done);
	}
	return NULL;
}

static int shared_proc(void *arg)
{
	int n = (int)(intptr_t)arg;
	pthread_t t[MAX_WAITERS];
	pthread_attr_t a;

	pin_cpu(1);
	nthreads = n;
	if (!futex_mode)
		check(wlk_manager_open(lkw.origin, NULL, &tm), "open");
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 64 * 1024);
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], &a,
				   futex_mode ? futex_thread : shared_thread,
				   (void *)(intptr_t)i))
			die("pthread_create");
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	if (!futex_mode)
		wlk_manager_close(tm);
	return 0;
}

static void await_pending(struct wlk_manager *m, size_t n)
{
	for (;;) {
		struct wlk_snapshot *s;
		size_t k;

		check(wlk_query(m, &s), "query");
		k = wlk_snapshot_pending_count(s);
		wlk_snapshot_free(s);
		if (k >= n)
			return;
		usleep(20);
	}
}

static void probes(struct wlk_manager *pm, struct samples *out)
{
	static const struct wlk_options o = {.timeout_ns = 1};
	uint64_t t0 = now_ns();

	for (int i = 0; i < PROBES; i++) {
		struct wlk_lock *l;
		int rc = wlk_acquire(pm, "q", 1, &o, &l);

		if (rc != WLK_ETIMEDOUT)
			die("probe: %s", wlk_strerror(rc));
	}
	samples_add(out, (double)(now_ns() - t0) / PROBES);
}

static uint64_t latest_grant(int n)
{
	uint64_t last = 0;

	for (int i = 0; i < n; i++) {
		if (!bu->granted_ns[i])
			die("waiter %d not granted", i);
		if (bu->granted_ns[i] > last)
			last = bu->granted_ns[i];
	}
	return last;
}

/* Runs of one point; appends to the pass samples, returns rep medians. */
static void run(struct wlk_manager *hm, struct wlk_manager *pm, int n,
		int cycles, struct samples pass[NWHAT], double med[NWHAT],
		struct point *p)
{
	struct samples rep[3] = {{0}};
	struct wlk_lock *h;
	long sys0 = sc_count(&rel_sc);
	pid_t pid;

	memset(bu, 0, sizeof(*bu));
	check(wlk_acquire(hm, "q", 1, NULL, &h), "acquire");
	futex_mode = false;
	pid = spawn(shared_proc, (void *)(intptr_t)n);
	for (int c = 0; c <= cycles; c++) {
		uint64_t t0, t1, last;

		uint32_t d;

		for (int i = 0; i < n; i++)
			bu->granted_ns[i] = 0;
		bu->done = 0;
		__atomic_store_n(&bu->cycle, bu->cycle + 1, __ATOMIC_RELEASE);
		fwake(&bu->cycle);
		await_pending(hm, (size_t)n);
		probes(pm, &rep[2]);
		spin_until(now_ns() + SETTLE_NS);
		sc_on(&rel_sc);
		t0 = now_ns();
		check(wlk_release(h), "release");
		t1 = now_ns();
		sc_off(&rel_sc);
		while ((d = __atomic_load_n(&bu->done, __ATOMIC_ACQUIRE)) <
		       (uint32_t)n)
			fwait(&bu->done, d);
		__atomic_store_n(&bu->let_go, bu->let_go + 1, __ATOMIC_RELEASE);
		fwake(&bu->let_go);
		/* Granted once all N have released. */
		check(wlk_acquire(hm, "q", 1, NULL, &h), "acquire");
		last = latest_grant(n);
		if (c == 0) { /* warm-up */
			samples_reset(&rep[2]);
			continue;
		}
		samples_add(&rep[0], (double)(last - t0) / 1e3);
		samples_add(&rep[1], (double)(t1 - t0) / 1e3);
	}
	p->sys += sc_count(&rel_sc) - sys0;
	p->releases += cycles + 1;
	__atomic_store_n(&bu->cycle, CYCLE_QUIT, __ATOMIC_RELEASE);
	fwake(&bu->cycle);
	reap(pid, "shared waiters");
	check(wlk_release(h), "release");
	for (int w = 0; w < 3; w++) {
		for (size_t i = 0; i < rep[w].n; i++)
			samples_add(&pass[w], rep[w].v[i]);
		med[w] = median(rep[w].v, rep[w].n);
		samples_free(&rep[w]);
	}
}

/* The anchor at one point: as run(), a futex word instead of the lock. */
static void run_futex(int n, int cycles, struct samples pass[NWHAT],
		      double med[NWHAT])
{
	struct samples rep = {0};
	pid_t pid;

	memset(bu, 0, sizeof(*bu));
	futex_mode = true;
	pid = spawn(shared_proc, (void *)(intptr_t)n);
	for (int c = 0; c <= cycles; c++) {
		uint32_t d;
		uint64_t t0;

		for (int i = 0; i < n; i++)
			bu->granted_ns[i] = 0;
		bu->arrived = 0;
		bu->done = 0;
		__atomic_store_n(&bu->cycle, bu->cycle + 1, __ATOMIC_RELEASE);
		fwake(&bu->cycle);
		while (__atomic_load_n(&bu->arrived, __ATOMIC_ACQUIRE) <
		       (uint32_t)n)
			usleep(20);
		spin_until(now_ns() + SETTLE_NS);
		t0 = now_ns();
		__atomic_store_n(&bu->gate, bu->gate + 1, __ATOMIC_RELEASE);
		fwake(&bu->gate); /* FUTEX_WAKE, INT_MAX, shared */
		while ((d = __atomic_load_n(&bu->done, __ATOMIC_ACQUIRE)) <
		       (uint32_t)n)
			fwait(&bu->done, d);
		if (c > 0) /* the first cycle warms up */
			samples_add(&rep, (double)(latest_grant(n) - t0) / 1e3);
	}
	__atomic_store_n(&bu->cycle, CYCLE_QUIT, __ATOMIC_RELEASE);
	fwake(&bu->cycle);
	reap(pid, "futex waiters");
	futex_mode = false;
	for (size_t i = 0; i < rep.n; i++)
		samples_add(&pass[FUTEX], rep.v[i]);
	med[FUTEX] = median(rep.v, rep.n);
	samples_free(&rep);
}

static void report(size_t npoints)
{
	static const struct {
		const char *key, *curve, *pre, *post, *unit;
	} what[NWHAT] = {
		{"p5.queue.sh", "queue.sh_all", "release -> all ",
		 " queued shared waiters (threads of another process) "
		 "granted", "us"},
		{"p5.queue.rel", "queue.sh_release",
		 "the release call that grants ", " queued shared waiters",
		 "us"},
		{"p5.queue.probe", "queue.probe",
		 "enqueue + timeout-abort behind ", " pending requests",
		 "ns/op"},
		{"", "queue.sh_futex", "", "", "us"},
	};
	const struct point *last = &pt[npoints - 1];
	int n = points[npoints - 1];
	struct summary s, a;
	char label[160];
	double x;

	for (int w = 0; w < NWHAT; w++)
		for (size_t i = 0; i < npoints; i++) {
			s = fig_sum(&pt[i].f[w]);
			emit_point(what[w].curve, points[i], &s);
		}
	for (int w = ALL; w <= PROBE; w++) {
		snprintf(label, sizeof(label), "%s%d%s", what[w].pre, n,
			 what[w].post);
		s = fig_sum(&last->f[w]);
		emit_fig(what[w].key, "5", label, what[w].unit, &s);
		if (w == ALL) {
			a = fig_sum(&last->f[FUTEX]);
			snprintf(label, sizeof(label),
				 "%d threads of another process woken by one "
				 "FUTEX_WAKE(INT_MAX) on a shared word (same "
				 "run)", n);
			emit_anchor(what[w].key, label, "us", &a);
			x = s.median / a.median;
			emit_ratio_target(what[w].key, "<= 1.5x one FUTEX_WAKE "
					  "of as many threads", x, 1.5, false);
		}
		a = fig_sum(&pt[0].f[w]);
		emit_anchor(what[w].key, "the same with 1 waiter (same run)",
			    what[w].unit, &a);
		if (w == REL) {
			x = s.median / a.median;
			emit_ratio_target(what[w].key,
					  "<= 20x the 1-waiter release", x,
					  20.0, false);
		}
	}
}

int main(int argc, char **argv)
{
	struct wlk_manager *hm, *pm;
	size_t npoints;
	int reps, cycles;

	bench_init(argc, argv, "scale_shared");
	reps = QN(3, 1);
	cycles = QN(20, 6);
	npoints = QN(NPOINTS, NPOINTS - 1);
	pin_cpu(0);
	bu = shared_alloc(sizeof(*bu));
	sc_open(&rel_sc);
	lk_world_init("p5s");
	check(wlk_manager_open(lkw.origin, NULL, &hm), "open");
	check(wlk_manager_open(lkw.origin, NULL, &pm), "open");
	for (int p = 0; p < bopt.passes; p++) {
		struct samples pass[NPOINTS][NWHAT] = {{{0}}};
		struct samples meds[NPOINTS][NWHAT] = {{{0}}};

		for (int k = 0; k < reps; k++)
			for (size_t i = 0; i < npoints; i++) {
				double m[NWHAT];

				run(hm, pm, points[i], cycles, pass[i], m,
				    &pt[i]);
				run_futex(points[i], cycles, pass[i], m);
				for (int w = 0; w < NWHAT; w++)
					samples_add(&meds[i][w], m[w]);
			}
		for (size_t i = 0; i < npoints; i++) {
			for (int w = 0; w < NWHAT; w++) {
				fig_add(&pt[i].f[w],
					median(meds[i][w].v, meds[i][w].n),
					quantile(pass[i][w].v, pass[i][w].n,
						 0.99));
				samples_free(&pass[i][w]);
				samples_free(&meds[i][w]);
			}
		}
	}
	report(npoints);
	for (size_t i = 0; i < npoints && rel_sc.fd >= 0; i++)
		emit_note("the release call that grants %d queued shared "
			  "waiters makes %.1f system calls (futex wake-ups)",
			  points[i], (double)pt[i].sys / pt[i].releases);
	sc_close(&rel_sc);
	wlk_manager_close(hm);
	wlk_manager_close(pm);
	lk_world_fini();
	bench_fini();
	return 0;
}
