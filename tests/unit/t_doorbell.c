/* SPDX-License-Identifier: MIT */
/*
 * t_doorbell.c - how a grant reaches an event loop (lib/sys/doorbell.c): by a
 * write to its doorbell eventfd, which the granter takes from the owner's
 * process with pidfd_getfd(2), or, when that eventfd cannot be had, by a
 * datagram to its socket, which the process's watcher thread turns into a
 * ring; either way one dispatch drains the descriptor. The test changes
 * the published key of the eventfd (it includes lib/format/layout.h to do so),
 * which sends every ring down the fallback.
 */
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common.h"
#include "weblocks/async.h"
#include "weblocks/inspect.h"
#include "testing.h"

struct got {
	int calls;
	int status;
	struct wlk_lock *lock;
};

static void on_grant(struct wlk_async *req, int status, struct wlk_lock *lock,
		     void *arg)
{
	struct got *g = arg;

	(void)req;
	g->calls++;
	g->status = status;
	g->lock = lock;
}

static bool readable(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* Map the bucket's segment and find the client slot with @client_id. */
/* Whether client slot @c's id (layout.h, TEXT: a chain of chunks) is @id. */
static bool id_is(const void *map, const struct wlk_seg_client *c,
		  const char *id)
{
	const struct wlk_seg_header *h = map;
	const struct wlk_seg_chunk *chunks =
		(const struct wlk_seg_chunk *)((const char *)map +
					       h->off_chunks);
	uint32_t len = c->id_len, i = c->id;

	if (len != strlen(id))
		return false;
	for (uint32_t at = 0; at < len; at += WLK_CHUNK_TEXT) {
		uint32_t piece = len - at < WLK_CHUNK_TEXT ? len - at
							   : WLK_CHUNK_TEXT;

		if (i >= h->max_chunks ||
		    memcmp(chunks[i].text, id + at, piece))
			return false;
		i = chunks[i].next;
	}
	return true;
}

static struct wlk_seg_client *client_slot(const char *client_id,
					  void **map, size_t *size)
{
	struct wlk_inspect_snapshot *s = NULL;
	struct wlk_inspect *in = NULL;
	struct wlk_seg_header *h;
	struct wlk_seg_client *c = NULL;
	struct stat st;
	int fd;

	T_ASSERT_RC(wlk_inspect_open(t_origin, NULL, 0, &in), 0);
	T_ASSERT_RC(wlk_inspect_snapshot(in, &s), 0);
	fd = open(s->header.path, O_RDWR | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fstat(fd, &st), 0);
	*size = (size_t)st.st_size;
	*map = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	cr_assert_neq(*map, MAP_FAILED);
	close(fd);
	h = *map;
	for (uint32_t i = 0; i < h->max_clients && !c; i++) {
		struct wlk_seg_client *x =
			(struct wlk_seg_client *)((char *)*map +
						  h->off_clients) + i;

		if (WLK_WORD_STATE(x->word) == WLK_SLOT_USED &&
		    id_is(*map, x, client_id))
			c = x;
	}
	wlk_inspect_snapshot_free(s);
	wlk_inspect_close(in);
	cr_assert_not_null(c, "no client slot for %s", client_id);
	return c;
}

/* Hold "d" with @h, queue @q for it asynchronously, release: granted. */
static void handoff(struct wlk_manager *h, struct wlk_manager *q,
		    struct wlk_seg_client *slot, bool dgram)
{
	struct wlk_lock *l = NULL;
	struct got g = {0};
	int fd = wlk_manager_fd(q);

	T_ASSERT_RC(wlk_acquire(h, "d", 1, NULL, &l), 0);
	T_ASSERT_RC(wlk_request_async(q, "d", 1, NULL, on_grant, &g, NULL), 0);
	cr_assert_eq(wlk_manager_dispatch(q), 0);
	cr_assert_not(readable(fd, 0), "readable with nothing done");
	T_ASSERT_RC(wlk_release(l), 0);
	cr_assert(readable(fd, T_WAIT_MS), "the grant did not ring");
	cr_assert_eq(slot->bell_dgrams, dgram ? 1u : 0u,
		     "rung by the wrong way");
	cr_assert_eq(wlk_manager_dispatch(q), 1);
	cr_assert_eq(g.calls, 1);
	T_ASSERT_RC(g.status, 0);
	cr_assert_not_null(g.lock);
	cr_assert_not(readable(fd, 0), "dispatch left the descriptor readable");
	cr_assert_eq(slot->bell_dgrams, 0, "datagrams still owed");
	T_ASSERT_RC(wlk_release(g.lock), 0);
}

/* Two managers of t_origin; @q's doorbell, and its client slot mapped. */
struct pair {
	struct wlk_manager *h, *q;
	struct wlk_seg_client *slot;
	void *map;
	size_t size;
};

static void pair_open(struct pair *p)
{
	p->h = t_open();
	p->q = t_open();
	cr_assert_geq(wlk_manager_fd(p->q), 0);
	p->slot = client_slot(wlk_manager_client_id(p->q), &p->map, &p->size);
	cr_assert_neq(p->slot->bell_key, 0, "no eventfd published");
}

Test(doorbell, grant_rings_the_eventfd, T_FIX, .timeout = 10)
{
	struct pair p;

	pair_open(&p);
	handoff(p.h, p.q, p.slot, false);
	handoff(p.h, p.q, p.slot, false); /* the granter's cached descriptor */
	munmap(p.map, p.size);
}

Test(doorbell, unusable_eventfd_falls_back_to_the_socket, T_FIX,
     .timeout = 10)
{
	struct pair p;

	pair_open(&p);
	/* Not that eventfd: granters must not write to whatever this is. */
	p.slot->bell_key ^= 0x5a5a5a5aull;
	handoff(p.h, p.q, p.slot, true);
	handoff(p.h, p.q, p.slot, true);
	munmap(p.map, p.size);
}
