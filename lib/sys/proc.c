/* SPDX-License-Identifier: MIT */
/*
 * proc.c - this process's incarnation: the fork generation, and the
 * library's own threads.
 *
 * The child of fork() inherits its parent's mappings, managers, anchor and
 * watcher state, none of which it owns. Each of them records the generation
 * it was made in and treats itself as inherited when the generation has
 * moved on. The registry bumps it in its atfork child handler; it lives
 * here, below the registry, so that the anchor, the watcher and the
 * failpoints can read it without calling up into the registry.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>

#include "sys.h"

unsigned long wlk__fork_generation; /* [A] */

/* Called in the child of fork(), before any other library code runs there. */
void wlk__fork_gen_bump(void)
{
	uatomic_inc(&wlk__fork_generation);
}

struct start {
	void *(*fn)(void *);
	void *arg;
	sem_t running;
};

static void *trampoline(void *p)
{
	struct start *st = p;
	void *(*fn)(void *) = st->fn;
	void *arg = st->arg;

	sem_post(&st->running); /* @st lives on the spawner's stack */
	return fn(arg);
}

/*
 * wlk__thread_spawn() - start a detached library thread running @fn(@arg)
 * with every signal blocked (no signal handler of the program runs on
 * it), @stack bytes of stack (0: the default), and return once it runs.
 *
 * Waiting for the thread to run closes a window in which the program
 * forks while the new thread is still being set up: a C library whose
 * allocator does not take its locks across fork() (a sanitizer's, for
 * one) would hand the child an allocator lock held by a thread that does
 * not exist there, and the child's first malloc would hang.
 *
 * Return: 0, or a negative errno value (no thread).
 */
/* Create the detached thread of @st, every signal blocked in it. */
static int create(struct start *st, size_t stack)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t th;
	int rc = pthread_attr_init(&attr);

	if (rc)
		return rc;
	rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (!rc && stack)
		rc = pthread_attr_setstacksize(&attr, stack);
	if (!rc) {
		/* The thread inherits this mask. */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		rc = pthread_create(&th, &attr, trampoline, st);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_attr_destroy(&attr);
	return rc;
}

int wlk__thread_spawn(void *(*fn)(void *), void *arg, size_t stack)
{
	struct start st = {.fn = fn, .arg = arg};
	int rc;

	if (sem_init(&st.running, 0, 0))
		return wlk__errno(errno);
	rc = create(&st, stack);
	if (!rc)
		while (sem_wait(&st.running) && errno == EINTR)
			;
	sem_destroy(&st.running);
	return rc ? wlk__errno(rc) : 0;
}
