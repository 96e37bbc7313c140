/* SPDX-License-Identifier: MIT */
/*
 * validate.c - check every invariant of a segment, report each violation.
 *
 * Run under the segment mutex for a consistent view. It only reads, bounds
 * every index and every walk, and never trusts a derived field it has not
 * checked against the authoritative slot words. Tests run it after every
 * multi-process test and after every fail point; it is the oracle of the
 * crash-consistency work. This file runs the checks and reports what they
 * found; the checks are validate_slots.c and validate_names.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inspect_internal.h"

/* Every check, under the mutex: no allocation, no callback. */
static void validate_locked(struct wlk__vctx *v)
{
	struct wlk_seg_header *h = v->b->hdr;

	if (uatomic_read(&h->seg_state) != WLK_SEG_READY)
		wlk__bad(v, "segment state %u", h->seg_state);
	if (h->intent_op != WLK_INTENT_NONE)
		wlk__bad(v, "unfinished intent %u", h->intent_op);
	wlk__check_agents_clients(v);
	wlk__check_names(v);
	wlk__check_text(v);
	wlk__check_requests(v);
}

/*
 * wlk__validate() - check every invariant of @b, under its mutex if @lock
 * (otherwise racing writers may show as violations), then report each
 * violation to @cb (after unlocking).
 * Return: 0, WLK_ECORRUPT if anything was violated, or another error.
 */
int wlk__validate(struct wlk__bucket *b, bool lock, wlk_violation_cb cb,
		  void *arg)
{
	struct wlk__vctx v = {.b = b};
	struct wlk__wake wake;
	int rc;

	v.seen = calloc(b->geo.max_requests, 1);
	v.fast_seen = calloc(b->geo.max_requests, sizeof(*v.fast_seen));
	v.idle_seen = calloc(b->geo.max_names, 1);
	v.chunk_owner = calloc(b->geo.max_chunks, sizeof(*v.chunk_owner));
	v.msgs = calloc(REPORT_KEPT, sizeof(*v.msgs));
	rc = !v.seen || !v.fast_seen || !v.idle_seen || !v.chunk_owner ||
			     !v.msgs
		     ? -ENOMEM
	     : lock			    ? wlk__lock(b, &wake)
					    : 0;
	if (rc == WLK_ECORRUPT && cb)
		cb(uatomic_read(&b->hdr->seg_state) == WLK_SEG_POISONED
			   ? "segment poisoned: found unrepairable"
			   : "segment mutex unusable, or repair failed",
		   arg);
	if (!rc) {
		validate_locked(&v);
		if (lock)
			wlk__unlock(b, &wake);
		for (unsigned int i = 0; cb && i < v.count; i++) {
			if (i == REPORT_KEPT) {
				char more[REPORT_LEN];

				snprintf(more, sizeof(more),
					 "... and %u more", v.count - i);
				cb(more, arg);
				break;
			}
			cb(v.msgs[i], arg);
		}
		rc = v.count ? WLK_ECORRUPT : 0;
	}
	free(v.seen);
	free(v.fast_seen);
	free(v.idle_seen);
	free(v.chunk_owner);
	free(v.msgs);
	return rc;
}
