/* SPDX-License-Identifier: MIT */
/* t_coldstart.c - many processes open a new bucket at once: one segment. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <unistd.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "../common.h"

#define OPENERS 8
#define ROUNDS 100
#define BUCKET "cold"
/* Attempts at making the armed child the segment's creator. */
#define CREATOR_TRIES 10
#define MAX_SHM 4096
/* A child that may not make its own /dev/shm. */
#define SKIP_CODE 77
/* Smaller than a segment of the default geometry. */
#define SMALL_SHM "size=256k"

static const struct wlk_manager_options cold = { .bucket = BUCKET };

/* State shared by the parent and the openers. */
struct arena {
	atomic_int inside;
	atomic_int violations;
	volatile long counter;
};

struct opener {
	struct arena *ar;
	struct t_pipe gate; /* released all at once: EOF when closed */
	struct t_pipe go;   /* the armed child's own start */
	bool armed;
};

/* Take "c" ROUNDS times; inside, nobody else may be. */
static int hammer(struct wlk_manager *m, struct arena *ar)
{
	struct wlk_lock *l = NULL;
	int i;

	for (i = 0; i < ROUNDS; i++) {
		if (wlk_acquire(m, "c", 1, NULL, &l) != 0)
			return 1;
		if (atomic_fetch_add(&ar->inside, 1) != 0)
			atomic_fetch_add(&ar->violations, 1);
		ar->counter = ar->counter + 1;
		atomic_fetch_sub(&ar->inside, 1);
		if (wlk_release(l) != 0)
			return 2;
	}
	return 0;
}

/* Opener: wait at the gate (or for go, if armed), open, hammer, close. */
static int child_open_together(void *arg)
{
	struct opener *o = arg;
	struct wlk_manager *m = NULL;
	char c;

	/* Only the parent may keep the gate shut. */
	close(o->gate.wr);
	if (o->armed) {
		T_CHILD_CHECK(t_get(o->go.rd, &c, 1, T_WAIT_MS) == 0, 10);
		T_CHILD_CHECK(!setenv("WLK_FAILPOINT", "segment_create_mid", 1),
			      11);
	} else {
		/* EOF once the parent closes its end: all go at once. */
		T_CHILD_CHECK(read(o->gate.rd, &c, 1) == 0, 12);
	}
	T_CHILD_CHECK(wlk_manager_open(t_origin, &cold, &m) == 0, 13);
	T_CHILD_CHECK(hammer(m, o->ar) == 0, 14);
	wlk_manager_close(m);
	return 0;
}

/* Names in /dev/shm; their count. */
static size_t shm_list(char (*names)[NAME_MAX + 1], size_t max)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	size_t n = 0;

	cr_assert_not_null(d, "opendir /dev/shm: %s", strerror(errno));
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n < max)
			snprintf(names[n], NAME_MAX + 1, "%s", e->d_name);
		n++;
	}
	closedir(d);
	cr_assert_leq(n, max, "too many files in /dev/shm");
	return n;
}

/* Whether @name is the segment @base or one of its generations. */
static bool of_base(const char *name, const char *base)
{
	size_t len = strlen(base);

	return !strncmp(name, base, len) &&
	       (name[len] == '\0' || name[len] == '~');
}

/* The segment this process maps (it has only one bucket open). */
static void mapped_segment(char *buf, size_t size)
{
	char line[1024];
	FILE *f = fopen("/proc/self/maps", "r");

	buf[0] = '\0';
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, " /dev/shm/wlk");

		if (!p || strstr(line, "(deleted)"))
			continue;
		p += strlen(" /dev/shm/");
		p[strcspn(p, "\n")] = '\0';
		snprintf(buf, size, "%s", p);
		break;
	}
	fclose(f);
	cr_assert_neq(buf[0], '\0', "no segment mapped");
}

/* Child: open the bucket, say which segment it is, remove it. */
static int child_name_probe(void *arg)
{
	struct t_pipe *p = arg;
	struct wlk_manager *m = NULL;
	char line[1024], name[NAME_MAX + 1] = "";
	FILE *f;

	T_CHILD_CHECK(wlk_manager_open(t_origin, &cold, &m) == 0, 10);
	f = fopen("/proc/self/maps", "r");
	T_CHILD_CHECK(f != NULL, 11);
	while (fgets(line, sizeof(line), f)) {
		char *s = strstr(line, " /dev/shm/wlk");

		if (s) {
			s += strlen(" /dev/shm/");
			s[strcspn(s, "\n")] = '\0';
			snprintf(name, sizeof(name), "%s", s);
			break;
		}
	}
	fclose(f);
	wlk_manager_close(m);
	T_CHILD_CHECK(name[0] != '\0', 12);
	T_CHILD_CHECK(wlk_bucket_remove(t_origin, &cold) == 0, 13);
	return t_put(p->wr, name, sizeof(name)) == 0 ? 0 : 14;
}

/*
 * After the openers: the bucket works, passes the validator, and exactly
 * one segment file exists for it, one that did not exist before.
 */
static void check_one_segment(char (*before)[NAME_MAX + 1], size_t nbefore)
{
	static char after[MAX_SHM][NAME_MAX + 1];
	struct wlk_manager *m = t_open_opts(&cold);
	char base[NAME_MAX + 1];
	struct wlk_lock *l = NULL;
	size_t i, n, mine = 0;

	T_ASSERT_RC(wlk_manager_validate(m, NULL, NULL), 0);
	T_ASSERT_RC(wlk_acquire(m, "c", 1, NULL, &l), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
	mapped_segment(base, sizeof(base));
	for (i = 0; i < nbefore; i++)
		cr_assert_not(of_base(before[i], base), "%s existed before",
			      before[i]);
	n = shm_list(after, MAX_SHM);
	for (i = 0; i < n; i++)
		if (of_base(after[i], base))
			mine++;
	cr_assert_eq(mine, 1, "%zu segment files for one bucket (%s)", mine,
		     base);
}

Test(coldstart, eight_processes_create_one_segment, T_FIX, .timeout = 60)
{
	static char before[MAX_SHM][NAME_MAX + 1];
	struct arena *ar = t_shared_alloc(sizeof(*ar));
	struct opener o = { .ar = ar };
	pid_t pids[OPENERS];
	size_t nbefore;
	int i, st;

	t_track_bucket(t_origin, BUCKET, NULL);
	nbefore = shm_list(before, MAX_SHM);
	t_pipe_open(&o.gate);
	for (i = 0; i < OPENERS; i++)
		pids[i] = t_fork(child_open_together, &o);
	t_pipe_close(&o.gate);
	for (i = 0; i < OPENERS; i++) {
		st = t_wait(pids[i], 30000);
		cr_assert_eq(st, 0, "opener %d: %d", i, st);
	}
	cr_assert_eq(atomic_load(&ar->violations), 0, "exclusion broken");
	cr_assert_eq(ar->counter, OPENERS * ROUNDS, "lost updates");
	check_one_segment(before, nbefore);
	t_shared_free(ar, sizeof(*ar));
}

/*
 * The first opener is killed half way through creating the segment
 * (segment_create_mid) while the others are already opening: one of them
 * creates it again, and all of them succeed.
 */
Test(coldstart, creator_killed_mid_initialisation, T_FIX, .timeout = 120)
{
	static char before[MAX_SHM][NAME_MAX + 1];
	struct arena *ar = t_shared_alloc(sizeof(*ar));
	char name[NAME_MAX + 1], path[NAME_MAX + 16];
	struct opener o = { .ar = ar };
	pid_t probe, armed, pids[OPENERS - 1];
	int i, st = 0, try, others;
	struct t_pipe p;
	struct stat sb;
	uint64_t end;
	size_t nbefore;

#ifndef WLK_ENABLE_FAILPOINTS
	cr_skip_test("fail points are not compiled in (--enable-failpoints)");
#endif
	t_track_bucket(t_origin, BUCKET, NULL);
	/* Learn the segment's name, so as to see its creation begin. */
	t_pipe_open(&p);
	probe = t_fork(child_name_probe, &p);
	cr_assert_eq(t_wait(probe, T_WAIT_MS), 0, "name probe failed");
	cr_assert_eq(t_get(p.rd, name, sizeof(name), T_WAIT_MS), 0);
	t_pipe_close(&p);
	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	nbefore = shm_list(before, MAX_SHM);

	for (try = 0; try < CREATOR_TRIES; try++) {
		cr_assert_neq(stat(path, &sb), 0, "%s exists already", path);
		ar->counter = 0;
		t_pipe_open(&o.gate);
		t_pipe_open(&o.go);
		o.armed = true;
		armed = t_fork(child_open_together, &o);
		o.armed = false;
		for (i = 0; i < OPENERS - 1; i++)
			pids[i] = t_fork(child_open_together, &o);
		/* Start the armed one; once its file exists, the rest. */
		cr_assert_eq(t_put_byte(o.go.wr, 'g'), 0);
		end = t_now_ns() + (uint64_t)T_WAIT_MS * 1000000u;
		while (stat(path, &sb) != 0 && t_now_ns() < end)
			;
		t_pipe_close(&o.gate);
		t_pipe_close(&o.go);
		st = t_wait(armed, 30000);
		for (i = 0; i < OPENERS - 1; i++) {
			int rc = t_wait(pids[i], 30000);

			cr_assert_eq(rc, 0, "opener %d: %d", i, rc);
		}
		if (st == 128 + SIGKILL)
			break;
		/* Another opener won the race to create: again. */
		cr_assert_eq(st, 0, "armed opener: %d", st);
		T_ASSERT_RC(wlk_bucket_remove(t_origin, &cold), 0);
	}
	cr_assert_eq(st, 128 + SIGKILL, "the armed opener never created it");
	others = OPENERS - 1;
	cr_assert_eq(atomic_load(&ar->violations), 0, "exclusion broken");
	cr_assert_eq(ar->counter, others * ROUNDS, "lost updates");
	check_one_segment(before, nbefore);
	t_shared_free(ar, sizeof(*ar));
}

/*
 * In a mount namespace of its own, with a /dev/shm too small for the
 * segment: the open fails with -ENOSPC and leaves no file behind.
 */
static int child_full_shm(void *arg)
{
	struct wlk_manager *m = NULL;
	struct dirent *e;
	int rc, left = 0;
	DIR *d;

	(void)arg;
	if (unshare(CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", "/dev/shm", "tmpfs", 0, SMALL_SHM) < 0)
		return SKIP_CODE;
	rc = wlk_manager_open(t_origin, NULL, &m);
	T_CHILD_CHECK(rc == -ENOSPC, 2);
	d = opendir("/dev/shm");
	T_CHILD_CHECK(d, 3);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			left++;
	closedir(d);
	return left ? 4 : 0;
}

Test(coldstart, enospc_leaves_no_file_behind, T_FIX, .timeout = 20)
{
	int rc = t_wait(t_fork(child_full_shm, NULL), T_WAIT_MS);

	if (rc == SKIP_CODE)
		cr_skip_test("cannot mount a tmpfs on /dev/shm here");
	cr_assert_neq(rc, 2, "the open did not fail with -ENOSPC");
	cr_assert_neq(rc, 4, "a file was left in /dev/shm");
	cr_assert_eq(rc, 0, "child: %d", rc);
}
