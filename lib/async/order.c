/* SPDX-License-Identifier: MIT */
/*
 * order.c - a manager's asynchronous requests by name, so that a dispatch
 * after a grant looks only where a grant can be (engine.h, ASYNC ORDER):
 * at the first unsettled request of each name's group, and at the loose
 * requests. All under m->amu.
 */
#include <stdlib.h>
#include <string.h>

#include "async_internal.h"

/* Why a pending request should stop waiting, or 0. */
static int why_stop(const struct wlk_async *r, uint64_t now)
{
	if (r->cancel)
		return WLK_EABORTED;
	if (r->sig && uatomic_read(&r->sig->reason))
		return uatomic_read(&r->sig->reason);
	if (r->deadline && now >= r->deadline)
		return WLK_ETIMEDOUT;
	return 0;
}

/* wlk__async_settled() - a settled request with a status has no lock. */
void wlk__async_settled(struct wlk_async *r)
{
	if (r->status) {
		wlk__lock_free(r->l);
		r->l = NULL;
	}
}

/* The group of the name @name (@len bytes), or NULL. */
static struct wlk__agroup *group_find(struct wlk_manager *m, const char *name,
				      size_t len)
{
	struct wlk__agroup *g;

	cds_list_for_each_entry(g, &m->groups, link)
		if (g->len == len && !memcmp(g->name, name, len))
			return g;
	return NULL;
}

/*
 * wlk__async_join() - file request @r (on m->pending, about to be queued),
 * made with options @o: in the group of its name if it is granted in
 * request order there, else loose. A group that cannot be allocated
 * leaves the request loose: it is then looked at in every dispatch, which
 * is slower, never wrong.
 */
void wlk__async_join(struct wlk_manager *m, struct wlk_async *r,
		     const struct wlk_options *o)
{
	struct wlk_lock *l = r->l;
	struct wlk__agroup *g = NULL;

	r->seq = ++m->async_seq;
	if (r->deadline)
		cds_list_add_tail(&r->tlink, &m->timed);
	else
		CDS_INIT_LIST_HEAD(&r->tlink);
	if (!l->scope && !o->steal && !o->if_available) {
		g = group_find(m, l->name, l->name_len);
		if (!g) {
			g = malloc(sizeof(*g) + l->name_len + 1);
			if (g) {
				CDS_INIT_LIST_HEAD(&g->reqs);
				g->len = l->name_len;
				memcpy(g->name, l->name, l->name_len + 1);
				cds_list_add_tail(&g->link, &m->groups);
			}
		}
	}
	r->group = g;
	cds_list_add_tail(&r->glink, g ? &g->reqs : &m->loose);
}

/* Out of its group (freed when empty) or the loose list. */
static void ungroup(struct wlk_async *r)
{
	struct wlk__agroup *g = r->group;

	cds_list_del(&r->glink);
	r->group = NULL;
	if (g && cds_list_empty(&g->reqs)) {
		cds_list_del(&g->link);
		free(g);
	}
}

/* wlk__async_leave() - @r leaves m->pending, its group or the loose list,
 * and the timed list. */
void wlk__async_leave(struct wlk_async *r)
{
	cds_list_del(&r->link);
	ungroup(r);
	cds_list_del(&r->tlink);
}

/* wlk__async_loosen() - @r was settled as it was queued (never granted):
 * out of request order, so loose. */
void wlk__async_loosen(struct wlk_manager *m, struct wlk_async *r)
{
	ungroup(r);
	cds_list_add_tail(&r->glink, &m->loose);
}

/* Settle @r if it completed (@why as for the engine's async_settle());
 * if it did, move it to @done. Return: whether it moved. */
static bool take(struct wlk_manager *m, struct wlk_async *r, int why,
		 struct cds_list_head *done)
{
	if (!r->settled) {
		m->e->async_settle(m, r, why);
		if (r->settled)
			wlk__async_settled(r);
	}
	if (!r->settled)
		return false;
	wlk__async_leave(r);
	cds_list_add_tail(&r->link, done);
	return true;
}

/*
 * wlk__async_collect_ordered() - move onto @done what completed, looking
 * only where a grant can be: each group's first requests while they
 * completed, and every loose request. Each looked at is settled for what
 * stops it, as in the full look (why_stop()): a signal aborted
 * before the watcher thread saw it still wins over a grant that came
 * with it. Return: how many moved.
 */
size_t wlk__async_collect_ordered(struct wlk_manager *m,
				  struct cds_list_head *done)
{
	struct wlk__agroup *g, *gt;
	struct wlk_async *r, *rt;
	uint64_t now = wlk__now_ns();
	size_t moved = 0;

	cds_list_for_each_entry_safe(g, gt, &m->groups, link) {
		for (;;) {
			/* The group goes with its last request. */
			bool last = g->reqs.next->next == &g->reqs;

			r = cds_list_entry(g->reqs.next, struct wlk_async,
					   glink);
			if (!take(m, r, why_stop(r, now), done))
				break;
			moved++;
			if (last)
				break;
		}
	}
	cds_list_for_each_entry_safe(r, rt, &m->loose, glink)
		moved += take(m, r, why_stop(r, now), done);
	return moved;
}

/* Merge runs @a and @b (each in seq order) onto the tail of @dst. */
static void merge(struct cds_list_head *dst, struct cds_list_head *a,
		  struct cds_list_head *b)
{
	while (!cds_list_empty(a) || !cds_list_empty(b)) {
		struct cds_list_head *from = a;

		if (cds_list_empty(a) ||
		    (!cds_list_empty(b) &&
		     cds_list_entry(b->next, struct wlk_async, link)->seq <
			     cds_list_entry(a->next, struct wlk_async, link)
				     ->seq))
			from = b;
		cds_list_move(from->next, dst->prev);
	}
}

/* Move the run in seq order at the front of @list onto @run (empty).
 * Return: whether there was one. */
static bool take_run(struct cds_list_head *list, struct cds_list_head *run)
{
	uint64_t last = 0;

	while (!cds_list_empty(list)) {
		struct wlk_async *r =
			cds_list_entry(list->next, struct wlk_async, link);

		if (!cds_list_empty(run) && r->seq < last)
			break;
		last = r->seq;
		cds_list_move(&r->link, run->prev);
	}
	return !cds_list_empty(run);
}

/*
 * wlk__async_sort() - sort @list (struct wlk_async) by request order: a
 * dispatch that looked name by name found them out of it. A bottom-up
 * merge of runs already in order, with no allocation: O(k log k) for k
 * completions, O(k) when they came in order.
 */
void wlk__async_sort(struct cds_list_head *list)
{
	size_t runs;

	if (list->next == list->prev)
		return; /* none or one: the common dispatch */
	do {
		CDS_LIST_HEAD(out);

		runs = 0;
		while (!cds_list_empty(list)) {
			CDS_LIST_HEAD(a);
			CDS_LIST_HEAD(b);

			runs += take_run(list, &a);
			runs += take_run(list, &b);
			merge(&out, &a, &b);
		}
		cds_list_splice(&out, list);
	} while (runs > 1);
}

/*
 * wlk__async_collect_all() - the same, looking at every request: after
 * news that may complete any of them.
 */
void wlk__async_collect_all(struct wlk_manager *m, struct cds_list_head *done)
{
	struct wlk_async *r, *rt;
	uint64_t now = wlk__now_ns();

	cds_list_for_each_entry_safe(r, rt, &m->pending, link)
		take(m, r, why_stop(r, now), done);
}
