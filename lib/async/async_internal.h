/* SPDX-License-Identifier: MIT */
/*
 * async_internal.h - what the asynchronous request files share.
 */
#ifndef WLK_ASYNC_INTERNAL_H
#define WLK_ASYNC_INTERNAL_H

#include "api.h"

struct pidwatch {
	uint32_t agent, gen;
	int fd;
	uint32_t life; /* its lifeline word, armed (async_pid.c) */
};

/* The async state of a manager; under m->amu. */
struct wlk__actx {
	int epfd, tfd; /* the inner epoll instance (watcher.c), the timer */
	struct wlk__bell bell; /* its eventfd is wlk_manager_fd() */
	int inner_fired;       /* [A] the watcher saw the inner instance
				* readable: consume it, then re-arm */
	uint64_t wkey;         /* the watcher's key for it (under its mutex) */
	unsigned long wfork;   /* the fork generation it was watched in */
	struct cds_list_head wlink; /* in the watcher's list */
	struct cds_list_head pending;  /* struct wlk_async, not dispatched */
	struct cds_list_head watching; /* struct wlk_lock with on_stolen */
	struct pidwatch pid[PIDFD_MAX];
	unsigned int n_pid;
	/* Their lifelines, for the lifeline thread; under its mutex. */
	struct wlk__waitv life[PIDFD_MAX];
	unsigned int n_life;
	bool life_on; /* some were handed to it (under amu) */
	uint64_t recheck; /* a blocker is not watched: look again then */
	bool timer_armed;  /* the timerfd may fire: read it when draining */
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

/* async_dispatch.c */
int wlk__actx_get(struct wlk_manager *m, struct wlk__actx **out)
	WLK_INTERNAL;
void wlk__timer_arm(struct wlk__actx *a) WLK_INTERNAL;

/* watcher.c */
int wlk__epoll_add(int epfd, int fd, uint32_t events) WLK_INTERNAL;
int wlk__watcher_add(struct wlk__actx *a) WLK_INTERNAL;
void wlk__watcher_rearm(struct wlk__actx *a) WLK_INTERNAL;
void wlk__watcher_del(struct wlk__actx *a) WLK_INTERNAL;
bool wlk__watcher_lifelines(struct wlk__actx *a, const struct wlk__waitv *v,
			    unsigned int n) WLK_INTERNAL;

/* async_pid.c */
void wlk__pidwatch_fired(struct wlk__actx *a, int fd) WLK_INTERNAL;
void wlk__pidwatch_update(struct wlk_manager *m, struct wlk__actx *a)
	WLK_INTERNAL;

#endif /* WLK_ASYNC_INTERNAL_H */
