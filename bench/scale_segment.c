/* SPDX-License-Identifier: MIT */
/*
 * scale_segment.c - part 5, the segment: bytes per name and per request at
 * the defaults, measured from the size of the segment file in /dev/shm for
 * buckets of different capacities and computed from lib/format/layout.h; and the
 * cost of wlk_query() with one held entry as the capacity grows. Targets: a
 * default bucket's segment at most 512 KiB; the query in a bucket of 2^17
 * name slots at most 2x the same in a default bucket (O(held + pending),
 * not O(capacity)).
 */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <weblocks.h>

#include "bench.h"
#include "testing.h"

#define SHM_DIR "/dev/shm"
/* Target: a default bucket's segment, in bytes (512 KiB). */
#define SEG_TARGET 524288

struct geo {
	uint32_t names, requests;
	off_t size;	/* measured */
	double query_us;
	struct fig query;
};

#define GEO(n, r) {.names = (n), .requests = (r)}

/* The defaults, then one table doubled at a time, then bigger ones. */
static struct geo geos[] = {
	GEO(WLK_DEFAULT_MAX_NAMES, WLK_DEFAULT_MAX_REQUESTS),
	GEO(2 * WLK_DEFAULT_MAX_NAMES, WLK_DEFAULT_MAX_REQUESTS),
	GEO(WLK_DEFAULT_MAX_NAMES, 2 * WLK_DEFAULT_MAX_REQUESTS),
	GEO(1u << 14, WLK_DEFAULT_MAX_REQUESTS),
	GEO(1u << 17, WLK_DEFAULT_MAX_REQUESTS),
};

#define NGEOS (sizeof(geos) / sizeof(geos[0]))

/*
 * The segment of @origin: its name is a hash, so look for the wlk file
 * whose header holds the origin (unique per run, so no false match).
 */
static off_t segment_size(const char *origin)
{
	DIR *d = opendir(SHM_DIR);
	struct dirent *e;
	off_t size = -1;

	if (!d)
		return -1;
	while (size < 0 && (e = readdir(d))) {
		char path[512], hdr[WLK_HEADER_SIZE];
		struct stat st;
		ssize_t n;
		int fd;

		if (strncmp(e->d_name, "wlk", 3))
			continue;
		snprintf(path, sizeof(path), SHM_DIR "/%s", e->d_name);
		/* Whatever else is there (a FIFO would block an open). */
		fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW);
		if (fd < 0)
			continue;
		if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
			close(fd);
			continue;
		}
		n = read(fd, hdr, sizeof(hdr));
		if (n > 0 && memmem(hdr, (size_t)n, origin, strlen(origin)))
			size = st.st_size;
		close(fd);
	}
	closedir(d);
	return size;
}

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* The computed size of the hash table per name: 2^k >= 2 names. */
static double hash_bytes_per_name(uint32_t names)
{
	uint64_t b = 1;

	while (b < 2ull * names)
		b <<= 1;
	return (double)(b * sizeof(uint32_t)) / names;
}

static void measure(struct geo *g, int idx, int calls)
{
	struct wlk_manager_options o = {
		.max_names = g->names,
		.max_requests = g->requests,
	};
	struct samples s = {0};
	struct wlk_manager *m;
	struct wlk_lock *l;
	char origin[96], tag[32];

	snprintf(tag, sizeof(tag), "p5s%d", idx);
	bench_origin(origin, sizeof(origin), tag);
	check(wlk_manager_open(origin, &o, &m), "open");
	g->size = segment_size(origin);
	check(wlk_acquire(m, "x", 1, NULL, &l), "acquire");
	for (int i = 0; i < calls; i++) {
		struct wlk_snapshot *snap;
		uint64_t t0 = now_ns();

		check(wlk_query(m, &snap), "query");
		wlk_snapshot_free(snap);
		samples_add(&s, (double)(now_ns() - t0) / 1e3);
	}
	fig_add(&g->query, median(s.v, s.n), quantile(s.v, s.n, 0.99));
	samples_free(&s);
	check(wlk_release(l), "release");
	wlk_manager_close(m);
	check(wlk_bucket_remove(origin, NULL), "bucket_remove");
}

static void report(void)
{
	struct geo *d = &geos[0];
	double name_m = (double)(geos[1].size - d->size) / d->names;
	double req_m = (double)(geos[2].size - d->size) / d->requests;
	/* An entry, the default arena's chunk per name, its hash heads. */
	double name_c = (double)sizeof(struct wlk_seg_name) +
			WLK_CHUNK_SIZE + hash_bytes_per_name(d->names);
	double req_c = sizeof(struct wlk_seg_request);
	double fixed_c = WLK_HEADER_SIZE +
			 WLK_MAX_AGENTS * sizeof(struct wlk_seg_agent) +
			 WLK_MAX_CLIENTS * sizeof(struct wlk_seg_client) +
			 WLK_CHUNKS_SPARE * WLK_CHUNK_SIZE;
	struct summary s, big;
	double x;

	s = sum_one(name_m);
	emit_fig("p5.seg.name", "5",
		 "segment bytes per name slot at the defaults (max_name_len "
		 "1024), from /dev/shm file sizes", "bytes", &s);
	s = sum_one(name_c);
	emit_anchor("p5.seg.name", "computed from lib/format/layout.h (entry + "
		    "one arena chunk + hash heads)", "bytes", &s);
	s = sum_one(req_m);
	emit_fig("p5.seg.req", "5",
		 "segment bytes per request slot at the defaults, from "
		 "/dev/shm file sizes", "bytes", &s);
	s = sum_one(req_c);
	emit_anchor("p5.seg.req", "computed from lib/format/layout.h", "bytes", &s);
	s = sum_one((double)d->size);
	emit_fig("p5.seg.size", "5",
		 "segment size at the defaults (1024 names, 4096 requests)",
		 "bytes", &s);
	emit_target("p5.seg.size", "<= 512 KiB (524288 bytes)",
		    d->size <= SEG_TARGET, "%jd bytes = %.2fx 512 KiB",
		    (intmax_t)d->size, (double)d->size / SEG_TARGET);
	s = sum_one(fixed_c + d->names * name_c + d->requests * req_c);
	emit_anchor("p5.seg.size", "computed (header, 256 agents, 1024 "
		    "clients, tables, arena; before page rounding)", "bytes",
		    &s);
	emit_note("a name's bytes cost nothing up to %u bytes (in its "
		  "entry), then %u bytes of arena per %u, whatever "
		  "max_name_len is (%u bytes of arena at a 1000-byte name)",
		  WLK_NAME_INLINE, WLK_CHUNK_SIZE, WLK_CHUNK_TEXT,
		  (unsigned int)(round_up(1000, WLK_CHUNK_TEXT) /
				 WLK_CHUNK_TEXT * WLK_CHUNK_SIZE));
	for (size_t i = 0; i < NGEOS; i++) {
		if (geos[i].requests != WLK_DEFAULT_MAX_REQUESTS)
			continue;
		s = fig_sum(&geos[i].query);
		emit_point("querycap.weblocks", geos[i].names, &s);
	}
	big = fig_sum(&geos[NGEOS - 1].query);
	emit_fig("p5.query.cap", "5",
		 "wlk_query() + free, 1 held entry, bucket of 2^17 name "
		 "slots", "us", &big);
	s = fig_sum(&geos[0].query);
	emit_anchor("p5.query.cap", "the same in a default bucket (1024 "
		    "names)", "us", &s);
	x = big.median / s.median;
	emit_ratio_target("p5.query.cap", "<= 2x the default bucket's", x, 2.0,
			  false);
}

int main(int argc, char **argv)
{
	int calls;

	bench_init(argc, argv, "scale_segment");
	calls = QN(50, 15);
	pin_cpu(0);
	for (int p = 0; p < bopt.passes; p++)
		for (size_t i = 0; i < NGEOS; i++)
			measure(&geos[i], (int)i, calls);
	for (size_t i = 0; i < NGEOS; i++)
		if (geos[i].size <= 0)
			die("segment file of bucket %zu not found", i);
	report();
	bench_fini();
	return 0;
}
