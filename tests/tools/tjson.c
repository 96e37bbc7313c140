/* SPDX-License-Identifier: MIT */
/*
 * tjson.c - a strict JSON parser (RFC 8259) for checking shm-inspect.
 *
 * Written for the tests rather than borrowed (python3 may be missing on a
 * build machine): a document the tool prints must parse here, so the
 * parser refuses everything the RFC does, and raw non-UTF-8 bytes too.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tjson.h"

#define MAX_DEPTH 64

struct parser {
	const unsigned char *start, *p, *end;
	char *err;
	size_t errsize;
	bool failed;
	int depth;
};

static struct tj *fail(struct parser *ps, const char *what)
{
	if (!ps->failed)
		snprintf(ps->err, ps->errsize, "%s at byte %zu", what,
			 (size_t)(ps->p - ps->start));
	ps->failed = true;
	return NULL;
}

/* Free @v and fail. */
static struct tj *drop(struct parser *ps, struct tj *v, const char *what)
{
	tj_free(v);
	return fail(ps, what);
}

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' ||
				   *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static struct tj *new_value(enum tj_type t)
{
	struct tj *v = calloc(1, sizeof(*v));

	if (v)
		v->type = t;
	return v;
}

/* Append @c to a growing buffer; false when out of memory. */
static bool put(char **buf, size_t *len, size_t *cap, unsigned char c)
{
	if (*len + 1 >= *cap) {
		size_t ncap = *cap ? *cap * 2 : 32;
		char *n = realloc(*buf, ncap);

		if (!n)
			return false;
		*buf = n;
		*cap = ncap;
	}
	(*buf)[(*len)++] = (char)c;
	(*buf)[*len] = '\0';
	return true;
}

/*
 * Length of the valid UTF-8 sequence at @b, 0 if none. Deliberately not
 * the tool's table of lead and second bytes (tools/json.c): decode the
 * code point, then refuse what RFC 3629 refuses, overlong forms,
 * surrogates and anything above U+10FFFF, so the two do not share a bug.
 */
static size_t utf8_len(const unsigned char *b, size_t n)
{
	static const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
	size_t len = b[0] < 0x80 ? 1 : (b[0] & 0xe0) == 0xc0 ? 2
				 : (b[0] & 0xf0) == 0xe0 ? 3
				 : (b[0] & 0xf8) == 0xf0 ? 4 : 0;
	uint32_t cp;

	if (!len || n < len)
		return 0;
	cp = len == 1 ? b[0] : b[0] & (0x7fu >> len);
	for (size_t i = 1; i < len; i++) {
		if ((b[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (b[i] & 0x3fu);
	}
	if (cp < min_cp[len] || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static int hex4(struct parser *ps, unsigned int *out)
{
	*out = 0;
	if (ps->end - ps->p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		unsigned char c = *ps->p++;

		*out <<= 4;
		if (c >= '0' && c <= '9')
			*out |= c - '0';
		else if (c >= 'a' && c <= 'f')
			*out |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			*out |= c - 'A' + 10;
		else
			return -1;
	}
	return 0;
}

static bool put_cp(char **b, size_t *len, size_t *cap, unsigned int cp)
{
	if (cp < 0x80)
		return put(b, len, cap, (unsigned char)cp);
	if (cp < 0x800)
		return put(b, len, cap, (unsigned char)(0xc0 | cp >> 6)) &&
		       put(b, len, cap, (unsigned char)(0x80 | (cp & 0x3f)));
	if (cp < 0x10000)
		return put(b, len, cap, (unsigned char)(0xe0 | cp >> 12)) &&
		       put(b, len, cap,
			   (unsigned char)(0x80 | ((cp >> 6) & 0x3f))) &&
		       put(b, len, cap, (unsigned char)(0x80 | (cp & 0x3f)));
	return put(b, len, cap, (unsigned char)(0xf0 | cp >> 18)) &&
	       put(b, len, cap, (unsigned char)(0x80 | ((cp >> 12) & 0x3f))) &&
	       put(b, len, cap, (unsigned char)(0x80 | ((cp >> 6) & 0x3f))) &&
	       put(b, len, cap, (unsigned char)(0x80 | (cp & 0x3f)));
}

/* \uXXXX (after the backslash and 'u'), with surrogate pairs. */
static bool unicode_escape(struct parser *ps, char **b, size_t *len,
			   size_t *cap)
{
	unsigned int cp, lo;

	if (hex4(ps, &cp))
		return false;
	if (cp >= 0xdc00 && cp <= 0xdfff)
		return false; /* lone low surrogate */
	if (cp >= 0xd800 && cp <= 0xdbff) {
		if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u')
			return false;
		ps->p += 2;
		if (hex4(ps, &lo) || lo < 0xdc00 || lo > 0xdfff)
			return false;
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
	}
	return put_cp(b, len, cap, cp);
}

static bool parse_string(struct parser *ps, char **out, size_t *outlen)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	size_t len = 0, cap = 0;
	char *b = NULL;

	if (!put(&b, &len, &cap, 0))
		return false;
	len = 0;
	ps->p++; /* the opening quote */
	while (ps->p < ps->end && *ps->p != '"') {
		unsigned char c = *ps->p;
		size_t n;
		const char *e;

		if (c < 0x20)
			goto bad;
		if (c == '\\') {
			if (ps->end - ps->p < 2)
				goto bad;
			c = ps->p[1];
			ps->p += 2;
			if (c == 'u') {
				if (!unicode_escape(ps, &b, &len, &cap))
					goto bad;
				continue;
			}
			e = c ? strchr(from, c) : NULL;
			if (!e || !put(&b, &len, &cap,
				       (unsigned char)to[e - from]))
				goto bad;
			continue;
		}
		n = utf8_len(ps->p, (size_t)(ps->end - ps->p));
		if (!n)
			goto bad;
		while (n--)
			if (!put(&b, &len, &cap, *ps->p++))
				goto bad;
	}
	if (ps->p >= ps->end)
		goto bad;
	ps->p++;
	*out = b;
	*outlen = len;
	return true;
bad:
	free(b);
	return false;
}

static struct tj *parse_value(struct parser *ps);

static bool append(struct tj *c, struct tj *v, char *key)
{
	struct tj **nv = realloc(c->v, (c->n + 1) * sizeof(*nv));
	char **nk;

	if (!nv)
		return false;
	c->v = nv;
	if (c->type == TJ_OBJ) {
		nk = realloc(c->k, (c->n + 1) * sizeof(*nk));
		if (!nk)
			return false;
		c->k = nk;
		c->k[c->n] = key;
	}
	c->v[c->n++] = v;
	return true;
}

static struct tj *parse_container(struct parser *ps, bool obj)
{
	struct tj *c = new_value(obj ? TJ_OBJ : TJ_ARR);
	unsigned char close = obj ? '}' : ']';

	if (!c || ++ps->depth > MAX_DEPTH)
		return drop(ps, c, "too deep or out of memory");
	ps->p++;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		ps->depth--;
		return c;
	}
	for (;;) {
		char *key = NULL;
		size_t klen;
		struct tj *v;

		skip_ws(ps);
		if (obj) {
			if (ps->p >= ps->end || *ps->p != '"' ||
			    !parse_string(ps, &key, &klen))
				return drop(ps, c, "bad key");
			if (strlen(key) != klen || tj_get(c, key)) {
				free(key);
				return drop(ps, c,
					    "duplicate key or NUL in key");
			}
			skip_ws(ps);
			if (ps->p >= ps->end || *ps->p++ != ':') {
				free(key);
				return drop(ps, c, "expected ':'");
			}
		}
		v = parse_value(ps);
		if (!v || !append(c, v, key)) {
			free(key);
			tj_free(v);
			return drop(ps, c, "bad value");
		}
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == close) {
			ps->p++;
			ps->depth--;
			return c;
		}
		return drop(ps, c, "expected ',' or a close");
	}
}

static size_t digits(struct parser *ps)
{
	size_t n = 0;

	while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
		ps->p++;
		n++;
	}
	return n;
}

static struct tj *parse_number(struct parser *ps)
{
	const unsigned char *int_start;
	struct tj *v = new_value(TJ_INT);
	bool real = false;
	size_t nd;

	if (!v)
		return fail(ps, "out of memory");
	if (*ps->p == '-') {
		v->neg = true;
		ps->p++;
	}
	int_start = ps->p;
	nd = digits(ps);
	if (!nd || (nd > 1 && *int_start == '0'))
		return drop(ps, v, "bad number");
	if (ps->p < ps->end && *ps->p == '.') {
		ps->p++;
		real = true;
		if (!digits(ps))
			return drop(ps, v, "bad fraction");
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
		ps->p++;
		real = true;
		if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
			ps->p++;
		if (!digits(ps))
			return drop(ps, v, "bad exponent");
	}
	for (const unsigned char *d = int_start; !real && d < int_start + nd;
	     d++) {
		if (v->u > (UINT64_MAX - (uint64_t)(*d - '0')) / 10)
			real = true; /* too big to keep exactly */
		else
			v->u = v->u * 10 + (uint64_t)(*d - '0');
	}
	if (real)
		v->type = TJ_REAL;
	return v;
}

static struct tj *literal(struct parser *ps, const char *word,
			  enum tj_type t, bool b)
{
	size_t n = strlen(word);
	struct tj *v;

	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
		return fail(ps, "bad literal");
	ps->p += n;
	v = new_value(t);
	if (v)
		v->b = b;
	return v ? v : fail(ps, "out of memory");
}

static struct tj *parse_value(struct parser *ps)
{
	struct tj *v;

	skip_ws(ps);
	if (ps->p >= ps->end)
		return fail(ps, "unexpected end");
	switch (*ps->p) {
	case '{':
		return parse_container(ps, true);
	case '[':
		return parse_container(ps, false);
	case '"':
		v = new_value(TJ_STR);
		if (!v || !parse_string(ps, &v->s, &v->len)) {
			free(v);
			return fail(ps, "bad string");
		}
		return v;
	case 't':
		return literal(ps, "true", TJ_BOOL, true);
	case 'f':
		return literal(ps, "false", TJ_BOOL, false);
	case 'n':
		return literal(ps, "null", TJ_NULL, false);
	default:
		if (*ps->p == '-' || (*ps->p >= '0' && *ps->p <= '9'))
			return parse_number(ps);
		return fail(ps, "unexpected byte");
	}
}

struct tj *tj_parse(const char *text, size_t len, char *err, size_t errsize)
{
	struct parser ps = {
		.start = (const unsigned char *)text,
		.p = (const unsigned char *)text,
		.end = (const unsigned char *)text + len,
		.err = err,
		.errsize = errsize,
	};
	struct tj *v;

	snprintf(err, errsize, "ok");
	v = parse_value(&ps);
	if (!v)
		return NULL;
	skip_ws(&ps);
	if (ps.p != ps.end) {
		return drop(&ps, v, "bytes after the document");
	}
	return v;
}

void tj_free(struct tj *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->n; i++) {
		tj_free(v->v[i]);
		if (v->k)
			free(v->k[i]);
	}
	free(v->v);
	free(v->k);
	free(v->s);
	free(v);
}

const struct tj *tj_get(const struct tj *o, const char *key)
{
	if (!o || o->type != TJ_OBJ)
		return NULL;
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->k[i], key))
			return o->v[i];
	return NULL;
}

const struct tj *tj_at(const struct tj *a, size_t i)
{
	if (!a || a->type != TJ_ARR || i >= a->n)
		return NULL;
	return a->v[i];
}

bool tj_str_is(const struct tj *v, const char *s, size_t len)
{
	if (len == SIZE_MAX)
		len = strlen(s);
	return v && v->type == TJ_STR && v->len == len &&
	       !memcmp(v->s, s, len);
}

uint64_t tj_u64(const struct tj *v)
{
	if (!v || v->type != TJ_INT || v->neg)
		return UINT64_MAX;
	return v->u;
}

const struct tj *tj_path(const struct tj *v, ...)
{
	const char *key;
	va_list ap;

	va_start(ap, v);
	while (v && (key = va_arg(ap, const char *)))
		v = tj_get(v, key);
	va_end(ap);
	return v;
}
