/* SPDX-License-Identifier: MIT */
/*
 * fuzz_segment.c - AFL++ target: what a process does with a bucket segment
 * somebody else scribbled on. Each input patches a copy of a real segment,
 * which is then put where the bucket's segment lives, and the program
 * attaches to it (wlk_manager_open(), with the validation and the
 * poisoning/new-generation path of a new opener), queries it, takes and
 * releases locks in it, and inspects it (weblocks/inspect.h and
 * shm-inspect's text and JSON renderings) before and after.
 *
 * Not part of make check as a fuzzer: tests/fuzz/afl.sh builds it with
 * afl-clang-fast and runs afl-fuzz (see there). make check builds it
 * normally and replays the committed corpus, tests/fuzz/corpus, through it
 * (tests/fuzz/replay.sh): every input must run to the end.
 *
 * usage: fuzz_segment [FILE...]       one input per file (stdin if none),
 *                                     each in a child process
 *        fuzz_segment --seeds DIR     write the seed corpus into DIR
 *        fuzz_segment --cleanup       remove this ID's segments
 *
 * THE INPUT is a list of patches to the seed image, records of
 *
 *     region (1 byte)  offset (2 bytes, little-endian)  length (1 byte)
 *     and that many bytes
 *
 * with the region taken modulo REGIONS: the header, the first agent
 * slots, the first client slots, the name table, the request table, the
 * hash heads, anywhere (offset * 4), or a truncation of the file to
 * (offset modulo its pages) pages, with no bytes. Offsets are taken
 * modulo the region's size and the bytes cut at its end, so every input
 * means something; a last record cut short is ignored. An empty input is
 * the seed itself.
 *
 * THE SEED is made at start-up, in a child process, by three managers of a
 * small bucket (8 names, 32 requests): held locks (one through the fast
 * path), a queue of two, shared holders, a stolen lock, an idle name. Its
 * process has exited by the time the image is used, so its agent's
 * lifeline is made to look held by this (parent) process instead, which
 * outlives every input: the agent is alive, as a real co-tenant would be.
 * The bucket's origin holds an ID (WLK_FUZZ_ID, default the pid), so that
 * two fuzzers never share a segment name.
 *
 * WHAT IS CHECKED: no crash, no sanitizer report, and that every call
 * returns. Two things a patch could legitimately make wait for ever are
 * ruled out, as documented in weblocks.h and inspect.h: a segment mutex
 * that looks held by a live process (its bytes are restored from the seed
 * after patching: without that nearly every input would hang the locked
 * calls, which is the documented behaviour, not a finding), and a blocking
 * request behind a holder that lives (every request here is if_available,
 * a steal, or has a timeout of 1 ns).
 *
 * DETERMINISM: every input runs in a fresh process (AFL++'s fork server
 * after the seed is made; a child per file here), starts by removing
 * whatever an earlier input left, and ends by removing its segments. The
 * clientIds are fixed, and getrandom() is replaced below by a fixed
 * sequence, so segment keys and name hashes are the same on every run.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testing.h"
#include "fuzz_render.h"

#ifndef __AFL_INIT
#define __AFL_INIT() do { } while (0)
#endif

/* The seed bucket's capacities: small, so that inputs are short. */
#define SEED_NAMES 8
#define SEED_REQUESTS 32
#define SEED_NAME_LEN 32
/* Slots of the agent and client tables patches aim at (the rest are free). */
#define PATCH_AGENTS 8
#define PATCH_CLIENTS 8
/* Largest segment the seed may be, and largest input read. */
#define IMAGE_MAX (1u << 20)
#define INPUT_MAX (1u << 16)
#define PAGE 4096u
#define MAX_GENERATIONS 16 /* lib/attach/attach.h WLK_MAX_GENERATIONS */
#define ORIGIN_FMT "https://fuzz-%010u.invalid"
#define ORIGIN_CAP sizeof("https://fuzz-4294967295.invalid")

enum region {
	R_HEADER, R_AGENTS, R_CLIENTS, R_NAMES, R_REQUESTS, R_HASH, R_ANY,
	R_TRUNCATE, R_CHUNKS, REGIONS
};
#define RECORD_HEAD 4 /* region, offset (2), length */
#define ANY_SCALE 4   /* R_ANY offsets are in units of this */

/* What the seed maker hands back, in memory shared with it. */
struct seed {
	char path[128];
	size_t size;
	uint8_t image[IMAGE_MAX];
};

static char origin[ORIGIN_CAP];
static const struct wlk_manager_options mo = {
	.size = sizeof(mo), .client_id = "fuzz", .max_names = SEED_NAMES,
	.max_requests = SEED_REQUESTS, .max_name_len = SEED_NAME_LEN};
static struct seed *seed;
static uint8_t work[IMAGE_MAX];
static FILE *sink;

/* The names of the seed's locks. */
static const char N_QUEUED[] = "a\n\xff"; /* held, two waiters queued */
static const char N_SHARED[] = "b";       /* held shared twice */
static const char N_STOLEN[] = "c";       /* stolen, not yet released */
/* Released: an idle entry, its text in two chunks (layout.h, TEXT). */
static const char N_IDLE[] = "idle-and-longer-than-16-bytes";
/* A scope (weblocks.h, SCOPES) held on "b" (shared) and "s". */
static const struct wlk_name N_SCOPE[] = {{"s", 1}, {"b", 1}};
static const char N_FAST[] = "fast";      /* held through the fast word */

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_segment: %s: %s\n", what, strerror(errno));
	exit(2);
}

/*
 * A fixed byte sequence for every getrandom() in this program (segment
 * keys, doorbell ids): this definition takes the place of the C
 * library's, so that hashes, and with them coverage, are the same on
 * every run.
 */
ssize_t getrandom(void *buf, size_t n, unsigned int flags)
{
	static uint8_t next = 0x5a;
	uint8_t *p = buf;

	(void)flags;
	for (size_t i = 0; i < n; i++)
		p[i] = next++;
	return (ssize_t)n;
}

static size_t pending(struct wlk_manager *m)
{
	struct wlk_snapshot *q = NULL;
	size_t n;

	if (wlk_query(m, &q))
		fail("wlk_query");
	n = wlk_snapshot_pending_count(q);
	wlk_snapshot_free(q);
	return n;
}

struct waiter {
	struct wlk_manager *m;
	struct wlk_options o;
	pthread_t th;
};

/* Queue behind the holder of N_QUEUED, then let go once granted. */
static void *wait_main(void *arg)
{
	struct waiter *w = arg;
	struct wlk_lock *l = NULL;

	if (wlk_acquire(w->m, N_QUEUED, sizeof(N_QUEUED) - 1, &w->o, &l) == 0)
		wlk_release(l);
	return NULL;
}

static void queue_up(struct waiter *w, struct wlk_manager *m,
		     enum wlk_mode mode, size_t n_before)
{
	w->m = m;
	w->o = (struct wlk_options){.size = sizeof(w->o), .mode = mode};
	if (pthread_create(&w->th, NULL, wait_main, w))
		fail("pthread_create");
	while (pending(m) == n_before)
		usleep(1000);
}

static void take(struct wlk_manager *m, const char *name,
		 const struct wlk_options *o, struct wlk_lock **l)
{
	if (wlk_acquire(m, name, WLK_NUL_TERMINATED, o, l) || !*l)
		fail(name);
}

static const struct wlk_seg_header *seed_hdr(void)
{
	return (const struct wlk_seg_header *)seed->image;
}

/* In the child: make the state, copy the file, undo it all. */
static void make_seed(void)
{
	static const struct wlk_options sh = {.size = sizeof(sh),
					      .mode = WLK_SHARED};
	static const struct wlk_options steal = {.size = sizeof(steal),
						 .steal = true};
	static const char *ids[] = {"seed-0", "seed-1", "seed-2"};
	struct wlk_inspect_snapshot *s = NULL;
	struct wlk_manager_options o = mo;
	struct wlk_inspect *in = NULL;
	struct wlk_manager *m[3];
	struct wlk_lock *l[7];
	struct waiter w[2];
	int fd;

	for (int i = 0; i < 3; i++) {
		o.client_id = ids[i];
		if (wlk_manager_open(origin, &o, &m[i]))
			fail("wlk_manager_open");
	}
	take(m[0], N_IDLE, NULL, &l[0]);
	wlk_release(l[0]);
	take(m[0], N_QUEUED, NULL, &l[0]);
	take(m[1], N_SHARED, &sh, &l[1]);
	take(m[2], N_SHARED, &sh, &l[2]);
	take(m[2], N_STOLEN, NULL, &l[3]);
	take(m[0], N_STOLEN, &steal, &l[4]);
	take(m[2], N_FAST, NULL, &l[5]);
	if (wlk_acquire_scope(m[1], N_SCOPE, 2, &sh, &l[6]) || !l[6])
		fail("wlk_acquire_scope");
	queue_up(&w[0], m[1], WLK_EXCLUSIVE, 0);
	queue_up(&w[1], m[2], WLK_SHARED, 1);
	if (wlk_inspect_open(origin, &mo, 0, &in) ||
	    wlk_inspect_snapshot(in, &s))
		fail("wlk_inspect_open");
	snprintf(seed->path, sizeof(seed->path), "%s", s->header.path);
	seed->size = s->header.segment_size;
	fd = open(seed->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || seed->size > IMAGE_MAX)
		fail("opening the seed segment");
	/* A waiter thread may still be inside the critical section: copy
	 * again until the copy shows the mutex free. */
	do {
		usleep(1000);
		if (pread(fd, seed->image, seed->size, 0) !=
		    (ssize_t)seed->size)
			fail("reading the seed segment");
	} while (seed_hdr()->sync.mutex.__data.__lock);
	close(fd);
	wlk_inspect_snapshot_free(s);
	wlk_inspect_close(in);
	for (int i = 6; i >= 0; i--)
		wlk_release(l[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(w[i].th, NULL);
	for (int i = 0; i < 3; i++)
		wlk_manager_close(m[i]);
	if (wlk_bucket_remove(origin, &mo))
		fail("wlk_bucket_remove");
}

/*
 * The seed's agent, and its clients, become this process: its lifeline
 * held by our main thread (which exists for as long as any input runs).
 */
static void adopt_seed(void)
{
	const struct wlk_seg_header *h = seed_hdr();
	uint32_t me = (uint32_t)getpid();

	for (uint32_t i = 0; i < h->max_agents; i++) {
		struct wlk_seg_agent *a = (struct wlk_seg_agent *)(
			seed->image + h->off_agents) + i;
		uint32_t *life = (uint32_t *)&a->u.lifeline.__data.__lock;

		if (WLK_WORD_STATE(a->word) != WLK_SLOT_USED)
			continue;
		*life = (*life & ~(uint32_t)FUTEX_TID_MASK) | me;
		a->pid = me;
	}
	for (uint32_t i = 0; i < h->max_clients; i++) {
		struct wlk_seg_client *c = (struct wlk_seg_client *)(
			seed->image + h->off_clients) + i;

		if (WLK_WORD_STATE(c->word) == WLK_SLOT_USED)
			c->pid = me;
	}
}

static void build_seed(void)
{
	pid_t pid;
	int st;

	seed = mmap(NULL, sizeof(*seed), PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (seed == MAP_FAILED)
		fail("mmap");
	pid = fork();
	if (pid < 0)
		fail("fork");
	if (pid == 0) {
		make_seed();
		_exit(0);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0 || !seed->size) {
		fprintf(stderr, "fuzz_segment: making the seed failed\n");
		exit(2);
	}
	adopt_seed();
}

/* Remove every generation of the fuzzed bucket's segment. */
static void remove_segments(void)
{
	char name[sizeof(seed->path) + 8];

	for (unsigned int g = 0; g < MAX_GENERATIONS; g++) {
		if (g)
			snprintf(name, sizeof(name), "%s~%u", seed->path, g);
		else
			snprintf(name, sizeof(name), "%s", seed->path);
		unlink(name);
	}
}

/* Where region @r starts in the image and how long it is. */
static void region_of(unsigned int r, size_t *off, size_t *len)
{
	const struct wlk_seg_header *h = seed_hdr();

	switch (r) {
	case R_HEADER:
		*off = 0;
		*len = WLK_HEADER_SIZE;
		break;
	case R_AGENTS:
		*off = h->off_agents;
		*len = PATCH_AGENTS * sizeof(struct wlk_seg_agent);
		break;
	case R_CLIENTS:
		*off = h->off_clients;
		*len = PATCH_CLIENTS * sizeof(struct wlk_seg_client);
		break;
	case R_NAMES:
		*off = h->off_names;
		*len = h->off_requests - h->off_names;
		break;
	case R_REQUESTS:
		*off = h->off_requests;
		*len = h->off_hash - h->off_requests;
		break;
	case R_HASH:
		*off = h->off_hash;
		*len = h->hash_buckets * sizeof(uint32_t);
		break;
	case R_CHUNKS:
		*off = h->off_chunks;
		*len = h->max_chunks * sizeof(struct wlk_seg_chunk);
		break;
	default:
		*off = 0;
		*len = seed->size;
		break;
	}
}

/* The seed patched by @data into work[]; returns the file's length. */
static size_t patch(const uint8_t *data, size_t size)
{
	size_t n = seed->size;

	memcpy(work, seed->image, seed->size);
	while (size >= RECORD_HEAD) {
		unsigned int r = data[0] % REGIONS;
		size_t off = (size_t)data[1] | (size_t)data[2] << 8;
		size_t len = data[3], start, cap;

		data += RECORD_HEAD;
		size -= RECORD_HEAD;
		if (r == R_TRUNCATE) {
			n = off % (seed->size / PAGE) * PAGE;
			continue;
		}
		if (len > size)
			break;
		region_of(r, &start, &cap);
		off = r == R_ANY ? off * ANY_SCALE % cap : off % cap;
		memcpy(work + start + off, data, len < cap - off ? len : cap - off);
		data += len;
		size -= len;
	}
	/* A mutex that looks held would make the locked calls wait: see top. */
	memcpy(work + offsetof(struct wlk_seg_header, sync),
	       seed->image + offsetof(struct wlk_seg_header, sync),
	       sizeof(seed_hdr()->sync));
	return n;
}

static void inspect_path(unsigned int flags)
{
	struct wlk_inspect *in = NULL;

	if (!wlk_inspect_open_segment(seed->path, flags, &in))
		fuzz_render(in, sink);
}

static void inspect_bucket(void)
{
	struct wlk_inspect *in = NULL;

	if (!wlk_inspect_open(origin, &mo, WLK_INSPECT_LOCKED, &in))
		fuzz_render(in, sink);
}

/* Read every entry of a query, so that a bad one is noticed. */
static void query(struct wlk_manager *m)
{
	struct wlk_snapshot *q = NULL;
	size_t sum = 0;
	int rc = wlk_query(m, &q);

	if (rc) {
		fprintf(sink, "query: %d\n", rc);
		return;
	}
	for (size_t i = 0; i < wlk_snapshot_held_count(q); i++) {
		const struct wlk_lock_info *e = wlk_snapshot_held(q, i);

		esc_c(sink, e->name, e->name_len);
		sum += strlen(e->client_id) + (size_t)e->pid + e->mode;
	}
	for (size_t i = 0; i < wlk_snapshot_pending_count(q); i++) {
		const struct wlk_lock_info *e = wlk_snapshot_pending(q, i);

		esc_c(sink, e->name, e->name_len);
		sum += strlen(e->client_id) + (size_t)e->pid + e->mode;
	}
	fprintf(sink, "query: %zu held, %zu pending, %zu\n",
		wlk_snapshot_held_count(q), wlk_snapshot_pending_count(q), sum);
	wlk_snapshot_free(q);
}

/* Scopes that never wait: if_available both ways, and a steal. */
static void scopes(struct wlk_manager *m)
{
	static const struct wlk_name sb[] = {{"s", 1}, {"b", 1}, {"new", 3}};
	static const struct wlk_options o[] = {
		{.size = sizeof(o[0]), .if_available = true},
		{.size = sizeof(o[0]), .mode = WLK_SHARED, .if_available = true},
		{.size = sizeof(o[0]), .steal = true},
	};

	for (size_t i = 0; i < sizeof(o) / sizeof(o[0]); i++) {
		struct wlk_lock *l = NULL;
		int rc = wlk_acquire_scope(m, sb, 3, &o[i], &l);

		fprintf(sink, "scope %zu: %d\n", i, rc);
		if (!rc && l)
			fprintf(sink, "release scope %zu: %d\n", i,
				wlk_release(l));
	}
}

/* Requests that never wait for another holder (see top), then releases. */
static void requests(struct wlk_manager *m)
{
#define OPT(...) {.size = sizeof(struct wlk_options), __VA_ARGS__}
	static const struct wlk_options avail = OPT(.if_available = true);
	static const struct wlk_options avail_sh = OPT(.mode = WLK_SHARED,
						       .if_available = true);
	static const struct wlk_options steal = OPT(.steal = true);
	static const struct wlk_options brief = OPT(.timeout_ns = 1);
	static const struct wlk_options brief_sh = OPT(.mode = WLK_SHARED,
						       .timeout_ns = 1);
#undef OPT
	static const struct {
		const char *name;
		const struct wlk_options *o;
	} rq[] = {
		{N_QUEUED, &avail}, {N_SHARED, &avail_sh}, {N_SHARED, &brief},
		{N_FAST, &brief_sh}, {N_IDLE, &brief}, {"new", &brief},
		{"new", &avail_sh}, {N_STOLEN, &steal}, {N_QUEUED, &steal},
		{"other", &brief_sh},
	};
	struct wlk_lock *l[sizeof(rq) / sizeof(rq[0])] = {NULL};
	size_t n = sizeof(rq) / sizeof(rq[0]);

	for (size_t i = 0; i < n; i++) {
		int rc = wlk_acquire(m, rq[i].name, WLK_NUL_TERMINATED,
				     rq[i].o, &l[i]);

		fprintf(sink, "acquire %zu: %d\n", i, rc);
		if (rc)
			l[i] = NULL;
	}
	scopes(m);
	for (size_t i = n; i-- > 0;) {
		bool stolen;
		uint64_t token;

		if (!l[i])
			continue;
		stolen = wlk_lock_stolen(l[i]);
		token = wlk_lock_token(l[i]);
		fprintf(sink, "release %zu: %d stolen %d token %llu\n", i,
			wlk_release(l[i]), stolen,
			(unsigned long long)token);
	}
}

/* One input, from start to end; in a process of its own. */
static void run_one(const uint8_t *data, size_t size)
{
	struct flock attached = {.l_type = F_RDLCK, .l_whence = SEEK_SET,
				 .l_start = WLK_LOCK_ATTACH, .l_len = 1};
	struct wlk_manager *m = NULL;
	size_t n = patch(data, size);
	int fd, rc;

	remove_segments();
	fd = open(seed->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, work, n) != (ssize_t)n)
		fail(seed->path);
	/*
	 * This descriptor is the segment's other user: with the attach lock
	 * held shared, the opener must validate what is there instead of
	 * re-initialising it.
	 */
	if (fcntl(fd, F_OFD_SETLK, &attached) < 0)
		fail("F_OFD_SETLK");
	inspect_path(0);
	rc = wlk_manager_open(origin, &mo, &m);
	fprintf(sink, "open: %d\n", rc);
	if (!rc) {
		query(m);
		(void)wlk_manager_validate(m, fuzz_on_violation, sink);
		requests(m);
		query(m);
	}
	inspect_path(WLK_INSPECT_LOCKED);
	inspect_bucket();
	wlk_manager_close(m);
	close(fd);
	remove_segments();
}

static size_t read_all(int fd, uint8_t *buf, size_t cap)
{
	size_t n = 0;
	ssize_t r;

	while (n < cap && (r = read(fd, buf + n, cap - n)) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			fail("read");
		n += (size_t)r;
	}
	return n;
}

static int run_file(const char *file)
{
	static uint8_t buf[INPUT_MAX];
	int fd = file ? open(file, O_RDONLY | O_CLOEXEC) : 0;

	if (fd < 0)
		fail(file);
	run_one(buf, read_all(fd, buf, sizeof(buf)));
	return 0;
}

/* Each file in a child of its own, as under AFL++; 1 if any failed. */
static int replay(int argc, char **argv)
{
	int bad = 0;

	for (int i = 1; i < argc; i++) {
		pid_t pid = fork();
		int st;

		if (pid < 0)
			fail("fork");
		if (pid == 0)
			_exit(run_file(argv[i]));
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st)) {
			fprintf(stderr, "fuzz_segment: %s: status %#x\n",
				argv[i], (unsigned int)st);
			bad = 1;
			remove_segments();
		}
	}
	return bad;
}

static void put_seed(const char *dir, const char *name, const void *p,
		     size_t n)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f))
		fail(path);
}

/* One record writing @len bytes of @v at @off of region @r. */
static size_t record(uint8_t *out, enum region r, size_t off, const void *v,
		     size_t len)
{
	out[0] = (uint8_t)r;
	out[1] = (uint8_t)off;
	out[2] = (uint8_t)(off >> 8);
	out[3] = (uint8_t)len;
	if (len)
		memcpy(out + RECORD_HEAD, v, len);
	return RECORD_HEAD + len;
}

#define REC(buf, n, r, off, v) (n += record(buf + n, r, off, &(v), sizeof(v)))

/* The starting corpus: the seed, and a patch of each kind of field. */
static void write_seeds(const char *dir)
{
	const uint32_t nil = WLK_NIL, zero = 0, one = 1, big = 0x7fffffff;
	const uint32_t poisoned = WLK_SEG_POISONED, odd = 7;
	const uint64_t huge = UINT64_MAX - 1;
	size_t req = sizeof(struct wlk_seg_request);
	size_t name = seed_hdr()->name_stride;
	size_t chunk = sizeof(struct wlk_seg_chunk);
	uint8_t b[256];
	size_t n;

	put_seed(dir, "empty", "", 0);
	n = 0, REC(b, n, R_HEADER, offsetof(struct wlk_seg_header, max_names),
		   big);
	put_seed(dir, "geometry", b, n);
	n = 0, REC(b, n, R_HEADER, offsetof(struct wlk_seg_header, seg_state),
		   poisoned);
	put_seed(dir, "poisoned", b, n);
	n = 0, REC(b, n, R_HEADER, offsetof(struct wlk_seg_header, seg_state),
		   odd);
	put_seed(dir, "seg-state", b, n);
	n = 0, REC(b, n, R_HEADER,
		   offsetof(struct wlk_seg_header, needs_repair), one);
	put_seed(dir, "needs-repair", b, n);
	n = 0, REC(b, n, R_HEADER, offsetof(struct wlk_seg_header, n_requests),
		   big);
	REC(b, n, R_HEADER, offsetof(struct wlk_seg_header, name_bytes), huge);
	put_seed(dir, "counters", b, n);
	n = 0, REC(b, n, R_HEADER, offsetof(struct wlk_seg_header, free_names),
		   big);
	REC(b, n, R_HEADER, offsetof(struct wlk_seg_header, idle_head), big);
	REC(b, n, R_HEADER, offsetof(struct wlk_seg_header, busy_head), big);
	put_seed(dir, "free-lists", b, n);
	n = 0, REC(b, n, R_NAMES, offsetof(struct wlk_seg_name, list), odd);
	REC(b, n, R_NAMES, name + offsetof(struct wlk_seg_name, list_next),
	    big);
	put_seed(dir, "name-lists", b, n);
	n = 0, REC(b, n, R_AGENTS, 0, zero);
	put_seed(dir, "agent-dead", b, n);
	n = 0, REC(b, n, R_CLIENTS, offsetof(struct wlk_seg_client, agent),
		   big);
	put_seed(dir, "client-agent", b, n);
	n = 0, REC(b, n, R_NAMES, offsetof(struct wlk_seg_name, word), odd);
	REC(b, n, R_NAMES, name + offsetof(struct wlk_seg_name, word), zero);
	put_seed(dir, "name-state", b, n);
	n = 0, REC(b, n, R_NAMES, offsetof(struct wlk_seg_name, len), big);
	put_seed(dir, "name-len", b, n);
	n = 0, REC(b, n, R_NAMES, offsetof(struct wlk_seg_name, fast), huge);
	put_seed(dir, "name-fast", b, n);
	n = 0, REC(b, n, R_NAMES, offsetof(struct wlk_seg_name, q_head), big);
	REC(b, n, R_NAMES, name + offsetof(struct wlk_seg_name, h_head), one);
	put_seed(dir, "name-links", b, n);
	n = 0, REC(b, n, R_REQUESTS, offsetof(struct wlk_seg_request, word),
		   odd);
	REC(b, n, R_REQUESTS, req + offsetof(struct wlk_seg_request, word),
	    zero);
	put_seed(dir, "request-state", b, n);
	n = 0, REC(b, n, R_REQUESTS, offsetof(struct wlk_seg_request, name),
		   big);
	REC(b, n, R_REQUESTS, req + offsetof(struct wlk_seg_request, client),
	    big);
	put_seed(dir, "request-refs", b, n);
	n = 0, REC(b, n, R_REQUESTS, offsetof(struct wlk_seg_request, next),
		   one);
	REC(b, n, R_REQUESTS, req + offsetof(struct wlk_seg_request, prev),
	    nil);
	put_seed(dir, "request-links", b, n);
	n = 0, REC(b, n, R_HASH, 0, one);
	put_seed(dir, "hash-head", b, n);
	n = record(b, R_TRUNCATE, 3, NULL, 0);
	put_seed(dir, "truncated", b, n);
	n = 0, REC(b, n, R_CHUNKS, offsetof(struct wlk_seg_chunk, next), big);
	REC(b, n, R_CHUNKS, chunk + offsetof(struct wlk_seg_chunk, next),
	    zero);
	put_seed(dir, "chunk-links", b, n);
	n = 0, REC(b, n, R_CLIENTS, offsetof(struct wlk_seg_client, id), big);
	REC(b, n, R_NAMES, offsetof(struct wlk_seg_name, chunk), one);
	put_seed(dir, "text-refs", b, n);
}

int main(int argc, char **argv)
{
	const char *id = getenv("WLK_FUZZ_ID");
	unsigned long v = id ? strtoul(id, NULL, 10) : (unsigned long)getpid();

	snprintf(origin, sizeof(origin), ORIGIN_FMT, (unsigned int)v);
	/* WLK_FUZZ_VERBOSE=1 shows what the calls returned and rendered. */
	sink = getenv("WLK_FUZZ_VERBOSE") ? stderr : fopen("/dev/null", "w");
	if (!sink)
		fail("/dev/null");
	build_seed();
	if (argc == 2 && !strcmp(argv[1], "--cleanup")) {
		remove_segments();
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "--seeds")) {
		write_seeds(argv[2]);
		return 0;
	}
	if (argc > 1)
		return replay(argc, argv);
	/* Under AFL++ the fork server starts here: the seed is made once. */
	__AFL_INIT();
	return run_file(NULL);
}
