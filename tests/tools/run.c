/* SPDX-License-Identifier: MIT */
/*
 * run.c - running shm-inspect as a program (run.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "../common.h"
#include "run.h"

extern char **environ;

static const char *tool_path(void)
{
	static char buf[4096];
	const char *p = getenv("WLK_SHM_INSPECT");
	const char *b = getenv("builddir");

	if (p && *p)
		return p;
	cr_assert(b && *b, "set WLK_SHM_INSPECT to the shm-inspect program");
	snprintf(buf, sizeof(buf), "%s/tools/shm-inspect", b);
	return buf;
}

/* Append what @fd has to *@buf; false at EOF. */
static bool drain(int fd, char **buf, size_t *len)
{
	char tmp[65536];
	ssize_t n = read(fd, tmp, sizeof(tmp));
	char *nb;

	if (n < 0 && errno == EINTR)
		return true;
	if (n <= 0)
		return false;
	nb = realloc(*buf, *len + (size_t)n + 1);
	cr_assert_not_null(nb);
	memcpy(nb + *len, tmp, (size_t)n);
	*len += (size_t)n;
	nb[*len] = '\0';
	*buf = nb;
	return true;
}

/* Start the tool with @argv (after its name); its pipes in @fds. */
pid_t run_spawn(const char *const *argv, char *const *env, int fds[2])
{
	const char *av[32] = {"shm-inspect"};
	posix_spawn_file_actions_t fa;
	int out[2], err[2], rc;
	size_t n = 1;
	pid_t pid;

	for (; *argv && n < 31; argv++)
		av[n++] = *argv;
	av[n] = NULL;
	cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(err, O_CLOEXEC), 0);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
	posix_spawn_file_actions_adddup2(&fa, err[1], STDERR_FILENO);
	rc = posix_spawn(&pid, tool_path(), &fa, NULL, (char *const *)av,
			 env ? env : environ);
	posix_spawn_file_actions_destroy(&fa);
	cr_assert_eq(rc, 0, "posix_spawn %s: %s", tool_path(), strerror(rc));
	close(out[1]);
	close(err[1]);
	fds[0] = out[0];
	fds[1] = err[0];
	return pid;
}

/* Read both pipes to EOF, then reap; bounded by RUN_MS. */
void run_finish(pid_t pid, int fds[2], struct run *r)
{
	uint64_t end = t_now_ns() + (uint64_t)RUN_MS * 1000000u;
	bool open_[2] = {true, true};
	int status = 0;

	while ((open_[0] || open_[1]) && t_now_ns() < end) {
		struct pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};

		p[0].fd = open_[0] ? fds[0] : -1;
		p[1].fd = open_[1] ? fds[1] : -1;
		if (poll(p, 2, 100) <= 0)
			continue;
		if (p[0].revents && !drain(fds[0], &r->out, &r->out_len))
			open_[0] = false;
		if (p[1].revents && !drain(fds[1], &r->err, &r->err_len))
			open_[1] = false;
	}
	close(fds[0]);
	close(fds[1]);
	if (open_[0] || open_[1])
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	r->signaled = WIFSIGNALED(status);
	if (open_[0] || open_[1])
		r->status = -1;
	else if (WIFEXITED(status))
		r->status = WEXITSTATUS(status);
	else
		r->status = 128 + WTERMSIG(status);
	if (!r->out)
		r->out = calloc(1, 1);
	if (!r->err)
		r->err = calloc(1, 1);
	cr_assert(r->out && r->err);
}

void run_env(struct run *r, char *const *env, const char *const *argv)
{
	int fds[2];
	pid_t pid;

	memset(r, 0, sizeof(*r));
	pid = run_spawn(argv, env, fds);
	run_finish(pid, fds, r);
}

void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
	r->out = r->err = NULL;
}

/* The tool ended by itself (no signal, no timeout) with @want. */
void expect_exit(const struct run *r, int want, const char *what)
{
	cr_assert(!r->signaled && r->status >= 0,
		  "%s: shm-inspect died (status %d)\nstderr: %s", what,
		  r->status, r->err);
	cr_assert_eq(r->status, want,
		     "%s: exit %d, want %d\nstdout: %.2000s\nstderr: %s", what,
		     r->status, want, r->out, r->err);
}


/* Text output holds no control byte but \n and \t, nothing above ASCII. */
void expect_clean_text(const char *s, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		cr_assert(c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f),
			  "%s: raw byte 0x%02x at %zu", what, c, i);
	}
}

struct tj *parse_json(const struct run *r, const char *what)
{
	char err[128];
	struct tj *doc = tj_parse(r->out, r->out_len, err, sizeof(err));

	cr_assert_not_null(doc, "%s: invalid JSON (%s):\n%.4000s", what, err,
			   r->out);
	cr_assert(tj_str_is(tj_get(doc, "format"), "weblocks-shm-inspect/1",
			    SIZE_MAX),
		  "%s: no format", what);
	return doc;
}

