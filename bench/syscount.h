/* SPDX-License-Identifier: MIT */
/* syscount.h - count the system calls of a loop (see syscount.c). */
#ifndef BENCH_SYSCOUNT_H
#define BENCH_SYSCOUNT_H

/* Runs @n operations; must be safe to call with n == 0. */
typedef void (*sc_body)(void *arg, long n);
typedef void (*sc_setup)(void *arg);

/* System calls per operation of @fn on this thread; NAN if the kernel
 * gives no tracepoint counter. */
double sc_per_op(sc_body fn, void *arg, long n);

/* Count this thread's system calls from sc_begin() to sc_end(): -1 if
 * there is no counter (then sc_end() returns -1 too). */
int sc_begin(void);
long sc_end(int fd);

/* A counter switched on and off around the calls of interest; it counts
 * no calls of its own. fd < 0: no counter. */
struct sc {
	int fd;
	long windows;
};

void sc_open(struct sc *c);
void sc_on(struct sc *c);
void sc_off(struct sc *c);
/* The count so far, or -1. */
long sc_count(struct sc *c);
void sc_close(struct sc *c);

/*
 * Run setup(arg) and fn(arg, n) in a child, then fn(arg, n) again under a
 * seccomp filter that kills on any system call but write and exit_group.
 * Return: 1 if it survived (no system call), 0 if not, -1 on error.
 */
int sc_seccomp_clean(sc_setup setup, sc_body fn, void *arg, long n);

#endif /* BENCH_SYSCOUNT_H */
