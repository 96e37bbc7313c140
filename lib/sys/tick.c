/* SPDX-License-Identifier: MIT */
/*
 * tick.c - when the scheduler's next tick comes: the earliest moment at
 * which a sleep's timeout costs nothing until it expires.
 *
 * A sleep with a timeout arms a timer on its CPU. A timer due before
 * everything else that CPU has armed is programmed into the CPU's timer
 * device, when armed and again when cancelled; in a virtual machine each
 * is an exit to the hypervisor (on the VM this library is measured on,
 * that cost every handoff to a sleeping waiter 0.5-3 us: tunables.h). A
 * CPU that runs anything has its tick armed, so a timeout due at or after
 * the next tick waits behind it, and is fired by it.
 *
 * Linux runs every CPU's tick on CLOCK_MONOTONIC at the multiples of the
 * tick period (kernel/time/tick-sched.c, tick_init_jiffy_update(); on this
 * VM, traced: each tick 3-13 us after a multiple of 4 ms), a period it
 * reports as CLOCK_MONOTONIC_COARSE's resolution. Booted with
 * skew_tick=1, it offsets each CPU's tick by less than half a period:
 * then the timeout goes half a period later (tick.h).
 */
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "sys.h"

/* A period outside these bounds is not a tick (HZ is 100 to 1000). */
#define TICK_MIN_NS (100ull * 1000)
#define TICK_MAX_NS (100ull * 1000 * 1000)
/* The kernel's command line is at most this long (COMMAND_LINE_SIZE is
 * 2048 on x86 and 4096 at most elsewhere). */
#define CMDLINE_MAX 4096

/* [A] Written once, under tick_once. */
static uint64_t tick_period; /* 0: unknown */
static uint64_t tick_skew;
static pthread_once_t tick_once = PTHREAD_ONCE_INIT;

static bool cmdline_skews(void)
{
	char buf[CMDLINE_MAX];
	int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return false; /* no /proc: assume the kernel's default */
	n = read(fd, buf, sizeof(buf));
	close(fd);
	return n > 0 && wlk__tick_skewed(buf, (size_t)n);
}

static void tick_init(void)
{
	struct timespec ts;
	uint64_t p;

	if (clock_getres(CLOCK_MONOTONIC_COARSE, &ts) < 0)
		return;
	p = wlk__ts_ns(&ts);
	if (p < TICK_MIN_NS || p > TICK_MAX_NS)
		return;
	tick_skew = cmdline_skews() ? p / 2 : 0;
	tick_period = p;
}

uint64_t wlk__tick_after(uint64_t now)
{
	pthread_once(&tick_once, tick_init);
	if (!tick_period)
		return 0;
	return wlk__tick_next(now, tick_period, tick_skew);
}
