/* SPDX-License-Identifier: MIT */
/*
 * watches.c - one watch stream per bucket in use in a process (weblocks.h,
 * ETCD ENGINE; lib/etcd/registry.c), whatever the number of its managers
 * of the bucket.
 *
 * The observable is the cluster's: the watchers its members have, the sum
 * of each member's etcd_debugging_mvcc_watcher_total gauge (/metrics on
 * the client port), which counts every watch a client made through the
 * gateway. Three managers of one bucket add one watcher, two of a second
 * bucket one more; closing a bucket's managers ends its watcher. A
 * manager opened only returns once its bucket's watch is created, so the
 * count is up when the opens return; a close's end of a stream reaches
 * the member a moment later, so the count down is polled (bounded), and
 * so is the count before the test, which the streams of the tests before
 * it may still be leaving. Counts are taken against that one: the fault
 * suite runs its tests one at a time (check.sh), with no other client's
 * watch starting meanwhile.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common.h"

/* Managers of the first bucket, and of the second. */
#define SAME 3
#define SECOND 2
/* The second bucket. */
#define OTHER "watched"
/* A member's gauge of the watchers it serves (etcd 3.4, 3.5). */
#define GAUGE "etcd_debugging_mvcc_watcher_total "
/* Bytes of a member's /metrics reply read at most. */
#define METRICS_MAX (1 << 20)
/* Poll period while a count settles. */
#define POLL_MS 20

/* The watchers of the member @host ("host:port"). */
static long member_watchers(const char *host, char *buf)
{
	char cmd[512], *p;
	size_t len = 0, got;
	long n = -1;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "curl -sf -m 5 http://%s/metrics", host);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	while ((got = fread(buf + len, 1, METRICS_MAX - 1 - len, f)) > 0)
		len += got;
	buf[len] = '\0';
	cr_assert_eq(pclose(f), 0, "%s", cmd);
	for (p = buf; p; p = strchr(p, '\n')) {
		p += *p == '\n';
		if (!strncmp(p, GAUGE, strlen(GAUGE))) {
			n = strtol(p + strlen(GAUGE), NULL, 10);
			break;
		}
	}
	cr_assert_geq(n, 0, "no %s on %s", GAUGE, host);
	return n;
}

/* The watchers of every member of WEBLOCKS_BACKEND. */
static long watchers(void)
{
	const char *b = getenv("WEBLOCKS_BACKEND");
	char *buf = malloc(METRICS_MAX), host[256];
	long sum = 0;

	cr_assert(b && !strncmp(b, "etcd://", 7), "not on etcd");
	cr_assert_not_null(buf);
	for (b += strlen("etcd://"); *b; b += *b == ',') {
		size_t n = strcspn(b, ",");

		cr_assert_lt(n, sizeof(host));
		memcpy(host, b, n);
		host[n] = '\0';
		sum += member_watchers(host, buf);
		b += n;
	}
	free(buf);
	return sum;
}

/* Poll (bounded, T_WAIT_MS) until the cluster has @want watchers: how
 * many it has then. */
static long settle(long want)
{
	uint64_t end = t_now_ns() + T_WAIT_MS * 1000000ull;
	long n = watchers();

	while (n != want && t_now_ns() < end) {
		t_nap_ms(POLL_MS);
		n = watchers();
	}
	return n;
}

Test(etcd_watches, one_stream_per_bucket_in_use, T_FIX, .timeout = 60)
{
	struct wlk_manager_options mo = WLK_MANAGER_OPTIONS_INIT;
	struct wlk_manager *m[SAME], *o[SECOND];
	long w0 = settle(0), n;

	mo.bucket = OTHER;
	t_track_bucket(t_origin, mo.bucket, NULL);
	for (int i = 0; i < SAME; i++)
		m[i] = t_open();
	n = watchers();
	cr_assert_eq(n - w0, 1, "%ld watches for %d managers of one bucket",
		     n - w0, SAME);
	for (int i = 0; i < SECOND; i++)
		o[i] = t_open_opts(&mo);
	n = watchers();
	cr_assert_eq(n - w0, 2, "%ld watches for two buckets in use", n - w0);

	/* The second bucket's last close ends its stream; the first's
	 * stays while a manager of it is open. */
	for (int i = 0; i < SECOND; i++)
		t_close(o[i]);
	t_close(m[0]);
	n = settle(w0 + 1);
	cr_assert_eq(n - w0, 1, "%ld watches for one bucket in use", n - w0);
	for (int i = 1; i < SAME; i++)
		t_close(m[i]);
	n = settle(w0);
	cr_assert_eq(n, w0, "%ld watches left by closed managers", n - w0);
}
