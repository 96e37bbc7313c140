/* SPDX-License-Identifier: MIT */
/*
 * broker.c - the broker baseline: a tiny lock server process, as browsers
 * run one, reached over AF_UNIX seqpacket sockets. One request and one
 * reply per acquire and per release; FIFO queue per name, shared and
 * exclusive modes, so it schedules like weblocks does.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "locks.h"

#define QCAP 16 /* at most one request per client is ever queued */

enum { OP_ACQUIRE = 1, OP_RELEASE = 2 };

struct msg {
	uint8_t op;
	uint8_t shared;
	uint16_t name;
};

struct bname {
	int excl, shared;
	int qhead, qlen;
	struct {
		int client;
		bool shared;
	} q[QCAP];
};

static void reply(int fd, char c)
{
	while (send(fd, &c, 1, 0) < 0 && errno == EINTR)
		;
}

/* Grant from the head of the queue while the head is grantable. */
static void run_queue(struct bname *n, const int *fds)
{
	while (n->qlen) {
		int c = n->q[n->qhead].client;
		bool sh = n->q[n->qhead].shared;

		if (n->excl || (!sh && n->shared))
			return;
		n->qhead = (n->qhead + 1) % QCAP;
		n->qlen--;
		if (sh)
			n->shared++;
		else
			n->excl++;
		reply(fds[c], 'g');
	}
}

static int serve(struct broker *b)
{
	struct bname names[LK_NAMES] = {0};
	struct pollfd p[BROKER_MAX_CLIENTS];
	int open = b->n;

	for (int i = 0; i < b->n; i++)
		p[i] = (struct pollfd){.fd = b->server[i], .events = POLLIN};
	while (open > 0) {
		if (poll(p, (nfds_t)b->n, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		for (int i = 0; i < b->n; i++) {
			struct msg m;
			struct bname *n;
			ssize_t r;

			if (!p[i].revents)
				continue;
			r = recv(p[i].fd, &m, sizeof(m), 0);
			if (r <= 0) {
				p[i].fd = -1; /* client gone */
				open--;
				continue;
			}
			if (r != sizeof(m) || m.name >= LK_NAMES)
				return 2;
			n = &names[m.name];
			if (m.op == OP_ACQUIRE) {
				int t = (n->qhead + n->qlen++) % QCAP;

				n->q[t].client = i;
				n->q[t].shared = m.shared;
			} else if (n->excl) {
				n->excl--;
			} else if (n->shared) {
				n->shared--;
			}
			if (m.op == OP_RELEASE)
				reply(p[i].fd, 'r');
			run_queue(n, b->server);
		}
	}
	return 0;
}

void broker_start(struct broker *b, int nclients, int cpu)
{
	pid_t pid;

	b->n = nclients;
	for (int i = 0; i < nclients; i++) {
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) < 0)
			die("socketpair: %s", strerror(errno));
		b->fds[i] = sv[0];
		b->server[i] = sv[1];
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		pin_cpu(cpu);
		/* Keep only our server ends: a client end inherited from
		 * another broker would keep that broker from seeing EOF. */
		for (int fd = 3; fd < 1024; fd++) {
			bool mine = false;

			for (int i = 0; i < nclients; i++)
				mine |= fd == b->server[i];
			if (!mine)
				close(fd);
		}
		_exit(serve(b));
	}
	b->pid = pid;
	for (int i = 0; i < nclients; i++)
		close(b->server[i]);
}

void broker_stop(struct broker *b)
{
	for (int i = 0; i < b->n; i++)
		close(b->fds[i]);
	reap(b->pid, "broker");
}

static int call(int fd, struct msg m, char want)
{
	char c;

	if (send(fd, &m, sizeof(m), 0) != sizeof(m))
		return -1;
	if (recv(fd, &c, 1, 0) != 1 || c != want)
		return -1;
	return 0;
}

int broker_acquire(int fd, int name, bool shared)
{
	return call(fd, (struct msg){OP_ACQUIRE, shared, (uint16_t)name}, 'g');
}

int broker_release(int fd, int name)
{
	return call(fd, (struct msg){OP_RELEASE, 0, (uint16_t)name}, 'r');
}
