/* SPDX-License-Identifier: MIT */
/*
 * loop.c - locks in an event loop: one thread, no call that blocks.
 *
 *     cc loop.c $(pkg-config --cflags --libs weblocks) -o loop && ./loop
 *
 * (./loop ORIGIN uses another origin's bucket.)
 *
 * wlk_request_async() returns at once. When the request is granted, the
 * manager's descriptor (wlk_manager_fd()) becomes readable, and the loop
 * calls wlk_manager_dispatch(), which runs the callback on this thread. The
 * lock stays held after the callback returns, until wlk_release().
 *
 * Two managers are two clients, like two browser tabs, even in one
 * process: "tab-1" and "tab-2" both request "doc"; tab-2 waits in the queue
 * until tab-1 has worked for a few turns of the loop and released it.
 * (examples/epoll.c holds several locks at once, one of them contended by
 * another process; examples/libuv.c does that with libuv.)
 */
#include <poll.h>
#include <stdio.h>
#include <weblocks.h>
#include <weblocks/async.h>

#define TURN_MS 100	/* one turn of the loop, when nothing happens */
#define WORK_TURNS 3	/* how long a tab works with the lock */
#define MAX_TURNS 50	/* a loop that goes on longer is stuck */

struct tab {
	const char *name;
	struct wlk_manager *m;
	struct wlk_lock *lock;	/* held, from the callback to the release */
	int worked;		/* turns worked with the lock */
};

/* Runs inside wlk_manager_dispatch(), on the loop's thread. */
static void granted(struct wlk_async *req, int status, struct wlk_lock *lock,
		    void *arg)
{
	struct tab *t = arg;

	(void)req; /* this request's handle, for wlk_async_cancel() */
	if (status) {
		printf("%s: not granted: %s\n", t->name, wlk_strerror(status));
		return;
	}
	printf("%s: holds \"doc\" (token %llu)\n", t->name,
	       (unsigned long long)wlk_lock_token(lock));
	t->lock = lock;
}

int main(int argc, char **argv)
{
	const char *origin = argc > 1 ? argv[1] : "https://loop.example";
	struct tab tabs[2] = { { .name = "tab-1" }, { .name = "tab-2" } };
	struct pollfd fds[2];
	int err = 0, done = 0, turn, i;

	for (i = 0; i < 2 && !err; i++) {
		err = wlk_manager_open(origin, NULL, &tabs[i].m);
		if (err)
			break;
		fds[i].fd = wlk_manager_fd(tabs[i].m); /* negative: error */
		fds[i].events = POLLIN;
		err = fds[i].fd < 0 ? fds[i].fd :
		      wlk_request_async(tabs[i].m, "doc", WLK_NUL_TERMINATED,
					NULL, granted, &tabs[i], NULL);
		if (!err)
			printf("%s: requested \"doc\"\n", tabs[i].name);
	}
	for (turn = 0; !err && done < 2 && turn < MAX_TURNS; turn++) {
		if (poll(fds, 2, TURN_MS) < 0)
			break;
		for (i = 0; i < 2; i++) {
			struct tab *t = &tabs[i];

			if (fds[i].revents & POLLIN)
				wlk_manager_dispatch(t->m); /* runs granted() */
			if (t->lock && ++t->worked == WORK_TURNS) {
				printf("%s: releases \"doc\"\n", t->name);
				err = wlk_release(t->lock);
				t->lock = NULL;
				done++;
			}
		}
	}
	for (i = 0; i < 2; i++)
		if (tabs[i].m)
			wlk_manager_close(tabs[i].m);
	wlk_bucket_remove(origin, NULL);
	if (err)
		fprintf(stderr, "loop: %s\n", wlk_strerror(err));
	else if (done < 2)
		fprintf(stderr, "loop: stuck after %d turns\n", turn);
	return err || done < 2;
}
