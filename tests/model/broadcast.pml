/* SPDX-License-Identifier: MIT */
/*
 * broadcast.pml - a Promela model of the grant broadcast (layout.h, GRANT
 * BROADCAST; lib/repair/mutex.c's flush and lib/shm/wait.c's sleep_on()):
 * no waiter of a batch grant is left asleep. Run: tests/model/check.sh.
 *
 * What is modelled: NW waiters of one name, each pending on its own word.
 * A waiter reads the name's grants word, marks itself sleeping, counts
 * itself among the sleepers, looks at its word once more, and sleeps on
 * both words (futex_waitv: the kernel checks both values and queues it in
 * one step, and a change of either, or a wake of either, ends the sleep).
 * Woken, it uncounts itself and, if the grants word changed while others
 * still sleep and nobody has passed that change on yet (the name's passed
 * word), wakes every sleeper of the grants word, then marks it passed on.
 * The granter
 * grants every waiter at once (a run of shared requests), then reads the
 * sleeping marks: two or more asleep, it bumps the grants word and wakes
 * FIRST of its sleepers; one, it wakes that one on its own word. Wakes
 * take any sleepers of the word, in no order. FIRST is 1, the smallest:
 * one woken waiter must pass the wake-up on to all the others, and a
 * waiter that finds it marked passed on before it was must not be needed
 * for it.
 *
 * Promela steps are sequentially consistent, so the barriers of the real
 * code (the mark, then the look; the grant, then the read of the mark) are
 * taken as given.
 *
 * What is checked: no state where a waiter sleeps for ever (invalid end
 * states); every waiter ends granted. Not modelled: the 1 s safety
 * recheck (it would hide a lost wake-up), deaths, waiters not granted.
 */

#ifndef NW
#define NW 3
#endif
#define FIRST 1
#define ALL NW	/* FUTEX_WAKE(INT_MAX) */

bool granted[NW];	/* each waiter's request word: PENDING or HELD */
byte grants;		/* the name's grants word */
byte sleepers;		/* the name's sleepers count */
byte passed;		/* the name's last grants value passed on */
bool sleeping[NW];	/* each request's sleeping mark */
/* The kernel's futex queues: who sleeps, and on which words. */
bool inq[NW];
byte qval[NW];		/* the grants value it sleeps on */
byte done;

/* FUTEX_WAKE(grants, n): end the sleep of up to n queued sleepers. */
inline wake_grants(n)
{
	d_step {
		k = 0;
		j = 0;
		do
		:: j < NW && k < n ->
			if
			:: inq[j] -> inq[j] = false; k++
			:: else
			fi;
			j++
		:: else -> break
		od
	}
}

proctype waiter(byte i)
{
	byte g, gn, j, k;

	do
	:: granted[i] -> break
	:: else ->
		g = grants;
		sleeping[i] = true;
		sleepers++;
		if
		:: granted[i] ->
			sleeping[i] = false;
			sleepers--
		:: else ->
			/* futex_waitv: both values checked, then queued, in
			 * one step; a changed value means no sleep. */
			atomic {
				if
				:: !granted[i] && grants == g ->
					inq[i] = true; qval[i] = g
				:: else
				fi
			}
			/* Asleep until a wake takes it off the queue (a
			 * word's change alone wakes nobody). */
			(!inq[i]);
			sleeping[i] = false;
			sleepers--;
			gn = grants;
			if
			:: gn != g && sleepers > 0 && passed != gn ->
				wake_grants(ALL);
				passed = gn
			:: else
			fi
		fi
	od;
	done++
}

proctype granter()
{
	byte j, k, asleep, last;

	/* Under the mutex: grant them all. */
	d_step {
		j = 0;
		do
		:: j < NW -> granted[j] = true; j++
		:: else -> break
		od
	}
	/* After the mutex: read the marks, then wake. */
	asleep = 0;
	j = 0;
	do
	:: j < NW ->
		if
		:: sleeping[j] -> asleep++; last = j
		:: else
		fi;
		j++
	:: else -> break
	od;
	if
	:: asleep >= 2 ->
		grants++;
		wake_grants(FIRST)
	:: asleep == 1 ->
		/* Its own word changed (granted): the futex wakes it. */
		inq[last] = false
	:: else
	fi
}

init {
	byte i;

	atomic {
		i = 0;
		do
		:: i < NW -> run waiter(i); i++
		:: else -> break
		od;
		run granter()
	}
	(done == NW)
}
