/* SPDX-License-Identifier: MIT */
/*
 * t_remove.c - shm-inspect rm and gc, and the stale marks of list and
 * check: a bucket in use is refused unless --force; one whose processes
 * all died is stale, listed so, warned about by check (exit 6), and
 * removed by rm without --force and proposed by gc --dry-run. (Here gc
 * would remove the stale segments of every test running beside this one,
 * and of anything else of this user: it is run dry only. tests/tools/gc.sh
 * runs a real gc on a /dev/shm of its own.)
 */
#include <stdlib.h>
#include <string.h>

#include "../common.h"
#include "run.h"

/* Exit codes of shm-inspect (tools/shm-inspect.h, shm-inspect(1)). */
#define EXIT_OPEN 2
#define EXIT_STALE 6
#define EXIT_BUSY 7

/* A child that opens the bucket, takes "x" and dies holding it. */
static int die_holding(void *arg)
{
	struct wlk_manager *m;
	struct wlk_lock *l;

	(void)arg;
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 1);
	T_CHILD_CHECK(wlk_acquire(m, "x", 1, NULL, &l) == 0 && l, 2);
	return 0; /* _exit() without closing: the process is dead */
}

/* The segment's path, from dump --json. */
static char *segment_path(void)
{
	struct run r;
	const struct tj *p;
	struct tj *doc;
	char *path;

	RUN(&r, "dump", "--json", t_origin);
	expect_exit(&r, 0, "dump --json");
	doc = parse_json(&r, "dump --json");
	p = tj_path(doc, "segment", "path", NULL);
	cr_assert(p && p->type == TJ_STR, "%s", r.out);
	path = strndup(p->s, p->len);
	tj_free(doc);
	run_free(&r);
	return path;
}

Test(remove, rm_refuses_a_bucket_in_use_unless_forced, T_FIX, .timeout = 60)
{
	struct wlk_manager *m = t_open();
	struct run r;

	RUN(&r, "rm", t_origin);
	expect_exit(&r, EXIT_BUSY, "rm of a bucket in use");
	cr_assert_not_null(strstr(r.err, "in use by 1 live process"), "%s",
			   r.err);
	run_free(&r);
	RUN_EXIT(0, "dump after the refusal", "dump", t_origin);
	RUN_EXIT(0, "rm --force", "rm", "--force", t_origin);
	RUN_EXIT(EXIT_OPEN, "dump after rm --force", "dump", t_origin);
	t_close(m);
}

Test(remove, rm_of_an_unused_bucket, T_FIX, .timeout = 60)
{
	struct wlk_manager *m = t_open();
	char *path = segment_path();
	struct run r;

	t_close(m);
	RUN(&r, "rm", "--segment", path);
	expect_exit(&r, 0, "rm SEGMENT");
	cr_assert_not_null(strstr(r.out, "removed "), "%s", r.out);
	cr_assert_not_null(strstr(r.out, path), "%s", r.out);
	run_free(&r);
	RUN_EXIT(EXIT_OPEN, "dump after rm", "dump", t_origin);
	RUN_EXIT(EXIT_OPEN, "rm of what is gone", "rm", t_origin);
	free(path);
}

Test(remove, a_bucket_whose_processes_died_is_stale, T_FIX, .timeout = 60)
{
	struct tj *doc;
	const struct tj *segs, *e;
	char *path, *line;
	struct run r;
	size_t i;

	cr_assert_eq(t_wait(t_fork(die_holding, NULL), T_WAIT_MS), 0);
	path = segment_path();

	RUN(&r, "list", "--json");
	expect_exit(&r, 0, "list --json");
	doc = parse_json(&r, "list --json");
	segs = tj_get(doc, "segments");
	for (i = 0, e = NULL; (e = tj_at(segs, i)); i++)
		if (tj_str_is(tj_get(e, "path"), path, strlen(path)))
			break;
	cr_assert_not_null(e, "%s", r.out);
	cr_assert(tj_get(e, "stale") && tj_get(e, "stale")->type == TJ_BOOL &&
			  tj_get(e, "stale")->b,
		  "%s", r.out);
	tj_free(doc);
	run_free(&r);

	RUN(&r, "list");
	expect_exit(&r, 0, "list");
	line = strstr(r.out, strrchr(path, '/') + 1);
	cr_assert_not_null(line, "%s", r.out);
	cr_assert(strstr(line, ",stale") && strstr(line, ",stale") <
						   strchr(line, '\n'),
		  "%s", r.out);
	run_free(&r);

	RUN(&r, "check", t_origin);
	expect_exit(&r, EXIT_STALE, "check of a stale bucket");
	cr_assert_not_null(strstr(r.out, "warning: stale"), "%s", r.out);
	cr_assert_not_null(strstr(r.out, "\"x\" held exclusive by pid"), "%s",
			   r.out);
	run_free(&r);

	RUN(&r, "gc", "--dry-run");
	expect_exit(&r, 0, "gc --dry-run");
	cr_assert_not_null(strstr(r.out, path), "%s", r.out);
	run_free(&r);
	RUN_EXIT(0, "dump after gc --dry-run", "dump", t_origin);

	RUN_EXIT(0, "rm of a stale bucket", "rm", t_origin);
	RUN_EXIT(EXIT_OPEN, "dump after rm", "dump", t_origin);
	free(path);
}
