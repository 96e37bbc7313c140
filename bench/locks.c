/* SPDX-License-Identifier: MIT */
/* locks.c - weblocks and the anchor locks behind the interface of locks.h. */
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench.h"
#include <weblocks/async.h>

#include "locks.h"

struct lk_world lkw;

static const char *const names[LK_NAMES] = {"a", "b"};

static void robust_init(pthread_mutex_t *mu)
{
	pthread_mutexattr_t a;

	if (pthread_mutexattr_init(&a) ||
	    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED) ||
	    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST) ||
	    pthread_mutex_init(mu, &a))
		die("robust mutex init");
	pthread_mutexattr_destroy(&a);
}

void lk_world_init(const char *tag)
{
	char tb[64];

	lkw.shm = shared_alloc(sizeof(*lkw.shm));
	for (int i = 0; i < LK_NAMES; i++) {
		char t[64];
		int fd;

		robust_init(&lkw.shm->robust[i].mu);
		lkw.efd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (lkw.efd[i] < 0)
			die("eventfd: %s", strerror(errno));
		snprintf(t, sizeof(t), "%s%d", tag, i);
		bench_lockfile(lkw.files[i], sizeof(lkw.files[i]), t);
		fd = open(lkw.files[i], O_RDWR | O_CREAT, 0600);
		if (fd < 0)
			die("%s: %s", lkw.files[i], strerror(errno));
		close(fd);
	}
	bench_origin(lkw.origin, sizeof(lkw.origin), tag);
	snprintf(tb, sizeof(tb), "%.60sb", tag);
	bench_origin(lkw.origin_b, sizeof(lkw.origin_b), tb);
}

static void remove_bucket(const char *origin)
{
	int rc = wlk_bucket_remove(origin, NULL);

	if (rc && rc != -ENOENT)
		fprintf(stderr, "bucket_remove %s: %s\n", origin,
			wlk_strerror(rc));
}

void lk_world_fini(void)
{
	remove_bucket(lkw.origin);
	remove_bucket(lkw.origin_b);
	for (int i = 0; i < LK_NAMES; i++) {
		unlink(lkw.files[i]);
		close(lkw.efd[i]);
	}
}

void lk_open(struct lk *l, enum lk_kind kind, bool shared, int name,
	     int client)
{
	*l = (struct lk){.kind = kind, .shared = shared, .name = name,
			 .fd = -1};
	switch (kind) {
	case LK_WLK:
		check(wlk_manager_open(lkw.origin, NULL, &l->m), "open");
		break;
	case LK_WLK_ASYNC:
		check(wlk_manager_open(lkw.origin, NULL, &l->m), "open");
		l->fd = wlk_manager_fd(l->m);
		check(l->fd < 0 ? l->fd : 0, "manager fd");
		break;
	case LK_WLK_B:
		check(wlk_manager_open(lkw.origin_b, NULL, &l->m), "open");
		break;
	case LK_FLOCK:
		l->fd = open(lkw.files[name], O_RDWR);
		if (l->fd < 0)
			die("%s: %s", lkw.files[name], strerror(errno));
		break;
	case LK_BROKER:
		l->fd = lkw.broker->fds[client];
		break;
	default:
		break;
	}
}

void lk_close(struct lk *l)
{
	if (l->kind == LK_WLK || l->kind == LK_WLK_B ||
	    l->kind == LK_WLK_ASYNC)
		wlk_manager_close(l->m);
	else if (l->kind == LK_FLOCK)
		close(l->fd);
	l->m = NULL;
	l->fd = -1;
}

static long futex(uint32_t *w, int op, uint32_t val)
{
	return syscall(SYS_futex, w, op, val, NULL, NULL, 0);
}

/*
 * A three-state lock word (Drepper's): 0 free, 1 locked, 2 locked with
 * (possible) sleepers; @wait_fn waits until a wake may have come, @wake_fn
 * wakes one sleeper. The anchors differ only in those two.
 */
static void tri_lock(uint32_t *w, void (*wait_fn)(uint32_t *w, int fd),
		     int fd)
{
	uint32_t c = 0;

	if (__atomic_compare_exchange_n(w, &c, 1, false, __ATOMIC_ACQUIRE,
					__ATOMIC_RELAXED))
		return;
	if (c != 2)
		c = __atomic_exchange_n(w, 2, __ATOMIC_ACQUIRE);
	while (c != 0) {
		wait_fn(w, fd);
		c = __atomic_exchange_n(w, 2, __ATOMIC_ACQUIRE);
	}
}

static void tri_unlock(uint32_t *w, void (*wake_fn)(uint32_t *w, int fd),
		       int fd)
{
	if (__atomic_fetch_sub(w, 1, __ATOMIC_RELEASE) != 1) {
		__atomic_store_n(w, 0, __ATOMIC_RELEASE);
		wake_fn(w, fd);
	}
}

static void futex_sleep(uint32_t *w, int fd)
{
	(void)fd;
	futex(w, FUTEX_WAIT, 2);
}

static void futex_wake1(uint32_t *w, int fd)
{
	(void)fd;
	futex(w, FUTEX_WAKE, 1);
}

void futex_lock(uint32_t *w)
{
	tri_lock(w, futex_sleep, -1);
}

void futex_unlock(uint32_t *w)
{
	tri_unlock(w, futex_wake1, -1);
}

/*
 * The floor of waking an event loop in another process: the same word,
 * but a waiter sleeps in poll() on an eventfd, which the releaser writes
 * (one write(2), as weblocks' doorbell) and the woken waiter reads (one
 * read(2), as a dispatch drains it). A write nobody waits for any more
 * only makes the next poll() return at once.
 */
static void efd_sleep(uint32_t *w, int efd)
{
	struct pollfd p = {.fd = efd, .events = POLLIN};
	uint64_t v;

	(void)w;
	if (poll(&p, 1, -1) < 0 && errno != EINTR)
		die("poll: %s", strerror(errno));
	if (read(efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		die("eventfd read: %s", strerror(errno));
}

static void efd_wake(uint32_t *w, int efd)
{
	static const uint64_t one = 1;

	(void)w;
	if (write(efd, &one, sizeof(one)) < 0)
		die("eventfd write: %s", strerror(errno));
}

static void granted(struct wlk_async *req, int status, struct wlk_lock *lock,
		    void *arg)
{
	struct lk *l = arg;

	(void)req;
	l->held = lock;
	l->status = status;
}

/* What an event loop does: request, sleep in poll(), dispatch. */
static int acquire_async(struct lk *l, const struct wlk_options *o)
{
	struct pollfd p = {.fd = l->fd, .events = POLLIN};
	int rc;

	l->status = 1;
	rc = wlk_request_async(l->m, names[l->name], 1, o, granted, l, NULL);
	while (!rc && l->status == 1) {
		if (poll(&p, 1, -1) < 0 && errno != EINTR)
			return -1;
		rc = wlk_manager_dispatch(l->m) < 0;
	}
	return rc ? rc : l->status;
}

int lk_acquire(struct lk *l)
{
	static const struct wlk_options ex, sh = {.mode = WLK_SHARED};
	pthread_mutex_t *mu = &lkw.shm->robust[l->name].mu;
	int rc;

	switch (l->kind) {
	case LK_WLK:
	case LK_WLK_B:
		return wlk_acquire(l->m, names[l->name], 1,
				   l->shared ? &sh : &ex, &l->held);
	case LK_ROBUST:
		rc = pthread_mutex_lock(mu);
		if (rc == EOWNERDEAD)
			rc = pthread_mutex_consistent(mu);
		return rc;
	case LK_FUTEX:
		futex_lock(&lkw.shm->futex[l->name].word);
		return 0;
	case LK_FLOCK:
		return flock(l->fd, l->shared ? LOCK_SH : LOCK_EX);
	case LK_OPENFLOCK:
		l->fd = open(lkw.files[l->name], O_RDWR);
		if (l->fd < 0)
			return -1;
		return flock(l->fd, l->shared ? LOCK_SH : LOCK_EX);
	case LK_BROKER:
		return broker_acquire(l->fd, l->name, l->shared);
	case LK_WLK_ASYNC:
		return acquire_async(l, l->shared ? &sh : &ex);
	case LK_EFD_POLL:
		tri_lock(&lkw.shm->efd_word[l->name].word, efd_sleep,
			 lkw.efd[l->name]);
		return 0;
	}
	return -1;
}

int lk_release(struct lk *l)
{
	int rc;

	switch (l->kind) {
	case LK_WLK:
	case LK_WLK_B:
	case LK_WLK_ASYNC:
		return wlk_release(l->held);
	case LK_ROBUST:
		return pthread_mutex_unlock(&lkw.shm->robust[l->name].mu);
	case LK_FUTEX:
		futex_unlock(&lkw.shm->futex[l->name].word);
		return 0;
	case LK_FLOCK:
		return flock(l->fd, LOCK_UN);
	case LK_OPENFLOCK:
		rc = flock(l->fd, LOCK_UN);
		close(l->fd);
		l->fd = -1;
		return rc;
	case LK_BROKER:
		return broker_release(l->fd, l->name);
	case LK_EFD_POLL:
		tri_unlock(&lkw.shm->efd_word[l->name].word, efd_wake,
			   lkw.efd[l->name]);
		return 0;
	}
	return -1;
}

void lk_robust_pairs(void *arg, long n)
{
	struct lk l = {.kind = LK_ROBUST};

	(void)arg;
	for (long i = 0; i < n; i++)
		if (lk_acquire(&l) || lk_release(&l))
			die("robust mutex");
}
