/* SPDX-License-Identifier: MIT */
/*
 * t_inspect.c - shm-inspect run as a program against live, dead and
 * damaged segments: its text, its JSON (parsed strictly) and exit codes.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "../common.h"
#include "testing.h"
#include "weblocks/inspect.h"
#include "tjson.h"
#include "run.h"

/* ---- processes holding and queueing locks ---- */

struct kid {
	struct t_pipe up, down;
	const char *client_id;
	const char *name;
	size_t len;
	enum wlk_mode mode;
};

static void kid_open(struct kid *k, const char *client_id, const char *name,
		     enum wlk_mode mode)
{
	memset(k, 0, sizeof(*k));
	t_pipe_open(&k->up);
	t_pipe_open(&k->down);
	k->client_id = client_id;
	k->name = name;
	k->len = strlen(name);
	k->mode = mode;
}

static void kid_close(struct kid *k)
{
	t_pipe_close(&k->up);
	t_pipe_close(&k->down);
}

/* Child: take the lock (waiting if need be), send its token, hold it
 * until told to release. */
static int child_lock(void *arg)
{
	struct kid *k = arg;
	struct wlk_manager_options mo = {.client_id = k->client_id};
	struct wlk_options o = {.mode = k->mode};
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;
	uint64_t token;
	char c;

	T_CHILD_CHECK(wlk_manager_open(t_origin, &mo, &m) == 0, 10);
	T_CHILD_CHECK(wlk_acquire(m, k->name, k->len, &o, &l) == 0, 11);
	token = wlk_lock_token(l);
	T_CHILD_CHECK(t_put(k->up.wr, &token, sizeof(token)) == 0, 12);
	T_CHILD_CHECK(t_get(k->down.rd, &c, 1, 4 * T_WAIT_MS) == 0, 13);
	T_CHILD_CHECK(wlk_release(l) == 0, 14);
	wlk_manager_close(m);
	return 0;
}

static uint64_t kid_token(struct kid *k)
{
	uint64_t token = 0;

	cr_assert_eq(t_get(k->up.rd, &token, sizeof(token), T_WAIT_MS), 0,
		     "%s: no grant", k->client_id);
	return token;
}

/* ---- JSON lookups ---- */

static const struct tj *find_name(const struct tj *doc, const char *name,
				  size_t len)
{
	const struct tj *names = tj_get(doc, "names");

	for (size_t i = 0; tj_at(names, i); i++)
		if (tj_str_is(tj_get(tj_at(names, i), "name"), name, len))
			return tj_at(names, i);
	return NULL;
}

static const struct tj *find_agent(const struct tj *doc, pid_t pid)
{
	const struct tj *agents = tj_get(doc, "agents");

	for (size_t i = 0; tj_at(agents, i); i++)
		if (tj_u64(tj_get(tj_at(agents, i), "pid")) == (uint64_t)pid)
			return tj_at(agents, i);
	return NULL;
}

static const struct tj *find_listed(const struct tj *doc, const char *key,
				    const char *value)
{
	const struct tj *segs = tj_get(doc, "segments");

	for (size_t i = 0; tj_at(segs, i); i++)
		if (tj_str_is(tj_get(tj_at(segs, i), key), value, SIZE_MAX))
			return tj_at(segs, i);
	return NULL;
}

/* A request object is @mode, by @pid as @client_id. */
static void expect_req(const struct tj *q, const char *mode, pid_t pid,
		       const char *client_id)
{
	cr_assert_not_null(q);
	cr_assert(tj_str_is(tj_get(q, "mode"), mode, SIZE_MAX));
	cr_assert_eq(tj_u64(tj_get(q, "pid")), (uint64_t)pid);
	cr_assert(tj_str_is(tj_get(q, "client_id"), client_id, SIZE_MAX),
		  "client_id is not %s", client_id);
}

/* The flat array @a is exactly the @n numbers of @want. */
static void expect_slots(const struct tj *a, const uint64_t *want, size_t n)
{
	cr_assert(a && a->type == TJ_ARR);
	cr_assert_eq(a->n, n, "%zu slots, want %zu", a->n, n);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(tj_u64(tj_at(a, i)), want[i]);
}

/* The line of @text containing @needle (copied into @buf), or "". */
static const char *line_with(const char *text, const char *needle,
			     char *buf, size_t size)
{
	const char *p = strstr(text, needle), *b, *e;

	if (!p)
		return "";
	for (b = p; b > text && b[-1] != '\n'; b--)
		;
	e = strchr(p, '\n');
	snprintf(buf, size, "%.*s", (int)(e ? e - b : (ptrdiff_t)strlen(b)),
		 b);
	return buf;
}

Test(inspect, live_holders_and_queue_in_text_and_json, T_FIX, .timeout = 60)
{
	struct wlk_manager *m = t_open();
	struct kid ka, kb, kc, kd;
	pid_t pa, pb, pc, pd;
	uint64_t ta, td, held_slot, b_slot;
	const struct tj *r, *held, *pend, *s, *seg;
	struct tj *doc;
	struct run run;
	char line[512], want[256];
	const char *locks;

	kid_open(&ka, "holder-A", "r", WLK_EXCLUSIVE);
	kid_open(&kb, "waiter-B", "r", WLK_EXCLUSIVE);
	kid_open(&kc, "waiter-C", "r", WLK_SHARED);
	kid_open(&kd, "reader-D", "s", WLK_SHARED);
	pa = t_fork(child_lock, &ka);
	ta = kid_token(&ka);
	pb = t_fork(child_lock, &kb);
	cr_assert(t_wait_pending(m, "r", 1, 1));
	pc = t_fork(child_lock, &kc);
	cr_assert(t_wait_pending(m, "r", 1, 2));
	pd = t_fork(child_lock, &kd);
	td = kid_token(&kd);

	/* Text: holder, then the queue in order, then who blocks whom. */
	RUN(&run, "dump", t_origin);
	expect_exit(&run, 0, "dump");
	expect_clean_text(run.out, run.out_len, "dump");
	locks = strstr(run.out, "\nLocks: 2 held, 2 pending, 0 stolen");
	cr_assert_not_null(locks, "%s", run.out);
	snprintf(want, sizeof(want), "pid %d \"holder-A\", token %llu", pa,
		 (unsigned long long)ta);
	cr_assert(strstr(line_with(locks, want, line, sizeof(line)),
			 "    held       exclusive"), "%s", run.out);
	snprintf(want, sizeof(want), "pid %d \"waiter-B\", waited", pb);
	cr_assert(strstr(line_with(locks, want, line, sizeof(line)),
			 "    pending #0 exclusive"), "%s", run.out);
	snprintf(want, sizeof(want), "pid %d \"waiter-C\", waited", pc);
	cr_assert(strstr(line_with(locks, want, line, sizeof(line)),
			 "    pending #1 shared"), "%s", run.out);
	cr_assert_lt(strstr(locks, "\"waiter-B\", waited"),
		     strstr(locks, "\"waiter-C\", waited"));
	snprintf(want, sizeof(want),
		 "\"waiter-C\" (shared, #1 on \"r\") waits for pid %d "
		 "\"holder-A\" (holds exclusive, token %llu); 1 request ahead: "
		 "pid %d \"waiter-B\"",
		 pa, (unsigned long long)ta, pb);
	cr_assert_not_null(strstr(run.out, want), "%s", run.out);
	run_free(&run);

	/* JSON, unlocked and locked. */
	for (int locked = 0; locked < 2; locked++) {
		if (locked)
			RUN(&run, "dump", "--json", "--locked", t_origin);
		else
			RUN(&run, "dump", t_origin, "--json");
		expect_exit(&run, 0, "dump --json");
		doc = parse_json(&run, "dump --json");
		seg = tj_get(doc, "segment");
		cr_assert(tj_str_is(tj_get(doc, "command"), "dump", SIZE_MAX));
		cr_assert(tj_str_is(tj_get(seg, "origin"), t_origin,
				    SIZE_MAX));
		cr_assert(tj_str_is(tj_get(seg, "bucket"), "default",
				    SIZE_MAX));
		cr_assert(tj_str_is(tj_get(seg, "partition"), "", 0));
		cr_assert(tj_str_is(tj_get(seg, "state"), "ok", SIZE_MAX));
		cr_assert_eq(tj_get(seg, "locked")->b, locked);
		cr_assert_eq(tj_u64(tj_path(seg, "tables", "requests", "used",
					    NULL)), 4);
		cr_assert_eq(tj_u64(tj_path(seg, "tables", "agents", "used",
					    NULL)), 5);
		cr_assert_geq(tj_u64(tj_get(seg, "last_token")), td);

		r = find_name(doc, "r", 1);
		cr_assert_not_null(r);
		cr_assert(tj_str_is(tj_get(r, "name_hex"), "72", SIZE_MAX));
		held = tj_get(r, "held");
		pend = tj_get(r, "pending");
		cr_assert_eq(held->n, 1);
		cr_assert_eq(pend->n, 2);
		expect_req(tj_at(held, 0), "exclusive", pa, "holder-A");
		cr_assert_eq(tj_u64(tj_get(tj_at(held, 0), "token")), ta);
		cr_assert(tj_str_is(tj_get(tj_at(held, 0), "liveness"),
				    "alive", SIZE_MAX));
		cr_assert_neq(tj_u64(tj_get(tj_at(held, 0), "held_ns")),
			      UINT64_MAX);
		held_slot = tj_u64(tj_get(tj_at(held, 0), "slot"));
		expect_req(tj_at(pend, 0), "exclusive", pb, "waiter-B");
		expect_req(tj_at(pend, 1), "shared", pc, "waiter-C");
		cr_assert_eq(tj_u64(tj_get(tj_at(pend, 0), "position")), 0);
		cr_assert_eq(tj_u64(tj_get(tj_at(pend, 1), "position")), 1);
		cr_assert_neq(tj_u64(tj_get(tj_at(pend, 1), "waited_ns")),
			      UINT64_MAX);
		b_slot = tj_u64(tj_get(tj_at(pend, 0), "slot"));
		expect_slots(tj_path(tj_at(pend, 0), "blocked_by", "holders",
				     NULL), &held_slot, 1);
		expect_slots(tj_path(tj_at(pend, 0), "blocked_by", "ahead",
				     NULL), NULL, 0);
		expect_slots(tj_path(tj_at(pend, 1), "blocked_by", "holders",
				     NULL), &held_slot, 1);
		expect_slots(tj_path(tj_at(pend, 1), "blocked_by", "ahead",
				     NULL), &b_slot, 1);

		s = find_name(doc, "s", 1);
		cr_assert_not_null(s);
		cr_assert_eq(tj_get(s, "held")->n, 1);
		cr_assert_eq(tj_get(s, "pending")->n, 0);
		expect_req(tj_at(tj_get(s, "held"), 0), "shared", pd,
			   "reader-D");
		cr_assert_eq(tj_u64(tj_get(tj_at(tj_get(s, "held"), 0),
					   "token")), td);
		cr_assert_eq(tj_get(doc, "stolen")->n, 0);
		cr_assert(tj_str_is(tj_get(find_agent(doc, pb), "liveness"),
				    "alive", SIZE_MAX));
		cr_assert(tj_str_is(tj_at(tj_get(find_agent(doc, pc),
						 "client_ids"), 0),
				    "waiter-C", SIZE_MAX));
		tj_free(doc);
		run_free(&run);
	}

	/* The listing has the bucket, with its counts. */
	RUN(&run, "list", "--json");
	expect_exit(&run, 0, "list --json");
	doc = parse_json(&run, "list --json");
	seg = find_listed(doc, "origin", t_origin);
	cr_assert_not_null(seg, "%s", run.out);
	cr_assert_eq(tj_get(seg, "ok")->b, true);
	cr_assert_eq(tj_u64(tj_get(seg, "held")), 2);
	cr_assert_eq(tj_u64(tj_get(seg, "pending")), 2);
	cr_assert_eq(tj_u64(tj_path(seg, "agents", "alive", NULL)), 5);
	cr_assert_eq(tj_u64(tj_path(seg, "agents", "dead", NULL)), 0);
	tj_free(doc);
	run_free(&run);
	RUN(&run, "list");
	expect_exit(&run, 0, "list");
	expect_clean_text(run.out, run.out_len, "list");
	cr_assert_not_null(strstr(run.out, t_origin));
	run_free(&run);

	RUN(&run, "check", t_origin);
	expect_exit(&run, 0, "check");
	cr_assert_not_null(strstr(run.out, ": ok"), "%s", run.out);
	run_free(&run);

	/* Hand over down the queue, then let everyone go. */
	t_put_byte(ka.down.wr, 'r');
	kid_token(&kb);
	t_put_byte(kb.down.wr, 'r');
	kid_token(&kc);
	t_put_byte(kc.down.wr, 'r');
	t_put_byte(kd.down.wr, 'r');
	cr_assert_eq(t_wait(pa, T_WAIT_MS), 0);
	cr_assert_eq(t_wait(pb, T_WAIT_MS), 0);
	cr_assert_eq(t_wait(pc, T_WAIT_MS), 0);
	cr_assert_eq(t_wait(pd, T_WAIT_MS), 0);
	kid_close(&ka);
	kid_close(&kb);
	kid_close(&kc);
	kid_close(&kd);
}

/* Who blocks whom: a shared request behind a shared one is blocked by
 * the exclusive holder only, not by the shared request ahead of it, with
 * which it will be granted. */
Test(inspect, a_shared_request_is_blocked_only_by_conflicting_ones, T_FIX,
     .timeout = 60)
{
	struct wlk_manager *m = t_open();
	struct kid ka, kb, kc;
	const struct tj *pend;
	struct tj *doc;
	struct run run;
	pid_t pa, pb, pc;
	uint64_t ta;
	char want[256];

	kid_open(&ka, "holder-A", "r", WLK_EXCLUSIVE);
	kid_open(&kb, "reader-B", "r", WLK_SHARED);
	kid_open(&kc, "reader-C", "r", WLK_SHARED);
	pa = t_fork(child_lock, &ka);
	ta = kid_token(&ka);
	pb = t_fork(child_lock, &kb);
	cr_assert(t_wait_pending(m, "r", 1, 1));
	pc = t_fork(child_lock, &kc);
	cr_assert(t_wait_pending(m, "r", 1, 2));

	RUN(&run, "dump", t_origin);
	expect_exit(&run, 0, "dump");
	snprintf(want, sizeof(want),
		 "\"reader-C\" (shared, #1 on \"r\") waits for pid %d "
		 "\"holder-A\" (holds exclusive, token %llu)\n",
		 pa, (unsigned long long)ta);
	cr_assert_not_null(strstr(run.out, want), "%s", run.out);
	run_free(&run);

	RUN(&run, "dump", "--json", t_origin);
	expect_exit(&run, 0, "dump --json");
	doc = parse_json(&run, "dump --json");
	pend = tj_get(find_name(doc, "r", 1), "pending");
	cr_assert_eq(pend->n, 2);
	expect_slots(tj_path(tj_at(pend, 1), "blocked_by", "ahead", NULL),
		     NULL, 0);
	tj_free(doc);
	run_free(&run);

	/* The release grants both readers at once. */
	t_put_byte(ka.down.wr, 'r');
	kid_token(&kb);
	kid_token(&kc);
	t_put_byte(kb.down.wr, 'r');
	t_put_byte(kc.down.wr, 'r');
	cr_assert_eq(t_wait(pa, T_WAIT_MS), 0);
	cr_assert_eq(t_wait(pb, T_WAIT_MS), 0);
	cr_assert_eq(t_wait(pc, T_WAIT_MS), 0);
	kid_close(&ka);
	kid_close(&kb);
	kid_close(&kc);
}

/* Child: take "x" as "doomed", send the token, then wait to be killed. */
static int child_doomed(void *arg)
{
	struct kid *k = arg;
	struct wlk_manager_options mo = {.client_id = "doomed"};
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;
	uint64_t token;

	T_CHILD_CHECK(wlk_manager_open(t_origin, &mo, &m) == 0, 10);
	T_CHILD_CHECK(wlk_acquire(m, "x", 1, NULL, &l) == 0, 11);
	token = wlk_lock_token(l);
	T_CHILD_CHECK(t_put(k->up.wr, &token, sizeof(token)) == 0, 12);
	for (;;)
		pause();
}

/* Child: open the bucket, say so, then sit idle until told to go. */
static int child_idle(void *arg)
{
	struct kid *k = arg;
	struct wlk_manager_options mo = {.client_id = "bystander"};
	struct wlk_manager *m = NULL;
	char c;

	T_CHILD_CHECK(wlk_manager_open(t_origin, &mo, &m) == 0, 10);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'o') == 0, 11);
	T_CHILD_CHECK(t_get(k->down.rd, &c, 1, 4 * T_WAIT_MS) == 0, 12);
	wlk_manager_close(m);
	return 0;
}

/* Start a holder of "x" that dies; its pid, and its token in *@token. */
static pid_t doomed_holder(struct kid *k, uint64_t *token)
{
	pid_t pid;

	kid_open(k, "doomed", "x", WLK_EXCLUSIVE);
	pid = t_fork(child_doomed, k);
	*token = kid_token(k);
	kill(pid, SIGKILL);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 128 + SIGKILL);
	return pid;
}

/*
 * An idle bystander keeps the segment attached; nobody else opens the
 * bucket, requests or queries, so nobody reaps the dead holder: the dump
 * shows it dead with its lock; check --repair reaps it.
 */
Test(inspect, dead_agent_shown_dead_then_reaped_by_repair, T_FIX,
     .timeout = 60)
{
	const struct tj *x, *a;
	struct kid k, idle;
	struct tj *doc;
	struct run run;
	uint64_t token;
	char want[128];
	pid_t pid, pi;

	kid_open(&idle, "bystander", "", WLK_EXCLUSIVE);
	pi = t_fork(child_idle, &idle);
	cr_assert_eq(t_get_byte(idle.up.rd), 'o');
	pid = doomed_holder(&k, &token);

	RUN(&run, "dump", "--json", t_origin);
	expect_exit(&run, 0, "dump --json");
	doc = parse_json(&run, "dump --json");
	a = find_agent(doc, pid);
	cr_assert_not_null(a, "%s", run.out);
	cr_assert(tj_str_is(tj_get(a, "liveness"), "dead", SIZE_MAX));
	cr_assert(tj_str_is(tj_get(find_agent(doc, pi), "liveness"), "alive",
			    SIZE_MAX));
	x = find_name(doc, "x", 1);
	cr_assert_not_null(x);
	expect_req(tj_at(tj_get(x, "held"), 0), "exclusive", pid, "doomed");
	cr_assert(tj_str_is(tj_get(tj_at(tj_get(x, "held"), 0), "liveness"),
			    "dead", SIZE_MAX));
	cr_assert_eq(tj_u64(tj_get(tj_at(tj_get(x, "held"), 0), "token")),
		     token);
	tj_free(doc);
	run_free(&run);

	RUN(&run, "dump", t_origin);
	expect_exit(&run, 0, "dump");
	snprintf(want, sizeof(want), "pid %d, dead, clients \"doomed\"", pid);
	cr_assert_not_null(strstr(run.out, want), "%s", run.out);
	snprintf(want, sizeof(want), "pid %d \"doomed\" (dead), token %llu",
		 pid, (unsigned long long)token);
	cr_assert_not_null(strstr(run.out, want), "%s", run.out);
	run_free(&run);

	RUN(&run, "list", "--json");
	expect_exit(&run, 0, "list --json");
	doc = parse_json(&run, "list --json");
	a = find_listed(doc, "origin", t_origin);
	cr_assert_eq(tj_u64(tj_path(a, "agents", "dead", NULL)), 1);
	cr_assert_eq(tj_u64(tj_path(a, "agents", "alive", NULL)), 1);
	cr_assert_eq(tj_u64(tj_get(a, "held")), 1);
	tj_free(doc);
	run_free(&run);

	/* A dead agent not reaped yet is no violation, but a lock it holds
	 * is worth a warning and its own exit status, 6. */
	RUN(&run, "check", t_origin);
	expect_exit(&run, 6, "check with a dead holder");
	snprintf(want, sizeof(want),
		 ": warning: \"x\" held exclusive by pid %d, which is dead",
		 pid);
	cr_assert_not_null(strstr(run.out, want), "%s", run.out);
	cr_assert_null(strstr(run.out, "stale"), "a live bystander: %s",
		       run.out);
	run_free(&run);

	RUN(&run, "check", "--repair", t_origin);
	expect_exit(&run, 0, "check --repair");
	snprintf(want, sizeof(want),
		 "repaired: 1 dead agent reaped (pid %d); held 1 -> 0", pid);
	cr_assert_not_null(strstr(run.out, want), "%s", run.out);
	cr_assert_not_null(strstr(run.out, ": ok after repair"), "%s",
			   run.out);
	run_free(&run);

	RUN(&run, "dump", "--json", t_origin);
	expect_exit(&run, 0, "dump --json after repair");
	doc = parse_json(&run, "dump --json after repair");
	cr_assert_null(find_name(doc, "x", 1), "%s", run.out);
	cr_assert_null(find_agent(doc, pid));
	cr_assert_not_null(find_agent(doc, pi));
	cr_assert_eq(tj_u64(tj_path(doc, "segment", "reaped_agents", NULL)), 1);
	tj_free(doc);
	run_free(&run);
	t_put_byte(idle.down.wr, 'q');
	cr_assert_eq(t_wait(pi, T_WAIT_MS), 0);
	kid_close(&idle);
	kid_close(&k);
}

/* With nobody attached, the library's opener re-initialises instead. */
Test(inspect, repair_with_nobody_attached_reinitialises, T_FIX,
     .timeout = 60)
{
	struct run run;
	struct kid k;
	uint64_t token;
	char want[160];
	pid_t pid;

	pid = doomed_holder(&k, &token);
	RUN(&run, "check", "--repair", t_origin);
	expect_exit(&run, 0, "check --repair");
	snprintf(want, sizeof(want),
		 "re-initialised: 1 dead agent dropped (pid %d); held 1 -> 0",
		 pid);
	cr_assert_not_null(strstr(run.out, want), "%s", run.out);
	run_free(&run);
	kid_close(&k);
}

/* The names of the escaping test: bytes, text form, JSON string. */
static const struct {
	const char *bytes;
	size_t len;
	const char *text;
	const char *json; /* decoded; NULL: same as bytes */
	size_t json_len;
} odd_names[] = {
	{"a\0b", 3, "\"a\\x00b\"", NULL, 0},
	{"line\nbreak", 10, "\"line\\nbreak\"", NULL, 0},
	{"q\"uote", 6, "\"q\\\"uote\"", NULL, 0},
	{"back\\slash", 10, "\"back\\\\slash\"", NULL, 0},
	{"\x1b[31mred\r", 9, "\"\\x1b[31mred\\r\"", NULL, 0},
	{"tab\tdel\x7f", 8, "\"tab\\tdel\\x7f\"", NULL, 0},
	{"caf\xc3\xa9", 5, "\"caf\\xc3\\xa9\"", NULL, 0},
	/* Bytes of no valid UTF-8 sequence: each byte b becomes U+00bb. */
	{"\xff\xfe bad", 6, "\"\\xff\\xfe bad\"", "\xc3\xbf\xc3\xbe bad", 8},
	{"\xed\xa0\x80!", 4, "\"\\xed\\xa0\\x80!\"",
	 "\xc3\xad\xc2\xa0\xc2\x80!", 7},
	{"\xc3", 1, "\"\\xc3\"", "\xc3\x83", 2},
	{"", 0, "\"\"", NULL, 0},
};

static void hex_of(char *buf, const char *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sprintf(buf + 2 * i, "%02x", (unsigned char)b[i]);
	buf[2 * n] = '\0';
}

Test(inspect, odd_names_escaped_in_text_and_exact_in_json, T_FIX,
     .timeout = 60)
{
	enum { N = sizeof(odd_names) / sizeof(odd_names[0]) };
	struct wlk_manager *m = t_open();
	struct wlk_lock *locks[N];
	struct tj *doc;
	struct run run;
	char hex[64];

	for (size_t i = 0; i < N; i++)
		T_ASSERT_RC(wlk_acquire(m, odd_names[i].bytes, odd_names[i].len,
					NULL, &locks[i]), 0);
	RUN(&run, "dump", t_origin);
	expect_exit(&run, 0, "dump");
	expect_clean_text(run.out, run.out_len, "dump");
	for (size_t i = 0; i < N; i++) {
		char want[128];

		snprintf(want, sizeof(want), "\n  %s\n    held ",
			 odd_names[i].text);
		cr_assert_not_null(strstr(run.out, want), "no %s in\n%s",
				   odd_names[i].text, run.out);
	}
	run_free(&run);

	RUN(&run, "dump", "--json", t_origin);
	expect_exit(&run, 0, "dump --json");
	doc = parse_json(&run, "dump --json");
	cr_assert_eq(tj_get(doc, "names")->n, N);
	for (size_t i = 0; i < N; i++) {
		const char *js = odd_names[i].json ? odd_names[i].json :
						     odd_names[i].bytes;
		size_t jl = odd_names[i].json ? odd_names[i].json_len :
						odd_names[i].len;
		const struct tj *e = find_name(doc, js, jl);

		hex_of(hex, odd_names[i].bytes, odd_names[i].len);
		cr_assert_not_null(e, "no name %s", odd_names[i].text);
		cr_assert(tj_str_is(tj_get(e, "name_hex"), hex, SIZE_MAX),
			  "%s: name_hex", odd_names[i].text);
		cr_assert_eq(tj_get(e, "held")->n, 1);
	}
	tj_free(doc);
	run_free(&run);
	for (size_t i = 0; i < N; i++)
		T_ASSERT_RC(wlk_release(locks[i]), 0);
}

/* ---- copies of segments, intact or damaged ---- */

/* Small tables, so a copy is small and a random byte often matters. */
static const struct wlk_manager_options small = {
	.max_names = 16,
	.max_requests = 32,
	.max_name_len = 64,
};

/* The bytes of t_origin's segment (read while nothing changes it). */
static char *segment_bytes(const struct wlk_manager_options *o, size_t *size)
{
	struct wlk_inspect_snapshot *s = NULL;
	struct wlk_inspect *in = NULL;
	struct stat st;
	char *buf;
	int fd;

	T_ASSERT_RC(wlk_inspect_open(t_origin, o, 0, &in), 0);
	T_ASSERT_RC(wlk_inspect_snapshot(in, &s), 0);
	fd = open(s->header.path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %s", s->header.path, strerror(errno));
	cr_assert_eq(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size);
	cr_assert_not_null(buf);
	cr_assert_eq(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	close(fd);
	wlk_inspect_snapshot_free(s);
	wlk_inspect_close(in);
	*size = (size_t)st.st_size;
	return buf;
}

/* A fresh name in /dev/shm that `list` takes for a segment of ours. */
static void copy_name(char *path, size_t size)
{
	static unsigned int seq;

	snprintf(path, size, "/dev/shm/wlk%u-%u-%08x%08x%08x7e57c0de",
		 WLK_LAYOUT_VERSION, (unsigned int)geteuid(),
		 (unsigned int)getpid(), ++seq, (unsigned int)t_now_ns());
}

static void write_file(const char *path, const void *bytes, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
				    O_CLOEXEC, 0600);

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(t_put(fd, bytes, n), 0);
	close(fd);
}

/* A copy of @n bytes at a new segment-like path (returned in @path). */
static void make_copy(char *path, size_t size, const void *bytes, size_t n)
{
	copy_name(path, size);
	t_track_file(path);
	write_file(path, bytes, n);
}

static struct wlk_seg_header *hdr_of(char *bytes)
{
	return (struct wlk_seg_header *)(void *)bytes;
}

/* The name entry of @name in a segment image, or NULL. */
static struct wlk_seg_name *name_entry(char *bytes, const char *name)
{
	struct wlk_seg_header *h = hdr_of(bytes);

	for (uint32_t i = 0; i < h->max_names; i++) {
		struct wlk_seg_name *n = (struct wlk_seg_name *)(void *)(
			bytes + h->off_names + (size_t)i * h->name_stride);

		if (WLK_WORD_STATE(n->word) == WLK_SLOT_USED &&
		    n->len == strlen(name) && n->len <= WLK_NAME_INLINE &&
		    !memcmp(n->text, name, n->len))
			return n;
	}
	return NULL;
}

static unsigned int lines_in(const char *s)
{
	unsigned int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

enum damage {
	D_TRUNC_100,
	D_TRUNC_TABLE,
	D_MAGIC,
	D_VERSION,
	D_ABI,
	D_GEOMETRY,
	D_CREATOR,
	D_GARBAGE,
	D_COUNT,
};

static const struct {
	const char *what;
	int want;
} damages[D_COUNT] = {
	[D_TRUNC_100] = {"truncated to 100 bytes", 3},
	[D_TRUNC_TABLE] = {"truncated in the name table", 3},
	[D_MAGIC] = {"magic zeroed", 3},
	[D_VERSION] = {"layout version bumped", 4},
	[D_ABI] = {"ABI signature changed", 4},
	[D_GEOMETRY] = {"max_requests changed", 3},
	[D_CREATOR] = {"creator uid changed", 2},
	[D_GARBAGE] = {"random bytes", 3},
};

/* Damage a copy of @base (@n bytes) as @d says; its new length. */
static size_t damage(char *c, const char *base, size_t n, enum damage d)
{
	struct wlk_seg_header *h = hdr_of(c);
	uint64_t x = 0x2545f4914f6cdd1dull;

	memcpy(c, base, n);
	switch (d) {
	case D_TRUNC_100:
		return 100;
	case D_TRUNC_TABLE:
		return (size_t)h->off_names + 100;
	case D_MAGIC:
		memset(h->magic, 0, sizeof(h->magic));
		break;
	case D_VERSION:
		h->layout_version++;
		break;
	case D_ABI:
		h->abi_sig ^= 1;
		break;
	case D_GEOMETRY:
		h->max_requests++;
		break;
	case D_CREATOR:
		h->creator_uid++;
		break;
	default:
		for (size_t i = 0; i < n; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			c[i] = (char)x;
		}
		break;
	}
	return n;
}

Test(inspect, damaged_segments_give_documented_exit_codes, T_FIX,
     .timeout = 180)
{
	struct wlk_manager *m = t_open_opts(&small);
	char paths[D_COUNT][128], foreign[128], *base, *c;
	struct wlk_lock *l = NULL;
	struct tj *doc;
	struct run run;
	size_t size;

	T_ASSERT_RC(wlk_acquire(m, "k", 1, NULL, &l), 0);
	base = segment_bytes(&small, &size);
	c = malloc(size);
	cr_assert_not_null(c);
	for (int d = 0; d < D_COUNT; d++) {
		const char *what = damages[d].what;
		int want = damages[d].want;

		make_copy(paths[d], sizeof(paths[d]), c,
			  damage(c, base, size, (enum damage)d));
		RUN(&run, "dump", paths[d]);
		expect_exit(&run, want, what);
		cr_assert_eq(run.out_len, 0, "%s: %s", what, run.out);
		cr_assert_eq(lines_in(run.err), 1, "%s: %s", what, run.err);
		cr_assert_not_null(strstr(run.err, paths[d]), "%s", run.err);
		run_free(&run);
		RUN(&run, "dump", "--json", paths[d] + strlen("/dev/shm"));
		expect_exit(&run, want, what);
		cr_assert_eq(run.out_len, 0, "%s: %s", what, run.out);
		run_free(&run);
		RUN(&run, "check", paths[d] + strlen("/dev/shm/"));
		expect_exit(&run, want, what);
		run_free(&run);
	}
	/* Another user's file: refused, and not listed. */
	foreign[0] = '\0';
	if (geteuid() == 0) {
		make_copy(foreign, sizeof(foreign), base, size);
		cr_assert_eq(chown(foreign, 65534, 65534), 0);
		RUN_EXIT(2, "foreign owner", "dump", foreign);
		RUN_EXIT(2, "foreign owner", "check", foreign);
	}

	/* All of them at once: the listing goes on past each. */
	RUN(&run, "list", "--json");
	expect_exit(&run, 0, "list --json");
	doc = parse_json(&run, "list --json");
	for (int d = 0; d < D_COUNT; d++) {
		const struct tj *e = find_listed(doc, "path", paths[d]);

		cr_assert_not_null(e, "%s not listed", damages[d].what);
		cr_assert_eq(tj_get(e, "ok")->b, false);
		cr_assert_eq(tj_u64(tj_path(e, "error", "exit_status", NULL)),
			     (uint64_t)damages[d].want, "%s",
			     damages[d].what);
	}
	if (foreign[0])
		cr_assert_null(find_listed(doc, "path", foreign));
	cr_assert_not_null(find_listed(doc, "origin", t_origin));
	tj_free(doc);
	run_free(&run);
	RUN(&run, "list");
	expect_exit(&run, 0, "list");
	expect_clean_text(run.out, run.out_len, "list");
	for (int d = 0; d < D_COUNT; d++) {
		char line[512];

		cr_assert(strstr(line_with(run.out, paths[d] + 9, line,
					   sizeof(line)), " error: "),
			  "%s: %s", damages[d].what, run.out);
	}
	run_free(&run);
	free(c);
	free(base);
	T_ASSERT_RC(wlk_release(l), 0);
}

Test(inspect, check_reports_a_planted_inconsistency, T_FIX, .timeout = 60)
{
	struct wlk_manager *m = t_open_opts(&small);
	char good[128], bad[128], *base;
	struct wlk_lock *l = NULL;
	struct wlk_seg_name *n;
	struct run run;
	size_t size;

	T_ASSERT_RC(wlk_acquire(m, "k", 1, NULL, &l), 0);
	base = segment_bytes(&small, &size);
	make_copy(good, sizeof(good), base, size);
	RUN(&run, "check", good);
	expect_exit(&run, 0, "check of a good copy");
	cr_assert_not_null(strstr(run.out, ": ok"), "%s", run.out);
	run_free(&run);

	n = name_entry(base, "k");
	cr_assert_not_null(n);
	n->n_pending++;
	make_copy(bad, sizeof(bad), base, size);
	RUN(&run, "check", bad);
	expect_exit(&run, 3, "check");
	cr_assert_not_null(strstr(run.out, "counts 1/0/1, lists 1/0/0"), "%s",
			   run.out);
	cr_assert_not_null(strstr(run.out, ": 1 violation\n"), "%s", run.out);
	run_free(&run);
	RUN_EXIT(3, "check --locked", "check", "--locked", bad);
	/* dump shows what is there; judging is check's job. */
	RUN_EXIT(0, "dump", "dump", bad);
	/* A manager can only open the bucket's own segment, not a copy. */
	RUN(&run, "check", "--repair", bad);
	expect_exit(&run, 2, "check --repair of a copy");
	cr_assert_not_null(strstr(run.err, "not the current segment"), "%s",
			   run.err);
	run_free(&run);
	free(base);
	T_ASSERT_RC(wlk_release(l), 0);
}

/*
 * A name_bytes counter damaged so that the first size the copy tries
 * wrapped to 0 (found by tests/fuzz): doubling 0 never reached the bound
 * and wlk_inspect_snapshot() looped for ever.
 */
Test(inspect, wrapped_name_bytes_counter_does_not_hang_a_snapshot, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open_opts(&small);
	struct wlk_inspect_snapshot *s = NULL;
	struct wlk_inspect *in = NULL;
	struct wlk_lock *l = NULL;
	struct wlk_seg_header *h;
	char path[128], *base;
	size_t size;

	T_ASSERT_RC(wlk_acquire(m, "k", 1, NULL, &l), 0);
	base = segment_bytes(&small, &size);
	h = hdr_of(base);
	/* 2 * name_bytes + n_names + 1024 == 2^64 */
	h->n_names = 0;
	h->name_bytes = (UINT64_MAX >> 1) - 511;
	make_copy(path, sizeof(path), base, size);
	T_ASSERT_RC(wlk_inspect_open_segment(path, 0, &in), 0);
	T_ASSERT_RC(wlk_inspect_snapshot(in, &s), 0);
	cr_assert_eq(s->n_requests, 1);
	wlk_inspect_snapshot_free(s);
	wlk_inspect_close(in);
	free(base);
	T_ASSERT_RC(wlk_release(l), 0);
}

static uint64_t fuzz_state = 0x9e3779b97f4a7c15ull;

static uint64_t fuzz_rand(void)
{
	fuzz_state ^= fuzz_state >> 12;
	fuzz_state ^= fuzz_state << 25;
	fuzz_state ^= fuzz_state >> 27;
	return fuzz_state * 0x2545f4914f6cdd1dull;
}

/* Flip a few bytes: in the header, the small tables, or the big ones. */
static void mutate(char *c, size_t n, const struct wlk_seg_header *h)
{
	static const uint32_t words[] = {0, 1, 2, 0x7fffffff, 0xffffffff,
					 0x80000000, 16, 32};
	unsigned int flips = 1 + (unsigned int)(fuzz_rand() % 8);

	for (unsigned int i = 0; i < flips; i++) {
		uint64_t r = fuzz_rand(), where = r % 4;
		size_t off;

		if (where == 0)
			off = (size_t)(r >> 8) % 640;
		else if (where == 3)
			off = WLK_HEADER_SIZE + (size_t)(r >> 8) %
						(h->off_names - WLK_HEADER_SIZE);
		else
			off = h->off_names + (size_t)(r >> 8) %
						     (n - h->off_names);
		if (r >> 62) {
			c[off] = (char)(c[off] ^ (1 << ((r >> 40) % 8)));
		} else {
			uint32_t w = words[(r >> 32) % 8];

			off &= ~(size_t)3;
			if (off + 4 <= n)
				memcpy(c + off, &w, 4);
		}
	}
}

static void expect_sane_exit(const struct run *r, const char *what, int i)
{
	cr_assert(!r->signaled && r->status >= 0,
		  "mutation %d: %s died (status %d): %s", i, what, r->status,
		  r->err);
	/* check's 6 (stale): a mutated pid or lifeline shows its agent
	 * dead, holding a lock. */
	cr_assert(r->status == 0 || (r->status >= 2 && r->status <= 5) ||
			  (r->status == 6 && !strcmp(what, "check")),
		  "mutation %d: %s exit %d: %s", i, what, r->status, r->err);
}

Test(inspect, mutated_copies_never_crash_the_tool, T_FIX, .timeout = 900)
{
	struct wlk_options sh = {.mode = WLK_SHARED};
	struct wlk_manager *m = t_open_opts(&small);
	char target[128], tmp[128], *base, *c;
	unsigned int outcome[5] = {0};
	struct t_holder h1, h2, h3;
	struct run run;
	size_t size;

	/* Held, shared and pending requests, so the tables have content. */
	t_holder_start(&h1, m, "a", 1, NULL);
	cr_assert_eq(t_holder_wait_granted(&h1), 0);
	t_holder_start(&h3, m, "b", 1, &sh);
	cr_assert_eq(t_holder_wait_granted(&h3), 0);
	t_holder_start(&h2, m, "a", 1, &sh);
	cr_assert(t_wait_pending(m, "a", 1, 1));
	base = segment_bytes(&small, &size);
	cr_assert_eq(t_holder_release(&h1), 0);
	cr_assert_eq(t_holder_wait_granted(&h2), 0);
	cr_assert_eq(t_holder_release(&h2), 0);
	cr_assert_eq(t_holder_release(&h3), 0);
	t_holder_join(&h1);
	t_holder_join(&h2);
	t_holder_join(&h3);

	c = malloc(size);
	cr_assert_not_null(c);
	copy_name(target, sizeof(target));
	snprintf(tmp, sizeof(tmp), "/dev/shm/wlk-t-inspect-%d.tmp",
		 (int)getpid());
	t_track_file(target);
	t_track_file(tmp);
	for (int i = 0; i < 200; i++) {
		struct tj *doc;
		char err[128];

		memcpy(c, base, size);
		mutate(c, size, hdr_of(base));
		/* Renamed into place: a `list` running elsewhere never
		 * sees a file shrink under its mapping. */
		(void)unlink(tmp);
		write_file(tmp, c, size);
		cr_assert_eq(rename(tmp, target), 0);
		RUN(&run, "dump", "--json", target);
		expect_sane_exit(&run, "dump --json", i);
		outcome[run.status] += 1;
		if (run.status == 0) {
			doc = tj_parse(run.out, run.out_len, err, sizeof(err));
			cr_assert_not_null(doc, "mutation %d: bad JSON (%s)",
					   i, err);
			tj_free(doc);
		}
		run_free(&run);
		RUN(&run, "check", target);
		expect_sane_exit(&run, "check", i);
		expect_clean_text(run.out, run.out_len, "check");
		run_free(&run);
		if (i % 4)
			continue;
		RUN(&run, "dump", target);
		expect_sane_exit(&run, "dump", i);
		expect_clean_text(run.out, run.out_len, "dump");
		run_free(&run);
	}
	cr_log_info("dump --json of 200 mutations: %u ok, %u damaged, "
		    "%u version, %u cannot open",
		    outcome[0], outcome[3], outcome[4], outcome[2]);
	free(c);
	free(base);
}

/* ---- command line, missing segments, odd files ---- */

Test(inspect, usage_errors_exit_1_with_one_usage_line, T_FIX, .timeout = 60)
{
	static const char *const bad[][5] = {
		{"frobnicate"},
		{"dump"},
		{"list", "extra"},
		{"dump", "--bogus", "https://a.example"},
		{"dump", "-i", "1", "https://a.example"},
		{"check", "--json", "https://a.example"},
		{"watch", "https://a.example", "-i", "0"},
		{"watch", "https://a.example", "-i", "soon"},
		{"watch", "https://a.example", "-n", "0"},
		{"watch", "https://a.example", "--interval"},
		{"dump", "/dev/shm/wlk1-0-ab", "--bucket", "b"},
		{"dump", "https://a.example", "https://b.example"},
		{"--version", "list"},
	};
	struct run run;

	run_env(&run, NULL, (const char *const[]){NULL});
	expect_exit(&run, 1, "no arguments");
	cr_assert_not_null(strstr(run.err, "usage: shm-inspect"));
	run_free(&run);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		run_env(&run, NULL, bad[i]);
		expect_exit(&run, 1, bad[i][0]);
		cr_assert_eq(run.out_len, 0, "%zu: %s", i, run.out);
		cr_assert_not_null(strstr(run.err, "\nusage: shm-inspect "),
				   "%zu: %s", i, run.err);
		cr_assert_leq(lines_in(run.err), 2, "%zu: %s", i, run.err);
		run_free(&run);
	}
	RUN(&run, "dump", "--bogus", "x");
	cr_assert_not_null(strstr(run.err, "--bogus"), "%s", run.err);
	run_free(&run);

	RUN(&run, "--help");
	expect_exit(&run, 0, "--help");
	cr_assert_not_null(strstr(run.out, "Exit status: 0 ok; 1 usage"));
	run_free(&run);
	RUN_EXIT(0, "watch --help", "watch", "--help");
	RUN(&run, "--version");
	expect_exit(&run, 0, "--version");
	cr_assert_not_null(strstr(run.out, "weblocks-shm-inspect/1"));
	run_free(&run);
}

Test(inspect, missing_segments_exit_2_and_nothing_is_created, T_FIX,
     .timeout = 60)
{
	struct wlk_inspect *in = NULL;
	struct run run;
	char path[128];

	RUN(&run, "dump", t_origin);
	expect_exit(&run, 2, "dump of a bucket without a segment");
	cr_assert_not_null(strstr(run.err, "no such segment"), "%s", run.err);
	cr_assert_eq(lines_in(run.err), 1);
	run_free(&run);
	RUN_EXIT(2, "check --repair of a bucket without one", "check",
		 "--repair", t_origin);
	RUN(&run, "watch", "-n", "1", t_origin);
	expect_exit(&run, 2, "watch -n 1");
	cr_assert_not_null(strstr(run.out, "error: "), "%s", run.out);
	run_free(&run);
	/* Opaque origins have no bucket at all. */
	RUN_EXIT(2, "dump null", "dump", "null");
	T_ASSERT_RC(wlk_inspect_open(t_origin, NULL, 0, &in), -ENOENT);

	copy_name(path, sizeof(path));
	RUN_EXIT(2, "dump of a missing file", "dump", path);
	RUN_EXIT(2, "check of a missing file", "check",
		 path + strlen("/dev/shm/"));
}

/* A FIFO would block a plain open(2) forever; the tool looks first. */
Test(inspect, fifo_named_like_a_segment_is_refused_not_waited_on, T_FIX,
     .timeout = 60)
{
	struct tj *doc;
	struct run run;
	char path[128];

	copy_name(path, sizeof(path));
	cr_assert_eq(mkfifo(path, 0600), 0, "mkfifo: %s", strerror(errno));
	t_track_file(path);
	RUN_EXIT(2, "dump of a FIFO", "dump", path);
	RUN(&run, "list", "--json");
	expect_exit(&run, 0, "list with a FIFO");
	doc = parse_json(&run, "list --json");
	cr_assert_null(find_listed(doc, "path", path));
	tj_free(doc);
	run_free(&run);
}

Test(inspect, bucket_and_partition_options_and_segment_names, T_FIX,
     .timeout = 60)
{
	struct wlk_manager_options o = {.bucket = "b1", .partition = "p1"};
	struct wlk_manager *m = t_open_opts(&o);
	struct wlk_lock *l = NULL;
	const struct tj *seg;
	char name[128];
	struct tj *doc;
	struct run run;

	t_track_bucket(t_origin, "b1", "p1");
	T_ASSERT_RC(wlk_acquire(m, "k", 1, NULL, &l), 0);
	RUN_EXIT(2, "dump of the default bucket", "dump", t_origin);
	RUN(&run, "dump", "--json", "--bucket", "b1", "--partition", "p1",
	    t_origin);
	expect_exit(&run, 0, "dump --bucket --partition");
	doc = parse_json(&run, "dump --json");
	seg = tj_get(doc, "segment");
	cr_assert(tj_str_is(tj_get(seg, "bucket"), "b1", SIZE_MAX));
	cr_assert(tj_str_is(tj_get(seg, "partition"), "p1", SIZE_MAX));
	cr_assert_not_null(find_name(doc, "k", 1));
	snprintf(name, sizeof(name), "%s",
		 tj_get(seg, "name")->s);
	tj_free(doc);
	run_free(&run);

	/* The same segment by file name, "/name" and path. */
	RUN(&run, "dump", name);
	expect_exit(&run, 0, "dump NAME");
	cr_assert_not_null(strstr(run.out, "Bucket: \"b1\""), "%s", run.out);
	run_free(&run);
	RUN_EXIT(0, "check NAME", "check", name);
	T_ASSERT_RC(wlk_release(l), 0);
}

/*
 * Any origin the library accepts can be addressed: one that looks like a
 * segment path ("/srv/...") with --origin; a segment with --segment.
 */
Test(inspect, origin_and_segment_options_address_any_origin, T_FIX,
     .timeout = 60)
{
	char origin[256];
	struct wlk_manager *m;
	const struct tj *seg;
	struct wlk_lock *l = NULL;
	struct tj *doc;
	struct run run;
	char name[128];

	/* t_origin without its scheme: unique, and no ':' in it. */
	snprintf(origin, sizeof(origin), "/srv/%s",
		 t_origin + strlen("https://"));
	t_track_bucket(origin, NULL, NULL);
	m = t_open_at(origin, NULL);
	T_ASSERT_RC(wlk_acquire(m, "k", 1, NULL, &l), 0);

	RUN(&run, "dump", "--json", "--origin", origin);
	expect_exit(&run, 0, "dump --origin /srv/...");
	doc = parse_json(&run, "dump --json --origin");
	seg = tj_get(doc, "segment");
	cr_assert(tj_str_is(tj_get(seg, "origin"), origin, SIZE_MAX));
	cr_assert_not_null(find_name(doc, "k", 1));
	snprintf(name, sizeof(name), "%s", tj_get(seg, "name")->s);
	tj_free(doc);
	run_free(&run);
	RUN_EXIT(0, "check --origin", "check", "--origin", origin);
	RUN_EXIT(0, "watch --origin", "watch", "-n", "1", "--origin", origin);
	RUN_EXIT(0, "check --segment NAME", "check", "--segment", name);

	/* Alone, it is taken for a segment, and the error says what to do. */
	RUN(&run, "dump", origin);
	expect_exit(&run, 2, "dump /srv/... alone");
	cr_assert_not_null(strstr(run.err, "use --origin"), "%s", run.err);
	run_free(&run);
	/* One target only, and --bucket goes with an origin. */
	RUN_EXIT(1, "--origin and --segment", "dump", "--origin", origin,
		 "--segment", name);
	RUN_EXIT(1, "--origin and a TARGET", "dump", "--origin", origin,
		 t_origin);
	RUN_EXIT(1, "--segment with --bucket", "dump", "--segment", name,
		 "--bucket", "b");
	T_ASSERT_RC(wlk_release(l), 0);
}

/* ---- watch ---- */

static unsigned int count_of(const char *s, const char *needle)
{
	unsigned int n = 0;

	for (; (s = strstr(s, needle)); s++)
		n++;
	return n;
}

Test(inspect, watch_redraws_count_times_and_stops_on_sigint, T_FIX,
     .timeout = 60)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = NULL;
	struct run run;
	int fds[2];
	pid_t pid;

	T_ASSERT_RC(wlk_acquire(m, "w", 1, NULL, &l), 0);
	RUN(&run, "watch", "-i", "0.05", "-n", "3", t_origin);
	expect_exit(&run, 0, "watch -n 3");
	/* Not a terminal: separators, no escape sequences. */
	cr_assert_eq(count_of(run.out, "==== every 0.05s: shm-inspect dump"),
		     3, "%s", run.out);
	cr_assert_eq(count_of(run.out, "\nLocks: 1 held"), 3, "%s", run.out);
	expect_clean_text(run.out, run.out_len, "watch");
	run_free(&run);

	memset(&run, 0, sizeof(run));
	pid = run_spawn((const char *const[]){"watch", "--interval", "0.05",
					      t_origin, NULL},
			NULL, fds);
	t_nap_ms(400);
	kill(pid, SIGINT);
	run_finish(pid, fds, &run);
	expect_exit(&run, 0, "watch after SIGINT");
	cr_assert_geq(count_of(run.out, "\nLocks: 1 held"), 1, "%s", run.out);
	run_free(&run);
	T_ASSERT_RC(wlk_release(l), 0);
}

/* The environment with ASAN_OPTIONS extended by @opt. */
static char **env_with_asan(const char *opt, char *buf, size_t size)
{
	size_t n = 0, k = 0;
	const char *old = getenv("ASAN_OPTIONS");
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 2, sizeof(*env));
	cr_assert_not_null(env);
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "ASAN_OPTIONS=", 13) != 0)
			env[k++] = environ[i];
	snprintf(buf, size, "ASAN_OPTIONS=%s%s%s", old ? old : "",
		 old && *old ? ":" : "", opt);
	env[k++] = buf;
	env[k] = NULL;
	return env;
}

/*
 * A segment that shrinks while the tool has it mapped raises SIGBUS in the
 * tool: watch a copy while it is truncated and restored, over and over.
 * The tool must report, go on, and end normally. (Memory the library had
 * allocated when the signal hit is lost; leak checks are off here.)
 */
Test(inspect, segment_shrinking_under_watch_is_survived, T_FIX,
     .timeout = 120)
{
	struct wlk_manager *m = t_open_opts(&small);
	char path[128], asan[512], **env, *base;
	struct wlk_lock *l = NULL;
	uint64_t end;
	struct run run;
	size_t size;
	int fds[2], fd;
	unsigned int rounds = 0;
	pid_t pid;

	T_ASSERT_RC(wlk_acquire(m, "k", 1, NULL, &l), 0);
	base = segment_bytes(&small, &size);
	make_copy(path, sizeof(path), base, size);
	fd = open(path, O_RDWR | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	env = env_with_asan("detect_leaks=0", asan, sizeof(asan));
	memset(&run, 0, sizeof(run));
	pid = run_spawn((const char *const[]){"watch", "-i", "0.01", path,
					      NULL},
			env, fds);
	end = t_now_ns() + 1500000000ull;
	/* Mostly whole, so the tool maps it whole and then loses it. */
	while (t_now_ns() < end) {
		struct timespec cut = {0, 300000}, whole = {0, 700000};

		cr_assert_eq(ftruncate(fd, WLK_HEADER_SIZE + 4096), 0);
		nanosleep(&cut, NULL);
		cr_assert_eq(pwrite(fd, base, size, 0), (ssize_t)size);
		nanosleep(&whole, NULL);
		rounds++;
	}
	kill(pid, SIGINT);
	run_finish(pid, fds, &run);
	expect_exit(&run, 0, "watch of a shrinking segment");
	cr_log_info("%u truncations; %u frames, %u SIGBUS caught, %u other "
		    "errors",
		    rounds, count_of(run.out, "==== every"),
		    count_of(run.out, "(SIGBUS)"),
		    count_of(run.out, "error: ") -
			    count_of(run.out, "(SIGBUS)"));
	run_free(&run);
	free(env);
	close(fd);
	free(base);
	T_ASSERT_RC(wlk_release(l), 0);
}

/*
 * The same, made certain: the test holds the mutex of a copy so that
 * `dump --locked` maps it whole and waits; the copy shrinks; the tool gets
 * the mutex and then SIGBUS. Holding the mutex, it must exit at once (3).
 */
Test(inspect, sigbus_while_holding_the_mutex_exits_3, T_FIX, .timeout = 60)
{
	struct wlk_manager *m = t_open_opts(&small);
	char path[128], asan[512], **env, *base;
	struct wlk_lock *l = NULL;
	struct wlk_seg_header *h;
	uint32_t *word;
	struct run run;
	size_t size;
	int fds[2], fd;
	uint64_t end;
	pid_t pid;

	T_ASSERT_RC(wlk_acquire(m, "k", 1, NULL, &l), 0);
	base = segment_bytes(&small, &size);
	make_copy(path, sizeof(path), base, size);
	fd = open(path, O_RDWR | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	h = mmap(NULL, WLK_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 0);
	cr_assert_neq(h, MAP_FAILED);
	cr_assert_eq(pthread_mutex_lock(&h->sync.mutex), 0);
	env = env_with_asan("detect_leaks=0", asan, sizeof(asan));
	memset(&run, 0, sizeof(run));
	pid = run_spawn((const char *const[]){"dump", "--locked", path, NULL},
			env, fds);
	/* Blocked on our mutex: glibc marks the word FUTEX_WAITERS. */
	word = (uint32_t *)(void *)&h->sync.mutex;
	end = t_now_ns() + (uint64_t)T_WAIT_MS * 1000000u;
	while (!(__atomic_load_n(word, __ATOMIC_SEQ_CST) & FUTEX_WAITERS) &&
	       t_now_ns() < end)
		t_nap_ms(1);
	cr_assert(*word & FUTEX_WAITERS, "the tool never waited");
	cr_assert_eq(ftruncate(fd, WLK_HEADER_SIZE + 4096), 0);
	cr_assert_eq(pthread_mutex_unlock(&h->sync.mutex), 0);
	run_finish(pid, fds, &run);
	expect_exit(&run, 3, "dump --locked of a shrinking copy");
	cr_assert_not_null(strstr(run.err, "SIGBUS"), "%s", run.err);
	cr_assert_eq(run.out_len, 0, "%s", run.out);
	run_free(&run);
	free(env);
	munmap(h, WLK_HEADER_SIZE);
	close(fd);
	free(base);
	T_ASSERT_RC(wlk_release(l), 0);
}

/*
 * A poisoned segment: dump and list say so, check finds it, and --repair
 * leaves it to the library, which moves the bucket to a new generation.
 */
Test(inspect, poisoned_segment_repaired_into_a_new_generation, T_FIX,
     .timeout = 60)
{
	struct wlk_manager *m = t_open();
	struct wlk_inspect_snapshot *s = NULL;
	struct wlk_inspect *in = NULL;
	struct wlk_seg_header *h;
	char path[200], want[300];
	const struct tj *e;
	struct tj *doc;
	struct run run;
	int fd;

	T_ASSERT_RC(wlk_inspect_open(t_origin, NULL, 0, &in), 0);
	T_ASSERT_RC(wlk_inspect_snapshot(in, &s), 0);
	snprintf(path, sizeof(path), "%s", s->header.path);
	wlk_inspect_snapshot_free(s);
	wlk_inspect_close(in);
	fd = open(path, O_RDWR | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	h = mmap(NULL, WLK_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 0);
	cr_assert_neq(h, MAP_FAILED);
	close(fd);
	__atomic_store_n(&h->seg_state, WLK_SEG_POISONED, __ATOMIC_SEQ_CST);
	munmap(h, WLK_HEADER_SIZE);

	RUN(&run, "dump", t_origin);
	expect_exit(&run, 0, "dump of a poisoned segment");
	cr_assert_not_null(strstr(run.out, "\n  State: poisoned\n"), "%s",
			   run.out);
	run_free(&run);
	RUN(&run, "list", "--json");
	expect_exit(&run, 0, "list --json");
	doc = parse_json(&run, "list --json");
	e = find_listed(doc, "path", path);
	cr_assert(tj_str_is(tj_get(e, "state"), "poisoned", SIZE_MAX));
	tj_free(doc);
	run_free(&run);
	RUN(&run, "check", t_origin);
	expect_exit(&run, 3, "check of a poisoned segment");
	cr_assert_not_null(strstr(run.out, "segment state 2"), "%s", run.out);
	run_free(&run);

	RUN(&run, "check", "--repair", t_origin);
	expect_exit(&run, 0, "check --repair of a poisoned segment");
	snprintf(want, sizeof(want),
		 "repaired: the bucket moved to a new generation, %s~1\n",
		 path);
	cr_assert_not_null(strstr(run.out, want), "%s", run.out);
	run_free(&run);
	RUN(&run, "dump", "--json", t_origin);
	expect_exit(&run, 0, "dump after the repair");
	doc = parse_json(&run, "dump --json");
	cr_assert_eq(tj_u64(tj_path(doc, "segment", "generation", NULL)), 1);
	cr_assert(tj_str_is(tj_path(doc, "segment", "state", NULL), "ok",
			    SIZE_MAX));
	tj_free(doc);
	run_free(&run);
	/* Its manager is on the poisoned generation: the fixture's final
	 * validation would fail, as it should. */
	t_close(m);
}

/* CLOCK_REALTIME in nanoseconds. */
static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Set the last token of @name in t_origin's segment (nobody attached). */
static void plant_token(const char *name, uint64_t token)
{
	struct wlk_inspect_snapshot *s = NULL;
	struct wlk_inspect *in = NULL;
	struct wlk_seg_name *n;
	struct stat st;
	char *bytes;
	int fd;

	T_ASSERT_RC(wlk_inspect_open(t_origin, NULL, 0, &in), 0);
	T_ASSERT_RC(wlk_inspect_snapshot(in, &s), 0);
	fd = open(s->header.path, O_RDWR | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %s", s->header.path, strerror(errno));
	wlk_inspect_snapshot_free(s);
	wlk_inspect_close(in);
	cr_assert_eq(fstat(fd, &st), 0);
	bytes = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
		     MAP_SHARED, fd, 0);
	cr_assert_neq(bytes, MAP_FAILED);
	close(fd);
	n = name_entry(bytes, name);
	cr_assert_not_null(n, "no entry for \"%s\"", name);
	n->token = token;
	munmap(bytes, (size_t)st.st_size);
}

/*
 * A repair that re-initialises the segment keeps the tokens of its names
 * rising: above the clock (where a new segment's start), and above a token
 * the old content holds that is ahead of the clock (as after the clock
 * was set back).
 */
Test(inspect, repair_that_reinitialises_keeps_tokens_rising, T_FIX,
     .timeout = 60)
{
	uint64_t token, ahead = realtime_ns() + 3600 * 1000000000ull;
	struct wlk_manager *m;
	struct wlk_lock *l = NULL;
	struct run run;
	struct kid k;

	doomed_holder(&k, &token);
	plant_token("x", ahead);
	RUN(&run, "check", "--repair", t_origin);
	expect_exit(&run, 0, "check --repair");
	cr_assert_not_null(strstr(run.out, "re-initialised"), "%s", run.out);
	run_free(&run);
	m = t_open();
	T_ASSERT_RC(wlk_acquire(m, "x", 1, NULL, &l), 0);
	cr_assert_gt(wlk_lock_token(l), token);
	cr_assert_gt(wlk_lock_token(l), ahead,
		     "token %llu, the old segment had given %llu",
		     (unsigned long long)wlk_lock_token(l),
		     (unsigned long long)ahead);
	T_ASSERT_RC(wlk_release(l), 0);
	kid_close(&k);
}

Test(inspect, stolen_lock_listed_until_its_holder_releases, T_FIX,
     .timeout = 60)
{
	struct wlk_manager_options o1 = {.client_id = "robbed"};
	struct wlk_manager_options o2 = {.client_id = "thief"};
	struct wlk_manager *m1 = t_open_opts(&o1), *m2 = t_open_opts(&o2);
	struct wlk_options steal = {.steal = true};
	struct wlk_lock *l1 = NULL, *l2 = NULL;
	const struct tj *st, *e;
	struct tj *doc;
	struct run run;

	T_ASSERT_RC(wlk_acquire(m1, "st", 2, NULL, &l1), 0);
	T_ASSERT_RC(wlk_acquire(m2, "st", 2, &steal, &l2), 0);
	RUN(&run, "dump", "--json", t_origin);
	expect_exit(&run, 0, "dump --json");
	doc = parse_json(&run, "dump --json");
	st = tj_get(doc, "stolen");
	cr_assert_eq(st->n, 1, "%s", run.out);
	expect_req(tj_at(st, 0), "exclusive", getpid(), "robbed");
	cr_assert_eq(tj_u64(tj_get(tj_at(st, 0), "token")),
		     wlk_lock_token(l1));
	e = find_name(doc, "st", 2);
	expect_req(tj_at(tj_get(e, "held"), 0), "exclusive", getpid(), "thief");
	cr_assert_eq(tj_u64(tj_get(tj_at(tj_get(e, "held"), 0), "token")),
		     wlk_lock_token(l2));
	tj_free(doc);
	run_free(&run);
	RUN(&run, "dump", t_origin);
	expect_exit(&run, 0, "dump");
	cr_assert_not_null(strstr(run.out, "Stolen, not yet released by their "
					   "holders: 1\n"),
			   "%s", run.out);
	cr_assert_not_null(strstr(run.out, "    stolen     exclusive pid "),
			   "%s", run.out);
	run_free(&run);
	T_ASSERT_RC(wlk_release(l1), WLK_ESTOLEN);
	T_ASSERT_RC(wlk_release(l2), 0);
	RUN(&run, "dump", "--json", t_origin);
	doc = parse_json(&run, "dump --json");
	cr_assert_eq(tj_get(doc, "stolen")->n, 0);
	tj_free(doc);
	run_free(&run);
}

/* The COMMAND of a live agent (lslocks' column): /proc/PID/comm. */
Test(inspect, a_live_agent_shows_its_command, T_FIX, .timeout = 60)
{
	struct wlk_manager *m = t_open();
	char comm[64] = "", want[128];
	const struct tj *a;
	struct tj *doc;
	struct run run;
	FILE *f = fopen("/proc/self/comm", "r");

	cr_assert_not_null(f);
	cr_assert_not_null(fgets(comm, sizeof(comm), f));
	fclose(f);
	comm[strcspn(comm, "\n")] = '\0';

	RUN(&run, "dump", "--json", t_origin);
	expect_exit(&run, 0, "dump --json");
	doc = parse_json(&run, "dump --json");
	a = find_agent(doc, getpid());
	cr_assert_not_null(a, "%s", run.out);
	cr_assert(tj_str_is(tj_get(a, "command"), comm, strlen(comm)), "%s",
		  run.out);
	tj_free(doc);
	run_free(&run);

	RUN(&run, "dump", t_origin);
	expect_exit(&run, 0, "dump");
	snprintf(want, sizeof(want), "pid %d, alive, command \"%s\", clients",
		 (int)getpid(), comm);
	cr_assert_not_null(strstr(run.out, want), "%s", run.out);
	run_free(&run);
	t_close(m);
}
