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
 *
 * A pidfd becomes readable when its process exits, not when it exec()s;
 * the kernel marks a robust lifeline OWNER_DIED at both (the anchor thread
 * ends at exec) and wakes one waiter of its word. So a second thread, the
 * lifeline thread, started with the first lifeline to watch, sleeps on the
 * lifelines of every manager's watched blockers (futex_waitv) and rings a
 * manager's eventfd when one of them changes; the dispatch that follows
 * reaps (async_pid.c). Like a blocked thread (wait.c), it passes the
 * kernel's one wake-up on to the other watchers of the word, and looks
 * again every WLK_SAFETY_RECHECK_NS in case a watcher woken instead of it
 * died before passing it on. It reads the words only under wmu, for
 * managers still listed: their segments are mapped.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "shm.h"

/* Add @fd to an inner epoll instance (the watcher's own is wep). */
int wlk__epoll_add(int epfd, int fd, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.fd = fd};

	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0 || errno == EEXIST)
		return 0;
	return wlk__errno(errno);
}

static pthread_mutex_t wmu = PTHREAD_MUTEX_INITIALIZER;
static int wep = -1;			/* under wmu */
static uint64_t next_key;		/* under wmu */
static CDS_LIST_HEAD(watched);		/* struct wlk__actx, under wmu */
static unsigned long wfork = (unsigned long)-1; /* its fork generation */

/* Distinct lifelines the lifeline thread sleeps on, besides life_word. */
#define LIFE_MAX WLK_WATCH_MAX

static uint32_t life_word; /* [F] bumped under wmu when a set changes */
static unsigned long lfork = (unsigned long)-1; /* the lifeline thread's */

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

/*
 * Both threads take wmu: fork() with it held, so that a child never
 * inherits it locked by a thread that does not exist there.
 */
static void fork_prepare(void)
{
	pthread_mutex_lock(&wmu);
}

static void fork_done(void)
{
	pthread_mutex_unlock(&wmu);
}

/* Under wmu: the watcher of this process (fork generation), started. */
static int start(void)
{
	static bool forks_hooked; /* under wmu; inherited with the hooks */
	int rc;

	if (wfork == wlk__fork_gen() && wep >= 0)
		return 0;
	if (!forks_hooked) {
		rc = pthread_atfork(fork_prepare, fork_done, fork_done);
		if (rc)
			return wlk__errno(rc);
		forks_hooked = true;
	}
	/* A fork child inherits the registrations, not the thread. */
	if (wep >= 0)
		close(wep);
	CDS_INIT_LIST_HEAD(&watched);
	wep = epoll_create1(EPOLL_CLOEXEC);
	if (wep < 0)
		return wlk__errno(errno);
	rc = wlk__thread_spawn(watch_main, (void *)(intptr_t)wep, 0);
	if (rc) {
		close(wep);
		wep = -1;
		return rc;
	}
	wfork = wlk__fork_gen();
	return 0;
}

/* Add @w to the distinct words @v[0..*n) unless there; false if full. */
static bool life_add(struct wlk__waitv *v, unsigned int *n,
		     const struct wlk__waitv *w)
{
	for (unsigned int i = 0; i < *n; i++)
		if (v[i].word == w->word)
			return true;
	if (*n == LIFE_MAX)
		return false;
	v[(*n)++] = *w;
	return true;
}

/*
 * Under wmu: ring the managers one of whose lifelines changed and forget
 * their sets (their dispatch gives new ones); gather the other managers'
 * lifelines into @v. Return: how many.
 */
static unsigned int life_scan(struct wlk__waitv *v)
{
	struct wlk__actx *a;
	unsigned int n = 0;

	cds_list_for_each_entry(a, &watched, wlink) {
		bool fired = false;

		for (unsigned int i = 0; i < a->n_life; i++) {
			if (uatomic_read(a->life[i].word) != a->life[i].val) {
				/* The kernel woke one watcher: pass it on. */
				wlk__futex_wake(a->life[i].word, INT32_MAX);
				fired = true;
			}
		}
		if (fired) {
			a->n_life = 0;
			wlk__bell_ring_self(&a->bell);
			continue;
		}
		/* Room for all: wlk__watcher_lifelines() admits no more. */
		for (unsigned int i = 0; i < a->n_life; i++)
			life_add(v, &n, &a->life[i]);
	}
	return n;
}

static void *life_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct wlk__waitv v[1 + LIFE_MAX];
		unsigned int n;

		pthread_mutex_lock(&wmu);
		v[0] = (struct wlk__waitv){&life_word, uatomic_read(&life_word)};
		n = 1 + life_scan(v + 1);
		pthread_mutex_unlock(&wmu);
		wlk__futex_wait(v, n, n > 1 ? wlk__now_ns() +
						      WLK_SAFETY_RECHECK_NS
					    : 0);
	}
	return NULL;
}

/* Under wmu: whether @a's set is @v[0..@n) already. */
static bool life_same(const struct wlk__actx *a, const struct wlk__waitv *v,
		      unsigned int n)
{
	if (a->n_life != n)
		return false;
	for (unsigned int i = 0; i < n; i++)
		if (a->life[i].word != v[i].word || a->life[i].val != v[i].val)
			return false;
	return true;
}

/* Under wmu: tell the lifeline thread that the sets changed. */
static void life_changed(void)
{
	uatomic_inc(&life_word);
	wlk__futex_wake(&life_word, 1);
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
		if (a->n_life)
			life_changed();
	}
	a->wkey = 0;
	a->n_life = 0;
	pthread_mutex_unlock(&wmu);
}

/*
 * wlk__watcher_lifelines() - have the lifeline thread watch @v[0..@n) for
 * @a instead of its earlier set: lifeline words of its blockers, armed
 * (FUTEX_WAITERS set), and the values they had. A change of one rings
 * @a's eventfd once; then the set is forgotten until given again.
 * Return: false if not all of them are watched (more than LIFE_MAX
 * lifelines in the process, or no thread): the caller looks on a timer.
 */
bool wlk__watcher_lifelines(struct wlk__actx *a, const struct wlk__waitv *v,
			    unsigned int n)
{
	struct wlk__waitv d[LIFE_MAX];
	unsigned int nd = 0, keep = 0;
	struct wlk__actx *o;

	pthread_mutex_lock(&wmu);
	if (!a->wkey || a->wfork != wfork || wfork != wlk__fork_gen()) {
		pthread_mutex_unlock(&wmu);
		return n == 0;
	}
	/* The other managers' sets fit (this rule admitted them). */
	cds_list_for_each_entry(o, &watched, wlink)
		for (unsigned int i = 0; o != a && i < o->n_life; i++)
			life_add(d, &nd, &o->life[i]);
	while (keep < n && life_add(d, &nd, &v[keep]))
		keep++;
	if (keep && lfork != wlk__fork_gen()) {
		if (wlk__thread_spawn(life_main, NULL, 0))
			keep = 0;
		else
			lfork = wlk__fork_gen();
	}
	if (!life_same(a, v, keep)) {
		for (unsigned int i = 0; i < keep; i++)
			a->life[i] = v[i];
		a->n_life = keep;
		life_changed();
	}
	pthread_mutex_unlock(&wmu);
	return keep == n;
}
