/* SPDX-License-Identifier: MIT */
/*
 * async_internal.h - what the asynchronous request files share.
 */
#ifndef WLK_ASYNC_INTERNAL_H
#define WLK_ASYNC_INTERNAL_H

#include "internal.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

/* Processes whose death a manager watches through pidfds. */
#define PIDFD_MAX 32
#define EVENTS_BATCH 32

struct pidwatch {
	uint32_t agent, gen;
	int fd;
};

/* The async state of a manager; under m->amu. */
struct wlk__actx {
	int epfd, tfd;
	struct wlk__bell bell;
	struct cds_list_head pending;  /* struct wlk_async, not dispatched */
	struct cds_list_head watching; /* struct wlk_lock with on_stolen */
	struct pidwatch pid[PIDFD_MAX];
	unsigned int n_pid;
	uint64_t recheck; /* a blocker is not watched: look again then */
	bool timer_armed;  /* the timerfd may fire: read it when draining */
	bool edge_sources; /* signal eventfds (edge-triggered) were added */
};

struct wlk_async {
	struct cds_list_head link;
	struct wlk_manager *m;
	struct wlk_lock *l; /* handed to the callback when granted */
	wlk_granted_cb cb;
	void *arg;
	struct wlk_signal *sig;
	uint64_t deadline;
	bool cancel;
	bool settled; /* completed: the callback is owed, with status */
	int status;
};

int wlk__epoll_add(int epfd, int fd, uint32_t events) WLK_INTERNAL;
int wlk__actx_get(struct wlk_manager *m, struct wlk__actx **out)
	WLK_INTERNAL;
void wlk__actx_free(struct wlk__actx *a) WLK_INTERNAL;
void wlk__timer_arm(struct wlk__actx *a) WLK_INTERNAL;

/* async_pid.c */
void wlk__pidwatch_fired(struct wlk__actx *a, int fd) WLK_INTERNAL;
void wlk__pidwatch_update(struct wlk_manager *m, struct wlk__actx *a)
	WLK_INTERNAL;

#endif /* WLK_ASYNC_INTERNAL_H */
