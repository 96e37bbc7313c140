/* SPDX-License-Identifier: MIT */
/*
 * etcd.c - the etcd engine against etcd's own lock service, on a running
 * cluster (built with the etcd engine).
 *
 * usage: WEBLOCKS_BACKEND=etcd://HOST:PORT,... etcd [-n RUNS] [-k KILLS]
 *        [-t WEBLOCKS-RUN] [-o FILE]
 *
 * make bench (bench/run.sh) runs it as part 6, on a throw-away cluster it
 * starts when WEBLOCKS_BACKEND names none, and adds its figures, with -o,
 * as bench.h's result records (report.awk) to the run's table.
 *
 *  1. request+release, one process, one name, uncontended: wlk_acquire()
 *     + wlk_release() on the etcd engine, against POST /v3/lock/lock +
 *     /v3/lock/unlock through the same gateway (the first member, one
 *     keep-alive connection, a lease granted once), RUNS each, median
 *     and 90th percentile.
 *  2. handoff between two processes: a holder releases, a waiter in
 *     another process blocked in wlk_acquire() returns; the time between,
 *     RUNS / 4 times; against the same through etcd's lock service, RUNS
 *     / 8 times, interleaved (etcd_anchors.c).
 *  3. failover: the holder's process SIGKILLed while another waits; the
 *     time until the waiter is granted, against the lease's TTL
 *     (WEBLOCKS_ETCD_TTL), KILLS times with the holder's guard
 *     (WEBLOCKS_ETCD_GUARD, the build's), split into the guard's revoke
 *     and the waiter's reaction; then KILLS times without a guard, the
 *     kills spread over the holder's keepalive period (TTL/3), split
 *     into the lease's TTL left at the kill (TTL less the time since the
 *     holder's last keepalive, which its agent sends every TTL/3 from the
 *     open), etcd's lateness, from that expiry to the deletion of the
 *     holder's keys as a watch of the bench's own sees it (etcd's lessor
 *     looks for expired leases every 500 ms, then revokes them through
 *     raft), and the waiter's reaction, from that deletion to its grant
 *     (etcd_failover.c). Targets: with the guard, worst <= TTL + one
 *     round trip; without, worst <= TTL + etcd's 500 ms lessor scan +
 *     one round trip, etcd's floor.
 *  4. with -t (the build's tools/weblocks-run): acquire+release from the
 *     command line, one process each, weblocks-run against etcdctl lock
 *     (Debian: etcd-client; the part is skipped, with a note, without
 *     it), CLI_PAIRS of each, interleaved (etcd_anchors.c).
 */
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "etcd.h"
#include "ratio.h"

#define DEFAULT_RUNS 200
#define DEFAULT_KILLS 3
/* Command-line pairs of each tool (part 4). */
#define CLI_PAIRS 20
/* Time a waiter is given to be queued before the holder lets go. */
#define SETTLE_MS 200

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void nap_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Result records for report.awk (bench.h's format), with -o. */
static FILE *rec;

/* A figure ("fig") or an anchor ("anc") of @key: median, p99, range. */
void record(const char *type, const char *key, const char *label,
		   uint64_t *ns, int n)
{
	if (!rec || n < 1)
		return;
	fprintf(rec, "%s\t%s\t", type, key);
	if (type[0] == 'f')
		fprintf(rec, "6\t");
	fprintf(rec, "%s\tms\t%.10g\t%.10g\t%.10g\t%.10g\t1\n", label,
		(double)ns[n / 2] / 1e6, (double)ns[n * 99 / 100] / 1e6,
		(double)ns[0] / 1e6, (double)ns[n - 1] / 1e6);
}

void record_line(const char *fmt, ...)
{
	va_list ap;

	if (!rec)
		return;
	va_start(ap, fmt);
	vfprintf(rec, fmt, ap);
	va_end(ap);
}

void report(const char *what, uint64_t *ns, int n)
{
	qsort(ns, (size_t)n, sizeof(*ns), cmp_u64);
	printf("%-44s median %8.3f ms  p90 %8.3f ms  (n=%d)\n", what,
	       (double)ns[n / 2] / 1e6, (double)ns[n * 9 / 10] / 1e6, n);
}

static void die(const char *what, int rc)
{
	fprintf(stderr, "etcd bench: %s: %s\n", what, wlk_strerror(rc));
	exit(1);
}

static size_t on_data(char *p, size_t size, size_t nmemb, void *arg)
{
	struct reply *r = arg;
	size_t n = size * nmemb;

	if (n >= REPLY_MAX - r->n)
		return 0;
	memcpy(r->buf + r->n, p, n);
	r->n += n;
	r->buf[r->n] = '\0';
	return n;
}

int post(CURL *h, const char *base, const char *path, const char *body,
	 struct reply *r)
{
	char url[512];

	snprintf(url, sizeof(url), "%s%s", base, path);
	r->n = 0;
	r->buf[0] = '\0';
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	return curl_easy_perform(h) == CURLE_OK ? 0 : -1;
}

/* The value of "field":"..." in @json, copied to @out. */
int field(const char *json, const char *name, char *out, size_t cap)
{
	char pat[64];
	const char *p, *e;

	snprintf(pat, sizeof(pat), "\"%s\":\"", name);
	p = strstr(json, pat);
	if (!p)
		return -1;
	p += strlen(pat);
	e = strchr(p, '"');
	if (!e || (size_t)(e - p) >= cap)
		return -1;
	memcpy(out, p, (size_t)(e - p));
	out[e - p] = '\0';
	return 0;
}

static void engine(struct wlk_manager *m, int runs, uint64_t *ns)
{
	for (int i = 0; i < runs; i++) {
		struct wlk_lock *l;
		uint64_t t0 = now_ns();
		int rc = wlk_acquire(m, "bench", 5, NULL, &l);

		if (rc)
			die("acquire", rc);
		rc = wlk_release(l);
		if (rc)
			die("release", rc);
		ns[i] = now_ns() - t0;
	}
}

static const char *origin = "https://bench.etcd.example";
const char *holder_guard;

/* A waiter in its own process: blocked until granted, then notes when. */
static void waiter(struct shared *sh, int ready)
{
	struct wlk_manager *m;
	struct wlk_lock *l;

	if (wlk_manager_open(origin, NULL, &m))
		_exit(1);
	(void)!write(ready, "w", 1);
	if (wlk_acquire(m, "hand", 4, NULL, &l))
		_exit(2);
	sh->granted_ns = now_ns();
	(void)wlk_release(l);
	wlk_manager_close(m);
	_exit(0);
}

/* One handoff (@kill_it: the holder is a child that is SIGKILLed, at
 * least @extra_ms after the waiter is queued). */
uint64_t handoff(struct wlk_manager *m, struct shared *sh, bool kill_it,
		 unsigned int extra_ms)
{
	int p[2], st;
	pid_t holder = 0, w;
	struct wlk_lock *l = NULL;
	char c;

	if (pipe(p))
		exit(1);
	if (kill_it) {
		holder = fork();
		if (holder == 0) {
			struct wlk_manager *hm;
			struct wlk_lock *hl;

			if (holder_guard)
				setenv("WEBLOCKS_ETCD_GUARD", holder_guard, 1);
			if (wlk_manager_open(origin, NULL, &hm))
				_exit(1);
			sh->opened_ns = now_ns();
			if (wlk_acquire(hm, "hand", 4, NULL, &hl))
				_exit(1);
			(void)!write(p[1], "h", 1);
			pause();
			_exit(0);
		}
		if (read(p[0], &c, 1) != 1)
			exit(1);
	} else if (wlk_acquire(m, "hand", 4, NULL, &l)) {
		exit(1);
	}
	w = fork();
	if (w == 0)
		waiter(sh, p[1]);
	if (read(p[0], &c, 1) != 1)
		exit(1);
	nap_ms(SETTLE_MS + extra_ms); /* queued and watching */
	deletion_arm(kill_it);
	sh->released_ns = now_ns();
	if (kill_it) {
		kill(holder, SIGKILL);
		waitpid(holder, &st, 0);
	} else {
		(void)wlk_release(l);
	}
	waitpid(w, &st, 0);
	close(p[0]);
	close(p[1]);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		exit(1);
	return sh->granted_ns - sh->released_ns;
}

/* Part 4: weblocks-run @tool against etcdctl lock (which talks to the
 * cluster's first member, @base). */
static void cli_part(const char *tool, const char *base)
{
	uint64_t ours[CLI_PAIRS], theirs[CLI_PAIRS];

	if (cli_pairs(tool, origin, base + strlen("http://"), CLI_PAIRS, ours,
		      theirs)) {
		printf("command line: skipped (etcdctl lock, or %s, did not "
		       "run)\n", tool);
		record_line("note\tetcd\tpart 6, command line: skipped: "
			    "etcdctl lock (Debian: etcd-client) or "
			    "weblocks-run did not run\n");
		return;
	}
	report("command line: weblocks-run ORIGIN NAME true", ours, CLI_PAIRS);
	record("fig", "p6.cli", "etcd engine, command line: weblocks-run "
	       "ORIGIN NAME true, a process per acquire+release", ours,
	       CLI_PAIRS);
	report("command line: etcdctl lock NAME true", theirs, CLI_PAIRS);
	record("anc", "p6.cli", "etcdctl lock NAME true (etcd-client), a "
	       "process per lock+unlock", theirs, CLI_PAIRS);
}

/* Rounds of the engine and etcd's lock service, interleaved: short
 * ones (20 pairs each in a full run), so that the machine's drift (a
 * VM's speed changes from second to second) weighs on both alike. */
#define ROUNDS 20

int main(int argc, char **argv)
{
	int runs = DEFAULT_RUNS, kills = DEFAULT_KILLS, opt, ttl_s, per;
	const char *b = getenv("WEBLOCKS_BACKEND"), *ttl, *out = NULL;
	const char *tool = NULL;
	char base[300];
	struct wlk_manager *m;
	struct shared *sh;
	uint64_t *ns, *nat;
	double pair, lock, hand;
	int rc;

	while ((opt = getopt(argc, argv, "n:k:o:t:")) != -1) {
		if (opt == 't')
			tool = optarg;
		else if (opt == 'n')
			runs = atoi(optarg);
		else if (opt == 'k')
			kills = atoi(optarg);
		else if (opt == 'o')
			out = optarg;
		else
			return 2;
	}
	if (!b || strncmp(b, "etcd://", 7) || runs < 4 * ROUNDS ||
	    kills < 0 || kills > runs) {
		fprintf(stderr, "usage: WEBLOCKS_BACKEND=etcd://HOST:PORT,... "
				"etcd [-n RUNS >= 80] [-k KILLS <= RUNS] "
				"[-t WEBLOCKS-RUN] [-o FILE]\n");
		return 2;
	}
	if (out) {
		rec = fopen(out, "a");
		if (!rec) {
			perror(out);
			return 1;
		}
		setvbuf(rec, NULL, _IOLBF, 0); /* before any fork */
	}
	snprintf(base, sizeof(base), "http://%.*s", (int)strcspn(b + 7, ","),
		 b + 7);
	ttl = getenv("WEBLOCKS_ETCD_TTL");
	ttl_s = ttl && atoi(ttl) > 0 ? atoi(ttl) : 10;
	per = runs / ROUNDS;
	runs = per * ROUNDS;
	ns = calloc((size_t)runs, sizeof(*ns));
	nat = calloc((size_t)runs, sizeof(*nat));
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!ns || !nat || sh == MAP_FAILED)
		return 1;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = wlk_manager_open(origin, NULL, &m);
	if (rc)
		die("open", rc);
	if (kills && deletion_watch_start(base))
		return 1;

	engine(m, per / 2, ns); /* warm the connections */
	native(base, per / 2, nat);
	for (int i = 0; i < ROUNDS; i++) {
		engine(m, per, ns + i * per);
		native(base, per, nat + i * per);
	}
	report("weblocks etcd engine: acquire+release", ns, runs);
	record("fig", "p6.pair", "etcd engine: acquire + release, "
	       "uncontended", ns, runs);
	pair = (double)ns[runs / 2] / 1e6;
	report("etcd lock service: lock+unlock", nat, runs);
	record("anc", "p6.pair", "etcd's own lock service: /v3/lock lock + "
	       "unlock, same gateway", nat, runs);
	lock = (double)nat[runs / 2] / 1e6;
	if (rec)
		fprintf(rec, "tgt\tp6.pair\t<= 1.2x etcd's lock service\t%s\t"
			"%.*fx\n", pair <= 1.2 * lock ? "met" : "MISSED",
			ratio_decimals(pair / lock, 1.2), pair / lock);

	for (int i = 0; i < runs / 4; i++) {
		ns[i] = handoff(m, sh, false, 0);
		if (i % 2 == 0)
			nat[i / 2] = native_handoff(base, sh);
	}
	report("handoff to a waiter in another process", ns, runs / 4);
	record("fig", "p6.handoff", "etcd engine: handoff to a waiter in "
	       "another process", ns, runs / 4);
	hand = (double)ns[runs / 8] / 1e6;
	report("the same through etcd's lock service", nat, (runs / 4 + 1) / 2);
	record("anc", "p6.handoff", "etcd's own lock service: /v3/lock unlock "
	       "-> a waiter's /v3/lock lock returns, other process", nat,
	       (runs / 4 + 1) / 2);
	if (tool)
		cli_part(tool, base);
	if (kills)
		failover_part(m, sh, kills, ttl_s, base, pair / 2, ns, nat);
	if (rec) {
		fprintf(rec, "note\tetcd\tpart 6: the etcd engine on the "
			"cluster %s (WEBLOCKS_ETCD_TTL %d s); %d pairs of each "
			"kind in %d interleaved rounds, %d handoffs (median "
			"%.2f ms), %d kills spread over the keepalive period; "
			"p99 and range are over single runs\n", b, ttl_s,
			runs, ROUNDS, runs / 4, hand, kills);
		fclose(rec);
	}
	wlk_manager_close(m);
	return 0;
}
