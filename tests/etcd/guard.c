/* SPDX-License-Identifier: MIT */
/*
 * guard.c - the agent's guard (lib/etcd/guard.c, tools/etcd-guard.c): a
 * process's lease revoked as soon as the process is gone, so its locks
 * pass on in round trips, not at the lease's expiry.
 *
 * Each holder is a child whose lease's TTL is LONG_TTL, so that a grant
 * within GUARD_MS of its end can only be the guard's doing:
 *  - SIGKILLed while it holds, with a waiter queued in the parent;
 *  - after an exec (its end of the guard's pair is close-on-exec);
 *  - SIGKILLed while a fork child of its own, which holds a copy of that
 *    end, lives on (the pidfd tells the death);
 *  - SIGKILLed with the first member of its backend down: the guard
 *    revokes through the next;
 *  - SIGKILLed after its lease was revoked behind its back and renewed:
 *    the guard revokes the new lease;
 *  - with WEBLOCKS_ETCD_GUARD=none: no guard, the lock waits for the
 *    lease's expiry;
 *  - its guard SIGKILLed: a new one is spawned at the next keepalive,
 *    and it revokes the lease when the holder is killed;
 *  - with a guard that cannot be spawned: locks work as before, and no
 *    child is left;
 *  - a manager's close: its guard ends, and it was never the process's
 *    child; it holds /dev/null, not the process's, as its standard input
 *    and output.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common.h"
#include "proxy.h"

/* The holders' lease TTL, in seconds: far beyond any wait here. */
#define LONG_TTL "60"
/* A grant after the holder's death within this long is the guard's. */
#define GUARD_MS 3000
/* The killed guard's test: a TTL whose keepalives (every TTL/3) come
 * within T_WAIT_MS, and a grant within REPLACED_MS of the kill, which the
 * lease's expiry, then REPLACED_TTL away, cannot explain. */
#define REPLACED_TTL "6"
#define REPLACED_MS 1500
/* How long the test without a guard waits to see no grant. */
#define NO_GUARD_MS 1500
/* What a holder child does once it holds "g". */
enum after { PAUSE, EXEC, FORK_AND_PAUSE, RENEW_AND_PAUSE };

struct holder_arg {
	struct t_pipe *p;
	enum after then;
	const char *guard; /* WEBLOCKS_ETCD_GUARD for the child, or NULL */
	const char *ttl;   /* its lease's TTL, or NULL: LONG_TTL */
	const char *backend; /* WEBLOCKS_BACKEND for the child, or NULL */
};

/* Child: hold "g" on a lease of LONG_TTL, say 'h', then do a->then. */
static int holder(void *arg)
{
	const struct holder_arg *a = arg;
	struct wlk_manager *m;
	struct wlk_lock *l, *again;
	pid_t kid;

	setenv("WEBLOCKS_ETCD_TTL", a->ttl ? a->ttl : LONG_TTL, 1);
	if (a->guard)
		setenv("WEBLOCKS_ETCD_GUARD", a->guard, 1);
	if (a->backend)
		setenv("WEBLOCKS_BACKEND", a->backend, 1);
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 1);
	T_CHILD_CHECK(wlk_acquire(m, "g", 1, NULL, &l) == 0, 2);
	if (a->then == RENEW_AND_PAUSE) {
		/* The parent revokes our lease: seen as a steal; then "g"
		 * again, on the new lease. */
		T_CHILD_CHECK(t_put_byte(a->p->wr, 'r') == 0, 3);
		T_CHILD_CHECK(t_stolen_within(&l, 1, T_WAIT_MS), 4);
		(void)wlk_release(l);
		T_CHILD_CHECK(wlk_acquire(m, "g", 1, NULL, &again) == 0, 5);
	}
	if (a->then == FORK_AND_PAUSE) {
		kid = fork();
		T_CHILD_CHECK(kid >= 0, 6);
		if (kid == 0)
			for (;;)
				pause();
		T_CHILD_CHECK(t_put(a->p->wr, &kid, sizeof(kid)) == 0, 7);
	}
	T_CHILD_CHECK(t_put_byte(a->p->wr, 'h') == 0, 8);
	if (a->then == EXEC) {
		execlp("sleep", "sleep", "60", (char *)NULL);
		_exit(9);
	}
	for (;;)
		pause();
	return 0;
}

/* The guard of process @pid, found by its pidfd (descriptor 3, whose
 * fdinfo names the process), or 0. Zombies have no descriptors left. */
static pid_t guard_of(pid_t pid)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;

	cr_assert_not_null(d);
	while (!found && (e = readdir(d))) {
		char path[320], line[128];
		FILE *f;

		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(line, sizeof(line), f) ||
		    strcmp(line, "etcd-guard\n")) {
			fclose(f);
			continue;
		}
		fclose(f);
		snprintf(path, sizeof(path), "/proc/%s/fdinfo/3", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "Pid:", 4) &&
			    atoi(line + 4) == pid)
				found = atoi(e->d_name);
		fclose(f);
	}
	closedir(d);
	return found;
}

/* The lease @guard watches over: its third argument. */
static unsigned long long guard_lease(pid_t guard)
{
	char path[64], buf[512];
	size_t n, i = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)guard);
	f = fopen(path, "r");
	cr_assert_not_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	for (int arg = 0; arg < 2 && i < n; arg++)
		i += strlen(buf + i) + 1;
	cr_assert_lt(i, n, "no lease in the guard's arguments");
	return strtoull(buf + i, NULL, 10);
}

/* What descriptor @fd of process @pid is open on (static storage). */
static const char *fd_target(pid_t pid, int fd)
{
	static char buf[PATH_MAX];
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
	n = readlink(path, buf, sizeof(buf) - 1);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}


/* The parent's request for "g", queued behind @child; the child then
 * SIGKILLed and reaped. Return: ms from the kill to the grant (-1: not
 * within @wait_ms, the request timed out). */
static long kill_and_wait(pid_t child, unsigned int wait_ms)
{
	struct wlk_manager *m = t_open();
	struct wlk_options o = WLK_OPTIONS_INIT;
	struct t_holder h;
	uint64_t killed;
	long took;

	o.timeout_ns = (uint64_t)wait_ms * 1000000u;
	t_holder_start(&h, m, "g", 1, &o);
	cr_assert(t_wait_pending(m, "g", 1, 1), "the parent's request not "
		  "queued");
	killed = t_now_ns();
	kill(child, SIGKILL);
	cr_assert_eq(t_holder_wait_granted(&h), 0, "wlk_acquire() did not "
		     "return");
	took = h.got ? (long)((t_now_ns() - killed) / 1000000u) : -1;
	if (h.got)
		cr_assert_eq(t_holder_release(&h), 0);
	else
		T_ASSERT_RC(h.acq_rc, WLK_ETIMEDOUT);
	t_holder_join(&h);
	(void)t_wait(child, T_WAIT_MS);
	return took;
}

static pid_t start_holder_at(struct t_pipe *p, enum after then,
			     const char *guard, const char *ttl,
			     const char *backend)
{
	static struct holder_arg a; /* read by the child only */
	pid_t child;

	a = (struct holder_arg){ .p = p, .then = then, .guard = guard,
				 .ttl = ttl, .backend = backend };
	t_pipe_open(p);
	child = t_fork(holder, &a);
	return child;
}

static pid_t start_holder(struct t_pipe *p, enum after then,
			  const char *guard)
{
	return start_holder_at(p, then, guard, NULL, NULL);
}

Test(etcd_guard, a_killed_holder_passes_on_long_before_its_ttl, T_FIX,
     .timeout = 30)
{
	struct t_pipe p;
	pid_t child = start_holder(&p, PAUSE, NULL);
	long took;

	cr_assert_eq(t_get_byte(p.rd), 'h', "the child did not lock");
	took = kill_and_wait(child, GUARD_MS);
	cr_assert_geq(took, 0, "not granted within %d ms of the kill (TTL "
		      "%s s)", GUARD_MS, LONG_TTL);
	t_pipe_close(&p);
}

Test(etcd_guard, the_guard_tries_the_next_member, T_FIX, .timeout = 30)
{
	const char *b = getenv("WEBLOCKS_BACKEND");
	char backend[1024];
	struct t_pipe p;
	pid_t child;
	long took;

	cr_assert(b && !strncmp(b, "etcd://", 7), "no cluster");
	/* First a member that is not there (nothing listens on port 1). */
	snprintf(backend, sizeof(backend), "etcd://127.0.0.1:1,%s", b + 7);
	child = start_holder_at(&p, PAUSE, NULL, NULL, backend);
	cr_assert_eq(t_get_byte(p.rd), 'h', "the child did not lock");
	took = kill_and_wait(child, GUARD_MS);
	cr_assert_geq(took, 0, "not granted within %d ms of the kill, with "
		      "the first member down", GUARD_MS);
	t_pipe_close(&p);
}

Test(etcd_guard, a_holder_that_execs_passes_on, T_FIX, .timeout = 30)
{
	struct t_pipe p;
	pid_t child = start_holder(&p, EXEC, NULL);
	struct wlk_manager *m;
	struct wlk_lock *l;
	struct wlk_options o = WLK_OPTIONS_INIT;

	cr_assert_eq(t_get_byte(p.rd), 'h', "the child did not lock");
	m = t_open();
	o.timeout_ns = (uint64_t)GUARD_MS * 1000000u;
	T_ASSERT_RC(wlk_acquire(m, "g", 1, &o, &l), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	kill(child, SIGKILL);
	(void)t_wait(child, T_WAIT_MS);
	t_pipe_close(&p);
}

Test(etcd_guard, a_fork_child_keeps_no_lock_of_a_killed_holder, T_FIX,
     .timeout = 30)
{
	struct t_pipe p;
	pid_t child = start_holder(&p, FORK_AND_PAUSE, NULL), kid = 0;
	long took;

	cr_assert_eq(t_get(p.rd, &kid, sizeof(kid), T_WAIT_MS), 0);
	cr_assert_eq(t_get_byte(p.rd), 'h', "the child did not lock");
	took = kill_and_wait(child, GUARD_MS);
	kill(kid, SIGKILL); /* init reaps it: its parent is gone */
	cr_assert_geq(took, 0, "not granted within %d ms, with the holder's "
		      "fork child alive", GUARD_MS);
	t_pipe_close(&p);
}

Test(etcd_guard, a_renewed_lease_is_guarded_too, T_FIX, .timeout = 30)
{
	struct t_pipe p;
	pid_t child = start_holder(&p, RENEW_AND_PAUSE, NULL), g;
	unsigned long long first;
	char body[64];
	long took;

	cr_assert_eq(t_get_byte(p.rd), 'r', "the child did not lock");
	g = guard_of(child);
	cr_assert_gt(g, 0, "the holder has no guard");
	first = guard_lease(g);
	snprintf(body, sizeof(body), "{\"ID\":\"%llu\"}", first);
	t_etcd_call("/v3/lease/revoke", body);
	cr_assert_eq(t_get_byte(p.rd), 'h', "the child did not lock again");
	took = kill_and_wait(child, GUARD_MS);
	cr_assert_geq(took, 0, "the new lease outlived its holder by %d ms",
		      GUARD_MS);
	t_pipe_close(&p);
}

Test(etcd_guard, a_killed_guard_is_replaced, T_FIX, .timeout = 30)
{
	struct t_pipe p;
	pid_t child = start_holder_at(&p, PAUSE, NULL, REPLACED_TTL, NULL), g,
	      g2;
	int waited = 0;
	long took;

	cr_assert_eq(t_get_byte(p.rd), 'h', "the child did not lock");
	g = guard_of(child);
	cr_assert_gt(g, 0, "the holder has no guard");
	kill(g, SIGKILL);
	/* Its agent replaces it at its next keepalive, TTL/3 at most. */
	while (((g2 = guard_of(child)) == 0 || g2 == g) &&
	       waited < T_WAIT_MS) {
		t_nap_ms(10);
		waited += 10;
	}
	cr_assert(g2 != 0 && g2 != g, "no new guard within %d ms",
		  T_WAIT_MS);
	/* Its lease was just renewed: REPLACED_TTL s left, well above. */
	took = kill_and_wait(child, REPLACED_MS);
	cr_assert_geq(took, 0, "the new guard did not revoke the lease "
		      "within %d ms", REPLACED_MS);
	t_pipe_close(&p);
}

Test(etcd_guard, without_a_guard_the_lock_waits_for_the_ttl, T_FIX,
     .timeout = 30)
{
	struct t_pipe p;
	pid_t child = start_holder(&p, PAUSE, "none");
	long took;

	cr_assert_eq(t_get_byte(p.rd), 'h', "the child did not lock");
	cr_assert_eq(guard_of(child), 0, "a guard, with none asked for");
	took = kill_and_wait(child, NO_GUARD_MS);
	cr_assert_eq(took, -1, "granted %ld ms after the kill, with no guard "
		     "and a TTL of %s s", took, LONG_TTL);
	t_pipe_close(&p);
}

/* Child: with a guard that cannot be spawned, a lock taken and let go;
 * then no child of ours left, spawned or not. */
static int unspawnable(void *arg)
{
	struct wlk_manager *m;
	struct wlk_lock *l;

	(void)arg;
	setenv("WEBLOCKS_ETCD_GUARD", "/nonexistent/etcd-guard", 1);
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 1);
	T_CHILD_CHECK(wlk_acquire(m, "u", 1, NULL, &l) == 0, 2);
	T_CHILD_CHECK(wlk_release(l) == 0, 3);
	wlk_manager_close(m);
	T_CHILD_CHECK(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD, 5);
	return 0;
}

Test(etcd_guard, a_guard_that_cannot_be_spawned_is_no_error, T_FIX,
     .timeout = 30)
{
	cr_assert_eq(t_wait(t_fork(unspawnable, NULL), T_WAIT_MS), 0);
}

/* Child: open, say 'o' on ends->wr, wait for 'c' on ends->rd, close, say
 * 'c', wait to be killed; nothing of ours to reap at any point. */
static int opener(void *arg)
{
	const struct t_pipe *ends = arg;
	struct wlk_manager *m;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 1);
	T_CHILD_CHECK(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD, 2);
	T_CHILD_CHECK(t_put_byte(ends->wr, 'o') == 0, 3);
	T_CHILD_CHECK(t_get_byte(ends->rd) == 'c', 4);
	wlk_manager_close(m);
	T_CHILD_CHECK(t_put_byte(ends->wr, 'c') == 0, 6);
	for (;;)
		pause();
	return 0;
}

Test(etcd_guard, a_close_ends_the_guard, T_FIX, .timeout = 30)
{
	struct t_pipe up, down, ends;
	pid_t child, g;
	int waited = 0;

	t_pipe_open(&up);   /* child to parent */
	t_pipe_open(&down); /* parent to child */
	ends = (struct t_pipe){ .rd = down.rd, .wr = up.wr };
	child = t_fork(opener, &ends);
	cr_assert_eq(t_get_byte(up.rd), 'o', "the child did not open");
	g = guard_of(child);
	cr_assert_gt(g, 0, "no guard for the child's manager");
	/* It holds none of the child's pipes open, its standard streams
	 * included (this test's stdout may be one). */
	for (int fd = 0; fd <= 1; fd++)
		cr_assert_str_eq(fd_target(g, fd), "/dev/null",
				 "the guard's descriptor %d", fd);
	cr_assert_eq(t_put_byte(down.wr, 'c'), 0);
	cr_assert_eq(t_get_byte(up.rd), 'c', "the child did not close");
	while (guard_of(child) && waited < T_WAIT_MS) {
		t_nap_ms(10);
		waited += 10;
	}
	cr_assert_eq(guard_of(child), 0, "the guard outlived the close");
	kill(child, SIGKILL);
	(void)t_wait(child, T_WAIT_MS);
	t_pipe_close(&up);
	t_pipe_close(&down);
}
