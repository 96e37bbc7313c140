/* SPDX-License-Identifier: MIT */
/*
 * sys.h - the system primitives: clocks and futexes (futex.c, the only
 * place that makes futex system calls), robust mutexes (robust.c), the
 * name hash (hash.c), this process and its library threads (proc.c),
 * fencing-token clock marks (token.c), doorbells (doorbell.c) and fail
 * points. Above the segment format; below everything else.
 */
#ifndef WLK_SYS_H
#define WLK_SYS_H

#include "seg.h"
#include "failpoint.h"

/* System calls glibc 2.36 has no wrapper for (numbers as on every
 * architecture since Linux 5.3 and 5.6). */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

/* A positive errno value as a library error (negative); anything else as
 * -EIO. */
static inline int wlk__errno(int e)
{
	return e > 0 ? -e : -EIO;
}

/* Spinning before sleeping (WLK_SPIN_NS, tunables.h) pays off only with
 * more than one CPU online. */
bool wlk__spin_ok(void) WLK_INTERNAL;

/* hash.c */
uint64_t wlk__siphash(const uint64_t key[2], const void *data,
		      size_t len) WLK_INTERNAL;
uint64_t wlk__siphash13(const uint64_t key[2], const void *data,
			size_t len) WLK_INTERNAL;

/* futex.c: the only place that makes futex system calls. */
struct wlk__waitv {
	uint32_t *word;
	uint32_t val;
};
int wlk__futex_wait(struct wlk__waitv *w, unsigned int n,
		    uint64_t deadline_ns) WLK_INTERNAL;
void wlk__futex_wake(uint32_t *word, int n) WLK_INTERNAL;
uint64_t wlk__now_ns(void) WLK_INTERNAL;

/*
 * The deadline of a request with @timeout_ns (0 = none). A timeout whose
 * deadline lies past the end of the 64-bit clock (UINT64_MAX, the natural
 * "forever") means none, rather than a sum that wraps to the past.
 */
static inline uint64_t wlk__deadline_ns(uint64_t timeout_ns)
{
	uint64_t now;

	if (!timeout_ns)
		return 0;
	now = wlk__now_ns();
	return timeout_ns > UINT64_MAX - now ? 0 : now + timeout_ns;
}
uint64_t wlk__stamp_ns(void) WLK_INTERNAL;
uint64_t wlk__realtime_ns(void) WLK_INTERNAL;

/* robust.c */
int wlk__mutex_init(pthread_mutex_t *mu) WLK_INTERNAL;
bool wlk__mutex_sane(const pthread_mutex_t *mu) WLK_INTERNAL;
int wlk__mutex_trylock(pthread_mutex_t *mu) WLK_INTERNAL;
/* What wlk__lifeline_arm() found. */
enum wlk__arm {
	WLK__ARMED, /* FUTEX_WAITERS set: its owner's death wakes a waiter */
	WLK__FREE,  /* nobody holds it (the agent detached) */
	WLK__DIED,  /* its owner died (OWNER_DIED): probe, reap */
	WLK__MOVED, /* the word changed under the CAS: look again */
};
enum wlk__arm wlk__lifeline_arm(uint32_t *word, uint32_t *armed) WLK_INTERNAL;

/* token.c */
uint64_t wlk__token_mark_fd(int fd) WLK_INTERNAL;

/* proc.c: the fork generation, bumped in the child (registry.c) */
unsigned long wlk__fork_gen(void) WLK_INTERNAL;
void wlk__fork_gen_bump(void) WLK_INTERNAL;
int wlk__thread_spawn(void *(*fn)(void *), void *arg, size_t stack)
	WLK_INTERNAL;

/* A doorbell (doorbell.c): its eventfd, and a socket as the fallback. */
struct wlk__bell {
	int efd, sock;
	uint64_t id;  /* the socket's address */
	uint64_t key; /* the eventfd's eventfd-id + 1 (0: unknown) */
};

/* Where another client's doorbell is, copied from its slot. */
struct wlk__bell_to {
	uint64_t id;
	uint64_t key;
	uint32_t pid, fd;
	uint32_t client, client_gen;
};

/* Where client @ci's doorbell is, copied from its slot @c. */
static inline struct wlk__bell_to wlk__bell_of(const struct wlk_seg_client *c,
					       uint32_t ci)
{
	return (struct wlk__bell_to){
		.id = uatomic_read(&c->doorbell),
		.key = uatomic_read(&c->bell_key),
		.pid = uatomic_read(&c->pid),
		.fd = uatomic_read(&c->bell_fd),
		.client = ci,
		.client_gen = WLK_WORD_GEN(uatomic_read(&c->word)),
	};
}

/* doorbell.c */
int wlk__bell_open(struct wlk__bell *bl) WLK_INTERNAL;
void wlk__bell_close(struct wlk__bell *bl) WLK_INTERNAL;
void wlk__bell_ring(const struct wlk__bell_to *t, uint32_t *owed) WLK_INTERNAL;
void wlk__bell_ring_self(const struct wlk__bell *bl) WLK_INTERNAL;
void wlk__bell_drain(const struct wlk__bell *bl, uint32_t *owed)
	WLK_INTERNAL;

#endif /* WLK_SYS_H */
