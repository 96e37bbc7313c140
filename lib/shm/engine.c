/* SPDX-License-Identifier: MIT */
/*
 * engine.c - the shared-memory engine as the API layer sees it (struct
 * wlk__engine, engine.h): a manager is a client slot in the bucket's
 * segment, mapped once per process (registry.c); a lock is a request slot.
 * The blocking path is acquire.c's, the async path async.c's; what is
 * left is here: becoming a client and leaving, and the lookers (query,
 * validation) over the segment.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shm.h"

static int shm_open(struct wlk_manager *pub, const char *origin,
		    const struct wlk_manager_options *o)
{
	struct wlk__shm_manager *m = wlk__shm_m(pub);
	uint64_t now = wlk__realtime_ns();
	struct wlk__wake wake;
	int rc;

	rc = wlk__bucket_get(origin, o, &m->b);
	if (rc)
		return rc;
	/* The CPU count, read once per process (sysconf reads /sys), and
	 * the vDSO's clock: here, not on their first use under the segment
	 * mutex (wlk__watch_init(), every timestamp). */
	(void)wlk__spin_ok();
	wlk__clock_init();
	rc = wlk__lock(m->b, &wake);
	if (!rc) {
		rc = wlk__client_reaping(m->b, pub->client_id, now,
					 &m->client, &wake);
		if (!rc)
			m->client_gen = WLK_WORD_GEN(
				wlk__client(m->b, m->client)->word);
		wlk__unlock(m->b, &wake);
	}
	if (rc) {
		wlk__bucket_put(m->b);
		return rc;
	}
	pub->max_name_len = m->b->geo.max_name_len;
	m->detect = o->detect_deadlocks;
	/* A fast waiter is in no queue: a manager that detects deadlocks
	 * waits where the check can see it (spec/deadlock.c). */
	m->fast_wait = !m->detect && wlk__spin_ok();
	return 0;
}

/*
 * The client's requests still pending, woken on their words without the
 * mutex (a spurious wake-up: each waiter then sees its manager closed).
 * For a segment whose mutex the close could not take. Indices bounded by
 * the table; the words are only woken.
 */
static void wake_own(struct wlk__shm_manager *m)
{
	for (uint32_t i = 0; i < m->b->geo.max_requests; i++) {
		uint32_t w;

		if (wlk__slot_ours(m, i, &w) &&
		    WLK_WORD_STATE(w) == WLK_SLOT_PENDING)
			wlk__futex_wake(&wlk__req(m->b, i)->word, INT32_MAX);
	}
}

/* The client goes: its locks are released, its requests dropped, and
 * their waiters woken (wait.c sleeps on no close word). */
static void shm_close(struct wlk_manager *pub)
{
	struct wlk__shm_manager *m = wlk__shm_m(pub);
	struct wlk__wake wake;

	if (!wlk__lock(m->b, &wake)) {
		wlk__lane_seal_claims(m);
		wlk__drop_client(m->b, m->client, false, &wake);
		wlk__unlock(m->b, &wake);
	} else {
		wake_own(m);
	}
}

/* The locks the fast path took hold their lanes, not references
 * (engine.h and seal.c, PINS). */
static void shm_seal(struct wlk_manager *pub)
{
	wlk__lane_seal(wlk__shm_m(pub));
}

/* A fork child's release of an inherited lock: its lane's claim ends
 * (the slot is the parent's: the child's lane is left EMPTY). */
static void shm_forget(struct wlk_lock *pub)
{
	struct wlk__shm_lock *l = wlk__shm_l(pub);
	struct wlk__shm_manager *m = wlk__shm_lm(l);

	if (l->fast || l->laned) {
		l->fast = l->laned = false;
		wlk__lane_end(m, l->lane, l->slot, l->gen, false, false);
	}
}

static void shm_free(struct wlk_manager *pub)
{
	wlk__bucket_put(wlk__shm_m(pub)->b);
}

static int shm_remove(const char *origin,
		      const struct wlk_manager_options *o)
{
	uint8_t key[WLK_KEY_BYTES];
	char shm_name[WLK_SHM_NAME_MAX];
	int rc = wlk__bucket_key(origin, o, key, shm_name);

	return rc ? rc : wlk__segment_remove(shm_name);
}

static bool shm_stolen(const struct wlk_lock *pub)
{
	const struct wlk__shm_lock *l = wlk__shm_cl(pub);

	return wlk__word_load(&wlk__req(wlk__shm_m(pub->m)->b, l->slot)
				       ->word) == WLK_WORD(l->gen,
							   WLK_SLOT_STOLEN);
}

static int shm_query(struct wlk_manager *pub, struct wlk_snapshot **out)
{
	return wlk__snapshot_take(wlk__shm_m(pub)->b, out);
}

static int shm_validate(struct wlk_manager *pub, wlk_violation_cb cb,
			void *arg)
{
	return wlk__validate(wlk__shm_m(pub)->b, true, cb, arg);
}

const struct wlk__engine wlk__shm_engine = {
	.name = "shm",
	.manager_size = sizeof(struct wlk__shm_manager),
	.lock_size = sizeof(struct wlk__shm_lock),
	.open = shm_open,
	.close = shm_close,
	.free = shm_free,
	.pins = WLK_LANES,
	.seal = shm_seal,
	.forget = shm_forget,
	.remove = shm_remove,
	.acquire = wlk__shm_acquire,
	.release = wlk__shm_release,
	.stolen = shm_stolen,
	.query = shm_query,
	.validate = shm_validate,
	.async_open = wlk__shm_async_open,
	.async_fd = wlk__shm_async_fd,
	.async_watch_fd = wlk__shm_async_watch_fd,
	.async_ring = wlk__shm_async_ring,
	.async_request = wlk__shm_async_request,
	.async_drain = wlk__shm_async_drain,
	.async_settle = wlk__shm_async_settle,
	.async_arm = wlk__shm_async_arm,
	.async_close = wlk__shm_async_close,
};
