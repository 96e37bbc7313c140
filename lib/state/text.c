/* SPDX-License-Identifier: MIT */
/*
 * text.c - the bytes of long names and of client ids, in chains of chunks
 * (layout.h, TEXT): taking and giving back chains under the mutex, and
 * reading them, with or without it.
 *
 * A chain is named by its first chunk and the length its owner records;
 * every walk here is bounded by that length and checks every index, so a
 * damaged or concurrently recycled chain yields an error or a mismatch,
 * never a read outside the table. Only the free list and the count are
 * derived; recover.c rebuilds them with wlk__text_mark() and
 * wlk__text_rebuild().
 */
#include <string.h>

#include "state.h"

/* A chunk's @used while some text has it, outside recovery. */
#define WLK_CHUNK_USED 1u

/* Chunks not in use now. */
uint32_t wlk__text_room(const struct wlk__bucket *b)
{
	uint32_t used = uatomic_read(&b->hdr->n_chunks);

	return used < b->geo.max_chunks ? b->geo.max_chunks - used : 0;
}

/*
 * wlk__text_put() - under the mutex, a chain holding the @len bytes of
 * @src (@len > 0), for an owner that is FREE until it records *@first.
 * Return: 0, WLK_EFULL with nothing taken (too few chunks free), or
 * WLK_ECORRUPT (the free list is damaged; nothing is taken either).
 */
int wlk__text_put(struct wlk__bucket *b, const void *src, uint32_t len,
		  uint32_t *first)
{
	struct wlk_seg_header *h = b->hdr;
	uint32_t need = wlk__chunks_for(len), head = h->free_chunks, i = head;
	const uint8_t *p = src;
	uint32_t k;

	if (need > wlk__text_room(b))
		return WLK_EFULL;
	/* Take the run before writing any of it: every chunk free, none
	 * twice (a circle in the list meets its own mark). */
	for (k = 0; k < need; k++) {
		struct wlk_seg_chunk *c;

		if (i >= b->geo.max_chunks || wlk__chunk(b, i)->used)
			break;
		c = wlk__chunk(b, i);
		c->used = WLK_CHUNK_USED;
		i = c->next;
	}
	if (k < need) {
		for (i = head; k-- > 0; i = wlk__chunk(b, i)->next)
			wlk__chunk(b, i)->used = 0;
		return wlk__corrupt(b);
	}
	h->free_chunks = i;
	i = head;
	for (k = 0; k < need; k++) {
		struct wlk_seg_chunk *c = wlk__chunk(b, i);
		uint32_t piece = len < WLK_CHUNK_TEXT ? len : WLK_CHUNK_TEXT;

		memcpy(c->text, p, piece);
		p += piece;
		len -= piece;
		i = c->next;
		if (k + 1 == need)
			c->next = WLK_NIL;
	}
	wlk__count(&h->n_chunks, (int32_t)need);
	*first = head;
	return 0;
}

/*
 * wlk__text_drop() - under the mutex, the owner of chain @first (@len
 * bytes) is FREE now: its chunks go back. A damaged chain gives back what
 * it can and flags the segment for repair, which finds the rest.
 */
void wlk__text_drop(struct wlk__bucket *b, uint32_t first, uint32_t len)
{
	struct wlk_seg_header *h = b->hdr;
	uint32_t need = wlk__chunks_for(len), i = first;

	if (need > b->geo.max_chunks) {
		wlk__corrupt(b);
		return;
	}
	for (uint32_t k = 0; k < need; k++) {
		struct wlk_seg_chunk *c;
		uint32_t next;

		if (i >= b->geo.max_chunks || !wlk__chunk(b, i)->used) {
			wlk__corrupt(b);
			return;
		}
		c = wlk__chunk(b, i);
		next = c->next;
		c->used = 0;
		c->next = h->free_chunks;
		h->free_chunks = i;
		wlk__count(&h->n_chunks, -1);
		i = next;
	}
}

/* What walk() found. */
enum walked {
	WALK_BROKEN = -1, /* the chain left the table */
	WALK_STOPPED = 0, /* @fn said stop */
	WALK_DONE = 1,
};

/*
 * Call @fn on each piece of chain @first, @len bytes, reading each link
 * once; @fn returns false to stop.
 */
static enum walked walk(const struct wlk__bucket *b, uint32_t first,
			uint32_t len,
			bool (*fn)(const uint8_t *text, uint32_t piece,
				   void *arg),
			void *arg)
{
	uint32_t i = first;

	if (wlk__chunks_for(len) > b->geo.max_chunks)
		return WALK_BROKEN;
	while (len) {
		uint32_t piece = len < WLK_CHUNK_TEXT ? len : WLK_CHUNK_TEXT;
		const struct wlk_seg_chunk *c;

		if (i >= b->geo.max_chunks)
			return WALK_BROKEN;
		c = wlk__chunk(b, i);
		if (!fn(c->text, piece, arg))
			return WALK_STOPPED;
		len -= piece;
		i = uatomic_read(&c->next);
	}
	return WALK_DONE;
}

struct cursor {
	const uint8_t *s;
	uint8_t *d;
	struct wlk__sip sip;
	uint32_t left, total;
	uint64_t hash;
};

static bool eq_piece(const uint8_t *text, uint32_t piece, void *arg)
{
	struct cursor *cur = arg;

	if (memcmp(text, cur->s, piece) != 0)
		return false;
	cur->s += piece;
	return true;
}

static bool copy_piece(const uint8_t *text, uint32_t piece, void *arg)
{
	struct cursor *cur = arg;

	memcpy(cur->d, text, piece);
	cur->d += piece;
	return true;
}

static bool hash_piece(const uint8_t *text, uint32_t piece, void *arg)
{
	struct cursor *cur = arg;

	cur->left -= piece;
	if (cur->left)
		wlk__sip13_words(&cur->sip, text, piece);
	else
		cur->hash = wlk__sip13_end(&cur->sip, text, piece, cur->total);
	return true;
}

/*
 * Whether chain @first holds the @len bytes of @s: 0 if it does, 1 if
 * not, WLK_ECORRUPT if it leaves the table before a difference. With or
 * without the mutex (a chain changing under the reader compares as
 * anything: the caller checks its owner's word after).
 */
int wlk__text_cmp(const struct wlk__bucket *b, uint32_t first, uint32_t len,
		  const void *s)
{
	struct cursor cur = {.s = s};

	switch (walk(b, first, len, eq_piece, &cur)) {
	case WALK_DONE:
		return 0;
	case WALK_STOPPED:
		return 1;
	default:
		return WLK_ECORRUPT;
	}
}

/* Copy chain @first's @len bytes to @dst. Return: 0 or WLK_ECORRUPT. */
int wlk__text_copy(const struct wlk__bucket *b, uint32_t first, uint32_t len,
		   void *dst)
{
	struct cursor cur = {.d = dst};

	return walk(b, first, len, copy_piece, &cur) == WALK_DONE
		       ? 0
		       : WLK_ECORRUPT;
}

/* The name hash (wlk__name_hash()) of chain @first's @len bytes (len >
 * 0). Return: 0 with *@out, or WLK_ECORRUPT. */
int wlk__text_hash(const struct wlk__bucket *b, uint32_t first, uint32_t len,
		   uint64_t *out)
{
	struct cursor cur = {.left = len, .total = len};

	wlk__sip13_begin(&cur.sip, b->seg_key);
	if (walk(b, first, len, hash_piece, &cur) != WALK_DONE)
		return WLK_ECORRUPT;
	*out = cur.hash;
	return 0;
}

/*
 * wlk__text_mark() - recovery: claim chain @first (@len bytes) for the
 * owner tagged @tag (nonzero) in its chunks' @used, all cleared before. A chain that
 * leaves the table, does not end where its length says, or meets a chunk
 * another owner claimed is broken: its own marks are cleared again.
 * Return: whether it is whole.
 */
bool wlk__text_mark(struct wlk__bucket *b, uint32_t first, uint32_t len,
		    uint32_t tag)
{
	uint32_t need = wlk__chunks_for(len), i = first, k;

	if (need > b->geo.max_chunks)
		return false;
	for (k = 0; k < need; k++) {
		struct wlk_seg_chunk *c;

		if (i >= b->geo.max_chunks)
			break;
		c = wlk__chunk(b, i);
		if (c->used)
			break;
		c->used = tag;
		i = c->next;
		if (k + 1 == need && i != WLK_NIL)
			break;
	}
	if (k == need)
		return true;
	for (i = first; k-- > 0 && i < b->geo.max_chunks;) {
		struct wlk_seg_chunk *c = wlk__chunk(b, i);

		if (c->used == tag)
			c->used = 0;
		i = c->next;
	}
	return false;
}

/* Recovery: clear every chunk's @used, before the owners tag theirs. */
void wlk__text_unmark(struct wlk__bucket *b)
{
	for (uint32_t i = 0; i < b->geo.max_chunks; i++)
		wlk__chunk(b, i)->used = 0;
}

/* Recovery, after the tags: every untagged chunk is free, every tagged one
 * used. */
void wlk__text_rebuild(struct wlk__bucket *b)
{
	struct wlk_seg_header *h = b->hdr;

	h->free_chunks = WLK_NIL;
	h->n_chunks = 0;
	for (uint32_t i = b->geo.max_chunks; i-- > 0;) {
		struct wlk_seg_chunk *c = wlk__chunk(b, i);

		if (c->used) {
			c->used = WLK_CHUNK_USED;
			h->n_chunks++;
			continue;
		}
		c->next = h->free_chunks;
		h->free_chunks = i;
	}
}

/* A name's bytes: inline, or a chain (layout.h, TEXT). @len is the length
 * the caller read (once); @n's chunk is read once here. As
 * wlk__text_cmp(): 0 (equal), 1, or WLK_ECORRUPT. */
int wlk__name_cmp(const struct wlk__bucket *b, const struct wlk_seg_name *n,
		  uint32_t len, const void *s)
{
	if (len <= WLK_NAME_INLINE)
		return memcmp(n->text, s, len) != 0;
	return wlk__text_cmp(b, uatomic_read(&n->chunk), len, s);
}

int wlk__name_copy(const struct wlk__bucket *b, const struct wlk_seg_name *n,
		   uint32_t len, void *dst)
{
	if (len <= WLK_NAME_INLINE) {
		memcpy(dst, n->text, len);
		return 0;
	}
	return wlk__text_copy(b, uatomic_read(&n->chunk), len, dst);
}

/* The hash @n's bytes should have. Return: 0 with *@out, or
 * WLK_ECORRUPT (a broken chain). */
int wlk__name_rehash(struct wlk__bucket *b, const struct wlk_seg_name *n,
		     uint32_t len, uint64_t *out)
{
	if (len <= WLK_NAME_INLINE) {
		*out = wlk__name_hash(b, n->text, len);
		return 0;
	}
	return wlk__text_hash(b, uatomic_read(&n->chunk), len, out);
}
