/* SPDX-License-Identifier: MIT */
/*
 * startup.c - part 1, what linking libweblocks costs a program that never
 * takes a lock: from fork() to waitpid() of a child that exec()s a program
 * whose main() returns at once, linked with libweblocks (startup_probe.c,
 * which names a function of it so that the link keeps it) and not linked
 * (the same source built without it: the anchor). The difference is the
 * loading, relocation and unmapping of libweblocks and of what it needs
 * (liburcu, json-c; not libcurl, which the etcd engine loads at its first
 * use: lib/etcd/libcurl.c).
 *
 * Unpinned; RUNS runs of each per pass, the two programs alternating.
 * Both are linked -no-install, so they are exec()ed directly, not through
 * a libtool wrapper script.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define RUNS 300
#define QUICK_RUNS 60

static char probe[PATH_MAX], bare[PATH_MAX];

/* One fork + exec + wait of @path, in us. */
static double one(const char *path)
{
	uint64_t t0 = now_ns();
	pid_t pid = fork();
	int st;

	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		die("%s did not run (status %d)", path, st);
	return (double)(now_ns() - t0) / 1e3;
}

/* The probes sit beside this program (bench/, or bench/.libs/ when it
 * runs through libtool's wrapper, whose real binary is one level down). */
static void find_probes(void)
{
	char self[PATH_MAX], *slash;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		die("readlink /proc/self/exe: %s", strerror(errno));
	self[n] = '\0';
	slash = strrchr(self, '/');
	*slash = '\0';
	if (strlen(self) > 6 && !strcmp(self + strlen(self) - 6, "/.libs"))
		self[strlen(self) - 6] = '\0';
	snprintf(probe, sizeof(probe), "%s/startup_probe", self);
	snprintf(bare, sizeof(bare), "%s/startup_bare", self);
	if (access(probe, X_OK) || access(bare, X_OK))
		die("%s or %s missing", probe, bare);
}

int main(int argc, char **argv)
{
	struct fig linked = {0}, plain = {0};
	struct summary sl, sp;
	int runs;

	bench_init(argc, argv, "startup");
	find_probes();
	runs = QN(RUNS, QUICK_RUNS);
	for (int p = 0; p < bopt.passes; p++) {
		struct samples a = {0}, b = {0};

		for (int i = 0; i < runs; i++) {
			samples_add(&a, one(probe));
			samples_add(&b, one(bare));
		}
		fig_add(&linked, median(a.v, a.n), quantile(a.v, a.n, 0.99));
		fig_add(&plain, median(b.v, b.n), quantile(b.v, b.n, 0.99));
		samples_free(&a);
		samples_free(&b);
	}
	sl = fig_sum(&linked);
	sp = fig_sum(&plain);
	emit_fig("p1.startup", "1",
		 "a program linked with libweblocks: fork, exec, exit, wait "
		 "(it takes no lock)",
		 "us", &sl);
	emit_anchor("p1.startup", "the same program not linked with it",
		    "us", &sp);
	emit_note("p1.startup: %d runs of each per pass, alternating, "
		  "unpinned; the difference (%.0f us) is the loading of "
		  "libweblocks and its libraries (liburcu, json-c), which a "
		  "program pays at start whether or not it uses them; the "
		  "etcd engine loads libcurl only when it is first used",
		  runs, sl.median - sp.median);
	bench_fini();
	return 0;
}
