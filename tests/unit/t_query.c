/* SPDX-License-Identifier: MIT */
/*
 * t_query.c - wlk_query() snapshots: held and pending entries, fields; a
 * freeze word left set and damaged usage counters (it includes
 * lib/format/layout.h to write them).
 */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common.h"
#include "weblocks/inspect.h"
#include "testing.h"

static const struct wlk_options sh = { .mode = WLK_SHARED };

static const char *id(struct wlk_manager *m)
{
	return wlk_manager_client_id(m);
}

Test(query, empty_bucket_has_no_entries, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_snapshot *s = NULL;

	T_ASSERT_RC(wlk_query(m, &s), 0);
	cr_assert_not_null(s);
	cr_assert_eq(wlk_snapshot_held_count(s), 0);
	cr_assert_eq(wlk_snapshot_pending_count(s), 0);
	cr_assert_null(wlk_snapshot_held(s, 0));
	cr_assert_null(wlk_snapshot_pending(s, 0));
	wlk_snapshot_free(s);
}

Test(query, argument_errors, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_snapshot *s = (struct wlk_snapshot *)&s;

	T_ASSERT_RC(wlk_query(NULL, &s), WLK_EINVAL);
	cr_assert_eq(s, (struct wlk_snapshot *)&s, "*out written on failure");
	T_ASSERT_RC(wlk_query(m, NULL), WLK_EINVAL);
	cr_assert_eq(wlk_snapshot_held_count(NULL), 0);
	cr_assert_eq(wlk_snapshot_pending_count(NULL), 0);
	wlk_snapshot_free(NULL);
}

Test(query, held_entry_carries_name_mode_client_id_and_pid, T_FIX,
     .timeout = 10)
{
	struct wlk_manager_options o = { .client_id = "frame-7" };
	struct wlk_manager *m = t_open_opts(&o);
	struct wlk_snapshot *s = NULL;
	const struct wlk_lock_info *li;
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(m, "res", 3, &sh, &l), 0);
	T_ASSERT_RC(wlk_query(m, &s), 0);
	cr_assert_eq(wlk_snapshot_held_count(s), 1);
	cr_assert_eq(wlk_snapshot_pending_count(s), 0);
	li = wlk_snapshot_held(s, 0);
	cr_assert_not_null(li);
	cr_assert_eq(li->name_len, 3);
	cr_assert_eq(memcmp(li->name, "res", 4), 0);
	cr_assert_eq(li->mode, WLK_SHARED);
	cr_assert_str_eq(li->client_id, "frame-7");
	cr_assert_eq(li->pid, getpid());
	cr_assert_null(wlk_snapshot_held(s, 1));
	wlk_snapshot_free(s);
	T_ASSERT_RC(wlk_release(l), 0);
}

Test(query, one_held_entry_per_shared_holder, T_FIX, .timeout = 10)
{
	struct wlk_manager *m[3];
	struct wlk_lock *l[3], *l2 = NULL;
	struct wlk_snapshot *s = NULL;
	bool seen[3] = { false };
	size_t i, j;

	for (i = 0; i < 3; i++) {
		m[i] = t_open();
		T_ASSERT_RC(wlk_acquire(m[i], "r", 1, &sh, &l[i]), 0);
	}
	/* Same manager, two names: two entries as well. */
	T_ASSERT_RC(wlk_acquire(m[0], "x", 1, NULL, &l2), 0);
	T_ASSERT_RC(wlk_query(m[1], &s), 0);
	cr_assert_eq(wlk_snapshot_held_count(s), 4);
	for (i = 0; i < 4; i++) {
		const struct wlk_lock_info *li = wlk_snapshot_held(s, i);

		cr_assert_not_null(li);
		if (li->name_len == 1 && li->name[0] == 'x') {
			cr_assert_str_eq(li->client_id, id(m[0]));
			cr_assert_eq(li->mode, WLK_EXCLUSIVE);
			continue;
		}
		cr_assert_eq(li->mode, WLK_SHARED);
		for (j = 0; j < 3; j++) {
			if (strcmp(li->client_id, id(m[j])) == 0) {
				cr_assert_not(seen[j], "holder %zu twice", j);
				seen[j] = true;
			}
		}
	}
	for (j = 0; j < 3; j++)
		cr_assert(seen[j], "holder %zu missing", j);
	wlk_snapshot_free(s);
	for (i = 0; i < 3; i++)
		T_ASSERT_RC(wlk_release(l[i]), 0);
	T_ASSERT_RC(wlk_release(l2), 0);
}

Test(query, pending_entries_are_in_request_order_per_name, T_FIX,
     .timeout = 20)
{
	enum { N = 4 };
	struct wlk_manager *a = t_open(), *w[2][N];
	struct wlk_lock *la = NULL, *lb = NULL;
	struct t_holder h[2][N];
	struct wlk_snapshot *s = NULL;
	static const char *const nm[2] = { "a", "b" };
	size_t i, k, seen[2] = { 0, 0 };

	T_ASSERT_RC(wlk_acquire(a, "a", 1, NULL, &la), 0);
	T_ASSERT_RC(wlk_acquire(a, "b", 1, NULL, &lb), 0);
	/* Interleave the two names; alternate modes on "a". */
	for (i = 0; i < N; i++) {
		for (k = 0; k < 2; k++) {
			w[k][i] = t_open();
			t_holder_start(&h[k][i], w[k][i], nm[k], 1,
				       k == 0 && i % 2 ? &sh : NULL);
			cr_assert(t_wait_pending(a, nm[k], 1, i + 1));
		}
	}
	T_ASSERT_RC(wlk_query(a, &s), 0);
	cr_assert_eq(wlk_snapshot_pending_count(s), 2 * N);
	for (i = 0; i < 2 * N; i++) {
		const struct wlk_lock_info *li = wlk_snapshot_pending(s, i);

		cr_assert_not_null(li);
		cr_assert_eq(li->name_len, 1);
		k = li->name[0] == 'a' ? 0 : 1;
		cr_assert_lt(seen[k], N);
		cr_assert_str_eq(li->client_id, id(w[k][seen[k]]),
				 "pending entry %zu of %s out of order",
				 seen[k], nm[k]);
		cr_assert_eq(li->mode, k == 0 && seen[k] % 2 ? WLK_SHARED :
							       WLK_EXCLUSIVE);
		cr_assert_eq(li->pid, getpid());
		seen[k]++;
	}
	wlk_snapshot_free(s);

	/* Drain: release the holders as they get the lock. */
	T_ASSERT_RC(wlk_release(la), 0);
	T_ASSERT_RC(wlk_release(lb), 0);
	for (i = 0; i < N; i++) {
		for (k = 0; k < 2; k++) {
			cr_assert_eq(t_holder_wait_granted(&h[k][i]), 0);
			cr_assert_eq(t_holder_release(&h[k][i]), 0);
		}
	}
	for (i = 0; i < N; i++)
		for (k = 0; k < 2; k++)
			t_holder_join(&h[k][i]);
}

Test(query, query_sees_the_whole_bucket_from_any_manager, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_manager_options oo = { .bucket = "other" };
	struct wlk_manager *x;
	struct wlk_lock *la = NULL;
	struct t_holder h;

	t_track_bucket(t_origin, "other", NULL);
	x = t_open_opts(&oo);
	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	t_holder_start(&h, b, "r", 1, NULL);
	cr_assert(t_wait_pending(c, "r", 1, 1));
	cr_assert_eq(t_held_by(c, "r", 1, id(a)), 1);
	cr_assert_eq(t_held_n(c, NULL, 0), 1);
	/* c itself holds and waits for nothing, yet sees it all. */
	cr_assert_eq(t_held_n(x, NULL, 0), 0, "another bucket leaked in");
	cr_assert_eq(t_pending_n(x, NULL, 0), 0, "another bucket leaked in");
	T_ASSERT_RC(wlk_release(la), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
}

Test(query, snapshot_outlives_the_state_and_the_manager, T_FIX,
     .timeout = 10)
{
	struct wlk_manager_options o = { .client_id = "gone" };
	struct wlk_manager *m = t_open_opts(&o), *obs = t_open();
	struct wlk_snapshot *s = NULL;
	const struct wlk_lock_info *li;
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(m, "kept", 4, NULL, &l), 0);
	T_ASSERT_RC(wlk_query(m, &s), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	t_close(m);
	cr_assert_eq(t_held_n(obs, NULL, 0), 0);
	/* The snapshot still shows the state when it was taken. */
	cr_assert_eq(wlk_snapshot_held_count(s), 1);
	li = wlk_snapshot_held(s, 0);
	cr_assert_not_null(li);
	cr_assert_eq(li->name_len, 4);
	cr_assert_str_eq(li->name, "kept");
	cr_assert_str_eq(li->client_id, "gone");
	wlk_snapshot_free(s);
}

Test(query, generated_client_id_shows_in_entries, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	cr_assert_eq(t_held_by(m, "r", 1, id(m)), 1);
	T_ASSERT_RC(wlk_release(l), 0);
}

/* Map the header of t_origin's default bucket, as a co-tenant could. */
static struct wlk_seg_header *header_map(void)
{
	struct wlk_inspect_snapshot *s = NULL;
	struct wlk_inspect *in = NULL;
	struct wlk_seg_header *h;
	int fd;

	T_ASSERT_RC(wlk_inspect_open(t_origin, NULL, 0, &in), 0);
	T_ASSERT_RC(wlk_inspect_snapshot(in, &s), 0);
	fd = open(s->header.path, O_RDWR | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	h = mmap(NULL, WLK_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fd, 0);
	cr_assert_neq(h, MAP_FAILED);
	close(fd);
	wlk_inspect_snapshot_free(s);
	wlk_inspect_close(in);
	return h;
}

/*
 * A query that died copying leaves the freeze word set (layout.h, QUERY):
 * fast operations then pass through the mutex, and the first one to hold
 * it finds no copy running and clears the word.
 */
Test(query, freeze_word_left_by_a_dead_query_is_cleared, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_seg_header *h;
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(m, "a", 1, NULL, &l), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	h = header_map();
	__atomic_store_n(&h->freeze, 1, __ATOMIC_SEQ_CST);
	T_ASSERT_RC(wlk_acquire(m, "a", 1, NULL, &l), 0);
	cr_assert_eq(__atomic_load_n(&h->freeze, __ATOMIC_SEQ_CST), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	munmap(h, WLK_HEADER_SIZE);
}

/* The query fails with WLK_ECORRUPT, having had the counters rebuilt;
 * the next one shows "a". */
static void damaged_then_repaired(struct wlk_manager *m,
				  const struct wlk_seg_header *h,
				  const char *what)
{
	struct wlk_snapshot *s = NULL;
	int rc = wlk_query(m, &s);

	cr_assert_eq(rc, WLK_ECORRUPT, "%s: got %s, not corruption", what,
		     t_ename(rc));
	cr_assert_eq(h->n_names, 1, "%s: n_names not rebuilt", what);
	cr_assert_eq(h->name_bytes, 1, "%s: name_bytes not rebuilt", what);
	cr_assert_lt(h->n_requests, 16, "%s: n_requests not rebuilt", what);
	cr_assert_eq(h->n_clients, 1, "%s: n_clients not rebuilt", what);
	T_ASSERT_RC(wlk_query(m, &s), 0);
	cr_assert_eq(wlk_snapshot_held_count(s), 1, "%s", what);
	cr_assert_str_eq(wlk_snapshot_held(s, 0)->name, "a");
	wlk_snapshot_free(s);
	t_assert_valid(m, what);
}

/*
 * The usage counters are derived state that query sizes its buffers by;
 * counts the geometry cannot reach are damage: WLK_ECORRUPT, and the call
 * has them rebuilt (not -ENOMEM on every call for ever).
 */
Test(query, damaged_usage_counters_are_corruption_then_repaired, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_seg_header *h;
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(m, "a", 1, NULL, &l), 0);
	h = header_map();
	__atomic_store_n(&h->name_bytes, 1ull << 63, __ATOMIC_SEQ_CST);
	damaged_then_repaired(m, h, "name_bytes = 2^63");
	__atomic_store_n(&h->n_requests, UINT32_MAX - 7, __ATOMIC_SEQ_CST);
	damaged_then_repaired(m, h, "n_requests near 2^32");
	__atomic_store_n(&h->n_names, UINT32_MAX, __ATOMIC_SEQ_CST);
	damaged_then_repaired(m, h, "n_names = 2^32 - 1");
	__atomic_store_n(&h->n_clients, 1u << 31, __ATOMIC_SEQ_CST);
	damaged_then_repaired(m, h, "n_clients = 2^31");
	munmap(h, WLK_HEADER_SIZE);
	T_ASSERT_RC(wlk_release(l), 0);
}
