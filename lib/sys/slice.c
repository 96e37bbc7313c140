/* SPDX-License-Identifier: MIT */
/*
 * slice.c - a short time slice for a thread blocked at the head of a
 * queue, for as long as it stays blocked.
 *
 * A woken thread is queued on a CPU, usually the one it last ran on, and
 * under Linux's fair scheduler (EEVDF) it waits there until whatever runs
 * on that CPU reaches the end of its slice (a few milliseconds) or sleeps,
 * unless the woken thread's own slice is shorter than the running one's:
 * then it preempts it at once. When a holder is killed, the kernel wakes
 * its waiter from the dying process (robust-list processing, early in
 * exit) and the dying process then unmaps its memory, often on the very
 * CPU the waiter is queued on: without a short slice the waiter waits for
 * the whole teardown, longer than flock(2)'s waiter, whose lock the kernel
 * releases only after it (make bench, part 3).
 *
 * Since Linux 6.12 a SCHED_OTHER thread may ask for its own slice
 * (sched_setattr(2), sched_runtime; no privilege needed). So a blocked
 * waiter first in its name's queue asks for WLK_WAIT_SLICE_NS at the
 * scheduler's first tick after it got there (wlk__slice_when()), and puts
 * its own slice back when its wait ends, before the call returns. A wait
 * that ends before that tick costs nothing more (tick.c: its timeout is
 * fired by the tick); one that lasts past it, a wake-up and four system
 * calls, a few microseconds; one waiter per name pays them, however many
 * queue behind it.
 *
 * What is left alone: threads of another policy (real-time, SCHED_BATCH,
 * SCHED_IDLE, deadline) and threads whose slice is already as short; a
 * kernel without custom slices (sched_getattr() reports no slice for
 * SCHED_OTHER: nothing is changed, and this process stops asking); a
 * process whose sched_setattr() is refused (seccomp, EPERM: it stops
 * asking); a process started with WEBLOCKS_WAIT_SLICE=0. Restoring puts
 * back the slice only, and only if the thread still has the short one: a
 * change made by another thread meanwhile stands (a new nice value stays,
 * with the old slice). The kernel reports a slice without saying whether
 * the thread chose it or follows the system's default: a slice of the
 * default's length (default_slice()) is put back as the default, any
 * other as the thread's own.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sys.h"

/* glibc 2.36 wraps neither call. */
#ifndef SYS_sched_setattr
#define SYS_sched_setattr 314
#endif
#ifndef SYS_sched_getattr
#define SYS_sched_getattr 315
#endif

/* The kernel's struct sched_attr, first version (glibc 2.36 has none). */
struct wlk__sched_attr {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime; /* SCHED_OTHER: the slice, since Linux 6.12 */
	uint64_t sched_deadline;
	uint64_t sched_period;
};

/* default_slice()'s constants, as the kernel has them. */
#define DEFAULT_SLICE_UNIT_NS 700000ull
#define DEFAULT_SLICE_CPUS 8

/* The environment variable that turns this off: "0". */
#define SLICE_ENV "WEBLOCKS_WAIT_SLICE"

/* [A] Whether this process asks: unknown until the first ask. */
enum { SLICE_UNKNOWN, SLICE_ON, SLICE_OFF };
static int slice_state = SLICE_UNKNOWN;
static pthread_once_t slice_once = PTHREAD_ONCE_INIT;

static void slice_env(void)
{
	const char *e = getenv(SLICE_ENV);

	uatomic_set(&slice_state, e && !strcmp(e, "0") ? SLICE_OFF : SLICE_ON);
}

static int get_attr(struct wlk__sched_attr *a)
{
	memset(a, 0, sizeof(*a));
	return (int)syscall(SYS_sched_getattr, 0, a, sizeof(*a), 0);
}

static int set_attr(struct wlk__sched_attr *a)
{
	a->size = sizeof(*a);
	return (int)syscall(SYS_sched_setattr, 0, a, 0);
}

/*
 * The kernel's default slice (sysctl_sched_base_slice, sched/fair.c): 0.7
 * ms times 1 + log2 of the online CPUs, counting at most 8 (its default
 * "log" scaling). Wrong only if an administrator changed it (debugfs):
 * then a thread that had the default gets its length back as its own.
 */
static uint64_t default_slice(void)
{
	int n = wlk__cpus_online();
	uint64_t f = 1;

	if (n > DEFAULT_SLICE_CPUS)
		n = DEFAULT_SLICE_CPUS;
	for (; n > 1; n >>= 1)
		f++;
	return DEFAULT_SLICE_UNIT_NS * f;
}

/* A refusal that will not change for this process. */
static void give_up_on(int err)
{
	if (err == EPERM || err == ENOSYS || err == EINVAL)
		uatomic_set(&slice_state, SLICE_OFF);
}

/*
 * When a wait that became first in its queue at @now asks for the short
 * slice: at the scheduler's next tick (tick.c), when its timeout costs
 * nothing more; or WLK_WAIT_SLICE_FALLBACK_NS on, if the tick is unknown;
 * or never (UINT64_MAX) in a process that does not ask.
 */
uint64_t wlk__slice_when(uint64_t now)
{
	uint64_t t;

	pthread_once(&slice_once, slice_env);
	if (uatomic_read(&slice_state) == SLICE_OFF)
		return UINT64_MAX;
	t = wlk__tick_after(now);
	return t ? t : now + WLK_WAIT_SLICE_FALLBACK_NS;
}

void wlk__slice_shorten(struct wlk__slice *s)
{
	struct wlk__sched_attr a;

	s->on = false;
	pthread_once(&slice_once, slice_env);
	if (uatomic_read(&slice_state) == SLICE_OFF)
		return;
	if (get_attr(&a) < 0) {
		give_up_on(errno);
		return;
	}
	if (a.sched_policy != SCHED_OTHER)
		return;
	if (!a.sched_runtime) {
		/* A kernel without custom slices reports none. */
		uatomic_set(&slice_state, SLICE_OFF);
		return;
	}
	if (a.sched_runtime <= WLK_WAIT_SLICE_NS)
		return;
	/* 0 asks for the default back (slice.c's top). */
	s->runtime = a.sched_runtime == default_slice() ? 0 : a.sched_runtime;
	a.sched_runtime = WLK_WAIT_SLICE_NS;
	if (set_attr(&a) < 0) {
		give_up_on(errno);
		return;
	}
	s->on = true;
}

void wlk__slice_restore(struct wlk__slice *s)
{
	struct wlk__sched_attr a;

	if (!s->on)
		return;
	s->on = false;
	if (get_attr(&a) < 0 || a.sched_policy != SCHED_OTHER ||
	    a.sched_runtime != WLK_WAIT_SLICE_NS)
		return; /* changed meanwhile by another thread: theirs stands */
	a.sched_runtime = s->runtime;
	(void)set_attr(&a); /* nothing better to do if refused now */
}
