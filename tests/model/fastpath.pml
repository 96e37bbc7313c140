/* SPDX-License-Identifier: MIT */
/*
 * fastpath.pml - a Promela model of the fast path (lib/state/fastword.c,
 * lib/spec/inflate.c, process-the-queue in lib/spec/queue.c): acquire and release
 * by CAS on a name's fast word, one fast waiter handed the name by the
 * holder's release, inflation under the segment mutex, the grant of a
 * lone request through the fast word, and a query's copy with the fast
 * path frozen (lib/inspect/query.c). Run: tests/model/check.sh.
 *
 * What is modelled: NP processes, each with one lane slot, taking one
 * name exclusively in a loop. The fast word (ON, WAIT, holder slot and
 * gen) is one variable group read and CASed in atomic steps, as the real
 * 64-bit word is; so is the waiter word (claimed slot and gen). The
 * mutex side (held set, queue, slot states) changes only with the mutex
 * held. A fast waiter may give up spinning at any moment (settle), which
 * covers every timing of the 20 us budget. Slot gens count modulo G, as
 * the 9 gen bits in the real words do (G is smaller, so the model sees
 * more wrap-arounds than the library could).
 *
 * A query process Q (QN copies, at any moments) takes the mutex, sets
 * the freeze word, inflates the name if it has a fast holder (as
 * query.c's copy does), clears the word and unlocks. Promela steps are
 * sequentially consistent, so the model takes the barriers of layout.h
 * (QUERY) as given; what it checks is that every path obeys the rule.
 *
 * What is checked: never two processes in the critical section; every
 * lock a process believes it holds is held by the segment's account when
 * it releases; no state where everyone waits for ever (invalid end
 * states); no process returns from an acquire or a release while a copy
 * runs if the operation changed the fast word during that copy, or was
 * handed the name by such a change (with one change per thread at most
 * in flight, that makes the copy one instant's state across names). Not
 * checked: starvation. Not modelled: shared mode, timeouts and signals,
 * process death and recovery (tests/torture.c covers those), more than
 * one name.
 */

#ifndef NP
#define NP 3
#endif
#ifndef G
#define G 4
#endif
#ifndef QN
#define QN 1	/* copies the query makes; 0: no query process */
#endif
/*
 * With TOKENS, fencing tokens too (layout.h, TOKENS ON THE FAST PATH): the
 * name's token, counted up with the holder by the fast acquire's and the
 * handoff's 16-byte CAS, and by every grant under the mutex; each slot's
 * token, stored by its thread or by the inflation that adopts it. Checked:
 * every process enters the critical section with a token above the one
 * before it (the name is taken exclusively). Processes stop taking the
 * name once its token reaches TMAX, which bounds the search.
 */
#ifdef TOKENS
#ifndef TMAX
#define TMAX 5
#endif
#define TOK(x) x
#else
#define TOK(x) skip
#endif

mtype = { FREE, RES, FAST, PEND, HELD };

/* The name's fast word. */
bool on = true;
byte fh;		/* holder slot, 1..NP, or 0 */
byte fg;		/* its gen */
bool fwait;
/* The name's waiter word: the claim. */
byte cw;		/* claimed slot, or 0 */
byte cg;

/* Request slots (slot i belongs to process i) and the mutex side. */
mtype st[NP + 1];
byte gen[NP + 1];
bool mtx;
bool held[NP + 1];
byte q[NP];		/* queue of slots, q[0] first */
byte qn;

byte incs;		/* processes in the critical section */

#ifdef TOKENS
byte ntok;		/* the name's token (one 16-byte word with the fast word) */
byte rtok[NP + 1];	/* each slot's token, 0 until given */
byte lastcs;		/* ghost: the token the last entrant held */
#endif

/* The header's freeze word, and ghosts: a query is copying; process i
 * changed (or was handed the name by) the fast word during this copy. */
bool frz;
bool copying;
bool dirty[NP + 1];

inline lock() { atomic { !mtx -> mtx = true } }
inline unlock() { mtx = false }

/* A fast word change by @i: made during a copy? */
inline mark(i) {
	if
	:: copying -> dirty[i] = true
	:: else -> skip
	fi
}

/* fastword.c done(), after the change: wait for the copy to end
 * (the locals it resets are dead at every call: fewer states). One step
 * unless it waits: a lock() that blocks ends the atomic sequence. */
inline freeze_pass() {
	atomic {
		if
		:: frz ->
			e_on = false; e_fh = 0; e_fg = 0; e_wait = false;
			tries = 0; claimed = false; ok = false; w = 0; wg = 0;
			lock(); unlock()
		:: else
		fi
	}
}

/* Where an operation returns to its caller. */
inline returning() {
	assert(!(copying && dirty[me]))
}

#define NO_HOLDER \
	(!held[1] && (NP < 2 || !held[2]) && (NP < 3 || !held[3]) && \
	 (NP < 4 || !held[4]))

/* wlk__name_inflate(): two steps, as fast paths may act between them. */
inline inflate() {
	atomic {
		s_on = on; s_fh = fh; s_fg = fg; s_wait = fwait;
		on = false
	}
	atomic {
		adopted = false;
		if
		:: s_fh != 0 && st[s_fh] == FAST && gen[s_fh] == s_fg ->
			held[s_fh] = true; st[s_fh] = HELD; adopted = true;
			/* wlk__token_adopt() */
			TOK(if :: rtok[s_fh] == 0 -> rtok[s_fh] = ntok
			       :: else -> skip fi)
		:: else -> skip
		fi;
		if
		:: s_wait && cw != 0 && st[cw] == FAST && gen[cw] == cg ->
			if
			:: adopted -> assert(qn == 0); q[0] = cw; qn = 1;
				st[cw] = PEND
			:: else -> held[cw] = true; st[cw] = HELD;
				TOK(if :: rtok[cw] == 0 -> rtok[cw] = ntok
				       :: else -> skip fi)
			fi
		:: else -> skip
		fi;
		/* waiter_clear(): a claim that is not live goes. */
		if
		:: cw != 0 && !(st[cw] == FAST && gen[cw] == cg) -> cw = 0
		:: else -> skip
		fi;
		fh = 0; fwait = false
	}
}

/* wlk__process_queue() with grant_fast(), then name_put()'s deflate. */
inline process_queue() {
	atomic {
		if
		:: qn > 0 && NO_HOLDER ->
			g_slot = q[0];
			q[0] = q[1]; q[1] = 0; qn--;
			TOK(ntok++; rtok[g_slot] = ntok);
			if
			:: qn == 0 ->
				/* the fast word first, then the slot */
				on = true; fh = g_slot; fg = gen[g_slot];
				fwait = false;
				st[g_slot] = FAST
			:: else -> held[g_slot] = true; st[g_slot] = HELD
			fi
		:: else -> skip
		fi;
		if
		:: qn == 0 && NO_HOLDER && !on && fh == 0 && !fwait ->
			on = true
		:: else -> skip
		fi
	}
}

proctype P(byte me)
{
	bool e_on, e_wait, claimed, ok, fast;
	byte e_fh, e_fg, tries, w, wg;
	bool s_on, s_wait, adopted;
	byte s_fh, s_fg, g_slot;
	byte mytok, t_read;

	st[me] = RES;
acquire:
#ifdef TOKENS
	if
	:: ntok >= TMAX -> goto done
	:: else -> skip
	fi;
#endif
	/* Locals back to 0: fewer states for the verifier to tell apart. */
	atomic {
		returning();
		claimed = false; ok = false; fast = false; tries = 0;
		w = 0; wg = 0; s_on = false; s_wait = false; adopted = false;
		s_fh = 0; s_fg = 0; g_slot = 0; mytok = 0; t_read = 0
	}
	/* wlk__fast_take() */
	atomic { e_on = on; e_fh = fh; e_fg = fg; e_wait = fwait }
	if
	:: e_on && !e_wait -> skip
	:: else -> goto obtain
	fi;
	atomic { gen[me] = (gen[me] + 1) % G; st[me] = FAST;	/* claim */
		 TOK(rtok[me] = 0) }
	tries = 0;
	do
	:: tries < 2 && e_on && e_fh == 0 && !e_wait ->
		atomic {
			if
			:: on == e_on && fh == e_fh && fg == e_fg &&
			   fwait == e_wait ->
				fh = me; fg = gen[me]; ok = true; mark(me);
				TOK(ntok++; mytok = ntok)
			:: else ->
				e_on = on; e_fh = fh; e_fg = fg; e_wait = fwait;
				ok = false
			fi
		}
		if
		:: ok -> TOK(rtok[me] = mytok);	/* its own store */
			atomic { fast = true; freeze_pass() }; goto critical
		:: else -> tries++
		fi
	:: tries < 2 && e_on && e_fh != 0 && !e_wait ->
		/* enlist(): claim the waiter word, then set WAIT */
		atomic {
			if
			:: cw == 0 -> cw = me; cg = gen[me]; claimed = true
			:: else -> claimed = false
			fi
		}
		if
		:: claimed ->
			atomic {
				if
				:: on == e_on && fh == e_fh && fg == e_fg &&
				   fwait == e_wait -> fwait = true; ok = true;
					mark(me)
				:: else -> ok = false
				fi
			}
			if
			:: ok -> goto await
			:: else ->
				atomic {
					if
					:: cw == me && cg == gen[me] -> cw = 0
					:: else -> skip
					fi
				}
			fi
		:: else -> skip
		fi;
		atomic { e_on = on; e_fh = fh; e_fg = fg; e_wait = fwait };
		tries++
	:: else -> break
	od;
	/* Give the slot back, unless an inflation adopted our claim, taking
	 * it for the waiter's behind a stale WAIT: then it is queued. */
	atomic {
		if
		:: st[me] == FAST -> st[me] = RES; ok = true
		:: else -> ok = false
		fi
	}
	if
	:: ok -> goto obtain
	:: else -> goto settle
	fi;

await:	/* wlk__fast_await(): handed the name, inflated, or out of spin */
	if
	:: (on && fh == me && fg == gen[me]) ->
#ifdef TOKENS
		/* the token, then the word again: still ours with ON, the
		 * token is ours; else adopted, its token under the mutex */
		t_read = ntok;
		if
		:: atomic { on && fh == me && fg == gen[me] ->
			if
			:: rtok[me] == 0 -> rtok[me] = t_read
			:: else -> skip
			fi;
			mytok = rtok[me] }
		:: else ->
			lock(); assert(rtok[me] != 0); mytok = rtok[me];
			unlock()
		fi;
#endif
		atomic { fast = true; freeze_pass() }; goto critical
	:: !on -> goto settle
	:: true -> goto settle
	fi;

settle:	/* wlk__settle() */
	lock();
	inflate();
	if
	:: st[me] == HELD -> TOK(mytok = rtok[me]); unlock(); fast = false;
		goto critical
	:: st[me] == PEND -> unlock(); goto wait
	:: st[me] == FAST -> st[me] = RES; unlock(); goto obtain
	:: else -> assert(false)
	fi;

obtain:	/* request.c obtain(): queue the lane's slot, under the mutex */
	lock();
	inflate();
	assert(st[me] == RES);
	st[me] = PEND; q[qn] = me; qn++; TOK(rtok[me] = 0);
	process_queue();
	unlock();
wait:
	(st[me] == HELD || st[me] == FAST);
	fast = st[me] == FAST;
	TOK(mytok = rtok[me]);

critical:
	atomic { returning(); incs++ };
	assert(incs == 1);
#ifdef TOKENS
	assert(mytok > lastcs); lastcs = mytok;
#endif
	incs--;

	/* release_handle(): wlk__fast_let_go(), else under the mutex */
	if
	:: fast && st[me] == FAST ->
		atomic {
			if
			:: on && fh == me && fg == gen[me] && !fwait ->
				fh = 0; ok = true; w = 0; mark(me)
			:: on && fh == me && fg == gen[me] && fwait ->
				ok = false; w = 1
			:: else -> ok = false; w = 0
			fi
		}
		if
		:: ok -> atomic { st[me] = RES; freeze_pass() }; goto acquire
		:: !ok && w == 1 ->
			/* the handoff: read the claim, then one CAS */
			atomic { w = cw; wg = cg }
			atomic {
				if
				:: w != 0 && on && fh == me && fg == gen[me] &&
				   fwait -> fh = w; fg = wg; fwait = false;
					ok = true; mark(me); mark(w);
					TOK(ntok++)
				:: else -> ok = false
				fi
			}
			if
			:: ok ->
				atomic {
					if
					:: cw == w && cg == wg -> cw = 0
					:: else -> skip
					fi
				}
				atomic { st[me] = RES; freeze_pass() };
				goto acquire
			:: else -> skip
			fi
		:: else -> skip
		fi
	:: else -> skip
	fi;
	/* wlk__release_slot(): inflate, release, process the queue */
	lock();
	inflate();
	assert(st[me] == HELD && held[me]);
	held[me] = false;
	atomic { gen[me] = (gen[me] + 1) % G; st[me] = RES }	/* kept */
	process_queue();
	unlock();
	goto acquire;
#ifdef TOKENS
done:	skip
#endif
}

/* query.c snapshot_copy(): the copy, with the fast path frozen; QN
 * times, at any moments. */
proctype Q()
{
	bool s_on, s_wait, adopted;
	byte s_fh, s_fg, i, nq;

	do
	:: nq == QN -> break
	:: nq < QN ->
		nq++;
		lock();
		atomic { frz = true; copying = true };
		/* copy_state(): a name with a fast holder is inflated */
		if
		:: fh != 0 -> inflate()
		:: else -> skip
		fi;
		atomic {
			copying = false; frz = false;
			i = 1;
			do
			:: i <= NP -> dirty[i] = false; i++
			:: else -> break
			od;
			i = 0; s_on = false; s_wait = false; adopted = false;
			s_fh = 0; s_fg = 0
		};
		unlock()
	od
}

init {
	atomic {
		byte i = 1;
		do
		:: i <= NP -> run P(i); i++
		:: else -> break
		od;
		if
		:: QN > 0 -> run Q()
		:: else -> skip
		fi
	}
}
