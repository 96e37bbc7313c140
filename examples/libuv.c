/* SPDX-License-Identifier: MIT */
/* libuv.c - a libuv loop that holds several locks at once, asynchronously. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/wait.h>

#include <uv.h>

#include <weblocks.h>
#include <weblocks/async.h>

#define NJOBS 3
#define CHILD_HOLD_MS 500

/* A lock to work under; its timer stands for the work. */
struct job {
	const char *name;
	unsigned int work_ms;
	struct wlk_lock *lock;
	uv_timer_t work;
};

static struct job jobs[NJOBS] = {
	{ .name = "a", .work_ms = 200 },
	{ .name = "b", .work_ms = 100 },
	{ .name = "c", .work_ms = 300 },
};
static uv_loop_t loop;
static uv_poll_t poller;
static uv_timer_t watchdog;
static struct wlk_manager *m;
static uint64_t t0;
static int left = NJOBS, failed;

static void say(const char *fmt, ...)
{
	va_list ap;

	printf("libuv: %4" PRIu64 " ms: ", uv_hrtime() / 1000000 - t0);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* Another process holds "b" for a while, so "b" is granted last. */
static int child(const char *origin, int ready)
{
	struct wlk_manager *cm;
	struct wlk_lock *l;

	if (wlk_manager_open(origin, NULL, &cm) ||
	    wlk_acquire(cm, "b", 1, NULL, &l))
		return 1;
	(void)!write(ready, "h", 1);
	usleep(CHILD_HOLD_MS * 1000);
	wlk_release(l);
	wlk_manager_close(cm);
	return 0;
}

/* Close the handles that keep the loop alive once every job is done. */
static void job_finished(void)
{
	if (--left > 0)
		return;
	uv_poll_stop(&poller);
	uv_close((uv_handle_t *)&poller, NULL);
	uv_close((uv_handle_t *)&watchdog, NULL);
}

static void work_done(uv_timer_t *t)
{
	struct job *j = t->data;
	int rc = wlk_release(j->lock);

	say("released \"%s\": %s", j->name, rc ? wlk_strerror(rc) : "ok");
	failed |= rc != 0;
	uv_close((uv_handle_t *)t, NULL);
	job_finished();
}

/* Runs from wlk_manager_dispatch(); the lock stays held when it returns. */
static void granted(struct wlk_async *req, int status, struct wlk_lock *lock,
		    void *arg)
{
	struct job *j = arg;

	if (status) {
		say("\"%s\" not granted: %s", j->name, wlk_strerror(status));
		failed = 1;
		job_finished();
		return;
	}
	j->lock = lock;
	say("granted \"%s\" (token %" PRIu64 "), working %u ms", j->name,
	    wlk_lock_token(lock), j->work_ms);
	uv_timer_init(&loop, &j->work);
	j->work.data = j;
	uv_timer_start(&j->work, work_done, j->work_ms, 0);
}

static void on_readable(uv_poll_t *p, int status, int events)
{
	say("descriptor readable: %d callback(s)", wlk_manager_dispatch(m));
}

static void on_watchdog(uv_timer_t *t)
{
	say("not done after 3 s");
	failed = 1;
	uv_stop(&loop);
}

static void close_any(uv_handle_t *h, void *arg)
{
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

int main(void)
{
	struct wlk_options o = WLK_OPTIONS_INIT; /* sets o.size */
	char origin[64], c;
	int pfd[2], st, i;
	pid_t pid;

	o.timeout_ns = 2000000000ull;
	t0 = uv_hrtime() / 1000000;
	snprintf(origin, sizeof(origin), "https://libuv-%ld.example",
		 (long)getpid());
	if (pipe(pfd))
		return 1;
	pid = fork();
	if (pid == 0)
		_exit(child(origin, pfd[1]));
	/* Request only once "b" is held, so that one has to wait. */
	if (pid < 0 || read(pfd[0], &c, 1) != 1)
		return 1;
	if (wlk_manager_open(origin, NULL, &m) || uv_loop_init(&loop))
		return 1;
	/* The manager's descriptor is pollable like a socket. */
	uv_poll_init(&loop, &poller, wlk_manager_fd(m));
	uv_poll_start(&poller, UV_READABLE, on_readable);
	uv_timer_init(&loop, &watchdog);
	uv_timer_start(&watchdog, on_watchdog, 3000, 0);
	for (i = 0; i < NJOBS; i++)
		if (wlk_request_async(m, jobs[i].name, WLK_NUL_TERMINATED, &o,
				      granted, &jobs[i], NULL))
			return 1;
	say("requested a, b, c; \"b\" is held by process %d", (int)pid);

	uv_run(&loop, UV_RUN_DEFAULT);
	/* After uv_stop() handles may be open: let their close run. */
	uv_walk(&loop, close_any, NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	uv_loop_close(&loop);
	wlk_manager_close(m);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		failed = 1;
	wlk_bucket_remove(origin, NULL);
	say("%s", failed ? "FAILED" : "all locks done");
	return failed;
}
