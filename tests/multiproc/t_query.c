/* SPDX-License-Identifier: MIT */
/* t_query.c - wlk_query() across processes: seen from a third process. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common.h"

struct link {
	struct t_pipe up;   /* child -> parent */
	struct t_pipe down; /* parent -> child */
	const char *client_id;
	struct wlk_options opt;
};

static void link_open(struct link *k, const char *client_id,
		      const struct wlk_options *o)
{
	memset(k, 0, sizeof(*k));
	t_pipe_open(&k->up);
	t_pipe_open(&k->down);
	k->client_id = client_id;
	if (o)
		k->opt = *o;
}

static void link_close(struct link *k)
{
	t_pipe_close(&k->up);
	t_pipe_close(&k->down);
}

/* Child: acquire "r" as @client_id, say 'g', hold until told, release. */
static int child_hold(void *arg)
{
	struct link *k = arg;
	struct wlk_manager_options mo = { .client_id = k->client_id };
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;
	char c;

	T_CHILD_CHECK(wlk_manager_open(t_origin, &mo, &m) == 0, 10);
	T_CHILD_CHECK(wlk_acquire(m, "r", 1, &k->opt, &l) == 0, 11);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'g') == 0, 12);
	T_CHILD_CHECK(t_get(k->down.rd, &c, 1, T_WAIT_MS) == 0, 13);
	T_CHILD_CHECK(wlk_release(l) == 0, 14);
	wlk_manager_close(m);
	return 0;
}

/* What a querying process reports about "r". */
struct view {
	int held;
	int pending;
	pid_t held_pid;
	pid_t pending_pid;
	char held_id[WLK_CLIENT_ID_MAX + 1];
	char pending_id[WLK_CLIENT_ID_MAX + 1];
	int held_mode;
};

static int take_view(struct wlk_manager *m, struct view *v)
{
	struct wlk_snapshot *s = NULL;
	const struct wlk_lock_info *li;

	memset(v, 0, sizeof(*v));
	if (wlk_query(m, &s) != 0)
		return -1;
	v->held = (int)wlk_snapshot_held_count(s);
	v->pending = (int)wlk_snapshot_pending_count(s);
	li = wlk_snapshot_held(s, 0);
	if (li) {
		v->held_pid = li->pid;
		v->held_mode = li->mode;
		snprintf(v->held_id, sizeof(v->held_id), "%s", li->client_id);
	}
	li = wlk_snapshot_pending(s, 0);
	if (li) {
		v->pending_pid = li->pid;
		snprintf(v->pending_id, sizeof(v->pending_id), "%s",
			 li->client_id);
	}
	wlk_snapshot_free(s);
	return 0;
}

static int child_query(void *arg)
{
	int fd = *(int *)arg;
	struct wlk_manager *m = NULL;
	struct view v;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK(take_view(m, &v) == 0, 11);
	wlk_manager_close(m);
	T_CHILD_CHECK(t_put(fd, &v, sizeof(v)) == 0, 12);
	return 0;
}

Test(mp_query, holder_and_waiter_seen_from_third_processes, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct link ka, kb;
	struct t_pipe p;
	struct view v;
	pid_t pa, pb, pc;

	link_open(&ka, "holder-A", NULL);
	link_open(&kb, "waiter-B", NULL);
	pa = t_fork(child_hold, &ka);
	cr_assert_eq(t_get_byte(ka.up.rd), 'g');
	pb = t_fork(child_hold, &kb);
	cr_assert(t_wait_pending(m, "r", 1, 1));

	/* The parent is a third process... */
	cr_assert_eq(take_view(m, &v), 0);
	cr_assert_eq(v.held, 1);
	cr_assert_eq(v.pending, 1);
	cr_assert_eq(v.held_pid, pa);
	cr_assert_str_eq(v.held_id, "holder-A");
	cr_assert_eq(v.held_mode, WLK_EXCLUSIVE);
	cr_assert_eq(v.pending_pid, pb);
	cr_assert_str_eq(v.pending_id, "waiter-B");

	/* ...and so is a fresh child with its own manager. */
	t_pipe_open(&p);
	pc = t_fork(child_query, &p.wr);
	cr_assert_eq(t_get(p.rd, &v, sizeof(v), T_WAIT_MS), 0);
	cr_assert_eq(t_wait(pc, T_WAIT_MS), 0);
	cr_assert_eq(v.held, 1);
	cr_assert_eq(v.pending, 1);
	cr_assert_eq(v.held_pid, pa);
	cr_assert_str_eq(v.held_id, "holder-A");
	cr_assert_eq(v.pending_pid, pb);
	cr_assert_str_eq(v.pending_id, "waiter-B");

	/* Hand over: B holds, nothing waits. */
	t_put_byte(ka.down.wr, 'r');
	cr_assert_eq(t_get_byte(kb.up.rd), 'g');
	cr_assert_eq(t_wait(pa, T_WAIT_MS), 0);
	cr_assert_eq(take_view(m, &v), 0);
	cr_assert_eq(v.held, 1);
	cr_assert_eq(v.pending, 0);
	cr_assert_eq(v.held_pid, pb);
	cr_assert_str_eq(v.held_id, "waiter-B");
	t_put_byte(kb.down.wr, 'r');
	cr_assert_eq(t_wait(pb, T_WAIT_MS), 0);
	cr_assert_eq(take_view(m, &v), 0);
	cr_assert_eq(v.held, 0);
	cr_assert_eq(v.pending, 0);
	t_pipe_close(&p);
	link_close(&ka);
	link_close(&kb);
}

Test(mp_query, shared_holders_of_several_processes_listed_each, T_FIX,
     .timeout = 20)
{
	enum { K = 3 };
	struct wlk_options sh = { .mode = WLK_SHARED };
	struct wlk_manager *m = t_open();
	struct wlk_snapshot *s = NULL;
	struct link k[K];
	pid_t pids[K];
	bool seen[K] = { false };
	size_t i, j;

	for (i = 0; i < K; i++) {
		link_open(&k[i], NULL, &sh);
		pids[i] = t_fork(child_hold, &k[i]);
		cr_assert_eq(t_get_byte(k[i].up.rd), 'g');
	}
	T_ASSERT_RC(wlk_query(m, &s), 0);
	cr_assert_eq(wlk_snapshot_held_count(s), K);
	for (i = 0; i < K; i++) {
		const struct wlk_lock_info *li = wlk_snapshot_held(s, i);

		cr_assert_not_null(li);
		cr_assert_eq(li->mode, WLK_SHARED);
		cr_assert_gt(strlen(li->client_id), 0);
		for (j = 0; j < K; j++) {
			if (li->pid == pids[j]) {
				cr_assert_not(seen[j]);
				seen[j] = true;
			}
		}
	}
	for (j = 0; j < K; j++)
		cr_assert(seen[j], "holder process %zu missing", j);
	wlk_snapshot_free(s);
	for (i = 0; i < K; i++) {
		t_put_byte(k[i].down.wr, 'r');
		cr_assert_eq(t_wait(pids[i], T_WAIT_MS), 0);
		link_close(&k[i]);
	}
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
}

Test(mp_query, generated_client_ids_differ_across_processes, T_FIX,
     .timeout = 20)
{
	struct wlk_options sh = { .mode = WLK_SHARED };
	struct wlk_manager *m = t_open();
	struct wlk_snapshot *s = NULL;
	struct wlk_lock *l = NULL;
	struct link k[2];
	pid_t pids[2];
	size_t i, j, n;

	T_ASSERT_RC(wlk_acquire(m, "r", 1, &sh, &l), 0);
	for (i = 0; i < 2; i++) {
		link_open(&k[i], NULL, &sh);
		pids[i] = t_fork(child_hold, &k[i]);
		cr_assert_eq(t_get_byte(k[i].up.rd), 'g');
	}
	T_ASSERT_RC(wlk_query(m, &s), 0);
	n = wlk_snapshot_held_count(s);
	cr_assert_eq(n, 3);
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			cr_assert_str_neq(wlk_snapshot_held(s, i)->client_id,
					  wlk_snapshot_held(s, j)->client_id);
	wlk_snapshot_free(s);
	for (i = 0; i < 2; i++) {
		t_put_byte(k[i].down.wr, 'r');
		cr_assert_eq(t_wait(pids[i], T_WAIT_MS), 0);
		link_close(&k[i]);
	}
	T_ASSERT_RC(wlk_release(l), 0);
}

/*
 * Spec 4.5 takes the snapshot on the lock task queue: it is atomic with
 * respect to every grant and release. A process that always takes Y before
 * Z and lets go of Z first is never seen holding Z without Y. Y is the
 * bucket's first name entry and Z one 200001 entries further on, so a copy
 * that visits the names one by one while the fast path keeps running sees
 * Y and Z at moments far apart.
 */
#define ATOMIC_FILL 200000u
#define ATOMIC_SNAPSHOTS 400
#define ATOMIC_BUDGET_NS (20ull * 1000 * 1000 * 1000)
/* Time with Z held, and with Y free: neither is short next to a copy. */
#define ATOMIC_DWELL_NS 5000u

struct cycler {
	atomic_int stop;
	atomic_long cycles;
	int cpu[2]; /* the querier's and the child's */
};

/* The first two CPUs we may run on, in @cpu; false if fewer. */
static bool two_cpus(int cpu[2])
{
	cpu_set_t set;
	int n = 0;

	if (sched_getaffinity(0, sizeof(set), &set))
		return false;
	for (int i = 0; i < CPU_SETSIZE && n < 2; i++)
		if (CPU_ISSET(i, &set))
			cpu[n++] = i;
	return n == 2;
}

/* Run on CPU @cpu only: the copy and the cycling must overlap. */
static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

/* Busy for @ns: the dwell is part of the work, not synchronisation. */
static void dwell(uint64_t ns)
{
	uint64_t end = t_now_ns() + ns;

	while (t_now_ns() < end)
		;
}

/* Child: acq Y; acq Z; dwell; rel Z; rel Y; dwell; until told. */
static int child_cycle(void *arg)
{
	struct cycler *c = arg;
	struct wlk_manager *m = NULL;

	T_CHILD_CHECK(pin(c->cpu[1]) == 0, 15);
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	while (!atomic_load(&c->stop)) {
		struct wlk_lock *y = NULL, *z = NULL;

		T_CHILD_CHECK(wlk_acquire(m, "Y", 1, NULL, &y) == 0, 11);
		T_CHILD_CHECK(wlk_acquire(m, "Z", 1, NULL, &z) == 0, 12);
		dwell(ATOMIC_DWELL_NS);
		T_CHILD_CHECK(wlk_release(z) == 0, 13);
		T_CHILD_CHECK(wlk_release(y) == 0, 14);
		dwell(ATOMIC_DWELL_NS);
		atomic_fetch_add(&c->cycles, 1);
	}
	wlk_manager_close(m);
	return 0;
}

/* Whether process @pid holds @name (one byte) in snapshot @s. */
static bool holds(const struct wlk_snapshot *s, pid_t pid, char name)
{
	for (size_t i = 0; i < wlk_snapshot_held_count(s); i++) {
		const struct wlk_lock_info *li = wlk_snapshot_held(s, i);

		if (li->pid == pid && li->name_len == 1 && li->name[0] == name)
			return true;
	}
	return false;
}

Test(mp_query, snapshot_is_atomic_across_names, T_FIX, .timeout = 90)
{
	struct wlk_manager_options mo = { .max_names = 1u << 18,
					  .max_name_len = 16 };
	struct wlk_manager *m;
	struct cycler *c;
	struct wlk_lock *l = NULL;
	int seen_both = 0, seen_y = 0, z_alone = 0, n = 0, cpu[2];
	uint64_t end;
	pid_t pt;

	if (!two_cpus(cpu))
		cr_skip_test("one CPU: the copy and the child would not "
			     "overlap");
	cr_assert_eq(pin(cpu[0]), 0);
	m = t_open_opts(&mo);
	c = t_shared_alloc(sizeof(*c));
	c->cpu[0] = cpu[0];
	c->cpu[1] = cpu[1];
	/* Y, then the filler names, then Z: entries are taken in order. */
	T_ASSERT_RC(wlk_acquire(m, "Y", 1, NULL, &l), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	for (unsigned int i = 0; i < ATOMIC_FILL; i++) {
		char name[16];
		int len = snprintf(name, sizeof(name), "f%u", i);

		T_ASSERT_RC(wlk_acquire(m, name, (size_t)len, NULL, &l), 0);
		T_ASSERT_RC(wlk_release(l), 0);
	}
	T_ASSERT_RC(wlk_acquire(m, "Z", 1, NULL, &l), 0);
	T_ASSERT_RC(wlk_release(l), 0);

	pt = t_fork(child_cycle, c);
	end = t_now_ns() + T_WAIT_MS * 1000000ull;
	while (atomic_load(&c->cycles) < 100 && t_now_ns() < end)
		t_nap_ms(1);
	cr_assert_geq(atomic_load(&c->cycles), 100, "the child does not run");
	end = t_now_ns() + ATOMIC_BUDGET_NS;
	for (; n < ATOMIC_SNAPSHOTS && t_now_ns() < end; n++) {
		long c0 = atomic_load(&c->cycles);
		struct wlk_snapshot *s = NULL;
		bool y, z;

		/* Let the child run between two copies (a querier that
		 * takes the mutex back to back can starve it), then start
		 * at a random point of its cycle. */
		while (atomic_load(&c->cycles) < c0 + 2 && t_now_ns() < end)
			sched_yield();
		dwell((uint64_t)rand() % (4 * ATOMIC_DWELL_NS));
		T_ASSERT_RC(wlk_query(m, &s), 0);
		y = holds(s, pt, 'Y');
		z = holds(s, pt, 'Z');
		wlk_snapshot_free(s);
		seen_both += y && z;
		seen_y += y && !z;
		z_alone += z && !y;
	}
	atomic_store(&c->stop, 1);
	cr_assert_eq(t_wait(pt, T_WAIT_MS), 0);
	cr_log_info("%d snapshots: Y and Z %d, Y alone %d, Z alone %d", n,
		    seen_both, seen_y, z_alone);
	cr_assert_eq(z_alone, 0,
		     "%d of %d snapshots show Z held without Y, a state that "
		     "never existed", z_alone, n);
	t_shared_free(c, sizeof(*c));
}
