/* SPDX-License-Identifier: MIT */
/* common.c - fixtures, query, pipe, thread and fork helpers for the tests. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "common.h"
#include "weblocks/async.h"
#include "weblocks/inspect.h"

#define T_MAX_TRACKED 64

/*
 * LeakSanitizer asks this at exit. Criterion's runner process leaks a
 * timeout-watchdog entry when tests run in parallel; it runs no test code,
 * so check only the processes that ran a test (t_init() sets the flag).
 */
static bool t_in_test;

/* Under LeakSanitizer, t_fini() fails a test that leaked. */
int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

int __lsan_is_turned_off(void) __attribute__((visibility("default"), used));
int __lsan_is_turned_off(void)
{
	return !t_in_test;
}

void t_exit_leaking(int status)
{
	t_in_test = false;
	exit(status);
}

char t_origin[256];

static unsigned int t_counter;

static struct wlk_manager *t_managers[T_MAX_TRACKED];
static pid_t t_children[T_MAX_TRACKED];

struct t_bucket {
	char *origin;
	char *bucket;
	char *partition;
};
static struct t_bucket t_buckets[T_MAX_TRACKED];
static size_t t_nbuckets;
static char *t_files[T_MAX_TRACKED];
static size_t t_nfiles;

static void t_sanitize(char *dst, size_t size, const char *src)
{
	size_t i = 0;

	for (; src && *src && i + 1 < size; src++) {
		char c = *src;

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
			c = '-';
		dst[i++] = c;
	}
	dst[i] = '\0';
}

void t_make_origin(char *buf, size_t size, const char *tag)
{
	const struct criterion_test *t = criterion_current_test;
	char suite[48], name[96], stag[32];

	t_sanitize(suite, sizeof(suite), t ? t->category : "nosuite");
	t_sanitize(name, sizeof(name), t ? t->name : "notest");
	t_sanitize(stag, sizeof(stag), tag ? tag : "");
	snprintf(buf, size, "https://t-%d-%u-%s-%s%s%s.example", (int)getpid(),
		 ++t_counter, suite, name, tag ? "-" : "", stag);
}

static char *t_strdup_or_null(const char *s)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	cr_assert_not_null(d, "out of memory");
	return d;
}

void t_track_bucket(const char *origin, const char *bucket,
		    const char *partition)
{
	struct t_bucket *b;

	cr_assert_lt(t_nbuckets, T_MAX_TRACKED, "too many tracked buckets");
	b = &t_buckets[t_nbuckets++];
	b->origin = t_strdup_or_null(origin);
	b->bucket = t_strdup_or_null(bucket);
	b->partition = t_strdup_or_null(partition);
}

void t_track_file(const char *path)
{
	cr_assert_lt(t_nfiles, T_MAX_TRACKED, "too many tracked files");
	t_files[t_nfiles++] = t_strdup_or_null(path);
}

bool t_on_etcd(void)
{
	const char *b = getenv("WEBLOCKS_BACKEND");

	return b && !strncmp(b, "etcd://", 7);
}

/* Whether each of @l[0..@n) is seen stolen now. */
static bool all_stolen(struct wlk_lock *const *l, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		if (!wlk_lock_stolen(l[i]))
			return false;
	return true;
}

bool t_stolen_within(struct wlk_lock *const *l, unsigned int n,
		     unsigned int ms)
{
	for (unsigned int i = 0; i < ms && !all_stolen(l, n); i++)
		t_nap_ms(1);
	return all_stolen(l, n);
}

bool t_stolen(struct wlk_lock *l)
{
	return t_stolen_within(&l, 1, t_on_etcd() ? T_WAIT_MS : 0);
}

/* Tests that do not apply on etcd: "suite" or "suite::prefix" of names. */
static const struct {
	const char *test, *why;
} t_shm_only[] = {
	{ "abi::inspect", "inspects a shared-memory segment" },
	{ "doorbell", "a shared-memory client's doorbell" },
	{ "fast", "the shared-memory fast path" },
	{ "pins", "the shared-memory fast path's lanes, seen through the "
	  "segment file's removal" },
	{ "fastwait", "the shared-memory fast path" },
	{ "hotpath", "counts the shared-memory fast path's system calls" },
	{ "scope::a_scope_that_does_not_fit", "the segment's name table "
	  "(etcd has no tables)" },
	{ "scope::close_grants_none_of_its_own", "tokens are etcd revisions, "
	  "not consecutive (on etcd the close is one revision)" },
	{ "scope_mp::a_granter_dying", "fail points inside the segment's "
	  "critical sections" },
	{ "scope_mp::a_stealer_dying", "fail points inside the segment's "
	  "critical sections" },
	{ "scope_mp::a_waiter_sees_the_death",
	  "a dead process's locks go with its lease, after its TTL, beyond "
	  "the test's 500 ms (tests/etcd/faults.c tests a scope's)" },
	{ "manager::segment", "the segment file" },
	{ "manager::bucket_remove_after_close", "the segment file" },
	{ "manager::opening_a_0660", "the segment file's permissions" },
	{ "manager::second_manager_asking", "the segment file's permissions" },
	{ "manager::non_regular_file", "the segment file" },
	{ "manager::corrupt_segment", "damages the segment" },
	{ "manager::managers_of_one_bucket_share", "the segment's mapping" },
	{ "manager::cancelling_an_open", "the segment's init lock" },
	{ "manager::request_dropped_by_a_repair", "damages the segment" },
	{ "manager::close_aborts", "tokens are etcd revisions, not consecutive; "
	  "the etcd run's own tests check the order" },
	{ "query::damaged", "damages the segment" },
	{ "query::freeze_word", "the segment's freeze word" },
	{ "queue::full_", "the segment's table sizes (etcd has no tables)" },
	{ "broadcast", "the shared-memory engine's futex broadcast" },
	{ "coldstart", "creating the segment" },
	{ "damaged", "damages the segment" },
	{ "deep", "the shared-memory engine's watch of the processes ahead "
	  "in a queue (lib/repair/reap.c)" },
	{ "deadlock_mp::a_dead_process_leaves_no_cycle",
	  "a dead process's locks and requests stay until its lease's TTL: "
	  "until then its cycle is one" },
	{ "failpoints", "fail points inside the segment's critical sections" },
	{ "poison", "damages the segment" },
	{ "stopped", "a process stopped inside the segment's mutex" },
	{ "slice", "the shared-memory engine's blocked waiter (etcd's sleeps "
	  "on its watch; lib/sys/slice.c)" },
	{ "fast_mp", "the shared-memory fast path" },
	{ "async_mp::holder_exec",
	  "an exec'd holder's locks go with its lease, after its TTL, "
	  "beyond the test's 1 s" },
	{ "death::many_dead_holders",
	  "a dead process's locks go with its lease, after its TTL, not "
	  "at the next open (death::killed_* test that)" },
	{ "death::killed_stolen_holder",
	  "the segment's request table filled" },
	{ "death::killed_process_with_several_managers",
	  "reads the segment's repair count" },
	{ "death::killed_processes_are_not_in_the_next_query",
	  "a dead process's locks go with its lease (revoked by its guard), "
	  "which a query does not wait for" },
	{ "death::client_table_full_of_the_dead",
	  "the segment's client table filled" },
	{ "death::open_from_another_pid_namespace",
	  "PID namespaces limit the shared-memory engine only" },
	{ "mp_query::snapshot_is_atomic_across_names",
	  "fills the segment's name table to slow its copy down" },
	{ "text::default_bucket", "the segment's size" },
	{ "text::arena_bytes", "the segment's arena (etcd ignores the option)" },
	{ "text::smallest_arena", "the segment's arena" },
	{ "text::a_full_arena", "the segment's arena" },
};

/* Skip the current test on etcd if the table says so. */
static void t_skip_if_shm_only(void)
{
	const struct criterion_test *t = criterion_current_test;
	char full[256];

	if (!t || !t_on_etcd())
		return;
	snprintf(full, sizeof(full), "%s::%s", t->category, t->name);
	for (size_t i = 0; i < sizeof(t_shm_only) / sizeof(t_shm_only[0]);
	     i++) {
		const char *p = t_shm_only[i].test;
		size_t n = strlen(p);

		if (!strncmp(full, p, n) &&
		    (strchr(p, ':') || full[n] == ':'))
			cr_skip_test("on etcd: %s", t_shm_only[i].why);
	}
}

void t_init(void)
{
	t_skip_if_shm_only();
	t_in_test = true;
	t_make_origin(t_origin, sizeof(t_origin), NULL);
	t_track_bucket(t_origin, NULL, NULL);
}

/*
 * After a failed test something may still use a bucket (a thread stuck in
 * a call), so wlk_bucket_remove() says -EBUSY. The segments this process
 * maps are then this test's own (its origins are unique): unlink them so
 * that failures leave nothing behind in /dev/shm. Criterion's own shared
 * memory ("bxfi_*") is left alone.
 */
static void t_unlink_mapped_segments(void)
{
	char line[1024];
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, " /dev/shm/");
		size_t n;

		if (!p || strstr(line, "(deleted)"))
			continue;
		p++;
		n = strcspn(p, "\n");
		p[n] = '\0';
		if (strncmp(p, "/dev/shm/bxfi", 13) != 0)
			(void)unlink(p);
	}
	fclose(f);
}

/* Name on stderr the processes that have @path open (for the log). */
static void t_report_holders(const char *path)
{
	DIR *d = opendir("/proc");
	struct dirent *e;

	while (d && (e = readdir(d))) {
		char dir[300], link[600], to[256];
		DIR *fds;
		struct dirent *f;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(dir, sizeof(dir), "/proc/%s/fd", e->d_name);
		fds = opendir(dir);
		while (fds && (f = readdir(fds))) {
			ssize_t n;

			snprintf(link, sizeof(link), "%s/%s", dir, f->d_name);
			n = readlink(link, to, sizeof(to) - 1);
			if (n <= 0)
				continue;
			to[n] = '\0';
			if (!strcmp(to, path))
				fprintf(stderr, "t_fini: %s is open in pid %s "
					"(fd %s)\n", path, e->d_name,
					f->d_name);
		}
		if (fds)
			closedir(fds);
	}
	if (d)
		closedir(d);
}

/*
 * A bucket the test is done with that some process still has open (after
 * every manager of this one was closed): say who, for the log, and unlink
 * its segment, which is this test's alone (its origin is unique), so that
 * nothing is left in /dev/shm.
 */
static void t_remove_busy(const char *origin,
			  const struct wlk_manager_options *o)
{
	struct wlk_inspect_snapshot *s = NULL;
	struct wlk_inspect *in = NULL;

	if (wlk_inspect_open(origin, o, 0, &in))
		return;
	if (!wlk_inspect_snapshot(in, &s)) {
		fprintf(stderr, "t_fini: %s: bucket busy after the test\n",
			origin);
		t_report_holders(s->header.path);
		(void)unlink(s->header.path);
		wlk_inspect_snapshot_free(s);
	}
	wlk_inspect_close(in);
}

/* The /dev/shm path of the first weblocks segment this process maps. */
bool t_mapped_segment(char *path, size_t size)
{
	char line[1024];
	FILE *f = fopen("/proc/self/maps", "r");
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "/dev/shm/wlk");

		if (p) {
			p[strcspn(p, " \n")] = '\0';
			snprintf(path, size, "%s", p);
			found = true;
		}
	}
	fclose(f);
	return found;
}

void *t_map_file(const char *path, size_t *size)
{
	struct stat st;
	void *map;
	int fd = open(path, O_RDWR | O_CLOEXEC);

	cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
	cr_assert_eq(fstat(fd, &st), 0);
	*size = (size_t)st.st_size;
	map = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(map, MAP_FAILED, "mmap: %s", strerror(errno));
	close(fd);
	return map;
}

void *t_segment_map(size_t *size)
{
	struct wlk_inspect_snapshot *s = NULL;
	struct wlk_inspect *in = NULL;
	void *map;
	int rc;

	rc = wlk_inspect_open(t_origin, NULL, 0, &in);
	cr_assert_eq(rc, 0, "wlk_inspect_open: %s", t_ename(rc));
	rc = wlk_inspect_snapshot(in, &s);
	cr_assert_eq(rc, 0, "wlk_inspect_snapshot: %s", t_ename(rc));
	map = t_map_file(s->header.path, size);
	wlk_inspect_snapshot_free(s);
	wlk_inspect_close(in);
	return map;
}

/*
 * A child for t_fork(): open t_origin's bucket when told ('o' on p[1]),
 * take "z", say so ('h' on p[0]), and let go and close when told ('r').
 */
int t_newcomer(void *arg)
{
	struct t_pipe *p = arg;
	struct wlk_manager *m;
	struct wlk_lock *l;
	int rc;

	T_CHILD_CHECK(t_get_byte(p[1].rd) == 'o', 7);
	rc = wlk_manager_open(t_origin, NULL, &m);
	T_CHILD_CHECK(rc == 0, 1);
	rc = wlk_acquire(m, "z", 1, NULL, &l);
	T_CHILD_CHECK(rc == 0, 2);
	T_CHILD_CHECK(wlk_manager_validate(m, NULL, NULL) == 0, 3);
	T_CHILD_CHECK(t_put_byte(p[0].wr, 'h') == 0, 4);
	T_CHILD_CHECK(t_get_byte(p[1].rd) == 'r', 5);
	T_CHILD_CHECK(wlk_release(l) == 0, 6);
	wlk_manager_close(m);
	return 0;
}

int t_stealer(void *arg)
{
	const char *name = arg;
	struct wlk_options o = { .size = sizeof(o), .steal = true };
	struct wlk_manager *m;
	struct wlk_lock *l = NULL;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 1);
	T_CHILD_CHECK(wlk_acquire(m, name, WLK_NUL_TERMINATED, &o, &l) == 0,
		      2);
	T_CHILD_CHECK(wlk_release(l) == 0, 3);
	wlk_manager_close(m);
	return 0;
}

size_t t_entries_of(struct wlk_manager *m, pid_t pid)
{
	struct wlk_snapshot *s = NULL;
	size_t i, c = 0;

	if (wlk_query(m, &s) != 0)
		return SIZE_MAX;
	for (i = 0; i < wlk_snapshot_held_count(s); i++)
		if (wlk_snapshot_held(s, i)->pid == pid)
			c++;
	for (i = 0; i < wlk_snapshot_pending_count(s); i++)
		if (wlk_snapshot_pending(s, i)->pid == pid)
			c++;
	wlk_snapshot_free(s);
	return c;
}

int t_dispatch_ready(struct wlk_manager *m)
{
	int n = 0, rc;

	while (t_readable(wlk_manager_fd(m))) {
		rc = wlk_manager_dispatch(m);
		if (rc < 0)
			return rc;
		n += rc;
	}
	return n;
}

bool t_pump(struct wlk_manager *m, atomic_int *calls, int want, int ms)
{
	int fd = wlk_manager_fd(m);
	uint64_t end = t_now_ns() + (uint64_t)ms * 1000000u;

	if (fd < 0)
		return false;
	while (atomic_load(calls) < want) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = t_now_ns();
		int n;

		if (now >= end)
			return false;
		n = poll(&p, 1, 20);
		if (n < 0 && errno != EINTR)
			return false;
		if (n > 0 && wlk_manager_dispatch(m) < 0)
			return false;
	}
	return true;
}

/* Violations reported by wlk_manager_validate(), for the message. */
struct t_report {
	int n;
	char text[1024];
};

static void t_report_add(const char *what, void *arg)
{
	struct t_report *r = arg;
	size_t len = strlen(r->text);

	r->n++;
	snprintf(r->text + len, sizeof(r->text) - len, "%s; ", what);
}

void t_assert_valid(struct wlk_manager *m, const char *what)
{
	struct t_report r = {0};
	int rc = wlk_manager_validate(m, t_report_add, &r);

	cr_assert_eq(rc, 0, "%s%svalidate: %s, %d violations: %s",
		     what ? what : "", what ? ": " : "", t_ename(rc), r.n,
		     r.text);
}

static void t_violation(const char *what, void *arg)
{
	(void)arg;
	fprintf(stderr, "%s: invalid segment: %s\n", t_origin, what);
}

void t_fini(void)
{
	bool busy = false, invalid = false;
	size_t i;

	for (i = 0; i < T_MAX_TRACKED; i++) {
		if (t_children[i] > 0) {
			kill(t_children[i], SIGKILL);
			waitpid(t_children[i], NULL, 0);
			t_children[i] = 0;
		}
	}
	/* Every test ends with the segment passing the validator, checked
	 * through a manager that still keeps the segment attached. */
	for (i = 0; i < T_MAX_TRACKED; i++) {
		if (t_managers[i]) {
			if (wlk_manager_validate(t_managers[i], t_violation,
						 NULL) == WLK_ECORRUPT)
				invalid = true;
			break;
		}
	}
	for (i = 0; i < T_MAX_TRACKED; i++) {
		if (t_managers[i]) {
			wlk_manager_close(t_managers[i]);
			t_managers[i] = NULL;
		}
	}
	for (i = 0; i < t_nbuckets; i++) {
		struct t_bucket *b = &t_buckets[i];
		struct wlk_manager_options o = {
			.bucket = b->bucket,
			.partition = b->partition,
		};

		/* -ENOENT: never created, or the test removed it. */
		if (wlk_bucket_remove(b->origin, &o) == -EBUSY) {
			busy = true;
			t_remove_busy(b->origin, &o);
		}
		free(b->origin);
		free(b->bucket);
		free(b->partition);
	}
	t_nbuckets = 0;
	if (busy)
		t_unlink_mapped_segments();
	for (i = 0; i < t_nfiles; i++) {
		(void)unlink(t_files[i]);
		free(t_files[i]);
	}
	t_nfiles = 0;
	if (invalid)
		abort(); /* an assert in .fini would not fail the test */
	if (__lsan_do_recoverable_leak_check &&
	    __lsan_do_recoverable_leak_check() != 0) {
		fprintf(stderr, "%s: memory leaked\n", t_origin);
		abort();
	}
}

static void t_track_manager(struct wlk_manager *m)
{
	size_t i;

	for (i = 0; i < T_MAX_TRACKED; i++) {
		if (!t_managers[i]) {
			t_managers[i] = m;
			return;
		}
	}
	cr_assert_fail("too many open managers");
}

struct wlk_manager *t_open_at(const char *origin,
			      const struct wlk_manager_options *o)
{
	struct wlk_manager *m = NULL;
	int rc = wlk_manager_open(origin, o, &m);

	cr_assert_eq(rc, 0, "wlk_manager_open(%s): %s", origin, t_ename(rc));
	cr_assert_not_null(m, "wlk_manager_open succeeded with no manager");
	t_track_manager(m);
	return m;
}

struct wlk_manager *t_open_opts(const struct wlk_manager_options *o)
{
	return t_open_at(t_origin, o);
}

struct wlk_manager *t_open(void)
{
	return t_open_at(t_origin, NULL);
}

void t_forget(struct wlk_manager *m)
{
	size_t i;

	for (i = 0; i < T_MAX_TRACKED; i++)
		if (t_managers[i] == m)
			t_managers[i] = NULL;
}

void t_close(struct wlk_manager *m)
{
	t_forget(m);
	wlk_manager_close(m);
}

const char *t_ename(int rc)
{
	static __thread char buf[4][64];
	static __thread unsigned int next;
	char *b = buf[next++ % 4];

	if (rc < 0)
		snprintf(b, sizeof(buf[0]), "%s(%d)", wlk_error_name(rc), rc);
	else
		snprintf(b, sizeof(buf[0]), "%d", rc);
	return b;
}

static bool t_name_eq(const struct wlk_lock_info *li, const char *name,
		      size_t len)
{
	if (!name)
		return true;
	if (len == WLK_NUL_TERMINATED)
		len = strlen(name);
	return li->name_len == len && memcmp(li->name, name, len) == 0;
}

static size_t t_count(struct wlk_manager *m, const char *name, size_t len,
		      bool held, const char *client_id);

size_t t_held_by_pid(struct wlk_manager *m, const char *name, size_t len,
		     pid_t pid)
{
	struct wlk_snapshot *s = NULL;
	size_t i, c = 0;

	if (wlk_query(m, &s) != 0)
		return SIZE_MAX;
	for (i = 0; i < wlk_snapshot_held_count(s); i++) {
		const struct wlk_lock_info *li = wlk_snapshot_held(s, i);

		if (li && t_name_eq(li, name, len) && li->pid == pid)
			c++;
	}
	wlk_snapshot_free(s);
	return c;
}

size_t t_pending_pids(struct wlk_manager *m, const char *name, size_t len,
		      pid_t *pids, size_t max)
{
	struct wlk_snapshot *s = NULL;
	size_t i, c = 0;

	if (wlk_query(m, &s) != 0)
		return SIZE_MAX;
	for (i = 0; i < wlk_snapshot_pending_count(s); i++) {
		const struct wlk_lock_info *li = wlk_snapshot_pending(s, i);

		if (!li || !t_name_eq(li, name, len))
			continue;
		if (c < max)
			pids[c] = li->pid;
		c++;
	}
	wlk_snapshot_free(s);
	return c;
}

static size_t t_count(struct wlk_manager *m, const char *name, size_t len,
		      bool held, const char *client_id)
{
	struct wlk_snapshot *s = NULL;
	size_t i, n, c = 0;

	if (wlk_query(m, &s) != 0)
		return SIZE_MAX;
	n = held ? wlk_snapshot_held_count(s) : wlk_snapshot_pending_count(s);
	for (i = 0; i < n; i++) {
		const struct wlk_lock_info *li =
			held ? wlk_snapshot_held(s, i) :
			       wlk_snapshot_pending(s, i);

		if (!li || !t_name_eq(li, name, len))
			continue;
		if (client_id && (!li->client_id ||
				  strcmp(li->client_id, client_id) != 0))
			continue;
		c++;
	}
	wlk_snapshot_free(s);
	return c;
}

size_t t_held_n(struct wlk_manager *m, const char *name, size_t len)
{
	return t_count(m, name, len, true, NULL);
}

size_t t_pending_n(struct wlk_manager *m, const char *name, size_t len)
{
	return t_count(m, name, len, false, NULL);
}

size_t t_held_by(struct wlk_manager *m, const char *name, size_t len,
		 const char *client_id)
{
	return t_count(m, name, len, true, client_id);
}

void t_nap_ms(unsigned int ms)
{
	struct timespec ts = {
		.tv_sec = ms / 1000,
		.tv_nsec = (long)(ms % 1000) * 1000000L,
	};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

uint64_t t_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool t_wait_count(struct wlk_manager *m, const char *name, size_t len,
			 size_t n, bool held)
{
	uint64_t end = t_now_ns() + (uint64_t)T_WAIT_MS * 1000000u;

	for (;;) {
		if (t_count(m, name, len, held, NULL) == n)
			return true;
		if (t_now_ns() > end)
			return false;
		t_nap_ms(1);
	}
}

bool t_wait_pending(struct wlk_manager *m, const char *name, size_t len,
		    size_t n)
{
	return t_wait_count(m, name, len, n, false);
}

bool t_wait_held(struct wlk_manager *m, const char *name, size_t len,
		 size_t n)
{
	return t_wait_count(m, name, len, n, true);
}

void *t_shared_alloc(size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	cr_assert_neq(p, MAP_FAILED, "mmap: %s", strerror(errno));
	return p;
}

void t_shared_free(void *p, size_t size)
{
	munmap(p, size);
}

void t_pipe_open(struct t_pipe *p)
{
	int fds[2];

	cr_assert_eq(pipe2(fds, O_CLOEXEC), 0, "pipe2: %s", strerror(errno));
	p->rd = fds[0];
	p->wr = fds[1];
}

void t_pipe_close(struct t_pipe *p)
{
	if (p->rd >= 0)
		close(p->rd);
	if (p->wr >= 0)
		close(p->wr);
	p->rd = -1;
	p->wr = -1;
}

int t_put(int fd, const void *buf, size_t n)
{
	const char *b = buf;

	while (n > 0) {
		ssize_t w = write(fd, b, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

int t_get(int fd, void *buf, size_t n, int ms)
{
	char *b = buf;
	uint64_t end = t_now_ns() + (uint64_t)ms * 1000000u;

	while (n > 0) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t now = t_now_ns();
		ssize_t r;
		int pr;

		if (now >= end)
			return -1;
		pr = poll(&pfd, 1, (int)((end - now) / 1000000u) + 1);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			return -1;
		r = read(fd, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

int t_put_byte(int fd, char c)
{
	return t_put(fd, &c, 1);
}

int t_get_byte(int fd)
{
	unsigned char c;

	if (t_get(fd, &c, 1, T_WAIT_MS) != 0)
		return -1;
	return c;
}

bool t_readable(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, 0) > 0;
}

pid_t t_fork(int (*fn)(void *arg), void *arg)
{
	pid_t pid;
	size_t i;

	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
	if (pid == 0)
		_exit(fn(arg) & 0xff);
	for (i = 0; i < T_MAX_TRACKED; i++) {
		if (t_children[i] == 0) {
			t_children[i] = pid;
			break;
		}
	}
	return pid;
}

void t_stopped_start(struct t_stopped *s, int (*fn)(void *arg))
{
	t_pipe_open(&s->p[0]);
	t_pipe_open(&s->p[1]);
	s->pid = t_fork(fn, s->p);
	cr_assert_eq(t_get_byte(s->p[0].rd), 'h', "the child did not lock");
	cr_assert_eq(kill(s->pid, SIGSTOP), 0);
}

int t_stopped_resume(struct t_stopped *s, int ms)
{
	int rc;

	cr_assert_eq(kill(s->pid, SIGCONT), 0);
	cr_assert_eq(t_put_byte(s->p[1].wr, 'c'), 0);
	rc = t_wait(s->pid, ms);
	t_pipe_close(&s->p[0]);
	t_pipe_close(&s->p[1]);
	return rc;
}

int t_wait(pid_t pid, int ms)
{
	uint64_t end = t_now_ns() + (uint64_t)ms * 1000000u;
	int status = 0;
	size_t i;
	pid_t r;

	for (;;) {
		r = waitpid(pid, &status, WNOHANG);
		if (r == pid || (r < 0 && errno != EINTR))
			break;
		if (t_now_ns() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			r = -1;
			break;
		}
		t_nap_ms(1);
	}
	for (i = 0; i < T_MAX_TRACKED; i++)
		if (t_children[i] == pid)
			t_children[i] = 0;
	if (r != pid)
		return -1;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return -1;
}

struct t_holder_st {
	struct wlk_manager *m;
	char *name;
	size_t len;
	struct wlk_options opt;
	int acq_rc;
	int rel_rc;
	bool got;
	bool stolen;
	uint64_t token;
	struct t_pipe granted;
	struct t_pipe go;
	struct t_pipe done;
	pthread_t th;
};

static void *t_holder_main(void *arg)
{
	struct t_holder_st *h = arg;
	struct wlk_lock *lock = NULL;

	h->acq_rc = wlk_acquire(h->m, h->name, h->len, &h->opt, &lock);
	h->got = h->acq_rc == 0 && lock != NULL;
	if (h->got)
		h->token = wlk_lock_token(lock);
	t_put_byte(h->granted.wr, 'g');
	if (h->got) {
		unsigned char c;

		/* Hold until told to release (bounded). */
		(void)t_get(h->go.rd, &c, 1, 3 * T_WAIT_MS);
		h->stolen = wlk_lock_stolen(lock);
		h->rel_rc = wlk_release(lock);
	}
	t_put_byte(h->done.wr, 'd');
	return NULL;
}

static void t_holder_copy(struct t_holder *h)
{
	h->acq_rc = h->st->acq_rc;
	h->got = h->st->got;
	h->token = h->st->token;
	h->stolen = h->st->stolen;
	h->rel_rc = h->st->rel_rc;
}

void t_holder_start(struct t_holder *h, struct wlk_manager *m,
		    const char *name, size_t len, const struct wlk_options *o)
{
	struct t_holder_st *st = calloc(1, sizeof(*st));
	int rc;

	cr_assert_not_null(st);
	if (len == WLK_NUL_TERMINATED)
		len = strlen(name);
	st->name = malloc(len + 1);
	cr_assert_not_null(st->name);
	memcpy(st->name, name, len);
	st->name[len] = '\0';
	st->len = len;
	st->m = m;
	if (o)
		st->opt = *o;
	st->acq_rc = 1;
	st->rel_rc = 1;
	t_pipe_open(&st->granted);
	t_pipe_open(&st->go);
	t_pipe_open(&st->done);
	memset(h, 0, sizeof(*h));
	h->st = st;
	t_holder_copy(h);
	rc = pthread_create(&st->th, NULL, t_holder_main, st);
	cr_assert_eq(rc, 0, "pthread_create: %s", strerror(rc));
}

int t_holder_wait_granted(struct t_holder *h)
{
	int rc = t_get_byte(h->st->granted.rd) == 'g' ? 0 : -1;

	t_holder_copy(h);
	return rc;
}

bool t_holder_granted_now(struct t_holder *h)
{
	return t_readable(h->st->granted.rd);
}

int t_holder_release(struct t_holder *h)
{
	int rc = -1;

	if (t_put_byte(h->st->go.wr, 'r') == 0)
		rc = t_get_byte(h->st->done.rd) == 'd' ? 0 : -1;
	t_holder_copy(h);
	return rc;
}

void t_holder_join(struct t_holder *h)
{
	struct t_holder_st *st = h->st;

	if (!st)
		return;
	pthread_join(st->th, NULL);
	t_holder_copy(h);
	t_pipe_close(&st->granted);
	t_pipe_close(&st->go);
	t_pipe_close(&st->done);
	free(st->name);
	free(st);
	h->st = NULL;
}

int t_sched_get(pid_t tid, struct t_sched_attr *a)
{
	memset(a, 0, sizeof(*a));
	return (int)syscall(SYS_sched_getattr, tid, a, sizeof(*a), 0);
}

int t_sched_set(pid_t tid, struct t_sched_attr *a)
{
	a->size = sizeof(*a);
	return (int)syscall(SYS_sched_setattr, tid, a, 0);
}

uint64_t t_wait_short_slice(pid_t tid)
{
	uint64_t end = t_now_ns() + (uint64_t)T_WAIT_MS * 1000000u;

	for (;;) {
		struct t_sched_attr a;
		uint64_t now = t_now_ns();

		if (t_sched_get(tid, &a) == 0 && a.runtime == T_SHORT_SLICE_NS)
			return now;
		if (now > end)
			return 0;
		t_nap_ms(1);
	}
}
