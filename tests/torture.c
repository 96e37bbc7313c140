/* SPDX-License-Identifier: MIT */
/*
 * torture.c - processes take random locks while a killer SIGKILLs them.
 *
 * usage: torture [-p PROCS] [-n NAMES] [-k KILLS] [-t SECONDS] [-s SEED]
 *                [-S PERCENT] [-g GAP_MS]
 *
 * PROCS workers loop: pick a name and a mode, request it (sometimes with a
 * timeout or if_available), and inside the critical section record in a
 * shared arena that they hold it, then check that no other live worker
 * holds that name exclusively, or at all when they hold it exclusively.
 * PERCENT of the requests (default 20) are scopes of two or three names
 * (weblocks.h, SCOPES), held and checked on every name at once. Each
 * grant's fencing token is checked too: an exclusive one above every
 * token recorded for its name so far, a shared one above the last
 * exclusive one (tokens rise with every grant of a name, in grant order;
 * a recorded one was granted before, as its holder held the name).
 * The parent SIGKILLs a random worker every 0-2 ms (0-GAP_MS) and starts a
 * new one,
 * until KILLS kills or SECONDS seconds. Then the workers are stopped and
 * must all finish (a worker still blocked is a stuck waiter), and the
 * segment must pass wlk_manager_validate() with nothing held or pending.
 *
 * Exit status 0 only with zero violations, zero stuck waiters, a valid
 * segment, and the kill target reached. The last line is the report.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <weblocks.h>

#include "procs.h"

#define MAX_PROCS 64
#define MAX_NAMES 16
#define KILL_GAP_NS (2 * 1000 * 1000ull) /* kills come 0..2 ms apart */
#define STOP_GRACE_S 20   /* workers must all finish within this */
#define STALL_S 10        /* no grant at all for this long: stuck */
#define TIMEOUT_NS (3 * 1000 * 1000ull)

enum { FREE = 0, EXCL = 1, SHARED = 2 };

/*
 * What a worker holds, in one word so that a checker reads names and mode
 * together: a worker that leaves its critical section and enters the next
 * one between two separate loads would pair its old names with its new
 * mode. The names are a bit mask (a scope holds several).
 */
#define HOLD(mask, mode) ((mask) << 2 | (mode))
#define HOLD_MASK(h) ((h) >> 2)
#define HOLD_MODE(h) ((h) & 3)

struct slot {
	atomic_int held;  /* HOLD(name, mode), or 0 */
	atomic_int dying; /* about to be killed: others ignore this slot */
};

struct arena {
	struct slot slot[MAX_PROCS];
	/* Per name: the largest token recorded inside a critical section,
	 * and the last exclusive one. */
	_Atomic uint64_t top[MAX_NAMES];
	_Atomic uint64_t top_excl[MAX_NAMES];
	atomic_long grants;
	atomic_long violations;
	atomic_long timeouts;
	atomic_long misses;
	atomic_int stop;
	char last_violation[160];
};

static struct arena *ar;
static int procs = 6, names = 3, scope_pct = 20;
static char origin[64];

static void violation(int me, int mask, const char *what)
{
	atomic_fetch_add(&ar->violations, 1);
	snprintf(ar->last_violation, sizeof(ar->last_violation),
		 "worker %d, names %#x: %s", me, mask, what);
}

/*
 * Inside the critical section: does anyone else conflict? A slot's dying
 * mark is read before what it holds: the parent clears a respawned slot's
 * holding, then its mark, so a holding read after a clear mark is never a
 * dead worker's left over (read the other way round, a checker preempted
 * between the two loads paired a dead worker's holding with its
 * successor's clear mark, about once in 40,000 kills).
 */
static void check(int me, int mask, int mode)
{
	for (int i = 0; i < procs; i++) {
		int dying = atomic_load(&ar->slot[i].dying);
		int held = atomic_load(&ar->slot[i].held), other_mode;

		if (i == me || dying || !held || !(HOLD_MASK(held) & mask))
			continue;
		other_mode = HOLD_MODE(held);
		if (mode == EXCL)
			violation(me, mask, "another holder beside exclusive");
		else if (other_mode == EXCL)
			violation(me, mask, "shared beside an exclusive holder");
	}
}

/* Inside the critical section, before the exclusion checks: the token
 * of @name's grant against the ones recorded before it (top of file). */
static void check_token(int me, int name, int mode, uint64_t t)
{
	uint64_t top;

	if (mode == EXCL) {
		if (t <= atomic_load(&ar->top[name]))
			violation(me, 1 << name,
				  "exclusive token not above every earlier one");
		atomic_store(&ar->top[name], t);
		atomic_store(&ar->top_excl[name], t);
		return;
	}
	if (t <= atomic_load(&ar->top_excl[name]))
		violation(me, 1 << name,
			  "shared token not above the last exclusive one");
	top = atomic_load(&ar->top[name]);
	while (t > top && !atomic_compare_exchange_weak(&ar->top[name], &top, t))
		;
}

static int critical(struct wlk_lock *lock, void *arg)
{
	int me = (int)(intptr_t)arg, mask = 0, mode;

	if (!lock) { /* if_available found it taken */
		atomic_fetch_add(&ar->misses, 1);
		return 0;
	}
	mode = wlk_lock_mode(lock) == WLK_SHARED ? SHARED : EXCL;
	for (size_t i = 0; i < wlk_lock_scope_count(lock); i++) {
		int name = wlk_lock_scope_name(lock, i, NULL)[0] - 'a';

		mask |= 1 << name;
		check_token(me, name, mode, wlk_lock_scope_token(lock, i));
	}

	atomic_store(&ar->slot[me].held, HOLD(mask, mode));
	check(me, mask, mode);
	for (volatile int spin = 0; spin < 2000; spin++)
		;
	check(me, mask, mode);
	atomic_store(&ar->slot[me].held, 0);
	atomic_fetch_add(&ar->grants, 1);
	return 0;
}

static void worker(int me, unsigned int seed)
{
	struct wlk_manager *m;
	int rc = wlk_manager_open(origin, NULL, &m);

	if (rc)
		_exit(10);
	while (!atomic_load(&ar->stop)) {
		char name[3][2] = {{0}};
		struct wlk_name scope[3];
		struct wlk_options o = {0};
		int dice = (int)(rand_r(&seed) % 16);
		int n = names > 1 && (int)(rand_r(&seed) % 100) < scope_pct
				? 2 + (int)(rand_r(&seed) % 2)
				: 1;

		/* Names may repeat: a scope's duplicates collapse. */
		for (int i = 0; i < n; i++) {
			name[i][0] = (char)('a' + rand_r(&seed) % names);
			scope[i] = (struct wlk_name){name[i], 1};
		}
		o.mode = dice < 5 ? WLK_SHARED : WLK_EXCLUSIVE;
		if (dice == 14)
			o.if_available = true;
		if (dice == 15)
			o.timeout_ns = TIMEOUT_NS;
		if (n > 1)
			rc = wlk_request_scope(m, scope, (size_t)n, &o,
					       critical, (void *)(intptr_t)me);
		else
			rc = wlk_request(m, name[0], 1, &o, critical,
					 (void *)(intptr_t)me);
		if (rc == WLK_ETIMEDOUT)
			atomic_fetch_add(&ar->timeouts, 1);
		else if (rc)
			_exit(20);
	}
	wlk_manager_close(m);
	_exit(0);
}

static pid_t spawn(int i, unsigned int seed)
{
	pid_t pid;

	/* In this order: check() relies on it. */
	atomic_store(&ar->slot[i].held, 0);
	atomic_store(&ar->slot[i].dying, 0);
	pid = fork();
	if (pid == 0)
		worker(i, seed);
	return pid;
}

int main(int argc, char **argv)
{
	long kills_target = 1000, kills = 0, last_grants = -1;
	unsigned int seed = (unsigned int)time(NULL);
	double seconds = 60;
	pid_t pid[MAX_PROCS];
	uint64_t start, end, last_progress;
	uint64_t gap_ns = KILL_GAP_NS;
	int opt, stuck, invalid;

	while ((opt = getopt(argc, argv, "p:n:k:t:s:S:g:")) != -1) {
		switch (opt) {
		case 'p': procs = atoi(optarg); break;
		case 'n': names = atoi(optarg); break;
		case 'k': kills_target = atol(optarg); break;
		case 't': seconds = atof(optarg); break;
		case 's': seed = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'S': scope_pct = atoi(optarg); break;
		case 'g': gap_ns = strtoull(optarg, NULL, 10) * 1000000u; break;
		default:
			fprintf(stderr, "usage: torture [-p PROCS] [-n NAMES] "
					"[-k KILLS] [-t SECONDS] [-s SEED] "
					"[-S PERCENT] [-g GAP_MS]\n");
			return 2;
		}
	}
	if (procs < 2 || procs > MAX_PROCS || names < 1 || names > MAX_NAMES ||
	    scope_pct < 0 || scope_pct > 100 || gap_ns == 0)
		return 2;
	ar = mmap(NULL, sizeof(*ar), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ar == MAP_FAILED)
		return 1;
	snprintf(origin, sizeof(origin), "https://torture-%d.test",
		 (int)getpid());
	printf("torture: procs=%d names=%d scopes=%d%% seed=%u kills>=%ld "
	       "within %.0fs\n",
	       procs, names, scope_pct, seed, kills_target, seconds);
	for (int i = 0; i < procs; i++)
		pid[i] = spawn(i, seed + (unsigned int)i);
	start = last_progress = procs_now_ns();
	end = start + (uint64_t)(seconds * NSEC_PER_SEC);
	while (kills < kills_target && procs_now_ns() < end) {
		int i = (int)(rand_r(&seed) % (unsigned int)procs);
		long g = atomic_load(&ar->grants);

		procs_nap(rand_r(&seed) % gap_ns);
		atomic_store(&ar->slot[i].dying, 1);
		kill(pid[i], SIGKILL);
		waitpid(pid[i], NULL, 0);
		kills++;
		pid[i] = spawn(i, seed + (unsigned int)kills * 7919u);
		if (g != last_grants) {
			last_grants = g;
			last_progress = procs_now_ns();
		} else if (procs_now_ns() - last_progress >
			   STALL_S * NSEC_PER_SEC) {
			fprintf(stderr, "torture: no grant for %ds\n", STALL_S);
			break;
		}
	}
	atomic_store(&ar->stop, 1);
	stuck = procs_reap(pid, procs, STOP_GRACE_S, "torture");
	invalid = procs_final_check(origin, "torture");
	wlk_bucket_remove(origin, NULL);
	if (atomic_load(&ar->violations))
		fprintf(stderr, "torture: last violation: %s\n",
			ar->last_violation);
	printf("torture: %.1fs kills=%ld grants=%ld timeouts=%ld misses=%ld "
	       "violations=%ld stuck=%d segment=%s\n",
	       (double)(procs_now_ns() - start) / NSEC_PER_SEC, kills,
	       atomic_load(&ar->grants), atomic_load(&ar->timeouts),
	       atomic_load(&ar->misses),
	       atomic_load(&ar->violations), stuck,
	       invalid ? "INVALID" : "valid");
	return atomic_load(&ar->violations) || stuck || invalid ||
	       kills < kills_target;
}
