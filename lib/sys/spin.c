/* SPDX-License-Identifier: MIT */
/*
 * spin.c - the one spin-then-sleep policy: how long a thread that waits
 * for another one busy-waits before it sleeps on a futex (its own, or the
 * one under a robust mutex). Every waiter that spins spins here.
 *
 * The policy:
 *
 *  - Spin only with more than one CPU online (wlk__spin_ok()): on one CPU
 *    whoever we wait for cannot run while we spin, so spinning only
 *    delays it.
 *  - Look at the condition, then pause (caa_cpu_relax()), until it holds
 *    or a budget of time runs out. The budget is a time, not a count of
 *    pauses: a pause lasts from a few ns to tens of ns across x86
 *    generations, and what a budget stands for (a critical section, a
 *    lock held briefly) is a time. The clock is read once per
 *    WLK_SPIN_CHECK pauses, as a read costs more than a pause.
 *  - Stop early once others are queued, sleeping for the same thing: the
 *    thing is contended, a spinner would only overtake threads that came
 *    first, and the CPU is better left to the one we wait for. musl's
 *    pthread_mutex_lock() spins the same way (not at all once its
 *    waiters count is set).
 *  - Never sleep here: the caller sleeps on its futex after, and wakes
 *    from there on its own terms (deadline, abort signal, close).
 *
 * A grant or handoff that lands within the spin costs no system call on
 * either side: the waker skips the futex wake of a waiter not marked
 * sleeping (mutex.c, wake_flush()).
 */
#include <unistd.h>

#include "sys.h"

int wlk__ncpu; /* [A] 0 until known (wlk__spin_ok(), sys.h) */

/* Spinning helps only if whoever we wait for can run meanwhile: count the
 * CPUs online, once (wlk__spin_ok() reads the count after; so does
 * slice.c). Not this
 * process's affinity mask: a process pinned to a CPU of its own still
 * waits for processes on the others, and there spinning pays (with the
 * mask, bench/throughput, which pins each process so, fell from about
 * 2.1x flock to 0.14x). Two processes pinned to one CPU do spin for
 * nothing: the mask cannot tell them apart. */
int wlk__cpus_online(void)
{
	int n = uatomic_read(&wlk__ncpu);

	if (!n) {
		n = (int)sysconf(_SC_NPROCESSORS_ONLN);
		n = n > 0 ? n : 1;
		uatomic_set(&wlk__ncpu, n);
	}
	return n;
}

bool wlk__spin_ok_count(void)
{
	return wlk__cpus_online() > 1;
}

/*
 * wlk__spin() - spin until @done(@arg) holds, for at most @budget_ns, or
 * until @queued(@arg) says that others already sleep for the same thing.
 * @done:      the condition; it may act (a trylock) and leave its result
 *             in @arg. Called first, before any pause.
 * @queued:    whether others are queued for it; or NULL (nobody can be).
 * @arg:       passed to both.
 * @budget_ns: how long to spin at most (tunables.h: WLK_SPIN_NS,
 *             WLK_MUTEX_SPIN_NS).
 *
 * Context: any; no system call, other than a clock read.
 * Return: true once @done held; false when the caller should sleep: one
 * CPU (not tried at all), others queued, or the budget ran out.
 */
bool wlk__spin(bool (*done)(void *arg), bool (*queued)(void *arg),
	       void *arg, uint64_t budget_ns)
{
	uint64_t end;

	if (!wlk__spin_ok())
		return false;
	end = wlk__now_ns() + budget_ns;
	do {
		for (int i = 0; i < WLK_SPIN_CHECK; i++) {
			if (done(arg))
				return true;
			if (queued && queued(arg))
				return false;
			caa_cpu_relax();
		}
	} while (wlk__now_ns() < end);
	return false;
}
