/* SPDX-License-Identifier: MIT */
/*
 * scope.c - two processes that each need two resources, "ledger" and
 * "audit", listed in opposite orders, as in examples/deadlock.c; but each
 * takes both with one request, a scope (man weblocks, SCOPES): granted on both
 * names at once or not at all, so neither ever holds one and waits for
 * the other, and no order between them has to be agreed on.
 *
 *     examples/scope [ROUNDS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <weblocks.h>

static char origin[] = "https://scope.example";

/* How long a round holds both: long enough that the two processes ask
 * while the other holds, nearly every round. */
#define HOLD_NS (2 * 1000 * 1000L)

static int run(int who, int rounds)
{
	/* The same two names, in either order: a scope is a set. */
	const struct wlk_name mine[2][2] = {
		{{"ledger", WLK_NUL_TERMINATED}, {"audit", WLK_NUL_TERMINATED}},
		{{"audit", WLK_NUL_TERMINATED}, {"ledger", WLK_NUL_TERMINATED}},
	};
	struct wlk_manager *m;
	int err = wlk_manager_open(origin, NULL, &m);

	if (err) {
		fprintf(stderr, "scope: %s\n", wlk_strerror(err));
		return 1;
	}
	for (int i = 0; i < rounds; i++) {
		struct wlk_lock *l = NULL;
		struct timespec t = {0, HOLD_NS};

		err = wlk_acquire_scope(m, mine[who], 2, NULL, &l);
		if (err) {
			fprintf(stderr, "scope: %s\n", wlk_strerror(err));
			wlk_manager_close(m);
			return 1;
		}
		/* Lock.scope: the names in byte order, each with a token. */
		printf("process %d: holding \"%s\" (token %llu) and \"%s\" "
		       "(token %llu)\n", who, wlk_lock_scope_name(l, 0, NULL),
		       (unsigned long long)wlk_lock_scope_token(l, 0),
		       wlk_lock_scope_name(l, 1, NULL),
		       (unsigned long long)wlk_lock_scope_token(l, 1));
		fflush(stdout);
		nanosleep(&t, NULL);
		wlk_release(l);
	}
	printf("process %d: %d rounds\n", who, rounds);
	wlk_manager_close(m);
	return 0;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 3, status = 0, rc;
	pid_t pid;

	if (rounds < 1)
		rounds = 1;
	fflush(stdout);
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
