/* SPDX-License-Identifier: MIT */
/*
 * hash.c - SipHash (Aumasson and Bernstein), a keyed 64-bit hash.
 *
 * Used twice: SipHash-1-3 keyed by the segment's random key for the name
 * table, on every request, so that names chosen by untrusted input cannot
 * flood one hash chain (the reduced rounds are the trade-off Rust and
 * Python made for their hash tables); and SipHash-2-4 keyed by fixed
 * constants to derive segment names from bucket keys, once per open.
 */
#include <endian.h>
#include <string.h>

#include "sys.h"

static inline uint64_t rotl(uint64_t x, unsigned int b)
{
	return (x << b) | (x >> (64 - b));
}

static inline void sip_round(uint64_t v[4])
{
	v[0] += v[1];
	v[1] = rotl(v[1], 13);
	v[1] ^= v[0];
	v[0] = rotl(v[0], 32);
	v[2] += v[3];
	v[3] = rotl(v[3], 16);
	v[3] ^= v[2];
	v[0] += v[3];
	v[3] = rotl(v[3], 21);
	v[3] ^= v[0];
	v[2] += v[1];
	v[1] = rotl(v[1], 17);
	v[1] ^= v[2];
	v[2] = rotl(v[2], 32);
}

/* Little-endian load, whatever the host order: the hash is a file format. */
static inline uint64_t load_le64(const uint8_t *p)
{
	uint64_t r;

	memcpy(&r, p, sizeof(r));
	return le64toh(r);
}

static inline void sip_compress(uint64_t v[4], uint64_t m, int rounds)
{
	v[3] ^= m;
	for (int i = 0; i < rounds; i++)
		sip_round(v);
	v[0] ^= m;
}

static inline void sip_begin(uint64_t v[4], const uint64_t key[2])
{
	v[0] = key[0] ^ 0x736f6d6570736575ull; /* "somepseu" */
	v[1] = key[1] ^ 0x646f72616e646f6dull; /* "dorandom" */
	v[2] = key[0] ^ 0x6c7967656e657261ull; /* "lygenera" */
	v[3] = key[1] ^ 0x7465646279746573ull; /* "tedbytes" */
}

/* The last block: the tail's bytes and the whole length's low byte. */
static inline uint64_t sip_end(uint64_t v[4], const uint8_t *tail,
			       size_t tail_len, size_t len, int c, int d)
{
	uint8_t last[8] = {0};

	memcpy(last, tail, tail_len);
	last[7] = (uint8_t)len;
	sip_compress(v, load_le64(last), c);
	v[2] ^= 0xff;
	for (int i = 0; i < d; i++)
		sip_round(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}

static inline uint64_t siphash(const uint64_t key[2], const void *data,
			       size_t len, int c, int d)
{
	const uint8_t *p = data;
	uint64_t v[4];
	size_t whole = len & ~(size_t)7;

	sip_begin(v, key);
	for (size_t i = 0; i < whole; i += 8)
		sip_compress(v, load_le64(p + i), c);
	return sip_end(v, p + whole, len - whole, len, c, d);
}

/*
 * SipHash-1-3 of text that comes in pieces (a chain of chunks: TEXT in
 * layout.h): the same value as wlk__siphash13() of the pieces joined.
 * Every piece but the last is a whole number of 8-byte words.
 */
void wlk__sip13_begin(struct wlk__sip *s, const uint64_t key[2])
{
	sip_begin(s->v, key);
}

void wlk__sip13_words(struct wlk__sip *s, const void *data, size_t len)
{
	const uint8_t *p = data;

	for (size_t i = 0; i + 8 <= len; i += 8)
		sip_compress(s->v, load_le64(p + i), 1);
}

uint64_t wlk__sip13_end(struct wlk__sip *s, const void *data, size_t len,
			size_t total)
{
	size_t whole = len & ~(size_t)7;

	wlk__sip13_words(s, data, whole);
	return sip_end(s->v, (const uint8_t *)data + whole, len - whole, total,
		       1, 3);
}

/* SipHash-2-4: segment names. */
uint64_t wlk__siphash(const uint64_t key[2], const void *data, size_t len)
{
	return siphash(key, data, len, 2, 4);
}

/* SipHash-1-3: lock names in the segment's hash table. */
uint64_t wlk__siphash13(const uint64_t key[2], const void *data, size_t len)
{
	return siphash(key, data, len, 1, 3);
}
