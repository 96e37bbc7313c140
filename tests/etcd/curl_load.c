/* SPDX-License-Identifier: MIT */
/*
 * curl_load.c - libcurl is loaded by the first use of the etcd engine, not
 * with libweblocks (lib/etcd/libcurl.c). Run by tests/etcd/curl-load.sh.
 *
 * usage: curl-load lazy | fake
 *
 * lazy: a process that only uses shared-memory buckets never maps libcurl;
 *       the first wlk_manager_open() of an etcd backend maps it, whatever
 *       its outcome (the backend here is a port nobody listens on).
 * fake: run with a libcurl.so.4 that has none of curl's functions first on
 *       LD_LIBRARY_PATH: opening or removing an etcd bucket fails with
 *       WLK_ENOTSUPPORTED, twice (the failure is remembered), while the
 *       shared-memory engine works.
 *
 * Prints one line per check, "ok" or "FAIL", and exits 1 if any failed.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <weblocks.h>

/* Port 9 (discard): nothing listens on it on a test machine. */
#define NOBODY "etcd://127.0.0.1:9"

static int failed;

static void expect(bool ok, const char *what)
{
	printf("%s: %s\n", ok ? "ok" : "FAIL", what);
	if (!ok)
		failed = 1;
}

/* Whether a libcurl is mapped in this process. */
static bool curl_mapped(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[4096];
	bool found = false;

	if (!f) {
		perror("/proc/self/maps");
		exit(2);
	}
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, "/libcurl") != NULL;
	fclose(f);
	return found;
}

/* Open, lock, unlock and remove a shared-memory bucket. */
static bool shm_works(const char *origin)
{
	struct wlk_manager *m;
	struct wlk_lock *l;
	bool ok;

	if (wlk_manager_open(origin, NULL, &m))
		return false;
	ok = wlk_acquire(m, "x", WLK_NUL_TERMINATED, NULL, &l) == 0 &&
	     wlk_release(l) == 0;
	wlk_manager_close(m);
	return wlk_bucket_remove(origin, NULL) == 0 && ok;
}

static int etcd_open(const char *origin)
{
	struct wlk_manager_options o = {.size = sizeof(o), .backend = NOBODY};
	struct wlk_manager *m;
	int rc = wlk_manager_open(origin, &o, &m);

	if (rc == 0)
		wlk_manager_close(m);
	return rc;
}

static int etcd_remove(const char *origin)
{
	struct wlk_manager_options o = {.size = sizeof(o), .backend = NOBODY};

	return wlk_bucket_remove(origin, &o);
}

int main(int argc, char **argv)
{
	char origin[64];

	if (argc != 2 || (strcmp(argv[1], "lazy") && strcmp(argv[1], "fake"))) {
		fprintf(stderr, "usage: curl-load lazy|fake\n");
		return 2;
	}
	snprintf(origin, sizeof(origin), "https://curl-load-%d.test",
		 (int)getpid());
	/* Nothing to wait for: the backend refuses at once, or not at all. */
	setenv("WEBLOCKS_ETCD_TIMEOUT_MS", "300", 1);
	setenv("WEBLOCKS_ETCD_GUARD", "none", 1);
	if (!strcmp(argv[1], "lazy")) {
		expect(!curl_mapped(), "libcurl not mapped at start");
		expect(shm_works(origin), "the shared-memory engine works");
		expect(!curl_mapped(), "libcurl not mapped after it");
		(void)etcd_open(origin);
		expect(curl_mapped(), "libcurl mapped after an etcd open");
	} else {
		for (int i = 0; i < 2; i++) {
			expect(etcd_open(origin) == WLK_ENOTSUPPORTED,
			       "etcd open: WLK_ENOTSUPPORTED");
			expect(etcd_remove(origin) == WLK_ENOTSUPPORTED,
			       "etcd bucket remove: WLK_ENOTSUPPORTED");
		}
		expect(shm_works(origin), "the shared-memory engine works");
	}
	return failed;
}
