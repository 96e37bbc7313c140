/* SPDX-License-Identifier: MIT */
/*
 * inspect_internal.h - the lookers at a segment: the inspector (inspect.c,
 * inspect_copy.c, the public weblocks/inspect.h), the validator
 * (validate.c) and the snapshot of wlk_query() (query.c). Above attach;
 * the shared-memory engine (lib/shm) uses the last two.
 */
#ifndef WLK_INSPECT_INTERNAL_H
#define WLK_INSPECT_INTERNAL_H

#include "engine.h"
#include "attach.h"
#include "weblocks/inspect.h"

/* An open segment: a bucket view that is not an agent. */
struct wlk_inspect {
	struct wlk__bucket b;
	unsigned int flags;
	unsigned int generation;
	char path[sizeof("/dev/shm/") + WLK_SHM_NAME_MAX];
};

/* query.c */
int wlk__snapshot_take(struct wlk__bucket *b, struct wlk_snapshot **out)
	WLK_INTERNAL;

/* validate.c */
int wlk__validate(struct wlk__bucket *b, bool lock, wlk_violation_cb cb,
		  void *arg) WLK_INTERNAL;

/*
 * What the validator's driver (validate.c) shares with its checks of the
 * slot tables (validate_slots.c) and of the names (validate_names.c).
 */
struct wlk__vctx {
	struct wlk__bucket *b;
	unsigned int count;
	uint8_t *seen; /* per request slot: listed once */
	/* Per request slot: the claim (gen bits + 1) seen as some name's
	 * fast holder or waiter; a lane slot may move on to another name
	 * while we look, with a new claim. */
	uint16_t *fast_seen;
	uint8_t *idle_seen; /* per name slot: the list it is on (NAME LISTS) */
	uint32_t *chunk_owner; /* per text chunk: its owner's tag, or 0 */
	uint32_t chunks_owned;
	char (*msgs)[REPORT_LEN];
};

/* validate_slots.c */
void wlk__bad(struct wlk__vctx *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3))) WLK_INTERNAL;
void wlk__check_free_list(struct wlk__vctx *v, const char *what,
			  uint32_t head, uint32_t max, uint32_t want,
			  uint32_t (*word)(struct wlk__bucket *, uint32_t),
			  uint32_t (*next)(struct wlk__bucket *, uint32_t))
	WLK_INTERNAL;
void wlk__check_agents_clients(struct wlk__vctx *v) WLK_INTERNAL;
void wlk__check_requests(struct wlk__vctx *v) WLK_INTERNAL;

/* validate_names.c */
void wlk__check_names(struct wlk__vctx *v) WLK_INTERNAL;

/* validate_text.c */
void wlk__check_text(struct wlk__vctx *v) WLK_INTERNAL;

#endif /* WLK_INSPECT_INTERNAL_H */
