/* SPDX-License-Identifier: MIT */
/*
 * resend.c - a release whose delete is sent twice (weblocks.h, ETCD
 * ENGINE): the first reaches the cluster and applies, its reply is lost,
 * and the client tries the next member, whose delete finds nothing.
 *
 * The manager under test reaches the cluster through a proxy in the test
 * that stands for its first member: it forwards bytes both ways, except
 * that, once armed, it forwards the next /v3/kv/deleterange request,
 * waits for the start of the reply (the delete has applied) and closes
 * both sides instead of passing it on. It can also mute the manager's
 * watch stream, so that a steal is not seen before the release.
 *
 *  - A lock released so: 0, not WLK_ESTOLEN, and the name is free.
 *  - A lock stolen by another process, then released so: WLK_ESTOLEN.
 *  - A lock whose lease the cluster revoked (as it ends an expired one),
 *    unseen by the manager, then released: its delete finds nothing, and
 *    only the lease's death tells it from a resend: WLK_ESTOLEN.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common.h"

/* A proxied connection's reads. */
#define CHUNK 65536

struct proxy {
	int fd;                  /* listening */
	struct sockaddr_in up;   /* the member it stands for */
	atomic_int drop_armed;   /* drop the next delete's reply */
	atomic_int dropped;      /* replies dropped */
	atomic_int mute_watch;   /* discard what watch streams carry */
	atomic_llong lease;      /* the last lease a put named, or 0 */
	pthread_t t;
	char backend[512];       /* the proxy, then the real members */
};

struct pipe2 {
	struct proxy *p;
	int c, u; /* client, upstream */
};

static bool has(const char *b, size_t n, const char *s)
{
	return memmem(b, n, s, strlen(s)) != NULL;
}

/* The lease of a put in a request's bytes ("lease":"<decimal>"). */
static void note_lease(struct proxy *p, const char *b, size_t n)
{
	static const char tag[] = "\"lease\":\"";
	const char *at = memmem(b, n, tag, strlen(tag));
	long long v = 0;

	if (!at)
		return;
	for (at += strlen(tag); at < b + n && *at >= '0' && *at <= '9'; at++)
		v = v * 10 + (*at - '0');
	if (at < b + n && *at == '"' && v > 0)
		atomic_store(&p->lease, v);
}

/* Pump one connection until either side closes. */
static void *pump(void *arg)
{
	struct pipe2 *x = arg;
	struct proxy *p = x->p;
	char *buf = malloc(CHUNK);
	bool watch = false, dropping = false;

	while (buf) {
		struct pollfd f[2] = { { x->c, POLLIN, 0 },
				       { x->u, POLLIN, 0 } };
		ssize_t n;

		if (poll(f, 2, -1) < 0)
			break;
		if (f[0].revents) {
			n = read(x->c, buf, CHUNK);
			if (n <= 0)
				break;
			watch |= has(buf, (size_t)n, "/v3/watch");
			note_lease(p, buf, (size_t)n);
			if (has(buf, (size_t)n, "/v3/kv/deleterange")) {
				int one = 1;

				dropping |= atomic_compare_exchange_strong(
					&p->drop_armed, &one, 0);
			}
			if (t_put(x->u, buf, (size_t)n))
				break;
		}
		if (f[1].revents) {
			n = read(x->u, buf, CHUNK);
			if (n <= 0)
				break;
			if (dropping) {
				/* The delete applied; its reply is lost. */
				atomic_fetch_add(&p->dropped, 1);
				break;
			}
			if (watch && atomic_load(&p->mute_watch))
				continue;
			if (t_put(x->c, buf, (size_t)n))
				break;
		}
	}
	close(x->c);
	close(x->u);
	free(buf);
	free(x);
	return NULL;
}

static void *accept_main(void *arg)
{
	struct proxy *p = arg;
	int c;

	while ((c = accept(p->fd, NULL, NULL)) >= 0) {
		struct pipe2 *x = malloc(sizeof(*x));
		pthread_t t;

		if (!x) {
			close(c);
			continue;
		}
		x->p = p;
		x->c = c;
		x->u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (x->u < 0 || connect(x->u, (struct sockaddr *)&p->up,
					sizeof(p->up)) ||
		    pthread_create(&t, NULL, pump, x)) {
			close(c);
			if (x->u >= 0)
				close(x->u);
			free(x);
			continue;
		}
		pthread_detach(t);
	}
	return NULL;
}

/* A proxy for the first member of WEBLOCKS_BACKEND; p->backend names it
 * first, then the members. */
static void proxy_start(struct proxy *p)
{
	const char *b = getenv("WEBLOCKS_BACKEND");
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int port;

	cr_assert(b && sscanf(b, "etcd://127.0.0.1:%d", &port) == 1,
		  "not run by tests/etcd/check.sh");
	memset(p, 0, sizeof(*p));
	p->up = a;
	p->up.sin_port = htons((uint16_t)port);
	p->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(p->fd, 0);
	cr_assert_eq(bind(p->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(p->fd, 16), 0);
	cr_assert_eq(getsockname(p->fd, (struct sockaddr *)&a, &len), 0);
	snprintf(p->backend, sizeof(p->backend), "etcd://127.0.0.1:%d,%s",
		 ntohs(a.sin_port), b + strlen("etcd://"));
	cr_assert_eq(pthread_create(&p->t, NULL, accept_main, p), 0);
}

/* Stop accepting; the pumps end with their connections. */
static void proxy_stop(struct proxy *p)
{
	shutdown(p->fd, SHUT_RDWR);
	close(p->fd);
	pthread_join(p->t, NULL);
}

/* A manager through the proxy, closed by the test (before the proxy
 * stops), not by the fixture. */
static struct wlk_manager *open_via(struct proxy *p)
{
	struct wlk_manager_options o = { .size = sizeof(o),
					 .backend = p->backend };
	struct wlk_manager *m = NULL;

	T_ASSERT_RC(wlk_manager_open(t_origin, &o, &m), 0);
	return m;
}

Test(resend, a_release_resent_after_it_applied_is_not_a_steal, T_FIX,
     .timeout = 60)
{
	static struct proxy p;
	struct wlk_manager *m, *other;
	struct wlk_options o = { .size = sizeof(o), .if_available = true };
	struct wlk_lock *l = NULL, *l2 = NULL;

	proxy_start(&p);
	m = open_via(&p);
	other = t_open();
	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	atomic_store(&p.drop_armed, 1);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(atomic_load(&p.dropped), 1, "no reply was dropped");
	/* It did let go. */
	T_ASSERT_RC(wlk_acquire(other, "r", 1, &o, &l2), 0);
	cr_assert_not_null(l2);
	T_ASSERT_RC(wlk_release(l2), 0);
	wlk_manager_close(m);
	proxy_stop(&p);
}

/* In a child: steal "r" (from the test's manager) and let it go. */
static int stealer(void *arg)
{
	struct wlk_options o = { .size = sizeof(o), .steal = true };
	struct wlk_manager *m;
	struct wlk_lock *l = NULL;

	(void)arg;
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 1);
	T_CHILD_CHECK(wlk_acquire(m, "r", 1, &o, &l) == 0, 2);
	T_CHILD_CHECK(wlk_release(l) == 0, 3);
	wlk_manager_close(m);
	return 0;
}

Test(resend, a_release_resent_after_a_steal_is_a_steal, T_FIX,
     .timeout = 60)
{
	static struct proxy p;
	struct wlk_manager *m;
	struct wlk_lock *l = NULL;

	proxy_start(&p);
	m = open_via(&p);
	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	/* Unseen by the watch: only the release's own reading can tell. */
	atomic_store(&p.mute_watch, 1);
	cr_assert_eq(t_wait(t_fork(stealer, NULL), 30000), 0, "the stealer");
	cr_assert_not(wlk_lock_stolen(l), "the muted watch told");
	atomic_store(&p.drop_armed, 1);
	T_ASSERT_RC(wlk_release(l), WLK_ESTOLEN);
	cr_assert_eq(atomic_load(&p.dropped), 1, "no reply was dropped");
	wlk_manager_close(m);
	proxy_stop(&p);
}

/* Revoke lease @id on the cluster's first member (not the proxy), as the
 * cluster ends a lease that expired. */
static void lease_revoke(long long id)
{
	const char *b = getenv("WEBLOCKS_BACKEND");
	char member[256], cmd[512];
	size_t n;

	cr_assert(b && !strncmp(b, "etcd://", 7));
	b += strlen("etcd://");
	n = strcspn(b, ",");
	cr_assert_lt(n, sizeof(member));
	memcpy(member, b, n);
	member[n] = '\0';
	snprintf(cmd, sizeof(cmd),
		 "curl -sf -m 5 -o /dev/null http://%s/v3/lease/revoke "
		 "-d '{\"ID\":\"%lld\"}'",
		 member, id);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

Test(resend, a_release_after_the_lease_ended_unseen_is_a_steal, T_FIX,
     .timeout = 60)
{
	static struct proxy p;
	const char *ttl = getenv("WEBLOCKS_ETCD_TTL");
	char old[32] = "";
	struct wlk_manager *m, *other = t_open();
	struct wlk_lock *l = NULL;

	/* A long lease: its keepalive, which would find it revoked and
	 * tell the lock before its release, is not due during the test. */
	if (ttl)
		snprintf(old, sizeof(old), "%s", ttl);
	setenv("WEBLOCKS_ETCD_TTL", "60", 1);
	proxy_start(&p);
	m = open_via(&p);
	if (*old)
		setenv("WEBLOCKS_ETCD_TTL", old, 1);
	else
		unsetenv("WEBLOCKS_ETCD_TTL");
	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	cr_assert_gt(atomic_load(&p.lease), 0, "no put seen");
	/* Unseen by the watch: only the release's own reading can tell. */
	atomic_store(&p.mute_watch, 1);
	lease_revoke(atomic_load(&p.lease));
	cr_assert(t_wait_held(other, "r", 1, 0), "the lease kept the lock");
	cr_assert_not(wlk_lock_stolen(l), "the manager was told");
	T_ASSERT_RC(wlk_release(l), WLK_ESTOLEN);
	wlk_manager_close(m);
	proxy_stop(&p);
}
