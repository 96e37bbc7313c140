/* SPDX-License-Identifier: MIT */
/*
 * table.c - slots of the segment's tables: lookup, allocation, freeing.
 *
 * Everything here runs under the segment mutex. A slot is filled while its
 * word says FREE and published by one store of its word; the free lists,
 * hash chains and counters are derived state that recover.c can rebuild, so
 * a process killed between the two leaves nothing recovery cannot fix.
 * Indices read from the segment are bounded before use; a bad one marks the
 * segment for repair and fails the operation with WLK_ECORRUPT.
 */
#include <errno.h>
#include <string.h>

#include "state.h"

static uint32_t *chain_head(struct wlk__bucket *b, uint64_t hash)
{
	return &wlk__hash_heads(b)[hash & (b->geo.hash_buckets - 1)];
}

/*
 * wlk__name_find() - find the name entry for @name.
 * Return: 0 with *@out set, -ENOENT, or WLK_ECORRUPT.
 */
int wlk__name_find(struct wlk__bucket *b, const void *name, uint32_t len,
		   uint64_t hash, uint32_t *out)
{
	uint32_t i = *chain_head(b, hash);

	for (uint32_t steps = 0; i != WLK_NIL; steps++) {
		struct wlk_seg_name *n = wlk__name_at(b, i);
		int cmp;

		if (!n || steps >= b->geo.max_names)
			return wlk__corrupt(b);
		if (WLK_WORD_STATE(n->word) == WLK_SLOT_USED &&
		    n->hash == hash && n->len == len) {
			/* A broken chain may be this very name: making
			 * another entry for it would be two locks. */
			cmp = wlk__name_cmp(b, n, len, name);
			if (cmp < 0)
				return wlk__corrupt(b);
			if (!cmp) {
				*out = i;
				return 0;
			}
		}
		i = n->chain;
	}
	return -ENOENT;
}

/* Clear a name entry's derived fields. */
void wlk__name_reset(struct wlk_seg_name *n)
{
	n->chain = WLK_NIL;
	n->q_head = n->q_tail = WLK_NIL;
	n->h_head = n->h_tail = WLK_NIL;
	n->n_excl = n->n_shared = n->n_pending = 0;
	n->list_prev = n->list_next = WLK_NIL;
	n->list = WLK_LIST_NONE;
}

/*
 * wlk__name_tokens_carry() - name entry @n is about to be freed: later
 * grants of a new entry for its name must still be above every token it
 * gave (wlk_lock_token()), so the header's next token is raised to its
 * last one; a damaged one is not carried to every new name.
 */
void wlk__name_tokens_carry(struct wlk__bucket *b,
			    const struct wlk_seg_name *n)
{
	uint64_t t = uatomic_read(&n->token);

	if (t < WLK_TOKEN_DAMAGED && t > b->hdr->next_token)
		b->hdr->next_token = t;
}

/* A name list's head and tail in the header (layout.h, NAME LISTS). */
struct name_list {
	uint32_t *head;
	uint32_t *tail;
};

static struct name_list list_of(struct wlk__bucket *b, enum wlk_name_list l)
{
	struct wlk_seg_header *h = b->hdr;

	return l == WLK_LIST_IDLE ? (struct name_list){&h->idle_head,
						      &h->idle_tail}
				  : (struct name_list){&h->busy_head,
						      &h->busy_tail};
}

/*
 * wlk__name_list_put() - append name @ni, on no list, to list @l (the
 * idle list's tail is its most recently used end). Also recovery's, which
 * rebuilds the lists from empty.
 */
void wlk__name_list_put(struct wlk__bucket *b, uint32_t ni,
			enum wlk_name_list l)
{
	struct name_list nl = list_of(b, l);
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint32_t tail = *nl.tail;

	if (tail != WLK_NIL && !wlk__name_at(b, tail)) {
		wlk__corrupt(b);
		return;
	}
	n->list_prev = tail;
	n->list_next = WLK_NIL;
	n->list = l;
	if (tail == WLK_NIL)
		*nl.head = ni;
	else
		wlk__name(b, tail)->list_next = ni;
	*nl.tail = ni;
}

/* Take name @ni off the list it is on, if any. */
static int list_remove(struct wlk__bucket *b, uint32_t ni)
{
	struct wlk_seg_name *n = wlk__name(b, ni);
	uint32_t prev = n->list_prev, next = n->list_next;
	struct name_list nl;

	if (n->list == WLK_LIST_NONE)
		return 0;
	if ((n->list != WLK_LIST_IDLE && n->list != WLK_LIST_BUSY) ||
	    (prev != WLK_NIL && !wlk__name_at(b, prev)) ||
	    (next != WLK_NIL && !wlk__name_at(b, next)))
		return wlk__corrupt(b);
	nl = list_of(b, n->list);
	if (prev == WLK_NIL)
		*nl.head = next;
	else
		wlk__name(b, prev)->list_next = next;
	if (next == WLK_NIL)
		*nl.tail = prev;
	else
		wlk__name(b, next)->list_prev = prev;
	n->list_prev = n->list_next = WLK_NIL;
	n->list = WLK_LIST_NONE;
	return 0;
}

/* A request is about to refer to name @ni: it is busy, not idle. */
int wlk__name_touch(struct wlk__bucket *b, uint32_t ni)
{
	struct wlk_seg_name *n = wlk__name(b, ni);
	int rc;

	if (n->list == WLK_LIST_BUSY)
		return 0;
	rc = list_remove(b, ni);
	if (!rc)
		wlk__name_list_put(b, ni, WLK_LIST_BUSY);
	return rc;
}

/*
 * wlk__name_settle() - a name with neither held set nor queue goes back to
 * the fast path. (Two processes taking turns keep their FIFO order there
 * too: the one that finds the name held waits as its fast waiter.)
 */
void wlk__name_settle(struct wlk__bucket *b, uint32_t ni)
{
	if (wlk__name_idle(wlk__name(b, ni)))
		wlk__fast_deflate(b, ni);
}

/* The last request of a name went: keep the entry, idle. */
void wlk__name_put(struct wlk__bucket *b, uint32_t ni)
{
	struct wlk_seg_name *n = wlk__name(b, ni);

	/* Idempotent: a grant through the fast word (queue.c) puts it too. */
	if (!wlk__name_idle(n) || n->list == WLK_LIST_IDLE)
		return;
	if (list_remove(b, ni))
		return;
	wlk__name_list_put(b, ni, WLK_LIST_IDLE);
	wlk__name_settle(b, ni);
}

/*
 * wlk__name_evict() - free the least recently used idle name, for a new
 * name (or its text) to use; the caller inflated it (wlk__idle_inflate()),
 * so nobody holds it through its fast word. Return: 0, WLK_EFULL (no idle
 * name), or WLK_ECORRUPT.
 */
int wlk__name_evict(struct wlk__bucket *b)
{
	struct wlk_seg_header *h = b->hdr;
	uint32_t ni = h->idle_head, *link;
	struct wlk_seg_name *n;
	int rc;

	if (ni == WLK_NIL)
		return WLK_EFULL;
	if (!wlk__name_at(b, ni) || !wlk__name_idle(wlk__name(b, ni)) ||
	    wlk__name(b, ni)->list != WLK_LIST_IDLE)
		return wlk__corrupt(b);
	rc = list_remove(b, ni);
	if (rc)
		return rc;
	n = wlk__name(b, ni);
	wlk__name_tokens_carry(b, n);
	link = chain_head(b, n->hash);
	for (uint32_t steps = 0; *link != ni; steps++) {
		struct wlk_seg_name *c = wlk__name_at(b, *link);

		if (!c || steps >= b->geo.max_names)
			return wlk__corrupt(b);
		link = &c->chain;
	}
	*link = n->chain;
	WLK_FAILPOINT(name_evict_after_unlink);
	wlk__word_store(&n->word, WLK_WORD(WLK_WORD_GEN(n->word) + 1,
					   WLK_SLOT_FREE));
	n->chain = h->free_names;
	h->free_names = ni;
	wlk__count(&h->n_names, -1);
	wlk__count64(&h->name_bytes, -(int64_t)n->len);
	if (wlk__name_chunks(n->len))
		wlk__text_drop(b, n->chunk, n->len);
	return 0;
}

/*
 * wlk__name_new() - create the entry for a name known to be absent; with
 * no free entry, the least recently used idle name goes, which the caller
 * inflated first (wlk__idle_inflate()). A long name's chunks must be free
 * (wlk__text_room(); the caller evicts for them).
 * Return: 0, or WLK_EFULL with nothing changed, or WLK_ECORRUPT.
 */
int wlk__name_new(struct wlk__bucket *b, const void *name, uint32_t len,
		  uint64_t hash, uint32_t *out)
{
	struct wlk_seg_header *h = b->hdr;
	uint32_t i, *head;
	struct wlk_seg_name *n;

	uint32_t chunk = WLK_NIL;
	int rc;

	if (wlk__name_chunks(len) > wlk__text_room(b))
		return WLK_EFULL;
	if (h->free_names == WLK_NIL) {
		rc = wlk__name_evict(b);
		if (rc)
			return rc;
	}
	i = h->free_names;
	n = wlk__name_at(b, i);
	if (!n || WLK_WORD_STATE(n->word) != WLK_SLOT_FREE)
		return wlk__corrupt(b);
	if (len > WLK_NAME_INLINE) {
		rc = wlk__text_put(b, name, len, &chunk);
		if (rc)
			return rc;
	} else {
		memcpy(n->text, name, len);
	}
	h->free_names = n->chain;
	n->chunk = chunk;
	n->len = len;
	n->hash = hash;
	n->token = h->next_token;
	n->seq = 0;
	wlk__fast_reset(n);
	wlk__name_reset(n);
	wlk__word_store(&n->word, WLK_WORD(WLK_WORD_GEN(n->word),
					   WLK_SLOT_USED));
	head = chain_head(b, hash);
	n->chain = *head;
	*head = i;
	wlk__name_list_put(b, i, WLK_LIST_BUSY);
	wlk__count(&h->n_names, 1);
	wlk__count64(&h->name_bytes, len);
	*out = i;
	return 0;
}

/* Pop a free request slot; WLK_NIL when the table is full (or corrupt). */
uint32_t wlk__req_alloc(struct wlk__bucket *b)
{
	struct wlk_seg_header *h = b->hdr;
	uint32_t i = h->free_requests;
	struct wlk_seg_request *r;

	if (i == WLK_NIL)
		return WLK_NIL;
	r = wlk__req_at(b, i);
	if (!r || WLK_WORD_STATE(r->word) != WLK_SLOT_FREE) {
		wlk__corrupt(b);
		return WLK_NIL;
	}
	h->free_requests = r->next;
	wlk__count(&h->n_requests, 1);
	return i;
}

/*
 * wlk__req_init() - the one initialiser of a request slot's fields, before
 * its word publishes it: for client @client (gen @client_gen), in @mode
 * with @flags, on no name, in no queue, without token or stamp. A slot
 * taken from the free list joins the client's list (CLIENT LISTS); the
 * client's own slot, taken again, is on it already.
 */
void wlk__req_init(struct wlk__bucket *b, uint32_t ri, uint32_t client,
		   uint32_t client_gen, enum wlk_mode mode, uint8_t flags)
{
	struct wlk_seg_request *r = wlk__req(b, ri);

	r->mode = (uint8_t)mode;
	r->flags = flags;
	r->sleeping = 0;
	r->client = client;
	r->client_gen = client_gen;
	r->name = WLK_NIL;
	r->name_gen = 0;
	r->seq = 0;
	r->scope = WLK_NIL;
	r->scope_n = 0;
	r->token = 0;
	r->stamp_ns = 0;
	r->prev = r->next = WLK_NIL;
	if (WLK_WORD_STATE(r->word) == WLK_SLOT_FREE)
		wlk__client_push(b, ri);
}

/* A request slot whose word is FREE now leaves its client's list and goes
 * on the free list. */
static void req_push_free(struct wlk__bucket *b, uint32_t ri)
{
	struct wlk_seg_header *h = b->hdr;
	struct wlk_seg_request *r = wlk__req(b, ri);

	wlk__client_unlink(b, ri);
	r->prev = WLK_NIL;
	r->next = h->free_requests;
	h->free_requests = ri;
	wlk__count(&h->n_requests, -1);
}

void wlk__req_free(struct wlk__bucket *b, uint32_t ri)
{
	struct wlk_seg_request *r = wlk__req(b, ri);

	wlk__word_store(&r->word, WLK_WORD(WLK_WORD_GEN(r->word) + 1,
					   WLK_SLOT_FREE));
	req_push_free(b, ri);
}

/*
 * wlk__req_keep() - like wlk__req_free(), but the slot stays its client's,
 * in reserve for the fast path (RESERVED, gen + 1): no free list, no count.
 */
void wlk__req_keep(struct wlk__bucket *b, uint32_t ri)
{
	struct wlk_seg_request *r = wlk__req(b, ri);

	r->prev = r->next = WLK_NIL;
	r->sleeping = 0;
	r->flags = 0;
	wlk__word_store(&r->word, WLK_WORD(WLK_WORD_GEN(r->word) + 1,
					   WLK_SLOT_RESERVED));
}

/*
 * wlk__req_reclaim() - take back a slot a client keeps in reserve, unless
 * its fast path claimed it first (both CAS the word). Return: whether it
 * was freed.
 */
bool wlk__req_reclaim(struct wlk__bucket *b, uint32_t ri, uint32_t word)
{
	struct wlk_seg_request *r = wlk__req(b, ri);

	if (uatomic_cmpxchg(&r->word, word,
			    WLK_WORD(WLK_WORD_GEN(word) + 1, WLK_SLOT_FREE)) !=
	    word)
		return false;
	req_push_free(b, ri);
	return true;
}

int wlk__client_alloc(struct wlk__bucket *b, const char *id, size_t id_len,
		      uint64_t now, uint32_t *out)
{
	struct wlk_seg_header *h = b->hdr;
	uint32_t i = h->free_clients, first;
	struct wlk_seg_client *c;
	int rc;

	if (i == WLK_NIL)
		return WLK_EFULL;
	c = wlk__client_at(b, i);
	if (!c || WLK_WORD_STATE(c->word) != WLK_SLOT_FREE)
		return wlk__corrupt(b);
	rc = wlk__text_put(b, id, (uint32_t)id_len, &first);
	if (rc)
		return rc;
	h->free_clients = c->next;
	c->agent = b->agent;
	c->agent_gen = b->agent_gen;
	c->pid = wlk__agent(b, b->agent)->pid;
	c->id_len = (uint32_t)id_len;
	c->id = first;
	c->opened_ns = now;
	c->doorbell = 0;
	c->bell_key = 0;
	c->bell_fd = 0;
	c->bell_dgrams = 0;
	c->reqs = WLK_NIL;
	wlk__agent_push(b, i);
	wlk__word_store(&c->word, WLK_WORD(WLK_WORD_GEN(c->word),
					   WLK_SLOT_USED));
	wlk__count(&h->n_clients, 1);
	*out = i;
	return 0;
}

void wlk__client_free(struct wlk__bucket *b, uint32_t ci)
{
	struct wlk_seg_header *h = b->hdr;
	struct wlk_seg_client *c = wlk__client(b, ci);

	wlk__agent_unlink(b, ci);
	wlk__word_store(&c->word, WLK_WORD(WLK_WORD_GEN(c->word) + 1,
					   WLK_SLOT_FREE));
	c->reqs = WLK_NIL; /* its slots left, or were left to their owner */
	c->next = h->free_clients;
	h->free_clients = ci;
	wlk__count(&h->n_clients, -1);
	wlk__text_drop(b, c->id, c->id_len);
}

/*
 * wlk__agent_alloc() - take a free agent slot and lock its lifeline; called
 * by the anchor thread, which then owns the lifeline. A free slot whose
 * lifeline is still held (a reaper between its two steps), or damaged, is
 * passed over.
 */
int wlk__agent_alloc(struct wlk__bucket *b, uint32_t pid, uint64_t now,
		     uint32_t *out)
{
	struct wlk_seg_header *h = b->hdr;
	uint32_t *link = &h->free_agents;

	for (uint32_t steps = 0; *link != WLK_NIL; steps++) {
		uint32_t i = *link;
		struct wlk_seg_agent *a;
		int rc;

		a = wlk__agent_at(b, i);
		if (!a || steps >= b->geo.max_agents)
			return wlk__corrupt(b);
		if (WLK_WORD_STATE(a->word) != WLK_SLOT_FREE)
			return wlk__corrupt(b);
		rc = wlk__mutex_trylock(&a->u.lifeline);
		if (rc == EOWNERDEAD)
			rc = pthread_mutex_consistent(&a->u.lifeline);
		if (rc) {
			link = &a->next;
			continue;
		}
		*link = a->next;
		a->pid = pid;
		a->start_ns = now;
		a->next = WLK_NIL;
		wlk__word_store(&a->word, WLK_WORD(WLK_WORD_GEN(a->word),
						   WLK_SLOT_USED));
		wlk__count(&h->n_agents, 1);
		WLK_FAILPOINT(attach_after_alloc);
		*out = i;
		return 0;
	}
	return WLK_EFULL;
}

/* Free our agent slot if it is still ours (gen unchanged). */
void wlk__agent_free(struct wlk__bucket *b, uint32_t ai, uint32_t gen)
{
	struct wlk_seg_header *h = b->hdr;
	struct wlk_seg_agent *a = wlk__agent(b, ai);

	if (a->word != WLK_WORD(gen, WLK_SLOT_USED))
		return;
	if (a->next != WLK_NIL)
		wlk__corrupt(b); /* clients left: recovery frees them */
	wlk__word_store(&a->word, WLK_WORD(gen + 1, WLK_SLOT_FREE));
	a->next = h->free_agents;
	h->free_agents = ai;
	wlk__count(&h->n_agents, -1);
}

/*
 * wlk__name_peek() - find @name without the mutex. The hash chains may
 * change under us, so the walk is bounded, every index checked, and a
 * match is only believed if the entry's word did not change while its
 * bytes were compared (bytes are written only while the entry is FREE).
 * The caller's CAS on the fast word, which carries the gen, settles any
 * remaining race. Return: whether found (*@ni, *@ngen).
 */
bool wlk__name_peek(struct wlk__bucket *b, const char *name, uint32_t len,
		    uint64_t hash, uint32_t *ni, uint32_t *ngen)
{
	uint32_t i = uatomic_read(chain_head(b, hash));

	for (uint32_t steps = 0; i != WLK_NIL; steps++) {
		struct wlk_seg_name *n;
		uint32_t w;

		n = wlk__name_at(b, i);
		if (!n || steps >= b->geo.max_names)
			return false;
		w = wlk__word_load(&n->word);
		if (WLK_WORD_STATE(w) == WLK_SLOT_USED &&
		    uatomic_read(&n->hash) == hash &&
		    uatomic_read(&n->len) == len &&
		    !wlk__name_cmp(b, n, len, name)) {
			cmm_smp_rmb();
			if (uatomic_read(&n->word) != w)
				return false;
			*ni = i;
			*ngen = WLK_WORD_GEN(w);
			return true;
		}
		i = uatomic_read(&n->chain);
	}
	return false;
}
