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
 * TIMEOUT_MS passed. Exit status: 0 done or told to quit, 1 the lease
 * could not be revoked (it then ends at its expiry, as without a guard).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

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
#define CONNECT_MS 250L
#define ATTEMPT_MS 1000L
/* A pause after every member failed once, before the next round. */
#define ROUND_PAUSE_MS 50
/* etcd's reply when the lease is gone already: nothing left to do. */
#define LEASE_GONE "lease not found"
#define REPLY_MAX 4096

struct reply {
	char buf[REPLY_MAX];
	size_t len;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static size_t on_data(char *p, size_t size, size_t nmemb, void *arg)
{
	struct reply *r = arg;
	size_t n = size * nmemb, room = sizeof(r->buf) - 1 - r->len;

	memcpy(r->buf + r->len, p, n < room ? n : room);
	r->len += n < room ? n : room;
	r->buf[r->len] = '\0';
	return n;
}

/* One POST of @body to @url's revoke: true if the lease is gone now. */
static bool revoke_at(CURL *h, const char *url, const char *body,
		      long budget_ms)
{
	struct curl_slist hdr = { .data = (char *)"Content-Type: "
					       "application/json" };
	struct reply r = { .len = 0 };
	char full[512];
	long code = 0;

	snprintf(full, sizeof(full), "%s/v3/lease/revoke", url);
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, full);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, &hdr);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 budget_ms < CONNECT_MS ? budget_ms : CONNECT_MS);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
			 budget_ms < ATTEMPT_MS ? budget_ms : ATTEMPT_MS);
	if (curl_easy_perform(h) != CURLE_OK)
		return false;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	return code == 200 || strstr(r.buf, LEASE_GONE) != NULL;
}

/* Revoke @lease on a member of @url[0..n), within @timeout_ms. */
static int revoke_lease(uint64_t lease, uint64_t timeout_ms, char **url,
			int n)
{
	uint64_t deadline = now_ms() + timeout_ms;
	CURL *h;
	char body[64];

	if (curl_global_init(CURL_GLOBAL_NOTHING) || !(h = curl_easy_init()))
		return EXIT_UNREVOKED;
	snprintf(body, sizeof(body), "{\"ID\":\"%" PRIu64 "\"}", lease);
	for (;;) {
		for (int i = 0; i < n; i++) {
			uint64_t t = now_ms();

			if (t >= deadline)
				goto out;
			if (revoke_at(h, url[i], body,
				      (long)(deadline - t))) {
				curl_easy_cleanup(h);
				return EXIT_DONE;
			}
		}
		poll(NULL, 0, ROUND_PAUSE_MS);
	}
out:
	curl_easy_cleanup(h);
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
	/* Descriptors the program left open without close-on-exec are not
	 * ours to keep open (a listening socket, a pipe's write end). */
	(void)close_range(FD_SOCK + 1, ~0U, 0);
	signal(SIGPIPE, SIG_IGN);
	for (;;) {
		int d = drain(&lease);

		if (d > 0)
			return EXIT_DONE;
		if (d < 0 || pf[0].revents)
			break;
		while (poll(pf, 2, -1) < 0)
			if (errno != EINTR)
				goto gone; /* cannot watch: act now */
		/* POLLNVAL, POLLERR, POLLHUP on either: gone, too. */
	}
gone:
	return revoke_lease(lease, timeout_ms, argv + 4, argc - 4);
}
