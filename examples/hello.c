/* SPDX-License-Identifier: MIT */
/* hello.c - the smallest weblocks program: take one exclusive lock. */
#include <inttypes.h>
#include <stdio.h>
#include <weblocks.h>

static char origin[] = "https://hello.example";

/* Runs with the lock held; returning from it releases the lock. */
static int hello(struct wlk_lock *lock, void *arg)
{
	printf("%s: holding \"%s\" (%s), token %" PRIu64 "\n", (char *)arg,
	       wlk_lock_name(lock, NULL),
	       wlk_lock_mode(lock) == WLK_SHARED ? "shared" : "exclusive",
	       wlk_lock_token(lock));
	return 0;
}

int main(void)
{
	struct wlk_manager *m;
	int err = wlk_manager_open(origin, NULL, &m);

	if (!err) {
		err = wlk_request(m, "my_resource", WLK_NUL_TERMINATED, NULL,
				  hello, origin);
		wlk_manager_close(m);
		/* Tidy /dev/shm; -EBUSY while another process uses it. */
		wlk_bucket_remove(origin, NULL);
	}
	if (err)
		fprintf(stderr, "hello: %s\n", wlk_strerror(err));
	return err ? 1 : 0;
}
