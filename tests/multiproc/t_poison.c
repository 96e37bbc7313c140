/* SPDX-License-Identifier: MIT */
/*
 * t_poison.c - a segment that cannot be repaired is poisoned: its users get
 * WLK_ECORRUPT, and new openers get a fresh generation that works.
 *
 * The test scribbles on the header geometry of a segment it is attached to
 * (as a buggy co-tenant would) and flags it for repair; repair refuses a
 * header that no longer matches the geometry validated at attach.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common.h"
#include "../../lib/layout.h"

/* The /dev/shm path of the first weblocks segment this process maps. */
static bool mapped_segment(char *path, size_t size)
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

/* Change the header as a buggy co-tenant would, and ask for repair. */
static void scribble(const char *path)
{
	int fd = open(path, O_RDWR);
	struct wlk_seg_header *h;

	cr_assert_geq(fd, 0, "open %s", path);
	h = mmap(NULL, WLK_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fd, 0);
	cr_assert_neq(h, MAP_FAILED);
	close(fd);
	h->max_requests += 1;
	__atomic_store_n(&h->needs_repair, 1, __ATOMIC_SEQ_CST);
	munmap(h, WLK_HEADER_SIZE);
}

/*
 * A new process opens the bucket when told and holds "z" until told to let
 * go. It is forked before the bucket is opened, so that it inherits no file
 * descriptor of generation 0 (which would keep that attached).
 */
static int newcomer(void *arg)
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

Test(poison, unrepairable_segment_is_replaced_by_a_new_generation,
     .init = t_init, .timeout = 20)
{
	struct t_pipe p[2];
	struct wlk_manager *m;
	struct wlk_lock *l;
	struct wlk_options ifa = {.if_available = true};
	char path[512], gen1[600];
	pid_t pid;
	int rc;

	t_pipe_open(&p[0]);
	t_pipe_open(&p[1]);
	pid = t_fork(newcomer, p);
	rc = wlk_manager_open(t_origin, NULL, &m);
	cr_assert_eq(rc, 0, "open: %s", t_ename(rc));
	cr_assert(mapped_segment(path, sizeof(path)));
	scribble(path);

	rc = wlk_acquire(m, "x", 1, NULL, &l);
	cr_assert_eq(rc, WLK_ECORRUPT, "acquire on a poisoned segment: %s",
		     t_ename(rc));
	rc = wlk_acquire(m, "x", 1, NULL, &l);
	cr_assert_eq(rc, WLK_ECORRUPT, "and it stays poisoned: %s",
		     t_ename(rc));

	/* This process still has generation 0 attached: a newcomer cannot
	 * re-create it, so it moves on to generation 1. */
	cr_assert_eq(t_put_byte(p[1].wr, 'o'), 0);
	cr_assert_eq(t_get_byte(p[0].rd), 'h', "newcomer did not get \"z\"");
	snprintf(gen1, sizeof(gen1), "%s~1", path);
	cr_assert_eq(access(gen1, F_OK), 0, "no %s", gen1);

	/* Generation 0 is unused now, but must not come back to life
	 * beside generation 1: a new manager joins the newcomer's. */
	wlk_manager_close(m);
	rc = wlk_manager_open(t_origin, NULL, &m);
	cr_assert_eq(rc, 0, "reopen: %s", t_ename(rc));
	rc = wlk_acquire(m, "z", 1, &ifa, &l);
	cr_assert_eq(rc, 0, "if_available: %s", t_ename(rc));
	cr_assert_null(l, "\"z\" is free: the bucket split in two");
	cr_assert_eq(t_put_byte(p[1].wr, 'r'), 0);
	rc = t_wait(pid, 10000);
	cr_assert_eq(rc, 0, "newcomer: exit status %#x", rc);
	wlk_manager_close(m);

	/* Removal takes every generation with it. */
	rc = wlk_bucket_remove(t_origin, NULL);
	cr_assert_eq(rc, 0, "remove: %s", t_ename(rc));
	cr_assert_neq(access(path, F_OK), 0);
	cr_assert_neq(access(gen1, F_OK), 0);
	t_pipe_close(&p[0]);
	t_pipe_close(&p[1]);
}
