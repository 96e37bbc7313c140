/* SPDX-License-Identifier: MIT */
/*
 * etcd.h - what bench/etcd.c (the program, its pairs and handoffs) and
 * bench/etcd_failover.c (its failover part) share.
 */
#ifndef BENCH_ETCD_H
#define BENCH_ETCD_H

#include <stdbool.h>
#include <stdint.h>

#include <curl/curl.h>
#include <weblocks.h>

#define REPLY_MAX 8192

/* A gateway reply, NUL-terminated. */
struct reply {
	char buf[REPLY_MAX];
	size_t n;
};

/* What the bench shares with its holder and waiter processes. */
struct shared {
	volatile uint64_t released_ns, granted_ns;
	volatile uint64_t opened_ns; /* the holder's manager open returned */
};

uint64_t now_ns(void);
void nap_ms(unsigned int ms);
int cmp_u64(const void *a, const void *b);
/* Sorts @ns, prints its median and p90. */
void report(const char *what, uint64_t *ns, int n);
/* With -o: a figure ("fig") or anchor ("anc") of sorted @ns, and any
 * other record line (bench.h's format, for report.awk). */
void record(const char *type, const char *key, const char *label,
	    uint64_t *ns, int n);
void record_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int post(CURL *h, const char *base, const char *path, const char *body,
	 struct reply *r);
int field(const char *json, const char *name, char *out, size_t cap);
/* One handoff; @kill_it: the holder's process is SIGKILLed, at least
 * @extra_ms after the waiter is queued. */
uint64_t handoff(struct wlk_manager *m, struct shared *sh, bool kill_it,
		 unsigned int extra_ms);
/* WEBLOCKS_ETCD_GUARD for the killed holders, or NULL: the bench's. */
extern const char *holder_guard;

/* etcd_anchors.c */
/* @runs lock+unlock pairs through etcd's lock service into @ns. */
void native(const char *base, int runs, uint64_t *ns);
/* One handoff through etcd's lock service (its header says how). */
uint64_t native_handoff(const char *base, struct shared *sh);
/* @n acquire+release from the command line, one process each: @weblocks_run
 * @origin bench-cli true into @ours, etcdctl --endpoints=@member lock
 * bench-cli true into @theirs, interleaved. 0, or -1 if one did not run. */
int cli_pairs(const char *weblocks_run, const char *origin,
	      const char *member, int n, uint64_t *ours, uint64_t *theirs);

/* etcd_failover.c */
/* The bench's watch of the engine's deletions, on a thread. */
int deletion_watch_start(const char *base);
/* Note the time of the next deletion from now on (@on), or not. */
void deletion_arm(bool on);
/* Part 3 (etcd.c's header): @kills failovers and their parts, and
 * etcd's own lease expiry; @rtt_ms one round trip; @ns and @scratch
 * hold @kills values at least. */
void failover_part(struct wlk_manager *m, struct shared *sh, int kills,
		   int ttl_s, const char *base, double rtt_ms, uint64_t *ns,
		   uint64_t *scratch);

#endif /* BENCH_ETCD_H */
