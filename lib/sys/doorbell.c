/* SPDX-License-Identifier: MIT */
/*
 * doorbell.c - waking an event loop in another process.
 *
 * A manager used asynchronously owns a doorbell: an eventfd, which is the
 * descriptor its event loop polls (wlk_manager_fd()), and, as a fallback, a
 * datagram socket bound to an address in the abstract namespace,
 * "\0wlk<layout>-<uid>-<64-bit random hex>". Its client slot publishes the
 * eventfd (pid, fd number, and a key: the eventfd-id the kernel shows in
 * fdinfo) and the socket's random part. Whoever changes one of its requests
 * rings after releasing the segment mutex: the first time, it takes a copy
 * of the eventfd from the owner's process with pidfd_getfd(2), checks its
 * key and keeps it; after that a ring is one write(2). That wakes the loop
 * as directly as a futex wake wakes a thread: no pipe buffer, and no epoll
 * instance in between. Where the copy cannot be had (pidfd_getfd needs
 * ptrace-attach permission: another user, a non-dumpable process, a
 * kernel before 5.6) the ring is a datagram instead, counted in the slot
 * (bell_dgrams) before it is sent, so that the owner reads its socket only
 * while some are owed; the socket sits in the manager's inner epoll
 * instance, which the process's watcher thread (watcher.c) turns into a
 * ring of the eventfd.
 *
 * A ring means nothing in itself; the owner re-reads the segment. A
 * vanished owner is harmless: the copy keeps its eventfd alive, unread, and
 * is dropped from the cache as it cycles. Everything read from the segment
 * here only chooses where a ring goes; the key check keeps it away from any
 * other descriptor.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "sys.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int sender = -1; /* an unbound socket to send from */
static unsigned int euid;

/* Doorbells of other managers: (pid, fd, key) -> our descriptor, -1 if
 * it could not be had (rung by datagram). */
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uint32_t pid, fd;
	uint64_t key;
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
 * The eventfd-id the kernel shows for @fd in /proc/self/fdinfo, + 1; 0 if
 * it shows none (not an eventfd, or a kernel without the field).
 */
static uint64_t eventfd_key(int fd)
{
	char path[64], line[128];
	unsigned long long id;
	uint64_t key = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (!key && fgets(line, sizeof(line), f))
		if (sscanf(line, "eventfd-id: %llu", &id) == 1)
			key = (uint64_t)id + 1;
	fclose(f);
	return key;
}

/*
 * wlk__bell_open() - create a doorbell: @bl's eventfd (non-blocking,
 * close-on-exec) and socket. Return: 0, or a negative errno value with
 * nothing left open.
 */
int wlk__bell_open(struct wlk__bell *bl)
{
	bl->efd = -1;
	bl->sock = sock_open(&bl->id);
	if (bl->sock < 0)
		return bl->sock;
	bl->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (bl->efd < 0) {
		int rc = wlk__errno(errno);

		close(bl->sock);
		bl->sock = -1;
		return rc;
	}
	/* Without a key granters cannot check the descriptor they get:
	 * they ring the socket instead. */
	bl->key = eventfd_key(bl->efd);
	return 0;
}

void wlk__bell_close(struct wlk__bell *bl)
{
	if (bl->sock >= 0)
		close(bl->sock);
	if (bl->efd >= 0)
		close(bl->efd);
	bl->sock = bl->efd = -1;
}

/* Ring our own doorbell. */
void wlk__bell_ring_self(const struct wlk__bell *bl)
{
	uint64_t one = 1;

	(void)!write(bl->efd, &one, sizeof(one));
}

/* A descriptor for the doorbell eventfd @t names, taken from its process
 * (pidfd_getfd(2)), if it is that eventfd; -1 if not. */
static int eventfd_get(const struct wlk__bell_to *t)
{
	int pfd = (int)syscall(SYS_pidfd_open, (pid_t)t->pid, 0), fd;

	if (pfd < 0)
		return -1;
	fd = (int)syscall(SYS_pidfd_getfd, pfd, (int)t->fd, 0);
	close(pfd);
	if (fd < 0)
		return -1;
	/* pidfd_getfd() does not set close-on-exec on what it returns. */
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) != 0 || eventfd_key(fd) != t->key) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Ring by eventfd. Return: false if it cannot be had (or the cache is
 * busy, as it may be in a fork child): ring by datagram instead. */
static bool eventfd_ring(const struct wlk__bell_to *t)
{
	uint64_t one = 1;
	int ofd = -1;
	unsigned int i;

	if (!t->pid || !t->key || pthread_mutex_trylock(&cache_mu))
		return false;
	for (i = 0; i < BELL_CACHE; i++)
		if (cache[i].used && cache[i].pid == t->pid &&
		    cache[i].fd == t->fd && cache[i].key == t->key)
			break;
	if (i == BELL_CACHE) {
		i = cache_next++ % BELL_CACHE;
		if (cache[i].used && cache[i].ofd >= 0)
			close(cache[i].ofd);
		cache[i].pid = t->pid;
		cache[i].fd = t->fd;
		cache[i].key = t->key;
		cache[i].ofd = eventfd_get(t);
		cache[i].used = true;
	}
	ofd = cache[i].ofd;
	if (ofd >= 0)
		(void)!write(ofd, &one, sizeof(one));
	pthread_mutex_unlock(&cache_mu);
	return ofd >= 0;
}

/*
 * wlk__bell_ring() - ring the doorbell @t: by its eventfd, or else by
 * datagram, counted in *@owed (the client slot's count of datagrams owed,
 * NULL if the client is gone) before it can land; any failure means
 * nobody needs the news.
 */
void wlk__bell_ring(const struct wlk__bell_to *t, uint32_t *owed)
{
	struct sockaddr_un a;
	socklen_t len;
	char byte = 0;

	if (eventfd_ring(t))
		return;
	pthread_once(&once, sender_open);
	if (sender < 0 || !t->id)
		return;
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
 * news: the eventfd with one read(2), and the socket only while
 * datagrams are owed (*@owed, the client slot's count).
 */
void wlk__bell_drain(const struct wlk__bell *bl, uint32_t *owed)
{
	char buf[DRAIN_BATCH];
	struct iovec iov[DRAIN_BATCH];
	struct mmsghdr msg[DRAIN_BATCH];
	uint64_t count;
	int n;

	(void)!read(bl->efd, &count, sizeof(count));
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
