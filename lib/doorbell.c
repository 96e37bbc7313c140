/* SPDX-License-Identifier: MIT */
/*
 * doorbell.c - waking an event loop in another process.
 *
 * A manager used asynchronously owns a datagram socket bound to an address
 * in the abstract namespace, "\0wlk<layout>-<uid>-<64-bit random hex>",
 * and publishes the random part in its client slot. Whoever changes one of
 * its requests sends it a one-byte datagram after releasing the segment
 * mutex: one system call, no file to clean up (the address disappears with
 * the socket, also when the process dies), no SIGPIPE, and a full queue
 * (EAGAIN) or a vanished owner (ECONNREFUSED) are harmless. The byte means
 * nothing; the owner re-reads the segment.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"

#define BIND_TRIES 8
#define DRAIN_BATCH 32

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int sender = -1; /* an unbound socket to send from */

static void sender_open(void)
{
	sender = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

static socklen_t bell_addr(uint64_t id, struct sockaddr_un *a)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1,
		     "wlk%u-%u-%016llx", WLK_LAYOUT_VERSION,
		     (unsigned int)geteuid(), (unsigned long long)id);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)n);
}

/*
 * wlk__bell_open() - create a doorbell. Return: the socket (non-blocking,
 * close-on-exec) with *@id its address, or a negative errno value.
 */
int wlk__bell_open(uint64_t *id)
{
	for (int i = 0; i < BIND_TRIES; i++) {
		struct sockaddr_un a;
		socklen_t len;
		int fd;

		if (getrandom(id, sizeof(*id), 0) != (ssize_t)sizeof(*id))
			return wlk__errno(errno);
		if (!*id)
			continue;
		fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    0);
		if (fd < 0)
			return wlk__errno(errno);
		len = bell_addr(*id, &a);
		if (bind(fd, (struct sockaddr *)&a, len) == 0)
			return fd;
		close(fd);
		if (errno != EADDRINUSE)
			return wlk__errno(errno);
	}
	return -EADDRINUSE;
}

/* Ring a doorbell; any failure means nobody needs the news. */
void wlk__bell_ring(uint64_t id)
{
	struct sockaddr_un a;
	socklen_t len = bell_addr(id, &a);
	char byte = 0;

	pthread_once(&once, sender_open);
	if (sender >= 0)
		(void)sendto(sender, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
			     (struct sockaddr *)&a, len);
}

/*
 * Empty a doorbell's queue, so that it polls readable only on news: one
 * system call for up to DRAIN_BATCH rings (fewer than asked means empty).
 */
void wlk__bell_drain(int fd)
{
	char buf[DRAIN_BATCH];
	struct iovec iov[DRAIN_BATCH];
	struct mmsghdr msg[DRAIN_BATCH];

	memset(msg, 0, sizeof(msg));
	for (int i = 0; i < DRAIN_BATCH; i++) {
		iov[i] = (struct iovec){&buf[i], 1};
		msg[i].msg_hdr.msg_iov = &iov[i];
		msg[i].msg_hdr.msg_iovlen = 1;
	}
	while (recvmmsg(fd, msg, DRAIN_BATCH, MSG_DONTWAIT, NULL) ==
	       DRAIN_BATCH)
		;
}
