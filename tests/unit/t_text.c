/* SPDX-License-Identifier: MIT */
/*
 * t_text.c - long names and client ids live in the bucket's arena
 * (struct wlk_manager_options.arena_bytes): what they cost, that they
 * stay exact, and what happens when the arena is full.
 */
#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "weblocks/inspect.h"

/* A name of @len bytes: @fill, with @last as its final byte. */
static char *long_name(size_t len, char fill, char last)
{
	char *n = malloc(len);

	cr_assert_not_null(n);
	memset(n, fill, len);
	if (len)
		n[len - 1] = last;
	return n;
}

/* The segment's size, and its arena's size and use (may be NULL). */
static size_t segment_size_arena(uint64_t *arena, uint64_t *used)
{
	struct wlk_inspect_snapshot *s = NULL;
	struct wlk_inspect *in = NULL;
	size_t size;

	T_ASSERT_RC(wlk_inspect_open(t_origin, NULL, 0, &in), 0);
	T_ASSERT_RC(wlk_inspect_snapshot(in, &s), 0);
	size = s->header.segment_size;
	if (arena)
		*arena = s->arena_bytes;
	if (used)
		*used = s->arena_used;
	wlk_inspect_snapshot_free(s);
	wlk_inspect_close(in);
	return size;
}

static size_t segment_size(void)
{
	return segment_size_arena(NULL, NULL);
}

/* At the defaults (1024 names, 4096 requests): 512 KiB, 1152 chunks;
 * a generated client id (36 bytes) takes two, a 40-byte name two more,
 * a 16-byte one none. */
Test(text, default_bucket_is_512_kib, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL, *l2 = NULL;
	uint64_t arena = 0, used = 0;

	cr_assert_eq(segment_size_arena(&arena, &used), 512u * 1024u);
	cr_assert_eq(arena, 1152u * 32u);
	cr_assert_eq(used, 2u * 32u);
	T_ASSERT_RC(wlk_acquire(m, "forty-bytes-of-name-forty-bytes-of-name!",
				WLK_NUL_TERMINATED, NULL, &l),
		    0);
	T_ASSERT_RC(wlk_acquire(m, "sixteen-bytes-ok", WLK_NUL_TERMINATED,
				NULL, &l2),
		    0);
	(void)segment_size_arena(NULL, &used);
	cr_assert_eq(used, 4u * 32u);
	T_ASSERT_RC(wlk_release(l2), 0);
	T_ASSERT_RC(wlk_release(l), 0);
}

Test(text, arena_bytes_out_of_range_is_einval, T_FIX, .timeout = 10)
{
	struct wlk_manager_options small = {.size = sizeof(small),
					    .arena_bytes = 191};
	struct wlk_manager_options huge = {.size = sizeof(huge),
					   .arena_bytes = UINT32_MAX};
	struct wlk_manager *m = (struct wlk_manager *)&m;

	T_ASSERT_RC(wlk_manager_open(t_origin, &small, &m), WLK_EINVAL);
	T_ASSERT_RC(wlk_manager_open(t_origin, &huge, &m), WLK_EINVAL);
	cr_assert_eq(m, (struct wlk_manager *)&m);
}

Test(text, smallest_arena_holds_the_longest_client_id, T_FIX, .timeout = 10)
{
	char id[WLK_CLIENT_ID_MAX + 1];
	struct wlk_manager_options o = {.size = sizeof(o), .arena_bytes = 192,
					.client_id = id};
	struct wlk_manager *m2 = (struct wlk_manager *)&m2;

	memset(id, 'i', WLK_CLIENT_ID_MAX);
	id[WLK_CLIENT_ID_MAX] = '\0';
	(void)t_open_opts(&o);
	cr_assert_eq(segment_size() % 4096, 0);
	/* Six chunks, all the first id's: the next one has no room. */
	T_ASSERT_RC(wlk_manager_open(t_origin, &o, &m2), WLK_EFULL);
	cr_assert_eq(m2, (struct wlk_manager *)&m2);
}

/* Every length about the chunk boundaries comes back exact, from the
 * lock and from the query, and is its own lock. */
Test(text, names_across_chunk_boundaries_stay_exact, T_FIX, .timeout = 20)
{
	static const size_t lens[] = {15, 16, 17, 23, 24, 25, 40, 41, 47, 48,
				      49, 64, 1000, 1024};
	enum { N = sizeof(lens) / sizeof(lens[0]) };
	struct wlk_manager *m = t_open(), *m2 = t_open();
	struct wlk_lock *l[N], *l2 = NULL;
	char *names[N];

	for (size_t i = 0; i < N; i++) {
		const char *got;
		size_t len = 0;

		names[i] = long_name(lens[i], 'x', (char)('a' + i));
		T_ASSERT_RC(wlk_acquire(m, names[i], lens[i], NULL, &l[i]), 0);
		got = wlk_lock_name(l[i], &len);
		cr_assert_eq(len, lens[i]);
		cr_assert_eq(memcmp(got, names[i], len), 0);
		cr_assert_eq(t_held_n(m2, names[i], lens[i]), 1,
			     "length %zu not found by the query", lens[i]);
	}
	/* The same bytes but the last: another lock, free. */
	for (size_t i = 0; i < N; i++) {
		char *other = long_name(lens[i], 'x', 'Z');
		static const struct wlk_options now = {
			.size = sizeof(now), .if_available = true};

		T_ASSERT_RC(wlk_acquire(m2, other, lens[i], &now, &l2), 0);
		cr_assert_not_null(l2, "length %zu: a different last byte "
				       "is the same lock", lens[i]);
		T_ASSERT_RC(wlk_release(l2), 0);
		/* And the same bytes are the same lock: held. */
		T_ASSERT_RC(wlk_acquire(m2, names[i], lens[i], &now, &l2), 0);
		cr_assert_null(l2, "length %zu: not the same lock", lens[i]);
		free(other);
	}
	cr_assert_eq(t_held_n(m2, NULL, 0), N);
	t_assert_valid(m, NULL);
	for (size_t i = 0; i < N; i++) {
		T_ASSERT_RC(wlk_release(l[i]), 0);
		free(names[i]);
	}
	t_assert_valid(m, NULL);
}

/*
 * An arena of 8 chunks: two managers' one-chunk ids leave six, three
 * names of 48 bytes (two chunks each). A fourth is WLK_EFULL with nothing
 * changed; short names still fit (their bytes are in their entries);
 * once one long name is released, and so idle, it is forgotten to make
 * room. A manager cannot open while every chunk is a held name's.
 */
Test(text, a_full_arena_refuses_then_forgets_idle_names, T_FIX,
     .timeout = 20)
{
	struct wlk_manager_options o = {.size = sizeof(o),
					.arena_bytes = 8 * 32,
					.client_id = "a"};
	static const struct wlk_options now = {.size = sizeof(now),
					       .if_available = true};
	struct wlk_manager *m = t_open_opts(&o), *m2 = t_open_opts(&o);
	struct wlk_manager *m3 = (struct wlk_manager *)&m3;
	struct wlk_lock *l[3], *l4 = (struct wlk_lock *)&l4, *ls = NULL;
	char *names[4];

	for (int i = 0; i < 4; i++)
		names[i] = long_name(48, 'n', (char)('0' + i));
	for (int i = 0; i < 3; i++)
		T_ASSERT_RC(wlk_acquire(m, names[i], 48, NULL, &l[i]), 0);
	T_ASSERT_RC(wlk_acquire(m2, names[3], 48, NULL, &l4), WLK_EFULL);
	T_ASSERT_RC(wlk_acquire(m2, names[3], 48, &now, &l4), WLK_EFULL);
	cr_assert_eq(l4, (struct wlk_lock *)&l4);
	cr_assert_eq(t_held_n(m2, NULL, 0), 3);
	cr_assert_eq(t_pending_n(m2, NULL, 0), 0);
	T_ASSERT_RC(wlk_manager_open(t_origin, &o, &m3), WLK_EFULL);
	cr_assert_eq(m3, (struct wlk_manager *)&m3);
	T_ASSERT_RC(wlk_acquire(m2, "sixteen-bytes-ok", 16, NULL, &ls), 0);
	T_ASSERT_RC(wlk_release(ls), 0);
	t_assert_valid(m, NULL);

	T_ASSERT_RC(wlk_release(l[0]), 0);
	T_ASSERT_RC(wlk_acquire(m2, names[3], 48, NULL, &l4), 0);
	cr_assert_eq(t_held_n(m2, names[3], 48), 1);
	cr_assert_eq(t_held_n(m2, names[0], 48), 0);
	/* Held names are never forgotten: the rest still hold. */
	T_ASSERT_RC(wlk_acquire(m2, names[1], 48, &now, &ls), 0);
	cr_assert_null(ls);
	T_ASSERT_RC(wlk_release(l4), 0);
	m3 = t_open_opts(&o); /* forgets names[3], idle, for its id */
	T_ASSERT_RC(wlk_acquire(m3, names[0], 48, &now, &ls), WLK_EFULL);
	t_assert_valid(m, NULL);
	for (int i = 1; i < 3; i++)
		T_ASSERT_RC(wlk_release(l[i]), 0);
	for (int i = 0; i < 4; i++)
		free(names[i]);
}

/* A forgotten name's next grant still fences above its last one. */
Test(text, a_forgotten_name_keeps_its_tokens_rising, T_FIX, .timeout = 20)
{
	struct wlk_manager_options o = {.size = sizeof(o),
					.arena_bytes = 6 * 32,
					.client_id = "a"};
	struct wlk_manager *m = t_open_opts(&o);
	struct wlk_lock *l = NULL;
	char *a = long_name(100, 'a', 'a'), *b = long_name(100, 'b', 'b');
	uint64_t first, again;

	/* Five chunks left: a (five chunks) pushes out b, and b a. */
	T_ASSERT_RC(wlk_acquire(m, a, 100, NULL, &l), 0);
	first = wlk_lock_token(l);
	T_ASSERT_RC(wlk_release(l), 0);
	T_ASSERT_RC(wlk_acquire(m, b, 100, NULL, &l), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	T_ASSERT_RC(wlk_acquire(m, a, 100, NULL, &l), 0);
	again = wlk_lock_token(l);
	cr_assert_gt(again, first);
	T_ASSERT_RC(wlk_release(l), 0);
	t_assert_valid(m, NULL);
	free(a);
	free(b);
}
