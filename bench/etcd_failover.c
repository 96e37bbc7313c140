/* SPDX-License-Identifier: MIT */
/*
 * etcd_failover.c - bench/etcd's failover part (etcd.c, part 3): a
 * holder's process SIGKILLed while another waits, twice over.
 *
 *  - As a program runs it, with its guard (lib/etcd/guard.c), which
 *    revokes the dead holder's lease: each failover split into the
 *    guard's revoke (the kill to the deletion, seen by a watch of the
 *    bench's own) and the waiter's reaction. The target: worst
 *    <= TTL + one round trip.
 *  - With no guard (WEBLOCKS_ETCD_GUARD=none), what a dead machine
 *    costs: split into the lease's TTL left at the kill, etcd's lateness
 *    after the expiry, and the waiter's reaction; against etcd's own
 *    expiry of a lease nothing renews. Its target is etcd's floor, worst
 *    <= TTL + the lessor's scan period + one round trip, which the engine
 *    misses only if it adds more than a round trip of its own.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

/* etcd's lessor (3.4, 3.5) looks for expired leases this often, then
 * revokes them through raft: the bench's floor target allows it. */
#define LESSOR_SCAN_MS 500
/* The kills' pauses before their holders open step through the scan's
 * beat by this many kills' shares of it (etcd.c keeps kills small). */
#define PHASE_STRIDE 4

/* The bench's own watch of every deletion under the engine's keys
 * ("wlk2/", base64; its range end "wlk20"), on a thread: when the first
 * deletion after arming arrived. */
#define WATCH_BODY "{\"create_request\":{\"key\":\"d2xrMi8=\"," \
		   "\"range_end\":\"d2xrMjA=\",\"filters\":[\"NOPUT\"]}}"
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

int deletion_watch_start(const char *base)
{
	pthread_t t;

	if (pthread_create(&t, NULL, watcher, (void *)base))
		return -1;
	pthread_detach(t); /* it ends with the bench */
	return 0;
}

void deletion_arm(bool on)
{
	__atomic_store_n(&deletion_armed, on, __ATOMIC_RELEASE);
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
		/* key "wlk2/bench-expiry" */
		snprintf(body, sizeof(body),
			 "{\"key\":\"d2xrMi9iZW5jaC1leHBpcnk=\","
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
	double left_max;            /* the lease's TTL left at a kill, ms */
	double late_mean, late_max; /* etcd: expiry to deletion, ms */
	double react_mean, react_max; /* the waiter: deletion to grant, ms */
	double revoke_mean, revoke_max; /* the guard: kill to deletion, ms */
	double worst;               /* the longest failover, ms */
	int n;                      /* kills whose parts were seen */
};

/* The parts of one failover @f (ns) of a holder with a guard: the kill to
 * the deletion (the guard's revoke, through raft), then to the grant. */
static void guarded_parts(struct parts *p, const struct shared *sh,
			  uint64_t f, uint64_t del)
{
	double revoke = ((double)del - (double)sh->released_ns) / 1e6;
	double react = ((double)sh->granted_ns - (double)del) / 1e6;

	p->revoke_mean += revoke;
	p->react_mean += react;
	p->revoke_max = revoke > p->revoke_max ? revoke : p->revoke_max;
	p->react_max = react > p->react_max ? react : p->react_max;
	p->n++;
	printf("  %9.1f %9.1f %9.1f\n", (double)f / 1e6, revoke, react);
}

/* The parts of one failover @f (ns) of a holder without a guard: the
 * lease's TTL left at the kill, etcd's lateness past the expiry, the
 * waiter's reaction to the deletion. */
static void expiry_parts(struct parts *p, const struct shared *sh,
			 uint64_t f, uint64_t del, uint64_t ttl)
{
	/* The holder's keepalives: every TTL/3 from its open. */
	uint64_t since_ka = (sh->released_ns - sh->opened_ns) % (ttl / 3);
	uint64_t left = ttl - since_ka;
	double late = ((double)(del - sh->released_ns) - (double)left) / 1e6;
	double react = ((double)sh->granted_ns - (double)del) / 1e6;

	p->late_mean += late;
	p->react_mean += react;
	p->late_max = late > p->late_max ? late : p->late_max;
	p->react_max = react > p->react_max ? react : p->react_max;
	if ((double)left / 1e6 > p->left_max)
		p->left_max = (double)left / 1e6;
	p->n++;
	printf("  %9.1f %9.1f %9.1f %9.1f %9.1f\n", (double)f / 1e6,
	       (double)left / 1e6, late, react,
	       ((double)f - (double)ttl) / 1e6);
}

/* Failovers, the kills spread over the holder's keepalive period, each
 * split into its parts (the header says how); times into @ns. @guarded:
 * the holders run with the bench's guard, else with none. */
static struct parts failover(struct wlk_manager *m, struct shared *sh,
			     int kills, int ttl_s, bool guarded, uint64_t *ns)
{
	uint64_t ttl = (uint64_t)ttl_s * 1000000000u, period = ttl / 3;
	struct parts p = { 0 };

	holder_guard = guarded ? NULL : "none";
	printf("failover after SIGKILL of the holder, %s, lease TTL %d s "
	       "(keepalive every %.0f ms):\n", guarded ? "its guard on" :
	       "no guard (WEBLOCKS_ETCD_GUARD=none)", ttl_s,
	       (double)period / 1e6);
	if (guarded)
		printf("  %9s %9s %9s %9s\n", "failover", "revoked",
		       "reaction", "(ms)");
	else
		printf("  %9s %9s %9s %9s %9s %9s\n", "failover",
		       "TTL left", "late", "reaction", "over TTL", "(ms)");
	for (int i = 0; i < kills; i++) {
		unsigned int extra = (unsigned int)(period / 1000000u) *
				     (unsigned int)i / (unsigned int)kills;
		uint64_t f, del;

		/* The previous failover's grant came just after a lessor
		 * scan, and the next holder opens just after it: without a
		 * pause of its own, every expiry would fall at the same
		 * phases of the scan's beat (a lateness of two or three
		 * values). A stride coprime with the kills spreads them. */
		if (!guarded)
			nap_ms((unsigned int)(i * PHASE_STRIDE % kills) *
			       LESSOR_SCAN_MS / (unsigned int)kills);
		__atomic_store_n(&deletion_ns, 0, __ATOMIC_RELEASE);
		f = handoff(m, sh, true, guarded ? 0 : extra);
		ns[i] = f;
		if ((double)f / 1e6 > p.worst)
			p.worst = (double)f / 1e6;
		del = __atomic_load_n(&deletion_ns, __ATOMIC_ACQUIRE);
		if (!del)
			printf("  %9.1f (the bench's watch saw no deletion)\n",
			       (double)f / 1e6);
		else if (guarded)
			guarded_parts(&p, sh, f, del);
		else
			expiry_parts(&p, sh, f, del, ttl);
	}
	holder_guard = NULL;
	if (p.n) {
		p.late_mean /= p.n;
		p.react_mean /= p.n;
		p.revoke_mean /= p.n;
	}
	report(guarded ? "failover after SIGKILL of the holder" :
			 "failover after SIGKILL of the holder, no guard",
	       ns, kills);
	if (guarded)
		printf("  the guard's revoke, kill to deletion: mean %.1f ms, "
		       "max %.1f ms; the waiter's reaction: mean %.1f ms; "
		       "worst failover: %.1f ms\n", p.revoke_mean,
		       p.revoke_max, p.react_mean, p.worst);
	else
		printf("  etcd's lateness after the expiry: mean %.1f ms, max "
		       "%.1f ms; the waiter's reaction: mean %.1f ms; worst "
		       "failover: %.1f ms\n", p.late_mean, p.late_max,
		       p.react_mean, p.worst);
	return p;
}

/* Without a guard: the lease's expiry, against etcd's own. */
static void expiry_part(struct wlk_manager *m, struct shared *sh, int kills,
			int ttl_s, const char *base, double rtt_ms,
			uint64_t *ns, uint64_t *scratch)
{
	struct parts p = failover(m, sh, kills, ttl_s, false, ns);
	double ttl_ms = ttl_s * 1e3;
	char label[160];
	bool floor_met = p.worst <= ttl_ms + LESSOR_SCAN_MS + rtt_ms;
	int seen;

	snprintf(label, sizeof(label), "etcd engine, no guard "
		 "(WEBLOCKS_ETCD_GUARD=none): failover after SIGKILL of the "
		 "holder (lease TTL %d s)", ttl_s);
	record("fig", "p6.failover_ttl", label, ns, kills);
	seen = bare_expiry(base, ttl_s, kills, scratch);
	qsort(scratch, (size_t)seen, sizeof(*scratch), cmp_u64);
	record("anc", "p6.failover_ttl", "a lease of etcd's alone, never "
	       "renewed: grant to deletion of its key", scratch, seen);
	/* What etcd allows: the engine adds no more than a round trip to
	 * its lessor's scan. */
	record_line("tgt\tp6.failover_ttl\tworst <= TTL + etcd's lessor scan "
		    "(%d ms) + one round trip\t%s\tworst %.0f ms, bound "
		    "%.0f ms\n", LESSOR_SCAN_MS, floor_met ? "met" : "MISSED",
		    p.worst, ttl_ms + LESSOR_SCAN_MS + rtt_ms);
	record_line("note\tp6.failover_ttl\twithout a guard (a dead machine, "
		    "or WEBLOCKS_ETCD_GUARD=none): a lease ends up to a TTL "
		    "after the death (TTL left: max %.0f ms here), etcd's "
		    "lessor finds it expired on its next scan, every %d ms, "
		    "and revokes it (its keys deleted %.0f ms after the "
		    "expiry on average, max %.0f; a lease of etcd's alone, "
		    "never renewed, %.0f ms after its TTL, median), and the "
		    "waiter is granted %.1f ms (mean, max %.1f) after the "
		    "deletion\n", p.left_max, LESSOR_SCAN_MS, p.late_mean,
		    p.late_max,
		    seen ? (double)scratch[seen / 2] / 1e6 - ttl_ms : 0.0,
		    p.react_mean, p.react_max);
}

void failover_part(struct wlk_manager *m, struct shared *sh, int kills,
		   int ttl_s, const char *base, double rtt_ms, uint64_t *ns,
		   uint64_t *scratch)
{
	struct parts p = failover(m, sh, kills, ttl_s, true, ns);
	double ttl_ms = ttl_s * 1e3;
	char label[128];

	snprintf(label, sizeof(label), "etcd engine: failover after "
		 "SIGKILL of the holder (lease TTL %d s)", ttl_s);
	record("fig", "p6.failover", label, ns, kills);
	record_line("tgt\tp6.failover\tworst <= TTL + one round trip\t%s\t"
		    "worst %.0f ms, TTL + round trip %.0f ms\n",
		    p.worst <= ttl_ms + rtt_ms ? "met" : "MISSED", p.worst,
		    ttl_ms + rtt_ms);
	record_line("note\tp6.failover\tthe holder's guard (a process of "
		    "its own, lib/etcd/guard.c) revoked its lease %.1f ms "
		    "after the kill (mean, max %.1f), and the waiter was "
		    "granted %.1f ms (mean, max %.1f) after the deletion\n",
		    p.revoke_mean, p.revoke_max, p.react_mean, p.react_max);
	expiry_part(m, sh, kills, ttl_s, base, rtt_ms, ns, scratch);
}
