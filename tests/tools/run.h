/* SPDX-License-Identifier: MIT */
/*
 * run.h - running shm-inspect as a program from the tools tests, and
 * judging how it ended and what it printed.
 */
#ifndef WLK_TESTS_TOOLS_RUN_H
#define WLK_TESTS_TOOLS_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "tjson.h"

/* How long one run of the tool may take (ASan builds are slow). */
#define RUN_MS 60000

struct run {
	int status; /* exit code, 128 + signal, or -1 (timed out) */
	bool signaled;
	char *out, *err;
	size_t out_len, err_len;
};

/* Run the tool with the arguments @argv (after its name; NULL-terminated)
 * in environment @env (NULL: ours), and collect its output. */
void run_env(struct run *r, char *const *env, const char *const *argv);
void run_free(struct run *r);
/* The two halves of run_env(), for a test that acts while the tool runs:
 * start it (its stdout and stderr pipes in @fds), then collect it. */
pid_t run_spawn(const char *const *argv, char *const *env, int fds[2]);
void run_finish(pid_t pid, int fds[2], struct run *r);
/* The tool ended by itself (no signal, no timeout) with @want. */
void expect_exit(const struct run *r, int want, const char *what);
/* Text output holds no control byte but \n and \t, nothing above ASCII. */
void expect_clean_text(const char *s, size_t n, const char *what);
/* Its stdout as JSON of the tool's format, parsed strictly. */
struct tj *parse_json(const struct run *r, const char *what);

#define RUN(r, ...)                                                            \
	run_env((r), NULL, (const char *const[]){__VA_ARGS__, NULL})

/* Run shm-inspect and check only how it ended. */
#define RUN_EXIT(want, what, ...)                                              \
	do {                                                                   \
		struct run r_;                                                 \
                                                                               \
		RUN(&r_, __VA_ARGS__);                                         \
		expect_exit(&r_, (want), (what));                              \
		run_free(&r_);                                                 \
	} while (0)

#endif /* WLK_TESTS_TOOLS_RUN_H */
