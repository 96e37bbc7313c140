/* SPDX-License-Identifier: MIT */
/*
 * t_fast.c - locks taken without the segment mutex (lib/state/fastword.c,
 * lib/shm/lane.c) behave as any other: query sees them, waiters queue
 * behind them, if_available and steal see them, close releases them,
 * eviction spares them, and the slots managers keep in reserve for them
 * never make a request fail with WLK_EFULL.
 *
 * A manager's first acquire takes the mutex and puts a request slot in
 * reserve; its next uncontended acquire of a known idle name takes the fast
 * path. warm() does the first, so the lock each test then takes is fast.
 */
#include <string.h>
#include <sys/mman.h>

#include "../common.h"
#include "testing.h"
#include "weblocks/inspect.h"

static const struct wlk_options sh = {.mode = WLK_SHARED};
static const struct wlk_options ex_ia = {.if_available = true};
static const struct wlk_options steal = {.steal = true};

/* Make @name known and give @m a reserved slot: the next take is fast. */
static void warm(struct wlk_manager *m, const char *name,
		 const struct wlk_options *o)
{
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(m, name, WLK_NUL_TERMINATED, o, &l), 0);
	T_ASSERT_RC(wlk_release(l), 0);
}

static struct wlk_lock *take(struct wlk_manager *m, const char *name,
			     const struct wlk_options *o)
{
	struct wlk_lock *l = NULL;

	warm(m, name, o);
	T_ASSERT_RC(wlk_acquire(m, name, WLK_NUL_TERMINATED, o, &l), 0);
	cr_assert_not_null(l);
	return l;
}

Test(fast, held_lock_is_in_query_and_released_after_it, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open(), *q = t_open();
	struct wlk_lock *l = take(m, "r", NULL);

	cr_assert_eq(t_held_by(q, "r", 1, wlk_manager_client_id(m)), 1);
	cr_assert_eq(t_held_n(q, NULL, 0), 1);
	T_ASSERT_RC(wlk_manager_validate(q, NULL, NULL), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_held_n(q, NULL, 0), 0);
	/* After query made it an ordinary lock, the name is fast again. */
	l = take(m, "r", NULL);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_held_n(q, NULL, 0), 0);
}

Test(fast, waiter_queues_behind_a_fast_holder, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *l = take(a, "r", NULL);
	uint64_t ta = wlk_lock_token(l);
	struct t_holder h;

	t_holder_start(&h, b, "r", 1, NULL);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	cr_assert_not(t_holder_granted_now(&h));
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	cr_assert(h.got);
	cr_assert_gt(h.token, ta);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
}

Test(fast, if_available_sees_a_fast_holder, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *l, *l2 = (struct wlk_lock *)&l2;

	warm(b, "r", NULL); /* b tries the fast path too */
	l = take(a, "r", NULL);
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &ex_ia, &l2), 0);
	cr_assert_null(l2);
	T_ASSERT_RC(wlk_release(l), 0);
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &ex_ia, &l2), 0);
	cr_assert_not_null(l2);
	T_ASSERT_RC(wlk_release(l2), 0);
}

Test(fast, shared_holders_add_up, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *la = take(a, "r", &sh), *lb = NULL, *lx = NULL;

	T_ASSERT_RC(wlk_acquire(b, "r", 1, &sh, &lb), 0);
	cr_assert_eq(t_held_n(a, "r", 1), 2);
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &ex_ia, &lx), 0);
	cr_assert_null(lx);
	T_ASSERT_RC(wlk_release(la), 0);
	T_ASSERT_RC(wlk_release(lb), 0);
	cr_assert_eq(t_held_n(a, "r", 1), 0);
}

Test(fast, steal_takes_a_fast_lock, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *la = take(a, "r", NULL), *lb = NULL;

	T_ASSERT_RC(wlk_acquire(b, "r", 1, &steal, &lb), 0);
	cr_assert(wlk_lock_stolen(la));
	cr_assert_eq(t_held_by(a, "r", 1, wlk_manager_client_id(b)), 1);
	cr_assert_gt(wlk_lock_token(lb), wlk_lock_token(la));
	T_ASSERT_RC(wlk_release(la), WLK_ESTOLEN);
	T_ASSERT_RC(wlk_release(lb), 0);
}

Test(fast, close_releases_a_fast_lock, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *la = take(a, "r", NULL), *lb = NULL;

	t_forget(a);
	wlk_manager_close(a);
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &ex_ia, &lb), 0);
	cr_assert_not_null(lb);
	T_ASSERT_RC(wlk_release(la), WLK_ESTATE);
	T_ASSERT_RC(wlk_release(lb), 0);
	T_ASSERT_RC(wlk_manager_validate(b, NULL, NULL), 0);
}

Test(fast, eviction_spares_a_fast_held_name, T_FIX, .timeout = 10)
{
	struct wlk_manager_options o = {.max_names = 1};
	struct wlk_manager *a = t_open_opts(&o), *b = t_open_opts(&o);
	struct wlk_lock *la = take(a, "a", NULL), *lb = (void *)&lb;
	uint64_t ta = wlk_lock_token(la);

	/* "a" looks idle to the name table, but it is held. */
	T_ASSERT_RC(wlk_acquire(b, "b", 1, NULL, &lb), WLK_EFULL);
	cr_assert_eq(lb, (void *)&lb);
	cr_assert_eq(t_held_n(b, "a", 1), 1);
	T_ASSERT_RC(wlk_release(la), 0);
	/* Now "a" goes, and comes back with tokens still above its old. */
	warm(b, "b", NULL);
	la = take(a, "a", NULL);
	cr_assert_gt(wlk_lock_token(la), ta);
	T_ASSERT_RC(wlk_release(la), 0);
}

Test(fast, reserved_slots_never_cause_efull, T_FIX, .timeout = 10)
{
	struct wlk_manager_options o = {.max_requests = 4};
	struct wlk_manager *m[3];
	struct wlk_lock *l[5] = {NULL};
	char name[2] = "a";

	for (int i = 0; i < 3; i++) {
		m[i] = t_open_opts(&o);
		warm(m[i], "w", NULL);
	}
	/* Some slots sit in reserve now; all four can still be had. */
	for (int i = 0; i < 4; i++) {
		name[0] = (char)('a' + i);
		T_ASSERT_RC(wlk_acquire(m[2], name, 1, NULL, &l[i]), 0);
	}
	T_ASSERT_RC(wlk_acquire(m[0], "e", 1, NULL, &l[4]), WLK_EFULL);
	cr_assert_eq(t_held_n(m[1], NULL, 0), 4);
	for (int i = 0; i < 4; i++)
		T_ASSERT_RC(wlk_release(l[i]), 0);
	warm(m[0], "e", NULL);
}

Test(fast, many_names_held_at_once_then_released, T_FIX, .timeout = 10)
{
	enum { N = 10 };
	struct wlk_manager *m = t_open(), *q = t_open();
	struct wlk_lock *l[N];
	char name[2] = "a";

	for (int i = 0; i < N; i++) {
		name[0] = (char)('a' + i);
		warm(m, name, i % 2 ? &sh : NULL);
	}
	for (int i = 0; i < N; i++) {
		name[0] = (char)('a' + i);
		T_ASSERT_RC(wlk_acquire(m, name, 1, i % 2 ? &sh : NULL, &l[i]),
			    0);
	}
	cr_assert_eq(t_held_by(q, NULL, 0, wlk_manager_client_id(m)), N);
	for (int i = 0; i < N; i++)
		T_ASSERT_RC(wlk_release(l[i]), 0);
	cr_assert_eq(t_held_n(q, NULL, 0), 0);
}

Test(fast, same_name_in_two_buckets_stays_apart, T_FIX, .timeout = 10)
{
	char other[128];
	struct wlk_manager *a, *b, *b2;
	struct wlk_lock *la, *lb, *lx = (struct wlk_lock *)&lx;

	t_make_origin(other, sizeof(other), "two");
	t_track_bucket(other, NULL, NULL);
	a = t_open();
	b = t_open_at(other, NULL);
	b2 = t_open_at(other, NULL);
	/* One thread, one name, two segments: each keeps its own holder. */
	la = take(a, "r", NULL);
	lb = take(b, "r", NULL);
	T_ASSERT_RC(wlk_acquire(b2, "r", 1, &ex_ia, &lx), 0);
	cr_assert_null(lx);
	T_ASSERT_RC(wlk_release(la), 0);
	T_ASSERT_RC(wlk_acquire(b2, "r", 1, &ex_ia, &lx), 0);
	cr_assert_null(lx, "a release in one bucket freed the other's lock");
	T_ASSERT_RC(wlk_release(lb), 0);
	cr_assert_eq(t_held_n(b2, "r", 1), 0);
	T_ASSERT_RC(wlk_manager_validate(b2, NULL, NULL), 0);
}

Test(fast, slots_come_back_after_waits_timeouts_and_steals, T_FIX,
     .timeout = 30)
{
	static const struct wlk_options t1 = {.timeout_ns = 1000 * 1000};
	struct wlk_manager_options o = {.max_requests = 4};
	struct wlk_manager *a = t_open_opts(&o), *b = t_open_opts(&o);
	struct wlk_inspect_snapshot *s = NULL;
	struct wlk_inspect *in = NULL;
	struct wlk_lock *la, *lb;

	/* With 4 slots, a slot lost on any of these paths runs out fast. */
	for (int i = 0; i < 300; i++) {
		la = lb = NULL;
		T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
		T_ASSERT_RC(wlk_acquire(b, "r", 1, &t1, &lb), WLK_ETIMEDOUT);
		if (i % 3 == 0) {
			T_ASSERT_RC(wlk_acquire(b, "r", 1, &steal, &lb), 0);
			T_ASSERT_RC(wlk_release(la), WLK_ESTOLEN);
		} else {
			T_ASSERT_RC(wlk_release(la), 0);
			T_ASSERT_RC(wlk_acquire(b, "r", 1, NULL, &lb), 0);
		}
		T_ASSERT_RC(wlk_release(lb), 0);
	}
	cr_assert_eq(t_held_n(a, NULL, 0), 0);
	T_ASSERT_RC(wlk_manager_validate(a, NULL, NULL), 0);
	/* Nothing held, pending or stolen is left in any slot. */
	T_ASSERT_RC(wlk_inspect_open(t_origin, &o, 0, &in), 0);
	T_ASSERT_RC(wlk_inspect_snapshot(in, &s), 0);
	cr_assert_eq(s->header.requests, 0, "%u requests left",
		     s->header.requests);
	wlk_inspect_snapshot_free(s);
	wlk_inspect_close(in);
}

/*
 * A request slot's name index is read from the segment, which any process
 * of the user can write: a damaged one must give WLK_ECORRUPT, with the
 * slot freed, not a crash. These tests map the segment to damage it.
 */
#define BAD_NAME_INDEX 0x7ffffff0u

/* Request slot @ri of the segment of t_origin, mapped (*@map, @size). */
static struct wlk_seg_request *slot_map(uint32_t ri, void **map, size_t *size)
{
	struct wlk_seg_header *h = *map = t_segment_map(size);

	cr_assert_lt(ri, h->max_requests);
	return (struct wlk_seg_request *)((char *)*map + h->off_requests) + ri;
}

/* The slot of the one request on @name in @state. */
static uint32_t slot_of(const char *name, enum wlk_request_state state)
{
	struct wlk_inspect_snapshot *s = NULL;
	struct wlk_inspect *in = NULL;
	uint32_t slot = UINT32_MAX;

	T_ASSERT_RC(wlk_inspect_open(t_origin, NULL, 0, &in), 0);
	T_ASSERT_RC(wlk_inspect_snapshot(in, &s), 0);
	for (size_t i = 0; i < s->n_requests; i++)
		if (s->requests[i].state == state && s->requests[i].name &&
		    !strcmp(s->requests[i].name, name))
			slot = s->requests[i].slot;
	wlk_inspect_snapshot_free(s);
	wlk_inspect_close(in);
	cr_assert_neq(slot, UINT32_MAX, "no such request on %s", name);
	return slot;
}

/* request.c: a waiter granted through the fast word copies the name index
 * it will release by out of its slot. */
Test(fast, grant_through_fast_word_with_bad_name_index_is_ecorrupt, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_options t5 = {.timeout_ns = 5 * 1000000000ull};
	struct wlk_lock *la = NULL, *lx = NULL;
	struct wlk_seg_request *r;
	struct t_holder h;
	size_t size;
	void *map;

	warm(b, "w", NULL); /* b keeps a slot: granted by the fast word */
	T_ASSERT_RC(wlk_acquire(a, "x", 1, NULL, &la), 0);
	t_holder_start(&h, b, "x", 1, &t5);
	cr_assert(t_wait_pending(a, "x", 1, 1));
	r = slot_map(slot_of("x", WLK_REQ_PENDING), &map, &size);
	__atomic_store_n(&r->name, BAD_NAME_INDEX, __ATOMIC_RELEASE);
	T_ASSERT_RC(wlk_release(la), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	T_ASSERT_RC(h.acq_rc, WLK_ECORRUPT);
	cr_assert_not(h.got);
	t_holder_join(&h);
	/* Nothing is held: the repair gave the name back. */
	T_ASSERT_RC(wlk_acquire(a, "x", 1, &ex_ia, &lx), 0);
	cr_assert_not_null(lx);
	T_ASSERT_RC(wlk_release(lx), 0);
	T_ASSERT_RC(wlk_manager_validate(a, NULL, NULL), 0);
	munmap(map, size);
}

/* ops.c: releasing a fast lock whose name was inflated meanwhile goes by
 * the mutex, which reads the slot's name index to inflate it. */
Test(fast, release_of_fast_lock_with_bad_name_index_is_ecorrupt, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_options t1 = {.timeout_ns = 1000000000ull};
	struct wlk_lock *la = take(a, "y", NULL), *lb = NULL;
	struct wlk_seg_request *r;
	size_t size;
	void *map;

	r = slot_map(slot_of("y", WLK_REQ_HELD), &map, &size);
	__atomic_store_n(&r->name, BAD_NAME_INDEX, __ATOMIC_RELEASE);
	/* b inflates "y"; a's slot no longer claims it, so b gets it. */
	T_ASSERT_RC(wlk_acquire(b, "y", 1, &t1, &lb), 0);
	T_ASSERT_RC(wlk_release(la), WLK_ECORRUPT);
	cr_assert_eq(WLK_WORD_STATE(__atomic_load_n(&r->word,
						    __ATOMIC_ACQUIRE)),
		     WLK_SLOT_FREE, "the damaged slot was not freed");
	T_ASSERT_RC(wlk_release(lb), 0);
	T_ASSERT_RC(wlk_manager_validate(b, NULL, NULL), 0);
	munmap(map, size);
}
