/* SPDX-License-Identifier: MIT */
/*
 * lanes.pml - a Promela model of how a lane keeps its manager (PINS in
 * lib/shm/seal.c and lib/engine/engine.h): fast locks taken by claiming a
 * lane's request slot, given back at their release, and a close that
 * counts one reference for the lane and then seals it, in two places
 * (under the mutex before the client's slots go, and after). Run:
 * tests/model/check.sh.
 *
 * What is modelled: one lane with one slot, NT threads of the manager
 * taking a fast lock in it and releasing it, and the closer. The slot's
 * word (RESERVED, FAST, FREE and a gen modulo G) and the lane's word are
 * CASed in atomic steps, as in the library. Promela steps are
 * sequentially consistent; the one reordering x86 allows that matters
 * here, a release's look at closed made before its store that gives the
 * slot back is visible (a load passing an earlier store), is modelled by
 * letting the two happen in either order. Every other pair the protocol
 * orders has a full barrier between (a CAS, or cmm_smp_mb()). The closer
 * frees a claimed slot, or leaves it, as the client's drop does for a
 * lock and for an acquire in flight.
 *
 * What is checked: the reference close counted for the lane is dropped
 * exactly once, by whoever turns the lane DEAD, so that the manager is
 * freed in the end; it is never freed while a thread that holds a fast
 * lock through the lane may still touch it (until its release's end);
 * and no state where someone waits for ever. Not
 * modelled: the mutex path's use of the lane's slot (those requests hold
 * a reference of their own), several lanes, the fill.
 */

#ifndef NT
#define NT 2
#endif
/* Claims in all: the gens (modulo G) never wrap around within one run,
 * as 29 bits do not within one end of a claim in the library. */
#ifndef CLAIMS
#define CLAIMS 5
#endif
#define G (CLAIMS + 1)

mtype = { RESERVED, FAST, FREE };                 /* slot states */
mtype = { READY, SEALING, OWED, CLOSING, DEAD, EMPTY }; /* lane kinds */

mtype slot = RESERVED;
byte sgen = 0;
mtype lane = READY;
byte owed_gen = 0;
bit letgo = 0;
bit closed = 0;
byte refs = 1;    /* the user's; close adds the lane's */
bit freed = 0;    /* the manager's memory */
byte drops = 0;   /* the lane's reference, dropped */
byte claims = 0;  /* made so far */
byte holders = 0; /* threads holding a fast lock through the lane, until
		   * their last touch of the manager */
byte done = 0;    /* threads and closer finished */

/*
 * close_lane(): the closer's step on the lane: DEAD (DROP set), OWED to
 * the claim of its slot, or, LOCKED (under the mutex, no waiting) with a
 * lock's end under way, CLOSING for the seal. The look at the lane (word
 * and mark at once) and the CAS to SEALING are two steps, as in the
 * library.
 */
inline close_lane(LOCKED, DROP)
{
	DROP = 0;
	do
	:: atomic {
		if
		:: lane == DEAD || lane == OWED -> break
		:: lane == EMPTY -> lane = DEAD; DROP = 1; break
		:: lane == CLOSING && !letgo -> lane = DEAD; DROP = 1; break
		:: lane == CLOSING && letgo -> skip /* the seal waits */
		:: lane == READY && letgo && LOCKED -> lane = CLOSING; break
		:: lane == READY && letgo && !LOCKED -> skip
		:: lane == READY && !letgo -> sealing = 1
		fi
	   };
	   if
	   :: sealing ->
		atomic {
			if
			:: lane == READY -> lane = SEALING
			:: else -> sealing = 0 /* changed: look again */
			fi
		};
		if
		:: sealing ->
			/* The look at the slot. */
			atomic {
				if
				:: slot == FAST -> owed_gen = sgen; lane = OWED
				:: else -> lane = DEAD; DROP = 1
				fi;
				sealing = 0
			};
			break
		:: else -> skip
		fi
	   :: else -> skip
	   fi
	od
}

/* One reference dropped if DROP; the manager is freed with the last. */
inline drop_ref(DROP)
{
	if
	:: DROP ->
		atomic {
			drops++;
			refs--;
			if
			:: refs == 0 -> freed = 1
			:: else -> skip
			fi
		}
	:: else -> skip
	fi
}

/*
 * wlk__lane_end() (lane.c): a claim ended (the slot given back, or
 * freed: KEPT 0).
 * MARKED: the end of a lock held through the lane, which set the mark
 * before the slot was given back and clears it here; it uses the manager
 * until then (or until its drop). Any other end holds a reference of its
 * own and is not a holder.
 */
/* The slot given back, if the claim MY still has it. */
inline give_back(MY)
{
	atomic {
		if
		:: slot == FAST && sgen == MY -> slot = RESERVED
		:: else -> skip
		fi
	}
}

inline lane_end(MYGEN, KEPT, MARKED, DROP)
{
	if
	:: !KEPT -> atomic { if :: lane == READY -> lane = EMPTY :: else -> skip fi }
	:: else -> skip
	fi;
	DROP = 0;
	if
	:: closed ->
		/* settle_owed(): the closer's look is waited for. */
		(lane != SEALING);
		atomic {
			if
			:: lane == OWED && owed_gen == MYGEN -> lane = DEAD; DROP = 1
			:: else -> skip
			fi
		}
	:: else -> skip
	fi;
	/* Its last touch of the manager: clearing the mark, or the drop. */
	atomic {
		if
		:: MARKED -> letgo = 0
		:: else -> skip
		fi;
		if
		:: MARKED && !DROP -> holders--
		:: else -> skip
		fi
	};
	atomic {
		if
		:: MARKED && DROP -> holders--
		:: else -> skip
		fi;
		drop_ref(DROP)
	}
}

proctype thread()
{
	byte g, my;
	bit c, drop, ok;

	do
	:: closed -> break
	:: !closed ->
		/* Pick and claim: RESERVED in the gen seen, to FAST. */
		atomic {
			if
			:: lane == READY && slot == RESERVED &&
			   claims < CLAIMS ->
				claims++;
				g = sgen;
				slot = FAST;
				sgen = (sgen + 1) % G;
				my = sgen;
				ok = 1
			:: else -> ok = 0
			fi
		};
		if
		:: !ok -> goto next /* the mutex path, counted */
		:: else -> skip
		fi;
		/* The guard: the lane still READY with the slot, and no
		 * lock's end under way in it. */
		atomic {
			if
			:: lane == READY && !letgo -> holders++; ok = 1
			:: else -> ok = 0
			fi
		};
		if
		:: !ok ->
			/* Given back, then a full barrier before the looks:
			 * no reordering. */
			give_back(my);
			lane_end(my, 1, 0, drop);
			goto next
		:: else -> skip
		fi;
		/* Held (granted() may release it at once if closed). The
		 * release: mark, the fast word's CAS (a full barrier), the
		 * slot given back and closed read in either order. */
		letgo = 1;
		if
		:: give_back(my);
		   c = closed
		:: c = closed;
		   give_back(my)
		fi;
		if
		:: !c ->
			atomic { letgo = 0; holders-- }
		:: c ->
			/* release_rest(): the slot discarded, then the end. */
			atomic { if :: slot == RESERVED -> slot = FREE :: else -> skip fi };
			lane_end(my, 0, 1, drop)
		fi;
next:		skip
	od;
	done++
}

proctype closer()
{
	bit drop, sealing;

	refs++; /* the lane's, counted before CLOSED */
	closed = 1;
	/* Under the mutex: the lane, then the client's slots go: a
	 * reserved one is freed, a claimed one freed (a lock released) or
	 * left (an acquire in flight). */
	close_lane(1, drop);
	drop_ref(drop);
	atomic {
		if
		:: slot == RESERVED -> slot = FREE
		:: slot == FAST -> slot = FREE
		:: slot == FAST -> skip
		:: else -> skip
		fi
	};
	/* The seal: the ends under way, then the lane. */
	(letgo == 0);
	close_lane(0, drop);
	drop_ref(drop);
	/* The user's reference goes last. */
	drop_ref(1);
	done++
}

/* Never is the manager freed under a lock the lane keeps. */
active proctype monitor()
{
	assert(!(freed && holders > 0))
}

init
{
	byte i;

	atomic {
		for (i : 1 .. NT) {
			run thread()
		};
		run closer()
	};
	(done == NT + 1);
	/* The user's and the lane's: each once, and nothing kept. */
	assert(drops == 2 && freed)
}
