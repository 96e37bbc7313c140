/* SPDX-License-Identifier: MIT */
/*
 * signal.c - AbortController/AbortSignal. Aborting is an atomic store and a
 * futex wake, so it may be done from a signal handler.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "api.h"

WLK_EXPORT int wlk_signal_new(struct wlk_signal **out)
{
	struct wlk_signal *s;

	if (!out)
		return WLK_EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->efd = -1;
	*out = s;
	return 0;
}

WLK_EXPORT void wlk_signal_abort(struct wlk_signal *s, int reason)
{
	int efd;

	if (!s)
		return;
	if (reason >= 0)
		reason = WLK_EABORTED;
	/* The first abort sets the reason; the word changes after it, so a
	 * waiter that read the old word sees the reason (shm/wait.c). */
	if (uatomic_cmpxchg(&s->reason, 0, reason) != 0)
		return;
	uatomic_inc(&s->word);
	wlk__futex_wake(&s->word, INT32_MAX);
	/* Event loops with requests using the signal poll this one. */
	efd = uatomic_read(&s->efd);
	if (efd >= 0)
		(void)!write(efd, &(uint64_t){1}, sizeof(uint64_t));
}

WLK_EXPORT bool wlk_signal_aborted(const struct wlk_signal *s)
{
	return s && uatomic_read(&s->reason) != 0;
}

WLK_EXPORT void wlk_signal_free(struct wlk_signal *s)
{
	if (s && s->efd >= 0)
		close(s->efd);
	free(s);
}
