/* SPDX-License-Identifier: MIT */
/* t_failpoints.c - kill a process at every fail point; the bucket survives. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common.h"
#include "testing.h"

/* The bucket that the script creates (segment_create_mid). */
#define FRESH "fresh"
/* A bucket with room for one name: a second name evicts the first. */
#define TINY "tiny"
/* How long the script waits for the parent at each stage. */
#define STAGE_MS (3 * T_WAIT_MS)

static const struct wlk_options ex_ia = { .if_available = true };
static const struct wlk_options sh = { .mode = WLK_SHARED };

/* Pipes between the parent and one child. */
struct link {
	struct t_pipe up;   /* child -> parent */
	struct t_pipe down; /* parent -> child */
};

/* Open just before forking: no other child may inherit up.wr. */
static pid_t fork_linked(int (*fn)(void *), void *arg, struct link *k)
{
	pid_t pid;

	t_pipe_open(&k->up);
	t_pipe_open(&k->down);
	pid = t_fork(fn, arg);
	close(k->up.wr);
	k->up.wr = -1;
	close(k->down.rd);
	k->down.rd = -1;
	return pid;
}

static void link_close(struct link *k)
{
	t_pipe_close(&k->up);
	t_pipe_close(&k->down);
}

/* In a child: report stage @c, then wait for the parent's go-ahead. */
static int say(struct link *k, char c)
{
	char go;

	if (t_put_byte(k->up.wr, c) != 0)
		return -1;
	return t_get(k->down.rd, &go, 1, STAGE_MS);
}

/* A thread of the script: acquire, and release at once if @drop. */
struct side {
	pthread_t th;
	struct wlk_manager *m;
	const char *name;
	struct wlk_options opt;
	bool drop;
	int rc;
	int rel_rc;
};

static void *side_main(void *arg)
{
	struct side *s = arg;
	struct wlk_lock *l = NULL;

	s->rc = wlk_acquire(s->m, s->name, WLK_NUL_TERMINATED, &s->opt, &l);
	if (s->rc == 0 && l && s->drop)
		s->rel_rc = wlk_release(l);
	return NULL;
}

static int side_start(struct side *s, struct wlk_manager *m, const char *name,
		      const struct wlk_options *o, bool drop)
{
	memset(s, 0, sizeof(*s));
	s->m = m;
	s->name = name;
	if (o)
		s->opt = *o;
	s->drop = drop;
	s->rc = 1;
	return pthread_create(&s->th, NULL, side_main, s);
}

/*
 * Two threads of the script, on two managers, take turns on one name: the
 * one that finds it held waits as its fast waiter, and a release hands the
 * name over (lib/state/fastword.c, lib/shm/lane.c). Each holds the name
 * a couple of microseconds, well within a fast waiter's spin. They take
 * turns until @ns pass: when a fast_* point is armed, long enough for the
 * two threads to run at the same time even on a machine busy with other
 * tests (it kills the script the first time it is passed).
 */
#define HOLD_NS 2000
#define TURNS_NS (200 * 1000 * 1000ull)
/* Below T_WAIT_MS: the parent waits that long for the script's next word. */
#define TURNS_ARMED_NS (4 * 1000 * 1000 * 1000ull)

struct turner {
	pthread_t th;
	struct wlk_manager *m;
	pthread_barrier_t *go;
	uint64_t until;
	int rc;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *turner_main(void *arg)
{
	struct turner *t = arg;

	pthread_barrier_wait(t->go);
	while (!t->rc && mono_ns() < t->until) {
		struct wlk_lock *l = NULL;
		uint64_t held;

		t->rc = wlk_acquire(t->m, "z", 1, NULL, &l);
		if (t->rc)
			break;
		for (held = mono_ns(); mono_ns() - held < HOLD_NS;)
			;
		t->rc = wlk_release(l);
	}
	return NULL;
}

static int take_turns(struct wlk_manager *m1, struct wlk_manager *m2,
		      uint64_t ns)
{
	uint64_t until = mono_ns() + ns;
	struct turner t[2] = {{.m = m1, .until = until},
			      {.m = m2, .until = until}};
	pthread_barrier_t go;
	int rc = 0;

	if (pthread_barrier_init(&go, NULL, 2))
		return -1;
	for (int i = 0; i < 2; i++) {
		t[i].go = &go;
		if (pthread_create(&t[i].th, NULL, turner_main, &t[i]))
			return -1; /* the script fails: it exits at once */
	}
	for (int i = 0; i < 2; i++) {
		pthread_join(t[i].th, NULL);
		rc = rc ? rc : t[i].rc;
	}
	pthread_barrier_destroy(&go);
	return rc;
}

struct fp_run {
	const char *point;
	struct link k;
};

/*
 * The armed child: one script that passes every fail point, so whichever
 * is armed kills it; running to the end means the point was never reached.
 * Each stage letter tells the parent to set up what comes next: 'x' queue
 * a waiter behind our "x" and take "s" shared twice, 'r' see the waiter
 * granted, 'd' queue a waiter on "d", 'h' kill a holder for us to reap,
 * 'k' have a process die inside the critical section for us to repair.
 */
static int child_script(void *arg)
{
	struct fp_run *r = arg;
	struct wlk_manager_options fresh = { .bucket = FRESH };
	struct wlk_manager_options tiny = { .bucket = TINY, .max_names = 1 };
	struct wlk_manager *m1 = NULL, *m2 = NULL, *mf = NULL;
	struct wlk_lock *lx = NULL, *ls1 = NULL, *ls2 = NULL, *l = NULL;
	struct wlk_options o;
	struct wlk_snapshot *snap = NULL;
	struct wlk_signal *sig = NULL;
	struct side t;
	const struct wlk_name pq[] = {{"p", 1}, {"q", 1}};
	size_t i;

	T_CHILD_CHECK(setenv("WLK_FAILPOINT", r->point, 1) == 0, 10);
	/* Attach to the parent's bucket: attach_after_alloc. */
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m1) == 0, 11);
	/* Create a bucket nobody has opened: segment_create_mid. */
	T_CHILD_CHECK(wlk_manager_open(t_origin, &fresh, &mf) == 0, 12);
	wlk_manager_close(mf);
	/* A new name, granted at once: request_after_name,
	 * request_after_commit, grant_after_list. */
	T_CHILD_CHECK(wlk_acquire(m1, "x", 1, NULL, &lx) == 0, 13);
	T_CHILD_CHECK(say(&r->k, 'x') == 0, 14);

	/* Steal "s" from the parent's two shared holders and from our other
	 * manager: steal_after_intent, steal_mid. */
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m2) == 0, 15);
	T_CHILD_CHECK(wlk_acquire(m2, "s", 1, &sh, &ls2) == 0, 16);
	o = (struct wlk_options){ .steal = true };
	T_CHILD_CHECK(wlk_acquire(m1, "s", 1, &o, &ls1) == 0, 17);
	T_CHILD_CHECK(wlk_lock_stolen(ls2), 18);
	T_CHILD_CHECK(wlk_release(ls2) == WLK_ESTOLEN, 19);

	/* Give up behind the parent's waiter: unqueue_after_remove. */
	o = (struct wlk_options){ .timeout_ns = 20 * 1000000ull };
	T_CHILD_CHECK(wlk_acquire(m2, "x", 1, &o, &l) == WLK_ETIMEDOUT, 20);
	T_CHILD_CHECK(wlk_signal_new(&sig) == 0, 21);
	o = (struct wlk_options){ .signal = sig };
	T_CHILD_CHECK(side_start(&t, m2, "x", &o, false) == 0, 22);
	/* (A query, with the fast path frozen: query_frozen.) */
	T_CHILD_CHECK(t_wait_pending(m1, "x", 1, 2), 23);
	wlk_signal_abort(sig, 0);
	pthread_join(t.th, NULL);
	T_CHILD_CHECK(t.rc == WLK_EABORTED, 24);
	wlk_signal_free(sig);
	T_CHILD_CHECK(wlk_acquire(m2, "x", 1, &ex_ia, &l) == 0 && !l, 25);

	/* Release with the parent's waiter behind: release_after_ungrant. */
	T_CHILD_CHECK(wlk_release(lx) == 0, 26);
	T_CHILD_CHECK(say(&r->k, 'r') == 0, 27);

	/* Release "b" to the parent's two shared waiters, granted as one
	 * run: grant_run_mid. */
	T_CHILD_CHECK(wlk_acquire(m1, "b", 1, NULL, &l) == 0, 54);
	T_CHILD_CHECK(say(&r->k, 'b') == 0, 55);
	T_CHILD_CHECK(wlk_release(l) == 0, 56);

	/* A scope, granted at once and released: scope_new_mid,
	 * scope_grant_mid, scope_drop_mid. */
	T_CHILD_CHECK(wlk_acquire_scope(m1, pq, 2, NULL, &l) == 0, 52);
	T_CHILD_CHECK(wlk_release(l) == 0, 53);

	/* Our two managers contend for "y". */
	T_CHILD_CHECK(wlk_acquire(m1, "y", 1, NULL, &l) == 0, 28);
	T_CHILD_CHECK(side_start(&t, m2, "y", NULL, true) == 0, 29);
	T_CHILD_CHECK(t_wait_pending(m1, "y", 1, 1), 30);
	T_CHILD_CHECK(wlk_release(l) == 0, 31);
	pthread_join(t.th, NULL);
	T_CHILD_CHECK(t.rc == 0 && t.rel_rc == 0, 32);

	/* Our two managers take turns on "z" by the fast path:
	 * fast_enlist_mid, fast_handoff_mid. */
	T_CHILD_CHECK(take_turns(m1, m2, strncmp(r->point, "fast_", 5)
						 ? TURNS_NS
						 : TURNS_ARMED_NS) == 0,
		      51);

	/* A full name table: the idle "a" makes room for "b":
	 * name_evict_after_unlink. */
	T_CHILD_CHECK(wlk_manager_open(t_origin, &tiny, &mf) == 0, 46);
	T_CHILD_CHECK(wlk_acquire(mf, "a", 1, NULL, &l) == 0, 47);
	T_CHILD_CHECK(wlk_release(l) == 0, 48);
	T_CHILD_CHECK(wlk_acquire(mf, "b", 1, NULL, &l) == 0, 49);
	T_CHILD_CHECK(wlk_release(l) == 0, 50);
	wlk_manager_close(mf);

	/* Close a manager that holds "d" (the parent waits for it) and has
	 * a request queued: drop_client_mid. */
	T_CHILD_CHECK(wlk_acquire(m2, "d", 1, NULL, &l) == 0, 33);
	T_CHILD_CHECK(say(&r->k, 'd') == 0, 34);
	T_CHILD_CHECK(side_start(&t, m2, "s", NULL, true) == 0, 35);
	T_CHILD_CHECK(t_wait_pending(m1, "s", 1, 1), 36);
	wlk_manager_close(m2);
	pthread_join(t.th, NULL);
	T_CHILD_CHECK(t.rc == WLK_ESTATE, 37);
	T_CHILD_CHECK(wlk_release(l) == WLK_ESTATE, 38);

	/* The parent killed a holder; query reaps it: reap_after_free. */
	T_CHILD_CHECK(say(&r->k, 'h') == 0, 39);
	T_CHILD_CHECK(wlk_query(m1, &snap) == 0, 40);
	for (i = 0; i < wlk_snapshot_held_count(snap); i++)
		T_CHILD_CHECK(strcmp(wlk_snapshot_held(snap, i)->name, "h"),
			      45);
	wlk_snapshot_free(snap);

	/* A process died holding the segment mutex; we lock it next and
	 * repair: recover_mid. */
	T_CHILD_CHECK(say(&r->k, 'k') == 0, 41);
	T_CHILD_CHECK(wlk_query(m1, &snap) == 0, 42);
	wlk_snapshot_free(snap);

	T_CHILD_CHECK(wlk_release(ls1) == 0, 43);
	wlk_manager_close(m1);
	T_CHILD_CHECK(t_put_byte(r->k.up.wr, 'e') == 0, 44);
	return 0;
}

/* Helper: hold "h" until killed. */
static int child_hold_h(void *arg)
{
	struct link *k = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK(wlk_acquire(m, "h", 1, NULL, &l) == 0, 11);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'g') == 0, 12);
	t_nap_ms(3 * STAGE_MS); /* until killed */
	return 13;
}

/* Helper: die inside the segment's critical section (a fail point). */
static int child_die_locked(void *arg)
{
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;

	(void)arg;
	T_CHILD_CHECK(setenv("WLK_FAILPOINT", "request_after_commit", 1) == 0,
		      10);
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 11);
	T_CHILD_CHECK(wlk_acquire(m, "k", 1, NULL, &l) == 0, 12);
	return 13; /* not killed: the fail point is gone */
}

static void assert_valid(struct wlk_manager *m, const char *point,
			 const char *bucket)
{
	char what[128];

	snprintf(what, sizeof(what), "%s: bucket %s", point, bucket);
	t_assert_valid(m, what);
}

static void assert_free(struct wlk_manager *m, const char *point,
			const char *name)
{
	struct wlk_lock *l = NULL;
	int rc = wlk_acquire(m, name, WLK_NUL_TERMINATED, &ex_ia, &l);

	cr_assert_eq(rc, 0, "%s: acquire \"%s\": %s", point, name,
		     t_ename(rc));
	cr_assert_not_null(l, "%s: \"%s\" is still taken", point, name);
	T_ASSERT_RC(wlk_release(l), 0);
}

/* How the script child ended, for messages. */
static const char *describe(int st, char *buf, size_t size)
{
	if (st == 0)
		snprintf(buf, size, "never reached it (ran the whole script)");
	else if (st == -1)
		snprintf(buf, size, "hung (killed by the test)");
	else if (st > 128)
		snprintf(buf, size, "killed by signal %d", st - 128);
	else
		snprintf(buf, size, "script check %d failed", st);
	return buf;
}

/*
 * The stage after which the script first passes @point ('-': before the
 * first stage), so each point is hit in the situation it is meant to test;
 * '?' for a point this table does not know yet.
 */
static char expected_stage(const char *point)
{
	static const struct {
		const char *point;
		char stage;
	} where[] = {
		{ "segment_create_mid", '-' },
		{ "attach_after_alloc", '-' },
		{ "request_after_name", '-' },
		{ "request_after_commit", '-' },
		{ "grant_after_list", '-' },
		{ "grant_run_mid", 'b' },
		{ "steal_after_intent", 'x' },
		{ "steal_mid", 'x' },
		{ "unqueue_after_remove", 'x' },
		{ "release_after_ungrant", 'x' },
		{ "name_evict_after_unlink", 'b' },
		{ "drop_client_mid", 'd' },
		{ "reap_after_free", 'h' },
		{ "recover_mid", 'k' },
		{ "fast_enlist_mid", 'b' },
		{ "fast_handoff_mid", 'b' },
		{ "query_frozen", 'x' },
		{ "scope_new_mid", 'b' },
		{ "scope_grant_mid", 'b' },
		{ "scope_drop_mid", 'b' },
	};
	size_t i;

	for (i = 0; i < sizeof(where) / sizeof(where[0]); i++)
		if (!strcmp(where[i].point, point))
			return where[i].stage;
	return '?';
}

/*
 * Run the script with @point armed; the child must die of SIGKILL there.
 * The parent answers each stage, then checks that the segment is valid,
 * that nothing of the dead remains, that its waiters were granted and
 * that every name involved can be taken again.
 */
static void sweep(const char *point)
{
	static const char *const names[] = { "x", "s", "y", "z", "b",
					      "d", "h", "k", "p", "q" };
	struct wlk_manager_options fresh = { .bucket = FRESH };
	struct wlk_manager *m, *m2, *mf;
	struct wlk_lock *ps1 = NULL, *ps2 = NULL;
	struct t_holder wx, wd, wb[2];
	bool have_wx = false, have_wd = false, have_wb = false;
	bool wx_granted = false;
	bool stolen1, stolen2;
	struct link hk = { { -1, -1 }, { -1, -1 } };
	struct fp_run r = { .point = point };
	pid_t pid, ph = 0, pk = 0;
	char why[96], stage = '-';
	int c, st;
	size_t i;

#ifndef WLK_ENABLE_FAILPOINTS
	cr_skip_test("fail points are not compiled in (--enable-failpoints)");
#endif
	/* A request waits by the fast path only where spinning pays. */
	if (!strncmp(point, "fast_", 5) && sysconf(_SC_NPROCESSORS_ONLN) < 2)
		cr_skip_test("%s: one CPU online, no fast waiters", point);
	m = t_open();
	m2 = t_open();
	t_track_bucket(t_origin, FRESH, NULL);
	t_track_bucket(t_origin, TINY, NULL);
	pid = fork_linked(child_script, &r, &r.k);
	while ((c = t_get_byte(r.k.up.rd)) >= 0 && c != 'e') {
		stage = (char)c;
		switch (c) {
		case 'x': /* the child holds "x": queue behind it */
			t_holder_start(&wx, m, "x", 1, NULL);
			have_wx = true;
			cr_assert(t_wait_pending(m, "x", 1, 1));
			/* Two shared holders for the child to steal from. */
			T_ASSERT_RC(wlk_acquire(m, "s", 1, &sh, &ps1), 0);
			T_ASSERT_RC(wlk_acquire(m2, "s", 1, &sh, &ps2), 0);
			break;
		case 'r': /* the child released "x" */
			cr_assert_eq(t_holder_wait_granted(&wx), 0);
			wx_granted = true;
			break;
		case 'b': /* the child holds "b": two shared waiters */
			t_holder_start(&wb[0], m, "b", 1, &sh);
			t_holder_start(&wb[1], m2, "b", 1, &sh);
			have_wb = true;
			cr_assert(t_wait_pending(m, "b", 1, 2));
			break;
		case 'd': /* the child's second manager holds "d" */
			t_holder_start(&wd, m, "d", 1, NULL);
			have_wd = true;
			cr_assert(t_wait_pending(m, "d", 1, 1));
			break;
		case 'h': /* a holder dies; only the child may reap it */
			ph = fork_linked(child_hold_h, &hk, &hk);
			cr_assert_eq(t_get_byte(hk.up.rd), 'g');
			cr_assert_eq(kill(ph, SIGKILL), 0);
			cr_assert_eq(t_wait(ph, T_WAIT_MS), 128 + SIGKILL);
			break;
		case 'k': /* a process dies holding the segment mutex */
			pk = t_fork(child_die_locked, NULL);
			st = t_wait(pk, T_WAIT_MS);
			cr_assert_eq(st, 128 + SIGKILL, "helper: %s",
				     describe(st, why, sizeof(why)));
			break;
		default:
			cr_assert_fail("unknown stage '%c'", c);
		}
		cr_assert_eq(t_put_byte(r.k.down.wr, 'g'), 0);
	}
	st = t_wait(pid, 3 * T_WAIT_MS);
	cr_assert_eq(st, 128 + SIGKILL, "%s: child %s (after stage '%c')",
		     point, describe(st, why, sizeof(why)), stage);
	cr_assert(expected_stage(point) == '?' ||
		  expected_stage(point) == stage,
		  "%s: reached after stage '%c', expected after '%c'", point,
		  stage, expected_stage(point));

	/* Waiters blocked behind the dead child were granted. */
	if (have_wx && !wx_granted) {
		cr_assert_eq(t_holder_wait_granted(&wx), 0,
			     "%s: waiter on \"x\" not granted", point);
		T_ASSERT_RC(wx.acq_rc, 0);
	}
	for (i = 0; have_wb && i < 2; i++) {
		cr_assert_eq(t_holder_wait_granted(&wb[i]), 0,
			     "%s: shared waiter %zu on \"b\" not granted",
			     point, i);
		T_ASSERT_RC(wb[i].acq_rc, 0);
	}
	if (have_wd) {
		cr_assert_eq(t_holder_wait_granted(&wd), 0,
			     "%s: waiter on \"d\" not granted", point);
		T_ASSERT_RC(wd.acq_rc, 0);
	}
	assert_valid(m, point, "default");
	cr_assert_eq(t_entries_of(m, pid), 0, "%s: the dead child remains",
		     point);
	if (ph)
		cr_assert_eq(t_entries_of(m, ph), 0, "%s: dead holder remains",
			     point);
	if (pk)
		cr_assert_eq(t_entries_of(m, pk), 0, "%s: dead helper remains",
			     point);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0, "%s: pending left", point);
	/* A steal is all or nothing, even when its requester dies in it
	 * (the intent record); past it, both our holders lost "s". */
	if (ps1) {
		stolen1 = wlk_lock_stolen(ps1);
		stolen2 = wlk_lock_stolen(ps2);
		cr_assert_eq(stolen1, stolen2, "%s: half a steal: %d/%d",
			     point, stolen1, stolen2);
		cr_assert(stolen1 || !strcmp(point, "steal_after_intent"),
			  "%s: the steal did not happen", point);
		T_ASSERT_RC(wlk_release(ps1), stolen1 ? WLK_ESTOLEN : 0);
		T_ASSERT_RC(wlk_release(ps2), stolen2 ? WLK_ESTOLEN : 0);
	}
	if (have_wx) {
		cr_assert_eq(t_holder_release(&wx), 0);
		T_ASSERT_RC(wx.rel_rc, 0);
		t_holder_join(&wx);
	}
	for (i = 0; have_wb && i < 2; i++) {
		cr_assert_eq(t_holder_release(&wb[i]), 0);
		T_ASSERT_RC(wb[i].rel_rc, 0);
		t_holder_join(&wb[i]);
	}
	if (have_wd) {
		cr_assert_eq(t_holder_release(&wd), 0);
		T_ASSERT_RC(wd.rel_rc, 0);
		t_holder_join(&wd);
	}
	cr_assert_eq(t_held_n(m, NULL, 0), 0, "%s: locks left held", point);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_free(m, point, names[i]);
	assert_valid(m, point, "default");

	/* The bucket the child was creating works too. */
	mf = t_open_opts(&fresh);
	assert_valid(mf, point, FRESH);
	assert_free(mf, point, "x");
	cr_assert_eq(t_held_n(mf, NULL, 0), 0);
	link_close(&r.k);
	link_close(&hk);
}

/* One test per fail point, so a new point cannot be left out. */
#define FP_TEST(name)                                                         \
	Test(failpoints, name, T_FIX, .timeout = 60)                          \
	{                                                                      \
		sweep(#name);                                                  \
	}
WLK_FAILPOINT_LIST(FP_TEST)
