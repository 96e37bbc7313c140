/* SPDX-License-Identifier: MIT */
/*
 * failover.c - one primary among several processes: each waits for the
 * exclusive lock "primary"; whoever holds it is the primary until it
 * dies, and then the next in line takes over at once. Run three, kill
 * the primary, watch the next one take over:
 *
 *     cc failover.c $(pkg-config --cflags --libs weblocks) -o failover
 *     ./failover a & ./failover b & ./failover c &
 *     kill -9 <the primary's pid>
 *
 * The fencing token rises with every new primary: a resource that
 * remembers the highest token it has seen can refuse a deposed primary
 * that wakes up late.
 */
#include <stdio.h>
#include <unistd.h>
#include <weblocks.h>

static int serve(struct wlk_lock *lock, void *arg)
{
	printf("%s (pid %d): primary now, token %llu\n", (const char *)arg,
	       (int)getpid(), (unsigned long long)wlk_lock_token(lock));
	fflush(stdout);
	for (;;)
		pause(); /* serve until killed: death releases the lock */
	return 0;
}

int main(int argc, char **argv)
{
	const char *me = argc > 1 ? argv[1] : "node";
	struct wlk_manager *m;
	int err;

	err = wlk_manager_open("https://failover.example", NULL, &m);
	if (!err) {
		printf("%s (pid %d): standing by\n", me, (int)getpid());
		fflush(stdout);
		err = wlk_request(m, "primary", WLK_NUL_TERMINATED, NULL,
				  serve, (void *)me);
		wlk_manager_close(m);
	}
	if (err)
		fprintf(stderr, "failover: %s\n", wlk_strerror(err));
	return err ? 1 : 0;
}
