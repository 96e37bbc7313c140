/* SPDX-License-Identifier: MIT */
/*
 * t_damaged.c - segments damaged in ways the fuzzer (tests/fuzz) found:
 * they must give errors, never crash a process of the bucket.
 *
 * A robust mutex in the segment (the segment mutex, an agent's lifeline)
 * whose kind word says another kind of mutex: glibc trusts that word, and
 * priority protection with a ceiling of 0 made its trylock abort.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common.h"
#include "testing.h"

static struct wlk_seg_agent *agent_at(uint8_t *seg, uint32_t i)
{
	const struct wlk_seg_header *h = (const struct wlk_seg_header *)seg;

	return (struct wlk_seg_agent *)(seg + h->off_agents) + i;
}

/* The kind word of a process-shared priority-protection mutex. */
static int pp_kind(void)
{
	pthread_mutexattr_t a;
	pthread_mutex_t m;
	int kind;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	cr_assert_eq(pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_PROTECT),
		     0);
	cr_assert_eq(pthread_mutex_init(&m, &a), 0);
	kind = m.__data.__kind;
	pthread_mutex_destroy(&m);
	pthread_mutexattr_destroy(&a);
	return kind;
}

/* Swap @mu's kind word for @kind; returns the old one. */
static int set_kind(pthread_mutex_t *mu, int kind)
{
	return __atomic_exchange_n(&mu->__data.__kind, kind, __ATOMIC_SEQ_CST);
}

static pid_t start_newcomer(struct t_pipe p[2])
{
	t_pipe_open(&p[0]);
	t_pipe_open(&p[1]);
	/* Before this process opens the bucket: it inherits no descriptor. */
	return t_fork(t_newcomer, p);
}

static void newcomer_attaches(struct t_pipe p[2])
{
	cr_assert_eq(t_put_byte(p[1].wr, 'o'), 0);
	cr_assert_eq(t_get_byte(p[0].rd), 'h', "the newcomer did not get \"z\"");
}

static void newcomer_leaves(struct t_pipe p[2], pid_t pid)
{
	cr_assert_eq(t_put_byte(p[1].wr, 'r'), 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 0);
}

/* The next opener's agent slot: a damaged lifeline there is skipped. */
Test(damaged, free_lifeline_of_another_kind_is_passed_over, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m;
	struct t_pipe p[2];
	pid_t pid = start_newcomer(p);
	size_t size;
	uint8_t *seg;
	uint32_t ai;
	int old;

	m = t_open();
	seg = t_segment_map(&size);
	ai = ((struct wlk_seg_header *)seg)->free_agents;
	cr_assert_lt(ai, WLK_MAX_AGENTS);
	old = set_kind(&agent_at(seg, ai)->u.lifeline, pp_kind());

	newcomer_attaches(p);
	cr_assert_eq(t_held_n(m, "z", 1), 1);
	newcomer_leaves(p, pid);
	set_kind(&agent_at(seg, ai)->u.lifeline, old);
	munmap(seg, size);
	t_close(m);
}

/* Another live process's lifeline: its liveness is not judged by it. */
Test(damaged, live_lifeline_of_another_kind_is_not_probed, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m;
	struct t_pipe p[2];
	pid_t pid = start_newcomer(p);
	struct wlk_seg_agent *a = NULL;
	size_t size;
	uint8_t *seg;
	int old;

	m = t_open();
	newcomer_attaches(p);
	seg = t_segment_map(&size);
	for (uint32_t i = 0; i < WLK_MAX_AGENTS && !a; i++)
		if (WLK_WORD_STATE(agent_at(seg, i)->word) == WLK_SLOT_USED &&
		    agent_at(seg, i)->pid == (uint32_t)pid)
			a = agent_at(seg, i);
	cr_assert_not_null(a, "the newcomer's agent slot");
	old = set_kind(&a->u.lifeline, pp_kind());

	/* query() probes every other agent. */
	cr_assert_eq(t_held_n(m, "z", 1), 1, "the newcomer still holds \"z\"");
	set_kind(&a->u.lifeline, old);
	newcomer_leaves(p, pid);
	munmap(seg, size);
	t_close(m);
}

/* The segment mutex: the segment is poisoned, openers move on. */
Test(damaged, segment_mutex_of_another_kind_poisons, T_FIX, .timeout = 20)
{
	struct wlk_snapshot *s = NULL;
	struct wlk_manager *m;
	struct wlk_lock *l = NULL;
	struct t_pipe p[2];
	pid_t pid = start_newcomer(p);
	struct wlk_seg_header *h;
	size_t size;
	uint8_t *seg;
	int rc;

	rc = wlk_manager_open(t_origin, NULL, &m);
	cr_assert_eq(rc, 0, "open: %s", t_ename(rc));
	/* "f" on the fast path, as it will be when the segment is poisoned. */
	T_ASSERT_RC(wlk_acquire(m, "f", 1, NULL, &l), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	seg = t_segment_map(&size);
	h = (struct wlk_seg_header *)seg;
	set_kind(&h->sync.mutex, pp_kind());

	rc = wlk_query(m, &s);
	cr_assert_eq(rc, WLK_ECORRUPT, "query: %s", t_ename(rc));
	cr_assert_eq(h->seg_state, WLK_SEG_POISONED);
	/* Whoever poisons turns the fast path off: no grant beside the next
	 * generation. */
	rc = wlk_acquire(m, "f", 1, NULL, &l);
	cr_assert_eq(rc, WLK_ECORRUPT, "fast acquire in a poisoned segment: %s",
		     t_ename(rc));
	/* This process keeps generation 0 attached: generation 1. */
	newcomer_attaches(p);
	newcomer_leaves(p, pid);
	munmap(seg, size);
	wlk_manager_close(m);
}

/* Damaged before anybody locked it: the next opener poisons it. */
Test(damaged, segment_mutex_of_another_kind_is_refused_at_attach, T_FIX,
     .timeout = 20)
{
	struct wlk_manager *m;
	struct t_pipe p[2];
	pid_t pid = start_newcomer(p);
	struct wlk_seg_header *h;
	size_t size;
	uint8_t *seg;
	int rc;

	rc = wlk_manager_open(t_origin, NULL, &m);
	cr_assert_eq(rc, 0, "open: %s", t_ename(rc));
	seg = t_segment_map(&size);
	h = (struct wlk_seg_header *)seg;
	set_kind(&h->sync.mutex, pp_kind());

	newcomer_attaches(p);
	cr_assert_eq(h->seg_state, WLK_SEG_POISONED);
	newcomer_leaves(p, pid);
	munmap(seg, size);
	wlk_manager_close(m);
}

/* The name entry of @name in a mapped segment, or NULL. */
static struct wlk_seg_name *name_entry(uint8_t *seg, const char *name)
{
	const struct wlk_seg_header *h = (const struct wlk_seg_header *)seg;

	for (uint32_t i = 0; i < h->max_names; i++) {
		struct wlk_seg_name *n = (struct wlk_seg_name *)(
			seg + h->off_names + (size_t)i * h->name_stride);

		if (WLK_WORD_STATE(n->word) == WLK_SLOT_USED &&
		    n->len == strlen(name) && n->len <= WLK_NAME_INLINE &&
		    !memcmp(n->text, name, n->len))
			return n;
	}
	return NULL;
}

/*
 * A queue whose tail is set while its head is not: a request appended
 * there was out of reach of the grant, and an if_available one, which
 * never waits, waited for ever.
 */
Test(damaged, queue_with_a_tail_and_no_head_is_corrupt, T_FIX, .timeout = 20)
{
	static const struct wlk_options sh = {.size = sizeof(sh),
					      .mode = WLK_SHARED};
	static const struct wlk_options avail = {.size = sizeof(avail),
						 .mode = WLK_SHARED,
						 .if_available = true};
	struct wlk_manager *m = t_open(), *m2 = t_open();
	struct wlk_lock *l = NULL, *l2 = NULL;
	struct wlk_seg_name *n;
	size_t size;
	uint8_t *seg;

	T_ASSERT_RC(wlk_acquire(m, "b", 1, &sh, &l), 0);
	seg = t_segment_map(&size);
	n = name_entry(seg, "b");
	cr_assert_not_null(n);
	cr_assert_eq(n->q_head, WLK_NIL);
	n->q_tail = 0;

	T_ASSERT_RC(wlk_acquire(m2, "b", 1, &avail, &l2), WLK_ECORRUPT);
	/* Repaired by the next locker: the name works again. */
	T_ASSERT_RC(wlk_acquire(m2, "b", 1, &avail, &l2), 0);
	cr_assert_not_null(l2);
	T_ASSERT_RC(wlk_release(l2), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	munmap(seg, size);
}

/* The request slots of a scope's members, found by their flag. */
static size_t scope_members(uint8_t *seg, struct wlk_seg_request **out,
			    size_t max)
{
	const struct wlk_seg_header *h = (const struct wlk_seg_header *)seg;
	struct wlk_seg_request *r =
		(struct wlk_seg_request *)(seg + h->off_requests);
	size_t n = 0;

	for (uint32_t i = 0; i < h->max_requests && n < max; i++)
		if (WLK_WORD_STATE(r[i].word) != WLK_SLOT_FREE &&
		    (r[i].flags & WLK_REQF_SCOPE))
			out[n++] = &r[i];
	return n;
}

/*
 * A scope whose ring is broken (a member's link points at itself): the
 * validator says so, an operation on it reports corruption instead of
 * walking the ring, and the repair drops the scope whole, never a part.
 */
Test(damaged, a_broken_scope_ring_is_dropped_whole, T_FIX, .timeout = 20)
{
	struct wlk_name abc[] = {{"a", 1}, {"b", 1}, {"c", 1}};
	struct wlk_manager *m = t_open(), *m2 = t_open();
	struct wlk_seg_request *r[3];
	struct wlk_lock *l = NULL, *l2 = NULL;
	size_t size;
	uint8_t *seg;
	int broken = -1;

	T_ASSERT_RC(wlk_acquire_scope(m, abc, 3, NULL, &l), 0);
	seg = t_segment_map(&size);
	cr_assert_eq(scope_members(seg, r, 3), 3);
	for (int i = 0; i < 3 && broken < 0; i++)
		if (!(r[i]->flags & WLK_REQF_LEAD))
			broken = i;
	r[broken]->scope = (uint32_t)((uint8_t *)r[broken] -
		(seg + ((struct wlk_seg_header *)seg)->off_requests)) /
		sizeof(struct wlk_seg_request);
	cr_assert_neq(wlk_manager_validate(m, NULL, NULL), 0,
		      "the validator missed the broken ring");
	T_ASSERT_RC(wlk_release(l), WLK_ECORRUPT);
	/* The next locker repairs: nothing of the scope is left. */
	for (int i = 0; i < 3; i++) {
		T_ASSERT_RC(wlk_acquire(m2, abc[i].name, 1, NULL, &l2), 0);
		T_ASSERT_RC(wlk_release(l2), 0);
	}
	cr_assert_eq(t_held_n(m2, NULL, 0), 0);
	t_assert_valid(m2, NULL);
	munmap(seg, size);
}

/* A name longer than an entry holds (layout.h, TEXT): two chunks. */
static const char LONG_NAME[] = "a-name-whose-bytes-take-two-chunks-of-text";

/* The entry of LONG_NAME in a mapped segment, and its first chunk. */
static struct wlk_seg_name *long_entry(uint8_t *seg,
				       struct wlk_seg_chunk **first)
{
	const struct wlk_seg_header *h = (const struct wlk_seg_header *)seg;
	struct wlk_seg_chunk *chunks =
		(struct wlk_seg_chunk *)(seg + h->off_chunks);

	for (uint32_t i = 0; i < h->max_names; i++) {
		struct wlk_seg_name *n = (struct wlk_seg_name *)(
			seg + h->off_names + (size_t)i * h->name_stride);

		if (WLK_WORD_STATE(n->word) == WLK_SLOT_USED &&
		    n->len == sizeof(LONG_NAME) - 1 &&
		    n->chunk < h->max_chunks &&
		    !memcmp(chunks[n->chunk].text, LONG_NAME,
			    WLK_CHUNK_TEXT)) {
			*first = &chunks[n->chunk];
			return n;
		}
	}
	return NULL;
}

/* Damage "b"'s queue so that the next locker of the bucket repairs it
 * (see queue_with_a_tail_and_no_head_is_corrupt). */
static void force_repair(struct wlk_manager *m, struct wlk_manager *m2,
			 uint8_t *seg)
{
	static const struct wlk_options sh = {.size = sizeof(sh),
					      .mode = WLK_SHARED};
	static const struct wlk_options avail = {.size = sizeof(avail),
						 .mode = WLK_SHARED,
						 .if_available = true};
	struct wlk_lock *l = NULL, *l2 = NULL;

	T_ASSERT_RC(wlk_acquire(m, "b", 1, &sh, &l), 0);
	name_entry(seg, "b")->q_tail = 0;
	T_ASSERT_RC(wlk_acquire(m2, "b", 1, &avail, &l2), WLK_ECORRUPT);
	T_ASSERT_RC(wlk_acquire(m2, "b", 1, &avail, &l2), 0);
	T_ASSERT_RC(wlk_release(l2), 0);
	T_ASSERT_RC(wlk_release(l), 0);
}

/*
 * Repair re-hashes every name from its bytes: a long one's run through
 * its chain of chunks, which must give the hash it was filed under, or
 * the held name would be found nowhere and granted twice.
 */
Test(damaged, a_long_name_is_found_again_after_repair, T_FIX, .timeout = 20)
{
	static const struct wlk_options now = {.size = sizeof(now),
					       .if_available = true};
	struct wlk_manager *m = t_open(), *m2 = t_open();
	struct wlk_lock *l = NULL, *l2 = (struct wlk_lock *)&l2;
	size_t size;
	uint8_t *seg;

	T_ASSERT_RC(wlk_acquire(m, LONG_NAME, WLK_NUL_TERMINATED, NULL, &l),
		    0);
	seg = t_segment_map(&size);
	force_repair(m, m2, seg);
	T_ASSERT_RC(wlk_acquire(m2, LONG_NAME, WLK_NUL_TERMINATED, &now, &l2),
		    0);
	cr_assert_null(l2, "the long name was granted twice after repair");
	cr_assert_eq(t_held_n(m2, LONG_NAME, sizeof(LONG_NAME) - 1), 1);
	t_assert_valid(m2, NULL);
	T_ASSERT_RC(wlk_release(l), 0);
	munmap(seg, size);
}

/*
 * A long name whose chain of chunks is cut short: the validator says so;
 * looking the name up reports corruption rather than making a second
 * entry for it (two locks of one name); the repair drops the entry, its
 * chunks come back, and the name works again.
 */
Test(damaged, a_broken_chain_of_chunks_drops_its_name, T_FIX, .timeout = 20)
{
	static const struct wlk_options now = {.size = sizeof(now),
					       .if_available = true};
	struct wlk_manager *m = t_open(), *m2 = t_open();
	struct wlk_lock *l = NULL, *l2 = NULL;
	struct wlk_seg_chunk *first = NULL;
	size_t size;
	uint8_t *seg;

	T_ASSERT_RC(wlk_acquire(m, LONG_NAME, WLK_NUL_TERMINATED, NULL, &l),
		    0);
	seg = t_segment_map(&size);
	cr_assert_not_null(long_entry(seg, &first));
	first->next = WLK_NIL;
	cr_assert_neq(wlk_manager_validate(m, NULL, NULL), 0,
		      "the validator missed the broken chain");
	T_ASSERT_RC(wlk_acquire(m2, LONG_NAME, WLK_NUL_TERMINATED, &now, &l2),
		    WLK_ECORRUPT);
	/* The next locker repairs: the entry is gone, and with it m's
	 * lock; the name is free again. */
	T_ASSERT_RC(wlk_acquire(m2, LONG_NAME, WLK_NUL_TERMINATED, &now, &l2),
		    0);
	cr_assert_not_null(l2);
	cr_assert_eq(t_held_n(m2, LONG_NAME, sizeof(LONG_NAME) - 1), 1);
	t_assert_valid(m2, NULL);
	T_ASSERT_RC(wlk_release(l2), 0);
	(void)wlk_release(l);
	munmap(seg, size);
}

/*
 * A name is its bytes, all of them: an entry filed under LONG_NAME's hash
 * whose last byte (in its second chunk) no longer matches is another
 * name, however equal the rest and the hash. (Equal hashes of different
 * names are what the comparison is for; damage is the one way a test
 * can make one.)
 */
Test(damaged, a_long_name_is_compared_to_its_last_byte, T_FIX, .timeout = 20)
{
	static const struct wlk_options now = {.size = sizeof(now),
					       .if_available = true};
	const size_t last = (sizeof(LONG_NAME) - 2) % WLK_CHUNK_TEXT;
	struct wlk_manager *m = t_open(), *m2 = t_open();
	struct wlk_lock *l = NULL, *l2 = NULL;
	struct wlk_seg_chunk *first = NULL, *second;
	struct wlk_seg_header *h;
	size_t size;
	uint8_t *seg;

	T_ASSERT_RC(wlk_acquire(m, LONG_NAME, WLK_NUL_TERMINATED, NULL, &l),
		    0);
	seg = t_segment_map(&size);
	h = (struct wlk_seg_header *)seg;
	cr_assert_not_null(long_entry(seg, &first));
	cr_assert_lt(first->next, h->max_chunks);
	second = (struct wlk_seg_chunk *)(seg + h->off_chunks) + first->next;
	cr_assert_eq(second->text[last], (uint8_t)LONG_NAME[sizeof(LONG_NAME) -
							     2]);
	second->text[last] ^= 1;
	T_ASSERT_RC(wlk_acquire(m2, LONG_NAME, WLK_NUL_TERMINATED, &now, &l2),
		    0);
	cr_assert_not_null(l2, "an entry differing in the last byte matched");
	T_ASSERT_RC(wlk_release(l2), 0);
	T_ASSERT_RC(wlk_release(l), 0);
	second->text[last] ^= 1; /* for the fixture's validation */
	munmap(seg, size);
}

/* The request table of a mapped segment. */
static struct wlk_seg_request *req_table(uint8_t *seg)
{
	const struct wlk_seg_header *h = (const struct wlk_seg_header *)seg;

	return (struct wlk_seg_request *)(seg + h->off_requests);
}

/* A request index out of bounds. */
static uint32_t past_the_table(uint8_t *seg)
{
	return ((const struct wlk_seg_header *)seg)->max_requests + 7;
}

/* Damage client @c's list: @cycle, its first slot's link points at
 * itself; else its head is out of bounds. */
static void break_list(uint8_t *seg, struct wlk_seg_client *c, bool cycle)
{
	if (cycle)
		req_table(seg)[c->reqs].cnext = c->reqs;
	else
		c->reqs = past_the_table(seg);
}

/* The client of the first held request: the only holder's. */
static struct wlk_seg_client *holders_client(uint8_t *seg)
{
	const struct wlk_seg_header *h = (const struct wlk_seg_header *)seg;
	const struct wlk_seg_request *r = req_table(seg);

	for (uint32_t i = 0; i < h->max_requests; i++)
		if (WLK_WORD_STATE(r[i].word) == WLK_SLOT_HELD)
			return (struct wlk_seg_client *)(seg + h->off_clients) +
			       r[i].client;
	return NULL;
}

/* Request slots HELD, read without the mutex. */
static uint32_t held_slots(uint8_t *seg)
{
	const struct wlk_seg_header *h = (const struct wlk_seg_header *)seg;
	const struct wlk_seg_request *r = req_table(seg);
	uint32_t n = 0;

	for (uint32_t i = 0; i < h->max_requests; i++)
		n += WLK_WORD_STATE(__atomic_load_n(&r[i].word,
						    __ATOMIC_ACQUIRE)) ==
		     WLK_SLOT_HELD;
	return n;
}

/*
 * A client's list of its request slots (layout.h, CLIENT LISTS) damaged:
 * @cycle, its first slot's link points at itself; else the list's head
 * is out of bounds. The validator says so; the client's close walks the
 * whole table instead, releases all it held and grants the waiter behind
 * it; the next locker repairs, and the segment is valid again.
 */
static const char *const held_names[] = {"x", "y", "z"};

/* Child: hold the three names, say so on @arg's pipe, wait to be
 * killed. */
static int child_holds_three(void *arg)
{
	struct t_pipe *up = arg;
	struct wlk_manager *m = NULL;
	struct wlk_lock *l = NULL;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	for (int i = 0; i < 3; i++)
		T_CHILD_CHECK(wlk_acquire(m, held_names[i], 1, NULL, &l) == 0,
			      11);
	T_CHILD_CHECK(t_put_byte(up->wr, 'g') == 0, 12);
	t_nap_ms(60000); /* until killed */
	return 13;
}

static void broken_client_list(bool cycle)
{
	struct wlk_manager *a = t_open(), *b = t_open();
	struct wlk_lock *l[3] = {NULL}, *lz = NULL;
	struct wlk_seg_client *c;
	struct t_holder h;
	size_t size;
	uint8_t *seg;

	for (int i = 0; i < 3; i++)
		T_ASSERT_RC(wlk_acquire(a, held_names[i], 1, NULL, &l[i]), 0);
	t_holder_start(&h, b, "z", 1, NULL);
	cr_assert(t_wait_pending(b, "z", 1, 1));
	seg = t_segment_map(&size);
	c = holders_client(seg);
	cr_assert_not_null(c);
	cr_assert_neq(c->reqs, WLK_NIL, "the holder's list is empty");
	break_list(seg, c, cycle);
	T_ASSERT_RC(wlk_manager_validate(b, NULL, NULL), WLK_ECORRUPT);

	t_close(a);
	/* By the close itself, not by a later repair: read with no lock. */
	cr_assert_eq(held_slots(seg), 1, "%u held right after the close",
		     held_slots(seg));
	cr_assert_eq(t_holder_wait_granted(&h), 0, "waiter not woken");
	T_ASSERT_RC(h.acq_rc, 0);
	cr_assert_eq(t_held_n(b, NULL, 0), 1, "%zu held after the close",
		     t_held_n(b, NULL, 0));
	cr_assert_eq(t_pending_n(b, NULL, 0), 0);
	for (int i = 0; i < 3; i++)
		T_ASSERT_RC(wlk_release(l[i]), WLK_ESTATE);
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
	T_ASSERT_RC(wlk_acquire(b, "x", 1, NULL, &lz), 0);
	T_ASSERT_RC(wlk_release(lz), 0);
	t_assert_valid(b, NULL);
	munmap(seg, size);
}

Test(damaged, a_client_list_with_a_cycle_is_walked_around, T_FIX,
     .timeout = 20)
{
	broken_client_list(true);
}

Test(damaged, a_client_list_head_out_of_bounds_is_walked_around, T_FIX,
     .timeout = 20)
{
	broken_client_list(false);
}

/* The client table of a mapped segment. */
static struct wlk_seg_client *client_table(uint8_t *seg)
{
	const struct wlk_seg_header *h = (const struct wlk_seg_header *)seg;

	return (struct wlk_seg_client *)(seg + h->off_clients);
}

/* Damage the list of clients (layout.h, AGENT LISTS) of @c's agent, which
 * has two: @cycle, its first client's link points at itself; else its
 * head is out of bounds. */
static void break_agent_list(uint8_t *seg, struct wlk_seg_client *c,
			     bool cycle)
{
	struct wlk_seg_agent *a = agent_at(seg, c->agent);

	cr_assert_neq(a->next, WLK_NIL, "the agent's list is empty");
	cr_assert_neq(client_table(seg)[a->next].next, WLK_NIL,
		      "the agent's second manager is not on its list");
	if (cycle)
		client_table(seg)[a->next].next = a->next;
	else
		a->next = ((const struct wlk_seg_header *)seg)->max_clients + 7;
}

/* Child: one manager holds "x" and "y", a second one "z"; say so on
 * @arg's pipe, wait to be killed. */
static int child_two_managers(void *arg)
{
	struct t_pipe *up = arg;
	struct wlk_manager *m = NULL, *m2 = NULL;
	struct wlk_lock *l = NULL;

	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m) == 0, 10);
	T_CHILD_CHECK(wlk_manager_open(t_origin, NULL, &m2) == 0, 11);
	for (int i = 0; i < 3; i++)
		T_CHILD_CHECK(wlk_acquire(i < 2 ? m : m2, held_names[i], 1,
					  NULL, &l) == 0,
			      12);
	T_CHILD_CHECK(t_put_byte(up->wr, 'g') == 0, 13);
	t_nap_ms(60000); /* until killed */
	return 14;
}

/*
 * A process that holds "x", "y" and "z" (@child) dies with one of its
 * lists damaged by @brk: a client's list of its request slots (CLIENT
 * LISTS), or its agent's list of its clients (AGENT LISTS). The validator
 * says so; the reaping walks the table instead, and every lock passes on
 * at once. A later repair would free them too, so the segment is read
 * with no lock right after the waiter's grant, before anyone takes it
 * again: with the agent list's cycle, the list gives the first client and
 * only the walk the second. The next locker repairs, and the segment is
 * valid again.
 */
static void broken_list_of_the_dead(int (*child)(void *arg),
				    void (*brk)(uint8_t *seg,
						struct wlk_seg_client *c,
						bool cycle),
				    bool cycle)
{
	struct wlk_manager *b = t_open();
	struct wlk_seg_client *c;
	struct t_holder h;
	struct t_pipe up;
	size_t size;
	uint8_t *seg;
	pid_t pid;

	t_pipe_open(&up);
	pid = t_fork(child, &up);
	cr_assert_eq(t_get_byte(up.rd), 'g', "the child did not hold");
	t_holder_start(&h, b, "z", 1, NULL);
	cr_assert(t_wait_pending(b, "z", 1, 1));
	seg = t_segment_map(&size);
	c = holders_client(seg);
	cr_assert_not_null(c);
	brk(seg, c, cycle);
	T_ASSERT_RC(wlk_manager_validate(b, NULL, NULL), WLK_ECORRUPT);

	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(t_wait(pid, T_WAIT_MS), 128 + SIGKILL);
	cr_assert_eq(t_holder_wait_granted(&h), 0, "waiter not woken");
	T_ASSERT_RC(h.acq_rc, 0);
	cr_assert_eq(held_slots(seg), 1, "%u held right after the reaping",
		     held_slots(seg));
	cr_assert_eq(t_held_n(b, NULL, 0), 1, "%zu held after the death",
		     t_held_n(b, NULL, 0));
	cr_assert_eq(t_entries_of(b, pid), 0, "the dead process still shows");
	cr_assert_eq(t_holder_release(&h), 0);
	t_holder_join(&h);
	t_assert_valid(b, NULL);
	t_pipe_close(&up);
	munmap(seg, size);
}

Test(damaged, a_dead_client_list_with_a_cycle_is_walked_around, T_FIX,
     .timeout = 20)
{
	broken_list_of_the_dead(child_holds_three, break_list, true);
}

Test(damaged, a_dead_client_list_head_out_of_bounds_is_walked_around,
     T_FIX, .timeout = 20)
{
	broken_list_of_the_dead(child_holds_three, break_list, false);
}

Test(damaged, a_dead_agent_list_with_a_cycle_is_walked_around, T_FIX,
     .timeout = 20)
{
	broken_list_of_the_dead(child_two_managers, break_agent_list, true);
}

Test(damaged, a_dead_agent_list_head_out_of_bounds_is_walked_around,
     T_FIX, .timeout = 20)
{
	broken_list_of_the_dead(child_two_managers, break_agent_list, false);
}
