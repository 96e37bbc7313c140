/* SPDX-License-Identifier: MIT */
/*
 * faults.c - the etcd engine under the faults of a cluster: run by
 * tests/etcd/check.sh on its three-member cluster (WEBLOCKS_BACKEND names
 * it; WLK_ETCD_CLUSTER and WLK_ETCD_CLUSTER_SH let a test kill and restart
 * members), one test at a time.
 *
 *  - The leader is killed while requests of several processes wait: every
 *    request is still answered, never two holders at once, in FIFO order,
 *    with increasing tokens.
 *  - A process stopped past its lease's TTL: its waiters elsewhere are
 *    granted; when it continues, its lock says stolen and its release
 *    WLK_ESTOLEN.
 *  - A member restarted under a waiter whose watch stream it carried: the
 *    waiter is still woken by the release.
 *  - No cluster: -EHOSTUNREACH within the call timeout; a server that is
 *    not etcd, or replies what etcd never would: -EPROTO, not a crash.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "../common.h"
#include "proxy.h"

/* Processes queued in the leader test. */
#define WAITERS 4
/* How long a holder keeps the lock in the leader test. */
#define HOLD_MS 150

static void cluster(const char *cmd, int member)
{
	char line[1024];
	const char *sh = getenv("WLK_ETCD_CLUSTER_SH");
	const char *dir = getenv("WLK_ETCD_CLUSTER");

	cr_assert(sh && dir, "not run by tests/etcd/check.sh");
	snprintf(line, sizeof(line), "bash '%s' %s '%s' %d", sh, cmd, dir,
		 member);
	cr_assert_eq(system(line), 0, "%s", line);
}

static int leader(void)
{
	char line[1024];
	int n = 0;
	FILE *f;

	snprintf(line, sizeof(line), "bash '%s' leader '%s'",
		 getenv("WLK_ETCD_CLUSTER_SH"), getenv("WLK_ETCD_CLUSTER"));
	f = popen(line, "r");
	cr_assert_not_null(f);
	if (fscanf(f, "%d", &n) != 1)
		n = 0;
	pclose(f);
	cr_assert(n >= 1 && n <= 3, "no leader found");
	return n;
}

/* What the processes of the leader test share. */
struct board {
	atomic_int inside;   /* holders now: never above 1 */
	atomic_int overlaps; /* times it was */
	atomic_int next;     /* grant order */
	int order[WAITERS];  /* order[i]: grant rank of waiter i */
	uint64_t token[WAITERS];
	int rc[WAITERS];
};

struct waiter {
	struct board *b;
	int i;
};

static int waiter_main(void *arg)
{
	struct waiter *w = arg;
	struct wlk_manager *m;
	struct wlk_lock *l = NULL;
	int rc = wlk_manager_open(t_origin, NULL, &m);

	T_CHILD_CHECK(rc == 0, 1);
	rc = wlk_acquire(m, "r", 1, NULL, &l);
	w->b->rc[w->i] = rc;
	T_CHILD_CHECK(rc == 0, 2);
	if (atomic_fetch_add(&w->b->inside, 1) != 0)
		atomic_fetch_add(&w->b->overlaps, 1);
	w->b->order[w->i] = atomic_fetch_add(&w->b->next, 1);
	w->b->token[w->i] = wlk_lock_token(l);
	t_nap_ms(HOLD_MS);
	atomic_fetch_sub(&w->b->inside, 1);
	rc = wlk_release(l);
	wlk_manager_close(m);
	return rc == 0 ? 0 : 3;
}

Test(faults, leader_killed_while_requests_wait, T_FIX, .timeout = 60)
{
	struct board *b = t_shared_alloc(sizeof(*b));
	struct waiter w[WAITERS];
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	pid_t pid[WAITERS];
	int dead;

	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	for (int i = 0; i < WAITERS; i++) {
		w[i] = (struct waiter){ b, i };
		pid[i] = t_fork(waiter_main, &w[i]);
		cr_assert(t_wait_pending(m, "r", 1, (size_t)i + 1),
			  "waiter %d not queued", i);
	}
	dead = leader();
	cluster("kill", dead);
	T_ASSERT_RC(wlk_release(l), 0);
	for (int i = 0; i < WAITERS; i++)
		cr_assert_eq(t_wait(pid[i], 30000), 0, "waiter %d: rc %s", i,
			     t_ename(b->rc[i]));
	cr_assert_eq(atomic_load(&b->overlaps), 0, "two holders at once");
	for (int i = 0; i < WAITERS; i++) {
		cr_assert_eq(b->order[i], i, "waiter %d granted %d-th", i,
			     b->order[i]);
		if (i)
			cr_assert_gt(b->token[i], b->token[i - 1]);
	}
	cluster("restart", dead);
	t_shared_free(b, sizeof(*b));
}

/* A holder in a child, stopped by the test past its lease. */
static int stopped_holder(void *arg)
{
	struct t_pipe *p = arg;
	struct wlk_manager *m;
	struct wlk_lock *l = NULL;
	int rc = wlk_manager_open(t_origin, NULL, &m);

	T_CHILD_CHECK(rc == 0, 1);
	T_CHILD_CHECK(wlk_acquire(m, "r", 1, NULL, &l) == 0, 2);
	T_CHILD_CHECK(t_put_byte(p[0].wr, 'h') == 0, 3);
	/* Stopped here; continued once the waiter has the lock. */
	T_CHILD_CHECK(t_get_byte(p[1].rd) == 'c', 4);
	T_CHILD_CHECK(t_stolen_within(&l, 1, T_EXPIRY_WAIT_MS), 5);
	T_CHILD_CHECK(wlk_release(l) == WLK_ESTOLEN, 6);
	/* The manager goes on with a new lease. */
	T_CHILD_CHECK(wlk_acquire(m, "other", 5, NULL, &l) == 0, 7);
	T_CHILD_CHECK(wlk_release(l) == 0, 8);
	wlk_manager_close(m);
	return 0;
}

Test(faults, expired_lease_grants_the_waiter_and_tells_the_holder, T_FIX,
     .timeout = 60)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	struct wlk_options o = { .size = sizeof(o),
				 .timeout_ns = T_EXPIRY_WAIT_MS * 1000000ull };
	struct t_stopped st;
	uint64_t t0;
	int rc;

	t_stopped_start(&st, stopped_holder);
	t0 = t_now_ns();
	T_ASSERT_RC(wlk_acquire(m, "r", 1, &o, &l), 0);
	cr_log_info("granted %.2f s after the holder stopped",
		    (double)(t_now_ns() - t0) / 1e9);
	rc = t_stopped_resume(&st, T_EXPIRY_WAIT_MS * 2);
	cr_assert_eq(rc, 0, "the holder's step %d failed", rc);
	cr_assert_not(wlk_lock_stolen(l));
	T_ASSERT_RC(wlk_release(l), 0);
}

/* Release "r" when told; the waiter is in the test's process. */
static int releasing_holder(void *arg)
{
	struct t_pipe *p = arg;
	struct wlk_manager *m;
	struct wlk_lock *l = NULL;
	int rc = wlk_manager_open(t_origin, NULL, &m);

	T_CHILD_CHECK(rc == 0, 1);
	T_CHILD_CHECK(wlk_acquire(m, "r", 1, NULL, &l) == 0, 2);
	T_CHILD_CHECK(t_put_byte(p[0].wr, 'h') == 0, 3);
	T_CHILD_CHECK(t_get_byte(p[1].rd) == 'r', 4);
	T_CHILD_CHECK(wlk_release(l) == 0, 5);
	wlk_manager_close(m);
	return 0;
}

Test(faults, member_restarted_under_a_waiting_request, T_FIX,
     .timeout = 60)
{
	struct wlk_manager *m = t_open();
	struct t_holder h;
	struct t_pipe p[2];
	pid_t pid;

	t_pipe_open(&p[0]);
	t_pipe_open(&p[1]);
	pid = t_fork(releasing_holder, p);
	cr_assert_eq(t_get_byte(p[0].rd), 'h');
	t_holder_start(&h, m, "r", 1, NULL);
	cr_assert(t_wait_pending(m, "r", 1, 1));
	/* The first member carries this manager's watch: the stream breaks
	 * and resumes on another member. */
	cluster("kill", 1);
	cr_assert_eq(t_put_byte(p[1].wr, 'r'), 0);
	cr_assert_eq(t_wait(pid, 30000), 0, "the holder");
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	T_ASSERT_RC(h.acq_rc, 0);
	cluster("restart", 1);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	t_pipe_close(&p[0]);
	t_pipe_close(&p[1]);
}

/* Bound on how long an unreachable cluster may take to be reported: the
 * call timeout the test sets, and room for a loaded machine. */
#define UNREACHABLE_TIMEOUT_MS 1000
#define UNREACHABLE_SLACK_MS 2000

Test(faults, unreachable_cluster_is_an_error_within_the_timeout, T_FIX,
     .timeout = 30)
{
	struct wlk_manager_options o = { .size = sizeof(o),
					 .backend = "etcd://127.0.0.1:1" };
	struct wlk_manager *m = (struct wlk_manager *)&o;
	uint64_t t0 = t_now_ns();

	cr_assert_eq(setenv("WEBLOCKS_ETCD_TIMEOUT_MS", "1000", 1), 0);
	T_ASSERT_RC(wlk_manager_open(t_origin, &o, &m), -EHOSTUNREACH);
	cr_assert_eq(m, (struct wlk_manager *)&o, "*out written on error");
	cr_assert_lt(t_now_ns() - t0, (UNREACHABLE_TIMEOUT_MS +
				       UNREACHABLE_SLACK_MS) * 1000000ull);
	T_ASSERT_RC(wlk_bucket_remove(t_origin, &o), -EHOSTUNREACH);
}

/* A server that answers every request on @fd with @reply, then closes. */
struct liar {
	int fd;
	const char *reply;
};

static void *liar_main(void *arg)
{
	struct liar *l = arg;
	char buf[4096];
	int c;

	while ((c = accept(l->fd, NULL, NULL)) >= 0) {
		struct timeval tv = { 0, 200000 };

		/* Read the whole request (a close with unread bytes would be
		 * a reset, not a reply), answer, and read until the client
		 * closes. */
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		while (read(c, buf, sizeof(buf)) == (ssize_t)sizeof(buf))
			;
		(void)!write(c, l->reply, strlen(l->reply));
		shutdown(c, SHUT_WR);
		while (read(c, buf, sizeof(buf)) > 0)
			;
		close(c);
	}
	return NULL;
}

/* What wlk_manager_open() says to a server that is not etcd. */
static int open_against(const char *reply)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	struct liar l = { .reply = reply };
	struct wlk_manager_options o = { .size = sizeof(o) };
	struct wlk_manager *m = NULL;
	char backend[64];
	pthread_t t;
	int rc;

	l.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(l.fd, 0);
	cr_assert_eq(bind(l.fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(l.fd, 8), 0);
	cr_assert_eq(getsockname(l.fd, (struct sockaddr *)&a, &len), 0);
	snprintf(backend, sizeof(backend), "etcd://127.0.0.1:%d",
		 ntohs(a.sin_port));
	o.backend = backend;
	cr_assert_eq(pthread_create(&t, NULL, liar_main, &l), 0);
	rc = wlk_manager_open(t_origin, &o, &m);
	if (!rc)
		wlk_manager_close(m);
	shutdown(l.fd, SHUT_RDWR);
	close(l.fd);
	pthread_join(t, NULL);
	return rc;
}

#define OK_HEAD "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: "

Test(faults, a_reply_that_is_not_etcds_is_an_error, T_FIX, .timeout = 30)
{
	static const char *const replies[] = {
		OK_HEAD "5\r\n\r\nhello",
		OK_HEAD "2\r\n\r\n[]",
		OK_HEAD "21\r\n\r\n{\"ID\":\"-5\",\"TTL\":\"x\"}",
		OK_HEAD "16\r\n\r\n{\"ID\":{\"a\":[1]}}",
		"HTTP/1.1 400 Bad\r\nConnection: close\r\n"
		"Content-Length: 2\r\n\r\n{}",
	};

	cr_assert_eq(setenv("WEBLOCKS_ETCD_TIMEOUT_MS", "1000", 1), 0);
	for (size_t i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
		int rc = open_against(replies[i]);

		cr_assert_eq(rc, -EPROTO, "reply %zu: got %s", i, t_ename(rc));
	}
}

/* Keys under the bucket that the engine never makes, their names
 * escaped otherwise than codec.c escapes them (a safe byte as "%41", a
 * lower-case digit, a bare '.', a cut escape): not anybody's name. The
 * bucket's reads refuse them (-EPROTO), and the name they would spell
 * is free. */
Test(faults, a_key_escaped_otherwise_is_nobodys_name, T_FIX, .timeout = 30)
{
	static const char *const raw[] = { "%41", "%2f", "a.b", "%4" };
	struct wlk_options ia = { .size = sizeof(ia), .if_available = true };
	struct wlk_manager *m = t_open();
	struct wlk_snapshot *s = NULL;
	struct wlk_lock *l = NULL;
	char key[700];

	for (size_t i = 0; i < sizeof(raw) / sizeof(raw[0]); i++) {
		size_t n;

		/* The bucket's prefix (the empty name's, less its '/'). */
		t_etcd_name_prefix(key, sizeof(key), "");
		n = strlen(key) - 1;
		snprintf(key + n, sizeof(key) - n,
			 "%s/1x-0000000000000000-0000000000000001", raw[i]);
		t_etcd_post("/v3/kv/put", key, "value", "x 1 c");
		cr_assert_eq(wlk_query(m, &s), -EPROTO, "%s: a name", raw[i]);
		T_ASSERT_RC(wlk_acquire(m, "A", 1, &ia, &l), 0);
		cr_assert_not_null(l, "%s: A is taken", raw[i]);
		T_ASSERT_RC(wlk_release(l), 0);
		t_etcd_post("/v3/kv/deleterange", key, NULL, NULL);
	}
	T_ASSERT_RC(wlk_query(m, &s), 0);
	wlk_snapshot_free(s);
}
