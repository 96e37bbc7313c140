/* SPDX-License-Identifier: MIT */
/*
 * guard.c - an agent's guard: a small process (tools/etcd-guard.c) that
 * revokes the agent's lease as soon as the agent's process is gone.
 *
 * Without it, a dead process's locks pass on when etcd expires its lease:
 * up to a TTL after the death, plus the 500 ms of etcd's lessor scan
 * (weblocks.h, ETCD ENGINE). The process cannot revoke its lease once it
 * is dead, and a waiter cannot tell a dead holder from a slow one; a
 * process of its own on the same machine can: the kernel tells it.
 *
 * The agent spawns its guard when its lease is granted, handing it two
 * descriptors, its only link to us:
 *  - a pidfd of this process, readable once every thread of it exited
 *    (a SIGKILL, a crash, exit());
 *  - one end of a socket pair whose other end the agent keeps, close-
 *    on-exec: end of file when this process is gone or has exec'd
 *    (unless a fork child of it holds a copy: the pidfd still tells the
 *    death).
 * Down the pair go 8-byte messages (SOCK_SEQPACKET: never split, never
 * merged): a new lease (after a lost one), or WLK_ETCD_GUARD_QUIT at the
 * agent's stop, after which the guard exits without a word to the
 * cluster (the agent revoked the lease itself). A socket, not a pipe,
 * because send() takes MSG_NOSIGNAL: a guard that died (killed by hand,
 * by the OOM killer) must not bring SIGPIPE to the program.
 *
 * The guard is spawned with posix_spawn(): no fork handlers run, and
 * nothing of this process but those two descriptors (and the inherited
 * ones it closes first) reaches it. It runs in a session of its own, its
 * signals at their defaults, so that a terminal's ^C or a kill of the
 * process group spares it and it sees its process go. It forks at once
 * and the spawned process exits, which we reap here: the guard is not
 * our child, so a program's wait for all its children neither waits for
 * it nor reaps it. A spawn that fails is not an error: the locks then
 * pass on at the lease's expiry. A guard that dies is replaced at the
 * agent's next keepalive (wlk__etcd_guard_tend()), within TTL/3.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "etcd.h"

/* The guard's descriptors, where it finds them (tools/etcd-guard.c). */
#define GUARD_PIDFD 3
#define GUARD_SOCK 4
#define DEV_NULL "/dev/null"

extern char **environ;

/*
 * wlk__etcd_guard_init() - read once, in the thread that opens @a, which
 * program @a's guards are: the environment's (WLK_ETCD_GUARD_ENV), or
 * the installed one; a->guard_path NULL for none. Not read again when a
 * guard is replaced: the library thread must not read the environment
 * while the program may change it. Return: 0 or -ENOMEM.
 */
int wlk__etcd_guard_init(struct wlk__etcd_agent *a)
{
	const char *p = secure_getenv(WLK_ETCD_GUARD_ENV);

	if (!p || !*p)
		p = WLK_ETCD_GUARD_PATH;
	else if (!strcmp(p, WLK_ETCD_GUARD_OFF))
		p = NULL;
	a->guard_path = p ? strdup(p) : NULL;
	return p && !a->guard_path ? -ENOMEM : 0;
}

/* @fd moved to WLK_ETCD_GUARD_FD_MIN or above (close-on-exec), so that
 * the spawn's dup2() calls to GUARD_PIDFD and GUARD_SOCK cannot clobber
 * one another's source. */
static int high_fd(int fd)
{
	int h;

	if (fd >= WLK_ETCD_GUARD_FD_MIN)
		return fd;
	h = fcntl(fd, F_DUPFD_CLOEXEC, WLK_ETCD_GUARD_FD_MIN);
	close(fd);
	return h;
}

static int spawn(struct wlk__etcd_agent *a, const char *path, int pidfd,
		 int rfd, pid_t *pid)
{
	char lease[24], timeout[24];
	char *argv[4 + WLK_ETCD_MEMBERS_MAX + 1];
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	unsigned int n = 0;
	int rc;

	snprintf(lease, sizeof(lease), "%" PRIu64, uatomic_read(&a->lease));
	snprintf(timeout, sizeof(timeout), "%" PRIu64, a->conn.timeout_ms);
	argv[n++] = (char *)path;
	argv[n++] = (char *)WLK_ETCD_GUARD_PROTO;
	argv[n++] = lease;
	argv[n++] = timeout;
	for (unsigned int i = 0; i < a->conn.n_url; i++)
		argv[n++] = a->conn.url[i];
	argv[n] = NULL;
	sigemptyset(&none);
	sigfillset(&all);
	rc = posix_spawn_file_actions_init(&fa);
	if (rc)
		return -rc;
	rc = posix_spawnattr_init(&at);
	if (rc) {
		posix_spawn_file_actions_destroy(&fa);
		return -rc;
	}
	/* Its standard input and output are not ours to hold open (a
	 * shell's $(...) waits for the end of a pipe); standard error
	 * carries its one message, a revoke that failed. */
	rc = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, DEV_NULL,
					      O_RDONLY, 0);
	if (!rc)
		rc = posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO,
						      DEV_NULL, O_WRONLY, 0);
	if (!rc)
		rc = posix_spawn_file_actions_adddup2(&fa, pidfd, GUARD_PIDFD);
	if (!rc)
		rc = posix_spawn_file_actions_adddup2(&fa, rfd, GUARD_SOCK);
	if (!rc)
		rc = posix_spawnattr_setsigmask(&at, &none);
	if (!rc)
		rc = posix_spawnattr_setsigdefault(&at, &all);
	if (!rc)
		rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK |
						   POSIX_SPAWN_SETSIGDEF |
						   POSIX_SPAWN_SETSID);
	if (!rc)
		rc = posix_spawn(pid, path, &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	return -rc;
}

/* The spawned process, which exits once the guard forked: 0 if it says
 * so. A SIGCHLD handler of the program's may reap it first (ECHILD):
 * then the guard is taken to run. */
static int reap(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 0;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -ECHILD;
}

/*
 * wlk__etcd_guard_start() - spawn @a's guard for its current lease, unless
 * there is none (wlk__etcd_guard_init()). Return: 0 (a->guard_fd is then
 * our end of the pair, or -1 without a guard), or a negative errno; the
 * agent goes on without a guard either way.
 */
int wlk__etcd_guard_start(struct wlk__etcd_agent *a)
{
	const char *path = a->guard_path;
	int pidfd, p[2], rc;
	pid_t pid = 0;

	a->guard_fd = -1;
	if (!path)
		return 0;
	pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (pidfd < 0)
		return -errno;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p)) {
		rc = -errno;
		close(pidfd);
		return rc;
	}
	pidfd = high_fd(pidfd);
	p[0] = high_fd(p[0]);
	if (pidfd < 0 || p[0] < 0)
		rc = -EMFILE;
	else
		rc = spawn(a, path, pidfd, p[0], &pid);
	if (pidfd >= 0)
		close(pidfd);
	if (p[0] >= 0)
		close(p[0]);
	if (!rc)
		rc = reap(pid);
	if (rc) {
		close(p[1]);
		return rc;
	}
	a->guard_fd = p[1];
	return 0;
}

static void tell(struct wlk__etcd_agent *a, uint64_t msg)
{
	ssize_t n;

	/* EPIPE: the guard is gone; the lease then ends at its expiry. */
	do
		n = send(a->guard_fd, &msg, sizeof(msg), MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
}

/* wlk__etcd_guard_lease() - @a's lease is now @id: the guard revokes that
 * one if the process goes. Under a->lease_mu. */
void wlk__etcd_guard_lease(struct wlk__etcd_agent *a, uint64_t id)
{
	if (a->guard_fd >= 0)
		tell(a, id);
}

/*
 * wlk__etcd_guard_tend() - at a keepalive: a guard that died (killed by
 * hand, by the OOM killer) is replaced, for the current lease. It never
 * writes to the pair, so its end reads end of file exactly when it is
 * gone. Takes a->lease_mu.
 */
void wlk__etcd_guard_tend(struct wlk__etcd_agent *a)
{
	ssize_t n;
	char c;

	pthread_mutex_lock(&a->lease_mu);
	if (!a->dead && a->guard_fd >= 0) {
		n = recv(a->guard_fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			close(a->guard_fd);
			(void)wlk__etcd_guard_start(a);
		}
	}
	pthread_mutex_unlock(&a->lease_mu);
}

/* wlk__etcd_guard_stop() - after @a revoked its lease: its guard told to
 * quit (it exits at once; init reaps it). */
void wlk__etcd_guard_stop(struct wlk__etcd_agent *a)
{
	if (a->guard_fd < 0)
		return;
	tell(a, WLK_ETCD_GUARD_QUIT);
	close(a->guard_fd);
	a->guard_fd = -1;
}
