/* SPDX-License-Identifier: MIT */
/*
 * robust.c - the robust, process-shared mutexes a segment holds (its own
 * and each agent's lifeline): how they are made, and the check that one
 * read from a segment is of that kind before glibc is handed it, and the
 * arming of a lifeline for a watcher. No locking policy here: mutex.c
 * locks the segment (and repairs it), reap.c and table.c probe lifelines.
 */
#include <errno.h>
#include <linux/futex.h>

#include "sys.h"

int wlk__mutex_init(pthread_mutex_t *mu)
{
	pthread_mutexattr_t a;
	int rc;

	rc = pthread_mutexattr_init(&a);
	if (rc)
		return wlk__errno(rc);
	rc = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	if (!rc)
		rc = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	/*
	 * Normal type on purpose: an error-checking robust mutex compares
	 * namespace-local thread ids and misreports across PID namespaces.
	 */
	if (!rc)
		rc = pthread_mutexattr_settype(&a, PTHREAD_MUTEX_NORMAL);
	if (!rc)
		rc = pthread_mutex_init(mu, &a);
	pthread_mutexattr_destroy(&a);
	return rc ? wlk__errno(rc) : 0;
}

/*
 * The kind word glibc keeps in every mutex wlk__mutex_init() makes (type,
 * robust, process-shared), taken from one made here. glibc trusts a
 * mutex's kind to choose its code path; another kind in a segment makes
 * it misbehave (a priority-protection kind makes trylock abort on its
 * ceiling). So a mutex in a segment is handed to glibc only with ours.
 */
static int mutex_kind(void)
{
	static int kind = -1; /* [A] */
	int k = uatomic_read(&kind);
	/* Initialised for the analyzer's sake: wlk__mutex_init() sets it. */
	pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

	if (k < 0 && wlk__mutex_init(&m) == 0) {
		k = m.__data.__kind;
		pthread_mutex_destroy(&m);
		uatomic_set(&kind, k);
	}
	return k;
}

/* Whether the segment's mutex @mu has the kind wlk__mutex_init() gave. */
bool wlk__mutex_sane(const pthread_mutex_t *mu)
{
	return uatomic_read(&mu->__data.__kind) == mutex_kind();
}

/* pthread_mutex_trylock() of a mutex in a segment; EINVAL if damaged. */
int wlk__mutex_trylock(pthread_mutex_t *mu)
{
	return wlk__mutex_sane(mu) ? pthread_mutex_trylock(mu) : EINVAL;
}

/*
 * wlk__lifeline_arm() - one attempt to set FUTEX_WAITERS in a lifeline's
 * futex @word (its robust mutex's lock word), so that the kernel wakes a
 * waiter of the word when its owner dies or execs. Return: WLK__ARMED
 * with the armed value in *@armed, or why not (enum wlk__arm).
 */
enum wlk__arm wlk__lifeline_arm(uint32_t *word, uint32_t *armed)
{
	uint32_t old = uatomic_read(word);

	if (!(old & FUTEX_TID_MASK))
		return WLK__FREE;
	if (old & FUTEX_OWNER_DIED)
		return WLK__DIED;
	if (!(old & FUTEX_WAITERS) &&
	    uatomic_cmpxchg(word, old, old | FUTEX_WAITERS) != old)
		return WLK__MOVED;
	*armed = old | FUTEX_WAITERS;
	return WLK__ARMED;
}
