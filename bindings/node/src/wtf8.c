/* SPDX-License-Identifier: MIT */
/*
 * wtf8.c - JS strings to lock names and back.
 *
 * A lock name is a DOMString: any sequence of UTF-16 code units, lone
 * surrogates included. The library stores names as bytes and compares them
 * byte for byte, so the encoding must be one-to-one. UTF-8 is not: Node's
 * napi_get_value_string_utf8() turns every lone surrogate into U+FFFD, so
 * "\uD800", "\uDBFF" and "\uFFFD" would all be one lock. WTF-8 is UTF-8
 * extended to lone surrogates (each is encoded as the three bytes its code
 * point would take, ED A0 80..ED BF BF), while a valid pair is always the
 * four-byte sequence of its code point. Every string has exactly one
 * encoding and strings without lone surrogates are plain UTF-8, so names
 * are shared with C programs and other bindings that use UTF-8.
 */
#include <stdlib.h>

#include "addon.h"

static bool is_high(uint16_t u)
{
	return u >= 0xd800 && u <= 0xdbff;
}

static bool is_low(uint16_t u)
{
	return u >= 0xdc00 && u <= 0xdfff;
}

static size_t put(char *p, uint32_t c)
{
	if (c < 0x80) {
		p[0] = (char)c;
		return 1;
	}
	if (c < 0x800) {
		p[0] = (char)(0xc0 | c >> 6);
		p[1] = (char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		p[0] = (char)(0xe0 | c >> 12);
		p[1] = (char)(0x80 | (c >> 6 & 0x3f));
		p[2] = (char)(0x80 | (c & 0x3f));
		return 3;
	}
	p[0] = (char)(0xf0 | c >> 18);
	p[1] = (char)(0x80 | (c >> 12 & 0x3f));
	p[2] = (char)(0x80 | (c >> 6 & 0x3f));
	p[3] = (char)(0x80 | (c & 0x3f));
	return 4;
}

/* Names up to this many UTF-16 units are converted without malloc(). */
#define SHORT_NAME 128

/*
 * wn_to_wtf8() - Encode JS string @s into @buf (WN_WTF8_BUF bytes) if it
 * fits, else into malloc'd memory; *@out is the result, NUL-terminated
 * after *@len bytes (free() it if it is not @buf). Returns 0, or -1 with
 * an exception pending.
 */
int wn_to_wtf8(napi_env env, napi_value s, char *buf, char **out,
	       size_t *len)
{
	uint16_t ubuf[SHORT_NAME + 1], *u = ubuf;
	size_t n, i, o = 0;
	char *b = buf;

	/* One call for short names: it copies at most SHORT_NAME units. */
	if (napi_get_value_string_utf16(env, s, ubuf, SHORT_NAME + 1, &n) !=
	    napi_ok) {
		wn_throw_napi(env, napi_string_expected);
		return -1;
	}
	if (n == SHORT_NAME) {
		/* It may have been cut: ask for the whole length. */
		napi_get_value_string_utf16(env, s, NULL, 0, &n);
		if (n > SHORT_NAME) {
			u = malloc((n + 1) * sizeof(*u));
			if (u)
				napi_get_value_string_utf16(env, s, u, n + 1,
							    &n);
		}
	}
	/* A UTF-16 unit never takes more than 3 bytes (a pair takes 4). */
	if (u && n * 3 + 1 > WN_WTF8_BUF)
		b = malloc(n * 3 + 1);
	if (!u || !b) {
		if (u != ubuf)
			free(u);
		napi_throw_error(env, NULL, "out of memory");
		return -1;
	}
	for (i = 0; i < n; i++) {
		uint32_t c = u[i];

		if (is_high(u[i]) && i + 1 < n && is_low(u[i + 1])) {
			c = 0x10000 + ((c - 0xd800) << 10) + (u[i + 1] - 0xdc00);
			i++;
		}
		o += put(b + o, c);
	}
	b[o] = '\0';
	if (u != ubuf)
		free(u);
	*out = b;
	*len = o;
	return 0;
}

/*
 * Decode one sequence at @s (@n bytes left) into *@c; returns its length.
 * Surrogate code points are accepted (WTF-8); bytes that are not a
 * shortest-form sequence (a C program may use any bytes) decode to U+FFFD,
 * one byte at a time.
 */
static size_t get(const unsigned char *s, size_t n, uint32_t *c)
{
	size_t len, i;
	uint32_t v, min;

	if (s[0] < 0x80) {
		*c = s[0];
		return 1;
	}
	if ((s[0] & 0xe0) == 0xc0)
		len = 2, v = s[0] & 0x1f, min = 0x80;
	else if ((s[0] & 0xf0) == 0xe0)
		len = 3, v = s[0] & 0x0f, min = 0x800;
	else if ((s[0] & 0xf8) == 0xf0)
		len = 4, v = s[0] & 0x07, min = 0x10000;
	else
		goto bad;
	if (len > n)
		goto bad;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			goto bad;
		v = v << 6 | (s[i] & 0x3f);
	}
	if (v < min || v > 0x10ffff)
		goto bad;
	*c = v;
	return len;
bad:
	*c = 0xfffd;
	return 1;
}

/* wn_from_wtf8() - Decode @len bytes at @s into a JS string. */
napi_status wn_from_wtf8(napi_env env, const char *s, size_t len,
			 napi_value *out)
{
	const unsigned char *p = (const unsigned char *)s;
	uint16_t *u = malloc((len + 1) * sizeof(*u));
	size_t i = 0, o = 0;
	napi_status st;
	uint32_t c;

	if (!u)
		return napi_generic_failure;
	while (i < len) {
		i += get(p + i, len - i, &c);
		if (c >= 0x10000) {
			u[o++] = (uint16_t)(0xd800 + ((c - 0x10000) >> 10));
			u[o++] = (uint16_t)(0xdc00 + ((c - 0x10000) & 0x3ff));
		} else {
			u[o++] = (uint16_t)c;
		}
	}
	st = napi_create_string_utf16(env, u, o, out);
	free(u);
	return st;
}
