/* SPDX-License-Identifier: MIT */
/*
 * etcd.c - the etcd engine against etcd's own lock service, on a running
 * cluster (built with the etcd engine; not part of make bench, which
 * needs no cluster).
 *
 * usage: WEBLOCKS_BACKEND=etcd://HOST:PORT,... etcd [-n RUNS] [-k KILLS]
 *        [-o FILE]
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
 *     RUNS / 4 times.
 *  3. failover: the holder's process SIGKILLed while another waits; the
 *     time until the waiter is granted, against the lease's TTL
 *     (WEBLOCKS_ETCD_TTL), KILLS times, the kills spread over the
 *     holder's keepalive period (TTL/3). Each is split into its parts: the
 *     lease's TTL left at the kill (TTL less the time since the holder's
 *     last keepalive, which its agent sends every TTL/3 from the open);
 *     etcd's lateness, from that expiry to the deletion of the holder's
 *     keys as a watch of the bench's own sees it (etcd's lessor looks for
 *     expired leases every 500 ms, then revokes them through raft); and
 *     the waiter's reaction, from that deletion to its grant.
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <weblocks.h>

#define DEFAULT_RUNS 200
#define DEFAULT_KILLS 3
#define REPLY_MAX 8192
/* Time a waiter is given to be queued before the holder lets go. */
#define SETTLE_MS 200

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void nap_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Result records for report.awk (bench.h's format), with -o. */
static FILE *rec;

/* A figure ("fig") or an anchor ("anc") of @key: median, p99, range. */
static void record(const char *type, const char *key, const char *label,
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

/* Sorts @ns. */
static void report(const char *what, uint64_t *ns, int n)
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

struct reply {
	char buf[REPLY_MAX];
	size_t n;
};

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

static int post(CURL *h, const char *base, const char *path,
		const char *body, struct reply *r)
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
static int field(const char *json, const char *name, char *out, size_t cap)
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

/* etcd's lock service: lock + unlock of "bench" on one lease. */
static void native(const char *base, int runs, uint64_t *ns)
{
	CURL *h = curl_easy_init();
	struct reply r;
	char lease[32], key[256], body[512];

	if (!h || post(h, base, "/v3/lease/grant", "{\"TTL\":\"30\"}", &r) ||
	    field(r.buf, "ID", lease, sizeof(lease))) {
		fprintf(stderr, "etcd bench: lease grant failed: %s\n", r.buf);
		exit(1);
	}
	for (int i = 0; i < runs; i++) {
		uint64_t t0 = now_ns();

		/* name "bench-native" in base64 */
		snprintf(body, sizeof(body),
			 "{\"name\":\"YmVuY2gtbmF0aXZl\",\"lease\":\"%s\"}",
			 lease);
		if (post(h, base, "/v3/lock/lock", body, &r) ||
		    field(r.buf, "key", key, sizeof(key))) {
			fprintf(stderr, "etcd bench: lock failed: %s\n", r.buf);
			exit(1);
		}
		snprintf(body, sizeof(body), "{\"key\":\"%s\"}", key);
		if (post(h, base, "/v3/lock/unlock", body, &r)) {
			fprintf(stderr, "etcd bench: unlock failed\n");
			exit(1);
		}
		ns[i] = now_ns() - t0;
	}
	snprintf(body, sizeof(body), "{\"ID\":\"%s\"}", lease);
	(void)post(h, base, "/v3/lease/revoke", body, &r);
	curl_easy_cleanup(h);
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

struct shared {
	volatile uint64_t released_ns, granted_ns;
	volatile uint64_t opened_ns; /* the holder's manager open returned */
};

/* The bench's own watch of every deletion under the engine's keys
 * ("wlk1/", base64; its range end "wlk10"), on a thread: when the first
 * deletion after arming arrived. */
#define WATCH_BODY "{\"create_request\":{\"key\":\"d2xrMS8=\"," \
		   "\"range_end\":\"d2xrMTA=\",\"filters\":[\"NOPUT\"]}}"
static volatile uint64_t deletion_ns;
static volatile int deletion_armed;

static size_t on_watch(char *p, size_t size, size_t nmemb, void *arg)
{
	size_t n = size * nmemb;

	(void)arg;
	if (__atomic_load_n(&deletion_armed, __ATOMIC_ACQUIRE) &&
	    memmem(p, n, "\"events\"", 8)) {
		__atomic_store_n(&deletion_ns, now_ns(), __ATOMIC_RELEASE);
		__atomic_store_n(&deletion_armed, 0, __ATOMIC_RELEASE);
	}
	return n;
}

static void *watcher(void *arg)
{
	CURL *h = curl_easy_init();
	char url[512];

	snprintf(url, sizeof(url), "%s/v3/watch", (const char *)arg);
	if (!h)
		return NULL;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, WATCH_BODY);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_watch);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	(void)curl_easy_perform(h); /* until the bench exits */
	curl_easy_cleanup(h);
	return NULL;
}

static const char *origin = "https://bench.etcd.example";

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
static uint64_t handoff(struct wlk_manager *m, struct shared *sh,
			bool kill_it, unsigned int extra_ms)
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
	__atomic_store_n(&deletion_armed, kill_it, __ATOMIC_RELEASE);
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

/* etcd's own expiry, without the engine: a lease of @ttl_s granted with a
 * key on it and never renewed, @n times at phases spread over 500 ms; how
 * long after the grant the bench's watch sees the key deleted, into @ns.
 * Return: how many were seen. */
static int bare_expiry(const char *base, int ttl_s, int n, uint64_t *ns)
{
	CURL *h = curl_easy_init();
	double sum = 0, lo = 1e9, hi = 0;
	struct reply r;
	char lease[32], body[256];
	int seen = 0;

	for (int i = 0; h && i < n; i++) {
		uint64_t t_g, del = 0;

		nap_ms((unsigned int)(500 / n * i % 500));
		__atomic_store_n(&deletion_ns, 0, __ATOMIC_RELEASE);
		snprintf(body, sizeof(body), "{\"TTL\":\"%d\"}", ttl_s);
		if (post(h, base, "/v3/lease/grant", body, &r) ||
		    field(r.buf, "ID", lease, sizeof(lease)))
			break;
		t_g = now_ns(); /* the lease's expiry is at most TTL after */
		/* key "wlk1/bench-expiry" */
		snprintf(body, sizeof(body),
			 "{\"key\":\"d2xrMS9iZW5jaC1leHBpcnk=\","
			 "\"value\":\"\",\"lease\":\"%s\"}", lease);
		__atomic_store_n(&deletion_armed, 1, __ATOMIC_RELEASE);
		if (post(h, base, "/v3/kv/put", body, &r))
			break;
		for (int t = 0; t < (ttl_s + 3) * 100 && !del; t++) {
			nap_ms(10);
			del = __atomic_load_n(&deletion_ns, __ATOMIC_ACQUIRE);
		}
		if (del) {
			double late = ((double)del - (double)t_g -
				       ttl_s * 1e9) / 1e6;

			ns[seen++] = del - t_g;
			sum += late;
			lo = late < lo ? late : lo;
			hi = late > hi ? late : hi;
		}
	}
	if (h)
		curl_easy_cleanup(h);
	if (seen)
		printf("etcd's own lease expiry, no engine (TTL %d s): deleted "
		       "%.1f ms after the TTL on average, min %.1f, max %.1f "
		       "(n=%d)\n", ttl_s, sum / seen, lo, hi, seen);
	else
		printf("etcd's own lease expiry: not measured\n");
	return seen;
}

/* What the failovers came to, beyond their times. */
struct parts {
	double late_mean, late_max; /* etcd: expiry to deletion, ms */
	double react_mean;          /* the waiter: deletion to grant, ms */
	double worst;               /* the longest failover, ms */
	int n;                      /* kills whose parts were seen */
};

/* Failovers, the kills spread over the holder's keepalive period, each
 * split into its parts (the header says how); times into @ns. */
static struct parts failover(struct wlk_manager *m, struct shared *sh,
			     int kills, int ttl_s, uint64_t *ns)
{
	uint64_t ttl = (uint64_t)ttl_s * 1000000000u, period = ttl / 3;
	struct parts p = { 0 };

	printf("failover after SIGKILL of the holder, lease TTL %d s "
	       "(keepalive every %.0f ms):\n", ttl_s, (double)period / 1e6);
	printf("  %9s %9s %9s %9s %9s %9s\n", "failover", "TTL left",
	       "late", "reaction", "over TTL", "(ms)");
	for (int i = 0; i < kills; i++) {
		unsigned int extra = (unsigned int)(period / 1000000u) *
				     (unsigned int)i / (unsigned int)kills;
		uint64_t f, since_ka, left, del;
		double late, react;

		__atomic_store_n(&deletion_ns, 0, __ATOMIC_RELEASE);
		f = handoff(m, sh, true, extra);
		ns[i] = f;
		if ((double)f / 1e6 > p.worst)
			p.worst = (double)f / 1e6;
		/* The holder's keepalives: every period from its open. */
		since_ka = (sh->released_ns - sh->opened_ns) % period;
		left = ttl - since_ka;
		del = __atomic_load_n(&deletion_ns, __ATOMIC_ACQUIRE);
		if (!del) {
			printf("  %9.1f (the bench's watch saw no deletion)\n",
			       (double)f / 1e6);
			continue;
		}
		late = ((double)(del - sh->released_ns) - (double)left) / 1e6;
		react = ((double)sh->granted_ns - (double)del) / 1e6;
		p.late_mean += late;
		p.react_mean += react;
		p.late_max = late > p.late_max ? late : p.late_max;
		p.n++;
		printf("  %9.1f %9.1f %9.1f %9.1f %9.1f\n", (double)f / 1e6,
		       (double)left / 1e6, late, react,
		       ((double)f - (double)ttl) / 1e6);
	}
	if (p.n) {
		p.late_mean /= p.n;
		p.react_mean /= p.n;
	}
	report("failover after SIGKILL of the holder", ns, kills);
	printf("  etcd's lateness after the expiry: mean %.1f ms, max %.1f "
	       "ms; the waiter's reaction: mean %.1f ms; worst failover: "
	       "%.1f ms\n", p.late_mean, p.late_max, p.react_mean, p.worst);
	return p;
}

/* Rounds of the engine and etcd's lock service, interleaved. */
#define ROUNDS 4

int main(int argc, char **argv)
{
	int runs = DEFAULT_RUNS, kills = DEFAULT_KILLS, opt, ttl_s, per;
	const char *b = getenv("WEBLOCKS_BACKEND"), *ttl, *out = NULL;
	char base[300];
	struct wlk_manager *m;
	struct shared *sh;
	uint64_t *ns, *nat;
	double pair, lock, hand, rtt;
	pthread_t wt;
	int rc;

	while ((opt = getopt(argc, argv, "n:k:o:")) != -1) {
		if (opt == 'n')
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
				"etcd [-n RUNS >= 16] [-k KILLS <= RUNS] "
				"[-o FILE]\n");
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
	if (kills && pthread_create(&wt, NULL, watcher, base))
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
			"%.2fx\n", pair <= 1.2 * lock ? "met" : "MISSED",
			pair / lock);

	for (int i = 0; i < runs / 4; i++)
		ns[i] = handoff(m, sh, false, 0);
	report("handoff to a waiter in another process", ns, runs / 4);
	record("fig", "p6.handoff", "etcd engine: handoff to a waiter in "
	       "another process", ns, runs / 4);
	hand = (double)ns[runs / 8] / 1e6;
	if (kills) {
		struct parts p = failover(m, sh, kills, ttl_s, ns);
		char label[128];
		int seen;

		/* One round trip: half the uncontended pair, which is
		 * two (weblocks.h, ETCD ENGINE). */
		rtt = pair / 2;
		snprintf(label, sizeof(label), "etcd engine: failover after "
			 "SIGKILL of the holder (lease TTL %d s)", ttl_s);
		record("fig", "p6.failover", label, ns, kills);
		seen = bare_expiry(base, ttl_s, kills, nat);
		qsort(nat, (size_t)seen, sizeof(*nat), cmp_u64);
		record("anc", "p6.failover", "a lease of etcd's alone, never "
		       "renewed: grant to deletion of its key", nat, seen);
		if (rec) {
			bool met = p.worst <= ttl_s * 1e3 + rtt;

			fprintf(rec, "tgt\tp6.failover\tworst <= TTL + one "
				"round trip\t%s\tworst %.0f ms, TTL + round "
				"trip %.0f ms\n", met ? "met" : "MISSED",
				p.worst, ttl_s * 1e3 + rtt);
			if (!met)
				fprintf(rec, "lim\tp6.failover\tetcd deletes an "
					"expired lease's keys late: %.0f ms "
					"after the expiry on average (max "
					"%.0f) here, and a lease of etcd's "
					"alone %.0f ms after its TTL "
					"(median), as its lessor looks for "
					"expired leases every 500 ms; the "
					"waiter reacted to the deletion in "
					"%.1f ms (mean)\n", p.late_mean,
					p.late_max, seen ? (double)nat[seen /
					2] / 1e6 - ttl_s * 1e3 : 0.0,
					p.react_mean);
		}
	}
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
