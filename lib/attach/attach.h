/* SPDX-License-Identifier: MIT */
/*
 * attach.h - from an origin and options to a mapped, checked segment and
 * this process's agent slot in it: names and keys (naming.c), creating,
 * opening and checking the segment (segment.c), the registry of mapped
 * buckets (registry.c) and the anchor thread that holds the agent's
 * lifeline (anchor.c).
 */
#ifndef WLK_ATTACH_H
#define WLK_ATTACH_H

#include "repair.h"

/* The bucket of a manager opened without one (spec: the default bucket). */
#define WLK_DEFAULT_BUCKET "default"

/*
 * A poisoned segment that processes are still attached to is replaced for
 * new openers by the next generation, named "<name>~<g>". Openers try the
 * generations in order and use the first one that is not poisoned.
 */
#define WLK_MAX_GENERATIONS 16

/* naming.c */
int wlk__bucket_key(const char *origin, const struct wlk_manager_options *o,
		    uint8_t key[WLK_KEY_BYTES], char *shm_name) WLK_INTERNAL;
void wlk__generation_name(char *dst, const char *base, unsigned int gen)
	WLK_INTERNAL;

/* header.c */
/* Largest segment a geometry may ask for. */
#define WLK__MAX_SEGMENT_SIZE (1ull << 30)
/* TEXT chunks a segment may have: as many as fit its largest size. */
#define WLK__MAX_CHUNKS (uint32_t)(WLK__MAX_SEGMENT_SIZE / WLK_CHUNK_SIZE)
int wlk__geo_compute(uint32_t names, uint32_t requests, uint32_t name_len,
		     uint32_t chunks,
		     struct wlk__geo *g) WLK_INTERNAL;
int wlk__header_fill(struct wlk_seg_header *h, const char *origin,
		     const struct wlk_manager_options *o,
		     const struct wlk__geo *g, uint64_t mark) WLK_INTERNAL;

/* segment.c, header.c */
#define WLK__SEG_BROKEN (-EBADMSG) /* header geometry does not add up */
int wlk__header_check(struct wlk__bucket *b, size_t file_size) WLK_INTERNAL;
int wlk__ofd_lock(int fd, short type, off_t byte, bool wait) WLK_INTERNAL;
bool wlk__same_pidns(const struct wlk_seg_header *h) WLK_INTERNAL;
bool wlk__header_ident_eq(const struct wlk_seg_header *h, const char *origin,
			  const struct wlk_manager_options *o) WLK_INTERNAL;
int wlk__segment_attach(struct wlk__bucket *b, const char *origin,
			const struct wlk_manager_options *o) WLK_INTERNAL;
void wlk__segment_detach(struct wlk__bucket *b) WLK_INTERNAL;
int wlk__segment_perm_check(const struct wlk__bucket *b,
			    const struct wlk_manager_options *o) WLK_INTERNAL;
int wlk__segment_remove(const char *shm_name) WLK_INTERNAL;

/* registry.c */
int wlk__bucket_get(const char *origin, const struct wlk_manager_options *o,
		    struct wlk__bucket **out) WLK_INTERNAL;
void wlk__bucket_put(struct wlk__bucket *b) WLK_INTERNAL;

/* anchor.c */
int wlk__anchor_attach(struct wlk__bucket *b) WLK_INTERNAL;
void wlk__anchor_detach(struct wlk__bucket *b) WLK_INTERNAL;
void wlk__anchor_before_fork(void) WLK_INTERNAL;
void wlk__anchor_after_fork_parent(void) WLK_INTERNAL;
void wlk__anchor_after_fork_child(void) WLK_INTERNAL;

#endif /* WLK_ATTACH_H */
