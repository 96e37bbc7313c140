/* SPDX-License-Identifier: MIT */
/*
 * deadlock.c - two processes that each need two resources, taken in
 * opposite orders: the classic deadlock. Each opens its manager with
 * detect_deadlocks, so whichever request would close the cycle fails with
 * WLK_EDEADLK instead of waiting for ever; that process lets go of what
 * it holds, waits a moment and starts again (man weblocks, DEADLOCKS).
 *
 *     examples/deadlock [ROUNDS]
 *
 * Without detect_deadlocks the first round would usually hang both.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <weblocks.h>

static char origin[] = "https://deadlock.example";

/* Both processes hold their first lock this long before asking for the
 * second, so that the cycle forms nearly every round. */
#define HOLD_NS (20 * 1000 * 1000L)
/* Backing off after a refusal, longer in the second process, so that the
 * two do not refuse each other round after round. */
#define BACKOFF_NS (5 * 1000 * 1000L)

static void nap(long ns)
{
	struct timespec t = {0, ns};

	nanosleep(&t, NULL);
}

/* Take @first, then @second; on WLK_EDEADLK let go and start again.
 * Return: how many refusals it took, or -1 on another error. */
static int both(struct wlk_manager *m, const char *first, const char *second,
		int who)
{
	for (int refused = 0;; refused++) {
		struct wlk_lock *a = NULL, *b = NULL;
		int err = wlk_acquire(m, first, WLK_NUL_TERMINATED, NULL, &a);

		if (err)
			return -1;
		nap(HOLD_NS);
		err = wlk_acquire(m, second, WLK_NUL_TERMINATED, NULL, &b);
		if (err == WLK_EDEADLK) {
			printf("process %d: %s: holding \"%s\", let go\n", who,
			       wlk_error_name(err), first);
			wlk_release(a);
			nap(BACKOFF_NS * (who + 1));
			continue;
		}
		if (err) {
			wlk_release(a);
			return -1;
		}
		printf("process %d: holding \"%s\" and \"%s\"\n", who, first,
		       second);
		wlk_release(b);
		wlk_release(a);
		return refused;
	}
}

static int run(int who, int rounds)
{
	struct wlk_manager_options o = WLK_MANAGER_OPTIONS_INIT;
	struct wlk_manager *m;
	int err, refused = 0;

	o.detect_deadlocks = true;
	err = wlk_manager_open(origin, &o, &m);
	if (err) {
		fprintf(stderr, "deadlock: %s\n", wlk_strerror(err));
		return 1;
	}
	for (int i = 0; i < rounds; i++) {
		int n = who ? both(m, "b", "a", who) : both(m, "a", "b", who);

		if (n < 0) {
			fprintf(stderr, "deadlock: process %d failed\n", who);
			wlk_manager_close(m);
			return 1;
		}
		refused += n;
	}
	printf("process %d: %d rounds, %d refusals\n", who, rounds, refused);
	wlk_manager_close(m);
	return 0;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 3, status = 0, rc;
	pid_t pid;

	if (rounds < 1)
		rounds = 1;
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		rc = run(1, rounds);
		fflush(stdout);
		_exit(rc);
	}
	rc = run(0, rounds);
	waitpid(pid, &status, 0);
	/* Tidy /dev/shm; -EBUSY while another process uses it. */
	wlk_bucket_remove(origin, NULL);
	return rc || !WIFEXITED(status) || WEXITSTATUS(status) ? 1 : 0;
}
