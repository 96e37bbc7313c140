/* SPDX-License-Identifier: MIT */
/*
 * anchor.c - the thread that keeps this process's lifelines locked.
 *
 * A robust mutex reports its owner dead when the owning *thread* exits, even
 * if its process lives on. So lifelines are never locked by an application
 * thread, which may be short-lived, but by one library-owned thread that
 * lives as long as the process: the anchor. It registers this process as an
 * agent of a bucket (slot allocation and lifeline lock, both under the
 * segment mutex, so no prober sees a half-registered agent) and unregisters
 * it when the last manager of the bucket closes.
 *
 * The anchor blocks every signal and only sleeps on its command queue.
 * After fork() the child has no anchor; the first attach in the child starts
 * a new one.
 */
#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include "attach.h"

/* The anchor needs little stack: it only locks and unlocks. */
#define ANCHOR_STACK ((size_t)64 * 1024)

enum anchor_op { OP_ATTACH, OP_DETACH };

struct anchor_cmd {
	struct anchor_cmd *next;
	enum anchor_op op;
	struct wlk__bucket *b;
	int rc;
	bool done;
};

static pthread_mutex_t anchor_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t anchor_cv = PTHREAD_COND_INITIALIZER;
static struct anchor_cmd *anchor_queue; /* under anchor_mu */
static unsigned long anchor_gen = (unsigned long)-1; /* its fork gen */

/* Register this process in @b: allocate an agent slot, lock its lifeline. */
static int do_attach(struct wlk__bucket *b)
{
	struct wlk__wake wake;
	uint32_t pid = (uint32_t)getpid();
	uint64_t now = wlk__realtime_ns();
	int rc;

	/* A crashed run may have left dead agents: reap them first. */
	for (;;) {
		rc = wlk__lock(b, &wake);
		if (rc || !wlk__reap_all(b, &wake))
			break;
		wlk__unlock(b, &wake);
	}
	if (rc)
		return rc;
	rc = wlk__agent_alloc(b, pid, now, &b->agent);
	if (!rc)
		b->agent_gen = WLK_WORD_GEN(wlk__agent(b, b->agent)->word);
	wlk__unlock(b, &wake);
	return rc;
}

/* Unregister: free the agent slot, then let go of the lifeline. */
static void do_detach(struct wlk__bucket *b)
{
	struct wlk__wake wake;

	if (wlk__lock(b, &wake) == 0) {
		wlk__agent_free(b, b->agent, b->agent_gen);
		wlk__unlock(b, &wake);
	}
	/* After the slot is free, so no prober mistakes us for dead. */
	pthread_mutex_unlock(&wlk__agent(b, b->agent)->u.lifeline);
}

static void *anchor_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&anchor_mu);
	for (;;) {
		struct anchor_cmd *c;

		while (!anchor_queue)
			pthread_cond_wait(&anchor_cv, &anchor_mu);
		c = anchor_queue;
		anchor_queue = c->next;
		pthread_mutex_unlock(&anchor_mu);
		if (c->op == OP_ATTACH)
			c->rc = do_attach(c->b);
		else
			do_detach(c->b);
		pthread_mutex_lock(&anchor_mu);
		c->done = true;
		pthread_cond_broadcast(&anchor_cv);
	}
	return NULL;
}

/* Start the anchor of this process incarnation; under anchor_mu. */
static int anchor_start(void)
{
	int rc;

	if (anchor_gen == wlk__fork_gen())
		return 0;
	rc = wlk__thread_spawn(anchor_main, NULL, ANCHOR_STACK);
	if (rc)
		return rc;
	anchor_gen = wlk__fork_gen();
	return 0;
}

static int anchor_call(enum anchor_op op, struct wlk__bucket *b)
{
	struct anchor_cmd c = {.op = op, .b = b};
	int rc, cancel;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
	pthread_mutex_lock(&anchor_mu);
	rc = anchor_start();
	if (!rc) {
		struct anchor_cmd **tail = &anchor_queue;

		while (*tail)
			tail = &(*tail)->next;
		*tail = &c;
		pthread_cond_broadcast(&anchor_cv);
		while (!c.done)
			pthread_cond_wait(&anchor_cv, &anchor_mu);
		rc = c.rc;
	}
	pthread_mutex_unlock(&anchor_mu);
	pthread_setcancelstate(cancel, NULL);
	return rc;
}

int wlk__anchor_attach(struct wlk__bucket *b)
{
	return anchor_call(OP_ATTACH, b);
}

void wlk__anchor_detach(struct wlk__bucket *b)
{
	anchor_call(OP_DETACH, b);
}

/* fork() happens with anchor_mu held, so the child gets it consistent. */
void wlk__anchor_before_fork(void)
{
	pthread_mutex_lock(&anchor_mu);
}

void wlk__anchor_after_fork_parent(void)
{
	pthread_mutex_unlock(&anchor_mu);
}

/*
 * In the child the anchor thread does not exist and queued commands belong
 * to threads that do not either. The condition variable may record waiters
 * of the parent's, so it starts afresh.
 */
void wlk__anchor_after_fork_child(void)
{
	anchor_queue = NULL;
	pthread_cond_init(&anchor_cv, NULL);
	pthread_mutex_unlock(&anchor_mu);
}
