/* SPDX-License-Identifier: MIT */
/*
 * epoll.c - an epoll loop that holds several locks at once, asynchronously;
 * one of them is held by another process for a while, so it comes last.
 * examples/loop.c is the shorter first read: one lock, poll(), no fork.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/wait.h>

#include <weblocks.h>
#include <weblocks/async.h>

#define NJOBS 3
#define CHILD_HOLD_MS 500

/* A lock to work under; its timer stands for the work. */
struct job {
	const char *name;
	unsigned int work_ms;
	struct wlk_lock *lock;
	int tfd;
};

static struct job jobs[NJOBS] = {
	{ .name = "a", .work_ms = 200 },
	{ .name = "b", .work_ms = 100 },
	{ .name = "c", .work_ms = 300 },
};
static int ep, left = NJOBS, failed;
static struct timespec t0;

static void say(const char *fmt, ...)
{
	struct timespec t;
	va_list ap;

	clock_gettime(CLOCK_MONOTONIC, &t);
	printf("epoll: %4ld ms: ", (t.tv_sec - t0.tv_sec) * 1000 +
				   (t.tv_nsec - t0.tv_nsec) / 1000000);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

/* Another process holds "b" for a while, so "b" is granted last. */
static int child(const char *origin, int ready)
{
	struct wlk_manager *m;
	struct wlk_lock *l;

	if (wlk_manager_open(origin, NULL, &m) ||
	    wlk_acquire(m, "b", 1, NULL, &l))
		return 1;
	(void)!write(ready, "h", 1);
	usleep(CHILD_HOLD_MS * 1000);
	wlk_release(l);
	wlk_manager_close(m);
	return 0;
}

/* Runs from wlk_manager_dispatch(); the lock stays held when it returns. */
static void granted(struct wlk_async *req, int status, struct wlk_lock *lock,
		    void *arg)
{
	struct job *j = arg;
	struct itimerspec its = { .it_value = {
		.tv_sec = j->work_ms / 1000,
		.tv_nsec = (long)(j->work_ms % 1000) * 1000000 } };
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = j };

	(void)req; /* the handle of this request; nothing to do with it */
	if (status) {
		say("\"%s\" not granted: %s", j->name, wlk_strerror(status));
		failed = 1;
		left--;
		return;
	}
	j->lock = lock;
	say("granted \"%s\" (token %" PRIu64 "), working %u ms", j->name,
	    wlk_lock_token(lock), j->work_ms);
	j->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (j->tfd < 0 || timerfd_settime(j->tfd, 0, &its, NULL) ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, j->tfd, &ev)) {
		perror("epoll: timer");
		failed = 1;
	}
}

static void work_done(struct job *j)
{
	int rc;

	epoll_ctl(ep, EPOLL_CTL_DEL, j->tfd, NULL);
	close(j->tfd);
	rc = wlk_release(j->lock);
	say("released \"%s\": %s", j->name, rc ? wlk_strerror(rc) : "ok");
	failed |= rc != 0;
	left--;
}

int main(void)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	struct wlk_options o = WLK_OPTIONS_INIT; /* sets o.size */
	struct wlk_manager *m;
	char origin[64], c;
	int pfd[2], st, i, n, rc, fd;
	pid_t pid;

	o.timeout_ns = 2000000000ull;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	snprintf(origin, sizeof(origin), "https://epoll-%ld.example",
		 (long)getpid());
	if (pipe(pfd)) {
		perror("epoll: pipe");
		return 1;
	}
	pid = fork();
	if (pid == 0)
		_exit(child(origin, pfd[1]));
	/* Request only once "b" is held, so that one has to wait. */
	if (pid < 0 || read(pfd[0], &c, 1) != 1) {
		say("the child could not take \"b\"");
		return 1;
	}
	rc = wlk_manager_open(origin, NULL, &m);
	if (rc) {
		say("open: %s", wlk_strerror(rc));
		return 1;
	}
	fd = wlk_manager_fd(m);
	ep = epoll_create1(EPOLL_CLOEXEC);
	/* Edge-triggered is fine: dispatch drains the descriptor. */
	if (fd < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev)) {
		say("descriptor: %s", fd < 0 ? wlk_strerror(fd) : "epoll failed");
		return 1;
	}
	for (i = 0; i < NJOBS; i++) {
		rc = wlk_request_async(m, jobs[i].name, WLK_NUL_TERMINATED, &o,
				       granted, &jobs[i], NULL);
		if (rc) {
			say("request \"%s\": %s", jobs[i].name,
			    wlk_strerror(rc));
			return 1;
		}
	}
	say("requested a, b, c; \"b\" is held by process %d", (int)pid);

	while (left > 0) {
		struct epoll_event evs[NJOBS + 1];

		n = epoll_wait(ep, evs, NJOBS + 1, 3000);
		if (n <= 0) {
			say("nothing happened for 3 s");
			failed = 1;
			break;
		}
		for (i = 0; i < n; i++) {
			if (evs[i].data.ptr)
				work_done(evs[i].data.ptr);
			else
				/* The count of callbacks run; 0 when the ring
				 * came before the result it announces. */
				say("manager descriptor readable: ran %d "
				    "callback(s)", wlk_manager_dispatch(m));
		}
	}
	/* Runs callbacks still owed (none here) and drops what is left. */
	wlk_manager_close(m);
	close(ep);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		failed = 1;
	wlk_bucket_remove(origin, NULL);
	say("%s", failed ? "FAILED" : "all locks done");
	return failed;
}
