/* SPDX-License-Identifier: MIT */
/*
 * watcher.c - the one thread per process that turns a manager's rare
 * wake-up sources into a ring of its doorbell.
 *
 * A manager's descriptor is its doorbell eventfd (doorbell.c), which
 * granters ring directly. The rest of what can complete a request - the
 * deadline timer, abort signals' eventfds, pidfds of blockers, the
 * fallback datagram socket - sits in the manager's inner epoll instance.
 * The watcher waits on all inner instances at once, each registered
 * one-shot; when one becomes readable it marks the manager (inner_fired)
 * and rings its eventfd. Dispatch consumes the inner sources and re-arms.
 * The thread runs no user code and takes no segment mutex; it starts with
 * the first asynchronous manager of a process (again in a fork child).
 *
 * Managers are found by key under wmu, never by a pointer the thread kept:
 * wlk__watcher_del() runs before an inner instance is freed, under the
 * same mutex.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "async_internal.h"

#define WATCH_EVENTS 16

static pthread_mutex_t wmu = PTHREAD_MUTEX_INITIALIZER;
static int wep = -1;			/* under wmu */
static uint64_t next_key;		/* under wmu */
static CDS_LIST_HEAD(watched);		/* struct wlk__actx, under wmu */
static unsigned long wfork = (unsigned long)-1; /* its fork generation */

static struct wlk__actx *find(uint64_t key)
{
	struct wlk__actx *a;

	cds_list_for_each_entry(a, &watched, wlink)
		if (a->wkey == key)
			return a;
	return NULL;
}

static void *watch_main(void *arg)
{
	int ep = (int)(intptr_t)arg;

	for (;;) {
		struct epoll_event ev[WATCH_EVENTS];
		int n = epoll_wait(ep, ev, WATCH_EVENTS, -1);

		if (n < 0 && errno != EINTR)
			return NULL;
		pthread_mutex_lock(&wmu);
		for (int i = 0; i < n; i++) {
			struct wlk__actx *a = find(ev[i].data.u64);

			if (a) {
				uatomic_set(&a->inner_fired, 1);
				wlk__bell_ring_self(&a->bell);
			}
		}
		pthread_mutex_unlock(&wmu);
	}
}

/* Under wmu: the watcher of this process (fork generation), started. */
static int start(void)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t th;
	int rc;

	if (wfork == wlk__fork_gen() && wep >= 0)
		return 0;
	/* A fork child inherits the registrations, not the thread. */
	if (wep >= 0)
		close(wep);
	CDS_INIT_LIST_HEAD(&watched);
	wep = epoll_create1(EPOLL_CLOEXEC);
	if (wep < 0)
		return wlk__errno(errno);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_attr_init(&attr);
	if (!rc)
		rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (!rc)
		rc = pthread_create(&th, &attr, watch_main,
				    (void *)(intptr_t)wep);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		close(wep);
		wep = -1;
		return wlk__errno(rc);
	}
	wfork = wlk__fork_gen();
	return 0;
}

/* Register (or re-arm, @mod) @a's inner instance, one-shot. */
static int arm(struct wlk__actx *a, int op)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT,
				 .data.u64 = a->wkey};

	return epoll_ctl(wep, op, a->epfd, &ev) == 0 ? 0 : wlk__errno(errno);
}

/*
 * wlk__watcher_add() - watch @a's inner instance from now on.
 * Return: 0, or a negative errno value (nothing registered).
 */
int wlk__watcher_add(struct wlk__actx *a)
{
	int rc;

	pthread_mutex_lock(&wmu);
	rc = start();
	if (!rc) {
		a->wkey = ++next_key;
		a->wfork = wfork;
		rc = arm(a, EPOLL_CTL_ADD);
		if (!rc)
			cds_list_add(&a->wlink, &watched);
	}
	pthread_mutex_unlock(&wmu);
	return rc;
}

/* wlk__watcher_rearm() - after dispatch consumed @a's inner sources. */
void wlk__watcher_rearm(struct wlk__actx *a)
{
	pthread_mutex_lock(&wmu);
	if (a->wfork == wfork && wfork == wlk__fork_gen())
		arm(a, EPOLL_CTL_MOD);
	pthread_mutex_unlock(&wmu);
}

/* wlk__watcher_del() - stop watching @a (before its descriptors close). */
void wlk__watcher_del(struct wlk__actx *a)
{
	pthread_mutex_lock(&wmu);
	if (a->wkey && a->wfork == wfork && wfork == wlk__fork_gen()) {
		epoll_ctl(wep, EPOLL_CTL_DEL, a->epfd, NULL);
		cds_list_del(&a->wlink);
	}
	a->wkey = 0;
	pthread_mutex_unlock(&wmu);
}
