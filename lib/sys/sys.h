/* SPDX-License-Identifier: MIT */
/*
 * sys.h - the system primitives: clocks (clock.c), futexes (futex.c, the
 * only place that makes futex system calls), robust mutexes (robust.c), the
 * name hash (hash.c), this process and its library threads (proc.c),
 * fencing-token clock marks (token.c), doorbells (doorbell.c), fail
 * points, the spin before a sleep (spin.c), the short time slice of a
 * long sleep at the head of a queue (slice.c) and the scheduler's next
 * tick (tick.c). Above the segment format; below everything else.
 */
#ifndef WLK_SYS_H
#define WLK_SYS_H

#include <string.h>
#include <time.h>

#include "seg.h"
#include "failpoint.h"
#include "tick.h"

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

/* The ASCII control characters: C0 and DEL. */
#define CTRL_LAST 0x1f
#define CTRL_DEL 0x7f

/*
 * wlk__check_ident() - an identifier of at most @max bytes without control
 * characters (they would let one forge lines in every listing, log and
 * shm-inspect output that shows it). Any other byte is allowed. For
 * origins, buckets and partitions (naming.c) and clientIds (manager.c).
 */
static inline int wlk__check_ident(const char *s, size_t max)
{
	size_t len = strnlen(s, max + 1);

	if (len > max)
		return WLK_ENAMETOOLONG;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c <= CTRL_LAST || c == CTRL_DEL)
			return WLK_EINVAL;
	}
	return 0;
}

/*
 * Short byte strings, inline: the uncontended acquire copies its name into
 * the handle and compares it with the thread's last one (lane.c), and
 * names are mostly a few bytes, which a call to memcpy() or memcmp() and
 * its dispatch cost more than. Up to WLK_BYTES_INLINE bytes with two
 * (overlapping) loads per side; longer ones by the library calls.
 */
#define WLK_BYTES_INLINE 16

/* (Fixed-size memcmp() and memcpy() compile to plain loads and stores.) */
static inline bool wlk__bytes_equal(const void *a, const void *b, size_t n)
{
	const unsigned char *p = a, *q = b;
	const size_t w = sizeof(uint64_t), h = sizeof(uint32_t);

	if (n > WLK_BYTES_INLINE)
		return memcmp(a, b, n) == 0;
	if (n >= w)
		return !memcmp(p, q, w) && !memcmp(p + n - w, q + n - w, w);
	if (n >= h)
		return !memcmp(p, q, h) && !memcmp(p + n - h, q + n - h, h);
	for (size_t i = 0; i < n; i++)
		if (p[i] != q[i])
			return false;
	return true;
}

static inline void wlk__bytes_copy(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;
	const size_t w = sizeof(uint64_t), h = sizeof(uint32_t);

	if (n > WLK_BYTES_INLINE) {
		memcpy(dst, src, n);
	} else if (n >= w) {
		memcpy(d, s, w);
		memcpy(d + n - w, s + n - w, w);
	} else if (n >= h) {
		memcpy(d, s, h);
		memcpy(d + n - h, s + n - h, h);
	} else {
		for (size_t i = 0; i < n; i++)
			d[i] = s[i];
	}
}

/* Spinning before sleeping (WLK_SPIN_NS, tunables.h) pays off only with
 * more than one CPU online. Inline: every uncontended acquire asks; once
 * the count is known that is one load (spin.c counts the CPUs). */
extern int wlk__ncpu WLK_INTERNAL; /* [A] 0 until known */
int wlk__cpus_online(void) WLK_INTERNAL; /* counted once, then cached */
bool wlk__spin_ok_count(void) WLK_INTERNAL;
static inline bool wlk__spin_ok(void)
{
	int n = uatomic_read(&wlk__ncpu);

	return caa_likely(n) ? n > 1 : wlk__spin_ok_count();
}

/* hash.c */
uint64_t wlk__siphash(const uint64_t key[2], const void *data,
		      size_t len) WLK_INTERNAL;
uint64_t wlk__siphash13(const uint64_t key[2], const void *data,
			size_t len) WLK_INTERNAL;
/* The same over pieces: _words() takes whole 8-byte words, _end() the
 * last piece and the length of all of them. */
struct wlk__sip {
	uint64_t v[4];
};
void wlk__sip13_begin(struct wlk__sip *s, const uint64_t key[2]) WLK_INTERNAL;
void wlk__sip13_words(struct wlk__sip *s, const void *data,
		      size_t len) WLK_INTERNAL;
uint64_t wlk__sip13_end(struct wlk__sip *s, const void *data, size_t len,
			size_t total) WLK_INTERNAL;

/* futex.c: the only place that makes futex system calls. */
struct wlk__waitv {
	uint32_t *word;
	uint32_t val;
};
int wlk__futex_wait(struct wlk__waitv *w, unsigned int n,
		    uint64_t deadline_ns) WLK_INTERNAL;
void wlk__futex_wake(uint32_t *word, int n) WLK_INTERNAL;

/* clock.c */
uint64_t wlk__now_ns(void) WLK_INTERNAL;
uint64_t wlk__realtime_ns(void) WLK_INTERNAL;
void wlk__clock_init(void) WLK_INTERNAL;
typedef int (*wlk__gettime_fn)(clockid_t clock, struct timespec *ts);
/* [A] libc's clock_gettime(), or the vDSO's once wlk__clock_init() found
 * it. */
extern wlk__gettime_fn wlk__coarse_gettime WLK_INTERNAL;

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

/* A clock reading in nanoseconds. */
static inline uint64_t wlk__ts_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * WLK_NSEC_PER_SEC + (uint64_t)ts->tv_nsec;
}

/*
 * Timestamps kept for diagnostics only (how long a lock has been held or a
 * request has waited): the coarse clock, a few ns instead of tens in a VM,
 * with the resolution of a scheduler tick, read by a direct call of the
 * vDSO where clock.c found it. Same time base as CLOCK_MONOTONIC. Inline:
 * every uncontended acquire takes one.
 */
static inline uint64_t wlk__stamp_ns(void)
{
	wlk__gettime_fn gettime = uatomic_read(&wlk__coarse_gettime);
	struct timespec ts;

	gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return wlk__ts_ns(&ts);
}

/* spin.c: the one spin-then-sleep policy, for every waiter that spins
 * before it sleeps on a futex (wlk__spin_ok() is declared above). */
bool wlk__spin(bool (*done)(void *arg), bool (*queued)(void *arg),
	       void *arg, uint64_t budget_ns) WLK_INTERNAL;

/* slice.c: a short time slice for a waiter at the head of a queue. */
struct wlk__slice {
	bool on;          /* this thread's slice is ours to put back */
	uint64_t runtime; /* the slice it had; 0: the default */
};
uint64_t wlk__slice_when(uint64_t now) WLK_INTERNAL;
void wlk__slice_shorten(struct wlk__slice *s) WLK_INTERNAL;
void wlk__slice_restore(struct wlk__slice *s) WLK_INTERNAL;

/* tick.c: the scheduler's next tick on every CPU after @now
 * (CLOCK_MONOTONIC), or 0 if unknown. */
uint64_t wlk__tick_after(uint64_t now) WLK_INTERNAL;

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

/* proc.c: the fork generation, bumped in the child (registry.c). Inline:
 * each acquire and release compares it with its manager's. */
extern unsigned long wlk__fork_generation WLK_INTERNAL; /* [A] */
static inline unsigned long wlk__fork_gen(void)
{
	return uatomic_read(&wlk__fork_generation);
}
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

/*
 * options.c: the option structs as the caller's header laid them out (the size
 * rule of weblocks.h, GROWING STRUCTS). Every entry point reads its options
 * through wlk__options_read() or wlk__manager_options_read() once, first;
 * the code below it sees only the copy, of this library's layout, never
 * NULL (the defaults stand in for it).
 *
 * The first layouts, which a size of 0 stands for: the fields soname 1
 * shipped. Fixed for good: fields added later go after them.
 */
#define WLK__OPTIONS_FIRST_SIZE                                                \
	(offsetof(struct wlk_options, timeout_ns) + sizeof(uint64_t))
#define WLK__MANAGER_OPTIONS_FIRST_SIZE                                        \
	(offsetof(struct wlk_manager_options, max_name_len) + sizeof(uint32_t))
extern const struct wlk_options wlk__options_default WLK_INTERNAL;
extern const struct wlk_manager_options wlk__manager_options_default
	WLK_INTERNAL;
int wlk__struct_read(void *copy, size_t known, size_t first, const void *src,
		     size_t size) WLK_INTERNAL;

/*
 * Point *@o at its copy in @copy (or at the defaults, for NULL, without a
 * copy). Inline: a caller built with this very header (or, while the
 * struct has its first layout, one that leaves size 0), the common case,
 * costs one 32-byte copy on the request path. Return: 0, or WLK_EINVAL
 * (then *@o is left alone).
 */
static inline int wlk__options_read(const struct wlk_options **o,
				    struct wlk_options *copy)
{
	size_t size;
	int rc = 0;

	if (!*o) {
		*o = &wlk__options_default;
		return 0;
	}
	size = (*o)->size ? (*o)->size : WLK__OPTIONS_FIRST_SIZE;
	if (size == sizeof(**o))
		*copy = **o;
	else
		rc = wlk__struct_read(copy, sizeof(*copy),
				      WLK__OPTIONS_FIRST_SIZE, *o, (*o)->size);
	if (!rc)
		*o = copy;
	return rc;
}

/* The same for struct wlk_manager_options (not on a hot path). */
static inline int
wlk__manager_options_read(const struct wlk_manager_options **o,
			  struct wlk_manager_options *copy)
{
	int rc;

	if (!*o) {
		*o = &wlk__manager_options_default;
		return 0;
	}
	rc = wlk__struct_read(copy, sizeof(*copy),
			      WLK__MANAGER_OPTIONS_FIRST_SIZE, *o, (*o)->size);
	if (!rc)
		*o = copy;
	return rc;
}

#endif /* WLK_SYS_H */
