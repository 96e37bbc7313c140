/* SPDX-License-Identifier: MIT */
/*
 * hash.c - SipHash-2-4 (Aumasson and Bernstein), a keyed 64-bit hash.
 *
 * Used twice: keyed by the segment's random key for the name table, so that
 * names chosen by untrusted input cannot flood one hash chain; and keyed by
 * fixed constants to derive segment names from bucket keys.
 */
#include <string.h>

#include "internal.h"

#define SIP_ROUNDS_C 2
#define SIP_ROUNDS_D 4

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
	uint64_t r = 0;

	for (int i = 7; i >= 0; i--)
		r = (r << 8) | p[i];
	return r;
}

static void sip_compress(uint64_t v[4], uint64_t m)
{
	v[3] ^= m;
	for (int i = 0; i < SIP_ROUNDS_C; i++)
		sip_round(v);
	v[0] ^= m;
}

uint64_t wlk__siphash(const uint64_t key[2], const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t v[4] = {
		key[0] ^ 0x736f6d6570736575ull, /* "somepseu" */
		key[1] ^ 0x646f72616e646f6dull, /* "dorandom" */
		key[0] ^ 0x6c7967656e657261ull, /* "lygenera" */
		key[1] ^ 0x7465646279746573ull, /* "tedbytes" */
	};
	size_t whole = len & ~(size_t)7;
	uint8_t tail[8] = {0};

	for (size_t i = 0; i < whole; i += 8)
		sip_compress(v, load_le64(p + i));
	memcpy(tail, p + whole, len - whole);
	tail[7] = (uint8_t)len;
	sip_compress(v, load_le64(tail));
	v[2] ^= 0xff;
	for (int i = 0; i < SIP_ROUNDS_D; i++)
		sip_round(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}
