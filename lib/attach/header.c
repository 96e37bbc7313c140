/* SPDX-License-Identifier: MIT */
/*
 * header.c - a segment's header (layout.h): its geometry, computed from
 * the capacities and never taken on trust; filling it in for a new
 * segment; checking it in a segment found; and the bucket it names.
 */
#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attach.h"

#define PAGE 4096u

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

/*
 * wlk__geo_compute() - the geometry a segment with these capacities has;
 * @chunks 0 for the default (layout.h, TEXT).
 * Return: 0, or WLK_EINVAL (a capacity out of range, or too large).
 */
int wlk__geo_compute(uint32_t names, uint32_t requests, uint32_t name_len,
		     uint32_t chunks, struct wlk__geo *g)
{
	uint64_t end;

	/* The default: a chunk per name, and room for the longest. */
	if (!chunks && name_len <= WLK_LIMIT_MAX_NAME_LEN)
		chunks = (names > wlk__chunks_for(name_len)
				  ? names
				  : wlk__chunks_for(name_len)) +
			 WLK_CHUNKS_SPARE;
	if (!names || names > WLK_LIMIT_MAX_NAMES || !requests ||
	    requests > WLK_LIMIT_MAX_REQUESTS || !name_len ||
	    name_len > WLK_LIMIT_MAX_NAME_LEN ||
	    chunks < wlk__chunks_for(WLK_CLIENT_ID_MAX) ||
	    chunks > WLK__MAX_CHUNKS)
		return WLK_EINVAL;
	g->max_agents = WLK_MAX_AGENTS;
	g->max_clients = WLK_MAX_CLIENTS;
	g->max_names = names;
	g->max_requests = requests;
	g->max_name_len = name_len;
	g->name_stride = (uint32_t)sizeof(struct wlk_seg_name);
	g->max_chunks = chunks;
	g->hash_buckets = 1;
	while (g->hash_buckets < 2 * names)
		g->hash_buckets <<= 1;
	g->off_agents = WLK_HEADER_SIZE;
	g->off_clients = g->off_agents +
			 (size_t)g->max_agents * sizeof(struct wlk_seg_agent);
	g->off_names = g->off_clients +
		       (size_t)g->max_clients * sizeof(struct wlk_seg_client);
	g->off_requests = g->off_names + (size_t)names * g->name_stride;
	g->off_hash = g->off_requests +
		      (size_t)requests * sizeof(struct wlk_seg_request);
	g->off_chunks = round_up(g->off_hash + (size_t)g->hash_buckets *
						   sizeof(uint32_t),
				 WLK_CACHELINE);
	end = g->off_chunks + (uint64_t)chunks * sizeof(struct wlk_seg_chunk);
	if (end > WLK__MAX_SEGMENT_SIZE)
		return WLK_EINVAL;
	g->size = round_up((size_t)end, PAGE);
	return 0;
}

static void pidns_id(uint64_t *dev, uint64_t *ino)
{
	struct stat st;

	*dev = 0;
	*ino = 0;
	if (stat("/proc/self/ns/pid", &st) == 0) {
		*dev = (uint64_t)st.st_dev;
		*ino = (uint64_t)st.st_ino;
	}
}

static void set_ident(char *dst, uint32_t *len, const char *src)
{
	*len = (uint32_t)strlen(src);
	memcpy(dst, src, *len);
}

/*
 * wlk__header_fill() - the header of a new segment of geometry @g, for
 * bucket (@origin, @o), whose tokens start above @mark; all but the state,
 * the mutex and the magic, which the creator sets last.
 * Return: 0, or a negative errno value (no random key).
 */
int wlk__header_fill(struct wlk_seg_header *h, const char *origin,
		     const struct wlk_manager_options *o,
		     const struct wlk__geo *g, uint64_t mark)
{
	h->layout_version = WLK_LAYOUT_VERSION;
	h->abi_sig = WLK_ABI_SIG;
	h->segment_size = g->size;
	h->header_size = WLK_HEADER_SIZE;
	h->creator_uid = (uint32_t)geteuid();
	pidns_id(&h->pidns_dev, &h->pidns_ino);
	if (getrandom(h->seg_key, sizeof(h->seg_key), 0) !=
	    (ssize_t)sizeof(h->seg_key))
		return wlk__errno(errno);
	h->max_agents = g->max_agents;
	h->max_clients = g->max_clients;
	h->max_names = g->max_names;
	h->max_requests = g->max_requests;
	h->max_name_len = g->max_name_len;
	h->name_stride = g->name_stride;
	h->hash_buckets = g->hash_buckets;
	h->max_chunks = g->max_chunks;
	h->off_chunks = g->off_chunks;
	h->off_agents = g->off_agents;
	h->off_clients = g->off_clients;
	h->off_names = g->off_names;
	h->off_requests = g->off_requests;
	h->off_hash = g->off_hash;
	h->created_ns = wlk__realtime_ns();
	h->next_token = mark > h->created_ns ? mark : h->created_ns;
	set_ident(h->origin, &h->origin_len, origin);
	set_ident(h->bucket, &h->bucket_len,
		  o && o->bucket ? o->bucket : WLK_DEFAULT_BUCKET);
	set_ident(h->partition, &h->partition_len,
		  o && o->partition ? o->partition : "");
	return 0;
}

static bool ident_eq(const char *field, uint32_t len, size_t cap,
		     const char *want)
{
	return len < cap && len == strlen(want) && !memcmp(field, want, len);
}

/*
 * wlk__header_ident_eq() - whether segment header @h is the one of bucket
 * (@origin, @o's bucket and partition, their defaults when NULL).
 */
bool wlk__header_ident_eq(const struct wlk_seg_header *h, const char *origin,
			  const struct wlk_manager_options *o)
{
	return ident_eq(h->origin, h->origin_len, sizeof(h->origin), origin) &&
	       ident_eq(h->bucket, h->bucket_len, sizeof(h->bucket),
			o && o->bucket ? o->bucket : WLK_DEFAULT_BUCKET) &&
	       ident_eq(h->partition, h->partition_len, sizeof(h->partition),
			o && o->partition ? o->partition : "");
}

/*
 * wlk__header_check() - the header of a mapped segment of @file_size
 * bytes: magic, format, owner and geometry (offsets and sizes recomputed
 * from the capacities, never taken on trust). On success b->geo and
 * b->seg_key are set from it.
 * Return: 0, WLK_ECORRUPT (no segment), WLK_EFORMAT (another layout or
 * ABI), WLK_ESECURITY (another owner), or WLK__SEG_BROKEN (the geometry
 * does not add up).
 */
int wlk__header_check(struct wlk__bucket *b, size_t file_size)
{
	const struct wlk_seg_header *h = b->hdr;
	struct wlk__geo g;

	if (file_size < WLK_HEADER_SIZE || file_size > WLK__MAX_SEGMENT_SIZE)
		return WLK_ECORRUPT;
	cmm_smp_rmb();
	if (memcmp(h->magic, WLK_SEG_MAGIC, WLK_SEG_MAGIC_LEN) != 0)
		return WLK_ECORRUPT;
	if (h->layout_version != WLK_LAYOUT_VERSION ||
	    h->abi_sig != WLK_ABI_SIG || h->header_size != WLK_HEADER_SIZE)
		return WLK_EFORMAT;
	if (h->creator_uid != (uint32_t)geteuid())
		return WLK_ESECURITY;
	if (!h->max_chunks ||
	    wlk__geo_compute(h->max_names, h->max_requests, h->max_name_len,
			     h->max_chunks, &g) ||
	    g.size != h->segment_size || g.size != file_size ||
	    g.name_stride != h->name_stride ||
	    g.hash_buckets != h->hash_buckets ||
	    h->max_agents != g.max_agents || h->max_clients != g.max_clients ||
	    h->off_agents != g.off_agents || h->off_clients != g.off_clients ||
	    h->off_names != g.off_names || h->off_requests != g.off_requests ||
	    h->off_hash != g.off_hash || h->off_chunks != g.off_chunks)
		return WLK__SEG_BROKEN;
	b->geo = g;
	memcpy(b->seg_key, h->seg_key, sizeof(b->seg_key));
	return 0;
}

/* Whether this process is in the PID namespace that created the segment. */
bool wlk__same_pidns(const struct wlk_seg_header *h)
{
	uint64_t dev, ino;

	pidns_id(&dev, &ino);
	return (!h->pidns_dev && !h->pidns_ino) ||
	       (dev == h->pidns_dev && ino == h->pidns_ino);
}

