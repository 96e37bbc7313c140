/* SPDX-License-Identifier: MIT */
/*
 * procs.h - what the stress programs (tests/torture.c, tests/load.c)
 * share: clocks, and the end of a run (every process must finish, the
 * segment must be valid and empty).
 */
#ifndef WLK_TESTS_PROCS_H
#define WLK_TESTS_PROCS_H

#include <stdint.h>
#include <sys/types.h>

#define NSEC_PER_SEC 1000000000ull

uint64_t procs_now_ns(void);
void procs_nap(uint64_t ns);

/*
 * Wait up to @grace_s seconds for the @n processes in @pid (0: none there)
 * to exit, naming any that fails (as "@who: process I: status S"); kill
 * the rest. Return: how many did not finish (stuck).
 */
int procs_reap(pid_t *pid, int n, int grace_s, const char *who);

/*
 * After a run: the bucket of @origin validates, and nothing is held or
 * pending. Return: 0, or 1 (said on stderr, prefixed with @who).
 */
int procs_final_check(const char *origin, const char *who);

#endif
