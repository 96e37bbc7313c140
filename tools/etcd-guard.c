/* SPDX-License-Identifier: MIT */
/*
 * etcd-guard.c - the etcd engine's guard of one process (installed in
 * $(pkglibexecdir), spawned by libweblocks, lib/etcd/guard.c; not for
 * people to run): revoke the process's lease as soon as the process is
 * gone, so that its locks pass on in a round trip, not at the lease's
 * expiry (up to its TTL and etcd's 500 ms lessor scan later).
 *
 * usage: etcd-guard wlk-guard-1 LEASE TIMEOUT_MS URL...
 *   with descriptor 3 a pidfd of the process, and 4 its socket pair's
 *   end (SOCK_SEQPACKET). On 4 come 8-byte messages: a new lease to
 *   guard, or 0 to quit without a revoke (the process closed its last
 *   manager and revoked the lease itself). The process is gone when 3 is
 *   readable (every thread exited) or 4 reads end of file (the process
 *   exited or exec'd: its end is close-on-exec).
 *
 * It forks at once, and its first process exits: the guard proper is
 * then nobody's child but init's (or a subreaper's). Exit status of that
 * first process: 0 the guard runs, 2 bad usage, 3 no fork.
 *
 * Once the process is gone: POST /v3/lease/revoke to the members in
 * turn, until one answers (the lease revoked, or already gone) or
 * TIMEOUT_MS passed; HTTP/1.1 on a plain socket, with libc alone. Exit
 * status: 0 done or told to quit, 1 the lease could not be revoked (it
 * then ends at its expiry, as without a guard).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* What lib/etcd/guard.c hands over: the protocol's name, the two
 * descriptors, the message that says quit. */
#define PROTO "wlk-guard-1"
#define FD_PIDFD 3
#define FD_SOCK 4
#define MSG_QUIT UINT64_C(0)

#define EXIT_DONE 0
#define EXIT_UNREVOKED 1
#define EXIT_USAGE 2
#define EXIT_NO_FORK 3

/* One attempt on one member: its connection and its whole reply. */
#define CONNECT_MS 250
#define ATTEMPT_MS 1000
/* A pause after every member failed once, before the next round. */
#define ROUND_PAUSE_MS 50
/* The members' URLs, as the library hands them: "http://host:port". */
#define SCHEME "http://"
#define HOSTPORT_MAX 300
/* The call, and etcd's reply when the lease is gone already. */
#define REVOKE_PATH "/v3/lease/revoke"
#define LEASE_GONE "lease not found"
#define REQUEST_MAX 512
#define REPLY_MAX 4096

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* Wait for @events on @fd until @deadline (ms): true if they came. */
static bool wait_fd(int fd, short events, uint64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };

	for (;;) {
		uint64_t t = now_ms();
		int rc;

		if (t >= deadline)
			return false;
		rc = poll(&p, 1, (int)(deadline - t));
		if (rc > 0)
			return true;
		if (rc == 0 || errno != EINTR)
			return false;
	}
}

/* A TCP connection to @ai made before @deadline, or -1. */
static int dial(const struct addrinfo *ai, uint64_t deadline)
{
	int fd = socket(ai->ai_family,
			ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
			ai->ai_protocol);
	int err = 0;
	socklen_t len = sizeof(err);

	if (fd < 0)
		return -1;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return fd;
	if (errno == EINPROGRESS && wait_fd(fd, POLLOUT, deadline) &&
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && !err)
		return fd;
	close(fd);
	return -1;
}

static bool send_all(int fd, const char *p, size_t n, uint64_t deadline)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		if (k > 0) {
			p += k;
			n -= (size_t)k;
		} else if (k < 0 && errno == EINTR) {
			continue;
		} else if (k < 0 && errno == EAGAIN &&
			   wait_fd(fd, POLLOUT, deadline)) {
			continue;
		} else {
			return false;
		}
	}
	return true;
}

/* The reply on @fd into @buf (NUL-terminated, @cap bytes at most), read
 * until the server closes (the request asks it to), @buf is full, or
 * @deadline. */
static void recv_reply(int fd, char *buf, size_t cap, uint64_t deadline)
{
	size_t len = 0;

	while (len < cap - 1) {
		ssize_t k = recv(fd, buf + len, cap - 1 - len, 0);

		if (k > 0)
			len += (size_t)k;
		else if (k < 0 && errno == EINTR)
			continue;
		else if (k < 0 && errno == EAGAIN &&
			 wait_fd(fd, POLLIN, deadline))
			continue;
		else
			break; /* the end, or no more in time: judge what came */
	}
	buf[len] = '\0';
}

/* Whether @reply says the lease is gone: revoked now (200), or before. */
static bool gone(const char *reply)
{
	/* The status line: "HTTP/1.x 200 OK". */
	if (!strncmp(reply, "HTTP/1.", 7) && reply[7] &&
	    !strncmp(reply + 8, " 200 ", 5))
		return true;
	return strstr(reply, LEASE_GONE) != NULL;
}

/* One POST of @body to the revoke of member @url ("http://host:port"),
 * on each of its addresses in turn, until @deadline: true if the lease
 * is gone now. Plain sockets, not libcurl: the guard starts with every
 * process's first manager of a cluster, and libc alone loads fast. */
static bool revoke_at(const char *url, const char *body, uint64_t deadline)
{
	const char *hp = url + strlen(SCHEME), *colon = strrchr(hp, ':');
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai, *a;
	char host[HOSTPORT_MAX], req[REQUEST_MAX], reply[REPLY_MAX];
	size_t hl = colon ? (size_t)(colon - hp) : 0;
	bool done = false;
	int n;

	if (strncmp(url, SCHEME, strlen(SCHEME)) != 0 || hl == 0 ||
	    hl >= sizeof(host))
		return false;
	/* An IPv6 literal comes in brackets, which the lookup does not
	 * want. */
	if (hp[0] == '[' && hl >= 2 && hp[hl - 1] == ']')
		snprintf(host, sizeof(host), "%.*s", (int)hl - 2, hp + 1);
	else
		snprintf(host, sizeof(host), "%.*s", (int)hl, hp);
	n = snprintf(req, sizeof(req),
		     "POST " REVOKE_PATH " HTTP/1.1\r\nHost: %s\r\n"
		     "Content-Type: application/json\r\n"
		     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
		     hp, strlen(body), body);
	if (n < 0 || (size_t)n >= sizeof(req) ||
	    getaddrinfo(host, colon + 1, &hints, &ai) != 0)
		return false;
	for (a = ai; a && !done; a = a->ai_next) {
		uint64_t until = min_u64(deadline, now_ms() + ATTEMPT_MS);
		int fd = dial(a, min_u64(until, now_ms() + CONNECT_MS));

		if (fd < 0)
			continue;
		if (send_all(fd, req, (size_t)n, until)) {
			recv_reply(fd, reply, sizeof(reply), until);
			done = gone(reply);
		}
		close(fd);
	}
	freeaddrinfo(ai);
	return done;
}

/* Revoke @lease on a member of @url[0..n), within @timeout_ms. */
static int revoke_lease(uint64_t lease, uint64_t timeout_ms, char **url,
			int n)
{
	uint64_t deadline = now_ms() + timeout_ms;
	char body[64];

	snprintf(body, sizeof(body), "{\"ID\":\"%" PRIu64 "\"}", lease);
	while (now_ms() < deadline) {
		for (int i = 0; i < n && now_ms() < deadline; i++)
			if (revoke_at(url[i], body, deadline))
				return EXIT_DONE;
		poll(NULL, 0, ROUND_PAUSE_MS);
	}
	fprintf(stderr, "etcd-guard: lease %" PRIu64 " not revoked within "
		"%" PRIu64 " ms; it ends at its expiry\n", lease, timeout_ms);
	return EXIT_UNREVOKED;
}

/* The messages waiting on the socket: the last lease into @lease. 1: told
 * to quit; -1: the process is gone (end of file); 0: neither. */
static int drain(uint64_t *lease)
{
	for (;;) {
		uint64_t msg;
		ssize_t n = recv(FD_SOCK, &msg, sizeof(msg), MSG_DONTWAIT);

		if (n == (ssize_t)sizeof(msg)) {
			if (msg == MSG_QUIT)
				return 1;
			*lease = msg;
		} else if (n == 0) {
			return -1;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && errno == EAGAIN) {
			return 0;
		} else if (n < 0) {
			return -1; /* the pair is broken: nobody can tell us */
		} /* else a message of another size: not ours, skipped */
	}
}

static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 10);
	return !errno && *s && !*end && *v;
}

int main(int argc, char **argv)
{
	struct pollfd pf[2] = { { .fd = FD_PIDFD, .events = POLLIN },
				{ .fd = FD_SOCK, .events = POLLIN } };
	uint64_t lease, timeout_ms;

	if (argc < 5 || strcmp(argv[1], PROTO) != 0 ||
	    !parse_u64(argv[2], &lease) || !parse_u64(argv[3], &timeout_ms)) {
		fprintf(stderr, "usage: etcd-guard %s LEASE TIMEOUT_MS URL..."
			"\n(spawned by libweblocks, not for people to run)\n",
			PROTO);
		return EXIT_USAGE;
	}
	if (fcntl(FD_PIDFD, F_GETFD) < 0 || fcntl(FD_SOCK, F_GETFD) < 0) {
		fprintf(stderr, "etcd-guard: descriptors %d and %d are not "
			"open: spawned by hand?\n", FD_PIDFD, FD_SOCK);
		return EXIT_USAGE;
	}
	/* Descriptors the program left open without close-on-exec are not
	 * ours to keep open (a listening socket, a pipe's write end). */
	(void)close_range(FD_SOCK + 1, ~0U, 0);
	/* Not the process's child: it must not wait for us, nor reap us,
	 * nor see us in a wait for all its children. Our parent, the
	 * process's child for a moment, exits at once; it reaps that. */
	switch (fork()) {
	case -1:
		return EXIT_NO_FORK;
	case 0:
		break;
	default:
		_exit(EXIT_DONE);
	}
	signal(SIGPIPE, SIG_IGN);
	/* The process is gone when the pidfd says so (any event on it) or
	 * the pair ends (drain()); a poll that cannot watch acts now. */
	for (;;) {
		int d = drain(&lease);

		if (d > 0)
			return EXIT_DONE;
		if (d < 0 || pf[0].revents)
			break;
		if (poll(pf, 2, -1) < 0 && errno != EINTR)
			break;
	}
	return revoke_lease(lease, timeout_ms, argv + 4, argc - 4);
}
