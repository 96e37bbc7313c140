/* SPDX-License-Identifier: MIT */
/*
 * load.c - many threads of many processes use every request option at once.
 *
 * usage: load [-p PROCS] [-T THREADS] [-n NAMES] [-t SECONDS] [-k KILL_MS]
 *             [-a] [-s SEED]
 *
 * PROCS processes of THREADS threads each loop over NAMES names. Each
 * request is one of: shared (40%), if_available (10%), steal (3%), with a
 * timeout (12%), with an abort signal that another thread of the process
 * fires at a random moment (7%), or plain; half go through wlk_request()
 * and half through wlk_acquire()/wlk_release(). Inside the critical section
 * a holder publishes (name, mode, token) in a shared arena and looks for a
 * conflicting holder. An overlap is a violation unless a steal was granted
 * between the two grants: every stealer records its token in a ring of
 * its name before it publishes itself, and tokens of a name rise. A
 * stealer killed between its grant and that record leaves no token, so an
 * overlap the ring does not explain is also explained when the earlier
 * holder (the lower token) ends its critical section with
 * wlk_lock_stolen() true: the checker waits for it to finish (its slot
 * then says so) or asks wlk_lock_stolen() of its own lock.
 *
 * Every call's result must be one the header allows for its options: 0,
 * WLK_ETIMEDOUT with a timeout, the reason with a signal, WLK_ESTOLEN from
 * a release or a request whose lock was stolen. Anything else is counted
 * by code (WLK_ESTATE separately) and fails the run.
 *
 * With -a, each process also runs an event loop (weblocks/async.h) that
 * keeps ASYNC_OUTSTANDING asynchronous requests going, with the same mix
 * of options, cancelling some (wlk_async_cancel()) at random.
 *
 * With -k, the parent SIGKILLs a random process every 0..2*KILL_MS ms and
 * starts a new one. At the end every thread must finish within a grace
 * period (one that does not is stuck), and the segment must validate with
 * nothing held or pending. Exit status 0 only if all of that holds; the
 * last line is the report.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
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
#include <weblocks/async.h>

#include "procs.h"

#define MAX_PROCS 128
#define MAX_THREADS 8
#define MAX_NAMES 16
#define STEAL_RING 256 /* recent steal tokens kept per name */
#define NSEC_PER_MSEC 1000000ull
#define TIMEOUT_NS (2 * NSEC_PER_MSEC)
#define ABORT_GAP_NS (2 * NSEC_PER_MSEC) /* aborter fires 0..2 ms apart */
#define ABORT_REASON (-7001)
#define CS_SPINS 4000 /* at most this many loop turns held */
#define STOP_GRACE_S 30
#define STALL_S 10 /* no grant at all for this long: stuck */
#define ASYNC_OUTSTANDING 8
#define POLL_MS 100
#define FINISH_WAIT_NS (5 * NSEC_PER_SEC) /* for a holder to finish */
#define FINISH_NAP_NS 20000 /* between looks at its slot */
#define SEQ_PID_SHIFT 24 /* a slot's seq: pid above, count below */

enum { EXCL = 1, SHARED = 2 };

/* (seq, name, mode) in one word, so that a reader sees them together. A
 * slot's seq is unique across its critical sections and the incarnations
 * of its process, so that an unchanged word means the same section. */
#define HOLD(seq, name, mode) ((uint64_t)(seq) << 16 | (uint64_t)(name) << 2 | \
			       (uint64_t)(mode))
#define HOLD_NAME(h) ((int)(((h) >> 2) & 0x3fff))
#define HOLD_MODE(h) ((int)((h) & 3))

struct holder {
	_Atomic uint64_t held;   /* HOLD(...), or 0 */
	_Atomic uint64_t token;  /* stored before held */
	_Atomic uint64_t stolen; /* the last held value whose lock was
				  * stolen by its end; stored before held
				  * is cleared */
};

struct proc {
	struct holder h[MAX_THREADS + 1]; /* the last: the event loop */
	atomic_int dying; /* about to be killed: others ignore it */
};

enum counter {
	C_GRANTS, C_VIOLATIONS, C_EXPLAINED, C_UNRECORDED, C_TIMEOUTS,
	C_ABORTS, C_MISSES, C_STEALS, C_STOLEN, C_ESTATE, C_OTHER, C_N
};

static const char *const counter_name[C_N] = {
	"grants", "violations", "overlaps-by-steal", "unrecorded-steals",
	"timeouts", "aborts", "misses", "steals", "stolen", "estate",
	"other-errors"};

struct arena {
	struct proc proc[MAX_PROCS];
	_Atomic uint64_t steal[MAX_NAMES][STEAL_RING];
	atomic_uint steal_n[MAX_NAMES];
	atomic_long count[C_N];
	atomic_int stop;
	char last_error[160];
};

static struct arena *ar;
static int procs = 64, threads = 4, names = 8;
static bool use_async;
static char origin[64];

/* Per process. */
static struct wlk_manager *mgr;
static int me;
static uint64_t slot_seq[MAX_THREADS + 1]; /* each used by one thread */
static struct {
	pthread_mutex_t mu;
	struct wlk_signal *sig; /* published while a request waits on it */
} pub[MAX_THREADS];

static void count(enum counter c)
{
	atomic_fetch_add(&ar->count[c], 1);
}

static void unexpected(const char *call, int rc)
{
	count(rc == WLK_ESTATE ? C_ESTATE : C_OTHER);
	snprintf(ar->last_error, sizeof(ar->last_error),
		 "process %d: %s returned %d (%s)", me, call, rc,
		 wlk_error_name(rc));
}

/* Was a steal of @name granted with a token in (lo, hi]? */
static int steal_between(int name, uint64_t lo, uint64_t hi)
{
	for (int i = 0; i < STEAL_RING; i++) {
		uint64_t s = atomic_load(&ar->steal[name][i]);

		if (s > lo && s <= hi)
			return 1;
	}
	return 0;
}

/*
 * Ring and tokens do not explain the overlap of our lock with the section
 * @h of holder @o: was the earlier of the two (the lower token) stolen?
 * Our own lock says so now; another holder's slot says so when it ends
 * its section, which we wait for. A holder that dies or does not finish
 * in time leaves it unexplained (dying ones are skipped by the caller).
 */
static bool stolen_earlier(struct holder *o, int p, uint64_t h,
			   uint64_t tok, uint64_t token, struct wlk_lock *lock)
{
	uint64_t until = procs_now_ns() + FINISH_WAIT_NS;

	if (token < tok)
		return wlk_lock_stolen(lock);
	while (atomic_load(&o->held) == h) {
		if (atomic_load(&ar->proc[p].dying))
			return true; /* killed: not a verdict on us */
		if (procs_now_ns() > until)
			return false;
		procs_nap(FINISH_NAP_NS);
	}
	return atomic_load(&o->stolen) == h;
}

/* Inside the critical section: does a live holder conflict with us? */
static void check(int self, int name, int mode, uint64_t token,
		  struct wlk_lock *lock)
{
	for (int p = 0; p < procs; p++) {
		if (atomic_load(&ar->proc[p].dying))
			continue;
		for (int t = 0; t <= threads; t++) {
			struct holder *o = &ar->proc[p].h[t];
			uint64_t h1 = atomic_load(&o->held), tok, h2;

			if ((p == me && t == self) || !h1 ||
			    HOLD_NAME(h1) != name)
				continue;
			if (mode == SHARED && HOLD_MODE(h1) == SHARED)
				continue;
			tok = atomic_load(&o->token);
			h2 = atomic_load(&o->held);
			if (h1 != h2 || atomic_load(&ar->proc[p].dying))
				continue; /* it has moved on meanwhile */
			if (steal_between(name, tok < token ? tok : token,
					  tok < token ? token : tok)) {
				count(C_EXPLAINED);
				continue;
			}
			if (stolen_earlier(o, p, h1, tok, token, lock)) {
				count(C_UNRECORDED);
				continue;
			}
			count(C_VIOLATIONS);
			snprintf(ar->last_error, sizeof(ar->last_error),
				 "name %d: %s token %llu beside %s token %llu",
				 name, mode == EXCL ? "exclusive" : "shared",
				 (unsigned long long)token,
				 HOLD_MODE(h1) == EXCL ? "exclusive" : "shared",
				 (unsigned long long)tok);
		}
	}
}

struct job {
	int self;
	uint64_t seq;
	bool steal;
};

static void critical(struct job *j, struct wlk_lock *lock)
{
	struct holder *h = &ar->proc[me].h[j->self];
	int name = wlk_lock_name(lock, NULL)[0] - 'a';
	int mode = wlk_lock_mode(lock) == WLK_SHARED ? SHARED : EXCL;
	uint64_t token = wlk_lock_token(lock);
	int spins = (int)(j->seq++ * 2654435761u % CS_SPINS);
	uint64_t held = HOLD(++slot_seq[j->self], name, mode);

	if (j->steal) {
		unsigned int i = atomic_fetch_add(&ar->steal_n[name], 1);

		atomic_store(&ar->steal[name][i % STEAL_RING], token);
		count(C_STEALS);
	}
	atomic_store(&h->token, token);
	atomic_store(&h->held, held);
	check(j->self, name, mode, token, lock);
	for (volatile int spin = 0; spin < spins; spin++)
		;
	check(j->self, name, mode, token, lock);
	if (wlk_lock_stolen(lock))
		atomic_store(&h->stolen, held);
	atomic_store(&h->held, 0);
	count(C_GRANTS);
}

static int callback(struct wlk_lock *lock, void *arg)
{
	if (!lock) {
		count(C_MISSES);
		return 0;
	}
	critical(arg, lock);
	return 0;
}

/* One request with options @o, through either call form. */
static void one(struct job *j, const char *name, struct wlk_options *o,
		bool handle)
{
	struct wlk_lock *lock = NULL;
	int rc;

	if (handle) {
		rc = wlk_acquire(mgr, name, 1, o, &lock);
		if (!rc && lock) {
			critical(j, lock);
			rc = wlk_release(lock);
		} else if (!rc) {
			count(C_MISSES);
		}
	} else {
		rc = wlk_request(mgr, name, 1, o, callback, j);
	}
	if (rc == 0)
		return;
	if (rc == WLK_ESTOLEN)
		count(C_STOLEN);
	else if (rc == WLK_ETIMEDOUT && o->timeout_ns)
		count(C_TIMEOUTS);
	else if (rc == ABORT_REASON && o->signal)
		count(C_ABORTS);
	else
		unexpected(handle ? "acquire/release" : "request", rc);
}

/* The event loop's requests: the same mix, through wlk_request_async(). */
struct areq {
	struct job j;
	struct wlk_async *req; /* NULL when the slot is free */
	struct wlk_options o;
	bool cancelled;
};

static int outstanding;

static void granted(struct wlk_async *req, int status, struct wlk_lock *lock,
		    void *arg)
{
	struct areq *a = arg;
	int rc;

	(void)req;
	a->req = NULL;
	outstanding--;
	if (status == 0 && lock) {
		critical(&a->j, lock);
		rc = wlk_release(lock);
		if (rc == WLK_ESTOLEN)
			count(C_STOLEN);
		else if (rc)
			unexpected("async release", rc);
	} else if (status == 0) {
		count(C_MISSES);
	} else if (status == WLK_ETIMEDOUT && a->o.timeout_ns) {
		count(C_TIMEOUTS);
	} else if (status == WLK_EABORTED && a->cancelled) {
		count(C_ABORTS);
	} else {
		unexpected("async request", status);
	}
}

static void async_start(struct areq *a, unsigned int *seed)
{
	char name[2] = {(char)('a' + rand_r(seed) % names), 0};
	int dice = (int)(rand_r(seed) % 100), rc;

	memset(&a->o, 0, sizeof(a->o));
	a->j.steal = a->cancelled = false;
	if (dice < 40)
		a->o.mode = WLK_SHARED;
	else if (dice < 50)
		a->o.if_available = true;
	else if (dice < 53)
		a->o.steal = a->j.steal = true;
	else if (dice < 65)
		a->o.timeout_ns = TIMEOUT_NS;
	rc = wlk_request_async(mgr, name, 1, &a->o, granted, a, &a->req);
	if (rc) {
		a->req = NULL;
		unexpected("wlk_request_async", rc);
		return;
	}
	outstanding++;
}

static void *event_loop(void *arg)
{
	struct areq a[ASYNC_OUTSTANDING] = {0};
	unsigned int seed = (unsigned int)getpid() * 7u;
	struct pollfd pfd = {.fd = wlk_manager_fd(mgr), .events = POLLIN};
	int rc;

	(void)arg;
	if (pfd.fd < 0) {
		unexpected("wlk_manager_fd", pfd.fd);
		return NULL;
	}
	for (int i = 0; i < ASYNC_OUTSTANDING; i++)
		a[i].j.self = threads;
	while (!atomic_load(&ar->stop) || outstanding) {
		for (int i = 0; i < ASYNC_OUTSTANDING; i++) {
			if (!a[i].req && !atomic_load(&ar->stop))
				async_start(&a[i], &seed);
			else if (a[i].req && !a[i].cancelled &&
				 rand_r(&seed) % 64 == 0 &&
				 wlk_async_cancel(a[i].req) == 0)
				a[i].cancelled = true;
		}
		poll(&pfd, 1, POLL_MS);
		rc = wlk_manager_dispatch(mgr);
		if (rc < 0) {
			unexpected("wlk_manager_dispatch", rc);
			break;
		}
	}
	return NULL;
}

static void *worker(void *arg)
{
	struct job j = {.self = (int)(intptr_t)arg};
	unsigned int seed = (unsigned int)(getpid() * 31 + j.self);

	while (!atomic_load(&ar->stop)) {
		char name[2] = {(char)('a' + rand_r(&seed) % names), 0};
		struct wlk_options o = {0};
		int dice = (int)(rand_r(&seed) % 100);
		struct wlk_signal *sig = NULL;

		j.steal = false;
		if (dice < 40)
			o.mode = WLK_SHARED;
		else if (dice < 50)
			o.if_available = true;
		else if (dice < 53)
			o.steal = j.steal = true;
		else if (dice < 65)
			o.timeout_ns = TIMEOUT_NS;
		else if (dice < 72 && wlk_signal_new(&sig) == 0)
			o.signal = sig;
		if (sig) {
			pthread_mutex_lock(&pub[j.self].mu);
			pub[j.self].sig = sig;
			pthread_mutex_unlock(&pub[j.self].mu);
		}
		one(&j, name, &o, rand_r(&seed) & 1);
		if (sig) {
			pthread_mutex_lock(&pub[j.self].mu);
			pub[j.self].sig = NULL;
			pthread_mutex_unlock(&pub[j.self].mu);
			wlk_signal_free(sig);
		}
	}
	return NULL;
}

/* Fires the published signals of this process at random moments. */
static void *aborter(void *arg)
{
	unsigned int seed = (unsigned int)getpid();

	(void)arg;
	while (!atomic_load(&ar->stop)) {
		int t = (int)(rand_r(&seed) % (unsigned int)threads);

		procs_nap(rand_r(&seed) % ABORT_GAP_NS);
		pthread_mutex_lock(&pub[t].mu);
		if (pub[t].sig)
			wlk_signal_abort(pub[t].sig, ABORT_REASON);
		pthread_mutex_unlock(&pub[t].mu);
	}
	return NULL;
}

static void process_main(int index)
{
	pthread_t tid[MAX_THREADS], ab, loop;
	int rc;

	me = index;
	for (int t = 0; t <= MAX_THREADS; t++)
		slot_seq[t] = (uint64_t)getpid() << SEQ_PID_SHIFT;
	for (int t = 0; t < threads; t++)
		pthread_mutex_init(&pub[t].mu, NULL);
	rc = wlk_manager_open(origin, NULL, &mgr);
	if (rc) {
		unexpected("wlk_manager_open", rc);
		_exit(10);
	}
	if (pthread_create(&ab, NULL, aborter, NULL))
		_exit(11);
	for (int t = 0; t < threads; t++)
		if (pthread_create(&tid[t], NULL, worker, (void *)(intptr_t)t))
			_exit(11);
	if (use_async && pthread_create(&loop, NULL, event_loop, NULL))
		_exit(11);
	for (int t = 0; t < threads; t++)
		pthread_join(tid[t], NULL);
	pthread_join(ab, NULL);
	if (use_async)
		pthread_join(loop, NULL);
	wlk_manager_close(mgr);
	_exit(0);
}

static pid_t spawn(int i)
{
	pid_t pid;

	for (int t = 0; t <= MAX_THREADS; t++)
		atomic_store(&ar->proc[i].h[t].held, 0);
	atomic_store(&ar->proc[i].dying, 0);
	pid = fork();
	if (pid == 0)
		process_main(i);
	return pid;
}

/* The parent: kill and respawn until the time is up, or just wait. */
static long run(pid_t *pid, double seconds, long kill_ms, unsigned int seed)
{
	uint64_t start = procs_now_ns(), last_progress = start;
	uint64_t end = start + (uint64_t)(seconds * NSEC_PER_SEC);
	long kills = 0, last_grants = -1;

	while (procs_now_ns() < end) {
		long g = atomic_load(&ar->count[C_GRANTS]);

		if (kill_ms) {
			int i = (int)(rand_r(&seed) % (unsigned int)procs);

			procs_nap(rand_r(&seed) % (2 * (uint64_t)kill_ms *
					     NSEC_PER_MSEC));
			atomic_store(&ar->proc[i].dying, 1);
			kill(pid[i], SIGKILL);
			waitpid(pid[i], NULL, 0);
			kills++;
			pid[i] = spawn(i);
		} else {
			procs_nap(NSEC_PER_SEC / 10);
		}
		if (g != last_grants) {
			last_grants = g;
			last_progress = procs_now_ns();
		} else if (procs_now_ns() - last_progress >
			   STALL_S * NSEC_PER_SEC) {
			fprintf(stderr, "load: no grant for %ds\n", STALL_S);
			break;
		}
	}
	return kills;
}

int main(int argc, char **argv)
{
	unsigned int seed = (unsigned int)time(NULL);
	double seconds = 60;
	long kill_ms = 0, kills;
	pid_t pid[MAX_PROCS];
	uint64_t start;
	int opt, stuck, invalid, bad;

	while ((opt = getopt(argc, argv, "p:T:n:t:k:as:")) != -1) {
		switch (opt) {
		case 'p': procs = atoi(optarg); break;
		case 'T': threads = atoi(optarg); break;
		case 'n': names = atoi(optarg); break;
		case 't': seconds = atof(optarg); break;
		case 'k': kill_ms = atol(optarg); break;
		case 'a': use_async = true; break;
		case 's': seed = (unsigned int)strtoul(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: load [-p PROCS] [-T THREADS] "
				"[-n NAMES] [-t SECONDS] [-k KILL_MS] [-a] "
				"[-s SEED]\n");
			return 2;
		}
	}
	if (procs < 1 || procs > MAX_PROCS || threads < 1 ||
	    threads > MAX_THREADS || names < 1 || names > MAX_NAMES ||
	    kill_ms < 0)
		return 2;
	ar = mmap(NULL, sizeof(*ar), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (ar == MAP_FAILED)
		return 1;
	snprintf(origin, sizeof(origin), "https://load-%d.test", (int)getpid());
	printf("load: procs=%d threads=%d names=%d seconds=%.0f kill_ms=%ld "
	       "async=%s seed=%u\n", procs, threads, names, seconds, kill_ms,
	       use_async ? "yes" : "no", seed);
	start = procs_now_ns();
	for (int i = 0; i < procs; i++)
		pid[i] = spawn(i);
	kills = run(pid, seconds, kill_ms, seed);
	atomic_store(&ar->stop, 1);
	stuck = procs_reap(pid, procs, STOP_GRACE_S, "load");
	invalid = procs_final_check(origin, "load");
	wlk_bucket_remove(origin, NULL);
	fflush(stdout);
	if (ar->last_error[0])
		fprintf(stderr, "load: last error: %s\n", ar->last_error);
	printf("load: %.1fs kills=%ld", (double)(procs_now_ns() - start) /
	       NSEC_PER_SEC, kills);
	for (int c = 0; c < C_N; c++)
		printf(" %s=%ld", counter_name[c], atomic_load(&ar->count[c]));
	printf(" stuck=%d segment=%s\n", stuck, invalid ? "INVALID" : "ok");
	bad = atomic_load(&ar->count[C_VIOLATIONS]) ||
	      atomic_load(&ar->count[C_ESTATE]) ||
	      atomic_load(&ar->count[C_OTHER]) || stuck || invalid ||
	      !atomic_load(&ar->count[C_GRANTS]);
	return bad ? 1 : 0;
}
