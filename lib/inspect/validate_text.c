/* SPDX-License-Identifier: MIT */
/*
 * validate_text.c - the validator's checks of the text chunks (layout.h,
 * TEXT): every used client's id and every long name's bytes a whole chain
 * of its own, the rest of the chunks on the free list, and the count of
 * those in use right. Read only, bounded, like the other checks.
 */
#include "inspect_internal.h"

/* Claim chain @first of @len bytes for owner @tag in v->chunk_owner;
 * report a chain that leaves the table, runs long, or meets another's. */
static void claim(struct wlk__vctx *v, const char *what, uint32_t slot,
		  uint32_t first, uint32_t len, uint32_t tag)
{
	struct wlk__bucket *b = v->b;
	uint32_t need = wlk__chunks_for(len), i = first;

	if (need > b->geo.max_chunks) {
		wlk__bad(v, "%s %u: text of %u bytes", what, slot, len);
		return;
	}
	for (uint32_t k = 0; k < need; k++) {
		if (i >= b->geo.max_chunks) {
			wlk__bad(v, "%s %u: text chunk index %u", what, slot,
				 i);
			return;
		}
		if (v->chunk_owner[i]) {
			wlk__bad(v, "%s %u: text chunk %u is another's too",
				 what, slot, i);
			return;
		}
		if (!wlk__chunk(b, i)->used)
			wlk__bad(v, "%s %u: text chunk %u marked free", what,
				 slot, i);
		v->chunk_owner[i] = tag;
		v->chunks_owned++;
		i = wlk__chunk(b, i)->next;
	}
	if (i != WLK_NIL)
		wlk__bad(v, "%s %u: text runs past its length", what, slot);
}

/* Tags in chunk_owner: names from 1, clients above them. */
#define NAME_TAG(i) ((i) + 1u)
#define CLIENT_TAG(b, i) ((b)->geo.max_names + 1u + (i))

void wlk__check_text(struct wlk__vctx *v)
{
	struct wlk__bucket *b = v->b;
	uint32_t n = 0, i;

	for (i = 0; i < b->geo.max_clients; i++) {
		const struct wlk_seg_client *c = wlk__client(b, i);

		if (WLK_WORD_STATE(c->word) == WLK_SLOT_USED &&
		    c->id_len <= WLK_CLIENT_ID_MAX)
			claim(v, "client", i, c->id, c->id_len,
			      CLIENT_TAG(b, i));
	}
	for (i = 0; i < b->geo.max_names; i++) {
		const struct wlk_seg_name *nm = wlk__name(b, i);

		if (WLK_WORD_STATE(nm->word) == WLK_SLOT_USED &&
		    nm->len <= b->geo.max_name_len &&
		    wlk__name_chunks(nm->len))
			claim(v, "name", i, nm->chunk, nm->len, NAME_TAG(i));
	}
	for (i = b->hdr->free_chunks; i != WLK_NIL;
	     i = wlk__chunk(b, i)->next, n++) {
		if (i >= b->geo.max_chunks || n >= b->geo.max_chunks) {
			wlk__bad(v, "chunk free list: bad index or cycle at %u",
				 i);
			return;
		}
		if (v->chunk_owner[i] || wlk__chunk(b, i)->used)
			wlk__bad(v, "chunk %u on the free list is in use", i);
	}
	if (v->chunks_owned != b->hdr->n_chunks)
		wlk__bad(v, "n_chunks %u, %u chunks in use", b->hdr->n_chunks,
			 v->chunks_owned);
	if (n + v->chunks_owned != b->geo.max_chunks)
		wlk__bad(v, "chunk free list has %u entries, %u chunks free",
			 n, b->geo.max_chunks - v->chunks_owned);
}
