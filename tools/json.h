/* SPDX-License-Identifier: MIT */
/* json.h - escaping of untrusted bytes, and a tiny streaming JSON writer. */
#ifndef SHM_INSPECT_JSON_H
#define SHM_INSPECT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * Bytes as ASCII: printable ASCII as is except \\ and \", C escapes for
 * \n \t \r \a \b \f \v, \xNN for every other byte (bytes >= 0x80 too).
 * The output never holds a control byte, whatever the input.
 */
void esc_c(FILE *f, const void *p, size_t n);
/* Bytes as lowercase hex digits, two per byte. */
void esc_hex(FILE *f, const void *p, size_t n);

/* Deepest nesting the writer supports (the documents use 6). */
#define JSON_MAX_DEPTH 16

/*
 * The writer. Members of objects take a key, array elements pass NULL.
 * The document is pretty-printed, two spaces per level; arrays opened with
 * json_array_flat() keep their (scalar) elements on one line.
 */
struct json {
	FILE *f;
	unsigned int depth;
	bool first[JSON_MAX_DEPTH];
	bool flat[JSON_MAX_DEPTH];
	char close[JSON_MAX_DEPTH];
};

void json_init(struct json *j, FILE *f);
void json_object(struct json *j, const char *key);
void json_array(struct json *j, const char *key);
void json_array_flat(struct json *j, const char *key);
/* Close the innermost object or array; after the outermost, a newline. */
void json_end(struct json *j);

/* A NUL-terminated string; NULL writes null. */
void json_str(struct json *j, const char *key, const char *s);
/*
 * @n bytes as a JSON string: valid UTF-8 is copied, '"', '\\' and control
 * characters (and DEL) are escaped, and each byte that is not part of a
 * valid UTF-8 sequence becomes \u00NN (NN = the byte). NULL writes null.
 */
void json_bytes(struct json *j, const char *key, const void *p, size_t n);
/* @n bytes as a string of hex digits; NULL writes null. */
void json_hex(struct json *j, const char *key, const void *p, size_t n);
void json_u64(struct json *j, const char *key, uint64_t v);
void json_i64(struct json *j, const char *key, int64_t v);
void json_bool(struct json *j, const char *key, bool v);
void json_null(struct json *j, const char *key);

#endif /* SHM_INSPECT_JSON_H */
