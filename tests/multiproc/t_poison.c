/* SPDX-License-Identifier: MIT */
/*
 * t_poison.c - a segment that cannot be repaired is poisoned: its users get
 * WLK_ECORRUPT, and new openers get a fresh generation that works, with
 * fencing tokens above the poisoned one's. Damage that can be repaired is.
 *
 * The tests scribble on a segment they are attached to (as a buggy
 * co-tenant would): on the header geometry, flagged for repair (repair
 * refuses a header that no longer matches the geometry validated at
 * attach), on the segment state, or on a free name slot.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../common.h"
#include "testing.h"

/* Change the header as a buggy co-tenant would, and ask for repair. */
static void scribble(const char *path)
{
	int fd = open(path, O_RDWR);
	struct wlk_seg_header *h;

	cr_assert_geq(fd, 0, "open %s", path);
	h = mmap(NULL, WLK_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fd, 0);
	cr_assert_neq(h, MAP_FAILED);
	close(fd);
	h->max_requests += 1;
	__atomic_store_n(&h->needs_repair, 1, __ATOMIC_SEQ_CST);
	munmap(h, WLK_HEADER_SIZE);
}

Test(poison, unrepairable_segment_is_replaced_by_a_new_generation,
     .init = t_init, .timeout = 20)
{
	struct t_pipe p[2];
	struct wlk_manager *m;
	struct wlk_lock *l;
	struct wlk_options ifa = {.if_available = true};
	char path[512], gen1[600];
	pid_t pid;
	int rc;

	t_pipe_open(&p[0]);
	t_pipe_open(&p[1]);
	pid = t_fork(t_newcomer, p);
	rc = wlk_manager_open(t_origin, NULL, &m);
	cr_assert_eq(rc, 0, "open: %s", t_ename(rc));
	cr_assert(t_mapped_segment(path, sizeof(path)));
	scribble(path);

	rc = wlk_acquire(m, "x", 1, NULL, &l);
	cr_assert_eq(rc, WLK_ECORRUPT, "acquire on a poisoned segment: %s",
		     t_ename(rc));
	rc = wlk_acquire(m, "x", 1, NULL, &l);
	cr_assert_eq(rc, WLK_ECORRUPT, "and it stays poisoned: %s",
		     t_ename(rc));

	/* This process still has generation 0 attached: a newcomer cannot
	 * re-create it, so it moves on to generation 1. */
	cr_assert_eq(t_put_byte(p[1].wr, 'o'), 0);
	cr_assert_eq(t_get_byte(p[0].rd), 'h', "newcomer did not get \"z\"");
	snprintf(gen1, sizeof(gen1), "%s~1", path);
	cr_assert_eq(access(gen1, F_OK), 0, "no %s", gen1);

	/* Generation 0 is unused now, but must not come back to life
	 * beside generation 1: a new manager joins the newcomer's. */
	wlk_manager_close(m);
	rc = wlk_manager_open(t_origin, NULL, &m);
	cr_assert_eq(rc, 0, "reopen: %s", t_ename(rc));
	rc = wlk_acquire(m, "z", 1, &ifa, &l);
	cr_assert_eq(rc, 0, "if_available: %s", t_ename(rc));
	cr_assert_null(l, "\"z\" is free: the bucket split in two");
	cr_assert_eq(t_put_byte(p[1].wr, 'r'), 0);
	rc = t_wait(pid, 10000);
	cr_assert_eq(rc, 0, "newcomer: exit status %#x", rc);
	wlk_manager_close(m);

	/* Removal takes every generation with it. */
	rc = wlk_bucket_remove(t_origin, NULL);
	cr_assert_eq(rc, 0, "remove: %s", t_ename(rc));
	cr_assert_neq(access(path, F_OK), 0);
	cr_assert_neq(access(gen1, F_OK), 0);
	t_pipe_close(&p[0]);
	t_pipe_close(&p[1]);
}

static struct wlk_seg_name *name_slot(uint8_t *base, uint32_t i)
{
	const struct wlk_seg_header *h = (const void *)base;

	return (struct wlk_seg_name *)(void *)(base + h->off_names +
					       (size_t)i * h->name_stride);
}

/* The entry of the one-byte name @c. */
static struct wlk_seg_name *name_of(uint8_t *base, char c)
{
	const struct wlk_seg_header *h = (const void *)base;

	for (uint32_t i = 0; i < h->max_names; i++) {
		struct wlk_seg_name *n = name_slot(base, i);

		if (WLK_WORD_STATE(n->word) == WLK_SLOT_USED && n->len == 1 &&
		    n->text[0] == (uint8_t)c)
			return n;
	}
	cr_assert_fail("no entry for \"%c\"", c);
	return NULL;
}

/*
 * A free name slot with a state no slot has is freed again by the repair
 * that finding it asks for: new names work from then on.
 */
Test(poison, free_name_slot_with_a_bad_state_is_repaired, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct wlk_seg_header *h;
	struct wlk_seg_name *n;
	struct wlk_lock *l;
	char path[512];
	uint8_t *base;
	size_t size;
	int rc;

	T_ASSERT_RC(wlk_acquire(m, "a", 1, NULL, &l), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert(t_mapped_segment(path, sizeof(path)));
	base = t_map_file(path, &size);
	h = (struct wlk_seg_header *)(void *)base;
	cr_assert_lt(h->free_names, h->max_names);
	n = name_slot(base, h->free_names);
	cr_assert_eq(WLK_WORD_STATE(n->word), WLK_SLOT_FREE);
	n->word = (n->word & ~WLK_STATE_MASK) | WLK_SLOT_PENDING;
	munmap(base, size);

	/* The first new name finds it (and may fail); the rest work. */
	rc = wlk_acquire(m, "b", 1, NULL, &l);
	cr_assert(rc == 0 || rc == WLK_ECORRUPT, "first: %s", t_ename(rc));
	if (!rc)
		T_ASSERT_RC(wlk_release(l), 0);
	for (char c = 'c'; c < 'c' + 4; c++) {
		rc = wlk_acquire(m, &c, 1, NULL, &l);
		cr_assert_eq(rc, 0, "new name %c: %s", c, t_ename(rc));
		T_ASSERT_RC(wlk_release(l), 0);
	}
	T_ASSERT_RC(wlk_acquire(m, "a", 1, NULL, &l), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	t_assert_valid(m, "after the repair");
}

/*
 * A name slot in use whose state word is damaged is freed by the repair;
 * the name's next entry still gives tokens above the ones it gave.
 */
Test(poison, damaged_name_slot_keeps_its_tokens_rising, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct wlk_seg_header *h;
	struct wlk_seg_name *n;
	struct wlk_lock *l;
	char path[512];
	uint64_t last = 0;
	uint8_t *base;
	size_t size;

	for (int i = 0; i < 3; i++) {
		T_ASSERT_RC(wlk_acquire(m, "a", 1, NULL, &l), 0);
		last = wlk_lock_token(l);
		T_ASSERT_RC(wlk_release(l), 0);
	}
	cr_assert(t_mapped_segment(path, sizeof(path)));
	base = t_map_file(path, &size);
	h = (struct wlk_seg_header *)(void *)base;
	n = name_of(base, 'a');
	n->word = (n->word & ~WLK_STATE_MASK) | WLK_SLOT_PENDING;
	__atomic_store_n(&h->needs_repair, 1, __ATOMIC_SEQ_CST);
	munmap(base, size);

	/* A new name takes the mutex, which repairs first. */
	T_ASSERT_RC(wlk_acquire(m, "b", 1, NULL, &l), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	T_ASSERT_RC(wlk_acquire(m, "a", 1, NULL, &l), 0);
	cr_assert_gt(wlk_lock_token(l), last, "token %llu after %llu",
		     (unsigned long long)wlk_lock_token(l),
		     (unsigned long long)last);
	T_ASSERT_RC(wlk_release(l), 0);
	t_assert_valid(m, "after the repair");
}

/* A segment state that is neither ready nor poisoned is poisoning too. */
Test(poison, damaged_segment_state_leads_to_a_new_generation, T_FIX,
     .timeout = 20)
{
	struct t_pipe p[2];
	struct wlk_seg_header *h;
	struct wlk_manager *m;
	struct wlk_lock *l;
	char path[512], gen1[600];
	uint8_t *base;
	size_t size;
	pid_t pid;
	int rc;

	t_pipe_open(&p[0]);
	t_pipe_open(&p[1]);
	pid = t_fork(t_newcomer, p);
	rc = wlk_manager_open(t_origin, NULL, &m);
	cr_assert_eq(rc, 0, "open: %s", t_ename(rc));
	/* "z" by the fast path, as the newcomer will take it. */
	T_ASSERT_RC(wlk_acquire(m, "z", 1, NULL, &l), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert(t_mapped_segment(path, sizeof(path)));
	base = t_map_file(path, &size);
	h = (struct wlk_seg_header *)(void *)base;
	__atomic_store_n(&h->seg_state, 7, __ATOMIC_SEQ_CST);
	munmap(base, size);
	rc = wlk_acquire(m, "x", 1, NULL, &l);
	cr_assert_eq(rc, WLK_ECORRUPT, "acquire: %s", t_ename(rc));

	cr_assert_eq(t_put_byte(p[1].wr, 'o'), 0);
	cr_assert_eq(t_get_byte(p[0].rd), 'h', "newcomer did not get \"z\"");
	snprintf(gen1, sizeof(gen1), "%s~1", path);
	cr_assert_eq(access(gen1, F_OK), 0, "no %s", gen1);
	/* Generation 0 grants nothing beside it, not by the fast path
	 * either. */
	rc = wlk_acquire(m, "z", 1, NULL, &l);
	cr_assert_eq(rc, WLK_ECORRUPT, "\"z\" in the old generation: %s",
		     t_ename(rc));
	cr_assert_eq(t_put_byte(p[1].wr, 'r'), 0);
	rc = t_wait(pid, 10000);
	cr_assert_eq(rc, 0, "newcomer: exit status %#x", rc);
	wlk_manager_close(m);
	T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), 0);
	t_pipe_close(&p[0]);
	t_pipe_close(&p[1]);
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A new process: when told, open the bucket, take "t", send its token. */
static int token_taker(void *arg)
{
	struct t_pipe *p = arg;
	struct wlk_manager *m;
	struct wlk_lock *l;
	uint64_t token;

	T_CHILD_CHECK(t_get_byte(p[1].rd) == 'o', 7);
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 1);
	T_CHILD_CHECK(wlk_acquire(m, "t", 1, NULL, &l) == 0, 2);
	token = wlk_lock_token(l);
	T_CHILD_CHECK(t_put(p[0].wr, &token, sizeof(token)) == 0, 3);
	T_CHILD_CHECK(wlk_release(l) == 0, 4);
	wlk_manager_close(m);
	return 0;
}

/*
 * The generation that replaces a poisoned one gives every name tokens
 * above the ones the poisoned one gave: above the clock (where a new
 * segment's tokens start), and above a token ahead of the clock (as after
 * the clock was set back), read from the poisoned segment.
 */
Test(poison, new_generation_gives_tokens_above_the_poisoned_ones, T_FIX,
     .timeout = 20)
{
	uint64_t held, ahead = realtime_ns() + 3600 * 1000000000ull, token = 0;
	struct t_pipe p[2];
	struct wlk_manager *m;
	struct wlk_lock *l, *lx;
	char path[512];
	uint8_t *base;
	size_t size;
	pid_t pid;
	int rc;

	t_pipe_open(&p[0]);
	t_pipe_open(&p[1]);
	pid = t_fork(token_taker, p);
	rc = wlk_manager_open(t_origin, NULL, &m);
	cr_assert_eq(rc, 0, "open: %s", t_ename(rc));
	for (int i = 0; i < 3; i++) {
		T_ASSERT_RC(wlk_acquire(m, "t", 1, NULL, &l), 0);
		T_ASSERT_RC(wlk_release(l), 0);
	}
	T_ASSERT_RC(wlk_acquire(m, "t", 1, NULL, &l), 0);
	held = wlk_lock_token(l);
	cr_assert(t_mapped_segment(path, sizeof(path)));
	base = t_map_file(path, &size);
	name_of(base, 't')->token = ahead;
	munmap(base, size);
	scribble(path);
	rc = wlk_acquire(m, "x", 1, NULL, &lx);
	cr_assert_eq(rc, WLK_ECORRUPT, "acquire: %s", t_ename(rc));

	cr_assert_eq(t_put_byte(p[1].wr, 'o'), 0);
	cr_assert_eq(t_get(p[0].rd, &token, sizeof(token), T_WAIT_MS), 0,
		     "the newcomer did not get \"t\"");
	cr_assert_gt(token, held, "token %llu after %llu",
		     (unsigned long long)token, (unsigned long long)held);
	cr_assert_gt(token, ahead, "token %llu after %llu",
		     (unsigned long long)token, (unsigned long long)ahead);
	rc = t_wait(pid, 10000);
	cr_assert_eq(rc, 0, "newcomer: exit status %#x", rc);
	rc = wlk_release(l);
	cr_assert_eq(rc, WLK_ECORRUPT, "release in the old generation: %s",
		     t_ename(rc));
	wlk_manager_close(m);
	T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), 0);
	t_pipe_close(&p[0]);
	t_pipe_close(&p[1]);
}

/*
 * A manager closed when its segment's mutex cannot be had (damage the
 * repair refuses, so the segment is poisoned) still wakes its threads
 * blocked in a request (shm/engine.c, wake_own()): they sleep on no close
 * word, and the client's requests are not dropped under the mutex.
 */
Test(poison, close_on_a_poisoned_segment_wakes_its_blocked_threads, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *la = NULL;
	struct t_holder h;
	char path[512];
	uint64_t t0;

	T_ASSERT_RC(wlk_acquire(a, "x", 1, NULL, &la), 0);
	t_holder_start(&h, b, "x", 1, NULL);
	cr_assert(t_wait_pending(a, "x", 1, 1));
	cr_assert(t_mapped_segment(path, sizeof(path)));
	scribble(path);
	t0 = t_now_ns();
	t_forget(b);
	wlk_manager_close(b);
	cr_assert_eq(t_holder_wait_granted(&h), 0, "blocked thread not woken");
	cr_assert_lt(t_now_ns() - t0, T_CLOSE_WAKE_MAX_NS,
		     "woken %llu ms after the close",
		     (unsigned long long)((t_now_ns() - t0) / 1000000));
	cr_assert(h.acq_rc == WLK_ESTATE || h.acq_rc == WLK_ECORRUPT,
		  "blocked acquire: %s", t_ename(h.acq_rc));
	cr_assert_not(h.got);
	t_holder_join(&h);
	/* The segment fails validation for good: the fixture must not
	 * check it through a; the bucket goes here. */
	(void)wlk_release(la);
	t_forget(a);
	wlk_manager_close(a);
	T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), 0);
}
