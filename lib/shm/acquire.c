/* SPDX-License-Identifier: MIT */
/*
 * acquire.c - the shared-memory engine's blocking request and release
 * (struct wlk__engine's acquire and release).
 *
 * An acquire first tries the uncontended path (lane.c, over the name's
 * fast word); otherwise the request is queued under the segment mutex
 * (spec/ops.c), and its thread waits for the grant (wait.c).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "shm.h"

/*
 * A fast operation returned WLK__FAST_FROZEN: wait for the query copying
 * the bucket to end (layout.h, QUERY); the operation stands. Or, with
 * @token_of, a fast waiter handed its name and then adopted by an
 * inflation before it read its token (WLK__FAST_ADOPTED): the inflation
 * stores the token in slot @slot under the mutex, which is taken here
 * once for it (a dead inflater's work is finished by the repair the lock
 * makes). Out of line: the fast path keeps its small frame. Return: 0, or
 * the lock's error (on which a frozen operation still stands; the next
 * call reports what is wrong with the segment).
 */
static __attribute__((noinline, cold)) int freeze_wait(struct wlk__bucket *b,
							uint64_t *token_of,
							uint32_t slot)
{
	struct wlk__wake wake;
	int rc = wlk__lock(b, &wake);

	if (rc)
		return rc;
	if (token_of)
		*token_of = uatomic_read(&wlk__req(b, slot)->token);
	/* Still set with the mutex ours: its query died copying. */
	if (uatomic_read(&b->hdr->freeze))
		uatomic_set(&b->hdr->freeze, 0);
	wlk__unlock(b, &wake);
	return 0;
}

/* A fast lock released after its manager closed: its slot goes. */
static void discard(struct wlk__bucket *b, uint32_t slot, uint32_t gen)
{
	struct wlk__wake wake;

	if (wlk__lock(b, &wake))
		return;
	wlk__fast_discard(b, slot, gen);
	wlk__unlock(b, &wake);
}

/*
 * release_handle()'s rest, out of line: @l's lock after its fast word's
 * release did @f (WLK__FAST_SLOW: not released there, or not tried), unless
 * that was the common end (released, no query copying, manager open). A
 * lock in a lane's slot ends the lane's claim (wlk__lane_end()), which may
 * drop the manager's last reference: nothing touches @m after it.
 */
static __attribute__((noinline)) int release_rest(struct wlk__shm_lock *l,
						  enum wlk__fast f)
{
	struct wlk__shm_manager *m = wlk__shm_lm(l);
	int rc;

	/* The end of the lane's claim starts here, before its slot changes
	 * (seal.c, PINS); the fast release marked it already. */
	if (l->fast || l->laned)
		uatomic_set(&m->lanes[l->lane].letgo, 1);
	if (caa_unlikely(f == WLK__FAST_FROZEN))
		(void)freeze_wait(m->b, NULL, 0);
	if (f == WLK__FAST_OK || f == WLK__FAST_FROZEN) {
		bool closed = uatomic_read(&m->pub.closed);

		/* Closing: the slot goes with the client. */
		if (closed)
			discard(m->b, l->slot, l->gen);
		wlk__lane_end(m, l->lane, l->slot, l->gen, !closed, true);
		return 0;
	}
	rc = wlk__release_slot(m->b, l->slot, l->gen, l->fast || l->laned);
	if (l->fast || l->laned) {
		/* A slot not kept (closed, stolen, gone) is not the lane's
		 * any more. */
		l->fast = l->laned = false;
		wlk__lane_end(m, l->lane, l->slot, l->gen, rc == 0, true);
	}
	return rc;
}

/*
 * Release @l's lock: by the fast path if it took it that way and its name
 * is still not inflated, else under the mutex. Its lane's slot is RESERVED
 * again, for the lane's next claim. Inline in its callers, and the common
 * end here, without a call: the uncontended release keeps one small
 * frame.
 */
static inline __attribute__((always_inline)) int
release_handle(struct wlk__shm_lock *l)
{
	struct wlk__shm_manager *m = wlk__shm_lm(l);
	struct wlk__lane *lane = &m->lanes[l->lane];
	enum wlk__fast f;

	if (!l->fast)
		return release_rest(l, WLK__FAST_SLOW);
	/* Marked before the fast word's CAS, the full barrier the mark
	 * needs before the look at closed (seal.c, PINS). */
	uatomic_set(&lane->letgo, 1);
	f = wlk__lane_release(l);
	if (caa_unlikely(f != WLK__FAST_OK || uatomic_read(&m->pub.closed)))
		return release_rest(l, f);
	uatomic_set(&lane->letgo, 0);
	return 0;
}

/*
 * Under the mutex: the lane's slot @s, claimed by wlk__lane_offer() (FAST
 * in @gen) and not taken by the request, goes back: RESERVED again while
 * the client lives, else freed (a live owner discards its own). Return:
 * whether it is RESERVED again, still the lane's.
 */
static bool give_back(struct wlk__shm_manager *m, uint32_t s, uint32_t gen)
{
	struct wlk__bucket *b = m->b;

	if (wlk__req(b, s)->word != WLK_WORD(gen, WLK_SLOT_FAST))
		return false;
	if (!wlk__client_live(b, m->client, m->client_gen)) {
		wlk__fast_discard(b, s, gen);
		return false;
	}
	wlk__word_store(&wlk__req(b, s)->word,
			WLK_WORD(gen, WLK_SLOT_RESERVED));
	return true;
}

/* Queue the request and wait for its grant (wait.c). Return: 0 with
 * *@step WLK__STEP_HELD or, for an if_available miss, WLK__STEP_MISS; or an
 * error, nothing held. */
static int obtain(struct wlk__shm_manager *m, struct wlk__shm_lock *l,
		  const struct wlk_options *o, enum wlk__step *step)
{
	struct wlk__bucket *b = m->b;
	struct wlk__wake wake;
	struct wlk__enqueue e = {
		.client = m->client,
		.client_gen = m->client_gen,
		.name = l->pub.name,
		.name_len = (uint32_t)l->pub.name_len,
		.mode = o->mode,
		.if_available = o->if_available,
		.steal = o->steal,
		.detect = m->detect,
		.own = WLK_NIL,
		/* Hashed here, not under the mutex (the fast path did it
		 * already, unless this is a steal). */
		.hash = l->hashed ? l->hash
				  : wlk__name_hash(m->b, l->pub.name,
						  l->pub.name_len),
	};
	uint64_t deadline = wlk__deadline_ns(o->timeout_ns);
	struct wlk__scope_item items[WLK_SCOPE_MAX];
	struct wlk__watch watch;
	bool unused, kept = false;
	int rc;

	if (l->pub.scope)
		wlk__shm_scope_items(m, l, items, &e);
	/* A slot of our own, if a lane has one: no free-list traffic. A
	 * scope's members are never a lane's: they are never fast. */
	else
		(void)wlk__lane_offer(m, l, &e.own, &e.own_gen);
	/* A process stopped inside the critical section must not hold up
	 * the timeout or the signal: they bound the wait for the mutex. */
	rc = wlk__lock_until(b, &wake, deadline,
			     o->signal ? &o->signal->reason : NULL);
	if (rc) {
		if (e.own != WLK_NIL) {
			wlk__word_store(&wlk__req(b, e.own)->word,
					WLK_WORD(e.own_gen, WLK_SLOT_RESERVED));
			wlk__lane_end(m, l->lane, e.own, e.own_gen, true,
				      false);
		}
		return rc;
	}
	rc = wlk__request_reaping(b, &e, &wake, &l->slot, &l->gen);
	unused = e.own != WLK_NIL && (rc != 0 || l->slot != e.own);
	if (e.own != WLK_NIL && !unused)
		l->laned = true; /* the request is the lane's claim now */
	else if (unused)
		kept = give_back(m, e.own, e.own_gen);
	if (rc >= 0)
		wlk__lane_fill(m);
	if (rc == 0 && l->pub.scope)
		wlk__shm_scope_members(l, items);
	if (rc == 0)
		wlk__watch_init(b, l, &wake, &watch);
	wlk__unlock(b, &wake);
	if (unused)
		wlk__lane_end(m, l->lane, e.own, e.own_gen, kept, false);
	if (rc == WLK__UNAVAILABLE)
		*step = WLK__STEP_MISS;
	if (rc)
		return rc == WLK__UNAVAILABLE ? 0 : rc;
	*step = WLK__STEP_HELD;
	return wlk__wait_for(m, l, o, deadline, &watch);
}

/*
 * The end of fast() once @l holds: the checks a grant gets on the slow
 * path, a manager closed meanwhile, a signal aborted meanwhile (spec 4.4
 * step 14.1), unless @why (nonzero) failed it already; a failed grant is
 * released. Return: 0, or the error.
 */
static inline int granted(struct wlk__shm_manager *m, struct wlk__shm_lock *l,
			  const struct wlk_options *o, int why)
{
	if (!why && uatomic_read(&m->pub.closed))
		why = WLK_ESTATE;
	if (!why && o->signal)
		why = uatomic_read(&o->signal->reason);
	if (caa_likely(!why))
		return 0;
	wlk__shm_release(&l->pub);
	return why;
}

/*
 * The uncontended path (lane.c), with the checks a grant gets on the slow
 * path: a manager closed meanwhile, a signal aborted meanwhile (spec 4.4
 * step 14.1). A request with neither timeout nor signal may also wait
 * there as the name's fast waiter, on a machine where spinning pays.
 * Return: 0 with *@step WLK__STEP_HELD (@l holds), _MUTEX (request it
 * under the mutex) or _SETTLE (a fast waiter not handed the name); or an
 * error, nothing held.
 */
static int fast(struct wlk__shm_manager *m, struct wlk__shm_lock *l,
		const struct wlk_options *o, enum wlk__step *step)
{
	/* Not with a bound on the wait: a fast waiter spins. */
	bool may_wait = m->fast_wait && !o->signal && !o->timeout_ns &&
			!o->if_available;
	enum wlk__fast f = wlk__lane_acquire(m, l, may_wait);
	int why;

	*step = WLK__STEP_HELD;
	if (caa_likely(f == WLK__FAST_OK)) /* no query copying: the checks */
		return granted(m, l, o, 0);
	*step = WLK__STEP_SETTLE;
	if (f == WLK__FAST_WAITING) {
		f = wlk__lane_await(l);
		if (f == WLK__FAST_SLOW)
			return 0;
	}
	*step = WLK__STEP_MUTEX;
	if (f == WLK__FAST_SLOW)
		return 0;
	*step = WLK__STEP_HELD;
	if (f == WLK__FAST_FROZEN)
		(void)freeze_wait(m->b, NULL, 0);
	why = f == WLK__FAST_ADOPTED
		      ? freeze_wait(m->b, &l->pub.token, l->slot)
		      : 0;
	return granted(m, l, o, why);
}

/*
 * @l's request was granted on the mutex path (or settled): take its token,
 * and, if it was granted through the fast word (queue.c), the name entry it
 * is released by there. That index is read from the segment, so it is
 * bounded here, once: a damaged one would send the release, and the waits
 * of later fast waiters on it, anywhere. Return: 0, or WLK_ECORRUPT with
 * the slot freed (the repair then takes the name's fast word back from
 * it).
 */
static int take_grant(struct wlk__shm_manager *m, struct wlk__shm_lock *l)
{
	struct wlk_seg_request *r = wlk__req(m->b, l->slot);
	uint32_t ni;

	l->pub.token = uatomic_read(&r->token);
	if (l->pub.scope)
		wlk__shm_scope_tokens(m->b, l);
	if (wlk__word_load(&r->word) != WLK_WORD(l->gen, WLK_SLOT_FAST))
		return 0;
	ni = uatomic_read(&r->name);
	if (!wlk__name_at(m->b, ni)) {
		wlk__release_slot(m->b, l->slot, l->gen, false);
		return wlk__corrupt(m->b);
	}
	l->fast = true;
	l->fast_name = ni;
	l->fast_ngen = uatomic_read(&r->name_gen);
	return 0;
}

/*
 * The rest of an acquire, after the fast path (@step from it) or for a
 * steal: a fast waiter's settling, or the mutex path, then the grant.
 */
static __attribute__((noinline)) int
acquire_slow(struct wlk__shm_manager *m, struct wlk__shm_lock *l,
	     const struct wlk_options *o, enum wlk__step step, bool *held)
{
	int rc = 0;

	if (step == WLK__STEP_SETTLE)
		rc = wlk__settle(m, l, &step);
	if (!rc && step == WLK__STEP_MUTEX)
		rc = obtain(m, l, o, &step);
	if (!rc && step == WLK__STEP_HELD)
		rc = take_grant(m, l);
	if ((rc || step != WLK__STEP_HELD) && l->laned) { /* its slot went */
		l->laned = false;
		wlk__lane_end(m, l->lane, l->slot, l->gen, false, false);
	}
	if (!rc)
		*held = step == WLK__STEP_HELD;
	return rc;
}

/*
 * wlk__shm_acquire() - struct wlk__engine's acquire: the fast path, and
 * what follows when it does not grant.
 */
int wlk__shm_acquire(struct wlk_manager *pub, struct wlk_lock *lpub,
		     const struct wlk_options *o, bool *held)
{
	struct wlk__shm_manager *m = wlk__shm_m(pub);
	struct wlk__shm_lock *l = wlk__shm_l(lpub);
	enum wlk__step step = WLK__STEP_MUTEX;
	int rc;

	wlk__shm_lock_init(l);
	rc = o->steal || lpub->scope ? 0 : fast(m, l, o, &step);
	if (rc)
		return rc;
	if (step == WLK__STEP_HELD) {
		*held = true; /* counted, or kept by its lane (lane.c) */
		return 0;
	}
	/* Beyond the uncontended path: the wait may outlast a close. */
	if (!lpub->counted)
		wlk__lock_count(lpub);
	return acquire_slow(m, l, o, step, held);
}

/* wlk__shm_release() - struct wlk__engine's release. */
int wlk__shm_release(struct wlk_lock *pub)
{
	struct wlk__shm_lock *l = wlk__shm_l(pub);

	return release_handle(l);
}
