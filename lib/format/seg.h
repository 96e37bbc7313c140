/* SPDX-License-Identifier: MIT */
/*
 * seg.h - a bucket's segment as this process maps it (struct wlk__bucket),
 * and typed access to its tables and words. The lowest layer of lib/: the
 * segment format (layout.h), the tunables, and this; every other layer
 * includes it through the header of the layer below it.
 */
#ifndef WLK_SEG_H
#define WLK_SEG_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <urcu/urcu-bp.h> /* the flavour must precede rculfhash.h */
#include <urcu/rculfhash.h>
#include <urcu/list.h>
#include <urcu/uatomic.h>

#include "weblocks.h"
#include "layout.h"
#include "tunables.h"

#define WLK_INTERNAL __attribute__((__visibility__("hidden")))

/* Per-thread caches (lane.c, handle.c): found without a call. */
#define WLK_TLS __thread __attribute__((tls_model("initial-exec")))

#define WLK_NSEC_PER_SEC 1000000000ull
/* Bytes of the 128-bit bucket hash, and room for a segment's name. */
#define WLK_KEY_BYTES 16
#define WLK_SHM_NAME_MAX 64

/*
 * Fencing tokens at or above this are damage, never carried into a new
 * segment or a new name entry: it leaves 2^63 grants before a wrap, and
 * CLOCK_REALTIME in nanoseconds (where a segment's tokens start) reaches it
 * in 2262.
 */
#define WLK_TOKEN_DAMAGED (1ull << 63)

/*
 * The geometry of a segment, copied to private memory once validated. All
 * bound checks use this copy: a co-tenant scribbling on the header cannot
 * widen them.
 */
struct wlk__geo {
	uint32_t max_agents;
	uint32_t max_clients;
	uint32_t max_names;
	uint32_t max_requests;
	uint32_t max_name_len;
	uint32_t name_stride;
	uint32_t hash_buckets;
	uint32_t max_chunks;
	size_t off_agents;
	size_t off_clients;
	size_t off_names;
	size_t off_requests;
	size_t off_hash;
	size_t off_chunks;
	size_t size;
};

/*
 * One mapping of a bucket's segment in this process, shared by every manager
 * of that bucket here, and this process's agent slot in it. Lives in the
 * registry (registry.c) while referenced.
 */
struct wlk__bucket {
	struct cds_lfht_node node; /* registry */
	unsigned long refs;        /* under the registry mutex */
	unsigned long fork_gen;    /* process incarnation that mapped it */
	uint8_t key[WLK_KEY_BYTES];
	char base_name[WLK_SHM_NAME_MAX]; /* generation 0 */
	char shm_name[WLK_SHM_NAME_MAX];  /* the generation in use */
	int fd;
	unsigned int mode; /* permission bits of the segment file */
	uint8_t *base;
	struct wlk_seg_header *hdr;
	struct wlk__geo geo;
	uint64_t seg_key[2]; /* private copy of the name-hash key */
	uint32_t agent;      /* our agent slot */
	uint32_t agent_gen;
};

/*
 * Typed access to the tables. The segment is untrusted input: an index
 * read from it (a list link, a request's name or client, a hash chain) is
 * read once into a local and goes through a checked accessor,
 * wlk__req_at() and the like, which yields NULL for an index outside its
 * table, so that the caller returns an error (wlk__corrupt()) instead of
 * reading anywhere. The unchecked ones below them take indices this
 * process already bounded: its own agent and client slots, the slots its
 * handles and lanes got from the allocator, a loop's counter.
 */
static inline struct wlk_seg_agent *wlk__agent(const struct wlk__bucket *b,
					       uint32_t i)
{
	return (struct wlk_seg_agent *)(b->base + b->geo.off_agents) + i;
}

static inline struct wlk_seg_client *wlk__client(const struct wlk__bucket *b,
						 uint32_t i)
{
	return (struct wlk_seg_client *)(b->base + b->geo.off_clients) + i;
}

static inline struct wlk_seg_name *wlk__name(const struct wlk__bucket *b,
					     uint32_t i)
{
	return (struct wlk_seg_name *)(b->base + b->geo.off_names +
				       (size_t)i * b->geo.name_stride);
}


static inline struct wlk_seg_request *wlk__req(const struct wlk__bucket *b,
					       uint32_t i)
{
	return (struct wlk_seg_request *)(b->base + b->geo.off_requests) + i;
}

static inline uint32_t *wlk__hash_heads(const struct wlk__bucket *b)
{
	return (uint32_t *)(b->base + b->geo.off_hash);
}

static inline struct wlk_seg_chunk *wlk__chunk(const struct wlk__bucket *b,
					       uint32_t i)
{
	return (struct wlk_seg_chunk *)(b->base + b->geo.off_chunks) + i;
}

/* Chunks a text of @len bytes takes (TEXT); none for a short name. */
static inline uint32_t wlk__chunks_for(uint32_t len)
{
	return (len + WLK_CHUNK_TEXT - 1) / WLK_CHUNK_TEXT;
}

/* Checked access: the slot, or NULL if @i is outside its table. */
static inline struct wlk_seg_agent *wlk__agent_at(const struct wlk__bucket *b,
						  uint32_t i)
{
	return i < b->geo.max_agents ? wlk__agent(b, i) : NULL;
}

static inline struct wlk_seg_client *
wlk__client_at(const struct wlk__bucket *b, uint32_t i)
{
	return i < b->geo.max_clients ? wlk__client(b, i) : NULL;
}

static inline struct wlk_seg_name *wlk__name_at(const struct wlk__bucket *b,
						uint32_t i)
{
	return i < b->geo.max_names ? wlk__name(b, i) : NULL;
}

static inline struct wlk_seg_request *
wlk__req_at(const struct wlk__bucket *b, uint32_t i)
{
	return i < b->geo.max_requests ? wlk__req(b, i) : NULL;
}

/*
 * A list link read from the segment: WLK_NIL (the end) or a request index
 * inside the table. Every walk of a request list also counts its steps
 * and stops, as damage, past the table's size (wlk__walk_ok()): a cycle
 * in a damaged list must not hang the walker.
 */
static inline bool wlk__link_ok(const struct wlk__bucket *b, uint32_t i)
{
	return i == WLK_NIL || i < b->geo.max_requests;
}

static inline bool wlk__walk_ok(const struct wlk__bucket *b, uint32_t steps)
{
	return steps < b->geo.max_requests;
}

/*
 * How many name entries a header that may be damaged lays out in a file
 * of @size bytes: @off and @stride are its name table's offset and
 * stride, @max its name capacity, each read once by the caller. 0 if the
 * table cannot be there (outside the file, misaligned, entries smaller
 * than one); else the entries that fit, at most @max. For those who read
 * a segment without trusting its geometry (token.c, the poisoning in
 * fastword.c).
 */
static inline uint64_t wlk__names_span(uint64_t off, uint64_t stride,
				       uint64_t max, uint64_t size)
{
	uint64_t n;

	if (off < WLK_HEADER_SIZE || off >= size || off % 8 ||
	    stride < sizeof(struct wlk_seg_name) || stride % 8)
		return 0;
	n = (size - off) / stride;
	return n < max ? n : max;
}

/* Atomic access to slot words: release on publish, acquire on read. */
static inline uint32_t wlk__word_load(const uint32_t *w)
{
	uint32_t v = uatomic_read(w);

	cmm_smp_rmb();
	return v;
}

static inline void wlk__word_store(uint32_t *w, uint32_t v)
{
	cmm_smp_wmb();
	uatomic_set(w, v);
}

/*
 * Usage counters ([D][A] in layout.h) change only under the segment mutex,
 * so a plain load and store suffice; uatomic_set keeps the store whole for
 * readers outside the mutex (query's sizing, the inspector), without the
 * cost of a locked read-modify-write.
 */
static inline void wlk__count(uint32_t *c, int32_t d)
{
	uatomic_set(c, *c + (uint32_t)d);
}

static inline void wlk__count64(uint64_t *c, int64_t d)
{
	uatomic_set(c, *c + (uint64_t)d);
}

#endif /* WLK_SEG_H */
