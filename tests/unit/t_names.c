/* SPDX-License-Identifier: MIT */
/* t_names.c - lock names are byte strings: distinct, exact, length-limited. */
#include <stdlib.h>
#include <string.h>

#include "../common.h"

struct bname {
	const char *b;
	size_t len;
};

/* Pairwise distinct names, several equal under some careless reading. */
static const struct bname names[] = {
	{ "", 0 },
	{ "a", 1 },
	{ "A", 1 },
	{ "a\0b", 3 },
	{ "a\0c", 3 },
	{ "a\0b\0", 4 },
	{ "\0", 1 },
	{ "\0\0", 2 },
	{ "\xff\xfe", 2 },
	{ "\xc3\x28", 2 },
	{ "\x80", 1 },
	{ "\xc3\xa9", 2 },	/* U+00E9 precomposed */
	{ "e\xcc\x81", 3 },	/* e + U+0301 combining acute */
	{ "a ", 2 },
	{ "ab", 2 },
	/* What etcd keys escape, and escapes themselves (lib/etcd/codec.c). */
	{ "%41", 3 },
	{ "/", 1 },
	{ "%2F", 3 },
	{ ".", 1 },
	{ "a/b", 3 },
	{ "_~:-", 4 },
	{ "%", 1 },
};

#define NNAMES (sizeof(names) / sizeof(names[0]))

static bool info_is(const struct wlk_lock_info *li, const struct bname *n)
{
	return li->name_len == n->len && memcmp(li->name, n->b, n->len) == 0 &&
	       li->name[n->len] == '\0';
}

Test(names, empty_name_is_a_valid_lock, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct wlk_options ia = { .if_available = true };
	struct wlk_lock *l = NULL, *l2 = (struct wlk_lock *)&l2;
	const char *n;
	size_t len = 99;

	T_ASSERT_RC(wlk_acquire(m, "", 0, NULL, &l), 0);
	cr_assert_not_null(l);
	n = wlk_lock_name(l, &len);
	cr_assert_eq(len, 0);
	cr_assert_eq(n[0], '\0');
	T_ASSERT_RC(wlk_acquire(o, "", WLK_NUL_TERMINATED, &ia, &l2), 0);
	cr_assert_null(l2, "empty name not the same lock twice");
	cr_assert_eq(t_held_n(o, "", 0), 1);
	T_ASSERT_RC(wlk_release(l), 0);
}

Test(names, all_byte_names_are_distinct, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct wlk_options ia = { .if_available = true };
	struct wlk_lock *held[NNAMES];
	size_t i, j;

	/* One manager can hold every one of them exclusively at once. */
	for (i = 0; i < NNAMES; i++) {
		held[i] = NULL;
		T_ASSERT_RC(wlk_acquire(m, names[i].b, names[i].len, &ia,
					&held[i]),
			    0);
		cr_assert_not_null(held[i], "name %zu collides with another",
				   i);
	}
	cr_assert_eq(t_held_n(m, NULL, 0), NNAMES);
	/* Release one at a time: only that one becomes free. */
	for (i = 0; i < NNAMES; i++) {
		T_ASSERT_RC(wlk_release(held[i]), 0);
		for (j = 0; j < NNAMES; j++) {
			struct wlk_lock *l = NULL;

			T_ASSERT_RC(wlk_acquire(o, names[j].b, names[j].len,
						&ia, &l),
				    0);
			cr_assert_eq(l != NULL, j <= i,
				     "name %zu free=%d after releasing 0..%zu",
				     j, l != NULL, i);
			T_ASSERT_RC(wlk_release(l), 0);
		}
	}
}

/* Names that differ in one byte only, at every length up to past the
 * inline compare and copy (lib/sys/sys.h, WLK_BYTES_INLINE) and in every
 * place, each taken twice (the second time, both names are known and the
 * thread's last name found, lane.c's memo, is one of them): one must
 * never pass for the other, and each handle keeps its own bytes. A
 * wrong match takes another name's entry, which the validation after
 * each length finds. */
#define ONE_BYTE_MAX_LEN 40
Test(names, names_one_byte_apart_are_distinct_at_every_length, T_FIX,
     .timeout = 30)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct wlk_options ia = { .if_available = true };
	char a[ONE_BYTE_MAX_LEN], b[ONE_BYTE_MAX_LEN];

	memset(a, 'a', sizeof(a));
	for (size_t n = 1; n <= ONE_BYTE_MAX_LEN; n++) {
		for (size_t i = 0; i < 2 * n; i++) {
			struct wlk_lock *la = NULL, *lb = NULL, *again = NULL;
			size_t k = i % n, len = 0;
			const char *got;

			memcpy(b, a, n);
			b[k] = 'b';
			T_ASSERT_RC(wlk_acquire(m, a, n, NULL, &la), 0);
			T_ASSERT_RC(wlk_acquire(m, b, n, &ia, &lb), 0);
			cr_assert_not_null(lb, "length %zu, byte %zu: taken",
					   n, k);
			got = wlk_lock_name(lb, &len);
			cr_assert(len == n && memcmp(got, b, n) == 0,
				  "length %zu, byte %zu: name", n, k);
			T_ASSERT_RC(wlk_acquire(m, a, n, &ia, &again), 0);
			cr_assert_null(again, "length %zu, byte %zu: free", n,
				       k);
			/* Another process's lookup finds the same entry. */
			T_ASSERT_RC(wlk_acquire(o, b, n, &ia, &again), 0);
			cr_assert_null(again, "length %zu, byte %zu: two", n,
				       k);
			T_ASSERT_RC(wlk_release(lb), 0);
			T_ASSERT_RC(wlk_release(la), 0);
		}
		T_ASSERT_RC(wlk_manager_validate(m, NULL, NULL), 0);
	}
}

Test(names, names_round_trip_through_wlk_lock_name, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	size_t i;

	for (i = 0; i < NNAMES; i++) {
		struct wlk_lock *l = NULL;
		size_t len = 12345;
		const char *n;

		T_ASSERT_RC(wlk_acquire(m, names[i].b, names[i].len, NULL, &l),
			    0);
		n = wlk_lock_name(l, &len);
		cr_assert_eq(len, names[i].len, "name %zu", i);
		cr_assert_eq(memcmp(n, names[i].b, len), 0, "name %zu", i);
		cr_assert_eq(n[len], '\0', "name %zu not NUL-terminated", i);
		cr_assert_not_null(wlk_lock_name(l, NULL));
		T_ASSERT_RC(wlk_release(l), 0);
	}
}

static int cb_check_name(struct wlk_lock *lock, void *arg)
{
	const struct bname *n = arg;
	size_t len = 12345;
	const char *b = wlk_lock_name(lock, &len);

	return len == n->len && memcmp(b, n->b, len) == 0 && b[len] == '\0';
}

Test(names, names_round_trip_through_wlk_request, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	size_t i;

	for (i = 0; i < NNAMES; i++)
		cr_assert_eq(wlk_request(m, names[i].b, names[i].len, NULL,
					 cb_check_name, (void *)&names[i]),
			     1, "name %zu", i);
}

Test(names, names_round_trip_through_query_held, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *held[NNAMES];
	struct wlk_snapshot *s = NULL;
	bool seen[NNAMES] = { false };
	size_t i, j;

	for (i = 0; i < NNAMES; i++)
		T_ASSERT_RC(wlk_acquire(m, names[i].b, names[i].len, NULL,
					&held[i]),
			    0);
	T_ASSERT_RC(wlk_query(m, &s), 0);
	cr_assert_eq(wlk_snapshot_held_count(s), NNAMES);
	for (i = 0; i < NNAMES; i++) {
		const struct wlk_lock_info *li = wlk_snapshot_held(s, i);
		size_t hits = 0;

		cr_assert_not_null(li);
		for (j = 0; j < NNAMES; j++) {
			if (info_is(li, &names[j])) {
				hits++;
				cr_assert_not(seen[j], "name %zu twice", j);
				seen[j] = true;
			}
		}
		cr_assert_eq(hits, 1, "held entry %zu matches no name", i);
	}
	wlk_snapshot_free(s);
	for (i = 0; i < NNAMES; i++)
		T_ASSERT_RC(wlk_release(held[i]), 0);
}

Test(names, names_round_trip_through_query_pending, T_FIX, .timeout = 10)
{
	static const struct bname pn = { "q\0\xff-\x80", 5 };
	struct wlk_manager *m = t_open(), *w = t_open();
	struct wlk_snapshot *s = NULL;
	struct wlk_lock *l = NULL;
	struct t_holder h;

	T_ASSERT_RC(wlk_acquire(m, pn.b, pn.len, NULL, &l), 0);
	t_holder_start(&h, w, pn.b, pn.len, NULL);
	cr_assert(t_wait_pending(m, pn.b, pn.len, 1));
	T_ASSERT_RC(wlk_query(m, &s), 0);
	cr_assert_eq(wlk_snapshot_pending_count(s), 1);
	cr_assert(info_is(wlk_snapshot_pending(s, 0), &pn));
	wlk_snapshot_free(s);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
}

Test(names, nul_terminated_length_uses_strlen, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open(), *o = t_open();
	struct wlk_options ia = { .if_available = true };
	struct wlk_lock *l = NULL, *l2 = (struct wlk_lock *)&l2;
	size_t len = 0;

	T_ASSERT_RC(wlk_acquire(m, "abc", WLK_NUL_TERMINATED, NULL, &l), 0);
	cr_assert_str_eq(wlk_lock_name(l, &len), "abc");
	cr_assert_eq(len, 3);
	/* The same lock as the 3 explicit bytes... */
	T_ASSERT_RC(wlk_acquire(o, "abc", 3, &ia, &l2), 0);
	cr_assert_null(l2);
	/* ...and not the same as a prefix or with the NUL included. */
	T_ASSERT_RC(wlk_acquire(o, "abc", 2, &ia, &l2), 0);
	cr_assert_not_null(l2);
	T_ASSERT_RC(wlk_release(l2), 0);
	T_ASSERT_RC(wlk_acquire(o, "abc", 4, &ia, &l2), 0);
	cr_assert_not_null(l2);
	T_ASSERT_RC(wlk_release(l2), 0);
	T_ASSERT_RC(wlk_release(l), 0);
}

Test(names, name_len_limits_the_bytes_used, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	size_t len = 0;

	T_ASSERT_RC(wlk_acquire(m, "abcdef", 2, NULL, &l), 0);
	cr_assert_str_eq(wlk_lock_name(l, &len), "ab");
	cr_assert_eq(len, 2);
	cr_assert_eq(t_held_n(m, "ab", 2), 1);
	T_ASSERT_RC(wlk_release(l), 0);
}

static int cb_one(struct wlk_lock *lock, void *arg)
{
	return 1;
}

static char *name_of(size_t n)
{
	char *s = malloc(n + 1);
	size_t i;

	cr_assert_not_null(s);
	for (i = 0; i < n; i++)
		s[i] = (char)(i * 7 + 1); /* every byte value, NULs too */
	s[n] = '\0';
	return s;
}

static void check_max(struct wlk_manager *m, struct wlk_manager *obs,
		      size_t max)
{
	char *n = name_of(max + 1);
	struct wlk_lock *l = (struct wlk_lock *)&l;
	const char *got;
	size_t len = 0;

	T_ASSERT_RC(wlk_acquire(m, n, max + 1, NULL, &l), WLK_ENAMETOOLONG);
	cr_assert_eq(l, (struct wlk_lock *)&l);
	T_ASSERT_RC(wlk_request(m, n, max + 1, NULL, cb_one, NULL),
		    WLK_ENAMETOOLONG);
	cr_assert_eq(t_held_n(obs, NULL, 0), 0);
	cr_assert_eq(t_pending_n(obs, NULL, 0), 0);
	T_ASSERT_RC(wlk_acquire(m, n, max, NULL, &l), 0);
	got = wlk_lock_name(l, &len);
	cr_assert_eq(len, max);
	cr_assert_eq(memcmp(got, n, max), 0, "long name changed");
	cr_assert_eq(t_held_n(obs, n, max), 1);
	T_ASSERT_RC(wlk_release(l), 0);
	free(n);
}

Test(names, default_max_name_len_exactly_ok_one_more_is_enametoolong, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m = t_open();

	cr_assert_geq(WLK_DEFAULT_MAX_NAME_LEN, 1024);
	check_max(m, m, WLK_DEFAULT_MAX_NAME_LEN);
}

Test(names, bucket_max_name_len_exactly_ok_one_more_is_enametoolong, T_FIX,
     .timeout = 10)
{
	struct wlk_manager_options o = { .max_name_len = 16 };
	struct wlk_manager *m = t_open_opts(&o);

	check_max(m, m, 16);
}

Test(names, largest_max_name_len_is_accepted, T_FIX, .timeout = 10)
{
	struct wlk_manager_options o = { .max_name_len =
						 WLK_LIMIT_MAX_NAME_LEN };
	struct wlk_manager *m = t_open_opts(&o);

	check_max(m, m, WLK_LIMIT_MAX_NAME_LEN);
}

Test(names, later_openers_get_the_existing_max_name_len, T_FIX,
     .timeout = 10)
{
	struct wlk_manager_options small = { .max_name_len = 16 };
	struct wlk_manager_options big = { .max_name_len = 64 };
	struct wlk_manager *a = t_open_opts(&small);
	struct wlk_manager *b = t_open_opts(&big);

	check_max(b, a, 16);
}
