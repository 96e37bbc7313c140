/* SPDX-License-Identifier: MIT */
/*
 * startup_probe.c - a program that returns at once: bench/startup.c execs
 * it linked with libweblocks (startup_probe) and not (startup_bare, built
 * with -DSTARTUP_BARE).
 */
#ifndef STARTUP_BARE
#include <weblocks.h>
#endif

int main(void)
{
#ifndef STARTUP_BARE
	/* A call into the library, so that the link keeps it. */
	return wlk_strerror(0) == 0;
#else
	return 0;
#endif
}
