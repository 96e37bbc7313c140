/* SPDX-License-Identifier: MIT */
/*
 * wait.c - a blocking request's wait for its grant, and a fast waiter's
 * move to the mutex path (wlk__settle()). The thread spins a
 * little, then sleeps on the request's futex word in the segment together
 * with the abort signal's word, the manager's close word and the
 * lifelines of the agents ahead of it (reap.c), until one changes; it
 * gives up on timeout, abort or close. Whoever grants the request changes
 * the word and wakes it.
 */
#include <errno.h>
#include <pthread.h>

#include "shm.h"

/* Under the mutex: reap dead blockers of a pending request, arm the rest. */
static void watch_arm(struct wlk__bucket *b, uint32_t slot, uint32_t gen,
		    struct wlk__wake *wake, struct wlk__watch *w)
{
	struct wlk_seg_request *r = wlk__req(b, slot);

	w->n = 0;
	w->complete = true;
	w->stale = false;
	w->partial = false;
	w->head = false;
	if (r->word == WLK_WORD(gen, WLK_SLOT_PENDING)) {
		const struct wlk_seg_name *nm;

		w->complete = wlk__watch_set(b, slot, wake, w->v,
					     WLK_WATCH_MAX, &w->n);
		w->partial = r->flags & WLK_REQF_PARTIAL;
		/* A scope waits on its lead, in no queue's head (slice.c:
		 * not for scopes). */
		nm = wlk__name_at(b, uatomic_read(&r->name));
		w->head = !(r->flags & WLK_REQF_SCOPE) && nm &&
			  nm->q_head == slot;
	}
}

static int watch_refresh(struct wlk__bucket *b, uint32_t slot, uint32_t gen,
			 struct wlk__watch *w)
{
	struct wlk__wake wake;
	int rc = wlk__lock(b, &wake);

	if (rc)
		return rc;
	watch_arm(b, slot, gen, &wake, w);
	wlk__unlock(b, &wake);
	return 0;
}

/* The request's word, and its value while PENDING: what the spin and
 * the sleep watch; and its name's sleepers (GRANT BROADCAST). */
struct pending {
	const uint32_t *word;
	uint32_t w;
	const uint32_t *sleepers; /* its name's, if shared; or NULL */
};

static bool left_pending(void *arg)
{
	const struct pending *p = arg;

	return wlk__word_load(p->word) != p->w;
}

/* A shared waiter's spin stops once others of its name sleep for the
 * same grant (spin.c's policy). */
static bool others_asleep(void *arg)
{
	const struct pending *p = arg;

	return uatomic_read(p->sleepers) != 0;
}

/* Words one blocked waiter sleeps on: its request's, its name's grants
 * word (if shared), the signal's, and the blockers' lifelines. A close
 * wakes it on its own word (engine.c, shm_close()). */
#define WAIT_WORDS (3 + WLK_WATCH_MAX)

/*
 * The futex words to sleep on while the request is PENDING as @w: its
 * word, its name's grants word as @g (if @nm: a shared request's sound
 * name entry, layout.h, GRANT BROADCAST), the signal's, the blockers'
 * lifelines; each read before its condition (the grants word before the
 * caller's last look at its word), so that a change between the two makes
 * the wait return at once. Each word costs the sleep and the wake-up, so
 * the manager's close has none: it wakes its waiters on their own words,
 * after it set closed, which is read here last. Return: 0 with *@n words
 * in @v, or the reason to give up now (the signal's, WLK_ESTATE).
 */
static int wait_words(struct wlk__shm_manager *m, uint32_t *word, uint32_t w,
		      struct wlk_seg_name *nm, uint32_t g,
		      struct wlk_signal *sig, const struct wlk__watch *watch,
		      struct wlk__waitv *v, unsigned int *n)
{
	*n = 0;
	v[(*n)++] = (struct wlk__waitv){word, w};
	if (nm)
		v[(*n)++] = (struct wlk__waitv){&nm->grants, g};
	if (sig) {
		v[(*n)++] = (struct wlk__waitv){&sig->word,
						uatomic_read(&sig->word)};
		cmm_smp_mb();
		if (uatomic_read(&sig->reason))
			return uatomic_read(&sig->reason);
	}
	cmm_smp_mb();
	if (uatomic_read(&m->pub.closed))
		return WLK_ESTATE;
	for (unsigned int i = 0; i < watch->n; i++)
		v[(*n)++] = watch->v[i];
	return 0;
}

/* sleep_on()'s "did not sleep": outside the errno space it also returns. */
#define WORD_MOVED 1

/*
 * Sleep on the words @v (@n of them, the name's grants word among them
 * as @g if @nm) until @until. The waiter marks itself sleeping, and
 * counts itself among the name's sleepers, then looks at its word once
 * more: the granter changes the word, then reads the mark (mutex.c).
 * Woken by a broadcast while others still sleep, it passes it on to them
 * all unless that was done already, and then says so (layout.h, GRANT
 * BROADCAST): marked after the wake, so that a passer killed before it
 * leaves the others to do it. Return: as wlk__futex_wait(), or
 * WORD_MOVED: the word changed before it slept.
 */
static int sleep_on(struct wlk_seg_request *r, uint32_t w,
		    struct wlk_seg_name *nm, uint32_t g, struct wlk__waitv *v,
		    unsigned int n, uint64_t until)
{
	int rc = WORD_MOVED;
	uint32_t now_g;

	uatomic_set(&r->sleeping, 1);
	if (nm)
		uatomic_inc(&nm->sleepers);
	cmm_smp_mb();
	if (wlk__word_load(&r->word) == w)
		rc = wlk__futex_wait(v, n, until);
	uatomic_set(&r->sleeping, 0);
	if (!nm)
		return rc;
	uatomic_dec(&nm->sleepers);
	now_g = uatomic_read(&nm->grants);
	if (now_g != g && uatomic_read(&nm->sleepers) &&
	    uatomic_read(&nm->passed) != now_g) {
		wlk__futex_wake(&nm->grants, INT32_MAX);
		uatomic_set(&nm->passed, now_g);
	}
	return rc;
}

/* A blocker's lifeline changed: it died or let go. The kernel woke one
 * watcher; pass it on at once, and look again. */
static void lifelines_pass_on(struct wlk__watch *watch)
{
	for (unsigned int i = 0; i < watch->n; i++) {
		if (uatomic_read(watch->v[i].word) != watch->v[i].val) {
			wlk__futex_wake(watch->v[i].word, INT32_MAX);
			watch->stale = true;
		}
	}
}

/*
 * Sleep until the request leaves PENDING. Return: 0 once it has (granted,
 * stolen or dropped: the caller reads the word), or the reason to give up:
 * the signal's reason, WLK_ETIMEDOUT or WLK_ESTATE (manager closed), or an
 * error from the segment.
 */
static int wait_grant(struct wlk__shm_manager *m, uint32_t slot, uint32_t gen,
		    struct wlk_signal *sig, uint64_t deadline,
		    struct wlk__watch *watch, struct wlk__slice *slice)
{
	struct wlk_seg_request *r = wlk__req(m->b, slot);
	uint32_t *word = &r->word;
	/* Its name, read once: fixed while the request is pending. Only a
	 * shared request may be granted in a batch: an exclusive one sleeps
	 * without the name's grants word, one futex word fewer (layout.h,
	 * GRANT BROADCAST). */
	struct wlk_seg_name *nm =
		uatomic_read(&r->mode) == WLK_SHARED
			? wlk__name_at(m->b, uatomic_read(&r->name))
			: NULL;
	struct pending p = {word, WLK_WORD(gen, WLK_SLOT_PENDING),
			    nm ? &nm->sleepers : NULL};

	/* A grant that comes while spinning costs no system call on either
	 * side (the granter skips the wake of a waiter not marked
	 * sleeping). A shared waiter stops early once others of its name
	 * sleep: their grant comes as a broadcast, which wakes it too, and
	 * the CPU is better left to the holder (1000 shared waiters of one
	 * process on one CPU, each spinning its whole budget as it queued,
	 * were all granted in 1.41x-1.52x the anchor's time, against
	 * 1.11x-1.40x with the early stop: bench scale_shared, 8
	 * interleaved runs each). Never past the deadline: a timeout
	 * shorter than the spin ends on time. */
	uint64_t spin = WLK_SPIN_NS;
	/* When a sleep first in the queue asks for a short slice (slice.c):
	 * 0 until it is first; UINT64_MAX (past any clock reading) once it
	 * has asked, or if it never will. */
	uint64_t shorten = 0;

	if (deadline) {
		uint64_t t0 = wlk__now_ns();

		if (deadline < t0 + spin)
			spin = deadline > t0 ? deadline - t0 : 0;
	}
	if (spin && wlk__spin(left_pending, nm ? others_asleep : NULL, &p,
			      spin))
		return 0;
	for (;;) {
		struct wlk__waitv v[WAIT_WORDS];
		unsigned int n;
		uint64_t until = deadline, now, recheck;
		uint32_t w = wlk__word_load(word), g;
		int rc;

		if (w != p.w)
			return 0;
		if (watch->stale) {
			rc = watch_refresh(m->b, slot, gen, watch);
			if (rc)
				return rc;
			continue;
		}
		g = nm ? uatomic_read(&nm->grants) : 0;
		rc = wait_words(m, word, w, nm, g, sig, watch, v, &n);
		if (rc)
			return rc;
		now = wlk__now_ns();
		if (deadline && now >= deadline)
			return WLK_ETIMEDOUT;
		if (watch->head && !shorten)
			shorten = wlk__slice_when(now);
		if (shorten && now >= shorten) {
			wlk__slice_shorten(slice);
			shorten = UINT64_MAX;
		}
		recheck = now + (watch->complete ? WLK_SAFETY_RECHECK_NS
						 : WLK_RECHECK_NS);
		if (shorten && shorten < recheck)
			recheck = shorten;
		if (!until || recheck < until)
			until = recheck;
		rc = sleep_on(r, w, nm, g, v, n, until);
		if (rc == WORD_MOVED || (rc == -ETIMEDOUT && until == shorten))
			continue;
		/* A waiter watching the agents nearest the head as they were
		 * is woken to look again when it reaches it (reap.c). */
		if ((rc == -ETIMEDOUT && until != deadline) ||
		    (rc == 0 && watch->partial))
			watch->stale = true;
		lifelines_pass_on(watch);
	}
}

/*
 * Release a granted request under the mutex (spec 4.2): for wlk_release(),
 * and for a blocking or asynchronous request granted after it gave up.
 * @keep: the slot goes back to its client's reserve (RESERVED, gen + 1).
 */
int wlk__release_slot(struct wlk__bucket *b, uint32_t slot, uint32_t gen,
		      bool keep)
{
	struct wlk__wake wake;
	int rc = wlk__lock(b, &wake);

	if (rc)
		return rc;
	rc = wlk__release_lock(b, slot, gen, keep, &wake);
	wlk__unlock(b, &wake);
	return rc;
}

/*
 * Give up on a request: abort it if still pending (spec 4.3). @closing: its
 * manager is closing, and this may come before the close drops the
 * client's requests: then its other requests in the queue go too (spec
 * 2.6), or aborting this one could grant the next of them.
 */
static int give_up(struct wlk__bucket *b, uint32_t slot, uint32_t gen,
		 bool closing)
{
	struct wlk__wake wake;
	int rc = wlk__lock(b, &wake);

	if (rc)
		return rc;
	rc = wlk__abort_request(b, slot, gen, closing, &wake);
	wlk__unlock(b, &wake);
	return rc;
}

/*
 * dropped() - why a request of @m is gone from under its waiter: the
 * manager was closed (WLK_ESTATE), which sets m->pub.closed before it drops
 * the client's requests under the segment mutex; or, with the manager
 * open, a repair dropped it as damaged (WLK_ECORRUPT).
 */
static int dropped(struct wlk__shm_manager *m)
{
	return uatomic_read(&m->pub.closed) ? WLK_ESTATE : WLK_ECORRUPT;
}

/*
 * wlk__after_wait() - spec 4.4 step 14, for the blocking wait (below) and
 * the event loop's (async.c) alike: request (@slot, @gen) of @m
 * is no longer waited for. @gave_up: it was still PENDING, and its waiter
 * stops for @why (a signal's reason, WLK_ETIMEDOUT, WLK_EABORTED,
 * WLK_ESTATE): it is withdrawn, unless granted meanwhile. Otherwise @why
 * is what stops it now, if anything. A grant stands against a timeout
 * that came with it or after it (granted in time, noticed late); against
 * anything else it is released (step 14.1: an aborted signal still wins
 * before the callback runs). @closing: the manager is closing (spec 2.6).
 * Return: 0 with the lock held (granted, or stolen since: its release
 * says so), or why not, with nothing left queued or held.
 */
int wlk__after_wait(struct wlk__shm_manager *m, uint32_t slot, uint32_t gen,
		    bool gave_up, int why, bool closing)
{
	struct wlk__bucket *b = m->b;
	uint32_t w;

	if (gave_up) {
		int rc = give_up(b, slot, gen, closing);

		if (rc <= 0)
			return rc ? rc : why;
		/* Granted while giving up. */
	}
	w = wlk__word_load(&wlk__req(b, slot)->word);
	if (WLK_WORD_GEN(w) != gen || WLK_WORD_STATE(w) < WLK_SLOT_HELD)
		return dropped(m);
	if (why == WLK_ETIMEDOUT)
		why = 0;
	if (why)
		wlk__release_slot(b, slot, gen, false);
	return why;
}

/*
 * Wait for the grant of @l's pending request, giving up on the options'
 * timeout (@deadline) or signal. Return: 0 once held, else why not
 * (nothing is left queued or held).
 */
int wlk__wait_for(struct wlk__shm_manager *m, struct wlk__shm_lock *l,
		  const struct wlk_options *o, uint64_t deadline,
		  struct wlk__watch *watch)
{
	uint32_t *word = &wlk__req(m->b, l->slot)->word;
	int why = 0, rc, cancel;

	/* A waiter cancelled (even asynchronously) would leave its request
	 * queued for ever: no cancellation while waiting. */
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	if (wlk__word_load(word) == WLK_WORD(l->gen, WLK_SLOT_PENDING)) {
		struct wlk__slice slice = {.on = false};

		why = wait_grant(m, l->slot, l->gen, o->signal, deadline,
				 watch, &slice);
		wlk__slice_restore(&slice);
	}
	if (why)
		rc = wlk__after_wait(m, l->slot, l->gen, true, why,
				     uatomic_read(&m->pub.closed));
	else
		rc = wlk__after_wait(m, l->slot, l->gen, false,
				     o->signal ? uatomic_read(&o->signal->reason)
					       : 0,
				     false);
	pthread_setcancelstate(cancel, NULL);
	return rc;
}

/*
 * Under the mutex, @l's request just queued: arm the watch of its wait
 * once, here, or, when the waiter spins first, after the spin (a steal
 * during it would add a holder to watch), so that the blockers are probed
 * once per wait, not twice.
 */
void wlk__watch_init(struct wlk__bucket *b, struct wlk__shm_lock *l,
		     struct wlk__wake *wake, struct wlk__watch *watch)
{
	if (!wlk__spin_ok())
		watch_arm(b, l->slot, l->gen, wake, watch);
	else
		*watch = (struct wlk__watch){.n = 0, .complete = true,
					    .stale = true, .partial = false};
}

/*
 * A fast waiter not handed the lock in time, or whose name was inflated
 * under it. Inflating the name (again: idempotent) makes its request an
 * ordinary one, held or first in the queue; a request never adopted (its
 * claim on the waiter word was lost) asks again the mutex way; one
 * dropped meanwhile is gone (dropped()). A request held may have been
 * stolen already: a steal waiting for the mutex when the fast word handed
 * it the name inflates the name first. That is a grant too, as on the
 * mutex path (wlk__wait_for()): the release reports WLK_ESTOLEN and frees
 * the slot. The request stays its lane's claim, as an ordinary request
 * in the lane's slot does (acquire.c).
 * Return: 0 with *@step WLK__STEP_HELD (held or stolen) or _MUTEX (ask
 * again; the lane's slot is back in it), or why not (nothing is left
 * queued or held).
 */
int wlk__settle(struct wlk__shm_manager *m, struct wlk__shm_lock *l,
		enum wlk__step *step)
{
	static const struct wlk_options none; /* fast waiters have none */
	struct wlk__bucket *b = m->b;
	struct wlk_seg_name *n = wlk__name(b, l->fast_name);
	struct wlk__wake wake;
	struct wlk__watch watch;
	uint32_t w;
	int rc = wlk__lock(b, &wake);

	l->laned = true;
	if (rc)
		return rc;
	if (wlk__word_load(&n->word) == WLK_WORD(l->fast_ngen, WLK_SLOT_USED))
		rc = wlk__name_inflate(b, l->fast_name);
	w = wlk__req(b, l->slot)->word;
	if (!rc && w == WLK_WORD(l->gen, WLK_SLOT_FAST)) {
		/* Never adopted: the claim ends, the slot the lane's again. */
		wlk__fast_unclaim_slot(b, &l->claim);
		wlk__unlock(b, &wake);
		l->laned = false;
		wlk__lane_end(m, l->lane, l->slot, l->gen, true, false);
		*step = WLK__STEP_MUTEX;
		return 0;
	}
	if (!rc && w == WLK_WORD(l->gen, WLK_SLOT_PENDING))
		wlk__watch_init(b, l, &wake, &watch);
	wlk__unlock(b, &wake);
	if (rc)
		return rc;
	if (w == WLK_WORD(l->gen, WLK_SLOT_HELD) ||
	    w == WLK_WORD(l->gen, WLK_SLOT_STOLEN)) {
		*step = WLK__STEP_HELD;
		return 0;
	}
	if (w != WLK_WORD(l->gen, WLK_SLOT_PENDING))
		return dropped(m);
	*step = WLK__STEP_HELD;
	return wlk__wait_for(m, l, &none, 0, &watch);
}
