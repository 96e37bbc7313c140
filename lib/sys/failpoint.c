/* SPDX-License-Identifier: MIT */
/*
 * failpoint.c - kill the process at a named point (see failpoint.h).
 * Only built with --enable-failpoints; never in production builds.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sys.h"

#ifdef WLK_ENABLE_FAILPOINTS

#define WLK__FP_NAME(name) #name,
static const char *const names[WLK_FP_COUNT] = {
	WLK_FAILPOINT_LIST(WLK__FP_NAME)
};

/*
 * The environment is read once per process incarnation: a fork child
 * (which typically sets WLK_FAILPOINT after forking) reads it afresh.
 */
static pthread_mutex_t arm_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long armed_gen = (unsigned long)-1;
static int armed = -1;       /* the armed point, or -1 */
static unsigned long target; /* kill on this hit */
static unsigned long hits;

static void arm(void)
{
	const char *env = getenv("WLK_FAILPOINT");
	const char *colon;
	size_t len;

	armed = -1;
	hits = 0;
	if (!env || !*env)
		return;
	colon = strchr(env, ':');
	len = colon ? (size_t)(colon - env) : strlen(env);
	target = colon ? strtoul(colon + 1, NULL, 10) : 1;
	if (!target)
		target = 1;
	for (int i = 0; i < WLK_FP_COUNT; i++)
		if (strlen(names[i]) == len && !strncmp(names[i], env, len))
			armed = i;
	if (armed < 0) {
		/* A typo would make a crash test pass without crashing. */
		fprintf(stderr, "weblocks: unknown fail point '%s'\n", env);
		abort();
	}
}

void wlk__failpoint(enum wlk__failpoint_id id)
{
	bool die;

	pthread_mutex_lock(&arm_mu);
	if (armed_gen != wlk__fork_gen()) {
		arm();
		armed_gen = wlk__fork_gen();
	}
	die = (int)id == armed && ++hits == target;
	pthread_mutex_unlock(&arm_mu);
	if (die)
		raise(SIGKILL);
}

#endif /* WLK_ENABLE_FAILPOINTS */
