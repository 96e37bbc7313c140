/* SPDX-License-Identifier: MIT */
/*
 * scale_queue.c - part 5, exclusive queues: the handoff latency to the
 * head of a queue of N exclusive waiters (N = 1 .. 1000), i.e. part 2's
 * measurement with N - 1 more requests pending behind the head.
 *
 * N + 1 threads form a ring: thread i lives in process i % 2 (pinned to
 * CPU i % 2). One holds the name, the others are queued in thread order
 * (the parent admits them one at a time and checks with wlk_query() that
 * each is pending before the next). The holder keeps the lock 50 us,
 * reads the clock, releases, and queues again at the tail; the head's
 * thread reads the clock when its acquire returns. Only handoffs between
 * the two processes are counted. Target: the handoff to the head of the
 * longest queue at most 1.2x the handoff with 1 waiter (queue depth costs
 * nothing at the head).
 *
 * Anchor: the same ring with no lock library, each thread asleep on a
 * futex word of its own and the holder waking the next one directly (a
 * FIFO queue could not hand over with less): how much of the deeper
 * ring's cost is the kernel's and the CPUs', not the library's.
 *
 * The event loops' ring: the same N + 1 requests, made with
 * wlk_request_async() by one event loop per process (asleep in poll() on
 * wlk_manager_fd(), then wlk_manager_dispatch()); the grant callback
 * holds, releases and requests again. No thread sleeps per request, so
 * the depth costs the kernel nothing: what it costs is the library's.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "locks.h"
#include <weblocks/async.h>

#define HOLD_NS (50 * NSEC_PER_USEC)
#define MAX_THREADS 1024
#define MAX_SAMPLES 4096
#define WARMUP 4

static const int points[] = {1, 10, 100, 1000};
#define NPOINTS (sizeof(points) / sizeof(points[0]))

struct ring {
	volatile uint32_t admit[MAX_THREADS]; /* thread i may queue */
	volatile uint32_t go;      /* every waiter is queued */
	volatile uint32_t stop;
	volatile uint32_t raw;     /* the anchor's ring (top of file) */
	volatile uint32_t loop;    /* the event loops' ring (top of file) */
	volatile uint32_t ready;   /* raw: threads asleep on their turn */
	volatile uint32_t turn[MAX_THREADS]; /* raw: thread i's turn */
	volatile uint64_t t_release;
	volatile int owner;        /* thread that released last */
	uint32_t n;                /* samples taken (under the lock) */
	uint32_t limit;
	double lat_us[MAX_SAMPLES];
};

static struct ring *ring;
static struct wlk_manager *pm; /* this process's manager */
static int nthreads, proc;
static int outstanding; /* the event loop's requests not yet completed */

/* The anchor's acquire: wait for our turn on our own word. */
static void raw_acquire(int me)
{
	__atomic_add_fetch(&ring->ready, 1, __ATOMIC_SEQ_CST);
	while (!ring->turn[me])
		fwait(&ring->turn[me], 0);
	ring->turn[me] = 0;
}

/* The anchor's release: the next thread's turn, and one wake. */
static void raw_release(int me)
{
	int next = (me + 1) % nthreads;

	__atomic_store_n(&ring->turn[next], 1, __ATOMIC_SEQ_CST);
	fwake(&ring->turn[next]);
}

/* Ring member @me was granted: take a sample, hold; before the release,
 * say who releases when. */
static void hold(int me)
{
	while (!ring->go)
		fwait(&ring->go, 0); /* member 0, while others queue */
	if (ring->t_release && ring->owner % 2 != me % 2 &&
	    ring->n < ring->limit)
		ring->lat_us[ring->n++] =
			(double)(now_ns() - ring->t_release) / 1e3;
	if (ring->n >= ring->limit)
		ring->stop = 1;
	spin_until(now_ns() + HOLD_NS);
	ring->owner = me;
	ring->t_release = now_ns();
}

static void *ring_thread(void *arg)
{
	int me = (int)(intptr_t)arg;
	struct wlk_lock *l = NULL;

	while (!ring->admit[me])
		fwait(&ring->admit[me], 0);
	for (;;) {
		if (ring->raw)
			raw_acquire(me);
		else
			check(wlk_acquire(pm, "q", 1, NULL, &l), "acquire");
		hold(me);
		if (ring->raw)
			raw_release(me);
		else
			check(wlk_release(l), "release");
		if (ring->stop)
			return NULL; /* the ring drains: nobody queues again */
	}
}

static void loop_granted(struct wlk_async *req, int status,
			 struct wlk_lock *l, void *arg);

static void loop_request(int me)
{
	check(wlk_request_async(pm, "q", 1, NULL, loop_granted,
				(void *)(intptr_t)me, NULL),
	      "request_async");
	outstanding++;
}

/* The event loops' ring: the grant callback of member @arg. */
static void loop_granted(struct wlk_async *req, int status,
			 struct wlk_lock *l, void *arg)
{
	int me = (int)(intptr_t)arg;

	(void)req;
	check(status, "granted");
	outstanding--;
	hold(me);
	check(wlk_release(l), "release");
	if (!ring->stop)
		loop_request(me); /* at the tail again */
}

/* This process's event loop: queue its members as admitted, then sleep
 * in poll() and dispatch until none of its requests is left. */
static void loop_run(void)
{
	struct pollfd p = {.fd = wlk_manager_fd(pm), .events = POLLIN};

	for (int i = proc; i < nthreads; i += 2) {
		while (!ring->admit[i])
			fwait(&ring->admit[i], 0);
		loop_request(i);
	}
	while (outstanding > 0) {
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			die("poll: %s", strerror(errno));
		check(wlk_manager_dispatch(pm) < 0 ? -1 : 0, "dispatch");
	}
}

static int ring_proc(void *arg)
{
	pthread_t t[MAX_THREADS / 2 + 1];
	pthread_attr_t a;
	int k = 0;

	proc = (int)(intptr_t)arg;
	pin_cpu(proc);
	check(wlk_manager_open(lkw.origin, NULL, &pm), "open");
	if (ring->loop) {
		loop_run();
		wlk_manager_close(pm);
		return 0;
	}
	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 64 * 1024);
	for (int i = proc; i < nthreads; i += 2)
		if (pthread_create(&t[k++], &a, ring_thread,
				   (void *)(intptr_t)i))
			die("pthread_create");
	for (int i = 0; i < k; i++)
		pthread_join(t[i], NULL);
	wlk_manager_close(pm);
	return 0;
}

static size_t pending(struct wlk_manager *m, size_t *held)
{
	struct wlk_snapshot *s;
	size_t n;

	check(wlk_query(m, &s), "query");
	n = wlk_snapshot_pending_count(s);
	*held = wlk_snapshot_held_count(s);
	wlk_snapshot_free(s);
	return n;
}

/* Which ring a run forms: threads with the library, the anchor's
 * threads, or event loops' requests. */
enum ring_kind { RING_LIB, RING_RAW, RING_LOOP, RING_KINDS };

/* One run with @n waiters; appends to @pass and returns the median. */
static double run(struct wlk_manager *m, int n, uint32_t samples,
		  struct samples *pass, enum ring_kind kind)
{
	bool raw = kind == RING_RAW;
	struct samples rep = {0};
	pid_t pid[2];
	size_t held;
	double med;

	memset(ring, 0, sizeof(*ring));
	ring->limit = samples + WARMUP;
	ring->raw = raw;
	ring->loop = kind == RING_LOOP;
	ring->turn[0] = 1;
	nthreads = n + 1;
	for (int p = 0; p < 2; p++)
		pid[p] = spawn(ring_proc, (void *)(intptr_t)p);
	/* Thread 0 takes the lock, then each waiter queues in turn; in the
	 * anchor's ring, every thread waits for its turn. */
	for (int i = 0; i <= n; i++) {
		ring->admit[i] = 1;
		fwake(&ring->admit[i]);
		while (!raw && (pending(m, &held) < (size_t)i || held < 1))
			usleep(50);
	}
	while (raw && __atomic_load_n(&ring->ready, __ATOMIC_SEQ_CST) <
			      (uint32_t)nthreads)
		usleep(50);
	ring->go = 1;
	fwake(&ring->go);
	for (int p = 0; p < 2; p++)
		reap(pid[p], "queue ring");
	for (uint32_t i = WARMUP; i < ring->n; i++) {
		samples_add(&rep, ring->lat_us[i]);
		samples_add(pass, ring->lat_us[i]);
	}
	med = median(rep.v, rep.n);
	samples_free(&rep);
	return med;
}

static void report(struct fig *f, struct fig *raw, struct fig *loop)
{
	struct summary s, one = fig_sum(&f[0]);
	size_t last = 0;

	for (size_t i = 0; i < NPOINTS; i++) {
		if (!f[i].n)
			continue;
		s = fig_sum(&f[i]);
		emit_point("queue.ex", points[i], &s);
		last = i;
	}
	{
		char key[32], label[128], why[768];
		double x;

		s = fig_sum(&f[last]);
		snprintf(key, sizeof(key), "p5.queue.ex");
		snprintf(label, sizeof(label),
			 "handoff to the head of a queue of %d exclusive "
			 "waiters, 2 processes on 2 CPUs", points[last]);
		emit_fig(key, "5", label, "us", &s);
		emit_anchor(key, "the same with 1 waiter (same run)", "us",
			    &one);
		x = s.median / one.median;
		emit_ratio_target(key, "<= 1.2x the 1-waiter handoff", x, 1.2,
				  false);
		if (raw[0].n && raw[last].n) {
			struct summary r1 = fig_sum(&raw[0]);
			struct summary rn = fig_sum(&raw[last]);

			snprintf(label, sizeof(label),
				 "raw futex ring, no library, %d waiters "
				 "(same run)", points[last]);
			emit_anchor(key, label, "us", &rn);
			emit_anchor(key, "raw futex ring, 1 waiter (same run)",
				    "us", &r1);
			snprintf(why, sizeof(why),
				 "the ring of %d threads costs %.2fx the "
				 "1-waiter one with weblocks, and %.2fx with "
				 "no library at all (each thread asleep on its "
				 "own futex word, woken by the holder "
				 "directly): the kernel's and the CPUs' cost "
				 "of more threads' wake-ups and caches. "
				 "weblocks at %d waiters is %.2fx the raw "
				 "ring: a waiter that queued behind more than "
				 "64 holders and requests is woken once when "
				 "it reaches the head of the queue, to watch "
				 "the processes blocking it then "
				 "(lib/repair/reap.c), which also brings its "
				 "thread back into the caches before its "
				 "grant (one more futex wake per grant in such "
				 "a queue); the raw ring has no such step",
				 points[last], x, rn.median / r1.median,
				 points[last], s.median / rn.median);
			if (x > 1.2)
				emit_limit(key, "%s", why);
			else
				emit_note("%s: %s", key, why);
		}
		if (loop[0].n && loop[last].n) {
			struct summary l1 = fig_sum(&loop[0]);
			struct summary ln = fig_sum(&loop[last]);

			snprintf(key, sizeof(key), "p5.queue.loop");
			snprintf(label, sizeof(label),
				 "handoff to the head of a queue of %d "
				 "exclusive requests of 2 event loops on 2 "
				 "CPUs", points[last]);
			emit_fig(key, "5", label, "us", &ln);
			emit_anchor(key, "the same with 1 request waiting "
				    "(same run)", "us", &l1);
			emit_ratio_target(key, "<= 1.2x the 1-waiter handoff",
					  ln.median / l1.median, 1.2, false);
		}
	}
}

int main(int argc, char **argv)
{
	struct fig f[RING_KINDS][NPOINTS];
	struct wlk_manager *m;
	size_t npoints;
	uint32_t samples;
	int reps;

	memset(f, 0, sizeof(f));
	bench_init(argc, argv, "scale_queue");
	reps = QN(3, 1);
	samples = QN(300, 100);
	npoints = QN(NPOINTS, NPOINTS - 1);
	if (ncpus() < 2) {
		emit_note("scale_queue: needs 2 CPUs, skipped");
		bench_fini();
		return 0;
	}
	ring = shared_alloc(sizeof(*ring));
	lk_world_init("p5q");
	check(wlk_manager_open(lkw.origin, NULL, &m), "open");
	for (int p = 0; p < bopt.passes; p++) {
		struct samples pass[RING_KINDS][NPOINTS] = {{{0}}};
		struct samples meds[RING_KINDS][NPOINTS] = {{{0}}};

		/* The three rings interleaved; the library's threads at
		 * every depth, the others at the first and the last. */
		for (int k = 0; k < reps; k++)
			for (size_t i = 0; i < npoints; i++)
				for (int r = 0; r < RING_KINDS; r++) {
					if (r != RING_LIB && i != 0 &&
					    i != npoints - 1)
						continue;
					samples_add(&meds[r][i],
						    run(m, points[i], samples,
							&pass[r][i], r));
				}
		for (int r = 0; r < RING_KINDS; r++)
			for (size_t i = 0; i < npoints; i++) {
				if (meds[r][i].n)
					fig_add(&f[r][i],
						median(meds[r][i].v,
						       meds[r][i].n),
						quantile(pass[r][i].v,
							 pass[r][i].n, 0.99));
				samples_free(&pass[r][i]);
				samples_free(&meds[r][i]);
			}
	}
	report(f[RING_LIB], f[RING_RAW], f[RING_LOOP]);
	wlk_manager_close(m);
	lk_world_fini();
	bench_fini();
	return 0;
}
