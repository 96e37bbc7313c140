/* SPDX-License-Identifier: MIT */
/*
 * futex.c - the only place that makes futex system calls.
 *
 * Every operation is a shared (non-PRIVATE) one: the words live in the
 * segment, and a private wait is keyed by (mm, address) so a waker in
 * another process would never find it. Process-local words (abort signals,
 * the close word of a manager) use shared operations too, so that one
 * futex_waitv() can sleep on a segment word and on them at once.
 *
 * Deadlines are absolute CLOCK_MONOTONIC nanoseconds: a wait that is
 * interrupted and restarted does not stretch its timeout. Every return is
 * only a hint; callers re-check their condition.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sys.h"

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#ifndef FUTEX2_SIZE_U32
#define FUTEX2_SIZE_U32 0x02
#endif

/* Without futex_waitv (Linux < 5.16), sleep on the first word in slices
 * (WLK_FALLBACK_SLICE_NS, tunables.h). */
#define WLK_WAITV_MAX (3 + WLK_WATCH_MAX)

static int waitv_missing; /* [A] futex_waitv returned ENOSYS once */

static void to_timespec(uint64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / WLK_NSEC_PER_SEC);
	ts->tv_nsec = (long)(ns % WLK_NSEC_PER_SEC);
}

/* FUTEX_WAIT_BITSET takes an absolute deadline, unlike FUTEX_WAIT. */
static int wait_one(uint32_t *word, uint32_t val, uint64_t deadline_ns)
{
	struct timespec ts;

	if (deadline_ns)
		to_timespec(deadline_ns, &ts);
	if (syscall(SYS_futex, word, FUTEX_WAIT_BITSET, val,
		    deadline_ns ? &ts : NULL, NULL, FUTEX_BITSET_MATCH_ANY) == 0)
		return 0;
	return errno == ETIMEDOUT ? -ETIMEDOUT : 0;
}

static int wait_vec(struct wlk__waitv *w, unsigned int n, uint64_t deadline_ns)
{
	struct futex_waitv v[WLK_WAITV_MAX] = {{0}};
	struct timespec ts;

	for (unsigned int i = 0; i < n; i++) {
		v[i].uaddr = (uint64_t)(uintptr_t)w[i].word;
		v[i].val = w[i].val;
		v[i].flags = FUTEX2_SIZE_U32;
	}
	if (deadline_ns)
		to_timespec(deadline_ns, &ts);
	if (syscall(SYS_futex_waitv, v, n, 0, deadline_ns ? &ts : NULL,
		    CLOCK_MONOTONIC) >= 0)
		return 0;
	switch (errno) {
	case ETIMEDOUT:
		return -ETIMEDOUT;
	case ENOSYS:
		uatomic_set(&waitv_missing, 1);
		return -ENOSYS;
	default: /* EAGAIN: a word changed; EINTR: re-check */
		return 0;
	}
}

/*
 * wlk__futex_wait() - sleep until one of @n words differs from its value,
 * a wake-up, or @deadline_ns (0 = none). Returns 0 (re-check) or -ETIMEDOUT.
 */
int wlk__futex_wait(struct wlk__waitv *w, unsigned int n, uint64_t deadline_ns)
{
	uint64_t slice;
	int rc;

	if (n == 1)
		return wait_one(w[0].word, w[0].val, deadline_ns);
	if (n > WLK_WAITV_MAX)
		n = WLK_WAITV_MAX;
	if (!uatomic_read(&waitv_missing)) {
		rc = wait_vec(w, n, deadline_ns);
		if (rc != -ENOSYS)
			return rc;
	}
	/*
	 * Old kernel: sleep on the first word, the one other processes wake,
	 * and notice the process-local ones within a slice.
	 */
	slice = wlk__now_ns() + WLK_FALLBACK_SLICE_NS;
	if (deadline_ns && deadline_ns < slice)
		slice = deadline_ns;
	rc = wait_one(w[0].word, w[0].val, slice);
	if (rc == -ETIMEDOUT && slice != deadline_ns)
		rc = 0;
	return rc;
}

void wlk__futex_wake(uint32_t *word, int n)
{
	syscall(SYS_futex, word, FUTEX_WAKE, n, NULL, NULL, 0);
}
