/* SPDX-License-Identifier: MIT */
/*
 * t_hotpath.c - the uncontended acquire/release path makes no system call.
 *
 * A child warms up, then installs a seccomp filter under which any system
 * call but write(2) kills the process, and runs uncontended acquire/release
 * pairs (exclusive, shared, if_available, the callback form, the block
 * form of wlk_call_acquire()). It reports
 * with a write, then makes a forbidden call on purpose to end itself.
 * (Strict seccomp mode would do, but it also disables the TSC, and with it
 * the vDSO's clock_gettime, which is not a system call.)
 */
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common.h"

#define PAIRS 1000

static int noop(struct wlk_lock *lock, void *arg)
{
	(void)arg;
	return lock ? 0 : 1;
}

static int pairs(struct wlk_manager *m)
{
	static const struct wlk_options sh = {.mode = WLK_SHARED};
	static const struct wlk_options ifa = {.if_available = true};
	struct wlk_call c = { .m = m, .name = "v", .name_len = 1 };
	struct wlk_lock *l;

	for (int i = 0; i < PAIRS; i++) {
		if (wlk_acquire(m, "x", 1, NULL, &l) || wlk_release(l))
			return 1;
		if (wlk_acquire(m, "y", 1, &sh, &l) || wlk_release(l))
			return 2;
		if (wlk_acquire(m, "z", 1, &ifa, &l) || !l || wlk_release(l))
			return 3;
		if (wlk_request(m, "w", 1, NULL, noop, NULL))
			return 4;
		if (wlk_call_acquire(&c) || !c.lock || wlk_call_release(&c))
			return 5;
	}
	return 0;
}

/* Allow write(2) on x86_64; kill the process on anything else. */
static int forbid_syscalls(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_write, 0, 1),
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

static int strict_child(void *arg)
{
	struct wlk_manager *m;
	int fd = *(int *)arg;
	char rc;

	if (wlk_manager_open(t_origin, NULL, &m) || pairs(m))
		return 10; /* warm-up: allocations settle, pages fault in */
	if (forbid_syscalls() != 0)
		return 11;
	rc = (char)pairs(m);
	(void)!write(fd, &rc, 1);
	syscall(SYS_getpid); /* SIGSYS, the whole process */
	return 12;
}

Test(hotpath, uncontended_acquire_release_makes_no_system_call, T_FIX,
     .timeout = 20)
{
	struct t_pipe p;
	pid_t pid;
	char rc = -1;
	int st;

#ifdef __SANITIZE_ADDRESS__
	/* ASan's allocator makes system calls of its own. */
	cr_skip_test("not meaningful in a sanitizer build");
#endif
	t_pipe_open(&p);
	pid = t_fork(strict_child, &p.wr);
	st = t_wait(pid, 15000);
	cr_assert_eq(t_get(p.rd, &rc, 1, 100), 0,
		     "child made a system call (wait status %#x)", st);
	cr_assert_eq(rc, 0, "pairs failed at step %d", rc);
	t_pipe_close(&p);
}
