/* SPDX-License-Identifier: MIT */
/* t_query.c - wlk_query() across processes: seen from a third process. */
#include <stdio.h>
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
