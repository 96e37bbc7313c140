/* SPDX-License-Identifier: MIT */
/*
 * etcd_anchors.c - part 6's anchors (bench/etcd.c), etcd's own lock
 * service and its command-line tool:
 *
 *  - acquire+release through the lock service: /v3/lock/lock and
 *    /v3/lock/unlock on one lease granted once, one keep-alive connection;
 *  - a handoff through etcd's own lock service: a holder's
 *    /v3/lock/unlock, and the /v3/lock/lock of a waiter in another
 *    process, blocked in the member until then, returns; timed as the
 *    engine's handoff (etcd.c, handoff()): from before the release to the
 *    waiter's return, the waiter given SETTLE_MS to be queued;
 *  - the command-line tools, one process per acquire+release, as a shell
 *    script takes a lock: weblocks-run ORIGIN NAME true against etcdctl
 *    lock NAME true (Debian: etcd-client), each run to its end, wall time.
 */
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "etcd.h"

/* Time a waiter is given to be queued before the holder lets go (as
 * etcd.c's handoff()). */
#define SETTLE_MS 200
/* The lease of a lock service's holder or waiter, in seconds. */
#define LEASE_TTL "30"
/* The lock service's names, base64 (the gateway's bytes): "bench-native"
 * for the pairs, "bench-handoff" for the handoffs. */
#define PAIR_NAME "YmVuY2gtbmF0aXZl"
#define HANDOFF_NAME "YmVuY2gtaGFuZG9mZg=="

extern char **environ;

static int lease_grant(CURL *h, const char *base, char *lease, size_t cap)
{
	struct reply r;

	return post(h, base, "/v3/lease/grant", "{\"TTL\":\"" LEASE_TTL "\"}",
		    &r) ||
	       field(r.buf, "ID", lease, cap);
}

/* Lock @name (base64) on @lease: its key into @key. */
static int lock(CURL *h, const char *base, const char *name,
		const char *lease, char *key, size_t cap)
{
	char body[128];
	struct reply r;

	snprintf(body, sizeof(body), "{\"name\":\"%s\",\"lease\":\"%s\"}",
		 name, lease);
	return post(h, base, "/v3/lock/lock", body, &r) ||
	       field(r.buf, "key", key, cap);
}

static int unlock(CURL *h, const char *base, const char *key)
{
	char body[512];
	struct reply r;

	snprintf(body, sizeof(body), "{\"key\":\"%s\"}", key);
	return post(h, base, "/v3/lock/unlock", body, &r);
}

static void lease_revoke(CURL *h, const char *base, const char *lease)
{
	char body[64];
	struct reply r;

	snprintf(body, sizeof(body), "{\"ID\":\"%s\"}", lease);
	(void)post(h, base, "/v3/lease/revoke", body, &r);
}

void native(const char *base, int runs, uint64_t *ns)
{
	CURL *h = curl_easy_init();
	char lease[32], key[256];

	if (!h || lease_grant(h, base, lease, sizeof(lease))) {
		fprintf(stderr, "etcd bench: lease grant failed\n");
		exit(1);
	}
	for (int i = 0; i < runs; i++) {
		uint64_t t0 = now_ns();

		if (lock(h, base, PAIR_NAME, lease, key, sizeof(key)) ||
		    unlock(h, base, key)) {
			fprintf(stderr, "etcd bench: lock service pair failed\n");
			exit(1);
		}
		ns[i] = now_ns() - t0;
	}
	lease_revoke(h, base, lease);
	curl_easy_cleanup(h);
}

/* The waiter's process: its own lease and connection; says 'w', then
 * blocks in the lock until granted, notes when, and lets go. */
static void native_waiter(const char *base, struct shared *sh, int ready)
{
	CURL *h = curl_easy_init();
	char lease[32], key[256];

	if (!h || lease_grant(h, base, lease, sizeof(lease)))
		_exit(1);
	(void)!write(ready, "w", 1);
	if (lock(h, base, HANDOFF_NAME, lease, key, sizeof(key)))
		_exit(2);
	sh->granted_ns = now_ns();
	(void)unlock(h, base, key);
	lease_revoke(h, base, lease);
	curl_easy_cleanup(h);
	_exit(0);
}

uint64_t native_handoff(const char *base, struct shared *sh)
{
	CURL *h = curl_easy_init();
	char lease[32], key[256], c;
	int p[2], st;
	pid_t w;

	if (!h || lease_grant(h, base, lease, sizeof(lease)) ||
	    lock(h, base, HANDOFF_NAME, lease, key, sizeof(key)) || pipe(p)) {
		fprintf(stderr, "etcd bench: lock service handoff: setup\n");
		exit(1);
	}
	w = fork();
	if (w == 0)
		native_waiter(base, sh, p[1]);
	if (w < 0 || read(p[0], &c, 1) != 1)
		exit(1);
	nap_ms(SETTLE_MS); /* its lock call waits in the member */
	sh->released_ns = now_ns();
	(void)unlock(h, base, key);
	waitpid(w, &st, 0);
	lease_revoke(h, base, lease);
	curl_easy_cleanup(h);
	close(p[0]);
	close(p[1]);
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "etcd bench: lock service waiter failed\n");
		exit(1);
	}
	return sh->granted_ns - sh->released_ns;
}

/* Run @argv to its end: its wall time in *@ns; -1 if it could not run or
 * failed. */
static int run(char *const argv[], uint64_t *ns)
{
	uint64_t t0 = now_ns();
	pid_t pid;
	int st;

	if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ))
		return -1;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st))
		return -1;
	*ns = now_ns() - t0;
	return 0;
}

int cli_pairs(const char *weblocks_run, const char *origin,
	      const char *member, int n, uint64_t *ours, uint64_t *theirs)
{
	/* posix_spawn() takes char *const argv[]: writable copies. */
	char tool[PATH_MAX], org[256], endpoints[300];
	char name[] = "bench-cli", cmd[] = "true", ctl[] = "etcdctl",
	     verb[] = "lock";
	char *w[] = { tool, org, name, cmd, NULL };
	char *e[] = { ctl, endpoints, verb, name, cmd, NULL };

	snprintf(tool, sizeof(tool), "%s", weblocks_run);
	snprintf(org, sizeof(org), "%s", origin);
	snprintf(endpoints, sizeof(endpoints), "--endpoints=%s", member);
	/* Interleaved, so that a drift of the cluster falls on both. */
	for (int i = 0; i < n; i++)
		if (run(w, &ours[i]) || run(e, &theirs[i]))
			return -1;
	return 0;
}
