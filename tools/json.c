/* SPDX-License-Identifier: MIT */
/*
 * json.c - escaping of untrusted bytes, and a tiny streaming JSON writer.
 *
 * Everything printed from a segment is untrusted: lock names are arbitrary
 * bytes, and a damaged segment can hold anything. Text output escapes every
 * byte that is not printable ASCII, so a name can never move the cursor,
 * change the terminal's state or fake a line of output.
 */
#include <inttypes.h>
#include <string.h>

#include "json.h"

void esc_c(FILE *f, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		static const char from[] = "\\\"\n\t\r\a\b\f\v";
		static const char to[] = "\\\"ntrabfv";
		const char *e = b[i] ? strchr(from, b[i]) : NULL;

		if (e)
			fprintf(f, "\\%c", to[e - from]);
		else if (b[i] >= 0x20 && b[i] < 0x7f)
			fputc(b[i], f);
		else
			fprintf(f, "\\x%02x", b[i]);
	}
}

void esc_hex(FILE *f, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		fprintf(f, "%02x", b[i]);
}

/* Length of the valid UTF-8 sequence at @b (RFC 3629), 0 if none. */
static size_t utf8_len(const unsigned char *b, size_t n)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len;

	if (b[0] < 0x80)
		return 1;
	if (b[0] >= 0xc2 && b[0] <= 0xdf)
		len = 2;
	else if (b[0] >= 0xe0 && b[0] <= 0xef)
		len = 3;
	else if (b[0] >= 0xf0 && b[0] <= 0xf4)
		len = 4;
	else
		return 0;
	/* No overlong forms, no surrogates, nothing above U+10FFFF. */
	if (b[0] == 0xe0)
		lo = 0xa0;
	else if (b[0] == 0xed)
		hi = 0x9f;
	else if (b[0] == 0xf0)
		lo = 0x90;
	else if (b[0] == 0xf4)
		hi = 0x8f;
	if (n < len || b[1] < lo || b[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (b[i] < 0x80 || b[i] > 0xbf)
			return 0;
	return len;
}

static void json_escape(FILE *f, const void *p, size_t n)
{
	const unsigned char *b = p;

	fputc('"', f);
	for (size_t i = 0; i < n;) {
		size_t len = utf8_len(b + i, n - i);

		if (len > 1) {
			fwrite(b + i, 1, len, f);
			i += len;
			continue;
		}
		if (b[i] == '"' || b[i] == '\\')
			fprintf(f, "\\%c", b[i]);
		else if (b[i] == '\n')
			fputs("\\n", f);
		else if (b[i] == '\t')
			fputs("\\t", f);
		else if (b[i] == '\r')
			fputs("\\r", f);
		else if (b[i] >= 0x20 && b[i] < 0x7f)
			fputc(b[i], f);
		else /* control, DEL, or a byte of no valid sequence */
			fprintf(f, "\\u%04x", b[i]);
		i++;
	}
	fputc('"', f);
}

void json_init(struct json *j, FILE *f)
{
	j->f = f;
	j->depth = 0;
	j->first[0] = true;
	j->flat[0] = false;
}

static void indent(struct json *j)
{
	fputc('\n', j->f);
	for (unsigned int i = 0; i < j->depth; i++)
		fputs("  ", j->f);
}

/* Separator, line break and key before a value. */
static void member(struct json *j, const char *key)
{
	if (j->depth == 0) {
		j->first[0] = false;
		return;
	}
	if (!j->first[j->depth])
		fputc(',', j->f);
	if (j->flat[j->depth]) {
		if (!j->first[j->depth])
			fputc(' ', j->f);
	} else {
		indent(j);
	}
	j->first[j->depth] = false;
	if (key) {
		json_escape(j->f, key, strlen(key));
		fputs(": ", j->f);
	}
}

static void open_(struct json *j, const char *key, char open, char close,
		  bool flat)
{
	member(j, key);
	fputc(open, j->f);
	if (j->depth + 1 >= JSON_MAX_DEPTH)
		return; /* never: the documents are shallow */
	j->depth++;
	j->first[j->depth] = true;
	j->flat[j->depth] = flat;
	j->close[j->depth] = close;
}

void json_object(struct json *j, const char *key)
{
	open_(j, key, '{', '}', false);
}

void json_array(struct json *j, const char *key)
{
	open_(j, key, '[', ']', false);
}

void json_array_flat(struct json *j, const char *key)
{
	open_(j, key, '[', ']', true);
}

void json_end(struct json *j)
{
	char close;
	bool empty, flat;

	if (j->depth == 0)
		return;
	close = j->close[j->depth];
	empty = j->first[j->depth];
	flat = j->flat[j->depth];
	j->depth--;
	if (!empty && !flat)
		indent(j);
	fputc(close, j->f);
	if (j->depth == 0)
		fputc('\n', j->f);
}

void json_str(struct json *j, const char *key, const char *s)
{
	if (!s)
		json_null(j, key);
	else
		json_bytes(j, key, s, strlen(s));
}

void json_bytes(struct json *j, const char *key, const void *p, size_t n)
{
	if (!p) {
		json_null(j, key);
		return;
	}
	member(j, key);
	json_escape(j->f, p, n);
}

void json_hex(struct json *j, const char *key, const void *p, size_t n)
{
	if (!p) {
		json_null(j, key);
		return;
	}
	member(j, key);
	fputc('"', j->f);
	esc_hex(j->f, p, n);
	fputc('"', j->f);
}

void json_u64(struct json *j, const char *key, uint64_t v)
{
	member(j, key);
	fprintf(j->f, "%" PRIu64, v);
}

void json_i64(struct json *j, const char *key, int64_t v)
{
	member(j, key);
	fprintf(j->f, "%" PRId64, v);
}

void json_bool(struct json *j, const char *key, bool v)
{
	member(j, key);
	fputs(v ? "true" : "false", j->f);
}

void json_null(struct json *j, const char *key)
{
	member(j, key);
	fputs("null", j->f);
}
