/* SPDX-License-Identifier: MIT */
/* tjson.h - a strict JSON parser (RFC 8259) for checking shm-inspect. */
#ifndef WLK_TESTS_TJSON_H
#define WLK_TESTS_TJSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tj_type { TJ_NULL, TJ_BOOL, TJ_INT, TJ_REAL, TJ_STR, TJ_ARR, TJ_OBJ };

/*
 * A value. Strings are decoded to bytes (escapes resolved, \u as UTF-8);
 * integers that fit are kept exactly in @u (with @neg).
 */
struct tj {
	enum tj_type type;
	bool b;
	bool neg;
	uint64_t u;
	char *s;
	size_t len;
	struct tj **v;  /* array elements or object values */
	char **k;       /* object keys (NUL-terminated) */
	size_t n;
};

/*
 * Parse exactly one document (whitespace around it allowed). Rejects
 * anything RFC 8259 does not allow, raw bytes that are not UTF-8, lone
 * surrogates and duplicate keys. NULL on error, with a message in @err.
 */
struct tj *tj_parse(const char *text, size_t len, char *err, size_t errsize);
void tj_free(struct tj *v);

/* Member @key of an object, or NULL (also if @o is not an object). */
const struct tj *tj_get(const struct tj *o, const char *key);
/* Element @i of an array, or NULL. */
const struct tj *tj_at(const struct tj *a, size_t i);
/* Whether @v is the string @s (@len bytes; SIZE_MAX: strlen). */
bool tj_str_is(const struct tj *v, const char *s, size_t len);
/* A non-negative integer, or UINT64_MAX if @v is not one. */
uint64_t tj_u64(const struct tj *v);
/* Walk a path of keys: tj_path(root, "segment", "origin", NULL). */
const struct tj *tj_path(const struct tj *v, ...);

#endif /* WLK_TESTS_TJSON_H */
