/* SPDX-License-Identifier: MIT */
/*
 * t_fastwait.c - a request that finds its name held by the fast path may
 * wait as the name's one fast waiter, and the holder's release hands the
 * name over without the segment mutex (lib/fast.c). Whatever comes next
 * (a third request, a long hold, query) inflates the name: the waiter
 * keeps its place, first in the queue. These tests check the order,
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

#include "../common.h"

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
