/* SPDX-License-Identifier: MIT */
/*
 * t_run.c - weblocks-run, the lock wrapper, run as a program: the
 * command's exit status passes through, "not available" and "timed out"
 * have exit codes of their own, signals reach the command, a command that
 * execs keeps the lock (the wrapper holds it), and the lock is released
 * when the wrapper is killed.
 *
 * The commands are sh -c scripts that tell the test they run with the lock
 * by writing their pid to descriptor 3, and hold it until the test writes
 * a byte to descriptor 4 (exec head -c1 <&4), or until a signal ends them,
 * so no test sleeps to wait.
 */
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common.h"

extern char **environ;

/* Exit codes of weblocks-run (tools/weblocks-run.c, weblocks-run(1)). */
#define EXIT_UNAVAILABLE 75
#define EXIT_TIMEDOUT 124
#define EXIT_NOT_FOUND 127
#define SIGNAL_BASE 128

/* A command that reports its pid on fd 3, then holds until fd 4 has a
 * byte, as the program it execs (head). */
#define HOLD "echo $$ >&3; exec head -c1 <&4 >/dev/null"

static const char *wrapper_path(void)
{
	static char buf[4096];
	const char *p = getenv("WLK_WEBLOCKS_RUN");
	const char *b = getenv("builddir");

	if (p && *p)
		return p;
	cr_assert(b && *b, "set WLK_WEBLOCKS_RUN to the weblocks-run program");
	snprintf(buf, sizeof(buf), "%s/tools/weblocks-run", b);
	return buf;
}

/* A run of the wrapper, with the command's two pipes. */
struct wrun {
	pid_t pid;
	int ready; /* read end: the command's pid, once it runs */
	int hold;  /* write end: a byte lets the command end */
};

static void wrun_start(struct wrun *w, const char *const *argv)
{
	const char *av[32] = {"weblocks-run"};
	posix_spawn_file_actions_t fa;
	int ready[2], hold[2], rc;
	size_t n = 1;

	for (; *argv && n < 31; argv++)
		av[n++] = *argv;
	av[n] = NULL;
	cr_assert_eq(pipe(ready), 0);
	cr_assert_eq(pipe(hold), 0);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, ready[1], 3);
	posix_spawn_file_actions_adddup2(&fa, hold[0], 4);
	posix_spawn_file_actions_addclose(&fa, ready[0]);
	posix_spawn_file_actions_addclose(&fa, hold[1]);
	rc = posix_spawn(&w->pid, wrapper_path(), &fa, NULL, (char *const *)av,
			 environ);
	posix_spawn_file_actions_destroy(&fa);
	cr_assert_eq(rc, 0, "posix_spawn %s: %s", wrapper_path(), strerror(rc));
	close(ready[1]);
	close(hold[0]);
	w->ready = ready[0];
	w->hold = hold[1];
}

/* The command's pid, once it runs holding the lock; 0 if it never did. */
static pid_t wrun_ready(struct wrun *w)
{
	char buf[32] = "";
	ssize_t n;

	do
		n = read(w->ready, buf, sizeof(buf) - 1);
	while (n < 0 && errno == EINTR);
	return n > 0 ? (pid_t)atoi(buf) : 0;
}

/* Wait for the wrapper to end by itself; its status as a shell shows it:
 * its exit code, or 128 + the signal that killed it. */
static int wrun_wait(struct wrun *w)
{
	int status;

	cr_assert_eq(waitpid(w->pid, &status, 0), w->pid);
	close(w->hold);
	close(w->ready);
	return WIFSIGNALED(status) ? SIGNAL_BASE + WTERMSIG(status)
				   : WEXITSTATUS(status);
}

/* Let the command end (a holding one ends at the byte), then wait. */
static int wrun_finish(struct wrun *w)
{
	cr_assert_eq(write(w->hold, "x", 1) >= 0 || errno == EPIPE, 1);
	return wrun_wait(w);
}

static int wrun(const char *const *argv)
{
	struct wrun w;

	signal(SIGPIPE, SIG_IGN);
	wrun_start(&w, argv);
	return wrun_finish(&w);
}

#define WRUN(...) wrun((const char *const[]){__VA_ARGS__, NULL})

Test(run, exit_status_passes_through, T_FIX, .timeout = 60)
{
	cr_expect_eq(WRUN(t_origin, "n", "--", "true"), 0);
	cr_expect_eq(WRUN(t_origin, "n", "--", "sh", "-c", "exit 7"), 7);
	cr_expect_eq(WRUN(t_origin, "n", "sh", "-c", "exit 3"), 3,
		     "without --");
	cr_expect_eq(WRUN(t_origin, "n", "--", "sh", "-c", "kill -TERM $$"),
		     SIGNAL_BASE + SIGTERM, "a command killed by a signal");
	cr_expect_eq(WRUN(t_origin, "n", "--", "/nonexistent/command"),
		     EXIT_NOT_FOUND);
}

Test(run, unavailable_and_timed_out_have_their_own_codes_while_exec_holds,
     T_FIX, .timeout = 60)
{
	struct wrun holder;

	signal(SIGPIPE, SIG_IGN);
	wrun_start(&holder, (const char *const[]){t_origin, "n", "--", "sh",
						  "-c", HOLD, NULL});
	cr_assert_gt(wrun_ready(&holder), 0, "the holder's command ran");
	/* The command has exec'd head: the lock stays with the wrapper. */
	cr_expect_eq(WRUN("--if-available", t_origin, "n", "--", "true"),
		     EXIT_UNAVAILABLE);
	cr_expect_eq(WRUN("--shared", "-n", t_origin, "n", "--", "true"),
		     EXIT_UNAVAILABLE);
	cr_expect_eq(WRUN("--timeout", "0.2", t_origin, "n", "--", "true"),
		     EXIT_TIMEDOUT);
	cr_expect_eq(WRUN("-n", t_origin, "other", "--", "true"), 0,
		     "another name is free");
	cr_expect_eq(wrun_finish(&holder), 0);
	cr_expect_eq(WRUN("-n", t_origin, "n", "--", "true"), 0,
		     "free again once the command ended");
}

Test(run, shared_holders_share, T_FIX, .timeout = 60)
{
	struct wrun holder;

	signal(SIGPIPE, SIG_IGN);
	wrun_start(&holder, (const char *const[]){"--shared", t_origin, "n",
						  "--", "sh", "-c", HOLD,
						  NULL});
	cr_assert_gt(wrun_ready(&holder), 0);
	cr_expect_eq(WRUN("-s", "-n", t_origin, "n", "--", "true"), 0);
	cr_expect_eq(WRUN("-n", t_origin, "n", "--", "true"),
		     EXIT_UNAVAILABLE, "exclusive behind a shared holder");
	cr_expect_eq(wrun_finish(&holder), 0);
}

Test(run, signals_reach_the_command, T_FIX, .timeout = 60)
{
	struct wrun w;

	signal(SIGPIPE, SIG_IGN);
	/* A trapped signal ends the shell's wait at once (POSIX); the command
	 * ends only by its trap. Nothing else lets it go: without the
	 * forwarding, the test times out. */
	wrun_start(&w, (const char *const[]){
			       t_origin, "n", "--", "sh", "-c",
			       "trap 'kill $! 2>/dev/null; exit 42' USR1; "
			       "echo $$ >&3; sleep 1000 & wait",
			       NULL});
	cr_assert_gt(wrun_ready(&w), 0);
	cr_assert_eq(kill(w.pid, SIGUSR1), 0);
	cr_expect_eq(wrun_wait(&w), 42, "USR1 went to the command");

	wrun_start(&w, (const char *const[]){t_origin, "n", "--", "sh", "-c",
					     HOLD, NULL});
	cr_assert_gt(wrun_ready(&w), 0);
	cr_assert_eq(kill(w.pid, SIGTERM), 0);
	cr_expect_eq(wrun_wait(&w), SIGNAL_BASE + SIGTERM,
		     "TERM killed the command, and the wrapper reported it");
}

Test(run, killing_the_wrapper_releases_the_lock, T_FIX, .timeout = 60)
{
	const struct wlk_options wait10 = {.timeout_ns = 10000000000ull};
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	struct wrun w;
	pid_t cmd;

	signal(SIGPIPE, SIG_IGN);
	wrun_start(&w, (const char *const[]){t_origin, "n", "--", "sh", "-c",
					     HOLD, NULL});
	cmd = wrun_ready(&w);
	cr_assert_gt(cmd, 0);
	T_ASSERT_RC(wlk_acquire(m, "n", 1, &(struct wlk_options){
						   .if_available = true},
				&l),
		    0);
	cr_assert_null(l, "the wrapper holds n");
	cr_assert_eq(kill(w.pid, SIGKILL), 0);
	cr_expect_eq(wrun_finish(&w), SIGNAL_BASE + SIGKILL);
	/* The library releases a dead process's lock; a waiter gets it. */
	T_ASSERT_RC(wlk_acquire(m, "n", 1, &wait10, &l), 0);
	cr_assert_not_null(l);
	T_ASSERT_RC(wlk_release(l), 0);
}
