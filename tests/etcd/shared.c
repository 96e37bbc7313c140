/* SPDX-License-Identifier: MIT */
/*
 * shared.c - a process is one client of the cluster (weblocks.h, ETCD
 * ENGINE): its managers share one lease and one agent thread, whatever
 * their buckets, and a manager's close leaves the others their lease.
 *
 *  - Three managers of one bucket and one of another, each holding a
 *    lock: the cluster has one lease more than before (asked with
 *    /v3/lease/leases), the process one thread more, the agent's, named
 *    "wlk-etcd". A manager closed while the others stay open lets its lock
 *    go at once; the last one's close ends the thread and the lease.
 *  - A process with three managers, each holding a lock, SIGKILLed: the
 *    three locks go to waiters of another process within the lease's TTL
 *    (and etcd's expiry, weblocks.h).
 *  - A process with two managers (two buckets), each holding a lock,
 *    stopped past its lease: both locks go to another process; continued,
 *    it sees both stolen, and both managers go on with a new lease.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common.h"

/* Leases listed at most. */
#define LEASES_MAX 4096
/* The agent thread's name (lib/etcd/agent.c). */
#define AGENT_NAME "wlk-etcd"
/* Managers in one bucket, in both tests. */
#define SAME 3
/* After its TTL, an expired lease's keys go within etcd's lessor period
 * (500 ms) and a round trip or two: room for a loaded machine. */
#define EXPIRY_SLACK_MS 2500
/* The second bucket of the tests. */
#define OTHER "other"

/* The first member of WEBLOCKS_BACKEND, as host:port. */
static void member(char *out, size_t size)
{
	const char *b = getenv("WEBLOCKS_BACKEND");
	size_t n;

	cr_assert(b && !strncmp(b, "etcd://", 7), "not on etcd");
	b += strlen("etcd://");
	n = strcspn(b, ",");
	cr_assert_lt(n, size);
	memcpy(out, b, n);
	out[n] = '\0';
}

/* The cluster's leases into @ids: how many. */
static size_t leases(long long *ids, size_t max)
{
	char host[256], cmd[512], *buf = malloc(1 << 20), *p;
	size_t len = 0, n = 0, got;
	FILE *f;

	cr_assert_not_null(buf);
	member(host, sizeof(host));
	snprintf(cmd, sizeof(cmd),
		 "curl -sf -m 5 http://%s/v3/lease/leases -d '{}'", host);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	while ((got = fread(buf + len, 1, (1 << 20) - 1 - len, f)) > 0)
		len += got;
	buf[len] = '\0';
	cr_assert_eq(pclose(f), 0, "%s", cmd);
	for (p = buf; (p = strstr(p, "\"ID\":\"")) && n < max; n++) {
		p += strlen("\"ID\":\"");
		ids[n] = strtoll(p, &p, 10);
	}
	free(buf);
	return n;
}

/* How many of @now are not in @before. */
static size_t new_leases(const long long *before, size_t nb,
			 const long long *now, size_t nn)
{
	size_t fresh = 0;

	for (size_t i = 0; i < nn; i++) {
		bool old = false;

		for (size_t j = 0; j < nb && !old; j++)
			old = now[i] == before[j];
		fresh += !old;
	}
	return fresh;
}

/* This process's threads, and those named @name if not NULL. */
static int threads(const char *name)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d))) {
		char path[300], comm[64] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		if (!name) {
			n++;
			continue;
		}
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue; /* it ended meanwhile */
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
		n += !strcmp(comm, name);
	}
	closedir(d);
	return n;
}

Test(etcd_shared, managers_of_a_process_share_one_lease_and_one_thread,
     T_FIX, .timeout = 60)
{
	static long long before[LEASES_MAX], now[LEASES_MAX];
	struct wlk_manager_options mo = WLK_MANAGER_OPTIONS_INIT;
	struct wlk_options ia = { .size = sizeof(ia), .if_available = true };
	struct wlk_manager *m[SAME + 1];
	struct wlk_lock *l[SAME + 1] = { NULL }, *again = NULL;
	size_t nb, nn;
	int t0 = threads(NULL);

	cr_assert_eq(threads(AGENT_NAME), 0, "an agent before any manager");
	nb = leases(before, LEASES_MAX);
	mo.bucket = OTHER;
	t_track_bucket(t_origin, mo.bucket, NULL);
	for (int i = 0; i < SAME; i++)
		m[i] = t_open();
	m[SAME] = t_open_opts(&mo);
	for (int i = 0; i <= SAME; i++) {
		char name[16];

		snprintf(name, sizeof(name), "n%d", i);
		T_ASSERT_RC(wlk_acquire(m[i], name, strlen(name), NULL, &l[i]),
			    0);
	}
	nn = leases(now, LEASES_MAX);
	cr_assert_eq(new_leases(before, nb, now, nn), 1,
		     "%zu leases for %d managers of one process",
		     new_leases(before, nb, now, nn), SAME + 1);
	cr_assert_eq(threads(NULL) - t0, 1, "%d threads for %d managers",
		     threads(NULL) - t0, SAME + 1);
	cr_assert_eq(threads(AGENT_NAME), 1);

	/* A close while the lease lives on deletes the manager's keys: its
	 * lock is free at once, not at the lease's end. */
	t_close(m[0]);
	T_ASSERT_RC(wlk_release(l[0]), WLK_ESTATE);
	T_ASSERT_RC(wlk_acquire(m[1], "n0", 2, &ia, &again), 0);
	cr_assert_not_null(again, "the closed manager's lock stayed");
	T_ASSERT_RC(wlk_release(again), 0);
	cr_assert_not(wlk_lock_stolen(l[1]), "the close took another's lock");
	for (int i = 1; i <= SAME; i++) {
		T_ASSERT_RC(wlk_release(l[i]), 0);
		t_close(m[i]);
	}
	cr_assert_eq(threads(AGENT_NAME), 0, "the agent outlived its managers");
	nn = leases(now, LEASES_MAX);
	cr_assert_eq(new_leases(before, nb, now, nn), 0,
		     "the last close left its lease");
}

/* Child: three managers, one lock each ("k0".."k2"); say 'h', then wait
 * to be killed. */
static int three_holders(void *arg)
{
	struct t_pipe *p = arg;
	struct wlk_manager *m[SAME];
	struct wlk_lock *l[SAME];

	for (int i = 0; i < SAME; i++) {
		char name[4] = { 'k', (char)('0' + i), '\0' };

		T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m[i]) == 0,
			      1);
		T_CHILD_CHECK(wlk_acquire(m[i], name, 2, NULL, &l[i]) == 0, 2);
	}
	T_CHILD_CHECK(t_put_byte(p->wr, 'h') == 0, 3);
	for (;;)
		pause();
	return 0;
}

Test(etcd_shared, a_killed_process_loses_the_locks_of_all_its_managers,
     T_FIX, .timeout = 60)
{
	const char *ttl_s = getenv("WEBLOCKS_ETCD_TTL");
	unsigned int ttl_ms = (ttl_s ? (unsigned int)atoi(ttl_s) : 10) * 1000;
	struct wlk_manager *m = t_open();
	struct t_holder h[SAME];
	struct t_pipe p;
	uint64_t killed, took_ms;
	pid_t child;

	t_pipe_open(&p);
	child = t_fork(three_holders, &p);
	cr_assert_eq(t_get_byte(p.rd), 'h', "the child did not lock");
	for (int i = 0; i < SAME; i++) {
		char name[4] = { 'k', (char)('0' + i), '\0' };

		t_holder_start(&h[i], m, name, 2, NULL);
		cr_assert(t_wait_pending(m, name, 2, 1),
			  "waiter %d not queued", i);
	}
	killed = t_now_ns();
	kill(child, SIGKILL);
	cr_assert_eq(t_wait(child, T_WAIT_MS), 128 + SIGKILL);
	for (int i = 0; i < SAME; i++) {
		cr_assert_eq(t_holder_wait_granted(&h[i]), 0,
			     "waiter %d not granted", i);
		cr_assert(h[i].got && h[i].acq_rc == 0, "waiter %d: %s", i,
			  t_ename(h[i].acq_rc));
	}
	took_ms = (t_now_ns() - killed) / 1000000u;
	cr_assert_leq(took_ms, ttl_ms + EXPIRY_SLACK_MS,
		      "granted %llu ms after the kill (TTL %u ms)",
		      (unsigned long long)took_ms, ttl_ms);
	for (int i = 0; i < SAME; i++) {
		cr_assert_eq(t_holder_release(&h[i]), 0);
		T_ASSERT_RC(h[i].rel_rc, 0);
		t_holder_join(&h[i]);
	}
	t_pipe_close(&p);
}

/* Child: "r" held through a manager of the default bucket and one of
 * OTHER; say 'h'; stopped; once told 'c', both must be stolen, and both
 * managers must get a lock again. */
static int stopped_two_managers(void *arg)
{
	struct t_pipe *p = arg;
	struct wlk_manager_options mo = WLK_MANAGER_OPTIONS_INIT;
	struct wlk_manager *m[2];
	struct wlk_lock *l[2];
	int i;

	mo.bucket = OTHER;
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m[0]) == 0, 1);
	T_CHILD_CHECK(wlk_manager_open(t_origin, &mo, &m[1]) == 0, 2);
	for (i = 0; i < 2; i++)
		T_CHILD_CHECK(wlk_acquire(m[i], "r", 1, NULL, &l[i]) == 0, 3);
	T_CHILD_CHECK(t_put_byte(p[0].wr, 'h') == 0, 4);
	/* Stopped here; continued once the test has both locks. */
	T_CHILD_CHECK(t_get_byte(p[1].rd) == 'c', 5);
	T_CHILD_CHECK(t_stolen_within(l, 2, T_EXPIRY_WAIT_MS), 6);
	for (i = 0; i < 2; i++)
		T_CHILD_CHECK(wlk_release(l[i]) == WLK_ESTOLEN, 7);
	/* Both go on, on the process's new lease. */
	for (i = 0; i < 2; i++) {
		T_CHILD_CHECK(wlk_acquire(m[i], "s", 1, NULL, &l[i]) == 0, 8);
		T_CHILD_CHECK(wlk_release(l[i]) == 0, 9);
		wlk_manager_close(m[i]);
	}
	return 0;
}

Test(etcd_shared, a_lost_lease_takes_the_locks_of_all_the_managers_on_it,
     T_FIX, .timeout = 90)
{
	struct wlk_manager_options mo = WLK_MANAGER_OPTIONS_INIT;
	struct wlk_options o = { .size = sizeof(o),
				 .timeout_ns = T_EXPIRY_WAIT_MS * 1000000ull };
	struct wlk_manager *m[2];
	struct wlk_lock *l[2] = { NULL };
	struct t_stopped st;
	int rc;

	mo.bucket = OTHER;
	t_track_bucket(t_origin, OTHER, NULL);
	m[0] = t_open();
	m[1] = t_open_opts(&mo);
	t_stopped_start(&st, stopped_two_managers);
	for (int i = 0; i < 2; i++)
		T_ASSERT_RC(wlk_acquire(m[i], "r", 1, &o, &l[i]), 0);
	rc = t_stopped_resume(&st, T_EXPIRY_WAIT_MS * 2);
	cr_assert_eq(rc, 0, "the holder's step %d failed", rc);
	for (int i = 0; i < 2; i++) {
		cr_assert_not(wlk_lock_stolen(l[i]));
		T_ASSERT_RC(wlk_release(l[i]), 0);
	}
}

/*
 * A fork child has none of its parent's managers: it closes an idle one
 * it inherited (freed there: nothing holds it), opens its own and steals
 * the parent's lock. A steal tells this process's open managers; the
 * child's list must not hold the inherited one, freed (a use after free
 * under ASan) or with its mutex held by a parent's thread at the fork.
 */
static int child_steals(void *arg)
{
	static const struct wlk_options steal = {.size = sizeof(steal),
						 .steal = true};
	struct wlk_manager *inherited = arg, *m = NULL;
	struct wlk_lock *l = NULL;

	wlk_manager_close(inherited);
	if (wlk_manager_open(t_origin, NULL, &m))
		return 10;
	if (wlk_acquire(m, "f", 1, &steal, &l) || !l)
		return 11;
	if (wlk_release(l))
		return 12;
	wlk_manager_close(m);
	return 0;
}

Test(etcd_shared, a_fork_child_steals_without_its_parents_managers, T_FIX,
     .timeout = 30)
{
	struct wlk_manager *m = t_open(), *idle = t_open();
	struct wlk_lock *l = NULL;
	pid_t pid;

	T_ASSERT_RC(wlk_acquire(m, "f", 1, NULL, &l), 0);
	pid = t_fork(child_steals, idle);
	cr_assert_eq(t_wait(pid, 4 * T_WAIT_MS), 0, "the child failed");
	cr_assert(t_stolen(l), "the parent's lock was not stolen");
	(void)wlk_release(l);
}
