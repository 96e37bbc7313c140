/* SPDX-License-Identifier: MIT */
/*
 * scope.c - requests for a set of names (weblocks.h, SCOPES):
 * wlk_acquire_scope(), wlk_request_scope() and a scope lock's accessors;
 * the checks and the handle that wlk_request_scope_async() shares.
 *
 * The names are sorted and made unique here, once: the engine gets them
 * in byte order, which is also the order of the handle's names (the
 * draft's Lock.scope) and of the members it makes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"

/* Byte order, a prefix first: the order of memcmp() on the shorter, then
 * the length. */
static int name_cmp(const void *pa, const void *pb)
{
	const struct wlk_name *a = pa, *b = pb;
	size_t n = a->len < b->len ? a->len : b->len;
	int c = n ? memcmp(a->name, b->name, n) : 0;

	if (c)
		return c;
	return (a->len > b->len) - (a->len < b->len);
}

/*
 * The scope's distinct names in byte order, in @buf (WLK_SCOPE_MAX of
 * them) or, for more names given, a new array: *@out, *@k, with their
 * lengths resolved. Return: 0, WLK_EINVAL (a NULL name, none, more than
 * WLK_SCOPE_MAX distinct) or -ENOMEM.
 */
static int sorted(const struct wlk_name *names, size_t n,
		  struct wlk_name *buf, struct wlk_name **out, size_t *k)
{
	struct wlk_name *v = buf;
	size_t u = 0;

	if (!names || n == 0)
		return WLK_EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!names[i].name)
			return WLK_EINVAL;
	if (n > WLK_SCOPE_MAX)
		v = malloc(n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		v[i] = names[i];
		if (v[i].len == WLK_NUL_TERMINATED)
			v[i].len = strlen(v[i].name);
	}
	qsort(v, n, sizeof(*v), name_cmp);
	for (size_t i = 0; i < n; i++)
		if (u == 0 || name_cmp(&v[u - 1], &v[i]))
			v[u++] = v[i];
	if (u > WLK_SCOPE_MAX) {
		if (v != buf)
			free(v);
		return WLK_EINVAL;
	}
	*out = v;
	*k = u;
	return 0;
}

/* Spec 3.2.1 steps 5-9 for every name, in wlk_request()'s order: the
 * reserved prefix, the options, the signal, then the lengths. */
static int validate(struct wlk_manager *m, const struct wlk_name *v, size_t k,
		    const struct wlk_options *o)
{
	for (size_t i = 0; i < k; i++)
		if (v[i].len > 0 && v[i].name[0] == '-')
			return WLK_ENOTSUPPORTED;
	if (o->steal && (o->if_available || o->mode != WLK_EXCLUSIVE))
		return WLK_ENOTSUPPORTED;
	if ((o->signal || o->timeout_ns) && (o->steal || o->if_available))
		return WLK_ENOTSUPPORTED;
	if (o->signal && uatomic_read(&o->signal->reason))
		return uatomic_read(&o->signal->reason);
	for (size_t i = 0; i < k; i++)
		if (v[i].len > m->max_name_len)
			return WLK_ENAMETOOLONG;
	return 0;
}

/*
 * wlk__scope_begin() - wlk__acquire_begin() for a scope: the options read,
 * the checks in order, a manager reference, and a handle in *@out (a
 * single name's for a scope of one distinct name). On error nothing is
 * kept.
 */
int wlk__scope_begin(struct wlk_manager *m, const struct wlk_name *names,
		     size_t n, const struct wlk_options **o,
		     struct wlk_options *copy, struct wlk_lock **out)
{
	const struct wlk_options *opt = *o;
	struct wlk_name buf[WLK_SCOPE_MAX], *v = NULL;
	struct wlk_lock *l = NULL;
	size_t k = 0;
	int rc;

	if (wlk__options_read(&opt, copy))
		return WLK_EINVAL;
	if (!m || (opt->mode != WLK_EXCLUSIVE && opt->mode != WLK_SHARED))
		return WLK_EINVAL;
	rc = sorted(names, n, buf, &v, &k);
	if (rc)
		return rc;
	if (k == 1) { /* a scope of one is a single-name request */
		rc = wlk__acquire_begin(m, v[0].name, v[0].len, o, copy, out);
	} else if (!wlk__manager_enter(m)) {
		rc = WLK_ESTATE;
	} else {
		rc = validate(m, v, k, opt);
		l = rc ? NULL : wlk__lock_new_scope(m, v, k, opt->mode);
		if (!rc && !l)
			rc = -ENOMEM;
		if (rc)
			wlk__manager_leave(m);
	}
	if (v != buf)
		free(v);
	if (rc || k == 1)
		return rc;
	*o = opt;
	*out = l;
	return 0;
}

WLK_EXPORT int wlk_acquire_scope(struct wlk_manager *m,
				 const struct wlk_name *names, size_t n,
				 const struct wlk_options *o,
				 struct wlk_lock **out)
{
	struct wlk_options copy;
	struct wlk_lock *l;
	int rc;

	if (!out)
		return WLK_EINVAL;
	rc = wlk__scope_begin(m, names, n, &o, &copy, &l);
	if (!rc)
		rc = wlk__acquire_with(m, l, o, &l);
	if (!rc)
		*out = l; /* NULL for an if_available miss */
	return rc;
}

WLK_EXPORT int wlk_request_scope(struct wlk_manager *m,
				 const struct wlk_name *names, size_t n,
				 const struct wlk_options *o, wlk_callback cb,
				 void *arg)
{
	struct wlk_lock *l = NULL;
	int rc;

	if (!cb)
		return WLK_EINVAL;
	rc = wlk_acquire_scope(m, names, n, o, &l);
	return rc ? rc : wlk__request_run(l, cb, arg);
}

WLK_EXPORT size_t wlk_lock_scope_count(const struct wlk_lock *l)
{
	return l->scope ? l->n_scope : 1;
}

WLK_EXPORT const char *wlk_lock_scope_name(const struct wlk_lock *l,
					   size_t i, size_t *len)
{
	if (i >= wlk_lock_scope_count(l))
		return NULL;
	if (!l->scope)
		return wlk_lock_name(l, len);
	if (len)
		*len = l->scope[i].len;
	return l->scope[i].name;
}

WLK_EXPORT uint64_t wlk_lock_scope_token(const struct wlk_lock *l, size_t i)
{
	if (i >= wlk_lock_scope_count(l))
		return 0;
	return l->scope ? l->scope[i].token : l->token;
}
