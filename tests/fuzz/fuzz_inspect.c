/* SPDX-License-Identifier: MIT */
/*
 * fuzz_inspect.c - libFuzzer target: the inspection API and shm-inspect's
 * renderings on patched copies of a real segment.
 *
 * Not part of make check. Build and run (clang with libFuzzer, from a
 * configured build directory for config.h):
 *
 *     tests/fuzz/run.sh [BUILDDIR [SECONDS]]
 *
 * which compiles the library, tools/{render,text,json}.c and this file with
 * -fsanitize=fuzzer,address,undefined and fuzzes for SECONDS (default 60),
 * keeping its corpus in BUILDDIR/fuzz-corpus.
 *
 * A random segment is almost never a segment (the header check refuses
 * it at once), so the input is a list of patches to a valid one made at
 * start-up: records of a 4-byte offset, a length byte and that many bytes.
 * A first byte with the top bit set also truncates the copy, to its low
 * bits times 4 KiB. What is checked: no crash, no sanitizer report, and
 * every call returns (the unlocked calls only: a patched mutex could make
 * a locked one wait forever, as documented).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_render.h"

static char path[128];
static char *seed;
static size_t seed_size;
static char *work;
static FILE *sink;

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_inspect: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Queue behind the holder of "a\n\xff", then let go once granted. */
static void *waiter(void *arg)
{
	struct wlk_lock *l = NULL;

	if (wlk_acquire(arg, "a\n\xff", 3, NULL, &l) == 0)
		wlk_release(l);
	return NULL;
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

/* A real segment with held, shared and pending requests, copied. */
static void make_seed(void)
{
	static const struct wlk_manager_options o = {
		.max_names = 16, .max_requests = 32, .max_name_len = 64};
	static const struct wlk_options sh = {.mode = WLK_SHARED};
	const char *origin = "https://fuzz-inspect.invalid";
	struct wlk_inspect_snapshot *s = NULL;
	struct wlk_manager *m[3];
	struct wlk_inspect *in = NULL;
	struct wlk_lock *l[3];
	pthread_t th;
	int fd;

	for (int i = 0; i < 3; i++)
		if (wlk_manager_open(origin, &o, &m[i]))
			fail("wlk_manager_open");
	if (wlk_acquire(m[0], "a\n\xff", 3, NULL, &l[0]) ||
	    wlk_acquire(m[1], "b", 1, &sh, &l[1]) ||
	    wlk_acquire(m[2], "b", 1, &sh, &l[2]))
		fail("wlk_acquire");
	if (pthread_create(&th, NULL, waiter, m[1]))
		fail("pthread_create");
	while (pending(m[0]) == 0)
		usleep(1000);
	if (wlk_inspect_open(origin, &o, 0, &in) ||
	    wlk_inspect_snapshot(in, &s))
		fail("wlk_inspect_open");
	fd = open(s->header.path, O_RDONLY);
	seed_size = s->header.segment_size;
	seed = malloc(seed_size);
	work = malloc(seed_size);
	if (fd < 0 || !seed || !work ||
	    pread(fd, seed, seed_size, 0) != (ssize_t)seed_size)
		fail("reading the seed segment");
	close(fd);
	wlk_inspect_snapshot_free(s);
	wlk_inspect_close(in);
	for (int i = 0; i < 3; i++)
		wlk_release(l[i]);
	pthread_join(th, NULL);
	for (int i = 0; i < 3; i++)
		wlk_manager_close(m[i]);
	wlk_bucket_remove(origin, &o);
}

static void cleanup(void)
{
	unlink(path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	make_seed();
	snprintf(path, sizeof(path), "/dev/shm/wlk1-%u-f022%08x%020u",
		 (unsigned int)geteuid(), (unsigned int)getpid(), 0u);
	atexit(cleanup);
	sink = fopen("/dev/null", "w");
	if (!sink)
		fail("/dev/null");
	return 0;
}

/* The copy of @n bytes, patched by @data; its length. */
static size_t patch(const uint8_t *data, size_t size)
{
	size_t n = seed_size;

	memcpy(work, seed, seed_size);
	if (size && data[0] & 0x80) {
		n = (size_t)(data[0] & 0x7f) * 4096;
		if (n > seed_size)
			n = seed_size;
		data++;
		size--;
	}
	while (size >= 5) {
		uint32_t off;
		size_t len = data[4];

		memcpy(&off, data, 4);
		data += 5;
		size -= 5;
		if (len > size)
			len = size;
		off %= (uint32_t)seed_size;
		if (len > seed_size - off)
			len = seed_size - off;
		memcpy(work + off, data, len);
		data += len;
		size -= len;
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wlk_inspect *in = NULL;
	size_t n = patch(data, size);
	int fd;

	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, work, n) != (ssize_t)n)
		fail(path);
	close(fd);
	if (wlk_inspect_open_segment(path, 0, &in))
		return 0;
	fuzz_render(in, sink);
	return 0;
}
