/* SPDX-License-Identifier: MIT */
/*
 * t_stopped.c - a process stopped (SIGSTOP) inside the segment's critical
 * section keeps the segment mutex until it continues; a request with a
 * timeout or an abort signal gives up on time all the same, and leaves
 * nothing queued or held.
 *
 * The stopped process is a helper that locks the segment mutex itself (the
 * robust mutex in the segment header, layout.h), as every library call
 * does for a moment, and is stopped while it holds it.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common.h"
#include "testing.h"
#include "weblocks/async.h"

/* The requests' timeout, and how soon after it they must have returned. */
#define TIMEOUT_MS 100
#define LATE_MS 900
/* How long after the call starts the other thread aborts the signal. */
#define ABORT_AFTER_MS 50

#define MS 1000000ull

/* The helper and its pipes. */
struct helper {
	struct t_pipe up;   /* helper -> parent */
	struct t_pipe down; /* parent -> helper */
	char path[512];     /* the segment */
	pid_t pid, parent;
};

/* Helper: when told, lock the segment mutex; unlock when told again. */
static int helper_main(void *arg)
{
	struct helper *h = arg;
	struct wlk_seg_header *hdr;
	char c;
	int fd;

	/* A test that times out must not leave a stopped helper behind:
	 * SIGKILL ends it stopped or not. */
	T_CHILD_CHECK(prctl(PR_SET_PDEATHSIG, SIGKILL) == 0, 9);
	T_CHILD_CHECK(getppid() == h->parent, 9);
	T_CHILD_CHECK(t_get(h->down.rd, &c, 1, 3 * T_WAIT_MS) == 0, 10);
	fd = open(h->path, O_RDWR);
	T_CHILD_CHECK(fd >= 0, 11);
	hdr = mmap(NULL, WLK_HEADER_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
		   fd, 0);
	close(fd);
	T_CHILD_CHECK(hdr != MAP_FAILED, 12);
	T_CHILD_CHECK(pthread_mutex_lock(&hdr->sync.mutex) == 0, 13);
	T_CHILD_CHECK(t_put_byte(h->up.wr, 'L') == 0, 14);
	/* Stopped here; continued, then told to let go. */
	T_CHILD_CHECK(t_get(h->down.rd, &c, 1, 6 * T_WAIT_MS) == 0, 15);
	T_CHILD_CHECK(pthread_mutex_unlock(&hdr->sync.mutex) == 0, 16);
	return 0;
}

/* Fork the helper for the segment we map; it locks nothing yet. */
static void helper_fork(struct helper *h)
{
	cr_assert(t_mapped_segment(h->path, sizeof(h->path)), "no segment");
	t_pipe_open(&h->up);
	t_pipe_open(&h->down);
	h->parent = getpid();
	h->pid = t_fork(helper_main, h);
	close(h->up.wr);
	h->up.wr = -1;
	close(h->down.rd);
	h->down.rd = -1;
}

/* Have the helper lock the segment mutex, and stop it there. */
static void helper_lock_and_stop(struct helper *h)
{
	int st;

	cr_assert_eq(t_put_byte(h->down.wr, 'l'), 0);
	cr_assert_eq(t_get_byte(h->up.rd), 'L', "helper did not lock");
	cr_assert_eq(kill(h->pid, SIGSTOP), 0);
	cr_assert_eq(waitpid(h->pid, &st, WUNTRACED), h->pid);
	cr_assert(WIFSTOPPED(st), "helper did not stop");
}

/* Continue the helper, have it unlock, and reap it. */
static void helper_release(struct helper *h)
{
	cr_assert_eq(kill(h->pid, SIGCONT), 0);
	cr_assert_eq(t_put_byte(h->down.wr, 'u'), 0);
	cr_assert_eq(t_wait(h->pid, T_WAIT_MS), 0, "helper failed");
	t_pipe_close(&h->up);
	t_pipe_close(&h->down);
}

/* Elapsed ms since @t0. */
static uint64_t since_ms(uint64_t t0)
{
	return (t_now_ns() - t0) / MS;
}

struct aborter {
	pthread_t th;
	struct t_pipe go;
	struct wlk_signal *sig;
};

/* Thread: when told, let the call get going, then abort the signal. */
static void *aborter_main(void *arg)
{
	struct aborter *a = arg;

	if (t_get_byte(a->go.rd) == 'a') {
		t_nap_ms(ABORT_AFTER_MS);
		wlk_signal_abort(a->sig, 0);
	}
	return NULL;
}

static void aborter_start(struct aborter *a)
{
	cr_assert_eq(wlk_signal_new(&a->sig), 0);
	t_pipe_open(&a->go);
	cr_assert_eq(pthread_create(&a->th, NULL, aborter_main, a), 0);
}

static void aborter_join(struct aborter *a)
{
	pthread_join(a->th, NULL);
	t_pipe_close(&a->go);
	wlk_signal_free(a->sig);
}

static int never_called(struct wlk_lock *l, void *arg)
{
	(void)l;
	*(bool *)arg = true;
	return 0;
}

/*
 * Blocking requests on a name nobody holds, while the mutex's owner is
 * stopped: the timeout and the signal end them on time; one with neither
 * waits until the owner lets go, and then gets its lock.
 */
Test(stopped, timeout_and_signal_end_the_wait_for_the_mutex, T_FIX,
     .timeout = 30)
{
	struct wlk_manager *m = t_open();
	const struct wlk_options timed = { .timeout_ns = TIMEOUT_MS * MS };
	struct wlk_options sig = { 0 };
	struct wlk_lock *l = (struct wlk_lock *)&l;
	struct t_holder w;
	struct aborter a;
	struct helper h;
	bool ran = false;
	uint64_t t0;

	helper_fork(&h);
	aborter_start(&a);
	helper_lock_and_stop(&h);

	t0 = t_now_ns();
	T_ASSERT_RC(wlk_acquire(m, "u", 1, &timed, &l), WLK_ETIMEDOUT);
	cr_assert_geq(since_ms(t0), TIMEOUT_MS);
	cr_assert_lt(since_ms(t0), TIMEOUT_MS + LATE_MS, "timed out late");
	cr_assert_eq(l, (struct wlk_lock *)&l, "*out written on failure");

	sig.signal = a.sig;
	cr_assert_eq(t_put_byte(a.go.wr, 'a'), 0);
	t0 = t_now_ns();
	T_ASSERT_RC(wlk_request(m, "u", 1, &sig, never_called, &ran),
		    WLK_EABORTED);
	cr_assert_lt(since_ms(t0), ABORT_AFTER_MS + LATE_MS, "aborted late");
	cr_assert_not(ran, "the callback ran");
	aborter_join(&a);

	t_holder_start(&w, m, "v", 1, NULL);
	cr_assert_not(t_holder_granted_now(&w));

	helper_release(&h);
	cr_assert_eq(t_holder_wait_granted(&w), 0, "untimed request lost");
	T_ASSERT_RC(w.acq_rc, 0);
	cr_assert_eq(t_held_n(m, "u", 1), 0);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0, "a request was left queued");
	cr_assert_eq(t_holder_release(&w), 0);
	T_ASSERT_RC(w.rel_rc, 0);
	t_holder_join(&w);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	t_assert_valid(m, NULL);
}

static atomic_int g_calls;
static int g_status;
static bool g_locked;

static void on_done(struct wlk_async *req, int status, struct wlk_lock *lock,
		    void *arg)
{
	(void)req;
	(void)arg;
	g_status = status;
	g_locked = lock != NULL;
	if (lock)
		wlk_release(lock);
	atomic_fetch_add(&g_calls, 1);
}

/*
 * An asynchronous request started while the mutex's owner is stopped:
 * wlk_request_async() returns when the timeout passes, and the callback
 * reports it; nothing was queued.
 */
Test(stopped, async_request_times_out_waiting_for_the_mutex, T_FIX,
     .timeout = 30)
{
	struct wlk_manager *m = t_open();
	const struct wlk_options timed = { .timeout_ns = TIMEOUT_MS * MS };
	struct helper h;
	uint64_t t0;

	/* Forked before the watcher thread starts: ASan's allocator is not
	 * fork-safe. */
	helper_fork(&h);
	cr_assert_geq(wlk_manager_fd(m), 0);
	helper_lock_and_stop(&h);

	t0 = t_now_ns();
	T_ASSERT_RC(wlk_request_async(m, "u", 1, &timed, on_done, NULL, NULL),
		    0);
	cr_assert_lt(since_ms(t0), TIMEOUT_MS + LATE_MS, "returned late");
	cr_assert(t_pump(m, &g_calls, 1, T_WAIT_MS), "no callback");
	T_ASSERT_RC(g_status, WLK_ETIMEDOUT);
	cr_assert_not(g_locked);
	cr_assert_lt(since_ms(t0), TIMEOUT_MS + LATE_MS, "completed late");

	helper_release(&h);
	cr_assert_eq(t_held_n(m, NULL, 0), 0);
	cr_assert_eq(t_pending_n(m, NULL, 0), 0, "a request was left queued");
	t_assert_valid(m, NULL);
}
