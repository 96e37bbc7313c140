/* SPDX-License-Identifier: MIT */
/* t_death.c - a process that dies (kill, exit, exec) never wedges a bucket. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "../common.h"
#include "testing.h"

/* How long a child holds a lock when nobody tells it to let go. */
#define HOLD_MS 60000
/* How long the tests show that a live holder keeps its lock. */
#define STILL_HELD_NS (300 * 1000000ull)
/* Exit code of a child that found the test cannot run here. */
#define SKIP_CODE 77

static const struct wlk_options ex_ia = { .if_available = true };
static const struct wlk_options sh = { .mode = WLK_SHARED };
static const struct wlk_options ex_timed = { .timeout_ns = STILL_HELD_NS };

/* Pipes between the parent and one child. */
struct link {
	struct t_pipe up;   /* child -> parent */
	struct t_pipe down; /* parent -> child */
};

static void link_open(struct link *k)
{
	t_pipe_open(&k->up);
	t_pipe_open(&k->down);
}

static void link_close(struct link *k)
{
	t_pipe_close(&k->up);
	t_pipe_close(&k->down);
}

/*
 * Fork @fn and drop the parent's copies of the child's ends, so that the
 * parent reads EOF on k->up once the child (and only it) is gone. Open the
 * link just before this call, so that no other child inherits k->up.wr.
 */
static pid_t fork_linked(int (*fn)(void *), void *arg, struct link *k)
{
	pid_t pid = t_fork(fn, arg);

	close(k->up.wr);
	k->up.wr = -1;
	close(k->down.rd);
	k->down.rd = -1;
	return pid;
}

/* Acquire @name with if_available and release it: the name is free. */
static void assert_free(struct wlk_manager *m, const char *name)
{
	struct wlk_lock *l = NULL;

	T_ASSERT_RC(wlk_acquire(m, name, WLK_NUL_TERMINATED, &ex_ia, &l), 0);
	cr_assert_not_null(l, "\"%s\" is still taken", name);
	T_ASSERT_RC(wlk_release(l), 0);
}

/* Wait until the child @pid has stopped. */
static bool wait_stopped(pid_t pid)
{
	int status;

	return waitpid(pid, &status, WUNTRACED) == pid && WIFSTOPPED(status);
}

/* What a holder child does once it holds its lock. */
enum hold_end {
	END_WAIT,  /* wait for a byte, release, close, exit 0 */
	END_EXEC,  /* wait for a byte, exec "sleep 60" */
	END_EXIT,  /* wait for a byte, exit(0) without closing */
	END__EXIT, /* wait for a byte, _exit(0) without closing */
};

struct hold {
	struct link k;
	const char *name;
	struct wlk_options opt;
	enum hold_end end;
};

static void hold_init(struct hold *h, const char *name,
		      const struct wlk_options *o, enum hold_end end)
{
	memset(h, 0, sizeof(*h));
	link_open(&h->k);
	h->name = name;
	if (o)
		h->opt = *o;
	h->end = end;
}

/* Child: open, acquire h->name (blocking), say 'g', then end as told. */
static int child_hold(void *arg)
{
	struct hold *h = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;
	char c;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK(wlk_acquire(m, h->name, WLK_NUL_TERMINATED, &h->opt,
				  &l) == 0, 11);
	T_CHILD_CHECK(t_put_byte(h->k.up.wr, 'g') == 0, 12);
	/* Usually killed while waiting here. */
	T_CHILD_CHECK(t_get(h->k.down.rd, &c, 1, HOLD_MS) == 0, 13);
	switch (h->end) {
	case END_EXEC:
		execlp("sleep", "sleep", "60", (char *)NULL);
		return 14;
	case END_EXIT:
		t_exit_leaking(0);
	case END__EXIT:
		_exit(0);
	case END_WAIT:
		break;
	}
	T_CHILD_CHECK(wlk_release(l) == 0, 15);
	wlk_manager_close(m);
	return 0;
}

/* Start a holder child and wait until it holds. */
static pid_t start_holder(struct hold *h)
{
	pid_t pid = fork_linked(child_hold, h, &h->k);

	cr_assert_eq(t_get_byte(h->k.up.rd), 'g', "holder of \"%s\" failed",
		     h->name);
	return pid;
}

Test(death, killed_exclusive_holder_lets_waiter_in, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct t_holder w;
	struct hold h;
	pid_t pid;

	hold_init(&h, "x", NULL, END_WAIT);
	pid = start_holder(&h);
	cr_assert_eq(t_held_by_pid(m, "x", 1, pid), 1);
	t_holder_start(&w, m, "x", 1, NULL);
	cr_assert(t_wait_pending(m, "x", 1, 1), "waiter did not queue");
	cr_assert_not(t_holder_granted_now(&w));

	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(t_holder_wait_granted(&w), 0, "waiter not granted");
	T_ASSERT_RC(w.acq_rc, 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 128 + SIGKILL);
	cr_assert_eq(t_entries_of(m, pid), 0, "query still shows the dead pid");
	cr_assert_eq(t_held_by_pid(m, "x", 1, getpid()), 1);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
	cr_assert_eq(t_holder_release(&w), 0);
	T_ASSERT_RC(w.rel_rc, 0);
	t_holder_join(&w);
	t_assert_valid(m, NULL);
	link_close(&h.k);
}

/* One of two shared holders dies: the writer still waits for the other. */
Test(death, killed_shared_holder_leaves_other_shared_holder, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct wlk_manager *m2 = t_open();
	struct wlk_lock *l = (struct wlk_lock *)&l;
	struct hold h1, h2;
	struct t_holder w;
	pid_t p1, p2;

	hold_init(&h1, "s", &sh, END_WAIT);
	p1 = start_holder(&h1);
	hold_init(&h2, "s", &sh, END_WAIT);
	p2 = start_holder(&h2);
	cr_assert_eq(t_held_n(m, "s", 1), 2);
	t_holder_start(&w, m, "s", 1, NULL);
	cr_assert(t_wait_pending(m, "s", 1, 1));

	cr_assert_eq(kill(p1, SIGKILL), 0);
	cr_assert_eq(t_wait(p1, T_WAIT_MS), 128 + SIGKILL);
	cr_assert(t_wait_held(m, "s", 1, 1), "dead shared holder not reaped");
	cr_assert_eq(t_entries_of(m, p1), 0);
	cr_assert_eq(t_held_by_pid(m, "s", 1, p2), 1);
	cr_assert_eq(t_pending_n(m, "s", 1), 1);
	T_ASSERT_RC(wlk_acquire(m2, "s", 1, &ex_ia, &l), 0);
	cr_assert_null(l, "exclusive granted beside a live shared holder");
	cr_assert_not(t_holder_granted_now(&w), "writer granted too early");

	cr_assert_eq(t_put_byte(h2.k.down.wr, 'r'), 0);
	cr_assert_eq(t_wait(p2, T_WAIT_MS), 0);
	cr_assert_eq(t_holder_wait_granted(&w), 0, "writer not granted");
	T_ASSERT_RC(w.acq_rc, 0);
	cr_assert_eq(t_holder_release(&w), 0);
	t_holder_join(&w);
	t_assert_valid(m, NULL);
	link_close(&h1.k);
	link_close(&h2.k);
}

/* A holds, C queues then dies, B queued behind C gets it from A. */
Test(death, killed_queued_process_leaves_the_queue, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *a = NULL;
	struct hold c, b;
	pid_t pc, pb, seen[4];

	T_ASSERT_RC(wlk_acquire(m, "q", 1, NULL, &a), 0);
	hold_init(&c, "q", NULL, END_WAIT);
	pc = fork_linked(child_hold, &c, &c.k);
	cr_assert(t_wait_pending(m, "q", 1, 1), "C did not queue");
	hold_init(&b, "q", NULL, END_WAIT);
	pb = fork_linked(child_hold, &b, &b.k);
	cr_assert(t_wait_pending(m, "q", 1, 2), "B did not queue");
	cr_assert_eq(t_pending_pids(m, "q", 1, seen, 4), 2);
	cr_assert_eq(seen[0], pc);
	cr_assert_eq(seen[1], pb);

	cr_assert_eq(kill(pc, SIGKILL), 0);
	cr_assert_eq(t_wait(pc, T_WAIT_MS), 128 + SIGKILL);
	cr_assert(t_wait_pending(m, "q", 1, 1), "dead C still pending");
	cr_assert_eq(t_pending_pids(m, "q", 1, seen, 4), 1);
	cr_assert_eq(seen[0], pb);
	cr_assert_eq(t_entries_of(m, pc), 0);
	cr_assert_not(t_readable(b.k.up.rd), "B granted while A holds");

	T_ASSERT_RC(wlk_release(a), 0);
	cr_assert_eq(t_held_by_pid(m, "q", 1, pb), 1, "B not granted");
	cr_assert_eq(t_get_byte(b.k.up.rd), 'g');
	cr_assert_eq(t_put_byte(b.k.down.wr, 'r'), 0);
	cr_assert_eq(t_wait(pb, T_WAIT_MS), 0);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
	t_assert_valid(m, NULL);
	link_close(&c.k);
	link_close(&b.k);
}

/* Two children on name @name (one byte): @h holds it, then @w queues
 * for it (exclusive, each waiting to be told to end). */
static void holder_and_waiter(struct wlk_manager *m, const char *name,
			      struct hold *h, pid_t *ph, struct hold *w,
			      pid_t *pw)
{
	hold_init(h, name, NULL, END_WAIT);
	*ph = start_holder(h);
	hold_init(w, name, NULL, END_WAIT);
	*pw = fork_linked(child_hold, w, &w->k);
	cr_assert(t_wait_pending(m, name, 1, 1), "waiter did not queue");
}

/*
 * The waiter is a process already asleep in wlk_acquire(); after the kill
 * nobody calls the library, so only the death itself can wake it.
 */
Test(death, blocked_waiter_is_woken_by_the_death_alone, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct hold h, x;
	pid_t ph, px;

	holder_and_waiter(m, "w", &h, &ph, &x, &px);
	cr_assert_not(t_readable(x.k.up.rd));

	cr_assert_eq(kill(ph, SIGKILL), 0);
	cr_assert_eq(t_get_byte(x.k.up.rd), 'g',
		     "blocked waiter not woken by the holder's death");

	cr_assert_eq(t_wait(ph, T_WAIT_MS), 128 + SIGKILL);
	cr_assert_eq(t_held_by_pid(m, "w", 1, px), 1);
	cr_assert_eq(t_entries_of(m, ph), 0);
	cr_assert_eq(t_put_byte(x.k.down.wr, 'r'), 0);
	cr_assert_eq(t_wait(px, T_WAIT_MS), 0);
	t_assert_valid(m, NULL);
	link_close(&h.k);
	link_close(&x.k);
}

/* Poll (bounded) until /proc/<pid>/comm reads @want; true if it did. */
static bool wait_comm(pid_t pid, const char *want)
{
	uint64_t end = t_now_ns() + (uint64_t)T_WAIT_MS * 1000000u;
	char path[64], buf[64];

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	for (;;) {
		FILE *f = fopen(path, "r");

		buf[0] = '\0';
		if (f) {
			if (!fgets(buf, (int)sizeof(buf), f))
				buf[0] = '\0';
			fclose(f);
		}
		buf[strcspn(buf, "\n")] = '\0';
		if (!strcmp(buf, want))
			return true;
		if (t_now_ns() > end)
			return false;
		t_nap_ms(1);
	}
}

/*
 * A holder ends without closing (exec, exit, _exit) while the parent
 * waits for its lock: the waiter is granted. Returns the holder's pid,
 * still unreaped.
 */
static pid_t end_while_held(struct wlk_manager *m, struct hold *h,
			    enum hold_end end)
{
	struct t_holder w;
	pid_t pid;

	hold_init(h, "e", NULL, end);
	pid = start_holder(h);
	t_holder_start(&w, m, "e", 1, NULL);
	cr_assert(t_wait_pending(m, "e", 1, 1));
	cr_assert_eq(t_put_byte(h->k.down.wr, 'x'), 0);
	cr_assert_eq(t_holder_wait_granted(&w), 0, "waiter not granted");
	T_ASSERT_RC(w.acq_rc, 0);
	cr_assert_eq(t_entries_of(m, pid), 0, "query still shows %d", (int)pid);
	cr_assert_eq(t_holder_release(&w), 0);
	T_ASSERT_RC(w.rel_rc, 0);
	t_holder_join(&w);
	return pid;
}

/* exec() ends the process image: its locks go, though the pid lives on. */
Test(death, exec_while_holding_releases, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct hold h;
	pid_t pid;

	pid = end_while_held(m, &h, END_EXEC);
	/* EOF: the exec closed the child's end (O_CLOEXEC). */
	cr_assert_eq(t_get_byte(h.k.up.rd), -1);
	cr_assert(wait_comm(pid, "sleep"), "the child did not exec");
	cr_assert_eq(waitpid(pid, NULL, WNOHANG), 0, "exec'd child ended");
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 128 + SIGKILL);
	t_assert_valid(m, NULL);
	link_close(&h.k);
}

Test(death, exit_without_close_releases, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct hold h;
	pid_t pid;

	pid = end_while_held(m, &h, END_EXIT);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	t_assert_valid(m, NULL);
	link_close(&h.k);
}

Test(death, underscore_exit_without_close_releases, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct hold h;
	pid_t pid;

	pid = end_while_held(m, &h, END__EXIT);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
	t_assert_valid(m, NULL);
	link_close(&h.k);
}

/* A stopped process is alive: its lock stays held until it releases. */
Test(death, stopped_holder_keeps_its_lock, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = (struct wlk_lock *)&l;
	struct hold h;
	uint64_t t0;
	pid_t pid;

	hold_init(&h, "p", NULL, END_WAIT);
	pid = start_holder(&h);
	cr_assert_eq(kill(pid, SIGSTOP), 0);
	cr_assert(wait_stopped(pid), "holder did not stop");

	t0 = t_now_ns();
	T_ASSERT_RC(wlk_acquire(m, "p", 1, &ex_timed, &l), WLK_ETIMEDOUT);
	cr_assert_geq(t_now_ns() - t0, STILL_HELD_NS);
	T_ASSERT_RC(wlk_acquire(m, "p", 1, &ex_ia, &l), 0);
	cr_assert_null(l, "got the lock of a stopped holder");
	cr_assert_eq(t_held_by_pid(m, "p", 1, pid), 1);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
	t_assert_valid(m, NULL);

	cr_assert_eq(kill(pid, SIGCONT), 0);
	cr_assert_eq(t_put_byte(h.k.down.wr, 'r'), 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0, "holder failed to release");
	assert_free(m, "p");
	link_close(&h.k);
}

struct short_lived {
	struct wlk_manager *m;
	struct wlk_lock *l;
	int rc;
};

/* Thread: open a manager and take "t", then exit holding it. */
static void *thread_open_acquire(void *arg)
{
	struct short_lived *s = arg;

	s->rc = wlk_manager_open(t_origin, NULL, &s->m);
	if (!s->rc)
		s->rc = wlk_acquire(s->m, "t", 1, NULL, &s->l);
	return NULL;
}

/* Child: lock from a thread that exits; report; release when told. */
static int child_thread_exits(void *arg)
{
	struct link *k = arg;
	struct short_lived s = { 0 };
	pthread_t th;
	char c;

	T_CHILD_CHECK(pthread_create(&th, NULL, thread_open_acquire, &s) == 0,
		      10);
	T_CHILD_CHECK(pthread_join(th, NULL) == 0, 11);
	T_CHILD_CHECK(s.rc == 0, 12);
	T_CHILD_CHECK(t_put_byte(k->up.wr, 'g') == 0, 13);
	T_CHILD_CHECK(t_get(k->down.rd, &c, 1, HOLD_MS) == 0, 14);
	T_CHILD_CHECK(wlk_release(s.l) == 0, 15);
	wlk_manager_close(s.m);
	return 0;
}

/* The thread that opened and locked exited; its process still holds. */
Test(death, thread_exit_is_not_process_death, T_FIX, .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *l = (struct wlk_lock *)&l;
	struct link k;
	pid_t pid;

	link_open(&k);
	pid = fork_linked(child_thread_exits, &k, &k);
	cr_assert_eq(t_get_byte(k.up.rd), 'g', "child failed to lock");
	T_ASSERT_RC(wlk_acquire(m, "t", 1, &ex_timed, &l), WLK_ETIMEDOUT);
	T_ASSERT_RC(wlk_acquire(m, "t", 1, &ex_ia, &l), 0);
	cr_assert_null(l, "lock of a live process went with its thread");
	cr_assert_eq(t_held_by_pid(m, "t", 1, pid), 1);
	t_assert_valid(m, NULL);
	cr_assert_eq(t_put_byte(k.down.wr, 'r'), 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0, "child failed to release");
	assert_free(m, "t");
	link_close(&k);
}

struct forker {
	struct link k;
	struct t_pipe gate; /* keeps the grandchild alive until closed */
};

/*
 * Child: take "f", fork a grandchild that just waits (it inherits the
 * mapping and the descriptors), send its pid, wait to be killed.
 */
static int child_hold_and_fork(void *arg)
{
	struct forker *f = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;
	pid_t g;
	char c;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK(wlk_acquire(m, "f", 1, NULL, &l) == 0, 11);
	g = fork();
	T_CHILD_CHECK(g >= 0, 12);
	if (g == 0) {
		close(f->gate.wr);
		(void)t_get(f->gate.rd, &c, 1, HOLD_MS);
		_exit(0);
	}
	T_CHILD_CHECK(t_put(f->k.up.wr, &g, sizeof(g)) == 0, 13);
	T_CHILD_CHECK(t_get(f->k.down.rd, &c, 1, HOLD_MS) == 0, 14);
	return 0;
}

/* The holder dies while its fork child, with the mapping, lives on. */
Test(death, holder_death_detected_while_its_fork_child_lives, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct t_holder w;
	struct forker f;
	uint64_t end;
	pid_t pid, g = 0;
	int status;

	/* The orphaned grandchild is reparented to us, to be reaped. */
	cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	t_pipe_open(&f.gate);
	link_open(&f.k);
	pid = fork_linked(child_hold_and_fork, &f, &f.k);
	cr_assert_eq(t_get(f.k.up.rd, &g, sizeof(g), T_WAIT_MS), 0);
	cr_assert_eq(t_held_by_pid(m, "f", 1, pid), 1);
	t_holder_start(&w, m, "f", 1, NULL);
	cr_assert(t_wait_pending(m, "f", 1, 1));

	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(t_holder_wait_granted(&w), 0, "waiter not granted");
	T_ASSERT_RC(w.acq_rc, 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 128 + SIGKILL);
	cr_assert_eq(waitpid(g, &status, WNOHANG), 0, "grandchild ended");
	cr_assert_eq(t_entries_of(m, pid), 0);
	cr_assert_eq(t_entries_of(m, g), 0);
	cr_assert_eq(t_holder_release(&w), 0);
	t_holder_join(&w);
	t_assert_valid(m, NULL);

	t_pipe_close(&f.gate);
	end = t_now_ns() + (uint64_t)T_WAIT_MS * 1000000u;
	while (waitpid(g, &status, WNOHANG) == 0 && t_now_ns() < end)
		t_nap_ms(1);
	link_close(&f.k);
}

/*
 * The holder a steal displaced dies: the stealer keeps the lock. With
 * room for three requests, the dead holder's stolen slot fills the table
 * until it is reaped, which shows the reaping happened.
 */
Test(death, killed_stolen_holder_leaves_stealer_holding, T_FIX,
     .timeout = 20)
{
	struct wlk_manager_options small = { .max_requests = 3 };
	struct wlk_manager *m = t_open_opts(&small);
	struct wlk_manager *m2 = t_open();
	struct wlk_options steal = { .steal = true };
	struct wlk_lock *l = NULL, *z = NULL;
	struct t_holder w;
	struct hold a;
	pid_t pa;

	hold_init(&a, "s", NULL, END_WAIT);
	pa = start_holder(&a);
	T_ASSERT_RC(wlk_acquire(m, "s", 1, &steal, &l), 0);
	cr_assert_eq(t_held_by_pid(m, "s", 1, pa), 0);
	t_holder_start(&w, m2, "s", 1, NULL);
	cr_assert(t_wait_pending(m, "s", 1, 1));
	T_ASSERT_RC(wlk_acquire(m, "z", 1, &ex_ia, &z), WLK_EFULL);

	cr_assert_eq(kill(pa, SIGKILL), 0);
	cr_assert_eq(t_wait(pa, T_WAIT_MS), 128 + SIGKILL);
	cr_assert_eq(t_entries_of(m, pa), 0);
	t_assert_valid(m, NULL);
	/* The stolen slot of the dead holder was freed. */
	T_ASSERT_RC(wlk_acquire(m, "z", 1, &ex_ia, &z), 0);
	cr_assert_not_null(z);
	T_ASSERT_RC(wlk_release(z), 0);
	cr_assert_not(wlk_lock_stolen(l));
	cr_assert_eq(t_held_n(m, "s", 1), 1);
	cr_assert_eq(t_held_by_pid(m, "s", 1, getpid()), 1);
	cr_assert_eq(t_pending_n(m, "s", 1), 1);
	cr_assert_not(t_holder_granted_now(&w), "waiter jumped the stealer");

	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert_eq(t_holder_wait_granted(&w), 0);
	cr_assert_eq(t_holder_release(&w), 0);
	T_ASSERT_RC(w.rel_rc, 0);
	t_holder_join(&w);
	t_assert_valid(m, NULL);
	link_close(&a.k);
}

#define MANY 10

struct many {
	struct t_pipe up;
	int index;
	bool queue;
};

/* "n<i>" for the child @i; "p" (the name they wait for) for MANY. */
static void many_name(char *buf, size_t size, int i)
{
	if (i == MANY)
		snprintf(buf, size, "p");
	else
		snprintf(buf, size, "n%d", i);
}

struct queuer {
	struct wlk_manager *m;
	int rc;
};

static void *thread_queue_p(void *arg)
{
	struct queuer *q = arg;
	struct wlk_lock *l = NULL;

	q->rc = wlk_acquire(q->m, "p", 1, NULL, &l);
	return NULL;
}

/* Child: hold "n<index>" and, if asked, queue for "p" from a thread. */
static int child_many(void *arg)
{
	struct many *mc = arg;
	struct wlk_manager *m = NULL;
	struct queuer q = { 0 };
	struct wlk_lock *l = NULL;
	pthread_t th;
	char name[16];

	many_name(name, sizeof(name), mc->index);
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK(wlk_acquire(m, name, WLK_NUL_TERMINATED, NULL, &l) == 0,
		      11);
	if (mc->queue) {
		T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &q.m) == 0, 12);
		T_CHILD_CHECK(pthread_create(&th, NULL, thread_queue_p, &q) ==
				      0, 13);
	}
	T_CHILD_CHECK(t_put_byte(mc->up.wr, 'g') == 0, 14);
	t_nap_ms(HOLD_MS); /* until killed */
	return 15;
}

/* Child: right after opening, every name of the dead is free. */
static int child_take_all(void *arg)
{
	struct wlk_manager *m = NULL;
	struct wlk_lock *l[MANY + 1];
	char name[16];
	int i;

	(void)arg;
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	for (i = 0; i <= MANY; i++) {
		many_name(name, sizeof(name), i);
		l[i] = NULL;
		T_CHILD_CHECK(wlk_acquire(m, name, WLK_NUL_TERMINATED, &ex_ia,
					  &l[i]) == 0, 11);
		T_CHILD_CHECK(l[i] != NULL, 20 + i);
	}
	for (i = 0; i <= MANY; i++)
		T_CHILD_CHECK(wlk_release(l[i]) == 0, 12);
	wlk_manager_close(m);
	return 0;
}

/*
 * Ten processes hold a name each (and, if @queue, also wait for "p",
 * which the parent holds), then are all killed. Killed last to first, a
 * waiter never watches one that is already dead, and the parent's release
 * of "p" (granting it to the first dead waiter, if @queue) reaps nobody:
 * the new process's open finds all ten dead, and must free every name.
 */
static void many_dead(bool queue)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *p = NULL;
	struct many mc;
	pid_t pids[MANY], taker;
	int i, rc;

	T_ASSERT_RC(wlk_acquire(m, "p", 1, NULL, &p), 0);
	t_pipe_open(&mc.up);
	mc.queue = queue;
	for (i = 0; i < MANY; i++) {
		mc.index = i;
		pids[i] = t_fork(child_many, &mc);
		cr_assert_eq(t_get_byte(mc.up.rd), 'g', "child %d failed", i);
		if (queue)
			cr_assert(t_wait_pending(m, "p", 1, (size_t)i + 1));
	}
	cr_assert_eq(t_held_n(m, NULL, 0), MANY + 1);
	for (i = MANY; i-- > 0;)
		cr_assert_eq(kill(pids[i], SIGKILL), 0);
	for (i = 0; i < MANY; i++)
		cr_assert_eq(t_wait(pids[i], T_WAIT_MS), 128 + SIGKILL);
	T_ASSERT_RC(wlk_release(p), 0);

	taker = t_fork(child_take_all, NULL);
	rc = t_wait(taker, T_WAIT_MS);
	if (rc >= 20 && rc <= 20 + MANY) {
		char name[16];

		many_name(name, sizeof(name), rc - 20);
		cr_assert_fail("new process: \"%s\" of a dead process is "
			       "still taken", name);
	}
	cr_assert_eq(rc, 0, "new process failed: %d", rc);
	for (i = 0; i < MANY; i++)
		cr_assert_eq(t_entries_of(m, pids[i]), 0, "child %d remains", i);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
	t_assert_valid(m, NULL);
	t_pipe_close(&mc.up);
}

Test(death, many_dead_holders_are_all_reaped, T_FIX, .timeout = 30)
{
	many_dead(false);
}

Test(death, many_dead_holders_and_waiters_are_all_reaped, T_FIX,
     .timeout = 30)
{
	many_dead(true);
}

/* Grandchild, pid 1 of a new PID namespace: opening must be refused. */
static int grandchild_open_in_pidns(void *arg)
{
	struct t_pipe *p = arg;
	struct wlk_manager *m = NULL;
	int rc;

	if (getpid() != 1)
		return 30;
	rc = wlk_manager_open(t_origin, NULL, &m);
	if (rc == 0)
		wlk_manager_close(m);
	if (t_put(p->wr, &rc, sizeof(rc)) != 0)
		return 31;
	return rc == WLK_ESECURITY ? 0 : 32;
}

/* Child: enter a new PID namespace and fork into it. */
static int child_new_pidns(void *arg)
{
	pid_t g;
	int status;

	if (unshare(CLONE_NEWPID) != 0)
		return errno == EPERM || errno == EINVAL ? SKIP_CODE : 20;
	g = fork();
	if (g < 0)
		return 21;
	if (g == 0)
		_exit(grandchild_open_in_pidns(arg));
	if (waitpid(g, &status, 0) != g)
		return 22;
	if (!WIFEXITED(status))
		return 23;
	return WEXITSTATUS(status);
}

/* Robust mutex owner ids are per namespace: another one is refused. */
Test(death, open_from_another_pid_namespace_is_refused, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct t_pipe p;
	int rc, got = 1;
	pid_t pid;

	t_pipe_open(&p);
	pid = t_fork(child_new_pidns, &p);
	rc = t_wait(pid, T_WAIT_MS);
	if (rc == SKIP_CODE)
		cr_skip_test("unshare(CLONE_NEWPID) is not permitted here");
	if (t_readable(p.rd))
		(void)t_get(p.rd, &got, sizeof(got), T_WAIT_MS);
	cr_assert_eq(rc, 0, "child: %d; open in the new namespace: %s", rc,
		     t_ename(got));
	T_ASSERT_RC(got, WLK_ESECURITY);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	t_assert_valid(m, NULL);
	t_pipe_close(&p);
}

/*
 * A process with several managers of the bucket dies: every one of them
 * is terminated, found by its agent's list of clients (layout.h, AGENT
 * LISTS): all their locks pass on and their queued request goes, not
 * only the first manager's.
 */
#define MANY_MANAGERS 4
static const char *const many_names[MANY_MANAGERS] = {"m0", "m1", "m2",
						      "q"};

/* Child: managers 0..2 hold m0..m2, manager 3 queues for "q" (held by
 * the parent); say so, wait to be killed. */
static int child_many_managers(void *arg)
{
	struct t_pipe *up = arg;
	struct wlk_manager *m[MANY_MANAGERS] = {NULL};
	struct wlk_lock *l = NULL;

	for (int i = 0; i < MANY_MANAGERS; i++)
		T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m[i]) == 0,
			      10);
	for (int i = 0; i < MANY_MANAGERS - 1; i++)
		T_CHILD_CHECK(wlk_acquire(m[i], many_names[i], 2, NULL, &l) ==
				      0,
			      11);
	T_CHILD_CHECK(t_put_byte(up->wr, 'g') == 0, 12);
	if (wlk_acquire(m[MANY_MANAGERS - 1], "q", 1, NULL, &l) == 0)
		return 13; /* granted: the parent never lets go */
	return 14;
}

Test(death, killed_process_with_several_managers_loses_all, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct wlk_lock *q = NULL;
	struct wlk_seg_header *hdr;
	struct t_holder w;
	struct t_pipe up;
	uint64_t epoch;
	size_t size;
	pid_t pid;

	T_ASSERT_RC(wlk_acquire(m, "q", 1, NULL, &q), 0);
	t_pipe_open(&up);
	pid = t_fork(child_many_managers, &up);
	cr_assert_eq(t_get_byte(up.rd), 'g', "the child did not hold");
	cr_assert(t_wait_pending(m, "q", 1, 1), "the child did not queue");
	cr_assert_eq(t_held_n(m, NULL, 0), 4);
	t_assert_valid(m, "four managers of one process");
	t_holder_start(&w, m, "m2", 2, NULL);
	cr_assert(t_wait_pending(m, "m2", 2, 1), "waiter did not queue");
	hdr = t_segment_map(&size);
	epoch = hdr->recovery_epoch;

	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 128 + SIGKILL);
	cr_assert_eq(t_holder_wait_granted(&w), 0, "waiter not granted");
	T_ASSERT_RC(w.acq_rc, 0);
	cr_assert_eq(t_entries_of(m, pid), 0, "query still shows the dead pid");
	cr_assert_eq(t_held_n(m, NULL, 0), 2, "%zu held after the death",
		     t_held_n(m, NULL, 0));
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
	cr_assert_eq(t_holder_release(&w), 0);
	t_holder_join(&w);
	T_ASSERT_RC(wlk_release(q), 0);
	t_assert_valid(m, NULL);
	/* By the reaping, not by a repair after it (which would free them
	 * too). */
	cr_assert_eq(hdr->recovery_epoch, epoch, "the segment was repaired");
	cr_assert_eq(hdr->needs_repair, 0);
	munmap(hdr, size);
	t_pipe_close(&up);
}

/*
 * A holder and a queued process die with nobody waiting on them: the
 * next query reaps them, as it finds them among the owners of what it
 * copies (lib/inspect/query.c), and shows neither; the name is free.
 */
Test(death, killed_processes_are_not_in_the_next_query, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m = t_open();
	struct hold h, q;
	pid_t ph, pq;

	holder_and_waiter(m, "k", &h, &ph, &q, &pq);
	cr_assert_eq(t_entries_of(m, ph), 1);
	cr_assert_eq(t_entries_of(m, pq), 1);

	cr_assert_eq(kill(pq, SIGKILL), 0);
	cr_assert_eq(kill(ph, SIGKILL), 0);
	cr_assert_eq(t_wait(pq, T_WAIT_MS), 128 + SIGKILL);
	cr_assert_eq(t_wait(ph, T_WAIT_MS), 128 + SIGKILL);
	cr_assert_eq(t_entries_of(m, ph), 0, "query shows the dead holder");
	cr_assert_eq(t_entries_of(m, pq), 0, "query shows the dead waiter");
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0);
	assert_free(m, "k");
	t_assert_valid(m, NULL);
	link_close(&h.k);
	link_close(&q.k);
}

/*
 * A process that dies with every client slot of the bucket taken leaves
 * the table full of its managers until it is reaped: the next
 * wlk_manager_open() of a process already attached (which probes nobody
 * at attach) reaps it and gets a slot.
 */
static int child_takes_every_client(void *arg)
{
	struct t_pipe *up = arg;
	struct wlk_manager *m = NULL;
	int rc, n = 0;

	while ((rc = wlk_manager_open(t_origin, NULL, &m)) == 0)
		n++;
	T_CHILD_CHECK(rc == WLK_EFULL && n > 0, 10);
	T_CHILD_CHECK(t_put_byte(up->wr, 'g') == 0, 11);
	t_nap_ms(60000); /* until killed */
	return 12;
}

Test(death, client_table_full_of_the_dead_is_reaped_at_open, T_FIX,
     .timeout = 30)
{
	struct wlk_manager *m = t_open(), *m2 = NULL;
	struct t_pipe up;
	pid_t pid;

	t_pipe_open(&up);
	pid = t_fork(child_takes_every_client, &up);
	cr_assert_eq(t_get_byte(up.rd), 'g', "the child did not fill it");
	T_ASSERT_RC(wlk_manager_open(t_origin, NULL, &m2), WLK_EFULL);
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 128 + SIGKILL);
	T_ASSERT_RC(wlk_manager_open(t_origin, NULL, &m2), 0);
	t_close(m2);
	t_assert_valid(m, NULL);
	t_pipe_close(&up);
}
