/* SPDX-License-Identifier: MIT */
/*
 * mutex.c - the one choke point for the segment mutex.
 *
 * The mutex is a robust, process-shared, normal-type pthread mutex. When its
 * owner dies inside a critical section, the next locker gets EOWNERDEAD and
 * the state may be half-changed: it repairs (recover.c) and only then calls
 * pthread_mutex_consistent(). Unlocking without that makes the mutex
 * ENOTRECOVERABLE for ever, so no path here does; a state that cannot be
 * repaired is marked poisoned first, then made consistent and unlocked, so
 * every later locker fails fast with WLK_ECORRUPT.
 *
 * Wake-ups of granted waiters are collected while locked and issued after
 * unlocking (wlk__unlock()): no system calls are made under the mutex that
 * the mutex itself does not need.
 */
#include <errno.h>
#include <linux/futex.h>
#include <time.h>

#include "repair.h"

/*
 * wlk__segment_poison() - mark @b's segment poisoned: every later locker
 * fails with WLK_ECORRUPT, openers move on to the next generation, and the
 * fast path is switched off (wlk__fast_off_all()), so that its users do
 * not go on granting beside that generation. The one way a segment is
 * poisoned, whoever finds it beyond repair.
 */
void wlk__segment_poison(struct wlk__bucket *b)
{
	uatomic_set(&b->hdr->seg_state, WLK_SEG_POISONED);
	wlk__fast_off_all(b);
}

/* Repair under the mutex; on failure poison. Returns 0 or WLK_ECORRUPT. */
static int repair(struct wlk__bucket *b, struct wlk__wake *wake)
{
	if (wlk__recover(b, wake) == 0)
		return 0;
	wlk__segment_poison(b);
	return WLK_ECORRUPT;
}

/*
 * Waiting for the mutex with a deadline or an abort signal: glibc cannot
 * wake a mutex waiter for a signal, so the wait is cut into slices of
 * WLK_LOCK_SLICE_NS (tunables.h), each a pthread_mutex_clocklock(), with
 * the signal looked at in between. Only a wait that outlasts a critical
 * section by far (its owner stopped or descheduled inside it) ever sees a
 * slice end.
 */

/*
 * Sleep for the mutex until @deadline (0: none) or until *@stop (an abort
 * signal's reason) is set.
 * Return: what pthread_mutex_clocklock() returns, ETIMEDOUT once the
 * deadline passed or ECANCELED once the signal was aborted (not locked).
 */
static int lock_wait(pthread_mutex_t *mu, uint64_t deadline,
		     const int *stop)
{
	for (;;) {
		uint64_t until = deadline;
		struct timespec ts;
		int rc;

		if (stop && uatomic_read(stop))
			return ECANCELED;
		if (stop) {
			uint64_t slice = wlk__now_ns() + WLK_LOCK_SLICE_NS;

			if (!until || slice < until)
				until = slice;
		}
		ts.tv_sec = (time_t)(until / WLK_NSEC_PER_SEC);
		ts.tv_nsec = (long)(until % WLK_NSEC_PER_SEC);
		rc = pthread_mutex_clocklock(mu, CLOCK_MONOTONIC, &ts);
		if (rc != ETIMEDOUT || until == deadline)
			return rc;
	}
}

/* What a locker spinning for the mutex watches (lock_spin()). */
struct mutex_spin {
	pthread_mutex_t *mu;
	const uint32_t *word; /* its lock word: layout.h asserts where */
	int rc;               /* the last trylock's result */
};

/* Whether the mutex was free and one trylock settled it (see rc). */
static bool lock_tried(void *arg)
{
	struct mutex_spin *s = arg;

	if (uatomic_read(s->word) != 0)
		return false;
	s->rc = pthread_mutex_trylock(s->mu);
	return s->rc != EBUSY;
}

/* Whether others already sleep in the kernel for the mutex: glibc sets
 * FUTEX_WAITERS in its lock word before they do. */
static bool lock_queued(void *arg)
{
	const struct mutex_spin *s = arg;

	return (uatomic_read(s->word) & FUTEX_WAITERS) != 0;
}

/*
 * glibc's robust mutex sleeps in the kernel as soon as it finds the mutex
 * taken; the critical sections here last well under a microsecond, so a
 * short spin (wlk__spin(): read-only, then one trylock when it looks free)
 * usually gets the mutex without two system calls. Every outcome of
 * trylock is one lock() can have, handled alike by the caller; a bounded
 * wait adds ETIMEDOUT and ECANCELED (lock_wait()).
 */
static int lock_spin(pthread_mutex_t *mu, uint64_t deadline,
		     const int *stop)
{
	struct mutex_spin s = {mu, (const uint32_t *)mu, EBUSY};

	s.rc = pthread_mutex_trylock(mu);
	if (s.rc != EBUSY ||
	    wlk__spin(lock_tried, lock_queued, &s, WLK_MUTEX_SPIN_NS))
		return s.rc;
	if (deadline || stop)
		return lock_wait(mu, deadline, stop);
	return pthread_mutex_lock(mu);
}

/*
 * wlk__lock_until() - lock the segment, repairing it if needed.
 * @b:        the bucket.
 * @wake:     the caller's wake list, emptied here; recovery may ask for a
 *            wake-up sweep. wlk__unlock() issues what it collected.
 * @deadline: give up waiting for the mutex at this CLOCK_MONOTONIC time
 *            (ns); 0 waits without limit.
 * @stop:    give up waiting once this reason word (a wlk_signal's) is
 *            set; or NULL.
 *
 * A process stopped inside the critical section keeps the mutex until it
 * continues: a caller with a deadline or a signal is not held up longer
 * than they allow (the signal is looked at every WLK_LOCK_SLICE_NS). The
 * uncontended path is the same trylock as without them.
 *
 * Return: 0 with the mutex held; or with the mutex not held, WLK_ETIMEDOUT
 * (the deadline passed), the signal's reason (aborted), WLK_ECORRUPT or
 * another negative code.
 */
int wlk__lock_until(struct wlk__bucket *b, struct wlk__wake *wake,
		    uint64_t deadline, const int *stop)
{
	pthread_mutex_t *mu = &b->hdr->sync.mutex;
	int rc;

	/* The counters only: the arrays are read up to them. */
	wake->self1 = wake->n = wake->n_reaped = wake->n_bells = 0;
	wake->n_names = 0;
	wake->sweep = wake->bell_sweep = false;

	if (!wlk__mutex_sane(mu)) {
		wlk__segment_poison(b);
		return WLK_ECORRUPT;
	}
	rc = lock_spin(mu, deadline, stop);
	if (rc == EOWNERDEAD) {
		/* Its owner died inside a critical section. A mutex that
		 * cannot be made consistent turns unrecoverable at unlock:
		 * poison first, so that lockers fail fast. */
		rc = repair(b, wake);
		if (pthread_mutex_consistent(mu)) {
			wlk__segment_poison(b);
			rc = WLK_ECORRUPT;
		}
		if (rc) {
			wlk__unlock(b, wake);
			return rc;
		}
	} else if (rc == ENOTRECOVERABLE) {
		/* Somebody unlocked after EOWNERDEAD without repairing. */
		wlk__segment_poison(b);
		return WLK_ECORRUPT;
	} else if (rc == ETIMEDOUT) {
		return WLK_ETIMEDOUT;
	} else if (rc == ECANCELED) {
		return uatomic_read(stop);
	} else if (rc) {
		return wlk__errno(rc);
	}

	if (uatomic_read(&b->hdr->seg_state) != WLK_SEG_READY ||
	    (uatomic_read(&b->hdr->needs_repair) && repair(b, wake))) {
		wlk__unlock(b, wake);
		return WLK_ECORRUPT;
	}
	return 0;
}

/* Ring @t, counting a datagram for its client if it is still there. */
static void bell_ring(struct wlk__bucket *b, const struct wlk__bell_to *t)
{
	wlk__bell_ring(t, wlk__client_live(b, t->client, t->client_gen)
				  ? &wlk__client(b, t->client)->bell_dgrams
				  : NULL);
}

/* Ring every client's doorbell: what is read here without the mutex only
 * chooses where a ring goes (doorbell.c checks it). */
static void bell_sweep(struct wlk__bucket *b)
{
	for (uint32_t i = 0; i < b->geo.max_clients; i++) {
		const struct wlk_seg_client *c = wlk__client(b, i);

		if (WLK_WORD_STATE(uatomic_read(&c->word)) == WLK_SLOT_USED &&
		    uatomic_read(&c->doorbell)) {
			struct wlk__bell_to t = wlk__bell_of(c, i);

			bell_ring(b, &t);
		}
	}
}

/* Wake every waiter of the bucket; their wake-ups are only hints. */
static void wake_sweep(struct wlk__bucket *b)
{
	for (uint32_t i = 0; i < b->geo.max_requests; i++) {
		uint32_t *w = &wlk__req(b, i)->word;

		if (WLK_WORD_STATE(uatomic_read(w)) != WLK_SLOT_FREE)
			wlk__futex_wake(w, INT32_MAX);
	}
	for (uint32_t i = 0; i < b->geo.max_names; i++)
		wlk__futex_wake(&wlk__name(b, i)->grants, INT32_MAX);
}

/* Wake every blocked waiter of name @ni with one system call (layout.h,
 * GRANT BROADCAST). */
static void broadcast(struct wlk__bucket *b, uint32_t ni)
{
	struct wlk_seg_name *n = wlk__name_at(b, ni);

	if (!n)
		return;
	uatomic_inc(&n->grants);
	wlk__futex_wake(&n->grants, WLK_BROADCAST_FIRST);
}

/*
 * The blocked waiters of the list and of the names collected. Each slot's
 * mark, mode and name are read once, after the mutex: a recycled slot only
 * makes a wake-up spurious. When WLK_BROADCAST_MIN or more shared sleepers
 * share the first one's name (a batch grant: one name's shared requests
 * at once), that name gets one broadcast instead of a wake each. An
 * exclusive sleeper does not sleep on the grants word (shm/wait.c): it
 * always gets a wake of its own (its name counts as WLK_NIL here).
 */
static void wake_waiters(struct wlk__bucket *b, struct wlk__wake *wake)
{
	uint32_t sleeper[WLK_WAKE_BATCH], name[WLK_WAKE_BATCH];
	uint32_t k = 0, same = 0, ni = WLK_NIL;

	cmm_smp_mb(); /* pairs with the waiter's, in shm/wait.c */
	for (uint32_t i = 0; i < wake->n; i++) {
		struct wlk_seg_request *r = wlk__req(b, wake->idx[i]);

		if (!uatomic_read(&r->sleeping))
			continue;
		sleeper[k] = wake->idx[i];
		name[k] = uatomic_read(&r->mode) == WLK_SHARED
				  ? uatomic_read(&r->name)
				  : WLK_NIL;
		if (ni == WLK_NIL)
			ni = name[k];
		same += name[k] != WLK_NIL && name[k] == ni;
		k++;
	}
	if (same < WLK_BROADCAST_MIN)
		ni = WLK_NIL;
	for (uint32_t i = 0; i < k; i++)
		if (name[i] != ni || ni == WLK_NIL)
			wlk__futex_wake(&wlk__req(b, sleeper[i])->word,
					INT32_MAX);
	if (ni != WLK_NIL)
		broadcast(b, ni);
	for (uint32_t i = 0; i < wake->n_names; i++)
		if (wake->names[i] != ni)
			broadcast(b, wake->names[i]);
}

/*
 * wake_flush() - issue the wake-ups collected in @wake. The slots may
 * have been recycled since the mutex was released; a wake-up of a recycled
 * slot is a spurious one, which every waiter tolerates. A waiter still
 * spinning needs no system call: it marks itself sleeping, then re-reads
 * its word, and we changed the word, then read the mark (both sides with a
 * full barrier between), so one of us sees the other. A broadcast bumps
 * the name's grants word whether or not anyone sleeps: a waiter read it
 * before its last look at its own word, so it sees either.
 */
static void wake_flush(struct wlk__bucket *b, struct wlk__wake *wake)
{
	if (!wake->n && !wake->n_names && !wake->n_reaped && !wake->n_bells &&
	    !wake->sweep && !wake->bell_sweep)
		return; /* the common case: nobody to wake */
	/* Lifelines of reaped agents: let go, then wake all their watchers
	 * (the kernel woke one; a trylock may have dropped FUTEX_WAITERS). */
	for (uint32_t i = 0; i < wake->n_reaped; i++) {
		pthread_mutex_unlock(&wlk__agent(b, wake->reaped[i])->u.lifeline);
		wlk__futex_wake(wlk__lifeline_word(b, wake->reaped[i]),
				INT32_MAX);
	}
	wake->n_reaped = 0;
	for (uint32_t i = 0; i < wake->n_bells; i++)
		bell_ring(b, &wake->bells[i]);
	wake->n_bells = 0;
	if (wake->bell_sweep)
		bell_sweep(b);
	wake->bell_sweep = false;
	if (wake->sweep)
		wake_sweep(b);
	else
		wake_waiters(b, wake);
	wake->n = wake->n_names = 0;
	wake->sweep = false;
}

void wlk__unlock(struct wlk__bucket *b, struct wlk__wake *wake)
{
	pthread_mutex_unlock(&b->hdr->sync.mutex);
	if (wake)
		wake_flush(b, wake);
}
