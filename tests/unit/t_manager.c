/* SPDX-License-Identifier: MIT */
/* t_manager.c - opening and closing managers, buckets and their segments. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "../common.h"
#include "testing.h"

#define SHM_DIR "/dev/shm"
#define MAX_SHM 4096

/* The names in /dev/shm. */
struct shm_list {
	char *names[MAX_SHM];
	size_t n;
};

static void shm_list_read(struct shm_list *l)
{
	DIR *d = opendir(SHM_DIR);
	struct dirent *e;

	cr_assert_not_null(d, "opendir(%s): %s", SHM_DIR, strerror(errno));
	l->n = 0;
	while ((e = readdir(d)) && l->n < MAX_SHM) {
		if (e->d_name[0] == '.')
			continue;
		l->names[l->n] = strdup(e->d_name);
		cr_assert_not_null(l->names[l->n]);
		l->n++;
	}
	closedir(d);
}

static bool shm_list_has(const struct shm_list *l, const char *name)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (strcmp(l->names[i], name) == 0)
			return true;
	return false;
}

static void shm_list_free(struct shm_list *l)
{
	while (l->n > 0)
		free(l->names[--l->n]);
}

/* Number of lines of /proc/self/maps that map /dev/shm/@name. */
static size_t maps_count(const char *name)
{
	char line[1024], want[512];
	size_t n = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	cr_assert_not_null(f);
	snprintf(want, sizeof(want), SHM_DIR "/%s", name);
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, want);

		if (p && (p[strlen(want)] == '\n' || p[strlen(want)] == ' '))
			n++;
	}
	fclose(f);
	return n;
}

/*
 * The segment that appeared since @before was read: a new file in /dev/shm
 * that this process maps (other tests may create files meanwhile).
 */
static void shm_find_new(const struct shm_list *before, char *out,
			 size_t size)
{
	struct shm_list *after = calloc(1, sizeof(*after));
	size_t i, found = 0;

	cr_assert_not_null(after);
	shm_list_read(after);
	for (i = 0; i < after->n; i++) {
		/* Only segments: Criterion keeps shared memory there too. */
		if (strncmp(after->names[i], "wlk", 3) != 0 ||
		    shm_list_has(before, after->names[i]))
			continue;
		if (maps_count(after->names[i]) == 0)
			continue;
		snprintf(out, size, "%s", after->names[i]);
		found++;
	}
	shm_list_free(after);
	free(after);
	cr_assert_eq(found, 1, "found %zu new mapped segments in " SHM_DIR,
		     found);
}

/* Open a manager of @origin with @o and return the path of its segment. */
static struct wlk_manager *open_find(const char *origin,
				     const struct wlk_manager_options *o,
				     char *path, size_t size)
{
	struct shm_list *before = calloc(1, sizeof(*before));
	struct wlk_manager *m;
	char name[256];

	cr_assert_not_null(before);
	shm_list_read(before);
	m = t_open_at(origin, o);
	shm_find_new(before, name, sizeof(name));
	shm_list_free(before);
	free(before);
	snprintf(path, size, SHM_DIR "/%s", name);
	t_track_file(path);
	return m;
}

static char *repeat(char c, size_t n)
{
	char *s = malloc(n + 1);

	cr_assert_not_null(s);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

Test(manager, open_with_null_options_and_close, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = NULL;
	const char *id;

	T_ASSERT_RC(wlk_manager_open(t_origin, NULL, &m), 0);
	cr_assert_not_null(m);
	id = wlk_manager_client_id(m);
	cr_assert_not_null(id);
	cr_assert_gt(strlen(id), 0);
	cr_assert_leq(strlen(id), WLK_CLIENT_ID_MAX);
	wlk_manager_close(m);
}

Test(manager, open_with_zeroed_options_and_close, T_FIX, .timeout = 10)
{
	struct wlk_manager_options o = { 0 };
	struct wlk_manager *m = NULL;

	T_ASSERT_RC(wlk_manager_open(t_origin, &o, &m), 0);
	cr_assert_not_null(m);
	wlk_manager_close(m);
}

Test(manager, close_null_is_noop, T_FIX, .timeout = 10)
{
	wlk_manager_close(NULL);
}

Test(manager, null_origin_is_einval_and_out_untouched, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = (struct wlk_manager *)&m;

	T_ASSERT_RC(wlk_manager_open(NULL, NULL, &m), WLK_EINVAL);
	cr_assert_eq(m, (struct wlk_manager *)&m, "out written on failure");
}

Test(manager, null_out_is_einval, T_FIX, .timeout = 10)
{
	T_ASSERT_RC(wlk_manager_open(t_origin, NULL, NULL), WLK_EINVAL);
}

Test(manager, empty_origin_is_einval, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = NULL;

	T_ASSERT_RC(wlk_manager_open("", NULL, &m), WLK_EINVAL);
	cr_assert_null(m);
}

Test(manager, opaque_null_origin_is_esecurity, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = NULL;

	T_ASSERT_RC(wlk_manager_open("null", NULL, &m), WLK_ESECURITY);
	cr_assert_null(m);
	T_ASSERT_RC(wlk_bucket_remove("null", NULL), WLK_ESECURITY);
}

Test(manager, origin_of_max_length_ok_longer_is_enametoolong, T_FIX,
     .timeout = 10)
{
	char *o = repeat('a', WLK_ORIGIN_MAX + 1);
	size_t n = strlen(t_origin);
	struct wlk_manager *m = NULL;

	/* A unique origin padded to exactly WLK_ORIGIN_MAX bytes. */
	memcpy(o, t_origin, n);
	o[WLK_ORIGIN_MAX] = '\0';
	t_track_bucket(o, NULL, NULL);
	m = t_open_at(o, NULL);
	t_close(m);
	m = NULL;
	o[WLK_ORIGIN_MAX] = 'a';
	T_ASSERT_RC(wlk_manager_open(o, NULL, &m), WLK_ENAMETOOLONG);
	cr_assert_null(m);
	T_ASSERT_RC(wlk_bucket_remove(o, NULL), WLK_ENAMETOOLONG);
	free(o);
}

Test(manager, bucket_of_max_length_ok_longer_is_enametoolong, T_FIX,
     .timeout = 10)
{
	char *b = repeat('b', WLK_BUCKET_MAX + 1);
	struct wlk_manager_options o = { .bucket = b };
	struct wlk_manager *m = NULL;

	b[WLK_BUCKET_MAX] = '\0';
	t_track_bucket(t_origin, b, NULL);
	m = t_open_opts(&o);
	t_close(m);
	m = NULL;
	b[WLK_BUCKET_MAX] = 'b';
	T_ASSERT_RC(wlk_manager_open(t_origin, &o, &m), WLK_ENAMETOOLONG);
	cr_assert_null(m);
	T_ASSERT_RC(wlk_bucket_remove(t_origin, &o), WLK_ENAMETOOLONG);
	free(b);
}

Test(manager, partition_of_max_length_ok_longer_is_enametoolong, T_FIX,
     .timeout = 10)
{
	char *p = repeat('p', WLK_PARTITION_MAX + 1);
	struct wlk_manager_options o = { .partition = p };
	struct wlk_manager *m = NULL;

	p[WLK_PARTITION_MAX] = '\0';
	t_track_bucket(t_origin, NULL, p);
	m = t_open_opts(&o);
	t_close(m);
	m = NULL;
	p[WLK_PARTITION_MAX] = 'p';
	T_ASSERT_RC(wlk_manager_open(t_origin, &o, &m), WLK_ENAMETOOLONG);
	cr_assert_null(m);
	T_ASSERT_RC(wlk_bucket_remove(t_origin, &o), WLK_ENAMETOOLONG);
	free(p);
}

Test(manager, client_id_of_max_length_ok_longer_is_enametoolong, T_FIX,
     .timeout = 10)
{
	char *c = repeat('c', WLK_CLIENT_ID_MAX + 1);
	struct wlk_manager_options o = { .client_id = c };
	struct wlk_manager *m = NULL;

	c[WLK_CLIENT_ID_MAX] = '\0';
	m = t_open_opts(&o);
	cr_assert_str_eq(wlk_manager_client_id(m), c);
	t_close(m);
	m = NULL;
	c[WLK_CLIENT_ID_MAX] = 'c';
	T_ASSERT_RC(wlk_manager_open(t_origin, &o, &m), WLK_ENAMETOOLONG);
	cr_assert_null(m);
	free(c);
}

Test(manager, empty_client_id_is_einval, T_FIX, .timeout = 10)
{
	struct wlk_manager_options o = { .client_id = "" };
	struct wlk_manager *m = NULL;

	T_ASSERT_RC(wlk_manager_open(t_origin, &o, &m), WLK_EINVAL);
	cr_assert_null(m);
}

Test(manager, permissions_outside_rw_bits_are_einval, T_FIX, .timeout = 10)
{
	static const unsigned int bad[] = { 0700, 0100, 0010, 0001,
					    0777, 01600, 04600 };
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct wlk_manager_options o = { .permissions = bad[i] };
		struct wlk_manager *m = NULL;

		T_ASSERT_RC(wlk_manager_open(t_origin, &o, &m), WLK_EINVAL);
		cr_assert_null(m, "permissions %o", bad[i]);
	}
}

/* The owner's processes open the segment read-write: 0600 is required. */
Test(manager, permissions_without_owner_read_write_are_einval, T_FIX,
     .timeout = 10)
{
	static const unsigned int bad[] = { 0060, 0006, 0066, 0400, 0200,
					    0466, 0266 };
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct wlk_manager_options o = { .permissions = bad[i] };
		struct wlk_manager *m = NULL;

		T_ASSERT_RC(wlk_manager_open(t_origin, &o, &m), WLK_EINVAL);
		cr_assert_null(m, "permissions %o", bad[i]);
		/* Nothing was created either. */
		T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), -ENOENT);
	}
}

Test(manager, capacities_above_limits_are_einval, T_FIX, .timeout = 10)
{
	struct wlk_manager_options o[] = {
		{ .max_names = WLK_LIMIT_MAX_NAMES + 1 },
		{ .max_requests = WLK_LIMIT_MAX_REQUESTS + 1 },
		{ .max_name_len = WLK_LIMIT_MAX_NAME_LEN + 1 },
	};
	size_t i;

	for (i = 0; i < sizeof(o) / sizeof(o[0]); i++) {
		struct wlk_manager *m = NULL;

		T_ASSERT_RC(wlk_manager_open(t_origin, &o[i], &m), WLK_EINVAL);
		cr_assert_null(m, "option set %zu", i);
	}
}

Test(manager, explicit_client_id_is_reported, T_FIX, .timeout = 10)
{
	struct wlk_manager_options o = { .client_id = "tab-1" };
	struct wlk_manager *m = t_open_opts(&o);
	struct wlk_lock *l = NULL;

	cr_assert_str_eq(wlk_manager_client_id(m), "tab-1");
	T_ASSERT_RC(wlk_acquire(m, "r", 1, NULL, &l), 0);
	cr_assert_eq(t_held_by(m, "r", 1, "tab-1"), 1);
	T_ASSERT_RC(wlk_release(l), 0);
}

Test(manager, client_id_of_null_manager_is_null, T_FIX, .timeout = 10)
{
	cr_assert_null(wlk_manager_client_id(NULL));
}

static int child_send_client_id(void *arg)
{
	int fd = *(int *)arg;
	struct wlk_manager *m = NULL;
	char id[WLK_CLIENT_ID_MAX + 1] = { 0 };

	if (wlk_manager_open(t_origin, NULL, &m) != 0)
		return 1;
	snprintf(id, sizeof(id), "%s", wlk_manager_client_id(m));
	wlk_manager_close(m);
	return t_put(fd, id, sizeof(id)) == 0 ? 0 : 2;
}

Test(manager, generated_client_ids_are_unique, T_FIX, .timeout = 10)
{
	char ids[6][WLK_CLIENT_ID_MAX + 1];
	struct wlk_manager *m[4];
	struct t_pipe p;
	pid_t pid[2];
	size_t i, j;

	for (i = 0; i < 4; i++) {
		m[i] = t_open();
		snprintf(ids[i], sizeof(ids[i]), "%s",
			 wlk_manager_client_id(m[i]));
	}
	t_pipe_open(&p);
	for (i = 0; i < 2; i++) {
		pid[i] = t_fork(child_send_client_id, &p.wr);
		cr_assert_eq(t_get(p.rd, ids[4 + i], sizeof(ids[0]), T_WAIT_MS),
			     0, "no client id from child %zu", i);
		cr_assert_eq(t_wait(pid[i], T_WAIT_MS), 0);
	}
	t_pipe_close(&p);
	for (i = 0; i < 6; i++) {
		cr_assert_gt(strlen(ids[i]), 0);
		cr_assert_leq(strlen(ids[i]), WLK_CLIENT_ID_MAX);
		for (j = i + 1; j < 6; j++)
			cr_assert_str_neq(ids[i], ids[j],
					  "client ids %zu and %zu equal", i, j);
	}
	for (i = 0; i < 4; i++)
		t_close(m[i]);
}

Test(manager, two_managers_in_one_process_exclude_each_other, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_options ia = { .if_available = true };
	struct wlk_lock *la = NULL, *lb = (struct wlk_lock *)&lb;
	struct t_holder h;

	cr_assert_str_neq(wlk_manager_client_id(a), wlk_manager_client_id(b));
	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &ia, &lb), 0);
	cr_assert_null(lb, "second manager got an exclusive lock held by "
			   "the first");

	t_holder_start(&h, b, "r", 1, NULL);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	cr_assert_not(t_holder_granted_now(&h));
	T_ASSERT_RC(wlk_release(la), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	T_ASSERT_RC(h.acq_rc, 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
	T_ASSERT_RC(h.rel_rc, 0);
}

Test(manager, same_client_id_label_is_still_two_clients, T_FIX, .timeout = 10)
{
	struct wlk_manager_options o = { .client_id = "same" };
	struct wlk_manager *a = t_open_opts(&o), *b = t_open_opts(&o);
	struct wlk_options ia = { .if_available = true };
	struct wlk_lock *la = NULL, *lb = (struct wlk_lock *)&lb;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &ia, &lb), 0);
	cr_assert_null(lb);
	T_ASSERT_RC(wlk_release(la), 0);
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &ia, &lb), 0);
	cr_assert_not_null(lb);
	T_ASSERT_RC(wlk_release(lb), 0);
}

/* Both managers can hold "r" exclusively at once: they do not share. */
static void assert_separate(struct wlk_manager *a, struct wlk_manager *b)
{
	struct wlk_options ia = { .if_available = true };
	struct wlk_lock *la = NULL, *lb = NULL;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &ia, &lb), 0);
	cr_assert_not_null(lb, "the lock state is shared");
	cr_assert_eq(t_held_n(a, NULL, 0), 1, "other state visible in query");
	cr_assert_eq(t_held_n(b, NULL, 0), 1, "other state visible in query");
	T_ASSERT_RC(wlk_release(la), 0);
	T_ASSERT_RC(wlk_release(lb), 0);
}

/* "r" held in @a is seen in @b: they share one lock state. */
static void assert_shared(struct wlk_manager *a, struct wlk_manager *b)
{
	struct wlk_options ia = { .if_available = true };
	struct wlk_lock *la = NULL, *lb = (struct wlk_lock *)&lb;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &ia, &lb), 0);
	cr_assert_null(lb, "the lock state is not shared");
	cr_assert_eq(t_held_n(b, "r", 1), 1);
	T_ASSERT_RC(wlk_release(la), 0);
}

Test(manager, buckets_are_separate, T_FIX, .timeout = 10)
{
	struct wlk_manager_options oa = { .bucket = "a" };
	struct wlk_manager_options ob = { .bucket = "b" };

	t_track_bucket(t_origin, "a", NULL);
	t_track_bucket(t_origin, "b", NULL);
	assert_separate(t_open_opts(&oa), t_open_opts(&ob));
}

Test(manager, bucket_is_separate_from_default_bucket, T_FIX, .timeout = 10)
{
	struct wlk_manager_options ob = { .bucket = "other" };

	t_track_bucket(t_origin, "other", NULL);
	assert_separate(t_open(), t_open_opts(&ob));
}

Test(manager, partitions_are_separate, T_FIX, .timeout = 10)
{
	struct wlk_manager_options oa = { .partition = "profile-a" };
	struct wlk_manager_options ob = { .partition = "private-1" };

	t_track_bucket(t_origin, NULL, "profile-a");
	t_track_bucket(t_origin, NULL, "private-1");
	assert_separate(t_open_opts(&oa), t_open_opts(&ob));
	assert_separate(t_open(), t_open_opts(&oa));
}

Test(manager, origins_are_separate, T_FIX, .timeout = 10)
{
	char other[256];

	t_make_origin(other, sizeof(other), "other");
	t_track_bucket(other, NULL, NULL);
	assert_separate(t_open(), t_open_at(other, NULL));
}

Test(manager, origin_is_compared_byte_for_byte, T_FIX, .timeout = 10)
{
	char upper[256];
	size_t i;

	/* Same text in another case is another origin. */
	snprintf(upper, sizeof(upper), "%s", t_origin);
	for (i = 0; upper[i]; i++)
		if (upper[i] >= 'a' && upper[i] <= 'z')
			upper[i] = (char)(upper[i] - 'a' + 'A');
	t_track_bucket(upper, NULL, NULL);
	assert_separate(t_open(), t_open_at(upper, NULL));
}

Test(manager, null_bucket_is_the_default_bucket, T_FIX, .timeout = 10)
{
	struct wlk_manager_options od = { .bucket = "default" };

	assert_shared(t_open(), t_open_opts(&od));
}

Test(manager, null_partition_is_the_empty_partition, T_FIX, .timeout = 10)
{
	struct wlk_manager_options op = { .partition = "" };

	assert_shared(t_open(), t_open_opts(&op));
}

Test(manager, same_bucket_is_shared, T_FIX, .timeout = 10)
{
	struct wlk_manager_options o = { .bucket = "b", .partition = "p" };

	t_track_bucket(t_origin, "b", "p");
	assert_shared(t_open_opts(&o), t_open_opts(&o));
}

Test(manager, close_releases_locks_and_wakes_waiters, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *la = NULL, *la2 = NULL;
	struct t_holder h;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	T_ASSERT_RC(wlk_acquire(a, "s", 1, NULL, &la2), 0);
	t_holder_start(&h, b, "r", 1, NULL);
	cr_assert(t_wait_pending(b, "r", 1, 1));

	t_close(a);
	/* The waiter is granted by the close itself. */
	cr_assert_eq(t_held_by(b, "r", 1, wlk_manager_client_id(b)), 1);
	cr_assert_eq(t_held_n(b, "s", 1), 0, "close left a lock held");
	cr_assert_eq(t_pending_n(b, NULL, 0), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0, "waiter not woken");
	T_ASSERT_RC(h.acq_rc, 0);
	cr_assert(h.got);

	/* Handles of the closed manager stay valid objects. */
	cr_assert_eq(wlk_lock_name(la, NULL)[0], 'r');
	T_ASSERT_RC(wlk_release(la), WLK_ESTATE);
	T_ASSERT_RC(wlk_release(la2), WLK_ESTATE);
	cr_assert_eq(t_held_n(b, "r", 1), 1, "stale release dropped a lock");

	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
	T_ASSERT_RC(h.rel_rc, 0);
	cr_assert_eq(t_held_n(b, NULL, 0), 0);
}

Test(manager, close_releases_shared_locks, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_options sh = { .mode = WLK_SHARED };
	struct wlk_lock *la = NULL, *lb = NULL;
	struct t_holder h;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, &sh, &la), 0);
	T_ASSERT_RC(wlk_acquire(b, "r", 1, &sh, &lb), 0);
	t_holder_start(&h, c, "r", 1, NULL);
	cr_assert(t_wait_pending(c, "r", 1, 1));
	t_close(a);
	cr_assert_eq(t_held_n(c, "r", 1), 1);
	cr_assert_eq(t_pending_n(c, "r", 1), 1, "granted with b still held");
	T_ASSERT_RC(wlk_release(lb), 0);
	cr_assert_eq(t_holder_wait_granted(&h), 0);
	T_ASSERT_RC(h.acq_rc, 0);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
	T_ASSERT_RC(wlk_release(la), WLK_ESTATE);
}

Test(manager, close_makes_blocked_acquire_return_estate, T_FIX, .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *la = NULL;
	struct t_holder h;
	uint64_t t0;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	t_holder_start(&h, b, "r", 1, NULL);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	t0 = t_now_ns();
	t_close(b);
	cr_assert_eq(t_holder_wait_granted(&h), 0, "blocked thread not woken");
	cr_assert_lt(t_now_ns() - t0, T_CLOSE_WAKE_MAX_NS,
		     "woken %llu ms after the close",
		     (unsigned long long)((t_now_ns() - t0) / 1000000));
	T_ASSERT_RC(h.acq_rc, WLK_ESTATE);
	cr_assert_not(h.got);
	cr_assert_eq(t_pending_n(a, NULL, 0), 0, "request left queued");
	cr_assert_eq(t_held_n(a, "r", 1), 1);
	t_holder_join(&h);
	T_ASSERT_RC(wlk_release(la), 0);
}

struct req_arg {
	struct wlk_manager *m;
	int rc;
	int cb_runs;
	bool timed_out;
	struct t_pipe in;  /* callback -> main: "I am running" */
	struct t_pipe go;  /* main -> callback: "return now" */
};

static int cb_wait_go(struct wlk_lock *lock, void *arg)
{
	struct req_arg *r = arg;
	char c;

	r->cb_runs++;
	t_put_byte(r->in.wr, 'i');
	if (t_get(r->go.rd, &c, 1, T_WAIT_MS) != 0)
		r->timed_out = true;
	return 77;
}

static void *request_thread(void *arg)
{
	struct req_arg *r = arg;

	r->rc = wlk_request(r->m, "r", 1, NULL, cb_wait_go, r);
	t_put_byte(r->in.wr, 'x');
	return NULL;
}

Test(manager, close_makes_blocked_request_return_estate_without_cb, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open();
	struct req_arg r = { .m = t_open(), .rc = 1 };
	struct wlk_lock *la = NULL;
	pthread_t th;

	t_pipe_open(&r.in);
	t_pipe_open(&r.go);
	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	cr_assert_eq(pthread_create(&th, NULL, request_thread, &r), 0);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	t_close(r.m);
	cr_assert_eq(t_get_byte(r.in.rd), 'x', "blocked request not woken");
	pthread_join(th, NULL);
	T_ASSERT_RC(r.rc, WLK_ESTATE);
	cr_assert_eq(r.cb_runs, 0);
	cr_assert_eq(t_pending_n(a, NULL, 0), 0);
	T_ASSERT_RC(wlk_release(la), 0);
	t_pipe_close(&r.in);
	t_pipe_close(&r.go);
}

Test(manager, close_during_callback_releases_and_request_returns_estate, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open();
	struct req_arg r = { .m = t_open(), .rc = 1 };
	struct wlk_options ia = { .if_available = true };
	struct wlk_lock *la = NULL;
	pthread_t th;

	t_pipe_open(&r.in);
	t_pipe_open(&r.go);
	cr_assert_eq(pthread_create(&th, NULL, request_thread, &r), 0);
	cr_assert_eq(t_get_byte(r.in.rd), 'i', "callback did not run");
	cr_assert_eq(t_held_n(a, "r", 1), 1);

	t_close(r.m);
	/* The lock was released under the running callback. */
	cr_assert_eq(t_held_n(a, "r", 1), 0, "close left the lock held");
	T_ASSERT_RC(wlk_acquire(a, "r", 1, &ia, &la), 0);
	cr_assert_not_null(la);

	t_put_byte(r.go.wr, 'g');
	cr_assert_eq(t_get_byte(r.in.rd), 'x');
	pthread_join(th, NULL);
	cr_assert_not(r.timed_out, "close waited for the callback to return");
	T_ASSERT_RC(r.rc, WLK_ESTATE);
	/* The callback's end must not release a's lock. */
	cr_assert_eq(t_held_by(a, "r", 1, wlk_manager_client_id(a)), 1);
	T_ASSERT_RC(wlk_release(la), 0);
	t_pipe_close(&r.in);
	t_pipe_close(&r.go);
}

Test(manager, close_of_queued_exclusive_grants_shared_behind_it, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_options sh = { .mode = WLK_SHARED };
	struct wlk_lock *la = NULL;
	struct t_holder hb, hc;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, &sh, &la), 0);
	t_holder_start(&hb, b, "r", 1, NULL);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	t_holder_start(&hc, c, "r", 1, &sh);
	cr_assert(t_wait_pending(a, "r", 1, 2));
	t_close(b);
	cr_assert_eq(t_holder_wait_granted(&hb), 0);
	T_ASSERT_RC(hb.acq_rc, WLK_ESTATE);
	cr_assert_eq(t_held_by(a, "r", 1, wlk_manager_client_id(c)), 1,
		     "shared request behind the dropped one not granted");
	cr_assert_eq(t_holder_wait_granted(&hc), 0);
	T_ASSERT_RC(hc.acq_rc, 0);
	cr_assert_eq(t_holder_release(&hc), 0);
	t_holder_join(&hb);
	t_holder_join(&hc);
	T_ASSERT_RC(wlk_release(la), 0);
}

/*
 * Spec 2.6: a closing client's requests are aborted before its locks are
 * released, so a request of its own queued behind its lock is never
 * granted, not even for an instant: the next token goes to the waiter
 * behind it.
 */
Test(manager, close_aborts_own_queued_request_before_releasing, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *la = NULL;
	struct t_holder ha, hb;

	uint64_t first;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	first = wlk_lock_token(la);
	t_holder_start(&ha, a, "r", 1, NULL);
	cr_assert(t_wait_pending(b, "r", 1, 1));
	t_holder_start(&hb, b, "r", 1, NULL);
	cr_assert(t_wait_pending(b, "r", 1, 2));
	t_close(a);
	cr_assert_eq(t_holder_wait_granted(&ha), 0);
	T_ASSERT_RC(ha.acq_rc, WLK_ESTATE);
	cr_assert_eq(t_holder_wait_granted(&hb), 0);
	T_ASSERT_RC(hb.acq_rc, 0);
	cr_assert_eq(hb.token, first + 1,
		     "token %llu after %llu: a's own request was granted",
		     (unsigned long long)hb.token, (unsigned long long)first);
	cr_assert_eq(t_holder_release(&hb), 0);
	t_holder_join(&ha);
	t_holder_join(&hb);
	T_ASSERT_RC(wlk_release(la), WLK_ESTATE);
}

/* Aborting one queued request of the closing client does not grant its
 * next one either (a shared one behind its exclusive one). */
Test(manager, close_aborts_all_own_queued_requests_at_once, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open(), *c = t_open();
	struct wlk_options sh = {.mode = WLK_SHARED};
	struct wlk_lock *lc = NULL;
	struct t_holder ha1, ha2, hb;

	uint64_t first;

	T_ASSERT_RC(wlk_acquire(c, "r", 1, &sh, &lc), 0);
	first = wlk_lock_token(lc);
	t_holder_start(&ha1, a, "r", 1, NULL);
	cr_assert(t_wait_pending(c, "r", 1, 1));
	t_holder_start(&ha2, a, "r", 1, &sh);
	cr_assert(t_wait_pending(c, "r", 1, 2));
	t_holder_start(&hb, b, "r", 1, NULL);
	cr_assert(t_wait_pending(c, "r", 1, 3));
	t_close(a);
	cr_assert_eq(t_holder_wait_granted(&ha1), 0);
	cr_assert_eq(t_holder_wait_granted(&ha2), 0);
	T_ASSERT_RC(ha1.acq_rc, WLK_ESTATE);
	T_ASSERT_RC(ha2.acq_rc, WLK_ESTATE);
	T_ASSERT_RC(wlk_release(lc), 0);
	cr_assert_eq(t_holder_wait_granted(&hb), 0);
	T_ASSERT_RC(hb.acq_rc, 0);
	cr_assert_eq(hb.token, first + 1,
		     "token %llu after %llu: a's own request was granted",
		     (unsigned long long)hb.token, (unsigned long long)first);
	cr_assert_eq(t_holder_release(&hb), 0);
	t_holder_join(&ha1);
	t_holder_join(&ha2);
	t_holder_join(&hb);
}

/* More locks than the first walk of a client's slots keeps for the
 * second step (DROP_SEEN, 128: lib/spec/ops.c, wlk__drop_client()). */
#define CLOSE_MANY 300

/* A client with more slots than that is walked twice; its close still
 * aborts its own request first, releases every lock, and grants the
 * waiter behind one of them. */
Test(manager, close_of_more_locks_than_one_walk_keeps, T_FIX, .timeout = 30)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *l[CLOSE_MANY], *lq = NULL;
	struct t_holder ha, hb;
	char name[16];

	for (int i = 0; i < CLOSE_MANY; i++) {
		snprintf(name, sizeof(name), "m%d", i);
		T_ASSERT_RC(wlk_acquire(a, name, WLK_NUL_TERMINATED, NULL,
					&l[i]), 0);
	}
	T_ASSERT_RC(wlk_acquire(b, "q", 1, NULL, &lq), 0);
	t_holder_start(&ha, a, "q", 1, NULL);
	cr_assert(t_wait_pending(b, "q", 1, 1));
	/* The last name taken: not among the first slots a walk finds,
	 * whatever the table's order. */
	snprintf(name, sizeof(name), "m%d", CLOSE_MANY - 1);
	t_holder_start(&hb, b, name, strlen(name), NULL);
	cr_assert(t_wait_pending(b, name, strlen(name), 1));
	cr_assert_eq(t_held_n(b, NULL, 0), CLOSE_MANY + 1);

	t_close(a);
	cr_assert_eq(t_holder_wait_granted(&ha), 0);
	T_ASSERT_RC(ha.acq_rc, WLK_ESTATE);
	cr_assert_eq(t_holder_wait_granted(&hb), 0, "waiter not woken");
	T_ASSERT_RC(hb.acq_rc, 0);
	cr_assert(hb.got);
	/* "q" (b's) and the waiter's: none of a's left. */
	cr_assert_eq(t_held_n(b, NULL, 0), 2, "%zu held after the close",
		     t_held_n(b, NULL, 0));
	cr_assert_eq(t_pending_n(b, NULL, 0), 0);
	t_assert_valid(b, NULL);

	for (int i = 0; i < CLOSE_MANY; i++)
		T_ASSERT_RC(wlk_release(l[i]), WLK_ESTATE);
	cr_assert_eq(t_holder_release(&hb), 0);
	t_holder_join(&ha);
	t_holder_join(&hb);
	T_ASSERT_RC(hb.rel_rc, 0);
	T_ASSERT_RC(wlk_release(lq), 0);
	cr_assert_eq(t_held_n(b, NULL, 0), 0);
}

/*
 * WLK_ESTATE says the manager was closed. A request dropped from under its
 * waiter while the manager is open was dropped by a repair (its slot was
 * damaged): WLK_ECORRUPT.
 */
Test(manager, request_dropped_by_a_repair_is_ecorrupt_not_estate, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_options t5 = {.timeout_ns = 5 * 1000000000ull};
	struct wlk_seg_header *h;
	struct wlk_seg_request *r;
	struct wlk_lock *la = NULL;
	struct t_holder hb;
	uint32_t damaged = 0;
	size_t size;

	T_ASSERT_RC(wlk_acquire(a, "r", 1, NULL, &la), 0);
	t_holder_start(&hb, b, "r", 1, &t5);
	cr_assert(t_wait_pending(a, "r", 1, 1));
	h = t_segment_map(&size);
	r = (struct wlk_seg_request *)((char *)h + h->off_requests);
	/* Its client generation no longer matches: the repair drops it. */
	for (uint32_t i = 0; i < h->max_requests; i++) {
		if (WLK_WORD_STATE(r[i].word) == WLK_SLOT_PENDING) {
			r[i].client_gen++;
			damaged++;
		}
	}
	cr_assert_eq(damaged, 1);
	__atomic_store_n(&h->needs_repair, 1, __ATOMIC_SEQ_CST);
	cr_assert_eq(t_pending_n(a, "r", 1), 0, "not repaired");
	cr_assert_eq(t_holder_wait_granted(&hb), 0);
	T_ASSERT_RC(hb.acq_rc, WLK_ECORRUPT);
	t_holder_join(&hb);
	T_ASSERT_RC(wlk_release(la), 0);
	T_ASSERT_RC(wlk_manager_validate(a, NULL, NULL), 0);
	munmap(h, size);
}

Test(manager, segment_is_0600_under_umask_000, T_FIX, .timeout = 10)
{
	char path[512];
	struct stat st;
	struct wlk_manager *m;

	umask(0);
	m = open_find(t_origin, NULL, path, sizeof(path));
	cr_assert_eq(stat(path, &st), 0, "stat %s: %s", path, strerror(errno));
	cr_assert_eq(st.st_mode & 07777, 0600, "mode %o", st.st_mode & 07777);
	cr_assert_eq(st.st_uid, geteuid());
	t_close(m);
}

Test(manager, segment_gets_the_permissions_asked_for, T_FIX, .timeout = 10)
{
	struct wlk_manager_options o = { .permissions = 0660 };
	char path[512];
	struct stat st;
	struct wlk_manager *m;

	umask(0);
	m = open_find(t_origin, &o, path, sizeof(path));
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0660, "mode %o", st.st_mode & 07777);
	t_close(m);
}

Test(manager, segment_name_is_fixed_length_and_hides_the_origin, T_FIX,
     .timeout = 10)
{
	char other[WLK_ORIGIN_MAX + 1], p1[512], p2[512];
	struct wlk_manager *a, *b;
	size_t n;

	/* A much longer origin than t_origin, still unique. */
	n = (size_t)snprintf(other, sizeof(other), "%s", t_origin);
	memset(other + n, 'z', 600);
	other[n + 600] = '\0';
	t_track_bucket(other, NULL, NULL);

	a = open_find(t_origin, NULL, p1, sizeof(p1));
	b = open_find(other, NULL, p2, sizeof(p2));
	cr_assert_str_neq(p1, p2);
	cr_assert_eq(strlen(p1), strlen(p2), "%s vs %s", p1, p2);
	cr_assert_null(strstr(p1, "example"), "origin text in %s", p1);
	cr_assert_null(strstr(p1, "https"), "origin text in %s", p1);
	t_close(a);
	t_close(b);
}

Test(manager, managers_of_one_bucket_share_one_mapping, T_FIX, .timeout = 10)
{
	char path[512];
	struct wlk_manager *a, *b;
	size_t n1;

	a = open_find(t_origin, NULL, path, sizeof(path));
	n1 = maps_count(path + strlen(SHM_DIR "/"));
	cr_assert_gt(n1, 0);
	b = t_open();
	cr_assert_eq(maps_count(path + strlen(SHM_DIR "/")), n1,
		     "a second manager mapped the segment again");
	t_close(a);
	t_close(b);
}

Test(manager, segment_with_looser_permissions_than_asked_is_refused, T_FIX,
     .timeout = 10)
{
	struct wlk_manager_options loose = { .permissions = 0666 };
	struct wlk_manager *m = NULL;
	char path[512];

	umask(0);
	m = open_find(t_origin, NULL, path, sizeof(path));
	t_close(m);
	cr_assert_eq(chmod(path, 0666), 0, "chmod: %s", strerror(errno));
	m = NULL;
	T_ASSERT_RC(wlk_manager_open(t_origin, NULL, &m), WLK_ESECURITY);
	cr_assert_null(m);
	/* An opener that asks for those permissions may attach. */
	m = t_open_opts(&loose);
	t_close(m);
}

Test(manager, opening_a_0660_segment_asking_0600_is_refused, T_FIX,
     .timeout = 10)
{
	struct wlk_manager_options grp = { .permissions = 0660 };
	struct wlk_manager *m, *m2 = NULL;
	char path[512];

	umask(0);
	m = open_find(t_origin, &grp, path, sizeof(path));
	t_close(m);
	T_ASSERT_RC(wlk_manager_open(t_origin, NULL, &m2), WLK_ESECURITY);
	cr_assert_null(m2);
}

Test(manager, second_manager_asking_tighter_permissions_is_refused, T_FIX,
     .timeout = 10)
{
	struct wlk_manager_options grp = { .permissions = 0660 };
	struct wlk_manager *m, *m2 = NULL;
	char path[512];

	/* As above, but the 0660 segment is still open in this process. */
	umask(0);
	m = open_find(t_origin, &grp, path, sizeof(path));
	T_ASSERT_RC(wlk_manager_open(t_origin, NULL, &m2), WLK_ESECURITY);
	cr_assert_null(m2);
	t_close(m);
}

Test(manager, opener_may_ask_for_looser_permissions, T_FIX, .timeout = 10)
{
	struct wlk_manager_options loose = { .permissions = 0666 };
	struct wlk_manager *a = t_open();
	struct wlk_manager *b = t_open_opts(&loose);

	assert_shared(a, b);
}

Test(manager, segment_owned_by_another_user_is_refused, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = NULL;
	char path[512];

	if (geteuid() != 0)
		cr_skip_test("needs root to give the segment away");
	m = open_find(t_origin, NULL, path, sizeof(path));
	t_close(m);
	cr_assert_eq(chown(path, 65534, 65534), 0, "chown: %s",
		     strerror(errno));
	m = NULL;
	T_ASSERT_RC(wlk_manager_open(t_origin, NULL, &m), WLK_ESECURITY);
	cr_assert_null(m);
	cr_assert_eq(chown(path, 0, 0), 0);
}

static int child_attach_and_stay(void *arg)
{
	struct t_pipe *p = arg;
	struct wlk_manager *m = NULL;
	char c;

	if (wlk_manager_open(t_origin, NULL, &m) != 0)
		return 1;
	t_put_byte(p[0].wr, 'o');
	(void)t_get(p[1].rd, &c, 1, T_WAIT_MS);
	/* The segment is garbled now: leave without touching it. */
	return 0;
}

Test(manager, corrupt_segment_in_use_is_refused, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = NULL;
	struct t_pipe p[2];
	char path[512], junk[256];
	int fd, rc;
	pid_t pid;

	m = open_find(t_origin, NULL, path, sizeof(path));
	t_close(m);
	/* Another process keeps it attached, so it is not stale. */
	t_pipe_open(&p[0]);
	t_pipe_open(&p[1]);
	pid = t_fork(child_attach_and_stay, p);
	cr_assert_eq(t_get_byte(p[0].rd), 'o', "child did not attach");
	fd = open(path, O_WRONLY);
	cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
	memset(junk, 0xa5, sizeof(junk));
	cr_assert_eq(pwrite(fd, junk, sizeof(junk), 0), (ssize_t)sizeof(junk));
	close(fd);
	m = NULL;
	rc = wlk_manager_open(t_origin, NULL, &m);
	cr_assert(rc == WLK_ECORRUPT || rc == WLK_EFORMAT,
		  "open of a garbled segment: %s", t_ename(rc));
	cr_assert_null(m);
	t_put_byte(p[1].wr, 'q');
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	t_pipe_close(&p[0]);
	t_pipe_close(&p[1]);
}

Test(manager, bucket_remove_is_ebusy_while_open, T_FIX, .timeout = 10)
{
	struct wlk_manager *m = t_open();

	T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), -EBUSY);
	/* Left alone: the bucket still works. */
	assert_shared(m, t_open());
}

Test(manager, bucket_remove_is_enoent_when_absent, T_FIX, .timeout = 10)
{
	T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), -ENOENT);
}

Test(manager, bucket_remove_after_close_removes_the_segment, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m;
	char path[512];

	m = open_find(t_origin, NULL, path, sizeof(path));
	t_close(m);
	cr_assert_eq(access(path, F_OK), 0, "segment gone after close");
	T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), 0);
	cr_assert_neq(access(path, F_OK), 0, "segment still there");
	T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), -ENOENT);
}

Test(manager, bucket_remove_argument_errors, T_FIX, .timeout = 10)
{
	T_ASSERT_RC(wlk_bucket_remove(NULL, NULL), WLK_EINVAL);
	T_ASSERT_RC(wlk_bucket_remove("", NULL), WLK_EINVAL);
}

Test(manager, bucket_remove_uses_bucket_and_partition, T_FIX, .timeout = 10)
{
	struct wlk_manager_options o = { .bucket = "b", .partition = "p" };
	struct wlk_manager *m;

	t_track_bucket(t_origin, "b", "p");
	m = t_open_opts(&o);
	/* The default bucket was never created. */
	T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), -ENOENT);
	T_ASSERT_RC(wlk_bucket_remove(t_origin, &o), -EBUSY);
	t_close(m);
	T_ASSERT_RC(wlk_bucket_remove(t_origin, &o), 0);
}

static int child_hold_bucket_open(void *arg)
{
	struct t_pipe *p = arg;
	struct wlk_manager *m = NULL;
	char c;

	if (wlk_manager_open(t_origin, NULL, &m) != 0)
		return 1;
	t_put_byte(p[0].wr, 'o');
	(void)t_get(p[1].rd, &c, 1, T_WAIT_MS);
	wlk_manager_close(m);
	return 0;
}

Test(manager, bucket_remove_is_ebusy_while_another_process_has_it_open, T_FIX,
     .timeout = 10)
{
	struct t_pipe p[2];
	pid_t pid;

	t_pipe_open(&p[0]);
	t_pipe_open(&p[1]);
	pid = t_fork(child_hold_bucket_open, p);
	cr_assert_eq(t_get_byte(p[0].rd), 'o', "child did not open");
	T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), -EBUSY);
	t_put_byte(p[1].wr, 'q');
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), 0);
	t_pipe_close(&p[0]);
	t_pipe_close(&p[1]);
}

Test(manager, removed_bucket_is_created_afresh, T_FIX, .timeout = 10)
{
	struct wlk_manager_options small = { .max_name_len = 8 };
	struct wlk_manager_options big = { .max_name_len = 64 };
	struct wlk_manager *m;
	struct wlk_lock *l = NULL;

	m = t_open_opts(&small);
	T_ASSERT_RC(wlk_acquire(m, "123456789", 9, NULL, &l),
		    WLK_ENAMETOOLONG);
	t_close(m);
	T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), 0);
	m = t_open_opts(&big);
	T_ASSERT_RC(wlk_acquire(m, "123456789", 9, NULL, &l), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	t_close(m);
}

/* Whether some task waits in /proc/locks for a lock on inode @ino. */
static bool lock_waiter_on(ino_t ino)
{
	char line[256], want[32];
	FILE *f = fopen("/proc/locks", "r");
	bool found = false;

	cr_assert_not_null(f);
	snprintf(want, sizeof(want), ":%lu ", (unsigned long)ino);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, "->") && strstr(line, want);
	fclose(f);
	return found;
}

struct opener {
	const char *origin;
	struct wlk_manager *m;
	int rc;
	atomic_bool done;
};

static void *opener_main(void *arg)
{
	struct opener *op = arg;

	op->rc = wlk_manager_open(op->origin, NULL, &op->m);
	atomic_store(&op->done, true);
	pthread_testcancel();
	return NULL;
}

/*
 * An open waits for a concurrent opener (here: another file description
 * holding the segment's init lock, as an opener stopped mid-attach does).
 * Cancelling the waiting thread must not leave the process's registry
 * locked: later opens of any bucket would hang for good.
 */
Test(manager, cancelling_an_open_does_not_hang_later_opens, T_FIX,
     .timeout = 20)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET,
			    .l_start = WLK_LOCK_INIT, .l_len = 1 };
	struct opener first = { .origin = t_origin }, later = { 0 };
	char path[512], other[256];
	struct timespec until;
	struct stat st;
	pthread_t t;
	void *ret;
	int fd;

	t_close(open_find(t_origin, NULL, path, sizeof(path)));
	fd = open(path, O_RDWR);
	cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
	cr_assert_eq(fcntl(fd, F_OFD_SETLK, &fl), 0, "%s", strerror(errno));
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq(pthread_create(&t, NULL, opener_main, &first), 0);
	for (int i = 0; i < T_WAIT_MS && !lock_waiter_on(st.st_ino); i++)
		t_nap_ms(1);
	cr_assert(lock_waiter_on(st.st_ino), "the open did not wait");
	cr_assert_eq(pthread_cancel(t), 0);
	close(fd); /* the "concurrent opener" goes away */
	cr_assert_eq(pthread_join(t, &ret), 0);
	cr_assert_eq(ret, PTHREAD_CANCELED);
	if (atomic_load(&first.done) && first.rc == 0)
		wlk_manager_close(first.m);

	t_make_origin(other, sizeof(other), "later");
	t_track_bucket(other, NULL, NULL);
	later.origin = other;
	cr_assert_eq(pthread_create(&t, NULL, opener_main, &later), 0);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += T_WAIT_MS / 1000;
	cr_assert_eq(pthread_timedjoin_np(t, NULL, &until), 0,
		     "a later open of another bucket hangs");
	T_ASSERT_RC(later.rc, 0);
	wlk_manager_close(later.m);
}

/*
 * A directory or a symbolic link planted at the segment's name is refused
 * as a file of another owner is (not taken for a bad argument), and the
 * message says so.
 */
Test(manager, non_regular_file_at_the_segment_name_is_esecurity, T_FIX,
     .timeout = 10)
{
	struct wlk_manager *m = NULL;
	char path[512];
	int rc_open, rc_remove;

	t_close(open_find(t_origin, NULL, path, sizeof(path)));
	T_ASSERT_RC(wlk_bucket_remove(t_origin, NULL), 0);
	cr_assert_eq(mkdir(path, 0700), 0, "mkdir: %s", strerror(errno));
	rc_open = wlk_manager_open(t_origin, NULL, &m);
	rc_remove = wlk_bucket_remove(t_origin, NULL);
	rmdir(path);
	T_ASSERT_RC(rc_open, WLK_ESECURITY);
	cr_assert_null(m);
	T_ASSERT_RC(rc_remove, WLK_ESECURITY);
	cr_assert_not_null(strstr(wlk_strerror(WLK_ESECURITY),
				  "not a regular file"));

	cr_assert_eq(symlink("/nonexistent", path), 0, "symlink: %s",
		     strerror(errno));
	rc_open = wlk_manager_open(t_origin, NULL, &m);
	unlink(path);
	T_ASSERT_RC(rc_open, WLK_ESECURITY);
	cr_assert_null(m);
}

/* Control characters (C0 and DEL) are refused in every identifier. */
Test(manager, control_characters_in_identifiers_are_einval, T_FIX,
     .timeout = 10)
{
	static const char *const bad[] = { "a\nb", "\x01", "tab\there",
					   "del\x7f", "\x1f" };
	char origin[512];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct wlk_manager_options o[] = {
			{ .bucket = bad[i] },
			{ .partition = bad[i] },
			{ .client_id = bad[i] },
		};
		struct wlk_manager *m = NULL;

		snprintf(origin, sizeof(origin), "%s%s", t_origin, bad[i]);
		/* Removed in t_fini() should one be created after all. */
		t_track_bucket(origin, NULL, NULL);
		t_track_bucket(t_origin, bad[i], NULL);
		t_track_bucket(t_origin, NULL, bad[i]);
		T_ASSERT_RC(wlk_manager_open(origin, NULL, &m), WLK_EINVAL);
		T_ASSERT_RC(wlk_bucket_remove(origin, NULL), WLK_EINVAL);
		for (size_t k = 0; k < sizeof(o) / sizeof(o[0]); k++)
			T_ASSERT_RC(wlk_manager_open(t_origin, &o[k], &m),
				    WLK_EINVAL);
		cr_assert_null(m, "identifier %zu accepted", i);
	}
}

/* Every other byte is allowed: spaces, '/', UTF-8, any byte >= 0x80. */
Test(manager, other_bytes_in_identifiers_are_allowed, T_FIX, .timeout = 10)
{
	struct wlk_manager_options o = { .bucket = "b /\xc3\xa9\xff",
					 .partition = "p~%n",
					 .client_id = "two words \xff" };
	struct wlk_manager *m;

	t_track_bucket(t_origin, o.bucket, o.partition);
	m = t_open_opts(&o);
	cr_assert_str_eq(wlk_manager_client_id(m), o.client_id);
	t_close(m);
}

/* How the child below ends when the second release goes unnoticed, or
 * when it could not get that far (sanitizers exit 1 or abort). */
#define UNDETECTED 5
#define SETUP_FAILED 20

/*
 * A handle freed by wlk_release() and reused by a later acquire: the
 * second release would release that later lock.
 */
static int child_double_release(void *arg)
{
	struct wlk_manager *a = NULL, *b = NULL;
	struct wlk_lock *first = NULL, *later = NULL;
	int devnull = open("/dev/null", O_WRONLY);

	(void)arg;
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &a) == 0 &&
		      wlk_manager_open(t_origin, NULL, &b) == 0 &&
		      wlk_acquire(a, "a", 1, NULL, &first) == 0 &&
		      wlk_release(first) == 0 &&
		      wlk_acquire(b, "b", 1, NULL, &later) == 0 &&
		      devnull >= 0, SETUP_FAILED);
	/* The sanitizer's report is expected; keep it off the test log. */
	T_CHILD_CHECK(dup2(devnull, STDERR_FILENO) >= 0, SETUP_FAILED);
	(void)wlk_release(first);
	return UNDETECTED;
}

/* AddressSanitizer builds report a second release of a handle. */
Test(manager, double_release_is_reported_under_asan, T_FIX, .timeout = 20)
{
	int rc;

#ifndef __SANITIZE_ADDRESS__
	cr_skip_test("only detected in AddressSanitizer builds");
#endif
	rc = t_wait(t_fork(child_double_release, NULL), T_WAIT_MS);
	cr_assert_neq(rc, SETUP_FAILED, "child could not acquire");
	cr_assert_neq(rc, UNDETECTED, "a second release went unnoticed");
	cr_assert_neq(rc, -1, "child hung");
}
