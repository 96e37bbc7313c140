/* SPDX-License-Identifier: MIT */
/*
 * seal.c - a manager's lanes (lane.c) as the manager closes: how the
 * locks the fast path took, which hold no reference to their manager,
 * keep it until their release.
 *
 * PINS (engine.h). A claim of a lane's slot keeps the manager: a lock the
 * fast path took holds no reference to it. Close adds one reference per
 * lane, stores CLOSED (full barrier), then closes the lanes: under the
 * mutex before the client's slots are taken back, while a slot still
 * shows whether a lock holds it (wlk__lane_seal_claims()), and after
 * (wlk__lane_seal()). Only the closer closes a lane (close_lane()): READY
 * to SEALING by CAS, a look at the slot, then DEAD, the closer dropping
 * the lane's reference; or, if the slot is claimed (this client's,
 * neither RESERVED nor FREE), OWED with the claim's gen in @owed_gen: the
 * end of that claim alone turns it DEAD and drops the reference
 * (settle_owed()). A lane with a lock's end under way (@letgo below) is
 * left CLOSING under the mutex, and turned DEAD by the seal once that end
 * is over. Every lane is turned DEAD once, by one CAS.
 *
 * Why no claim is missed: a claim is checked after its CAS (a full
 * barrier): it reads the lane again (wlk__fast_claim_slot()'s guard) and
 * gives the slot back unless the lane is still READY with it. SEALING is
 * a CAS, a full barrier, before the look at the slot. So a claim either
 * shows in that look, or sees SEALING and is given back.
 *
 * Why no end is missed: an end gives the slot back, then reads closed.
 * The end of a lock held through the lane has no barrier between the two
 * (the uncontended release has one locked instruction, the fast word's
 * CAS, before both), so the read may come first: it marks the lane
 * (@letgo) before that CAS and clears the mark last. A closer that finds
 * no mark looks at the slot after the end's mark, so the end's read of
 * closed, after its barrier, sees CLOSED and settles an OWED lane; a
 * closer that finds the mark leaves the lane CLOSING (under the mutex) or
 * waits for the mark to clear (the seal), and the seal waits for every
 * mark before close drops the user's reference: the mark also keeps the
 * manager while the end runs. The marks of two ends never overlap: a
 * claim's check also wants @letgo clear (one 64-bit read with the lane's
 * word), so a second lock cannot be taken in the lane while the first
 * one's end is under way. Every other end (a claim given back at once, a
 * request's slot) holds a reference of its own, makes a full barrier
 * between the two, and leaves @letgo alone.
 */
#include <sched.h>

#include "shm.h"

/* Pauses a lane's closer makes for a step under way before it yields. */
#define SEAL_SPINS 1024u

/* A closer's pause while another step on a lane is under way. */
static void pause_for(unsigned int spins)
{
	if (spins < SEAL_SPINS && wlk__spin_ok())
		caa_cpu_relax();
	else
		sched_yield();
}

/*
 * Whether slot @s is claimed, this client's and neither RESERVED nor FREE:
 * a lock or a request of @m's in it may still be ended by its thread (a
 * fast one, or one the mutex side took over since). Its gen then in
 * *@gen. Before the client's slots go (wlk__lane_seal_claims()), that is
 * so for every lock handle of the lane; after, the slots are free.
 */
static bool claimed(struct wlk__shm_manager *m, uint32_t s, uint32_t *gen)
{
	uint32_t w;

	if (!wlk__slot_ours(m, s, &w) || WLK_WORD_STATE(w) == WLK_SLOT_FREE ||
	    WLK_WORD_STATE(w) == WLK_SLOT_RESERVED)
		return false;
	*gen = WLK_WORD_GEN(w);
	return true;
}

/*
 * close_lane() - the closer's step on @lane, @m CLOSED (PINS above): DEAD
 * with the drop, OWED to the claim of its slot, or, @locked (under the
 * segment mutex, where it may not wait) and with a lock's end under way,
 * CLOSING: the seal's, once that end is over. Without @locked it waits
 * for such an end, and for a fill. Return: whether the caller drops the
 * reference close counted for the lane.
 */
static bool close_lane(struct wlk__shm_manager *m, struct wlk__lane *lane,
		       bool locked)
{
	for (unsigned int spins = 0;; spins++) {
		struct wlk__lane now;
		uint32_t s, cgen;

		now.guard = uatomic_read(&lane->guard);
		s = WLK__LANE_SLOT(now.word);
		switch (WLK__LANE_KIND(now.word)) {
		case WLK_LANE_DEAD:
		case WLK_LANE_OWED:
			return false;
		case WLK_LANE_EMPTY:
			break;
		case WLK_LANE_READY:
			if (now.letgo && locked) {
				/* The end's mark still set in the same CAS:
				 * no lock can be taken in the lane since. */
				struct wlk__lane to = now;

				to.word = WLK__LANE(s, WLK_LANE_CLOSING);
				if (uatomic_cmpxchg(&lane->guard, now.guard,
						    to.guard) == now.guard)
					return false;
				continue;
			}
			if (now.letgo)
				goto wait;
			if (uatomic_cmpxchg(&lane->word, now.word,
					    WLK__LANE(s, WLK_LANE_SEALING)) !=
			    now.word)
				continue;
			/* The CAS is a full barrier: a claim made after it
			 * sees SEALING and is given back; one made before
			 * shows in this look. */
			if (claimed(m, s, &cgen)) {
				uatomic_set(&lane->owed_gen, cgen);
				cmm_smp_wmb(); /* the gen before the word */
				uatomic_set(&lane->word,
					    WLK__LANE(s, WLK_LANE_OWED));
				return false;
			}
			uatomic_set(&lane->word, WLK__LANE(0, WLK_LANE_DEAD));
			return true;
		case WLK_LANE_CLOSING:
			if (!now.letgo)
				break;
			goto wait;
		default: /* FILL, under the mutex, so never when @locked
			  * (SEALING is only ever the closer's own) */
			if (locked)
				return false;
			goto wait;
		}
		if (uatomic_cmpxchg(&lane->word, now.word,
				    WLK__LANE(0, WLK_LANE_DEAD)) == now.word)
			return true;
		continue;
wait:
		pause_for(spins);
	}
}

/*
 * wlk__lane_settle_owed() - a claim's end that saw CLOSED (lane.c,
 * wlk__lane_end()): whether the closer left the lane OWED to
 * this claim (slot @slot, gen @gen); the lane is DEAD then, and the caller
 * drops its reference. The closer's look at the slot is a few
 * instructions: waited for.
 */
bool wlk__lane_settle_owed(struct wlk__lane *lane, uint32_t slot,
			   uint32_t gen)
{
	uint32_t owed = WLK__LANE(slot, WLK_LANE_OWED), w;

	for (unsigned int spins = 0;
	     WLK__LANE_KIND(w = uatomic_read(&lane->word)) ==
	     WLK_LANE_SEALING;
	     spins++)
		pause_for(spins);
	cmm_smp_rmb(); /* the word, then the gen stored before it */
	return w == owed && uatomic_read(&lane->owed_gen) == gen &&
	       uatomic_cmpxchg(&lane->word, owed,
			       WLK__LANE(0, WLK_LANE_DEAD)) == owed;
}

/*
 * wlk__lane_seal_claims() - under the mutex, as @m closes, before its
 * client's slots are taken back (which frees the slots of its locks):
 * each lane is closed now, while its slot still shows whether a lock
 * holds it (PINS above); a lane with a lock's end under way is left
 * CLOSING to the seal.
 */
void wlk__lane_seal_claims(struct wlk__shm_manager *m)
{
	unsigned long spare = 0;

	for (unsigned int i = 0; i < WLK_LANES; i++)
		if (close_lane(m, &m->lanes[i], true))
			spare++;
	/* Never the last reference: close holds the user's. */
	if (spare)
		uatomic_sub(&m->pub.refs, spare);
}

/*
 * wlk__lane_seal() - struct wlk__engine's seal for @m (PINS above): each
 * lane's lock ends under way are waited for (the lock holds no reference
 * of its own; close drops the user's next), and each lane not closed yet
 * is closed. Never the last reference: close holds the user's.
 */
void wlk__lane_seal(struct wlk__shm_manager *m)
{
	unsigned long spare = 0;

	for (unsigned int i = 0; i < WLK_LANES; i++) {
		struct wlk__lane *lane = &m->lanes[i];

		/* An end between its mark and its clear: a few
		 * instructions, or a wait for the mutex. */
		for (unsigned int spins = 0; uatomic_read(&lane->letgo);
		     spins++)
			pause_for(spins);
		if (close_lane(m, lane, false))
			spare++;
	}
	if (spare)
		uatomic_sub(&m->pub.refs, spare);
}
