/* SPDX-License-Identifier: MIT */
/*
 * scope.pml - a Promela model of the scope grant rule (layout.h, SCOPES;
 * lib/spec/queue.c's wlk__process_queue(), lib/spec/scope.c): requests for
 * sets of names, queued per name, are granted all at once, never in part,
 * never beside a conflicting holder, and never left waiting when nothing
 * holds them up. Run: tests/model/check.sh.
 *
 * What is modelled: two names and NR requesters. Each requester asks,
 * ROUNDS times, for its scope (a set of the names) in its mode, waits for
 * the grant, holds, and releases. Each request's scope and mode are
 * chosen nondeterministically from every combination (a single name is a
 * scope of one), so one search covers them all. Every operation of
 * the library runs under the segment mutex, so each is one atomic step
 * here: request (append a member to each name's queue, then grant the
 * scope if every member is clear), release (leave every held set, then
 * process the queue of each of its names). Process the queue is the
 * library's walk: from the head, stop at a request whose name's held set
 * it conflicts with, or at an exclusive one once something was passed
 * over; grant a request whose every member is clear (the draft's rule);
 * pass over a shared one that is not.
 *
 * What is checked: no name ever has an exclusive holder beside another
 * holder; a requester holds either all of its names or none; no state
 * where every unfinished requester waits (invalid end states: a grantable
 * request left waiting, or a cycle); and the draft's rule, both ways: the
 * walk grants only what it allows, and after every step no request still
 * queued is one it allows.
 * Not modelled: deaths (recovery redoes a grant or drop whole, from the
 * intent record), steal, abort (a drop, like a release of pending
 * members), the fast path (never taken by a name with a scope member).
 */

#define NN 2 /* names */
/* Four requesters, one request each: the fewest in which a request is
 * passed over on one name while another name holds it up, with an
 * exclusive one behind it and a holder that releases (a smaller model
 * misses a walk that grants past the rule). About 11 million states. */
#ifndef NR
#define NR 4 /* requesters */
#endif
#ifndef ROUNDS
#define ROUNDS 1
#endif
#define NONE 255

byte want[NR];     /* bit mask of names */
bool excl[NR];     /* its mode */
byte state[NR];    /* 0 idle, 1 pending, 2 held */
byte q[NN * NR];   /* per name, a FIFO of requesters: q[n * NR + i] */
byte qlen[NN];
byte nexcl[NN], nshared[NN];
byte finished;

#define Q(n, i) q[(n) * NR + (i)]
#define HAS(r, n) ((want[r] >> (n)) & 1)

/* Whether requester r's member on name n is clear (wlk__member_clear). */
inline member_clear(r, n, ok)
{
	ok = true;
	if
	:: excl[r] -> ok = (qlen[n] > 0 && Q(n, 0) == r && nexcl[n] == 0 &&
			    nshared[n] == 0)
	:: else ->
		if
		:: nexcl[n] > 0 -> ok = false
		:: else ->
			k = 0;
			do
			:: k < qlen[n] && Q(n, k) != r ->
				if
				:: excl[Q(n, k)] -> ok = false
				:: else -> skip
				fi;
				k++
			:: else -> break
			od
		fi
	fi
}

/* Whether every member of r is clear (scope.c, members_clear()). */
inline scope_clear(r, ok)
{
	ok = true;
	m = 0;
	do
	:: m < NN ->
		if
		:: HAS(r, m) && ok -> member_clear(r, m, ok)
		:: else -> skip
		fi;
		m++
	:: else -> break
	od
}

/* Take r out of name n's queue. */
inline dequeue(r, n)
{
	k = 0;
	do
	:: k < qlen[n] && Q(n, k) != r -> k++
	:: else -> break
	od;
	assert(k < qlen[n]);
	do
	:: k + 1 < qlen[n] -> Q(n, k) = Q(n, k + 1); k++
	:: else -> break
	od;
	qlen[n]--;
	Q(n, qlen[n]) = NONE
}

/* Grant r on every name at once (wlk__scope_grant). */
inline grant(r)
{
	m = 0;
	do
	:: m < NN ->
		if
		:: HAS(r, m) ->
			dequeue(r, m);
			if
			:: excl[r] -> nexcl[m]++
			:: else -> nshared[m]++
			fi
		:: else -> skip
		fi;
		m++
	:: else -> break
	od;
	state[r] = 2
}

/* wlk__process_queue() of name n. */
inline process(n)
{
	i = 0;
	first = true;
	do
	:: i < qlen[n] ->
		e = Q(n, i);
		if
		:: (excl[e] && (nexcl[n] + nshared[n] > 0 || !first)) ||
		   (!excl[e] && nexcl[n] > 0) -> break
		:: else -> skip
		fi;
		/* The library checks only a scope's members; a single
		 * name that got this far is clear (the walk's conditions
		 * above are its rule). The model checks that at the grant. */
		if
		:: want[e] == 3 -> scope_clear(e, ok)
		:: else -> ok = true
		fi;
		if
		:: ok -> scope_clear(e, ok); assert(ok);
			grant(e) /* e left this queue: i stays */
		:: !ok && excl[e] -> break
		:: !ok && !excl[e] -> first = false; i++
		fi
	:: else -> break
	od
}

/* The invariants, after every step. */
inline check()
{
	n2 = 0;
	do
	:: n2 < NN ->
		assert(nexcl[n2] <= 1);
		assert(nexcl[n2] == 0 || nshared[n2] == 0);
		n2++
	:: else -> break
	od;
	/* No queued request is grantable by the rule: nothing lost. */
	r2 = 0;
	do
	:: r2 < NR ->
		if
		:: state[r2] == 1 -> scope_clear(r2, ok); assert(!ok)
		:: else -> skip
		fi;
		r2++
	:: else -> break
	od
}

proctype requester(byte r)
{
	byte i, e, k, m, n, n2, r2, round = 0;
	bool ok, first;

	do
	:: round < ROUNDS ->
		atomic {
			/* request: any scope (a non-empty set of the two
			 * names) in either mode; a member at the tail of
			 * each of its names' queues */
			if
			:: want[r] = 1
			:: want[r] = 2
			:: want[r] = 3
			fi;
			if
			:: excl[r] = true
			:: excl[r] = false
			fi;
			n = 0;
			do
			:: n < NN ->
				if
				:: HAS(r, n) -> Q(n, qlen[n]) = r; qlen[n]++
				:: else -> skip
				fi;
				n++
			:: else -> break
			od;
			state[r] = 1;
			scope_clear(r, ok);
			if
			:: ok -> grant(r)
			:: else -> skip
			fi;
			check()
		}
		atomic {
			state[r] == 2 ->
			/* holding: all of its names, as its mode allows */
			n = 0;
			do
			:: n < NN ->
				if
				:: HAS(r, n) ->
					assert(excl[r] && nexcl[n] == 1 ||
					       !excl[r] && nshared[n] >= 1)
				:: else -> skip
				fi;
				n++
			:: else -> break
			od
		}
		atomic {
			/* release: out of every held set, then the queues */
			n = 0;
			do
			:: n < NN ->
				if
				:: HAS(r, n) && excl[r] -> nexcl[n]--
				:: HAS(r, n) && !excl[r] -> nshared[n]--
				:: else -> skip
				fi;
				n++
			:: else -> break
			od;
			state[r] = 0;
			n = 0;
			do
			:: n < NN ->
				if
				:: HAS(r, n) -> process(n)
				:: else -> skip
				fi;
				n++
			:: else -> break
			od;
			check()
		}
		round++
	:: else -> break
	od;
	atomic { finished++ }
}

init
{
	byte r = 0, k;

	atomic {
		k = 0;
		do
		:: k < NN * NR -> q[k] = NONE; k++
		:: else -> break
		od;
		do
		:: r < NR -> run requester(r); r++
		:: else -> break
		od
	}
}
