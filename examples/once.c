/* SPDX-License-Identifier: MIT */
/*
 * once.c - run a job in at most one process at a time: if another
 * instance holds the lock, say so and leave (ifAvailable). Start two at
 * once to see it:
 *
 *     cc once.c $(pkg-config --cflags --libs weblocks) -o once
 *     ./once & ./once
 *
 * The lock is released when the callback returns, or when the process
 * dies, however it dies.
 */
#include <stdio.h>
#include <unistd.h>
#include <weblocks.h>

static int job(struct wlk_lock *lock, void *arg)
{
	(void)arg;
	if (!lock) { /* if_available: somebody else holds it */
		printf("%d: another instance runs the job; leaving\n",
		       (int)getpid());
		return 0;
	}
	printf("%d: running the job (token %llu)\n", (int)getpid(),
	       (unsigned long long)wlk_lock_token(lock));
	sleep(2); /* the job */
	printf("%d: done\n", (int)getpid());
	return 0;
}

int main(void)
{
	struct wlk_options o = WLK_OPTIONS_INIT;
	struct wlk_manager *m;
	int err;

	o.if_available = true;
	err = wlk_manager_open("https://once.example", NULL, &m);
	if (!err) {
		err = wlk_request(m, "nightly-job", WLK_NUL_TERMINATED, &o,
				  job, NULL);
		wlk_manager_close(m);
	}
	if (err)
		fprintf(stderr, "once: %s\n", wlk_strerror(err));
	return err ? 1 : 0;
}
