/* SPDX-License-Identifier: MIT */
/*
 * async_pid.c - an event loop notices the death of the processes its
 * pending requests wait behind.
 *
 * A blocked thread sleeps on the blockers' lifelines (reap.c); an event
 * loop cannot sleep on a futex, so its descriptor holds a pidfd for each
 * live blocker instead, which becomes readable when that process exits.
 * Dispatch then probes the lifelines and reaps. pidfd_open() takes a pid,
 * which could be reused by the time it runs: the agent's slot generation
 * and lifeline owner are checked again afterwards, and a mismatch simply
 * drops the pidfd (the next dispatch looks again).
 *
 * A pidfd fires at exit, not at exec(), which ends the process's locks
 * too: so each watched blocker's lifeline is also armed, as a sleeping
 * waiter arms it (reap.c), and handed to the lifeline thread (watcher.c),
 * which the kernel wakes at either.
 */
#include <errno.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shm.h"

static void drop(struct wlk__actx *a, unsigned int i)
{
	epoll_ctl(a->epfd, EPOLL_CTL_DEL, a->pid[i].fd, NULL);
	close(a->pid[i].fd);
	a->pid[i] = a->pid[--a->n_pid];
}

/* An event on @fd: if it is a pidfd, its process exited. */
void wlk__pidwatch_fired(struct wlk__actx *a, int fd)
{
	for (unsigned int i = 0; i < a->n_pid; i++) {
		if (a->pid[i].fd == fd) {
			drop(a, i);
			return;
		}
	}
}

static bool wanted(const uint32_t *agents, unsigned int n, uint32_t agent)
{
	for (unsigned int i = 0; i < n; i++)
		if (agents[i] == agent)
			return true;
	return false;
}

/* Add the live blockers of pending request @ri to @agents. Return:
 * false if not all fit. */
static bool blockers_add(struct wlk__shm_manager *m, uint32_t ri,
			 struct wlk__wake *wake, uint32_t *agents,
			 unsigned int *n)
{
	uint32_t got[WLK_WATCH_MAX];
	unsigned int k = 0;
	bool all = wlk__blockers_live(m->b, ri, wake, got, WLK_WATCH_MAX, &k);

	for (unsigned int i = 0; i < k; i++) {
		if (wanted(agents, *n, got[i]))
			continue;
		if (*n == PIDFD_MAX)
			all = false;
		else
			agents[(*n)++] = got[i];
	}
	return all;
}

/* Add the live blockers of @r to @agents, if it is still pending.
 * Return: -1 if it is not, else whether all fit. */
static int request_blockers(struct wlk__shm_manager *m, struct wlk_async *r,
			    struct wlk__wake *wake, uint32_t *agents,
			    unsigned int *n)
{
	const struct wlk__shm_lock *l = wlk__shm_l(r->l);

	if (r->settled || wlk__req(m->b, l->slot)->word !=
				  WLK_WORD(l->gen, WLK_SLOT_PENDING))
		return -1;
	return blockers_add(m, l->slot, wake, agents, n);
}

/*
 * Under the segment mutex: live blockers of all pending requests. A name's
 * blockers are looked for once, behind our last request in its queue (the
 * last of its group: engine.h, ASYNC ORDER), not once per request: what
 * the requests before it wait for, it waits for too, and a thousand
 * requests of one manager on one name cost one look. Loose requests (a
 * scope's members wait on several names) are looked at each on its own.
 * Return: false if there were more than fit.
 */
static bool blockers_of(struct wlk__shm_manager *m, struct wlk__actx *a,
			uint32_t *agents, unsigned int *n)
{
	struct wlk__agroup *g;
	struct wlk_async *r;
	struct wlk__wake wake;
	bool all = true;

	(void)a;
	*n = 0;
	if (wlk__lock(m->b, &wake))
		return false;
	cds_list_for_each_entry(g, &m->pub.groups, link) {
		/* From the last back to one still pending: the last, but
		 * after a cancel that the next dispatch collects. */
		cds_list_for_each_entry_reverse(r, &g->reqs, glink) {
			int rc = request_blockers(m, r, &wake, agents, n);

			if (rc >= 0) {
				all &= rc;
				break;
			}
		}
	}
	cds_list_for_each_entry(r, &m->pub.loose, glink)
		all &= request_blockers(m, r, &wake, agents, n) != 0;
	/* Reaping above may have granted us: the flush rings our bell. */
	wlk__unlock(m->b, &wake);
	return all;
}

/*
 * Set FUTEX_WAITERS in agent @ai's lifeline word (wlk__lifeline_arm()), so
 * that the kernel wakes a watcher when its owner dies or execs. Return:
 * false if no live owner holds it; else true with the armed value in *@val.
 */
static bool arm(struct wlk__bucket *b, uint32_t ai, uint32_t *val)
{
	uint32_t *w = wlk__lifeline_word(b, ai);
	enum wlk__arm rc = WLK__MOVED;

	for (int tries = 0; tries < WLK_ARM_TRIES && rc == WLK__MOVED; tries++)
		rc = wlk__lifeline_arm(w, val);
	return rc == WLK__ARMED;
}

/*
 * Watch agent @ai through a pidfd, if it is still who it was. Return:
 * false if it could not be watched (no pidfd_open: Linux < 5.3, or a
 * sandbox; or it changed hands meanwhile).
 */
static bool watch(struct wlk__bucket *b, struct wlk__actx *a, uint32_t ai)
{
	struct wlk_seg_agent *ag = wlk__agent(b, ai);
	uint32_t word = wlk__word_load(&ag->word), life;
	int fd;

	if (WLK_WORD_STATE(word) != WLK_SLOT_USED || a->n_pid == PIDFD_MAX)
		return false;
	fd = (int)syscall(SYS_pidfd_open, (pid_t)ag->pid, 0);
	if (fd < 0)
		return false;
	if (wlk__word_load(&ag->word) != word || !arm(b, ai, &life) ||
	    wlk__epoll_add(a->epfd, fd, EPOLLIN)) {
		close(fd);
		return false;
	}
	a->pid[a->n_pid++] =
		(struct pidwatch){ai, WLK_WORD_GEN(word), fd, life};
	return true;
}

/*
 * Hand the watched blockers' lifelines to the lifeline thread, armed. One
 * whose owner died or let go since it was armed is dropped (it no longer
 * blocks, or the next dispatch that finds it blocking reaps it). Return:
 * false if not all of them are watched that way.
 */
static bool watch_lifelines(struct wlk__bucket *b, struct wlk__actx *a)
{
	struct wlk__waitv v[PIDFD_MAX];
	bool all = true;

	for (unsigned int i = a->n_pid; i-- > 0;) {
		struct pidwatch *p = &a->pid[i];

		if (uatomic_read(wlk__lifeline_word(b, p->agent)) != p->life &&
		    !arm(b, p->agent, &p->life)) {
			drop(a, i);
			all = false;
		}
	}
	for (unsigned int i = 0; i < a->n_pid; i++)
		v[i] = (struct wlk__waitv){
			wlk__lifeline_word(b, a->pid[i].agent), a->pid[i].life};
	return wlk__watcher_lifelines(a, v, a->n_pid) && all;
}

/* Make the pidfds match the live blockers of the pending requests. */
void wlk__pidwatch_update(struct wlk__shm_manager *m, struct wlk__actx *a)
{
	uint32_t agents[PIDFD_MAX];
	unsigned int n;
	bool all;

	/* Nothing waits: keep the pidfds for next time (their processes
	 * are often the next blockers), and skip the segment mutex. The
	 * lifelines stay with the lifeline thread too: taking them back
	 * would wake it now, and handing them over again with the next
	 * request would wake it once more (two context switches per
	 * handoff to an event loop, where the same holder blocks it again
	 * and again); kept, a blocker that dies meanwhile only costs a
	 * dispatch that finds nothing to do. */
	if (cds_list_empty(&m->pub.pending)) {
		a->recheck = 0;
		return;
	}
	all = blockers_of(m, a, agents, &n);
	/* A pidfd stays while its agent lives, wanted now or not, unless
	 * room is needed: a process that is not blocking us costs nothing
	 * until it exits (then its pidfd fires once and is dropped). */
	for (unsigned int i = a->n_pid; i-- > 0;) {
		struct pidwatch *p = &a->pid[i];

		if (WLK_WORD_GEN(wlk__agent(m->b, p->agent)->word) != p->gen ||
		    (a->n_pid == PIDFD_MAX && !wanted(agents, n, p->agent)))
			drop(a, i);
	}
	for (unsigned int i = 0; i < n; i++) {
		bool have = false;

		for (unsigned int j = 0; j < a->n_pid; j++)
			have |= a->pid[j].agent == agents[i];
		if (!have && !watch(m->b, a, agents[i]))
			all = false;
	}
	if (!watch_lifelines(m->b, a))
		all = false;
	/* What is not watched is looked at again on a timer: the one set
	 * already, while it is still to come (re-arming the timer at each
	 * dispatch would be a system call each). */
	if (all)
		a->recheck = 0;
	else if (a->recheck <= wlk__now_ns())
		a->recheck = wlk__now_ns() + WLK_RECHECK_NS;
}
