/* SPDX-License-Identifier: MIT */
/*
 * doorbell.c - waking an event loop in another process.
 *
 * A manager used asynchronously owns a doorbell: a pipe whose read end sits
 * in its epoll descriptor, and, as a fallback, a datagram socket bound to
 * an address in the abstract namespace, "\0wlk<layout>-<uid>-<64-bit random
 * hex>". Its client slot publishes the pipe's write end (pid, fd number,
 * inode) and the socket's random part. Whoever changes one of its requests
 * rings after releasing the segment mutex: the first time, it opens
 * /proc/<pid>/fd/<fd> (checking that it is that pipe) and keeps the
 * descriptor; after that a ring is one write(2) of one byte. A write to a
 * pipe costs about half of a datagram on both ends (allocation, address
 * lookup, skb freeing), which is what a handoff to an event loop is made
 * of. Where /proc cannot be opened (a non-dumpable process, say) the ring
 * is a datagram instead, counted in the slot (bell_dgrams) before it is
 * sent, so that the owner reads its socket only while some are owed: a
 * ringer that dies in between costs the owner an idle read per dispatch,
 * never a descriptor left readable.
 *
 * The byte means nothing; the owner re-reads the segment. A full pipe or
 * socket (EAGAIN) means the owner has news pending already; a vanished
 * owner is harmless: descriptors are opened O_RDWR, so writing to a pipe
 * whose owner is gone never raises SIGPIPE, and they are dropped from the
 * cache as it cycles. Everything read from the segment here only chooses
 * where a byte goes; the inode check keeps it away from any other file.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"

#define BIND_TRIES 8
#define DRAIN_BATCH 32
#define PIPE_DRAIN 256
/* Pipes of other processes' doorbells this process keeps open. */
#define BELL_CACHE 32

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int sender = -1; /* an unbound socket to send from */
static unsigned int euid;

/* Doorbell pipes of other managers: (pid, fd, inode) -> our descriptor,
 * -1 if it could not be opened (rung by datagram). */
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uint32_t pid, fd;
	uint64_t ino;
	int ofd;
	bool used;
} cache[BELL_CACHE];
static unsigned int cache_next;

static void sender_open(void)
{
	sender = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	euid = (unsigned int)geteuid();
}

static socklen_t bell_addr(uint64_t id, unsigned int uid,
			   struct sockaddr_un *a)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1,
		     "wlk%u-%u-%016llx", WLK_LAYOUT_VERSION, uid,
		     (unsigned long long)id);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)n);
}

static int sock_open(uint64_t *id)
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
		len = bell_addr(*id, (unsigned int)geteuid(), &a);
		if (bind(fd, (struct sockaddr *)&a, len) == 0)
			return fd;
		close(fd);
		if (errno != EADDRINUSE)
			return wlk__errno(errno);
	}
	return -EADDRINUSE;
}

/*
 * wlk__bell_open() - create a doorbell: @bl's pipe (both ends non-blocking,
 * close-on-exec) and socket. Return: 0, or a negative errno value with
 * nothing left open.
 */
int wlk__bell_open(struct wlk__bell *bl)
{
	int p[2];
	struct stat st;

	bl->rd = bl->wr = -1;
	bl->sock = sock_open(&bl->id);
	if (bl->sock < 0)
		return bl->sock;
	if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0 || fstat(p[1], &st) != 0) {
		int rc = wlk__errno(errno);

		close(bl->sock);
		bl->sock = -1;
		return rc;
	}
	bl->rd = p[0];
	bl->wr = p[1];
	bl->ino = (uint64_t)st.st_ino;
	return 0;
}

void wlk__bell_close(struct wlk__bell *bl)
{
	if (bl->sock >= 0)
		close(bl->sock);
	if (bl->rd >= 0)
		close(bl->rd);
	if (bl->wr >= 0)
		close(bl->wr);
	bl->sock = bl->rd = bl->wr = -1;
}

/* Ring our own doorbell. */
void wlk__bell_ring_self(const struct wlk__bell *bl)
{
	char byte = 0;

	(void)!write(bl->wr, &byte, 1);
}

/* Open the doorbell pipe @t names, if it is one; -1 if not. */
static int pipe_open(const struct wlk__bell_to *t)
{
	char path[64];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/fd/%u", (unsigned int)t->pid,
		 (unsigned int)t->fd);
	fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode) ||
	    (uint64_t)st.st_ino != t->ino) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Ring by pipe. Return: false if the pipe cannot be had (or the cache is
 * busy, as it may be in a fork child): ring by datagram instead. */
static bool pipe_ring(const struct wlk__bell_to *t)
{
	char byte = 0;
	int ofd = -1;
	unsigned int i;

	if (!t->pid || !t->ino || pthread_mutex_trylock(&cache_mu))
		return false;
	for (i = 0; i < BELL_CACHE; i++)
		if (cache[i].used && cache[i].pid == t->pid &&
		    cache[i].fd == t->fd && cache[i].ino == t->ino)
			break;
	if (i == BELL_CACHE) {
		i = cache_next++ % BELL_CACHE;
		if (cache[i].used && cache[i].ofd >= 0)
			close(cache[i].ofd);
		cache[i].pid = t->pid;
		cache[i].fd = t->fd;
		cache[i].ino = t->ino;
		cache[i].ofd = pipe_open(t);
		cache[i].used = true;
	}
	ofd = cache[i].ofd;
	if (ofd >= 0)
		(void)!write(ofd, &byte, 1);
	pthread_mutex_unlock(&cache_mu);
	return ofd >= 0;
}

/*
 * wlk__bell_ring() - ring the doorbell of client @t of @b: by its pipe, or
 * else by datagram; any failure means nobody needs the news.
 */
void wlk__bell_ring(struct wlk__bucket *b, const struct wlk__bell_to *t)
{
	struct sockaddr_un a;
	socklen_t len;
	uint32_t *owed;
	char byte = 0;

	if (pipe_ring(t))
		return;
	pthread_once(&once, sender_open);
	if (sender < 0 || !t->id)
		return;
	/* Count it for the owner before it can land. */
	owed = wlk__client_live(b, t->client, t->client_gen)
		       ? &wlk__client(b, t->client)->bell_dgrams
		       : NULL;
	if (owed)
		uatomic_inc(owed);
	len = bell_addr(t->id, euid, &a);
	if (sendto(sender, &byte, 1, MSG_DONTWAIT | MSG_NOSIGNAL,
		   (struct sockaddr *)&a, len) != 1 &&
	    owed)
		uatomic_dec(owed);
}

/*
 * wlk__bell_drain() - empty a doorbell, so that it polls readable only on
 * news: the pipe with one read(2) as a rule, and the socket only while
 * datagrams are owed (*@owed, the client slot's count).
 */
void wlk__bell_drain(const struct wlk__bell *bl, uint32_t *owed)
{
	char buf[PIPE_DRAIN];
	struct iovec iov[DRAIN_BATCH];
	struct mmsghdr msg[DRAIN_BATCH];
	int n;

	while (read(bl->rd, buf, sizeof(buf)) == (ssize_t)sizeof(buf))
		;
	if (!owed || !uatomic_read(owed))
		return;
	memset(msg, 0, sizeof(msg));
	for (int i = 0; i < DRAIN_BATCH; i++) {
		iov[i] = (struct iovec){&buf[i], 1};
		msg[i].msg_hdr.msg_iov = &iov[i];
		msg[i].msg_hdr.msg_iovlen = 1;
	}
	do {
		n = recvmmsg(bl->sock, msg, DRAIN_BATCH, MSG_DONTWAIT, NULL);
		if (n > 0)
			uatomic_sub(owed, (uint32_t)n);
	} while (n == DRAIN_BATCH);
}
