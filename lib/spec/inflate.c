/* SPDX-License-Identifier: MIT */
/*
 * inflate.c - a name's passage from the fast path to the queue (layout.h,
 * FAST PATH): inflating it (its fast holder and fast waiter become
 * ordinary requests; the words themselves are state/fastword.c's), and the
 * request slots managers keep in reserve for the fast path, taken back.
 */
#include "spec.h"

/*
 * wlk__fast_discard() - under the mutex: a fast lane's slot whose manager
 * was closed while it was in use: free it, unless it went already or is a
 * held lock.
 */
void wlk__fast_discard(struct wlk__bucket *b, uint32_t s, uint32_t g)
{
	struct wlk_seg_request *r = wlk__req(b, s);
	uint32_t w, ni;

	w = r->word;
	ni = uatomic_read(&r->name); /* once: bounded, then used */
	if (w == WLK_WORD(g, WLK_SLOT_RESERVED))
		wlk__req_reclaim(b, s, w);
	else if (w == WLK_WORD(g, WLK_SLOT_FAST) &&
		 (!wlk__name_at(b, ni) || (!wlk__fast_holds(b, ni, s) &&
					    !wlk__fast_waits(b, ni, s))))
		wlk__req_free(b, s);
}

/*
 * wlk__name_inflate() - under the mutex: turn @ni's fast path off, making a
 * fast holder an ordinary held request and a fast waiter the first of the
 * queue. Idempotent. Return: 0 or WLK_ECORRUPT.
 */
int wlk__name_inflate(struct wlk__bucket *b, uint32_t ni)
{
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint32_t w, s = wlk__fast_off(b, ni, &w);
	int rc = 0;

	if (s != WLK_NIL || w != WLK_NIL)
		rc = wlk__name_touch(b, ni);
	if (!rc && s != WLK_NIL)
		rc = wlk__adopt(b, n, s);
	if (!rc && w != WLK_NIL)
		/* A waiter whose holder's slot was freed under it (a dead
		 * client): its turn has come. */
		rc = s != WLK_NIL ? wlk__adopt_waiter(b, n, w)
				  : wlk__adopt(b, n, w);
	if (rc)
		return rc;
	wlk__fast_waiter_clear(b, ni);
	wlk__fast_store_off(b, ni);
	return 0;
}

/*
 * wlk__idle_inflate() - under the mutex, before wlk__name_new() takes an
 * idle name for a new one: inflate the least recently used idle name. An
 * idle name may be held through its fast word: inflating it takes it off
 * the idle list, held; the next one is tried. Return: 0 with
 * h->idle_head inflated and idle, WLK_EFULL if no name is idle, or an
 * error.
 */
int wlk__idle_inflate(struct wlk__bucket *b)
{
	struct wlk_seg_header *h = b->hdr;
	uint32_t ni = h->idle_head;
	int rc;

	for (uint32_t steps = 0;; steps++) {
		if (ni == WLK_NIL)
			return WLK_EFULL;
		if (!wlk__name_at(b, ni) || steps >= b->geo.max_names)
			return wlk__corrupt(b);
		rc = wlk__name_inflate(b, ni);
		if (rc)
			return rc;
		if (wlk__name_idle(wlk__name(b, ni)))
			return 0;
		ni = h->idle_head;
	}
}

/*
 * wlk__text_make_room() - under the mutex, before a new name's text or a
 * client id is stored (layout.h, TEXT): @chunks chunks free, forgetting
 * idle names for them, least recently used first, as a new name does for
 * its entry. Return: 0, WLK_EFULL (no idle name left to forget), or an
 * error.
 */
int wlk__text_make_room(struct wlk__bucket *b, uint32_t chunks)
{
	while (wlk__text_room(b) < chunks) {
		int rc = wlk__idle_inflate(b);

		if (!rc)
			rc = wlk__name_evict(b);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * wlk__stash_reclaim() - under the mutex, with the free list empty: take
 * back the slots clients keep in reserve. Return: how many.
 */
uint32_t wlk__stash_reclaim(struct wlk__bucket *b)
{
	uint32_t got = 0;

	for (uint32_t ri = 0; ri < b->geo.max_requests; ri++) {
		struct wlk_seg_request *r = wlk__req(b, ri);
		uint32_t w = uatomic_read(&r->word);

		if (WLK_WORD_STATE(w) == WLK_SLOT_RESERVED &&
		    wlk__req_reclaim(b, ri, w))
			got++;
	}
	return got;
}
