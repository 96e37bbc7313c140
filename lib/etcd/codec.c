/* SPDX-License-Identifier: MIT */
/*
 * codec.c - the etcd engine's encodings: base64 (the gateway's bytes),
 * escapes (names and identifiers inside keys, so that no byte of them
 * can reach outside its prefix), the keys of a bucket and of a name, and
 * the proto3-JSON forms of int64 (a string) that replies carry.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

/* The layout's version, first in every key: a later layout gets a new
 * one, so two layouts never read each other's keys. */
#define KEY_ROOT "wlk2/"
/* Longest decimal int64 with sign. */
#define INT64_DIGITS 20

static const char b64[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *wlk__etcd_b64(const void *p, size_t n)
{
	const unsigned char *s = p;
	char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16;

		if (i + 1 < n)
			v |= (uint32_t)s[i + 1] << 8;
		if (i + 2 < n)
			v |= s[i + 2];
		*o++ = b64[v >> 18 & 63];
		*o++ = b64[v >> 12 & 63];
		*o++ = b64[v >> 6 & 63];
		*o++ = b64[v & 63];
	}
	/* The last group's missing bytes are padding. */
	if (n % 3)
		o[-1] = '=';
	if (n % 3 == 1)
		o[-2] = '=';
	*o = '\0';
	return out;
}

static int b64_val(char c)
{
	const char *p = c ? strchr(b64, c) : NULL;

	return p ? (int)(p - b64) : -1;
}

/*
 * wlk__etcd_unb64() - decode @s (standard alphabet, padded) into a new
 * NUL-terminated buffer. Return: 0, -EPROTO (not base64), -ENOMEM.
 */
int wlk__etcd_unb64(const char *s, char **out, size_t *n)
{
	size_t len = strlen(s), k = 0;
	char *d;

	if (len % 4)
		return -EPROTO;
	d = malloc(len / 4 * 3 + 1);
	if (!d)
		return -ENOMEM;
	for (size_t i = 0; i < len; i += 4) {
		int v[4];
		bool last = i + 4 == len;

		for (int j = 0; j < 4; j++) {
			v[j] = b64_val(s[i + j]);
			if (v[j] < 0 && !(last && j >= 2 && s[i + j] == '=')) {
				free(d);
				return -EPROTO;
			}
		}
		if (v[2] < 0 && v[3] >= 0) {
			free(d);
			return -EPROTO;
		}
		d[k++] = (char)(v[0] << 2 | v[1] >> 4);
		if (v[2] >= 0)
			d[k++] = (char)((v[1] & 15) << 4 | v[2] >> 2);
		if (v[3] >= 0)
			d[k++] = (char)((v[2] & 3) << 6 | v[3]);
	}
	d[k] = '\0';
	*out = d;
	*n = k;
	return 0;
}

/*
 * ESCAPES. A name or an identifier goes into a key as its bytes, but for
 * those esc_safe() refuses (all but letters, digits and "-_~:"), each of
 * which is '%' and two upper-case hex digits: '/' and '.', which end the
 * parts of a key, and '%' among them, so that no name can reach outside
 * its prefix. The escape is canonical (a safe byte is never escaped, a digit
 * never lower-case), so one name has one key, and a key read back that
 * is not so is not ours. Keys stay readable (etcdctl get --prefix), and
 * shorter than hex: a call's JSON is most of its cost.
 */
static bool esc_safe(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '~' ||
	       c == ':';
}

static size_t esc_len(const void *p, size_t n)
{
	const unsigned char *s = p;
	size_t len = n;

	for (size_t i = 0; i < n; i++)
		len += esc_safe(s[i]) ? 0 : 2;
	return len;
}

/* @p escaped into @o (esc_len() bytes); their count. */
static size_t esc_into(char *o, const void *p, size_t n)
{
	static const char digits[] = "0123456789ABCDEF";
	const unsigned char *s = p;
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		if (esc_safe(s[i])) {
			o[k++] = (char)s[i];
			continue;
		}
		o[k++] = '%';
		o[k++] = digits[s[i] >> 4];
		o[k++] = digits[s[i] & 15];
	}
	return k;
}

static int hex_val(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * wlk__etcd_unesc() - the @n bytes of escaped text @s (ESCAPES above),
 * decoded into @out (if not NULL: room for @n bytes), their count into
 * *@len. Return: 0, or -EPROTO if @s is not the canonical escape of
 * anything.
 */
int wlk__etcd_unesc(const char *s, size_t n, char *out, size_t *len)
{
	size_t k = 0;

	for (size_t i = 0; i < n; k++) {
		unsigned char c = (unsigned char)s[i];
		int hi, lo;

		if (c != '%') {
			if (!esc_safe(c))
				return -EPROTO;
			if (out)
				out[k] = (char)c;
			i++;
			continue;
		}
		if (n - i < 3)
			return -EPROTO;
		hi = hex_val(s[i + 1]);
		lo = hex_val(s[i + 2]);
		if (hi < 0 || lo < 0 || esc_safe((unsigned char)(hi << 4 | lo)))
			return -EPROTO;
		if (out)
			out[k] = (char)(hi << 4 | lo);
		i += 3;
	}
	*len = k;
	return 0;
}

/*
 * wlk__etcd_bucket_prefix() - the prefix of every key of (origin, bucket,
 * partition): KEY_ROOT, the three escaped (ESCAPES) and separated by
 * '.', and '/'.
 * Return: 0, WLK_EINVAL/WLK_ENAMETOOLONG/WLK_ESECURITY as
 * wlk_manager_open() checks them, -ENOMEM.
 */
int wlk__etcd_bucket_prefix(const char *origin,
			    const struct wlk_manager_options *o, char **out,
			    size_t *len)
{
	const char *part[3] = { origin, o->bucket ? o->bucket : "default",
				o->partition ? o->partition : "" };
	const size_t max[3] = { WLK_ORIGIN_MAX, WLK_BUCKET_MAX,
				WLK_PARTITION_MAX };
	size_t n = strlen(KEY_ROOT), k;
	char *p;
	int rc;

	if (!*origin)
		return WLK_EINVAL;
	if (!strcmp(origin, "null"))
		return WLK_ESECURITY; /* an opaque origin, as the spec says */
	for (int i = 0; i < 3; i++) {
		rc = wlk__check_ident(part[i], max[i]);
		if (rc)
			return rc;
		n += esc_len(part[i], strlen(part[i])) + 1;
	}
	p = malloc(n + 1);
	if (!p)
		return -ENOMEM;
	k = strlen(KEY_ROOT);
	memcpy(p, KEY_ROOT, k);
	for (int i = 0; i < 3; i++) {
		k += esc_into(p + k, part[i], strlen(part[i]));
		p[k++] = i < 2 ? '.' : '/';
	}
	p[k] = '\0';
	*out = p;
	*len = k;
	return 0;
}

/* The prefix of @name's entries: the bucket's, the name escaped, '/'. */
char *wlk__etcd_name_prefix(const char *prefix, size_t prefix_len,
			    const char *name, size_t name_len, size_t *len)
{
	size_t n = prefix_len + esc_len(name, name_len) + 1;
	char *p = malloc(n + 1);

	if (!p)
		return NULL;
	memcpy(p, prefix, prefix_len);
	(void)esc_into(p + prefix_len, name, name_len);
	p[n - 1] = '/';
	p[n] = '\0';
	*len = n;
	return p;
}

/* The end of the range of keys that start with @key: its last byte plus
 * one (our prefixes end in '/', so there is no carry). */
char *wlk__etcd_range_end(const char *key, size_t len)
{
	char *e = malloc(len + 1);

	if (!e)
		return NULL;
	memcpy(e, key, len);
	e[len - 1] = (char)(e[len - 1] + 1);
	e[len] = '\0';
	return e;
}

/* A key as the gateway takes it: a JSON string of its base64. */
struct json_object *wlk__etcd_jkey(const char *key, size_t len)
{
	char *b = wlk__etcd_b64(key, len);
	struct json_object *j = b ? json_object_new_string(b) : NULL;

	free(b);
	return j;
}

/* An int64 as proto3-JSON has it: a decimal string. */
struct json_object *wlk__etcd_jstr_int(int64_t v)
{
	char s[INT64_DIGITS + 2];

	snprintf(s, sizeof(s), "%lld", (long long)v);
	return json_object_new_string(s);
}

/*
 * wlk__etcd_int64() - @o's int64 @field: a decimal string, or a JSON
 * number; absent means 0 (proto3 leaves zeros out). Return: 0, or -EPROTO
 * for anything else (a negative or malformed value).
 */
int wlk__etcd_int64(struct json_object *o, const char *field, int64_t *out)
{
	struct json_object *f;
	const char *s;
	char *end;
	long long v;

	if (!json_object_is_type(o, json_type_object))
		return -EPROTO;
	if (!json_object_object_get_ex(o, field, &f)) {
		*out = 0;
		return 0;
	}
	if (json_object_is_type(f, json_type_int)) {
		v = json_object_get_int64(f);
	} else if (json_object_is_type(f, json_type_string)) {
		s = json_object_get_string(f);
		errno = 0;
		v = strtoll(s, &end, 10);
		if (errno || end == s || *end)
			return -EPROTO;
	} else {
		return -EPROTO;
	}
	if (v < 0)
		return -EPROTO;
	*out = v;
	return 0;
}
