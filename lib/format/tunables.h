/* SPDX-License-Identifier: MIT */
/*
 * tunables.h - every tuning constant of the library, each with its reason.
 *
 * These are policy, not format: changing one changes how long or how often
 * this process spins, sleeps, retries or batches, never what another
 * process reads in the segment (that is layout.h). Processes built with
 * different values share a bucket safely. include/weblocks.h quotes some of
 * them by name; keep its numbers in step when changing one.
 */
#ifndef WLK_TUNABLES_H
#define WLK_TUNABLES_H

/* Spinning and retrying. */

/* A blocked request spins this long first (wlk__spin(), spin.c): a lock
 * handed over within it costs no system call on either side. */
#define WLK_SPIN_NS (20ull * 1000)
/* Pause instructions between clock reads while spinning: a clock read
 * costs more than a pause, and 64 pauses stay well under a microsecond. */
#define WLK_SPIN_CHECK 64
/* How long a locker of the segment mutex spins before sleeping on it:
 * critical sections last well under a microsecond, so a holder that runs
 * lets go within this; one that does not (descheduled, stopped) is not
 * worth spinning longer for. */
#define WLK_MUTEX_SPIN_NS (2ull * 1000)
/* Looks at a changing fast word before an acquire takes the mutex
 * instead: a word that keeps moving is contended, and the mutex queues. */
#define WLK_FAST_TRIES 4
/* Attempts to arm one lifeline while its word keeps changing (reap.c,
 * async_pid.c); past them the lifeline's owner is racing us and a
 * re-check follows. */
#define WLK_ARM_TRIES 3
/* Attach retries when the segment name is unlinked or replaced under us:
 * bounds a livelock against repeated removal (-EAGAIN after). */
#define ATTACH_RETRIES 16
/* Names for a doorbell socket tried before giving up: a random name
 * collides rarely, so a few tries suffice. */
#define BIND_TRIES 8
/* How often the validator lets a name's fast words move under it before
 * it gives up on them: the fast path is busy, nothing to conclude. */
#define VALIDATE_FAST_TRIES 64

/* Sleeping: slices and re-checks. */

/* A mutex wait with a deadline or abort signal sleeps in slices of this
 * long, looking at the signal in between (glibc cannot wake a mutex
 * waiter for a signal); the latency of an abort while the mutex is held. */
#define WLK_LOCK_SLICE_NS (5ull * 1000 * 1000)
/* Without futex_waitv (Linux < 5.16) a waiter sleeps on its first word in
 * slices of this long and polls the others between them. */
#define WLK_FALLBACK_SLICE_NS (2ull * 1000 * 1000)
/* A waiter with more blockers than it can watch (WLK_WATCH_MAX, or
 * PIDFD_MAX for async) re-checks for dead ones this often. */
#define WLK_RECHECK_NS (100ull * 1000 * 1000)
/*
 * The kernel wakes one watcher of a dead lifeline. If that watcher dies too
 * before passing the news on, the others would sleep on: so a blocked
 * request also looks again after this long. Only waiters pay for it.
 */
#define WLK_SAFETY_RECHECK_NS (1000ull * 1000 * 1000)
/*
 * A blocked waiter first in its name's queue asks for a time slice of
 * WLK_WAIT_SLICE_NS at the scheduler's first tick after it got there
 * (slice.c, tick.c), so that when it is woken it preempts what runs on its
 * CPU (a dying holder's teardown, above all) instead of waiting for that
 * slice's end. 100 us is the shortest slice Linux grants. The wait's
 * timeout must not come before the tick: a timer due earlier is programmed
 * into the CPU's timer when armed and again when cancelled, and on this VM
 * that cost every handoff to a sleeping waiter 0.5-3 us (with a timeout 1
 * or 2 ms on, the one-CPU handoff's median ratio to the raw futex went
 * from 1.15x-1.20x to 1.66x-1.92x; at 5 or 10 ms, or at the tick, it did
 * not move: bench/ab.sh, 2 to 4 alternated rounds each). Only a wait that
 * lasts past a tick pays the rest, a wake-up and four system calls, a few
 * microseconds: at most that much in a tick period (4 ms at HZ=250) of
 * waiting. If the tick's period is unknown, the slice comes after
 * WLK_WAIT_SLICE_FALLBACK_NS, no sooner than a tick at HZ=100.
 */
#define WLK_WAIT_SLICE_NS (100ull * 1000)
#define WLK_WAIT_SLICE_FALLBACK_NS (10ull * 1000 * 1000)

/* Batches and bounded sets. */

/* Lifelines one waiter watches: futex_waitv takes at most 128 words, and
 * a queue behind more processes than this is rare (WLK_RECHECK_NS). */
#define WLK_WATCH_MAX 32
/* Processes whose death one async manager watches through pidfds; more
 * fall back to WLK_RECHECK_NS. */
#define PIDFD_MAX 32
/* Holders and requests of a name a waiter looks at for the processes
 * blocking it (reap.c): queueing, and an event loop's dispatch, cost the
 * same behind a longer queue; a waiter further back is woken to look
 * again when it reaches the head, and re-checks every WLK_RECHECK_NS. */
#define WLK_WATCH_WALK 64
/* Grants whose waiters (and doorbells) are woken, from a list on the
 * stack; more are woken through their names' grants words. */
#define WLK_WAKE_BATCH 32
/* Names whose grants words one critical section may broadcast on: a batch
 * grant touches one name; more fall back to a sweep of every waiter. */
#define WLK_WAKE_NAMES 8
/* Sleeping waiters of one name, granted together, that are woken by one
 * broadcast on the name's grants word instead of one wake each. */
#define WLK_BROADCAST_MIN 2
/* Sleepers a broadcast wakes: the granter's one system call, whose cost
 * grows with them; the first of them to run wakes the rest (layout.h,
 * GRANT BROADCAST). Each thread of another process woken costs the
 * granter a few microseconds (bench scale_shared: its release call
 * granting 1000 took about 25 us more with 32 than with 4); more than one
 * covers the death of the first before it passes the broadcast on. */
#define WLK_BROADCAST_FIRST 4
/* Dead agents reaped per critical section (their lifelines are unlocked
 * after it); wlk__reap_all() says when more are left for another pass. */
#define WLK_REAP_BATCH 32
/* Doorbell datagrams drained per recvmmsg(): one call empties a burst. */
#define DRAIN_BATCH 32
/* Eventfds of other processes' doorbells this process keeps open: a
 * cache of the recently rung, bounding the descriptors it holds. */
#define BELL_CACHE 32
/* epoll events taken per call by wlk_manager_dispatch(). */
#define EVENTS_BATCH 32
/* epoll events taken per wake-up by the lifeline watcher thread. */
#define WATCH_EVENTS 16

/* Caches and reserves. */

/* Names up to this many bytes are cached per thread: the spare lock
 * handle's buffer (handle.c) and the last name found (lane.c). Longer
 * names are rare and take the slow path. */
#define WLK_SHORT_NAME 48
/* Request slots a manager keeps in reserve for the fast path: enough for
 * a few threads locking at once without the mutex. */
#define WLK_LANES 4
/* Lanes stop taking request slots once fewer than 1/WLK_LANE_SPARE_DIV of
 * the table is free: reserves must not starve queued requests. */
#define WLK_LANE_SPARE_DIV 4
/* Initial size of the registry's hash table of mapped buckets; it grows. */
#define REGISTRY_INIT_BUCKETS 16
/* Spare room wlk_query() allocates on top of the counters, for requests
 * made between reading them and taking the snapshot. */
#define QUERY_SLACK 16
/* Bytes read at a time when looking for tokens in a segment file. */
#define MARK_CHUNK 8192u
/* Violations the validator keeps for reporting, and the length of each
 * report line; later ones are only counted (a summary line says so). */
#define REPORT_KEPT 64
#define REPORT_LEN 160

#endif /* WLK_TUNABLES_H */
