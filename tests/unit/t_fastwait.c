/* SPDX-License-Identifier: MIT */
/*
 * t_fastwait.c - a request that finds its name held by the fast path may
 * wait as the name's one fast waiter, and the holder's release hands the
 * name over without the segment mutex (lib/state/fastword.c,
 * lib/shm/lane.c). Whatever comes next (a third request, a long hold,
 * query) inflates the name: the waiter keeps its place, first in the
 * queue. These tests check the order,
 * the modes and the exclusion on both sides of that line.
 *
 * The take-turns tests hand the name over many times on a machine with
 * two CPUs; on one CPU nobody waits by the fast path (spinning would not
 * pay) and they test the mutex path instead.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common.h"
#include "testing.h"

static const struct wlk_options sh = {.mode = WLK_SHARED};

/* Make @name known and give @m a reserved slot: the next take is fast. */
static struct wlk_lock *take(struct wlk_manager *m, const char *name,
			     const struct wlk_options *o)
{
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(m, name, WLK_NUL_TERMINATED, o, &l), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	T_ASSERT_RC(wlk_acquire(m, name, WLK_NUL_TERMINATED, o, &l), 0);
	return l;
}

Test(fastwait, a_later_request_queues_behind_the_fast_waiter, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_lock *l = take(a, "r", NULL);
	struct t_holder hb, hc;

	t_holder_start(&hb, b, "r", 1, NULL);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	t_holder_start(&hc, c, "r", 1, NULL);
	cr_assert(t_wait_pending(a, "r", 1, 2));
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_holder_wait_granted(&hb), 0);
	cr_assert_not(t_holder_granted_now(&hc), "the later request overtook");
	cr_assert_eq(t_holder_release(&hb), 0);
	cr_assert_eq(t_holder_wait_granted(&hc), 0);
	cr_assert_gt(hc.token, hb.token);
	cr_assert_eq(t_holder_release(&hc), 0);
	t_holder_join(&hb);
	t_holder_join(&hc);
	T_ASSERT_RC(wlk_manager_validate(a, NULL, NULL), 0);
}

/* Spec 2.5: a shared request behind a waiting exclusive one waits, even
 * though the holder is shared. */
Test(fastwait, shared_request_waits_behind_an_exclusive_waiter, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_lock *l = take(a, "r", &sh);
	struct t_holder hb, hc;

	t_holder_start(&hb, b, "r", 1, NULL);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	t_holder_start(&hc, c, "r", 1, &sh);
	cr_assert(t_wait_pending(a, "r", 1, 2));
	cr_assert_not(t_holder_granted_now(&hc));
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_holder_wait_granted(&hb), 0);
	cr_assert_not(t_holder_granted_now(&hc));
	cr_assert_eq(t_holder_release(&hb), 0);
	cr_assert_eq(t_holder_wait_granted(&hc), 0);
	cr_assert_eq(t_holder_release(&hc), 0);
	t_holder_join(&hb);
	t_holder_join(&hc);
}

/* A shared waiter handed the name: later shared requests join it. */
Test(fastwait, shared_waiter_then_shares_with_later_readers, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_lock *l = take(a, "r", NULL), *lc = NULL;
	struct t_holder hb;

	t_holder_start(&hb, b, "r", 1, &sh);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_holder_wait_granted(&hb), 0);
	T_ASSERT_RC(wlk_acquire(c, "r", 1, &sh, &lc), 0);
	cr_assert_eq(t_held_n(a, "r", 1), 2);
	T_ASSERT_RC(wlk_release(lc), 0);
	cr_assert_eq(t_holder_release(&hb), 0);
	t_holder_join(&hb);
	cr_assert_eq(t_held_n(a, "r", 1), 0);
}

/* Two threads, each with its own manager, taking turns on one name. */
#define TURNS 20000

struct turns {
	struct wlk_manager *m[2];
	pthread_barrier_t go;
	volatile int inside;     /* threads in the critical section */
	volatile long counter;   /* bumped without atomics inside */
	int overlaps;
	int rc[2];
	uint64_t *tokens[2];     /* each thread's tokens, in its order */
	bool stop;               /* [A] tell the checker to stop */
	int invalid;             /* validation reports seen by the checker */
	char first[256];         /* the first of them */
};

struct turner_arg {
	struct turns *t;
	int me;
};

static void *turn_main(void *arg)
{
	struct turner_arg *a = arg;
	struct turns *t = a->t;

	pthread_barrier_wait(&t->go);
	for (int i = 0; i < TURNS; i++) {
		struct wlk_lock *l = NULL;
		int rc = wlk_acquire(t->m[a->me], "r", 1, NULL, &l);

		if (rc) {
			t->rc[a->me] = rc;
			break;
		}
		if (__atomic_add_fetch(&t->inside, 1, __ATOMIC_SEQ_CST) != 1)
			__atomic_add_fetch(&t->overlaps, 1, __ATOMIC_RELAXED);
		t->counter++;
		t->tokens[a->me][i] = wlk_lock_token(l);
		__atomic_sub_fetch(&t->inside, 1, __ATOMIC_SEQ_CST);
		rc = wlk_release(l);
		if (rc) {
			t->rc[a->me] = rc;
			break;
		}
	}
	return NULL;
}

static void violation(const char *what, void *arg)
{
	struct turns *t = arg;

	if (!t->invalid++)
		snprintf(t->first, sizeof(t->first), "%s", what);
}

/*
 * While the turns go on: validate the segment (under its mutex; fast words
 * included), and query it, which inflates the name under the turns.
 */
static void *check_main(void *arg)
{
	struct turns *t = arg;
	struct wlk_manager *q = t_open();

	while (!__atomic_load_n(&t->stop, __ATOMIC_ACQUIRE)) {
		struct wlk_snapshot *s = NULL;
		int rc = wlk_manager_validate(q, violation, t);

		if (rc && rc != WLK_ECORRUPT && !t->invalid++)
			snprintf(t->first, sizeof(t->first), "%s",
				 t_ename(rc));
		if (wlk_query(q, &s) == 0)
			wlk_snapshot_free(s);
	}
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void take_turns(bool check)
{
	struct turns t = {.m = {t_open(), t_open()}};
	struct turner_arg a[2] = {{&t, 0}, {&t, 1}};
	pthread_t th[2], ch;
	uint64_t *all = calloc(2 * TURNS, sizeof(*all));

	cr_assert_not_null(all);
	for (int i = 0; i < 2; i++) {
		t.tokens[i] = calloc(TURNS, sizeof(uint64_t));
		cr_assert_not_null(t.tokens[i]);
	}
	cr_assert_eq(pthread_barrier_init(&t.go, NULL, 2), 0);
	if (check)
		cr_assert_eq(pthread_create(&ch, NULL, check_main, &t), 0);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, turn_main, &a[i]),
			     0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	__atomic_store_n(&t.stop, true, __ATOMIC_RELEASE);
	if (check)
		pthread_join(ch, NULL);
	pthread_barrier_destroy(&t.go);

	T_ASSERT_RC(t.rc[0], 0);
	T_ASSERT_RC(t.rc[1], 0);
	cr_assert_eq(t.overlaps, 0, "%d grants overlapped", t.overlaps);
	cr_assert_eq(t.counter, 2 * TURNS, "lost updates: %ld of %d",
		     t.counter, 2 * TURNS);
	cr_assert_eq(t.invalid, 0, "%d violations, the first: %s", t.invalid,
		     t.first);
	/* Fencing tokens: rising in each thread, none given twice. */
	for (int i = 0; i < 2; i++) {
		for (int k = 1; k < TURNS; k++)
			cr_assert_gt(t.tokens[i][k], t.tokens[i][k - 1],
				     "thread %d, turn %d: token %llu after "
				     "%llu", i, k,
				     (unsigned long long)t.tokens[i][k],
				     (unsigned long long)t.tokens[i][k - 1]);
		memcpy(all + i * TURNS, t.tokens[i], TURNS * sizeof(*all));
		free(t.tokens[i]);
	}
	qsort(all, 2 * TURNS, sizeof(*all), cmp_u64);
	for (int k = 1; k < 2 * TURNS; k++)
		cr_assert_neq(all[k], all[k - 1], "token %llu given twice",
			      (unsigned long long)all[k]);
	free(all);
	cr_assert_eq(t_held_n(t.m[0], NULL, 0), 0);
	cr_assert_eq(t_pending_n(t.m[0], NULL, 0), 0);
	T_ASSERT_RC(wlk_manager_validate(t.m[0], NULL, NULL), 0);
}

Test(fastwait, two_managers_taking_turns_exclude_each_other, T_FIX,
     .timeout = 60)
{
	take_turns(false);
}

/* The same while a third thread validates the segment and queries it. */
Test(fastwait, turns_stay_valid_while_validated, T_FIX, .timeout = 60)
{
	take_turns(true);
}

/*
 * A fast waiter that stopped spinning and went for the segment mutex behind
 * a steal, and was handed the name by the fast word meanwhile: the steal
 * inflates the name (the waiter holds it then) and steals it. That is a
 * grant and then a steal, as on the mutex path: the acquire succeeds, the
 * lock is stolen, and its release says so and frees its slot. The test
 * orders the three by holding the segment mutex itself (it maps the
 * segment) while the steal, then the waiter, queue for it.
 */
struct seg_map {
	uint8_t *base;
	size_t size;
	struct wlk_seg_header *h;
};

static void seg_map(struct seg_map *s)
{
	s->base = t_segment_map(&s->size);
	s->h = (struct wlk_seg_header *)s->base;
}

/* The fast word of the one-byte name @c. */
static uint64_t *fast_word_of(struct seg_map *s, char c)
{
	for (uint32_t i = 0; i < s->h->max_names; i++) {
		struct wlk_seg_name *n =
			(struct wlk_seg_name *)(s->base + s->h->off_names +
						(size_t)i * s->h->name_stride);

		if (WLK_WORD_STATE(n->word) == WLK_SLOT_USED && n->len == 1 &&
		    n->text[0] == (uint8_t)c)
			return &n->fast;
	}
	cr_assert_fail("no name entry for %c", c);
	return NULL;
}

static uint32_t stolen_slots(struct seg_map *s)
{
	struct wlk_seg_request *r =
		(struct wlk_seg_request *)(s->base + s->h->off_requests);
	uint32_t n = 0;

	for (uint32_t i = 0; i < s->h->max_requests; i++)
		n += WLK_WORD_STATE(__atomic_load_n(&r[i].word,
						    __ATOMIC_ACQUIRE)) ==
		     WLK_SLOT_STOLEN;
	return n;
}

/* Whether thread @tid sleeps in a futex system call. */
static bool in_futex(pid_t tid)
{
	char path[64], buf[128];
	bool yes = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (fgets(buf, sizeof(buf), f))
		yes = strtol(buf, NULL, 10) == SYS_futex;
	fclose(f);
	return yes;
}

struct racer {
	struct wlk_manager *m;
	struct wlk_options o;
	bool request; /* wlk_request() rather than wlk_acquire() */
	pid_t tid;    /* [A] */
	int rc;
	int rel_rc;
	bool stolen;
	pthread_t th;
};

static int note_stolen(struct wlk_lock *l, void *arg)
{
	struct racer *r = arg;

	r->stolen = wlk_lock_stolen(l);
	return 7;
}

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	struct wlk_lock *l = NULL;

	__atomic_store_n(&r->tid, (pid_t)syscall(SYS_gettid),
			 __ATOMIC_RELEASE);
	if (r->request) {
		r->rc = wlk_request(r->m, "s", 1, &r->o, note_stolen, r);
		return NULL;
	}
	r->rc = wlk_acquire(r->m, "s", 1, &r->o, &l);
	if (r->rc == 0) {
		r->stolen = wlk_lock_stolen(l);
		r->rel_rc = wlk_release(l);
	}
	return NULL;
}

/* Whether the fast word @f (if not NULL) shows a fast waiter. */
static bool fast_waiting(const uint64_t *f)
{
	return !f || (__atomic_load_n(f, __ATOMIC_ACQUIRE) & WLK_FAST_WAIT);
}

/* Start @r; wait (bounded) until it sleeps on the segment mutex, after
 * @ready (if not NULL) shows it waits by the fast path. */
static void racer_park(struct racer *r, const uint64_t *ready)
{
	pid_t tid;
	int i;

	r->rc = r->rel_rc = 1;
	cr_assert_eq(pthread_create(&r->th, NULL, racer_main, r), 0);
	for (i = 0; i < T_WAIT_MS; i++) {
		tid = __atomic_load_n(&r->tid, __ATOMIC_ACQUIRE);
		if (tid && in_futex(tid) && fast_waiting(ready))
			break;
		t_nap_ms(1);
	}
	cr_assert_lt(i, T_WAIT_MS, "the thread did not get to the mutex");
}

static void stolen_before_settling(bool request)
{
	struct wlk_manager *mh = t_open();
	struct racer s = {.m = t_open(), .o = {.steal = true}};
	struct racer w = {.m = t_open(), .request = request};
	struct wlk_lock *lh, *l = NULL;
	struct seg_map map;
	uint64_t *fast;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		cr_skip_test("one CPU: nobody waits by the fast path");
	lh = take(mh, "s", NULL); /* held by the fast word */
	/* The waiter's manager keeps a slot for the fast path. */
	T_ASSERT_RC(wlk_acquire(w.m, "w", 1, NULL, &l), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	seg_map(&map);
	fast = fast_word_of(&map, 's');

	cr_assert_eq(pthread_mutex_lock(&map.h->sync.mutex), 0);
	racer_park(&s, NULL);
	racer_park(&w, fast);
	/* The fast word hands the name to the waiter. */
	T_ASSERT_RC(wlk_release(lh), 0);
	cr_assert_eq(__atomic_load_n(fast, __ATOMIC_ACQUIRE) & WLK_FAST_WAIT,
		     0, "not handed over");
	/* The steal, first in line for the mutex (the kernel wakes futex
	 * waiters of one priority in order), inflates and steals. */
	cr_assert_eq(pthread_mutex_unlock(&map.h->sync.mutex), 0);
	pthread_join(s.th, NULL);
	pthread_join(w.th, NULL);

	T_ASSERT_RC(s.rc, 0);
	if (request) {
		T_ASSERT_RC(w.rc, WLK_ESTOLEN);
	} else {
		T_ASSERT_RC(w.rc, 0);
		T_ASSERT_RC(w.rel_rc, WLK_ESTOLEN);
	}
	cr_assert(w.stolen, "the waiter's lock was not stolen");
	cr_assert_eq(stolen_slots(&map), 0, "the stolen slot was not freed");
	T_ASSERT_RC(wlk_manager_validate(mh, NULL, NULL), 0);
	munmap(map.base, map.size);
}

Test(fastwait, handed_over_then_stolen_before_settling_acquire_is_stolen,
     T_FIX, .timeout = 20)
{
	stolen_before_settling(false);
}

Test(fastwait, handed_over_then_stolen_before_settling_request_is_estolen,
     T_FIX, .timeout = 20)
{
	stolen_before_settling(true);
}
