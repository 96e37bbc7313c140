/* SPDX-License-Identifier: MIT */
/*
 * clock.c - the clocks: CLOCK_MONOTONIC for deadlines, CLOCK_REALTIME for
 * what people read, and the coarse clock behind the diagnostic timestamps
 * (sys.h, wlk__stamp_ns()).
 *
 * Every uncontended acquire takes one such timestamp, so its cost shows in
 * the fast path's: through glibc, clock_gettime() is a call into libc, a
 * pointer demangled, then the vDSO's function; about 11 ns for the coarse
 * clock on the VM bench/ runs on, against about 7 ns for a direct call of
 * the vDSO's function (1e6 calls each, interleaved). So the library looks
 * the vDSO's function up once, when a manager is opened (dlvsym() of the
 * vDSO glibc has loaded already: no file is opened), and calls it
 * directly. Where the vDSO, its name or the symbol is unknown, libc's
 * clock_gettime() stays: the same clock, only slower.
 */
#include <dlfcn.h>
#include <pthread.h>

#include "sys.h"

/*
 * The vDSO's clock_gettime() by architecture: the vDSO's soname as glibc
 * knows it, the symbol and its version (Linux's vDSO ABI, stable since
 * the versions named).
 */
#if defined(__x86_64__)
#define VDSO_NAME "linux-vdso.so.1"
#define VDSO_SYM "__vdso_clock_gettime"
#define VDSO_VERSION "LINUX_2.6"
#elif defined(__aarch64__)
#define VDSO_NAME "linux-vdso.so.1"
#define VDSO_SYM "__kernel_clock_gettime"
#define VDSO_VERSION "LINUX_2.6.39"
#endif

wlk__gettime_fn wlk__coarse_gettime = clock_gettime;

static pthread_once_t resolved = PTHREAD_ONCE_INIT;

/* The vDSO's function answers what clock_gettime() answers for the coarse
 * clock: check once that it works before using it. */
static void resolve(void)
{
#ifdef VDSO_NAME
	void *vdso = dlopen(VDSO_NAME, RTLD_NOW | RTLD_NOLOAD);
	wlk__gettime_fn fn;
	struct timespec ts;

	if (!vdso)
		return;
	*(void **)(void *)&fn = dlvsym(vdso, VDSO_SYM, VDSO_VERSION);
	/* The handle stays open: the vDSO is never unloaded anyway. */
	if (fn && fn(CLOCK_MONOTONIC_COARSE, &ts) == 0)
		uatomic_set(&wlk__coarse_gettime, fn);
#endif
}

/* wlk__clock_init() - look the vDSO's clock up, once per process: outside
 * every lock (dlopen() takes the loader's lock and may allocate). */
void wlk__clock_init(void)
{
	pthread_once(&resolved, resolve);
}

uint64_t wlk__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return wlk__ts_ns(&ts);
}

uint64_t wlk__realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return wlk__ts_ns(&ts);
}
