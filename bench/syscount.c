/* SPDX-License-Identifier: MIT */
/*
 * syscount.c - how many system calls a stretch of code makes: counted with
 * the raw_syscalls:sys_enter tracepoint through perf_event_open(2) for the
 * calling thread only (the weblocks anchor thread is not the hot path), and
 * cross-checked by running it under a seccomp filter that kills the
 * process on any system call, as tests/unit/t_hotpath.c does.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/perf_event.h>
#include <linux/seccomp.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "syscount.h"

static long tracepoint_id(void)
{
	static const char *const paths[] = {
		"/sys/kernel/tracing/events/raw_syscalls/sys_enter/id",
		"/sys/kernel/debug/tracing/events/raw_syscalls/sys_enter/id",
	};

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		FILE *f = fopen(paths[i], "r");
		long id = -1;

		if (!f)
			continue;
		if (fscanf(f, "%ld", &id) != 1)
			id = -1;
		fclose(f);
		if (id >= 0)
			return id;
	}
	return -1;
}

/* Syscalls made by fn(arg, n), including the counter's own disable. */
static long count_raw(int fd, sc_body fn, void *arg, long n)
{
	uint64_t v = 0;

	ioctl(fd, PERF_EVENT_IOC_RESET, 0);
	ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
	fn(arg, n);
	ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
	if (read(fd, &v, sizeof(v)) != sizeof(v))
		return -1;
	return (long)v;
}

static int counter_open(void)
{
	struct perf_event_attr a = {0};
	long id = tracepoint_id();

	if (id < 0)
		return -1;
	a.type = PERF_TYPE_TRACEPOINT;
	a.size = sizeof(a);
	a.config = (uint64_t)id;
	a.disabled = 1;
	return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}

int sc_begin(void)
{
	int fd = counter_open();

	if (fd >= 0) {
		ioctl(fd, PERF_EVENT_IOC_RESET, 0);
		ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
	}
	return fd;
}

long sc_end(int fd)
{
	uint64_t v = 0;

	if (fd < 0)
		return -1;
	ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
	if (read(fd, &v, sizeof(v)) != sizeof(v))
		v = (uint64_t)-1;
	close(fd);
	return (long)v;
}

void sc_open(struct sc *c)
{
	c->fd = counter_open();
	c->windows = 0;
}

void sc_on(struct sc *c)
{
	if (c->fd >= 0)
		ioctl(c->fd, PERF_EVENT_IOC_ENABLE, 0);
}

/* The disabling ioctl enters the kernel while counting: one per window. */
void sc_off(struct sc *c)
{
	if (c->fd >= 0) {
		ioctl(c->fd, PERF_EVENT_IOC_DISABLE, 0);
		c->windows++;
	}
}

long sc_count(struct sc *c)
{
	uint64_t v;

	if (c->fd < 0 || read(c->fd, &v, sizeof(v)) != sizeof(v))
		return -1;
	/* A count is never negative, even if a disable went uncounted. */
	return (long)v > c->windows ? (long)v - c->windows : 0;
}

void sc_close(struct sc *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

double sc_per_op(sc_body fn, void *arg, long n)
{
	long base, total;
	int fd;

	if (n <= 0)
		return NAN;
	fd = counter_open();
	if (fd < 0)
		return NAN;
	fn(arg, n); /* warm up: allocations settle, pages fault in */
	base = count_raw(fd, fn, arg, 0);
	total = count_raw(fd, fn, arg, n);
	close(fd);
	if (base < 0 || total < 0)
		return NAN;
	/* The empty run's count is subtracted; a count is never negative. */
	return total > base ? (double)(total - base) / (double)n : 0.0;
}

/* Allow write(2) and exit_group(2) on x86_64; kill on anything else. */
static int forbid_syscalls(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_write, 1, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	};
	struct sock_fprog prog = {
		.len = sizeof(f) / sizeof(f[0]),
		.filter = f,
	};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

int sc_seccomp_clean(sc_setup setup, sc_body fn, void *arg, long n)
{
	int p[2], st;
	pid_t pid;
	char c = 0;

	if (pipe(p) < 0)
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(p[0]);
		if (setup)
			setup(arg);
		fn(arg, n); /* warm-up outside the filter */
		if (forbid_syscalls())
			_exit(2);
		fn(arg, n);
		c = 1;
		(void)!write(p[1], &c, 1);
		syscall(SYS_exit_group, 0);
	}
	close(p[1]);
	if (read(p[0], &c, 1) != 1)
		c = 0;
	close(p[0]);
	waitpid(pid, &st, 0);
	return c == 1;
}
