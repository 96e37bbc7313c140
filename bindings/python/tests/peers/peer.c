/* SPDX-License-Identifier: MIT */
/*
 * peer.c - the C peer of the peer protocol (PROTOCOL beside this file).
 *
 * One manager, driven from stdin; requests are asynchronous
 * (weblocks/async.h), so the process keeps reading commands while some
 * wait. One poll() loop on stdin and the manager's descriptor.
 */
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weblocks.h>
#include <weblocks/async.h>

#define MAX_HELD 64

struct held {
	char name[256];
	struct wlk_lock *lock;
};

static struct held held[MAX_HELD];

static void say_error(int err)
{
	printf("error %s %s\n", wlk_error_name(err), wlk_strerror(err));
	fflush(stdout);
}

/* Runs from wlk_manager_dispatch(): keep the lock until "release". */
static void granted(struct wlk_async *req, int status, struct wlk_lock *lock,
		    void *arg)
{
	struct held *h = arg;

	(void)req;
	if (status || !lock) {
		say_error(status);
		h->name[0] = '\0';
		return;
	}
	h->lock = lock;
	printf("granted %s %" PRIu64 "\n", h->name, wlk_lock_token(lock));
	fflush(stdout);
}

static void acquire(struct wlk_manager *m, const char *name, const char *mode)
{
	struct wlk_options o = WLK_OPTIONS_INIT;
	int i, err;

	for (i = 0; i < MAX_HELD && held[i].name[0]; i++)
		;
	if (i == MAX_HELD || strlen(name) >= sizeof(held[i].name)) {
		say_error(WLK_EFULL);
		return;
	}
	o.mode = strcmp(mode, "shared") == 0 ? WLK_SHARED : WLK_EXCLUSIVE;
	strcpy(held[i].name, name);
	err = wlk_request_async(m, name, WLK_NUL_TERMINATED, &o, granted,
				&held[i], NULL);
	if (err) {
		held[i].name[0] = '\0';
		say_error(err);
	}
}

static void release(const char *name)
{
	int i, err;

	for (i = 0; i < MAX_HELD; i++) {
		if (held[i].lock && strcmp(held[i].name, name) == 0) {
			err = wlk_release(held[i].lock);
			held[i].lock = NULL;
			held[i].name[0] = '\0';
			if (err)
				say_error(err);
			else
				printf("released %s\n", name);
			fflush(stdout);
			return;
		}
	}
	say_error(WLK_EINVAL);
}

static void query(struct wlk_manager *m)
{
	struct wlk_snapshot *s;
	const struct wlk_lock_info *e;
	size_t i;
	int err = wlk_query(m, &s);

	if (err) {
		say_error(err);
		return;
	}
	for (i = 0; (e = wlk_snapshot_held(s, i)); i++)
		printf("held %s %s %s\n", e->name,
		       e->mode == WLK_SHARED ? "shared" : "exclusive",
		       e->client_id);
	for (i = 0; (e = wlk_snapshot_pending(s, i)); i++)
		printf("pending %s %s %s\n", e->name,
		       e->mode == WLK_SHARED ? "shared" : "exclusive",
		       e->client_id);
	printf("end\n");
	fflush(stdout);
	wlk_snapshot_free(s);
}

/* One command line; returns 0 on "exit". */
static int command(struct wlk_manager *m, char *line)
{
	char *cmd = strtok(line, " \n"), *a = strtok(NULL, " \n"),
	     *b = strtok(NULL, " \n");

	if (!cmd)
		return 1;
	if (strcmp(cmd, "acquire") == 0 && a && b)
		acquire(m, a, b);
	else if (strcmp(cmd, "release") == 0 && a)
		release(a);
	else if (strcmp(cmd, "query") == 0)
		query(m);
	else if (strcmp(cmd, "exit") == 0)
		return 0;
	else
		say_error(WLK_EINVAL);
	return 1;
}

int main(int argc, char **argv)
{
	struct wlk_manager *m;
	struct pollfd pfd[2];
	char buf[4096];
	size_t len = 0;
	int err, run = 1;
	ssize_t n;
	char *nl;

	if (argc != 2) {
		fprintf(stderr, "usage: peer ORIGIN\n");
		return 1;
	}
	err = wlk_manager_open(argv[1], NULL, &m);
	if (err || (err = wlk_manager_fd(m)) < 0) {
		fprintf(stderr, "peer: %s\n", wlk_strerror(err));
		return 1;
	}
	pfd[0] = (struct pollfd){ .fd = 0, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = err, .events = POLLIN };
	printf("ready %s %d\n", wlk_manager_client_id(m), (int)getpid());
	fflush(stdout);
	while (run) {
		if (poll(pfd, 2, -1) < 0)
			continue;
		if (pfd[1].revents)
			wlk_manager_dispatch(m);
		if (!pfd[0].revents)
			continue;
		n = read(0, buf + len, sizeof(buf) - 1 - len);
		if (n <= 0)
			break;
		len += (size_t)n;
		while (run && (nl = memchr(buf, '\n', len))) {
			*nl = '\0';
			run = command(m, buf);
			len -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len);
		}
	}
	wlk_manager_close(m);
	return 0;
}
