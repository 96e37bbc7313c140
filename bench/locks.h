/* SPDX-License-Identifier: MIT */
/*
 * locks.h - the locks being compared, behind one interface: weblocks and
 * the anchors a user would pick instead.
 *
 * The parent sets up the world (shared memory, lock files, a bucket origin,
 * brokers) before forking; each process then opens its own handle, so that
 * every method pays what a real separate process would (its own fd, its own
 * manager, its own socket).
 */
#ifndef BENCH_LOCKS_H
#define BENCH_LOCKS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <weblocks.h>

#define LK_NAMES 2	  /* lock names "a" and "b" */
#define BROKER_MAX_CLIENTS 4

enum lk_kind {
	LK_WLK,	      /* weblocks: wlk_acquire() + wlk_release() */
	LK_WLK_B,     /* the same in a second bucket (for variants) */
	LK_ROBUST,    /* robust process-shared pthread mutex in shm */
	LK_FUTEX,     /* 3-state futex mutex (Drepper), shared futex word */
	LK_FLOCK,     /* flock(2) on an fd opened once */
	LK_OPENFLOCK, /* open + flock + flock(LOCK_UN) + close per acquire */
	LK_BROKER,    /* a lock server process over AF_UNIX seqpacket */
	LK_WLK_ASYNC, /* weblocks: wlk_request_async(), then poll() on the
			 manager's descriptor and dispatch until granted */
	LK_EFD_POLL,  /* LK_FUTEX's word, but a waiter sleeps in poll() on an
			 eventfd that the releaser writes, then reads it */
};

/* A lock server, one socket per client, all created before forking. */
struct broker {
	int pid;
	int n;
	int fds[BROKER_MAX_CLIENTS];	 /* client ends */
	int server[BROKER_MAX_CLIENTS]; /* server ends (closed in clients) */
};

void broker_start(struct broker *b, int nclients, int cpu);
void broker_stop(struct broker *b);
int broker_acquire(int fd, int name, bool shared);
int broker_release(int fd, int name);

/* The shared part of the world, in memory every child inherits. */
struct lk_shm {
	union {
		pthread_mutex_t mu;
		char pad[64];
	} robust[LK_NAMES];
	union {
		uint32_t word;
		char pad[64];
	} futex[LK_NAMES];
	union {
		uint32_t word;
		char pad[64];
	} efd_word[LK_NAMES]; /* LK_EFD_POLL */
};

struct lk_world {
	struct lk_shm *shm;
	char origin[96];
	char origin_b[96];
	char files[LK_NAMES][96];
	struct broker *broker; /* NULL unless LK_BROKER is used */
	int efd[LK_NAMES];     /* LK_EFD_POLL: inherited by every child */
};

extern struct lk_world lkw;

struct lk {
	enum lk_kind kind;
	bool shared; /* shared mode where the method has one */
	int name;
	int fd;
	struct wlk_manager *m;
	struct wlk_lock *held;
	int status; /* LK_WLK_ASYNC: the callback's; 1 until it runs */
};

void lk_world_init(const char *tag);
/* Remove the bucket and the lock files; every user must have closed. */
void lk_world_fini(void);

/* @client selects the broker socket; ignored by the other methods. */
void lk_open(struct lk *l, enum lk_kind kind, bool shared, int name,
	     int client);
void lk_close(struct lk *l);
int lk_acquire(struct lk *l);
int lk_release(struct lk *l);
/* @n robust mutex pairs on name 0: the anchor timed beside a figure. */
void lk_robust_pairs(void *arg, long n);

/* The futex mutex, also used on its own by the handoff benchmark. */
void futex_lock(uint32_t *w);
void futex_unlock(uint32_t *w);

#endif /* BENCH_LOCKS_H */
