/* SPDX-License-Identifier: MIT */
/*
 * t_call.c - wlk_call_acquire() and wlk_call_release(): wlk_acquire() and
 * wlk_release() with their arguments in a block (struct wlk_call), as the
 * Python bindings call them.
 */
#include "../common.h"

static const struct wlk_options ifa = { .if_available = true };
static const struct wlk_options steal = { .steal = true };

static const char *id(struct wlk_manager *m)
{
	return wlk_manager_client_id(m);
}

Test(call, acquires_releases_and_is_reused, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_call c = { .m = a, .name = "r", .name_len = 1 };
	struct wlk_lock *other = (struct wlk_lock *)&other;
	uint64_t first;
	size_t len = 0;

	T_ASSERT_RC(wlk_call_acquire(&c), 0);
	cr_assert_not_null(c.lock);
	cr_assert_str_eq(wlk_lock_name(c.lock, &len), "r");
	cr_assert_eq(len, 1);
	cr_assert_eq(t_held_by(b, "r", 1, id(a)), 1);
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &ifa, &other), 0);
	cr_assert_null(other, "b was granted a lock the block holds");
	first = wlk_lock_token(c.lock);

	T_ASSERT_RC(wlk_call_release(&c), 0);
	cr_assert_null(c.lock, "release left the handle in the block");
	cr_assert_eq(t_held_n(b, NULL, 0), 0);
	/* A released block takes the next lock, with a later token. */
	T_ASSERT_RC(wlk_call_acquire(&c), 0);
	cr_assert_not_null(c.lock);
	cr_assert_gt(wlk_lock_token(c.lock), first);
	T_ASSERT_RC(wlk_call_release(&c), 0);
	/* Releasing an empty block does nothing. */
	T_ASSERT_RC(wlk_call_release(&c), 0);
	cr_assert_null(c.lock);
	cr_assert_eq(t_held_n(b, NULL, 0), 0);
}

Test(call, if_available_miss_leaves_the_block_empty, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_call c = { .m = a, .name = "r", .name_len = 1, .o = &ifa };
	struct wlk_lock *held = NULL;

	T_ASSERT_RC(wlk_acquire(b, "r", 1, NULL, &held), 0);
	T_ASSERT_RC(wlk_call_acquire(&c), 0);
	cr_assert_null(c.lock, "an if_available miss wrote a lock");
	cr_assert_eq(t_pending_n(a, NULL, 0), 0);
	T_ASSERT_RC(wlk_release(held), 0);
	T_ASSERT_RC(wlk_call_acquire(&c), 0);
	cr_assert_not_null(c.lock);
	T_ASSERT_RC(wlk_call_release(&c), 0);
}

Test(call, a_block_holding_a_lock_is_refused, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_call c = { .m = a, .name = "r", .name_len = 1 };
	struct wlk_call d = { .m = a, .name = "s", .name_len = 1 };
	struct wlk_lock *kept;

	T_ASSERT_RC(wlk_call_acquire(&c), 0);
	kept = c.lock;
	/* Its handle is kept, and nothing else is taken or queued. */
	T_ASSERT_RC(wlk_call_acquire(&c), WLK_EINVAL);
	cr_assert_eq(c.lock, kept, "a refused acquire changed the block");
	d.lock = kept;
	T_ASSERT_RC(wlk_call_acquire(&d), WLK_EINVAL);
	cr_assert_eq(t_held_n(b, NULL, 0), 1);
	cr_assert_eq(t_pending_n(b, NULL, 0), 0);
	T_ASSERT_RC(wlk_call_release(&c), 0);
	T_ASSERT_RC(wlk_call_acquire(NULL), WLK_EINVAL);
	T_ASSERT_RC(wlk_call_release(NULL), WLK_EINVAL);
}

Test(call, errors_are_those_of_wlk_acquire, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_call c = { .m = a, .name = "-r", .name_len = 2 };
	struct wlk_call v = { .m = a, .name = "r", .name_len = 1 };
	struct wlk_lock *thief = NULL;

	T_ASSERT_RC(wlk_call_acquire(&c), WLK_ENOTSUPPORTED);
	cr_assert_null(c.lock);
	c.name = "r";
	c.name_len = WLK_NUL_TERMINATED;
	c.o = &steal;
	c.m = NULL;
	T_ASSERT_RC(wlk_call_acquire(&c), WLK_EINVAL);
	cr_assert_null(c.lock);
	cr_assert_eq(t_held_n(b, NULL, 0), 0);
	/* A stolen lock's release says so, and empties the block. */
	T_ASSERT_RC(wlk_call_acquire(&v), 0);
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &steal, &thief), 0);
	T_ASSERT_RC(wlk_call_release(&v), WLK_ESTOLEN);
	cr_assert_null(v.lock);
	cr_assert_eq(t_held_by(b, "r", 1, id(b)), 1);
	T_ASSERT_RC(wlk_release(thief), 0);
}
