/* SPDX-License-Identifier: MIT */
/*
 * classify.c - which entries of a read are held: ordered by (name, class,
 * create_revision), each is clear or not on its name by the derived rule
 * (etcd.h), and held when clear and, for a scope's member, when every
 * member is (scope.c says why that is the early draft's rule).
 */
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

static int entry_cmp(const void *a, const void *b, void *arg)
{
	const struct wlk__etcd_entry *x = a, *y = b;
	size_t p = *(const size_t *)arg, n = x->name_len < y->name_len ?
						x->name_len : y->name_len;
	int c = memcmp(x->key + p, y->key + p, n);

	if (c)
		return c;
	if (x->name_len != y->name_len)
		return x->name_len < y->name_len ? -1 : 1;
	if (x->cls != y->cls)
		return x->cls - y->cls;
	if (x->create_rev != y->create_rev)
		return x->create_rev < y->create_rev ? -1 : 1;
	return strcmp(x->key, y->key);
}

/* wlk__etcd_same_name() - whether @a and @b are of one name (@p: the
 * bucket's prefix length). */
bool wlk__etcd_same_name(const struct wlk__etcd_entry *a,
			 const struct wlk__etcd_entry *b, size_t p)
{
	return a->name_len == b->name_len &&
	       !memcmp(a->key + p, b->key + p, a->name_len);
}

/* Whether @a and @b are members of one scope: the same tail. */
bool wlk__etcd_same_scope(const struct wlk__etcd_entry *a,
			  const struct wlk__etcd_entry *b)
{
	return a->scope_n && b->scope_n &&
	       !memcmp(a->key + a->key_len - KEY_TAIL,
		       b->key + b->key_len - KEY_TAIL, KEY_TAIL);
}

/*
 * After the names' pass of wlk__etcd_classify(): a scope's members are
 * held iff every one is clear and every one is in @k (a read of part of
 * the bucket may miss some: then none is held as far as @k can tell).
 * Quadratic in the scopes' members of @k, without allocating: one pass
 * per scope, from its first member.
 */
static void scope_pass(struct wlk__etcd_kvs *k)
{
	for (size_t i = 0; i < k->n; i++)
		k->e[i].mark = false;
	for (size_t i = 0; i < k->n; i++) {
		struct wlk__etcd_entry *e = &k->e[i];
		unsigned int seen = 0;
		bool all = true;

		if (!e->scope_n || e->mark)
			continue;
		for (size_t j = i; j < k->n; j++) {
			struct wlk__etcd_entry *f = &k->e[j];

			if (j != i && !wlk__etcd_same_scope(e, f))
				continue;
			f->mark = true;
			seen++;
			all &= f->clear && f->scope_n == e->scope_n &&
			       f->create_rev == e->create_rev;
		}
		all &= seen == e->scope_n;
		for (size_t j = i; j < k->n; j++)
			if (j == i || wlk__etcd_same_scope(e, &k->e[j]))
				k->e[j].held = all;
	}
	for (size_t i = 0; i < k->n; i++)
		k->e[i].mark = false;
}

/*
 * wlk__etcd_classify() - order @k's entries by (name, class, creation)
 * and mark each clear or not: exclusive and first of its name, or shared
 * with no exclusive entry before it; held: clear, and for a scope's
 * member, every member clear (scope.c).
 */
void wlk__etcd_classify(struct wlk__etcd_kvs *k)
{
	bool first = true, excl = false;

	if (k->n > 1) /* an empty range has no array to sort */
		qsort_r(k->e, k->n, sizeof(*k->e), entry_cmp,
			&k->prefix_len);
	for (size_t i = 0; i < k->n; i++) {
		struct wlk__etcd_entry *e = &k->e[i];

		if (i && !wlk__etcd_same_name(e, e - 1, k->prefix_len)) {
			first = true;
			excl = false;
		}
		e->clear = e->mode == WLK_EXCLUSIVE ? first : !excl;
		e->held = e->clear;
		excl |= e->mode == WLK_EXCLUSIVE;
		first = false;
	}
	scope_pass(k);
}
