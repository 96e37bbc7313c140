/* SPDX-License-Identifier: MIT */
/*
 * query.c - LockManager.query() (spec 4.5), its snapshot's accessors, and
 * wlk_manager_validate(): the engine takes the snapshot and checks its
 * state; the API layer checks the arguments and the manager.
 */
#include "api.h"

WLK_EXPORT int wlk_query(struct wlk_manager *m, struct wlk_snapshot **out)
{
	struct wlk_snapshot *s;
	int rc;

	if (!m || !out)
		return WLK_EINVAL;
	if (!wlk__manager_enter(m))
		return WLK_ESTATE;
	rc = m->e->query(m, &s);
	wlk__manager_leave(m);
	if (!rc)
		*out = s;
	return rc;
}

WLK_EXPORT size_t wlk_snapshot_held_count(const struct wlk_snapshot *s)
{
	return s ? s->n_held : 0;
}

WLK_EXPORT const struct wlk_lock_info *
wlk_snapshot_held(const struct wlk_snapshot *s, size_t i)
{
	return s && i < s->n_held ? &s->held[i] : NULL;
}

WLK_EXPORT size_t wlk_snapshot_pending_count(const struct wlk_snapshot *s)
{
	return s ? s->n_pending : 0;
}

WLK_EXPORT const struct wlk_lock_info *
wlk_snapshot_pending(const struct wlk_snapshot *s, size_t i)
{
	return s && i < s->n_pending ? &s->pending[i] : NULL;
}

WLK_EXPORT void wlk_snapshot_free(struct wlk_snapshot *s)
{
	if (s)
		s->free(s);
}

WLK_EXPORT int wlk_manager_validate(struct wlk_manager *m, wlk_violation_cb cb,
				    void *arg)
{
	int rc;

	if (!m)
		return WLK_EINVAL;
	if (!wlk__manager_enter(m))
		return WLK_ESTATE;
	rc = m->e->validate(m, cb, arg);
	wlk__manager_leave(m);
	return rc;
}
