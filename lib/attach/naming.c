/* SPDX-License-Identifier: MIT */
/*
 * naming.c - from a bucket's identity to its segment's name.
 *
 * The name is a fixed-length keyed hash of the length-prefixed (origin,
 * bucket, partition) triple, never the origin text, which may hold '/' and
 * be long (layout.h has the format). A segment that had to be abandoned
 * (poisoned) is succeeded by generations named "<name>~<g>".
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "attach.h"


/* Fixed keys that turn a bucket key into its segment name: a file format. */
static const uint64_t name_key_hi[2] = {0x7765626c6f636b73ull,
					0x2d6e616d652d6869ull};
static const uint64_t name_key_lo[2] = {0x7765626c6f636b73ull,
					0x2d6e616d652d6c6full};

static void put_field(uint8_t **p, const char *s, size_t len)
{
	uint32_t l = (uint32_t)len;

	memcpy(*p, &l, sizeof(l));
	memcpy(*p + sizeof(l), s, len);
	*p += sizeof(l) + len;
}

/*
 * wlk__bucket_key() - validate the bucket's identity and derive its key and
 * segment name.
 */
int wlk__bucket_key(const char *origin, const struct wlk_manager_options *o,
		    uint8_t key[WLK_KEY_BYTES], char *shm_name)
{
	const char *bucket = o && o->bucket ? o->bucket : WLK_DEFAULT_BUCKET;
	const char *part = o && o->partition ? o->partition : "";
	uint8_t buf[3 * sizeof(uint32_t) + WLK_ORIGIN_MAX + WLK_BUCKET_MAX +
		    WLK_PARTITION_MAX];
	uint8_t *p = buf;
	uint64_t hi, lo;
	int rc;

	if (!origin || !*origin || !*bucket)
		return WLK_EINVAL;
	/* "null" is how an opaque origin serialises: it has no bucket. */
	if (!strcmp(origin, "null"))
		return WLK_ESECURITY;
	rc = wlk__check_ident(origin, WLK_ORIGIN_MAX);
	if (!rc)
		rc = wlk__check_ident(bucket, WLK_BUCKET_MAX);
	if (!rc)
		rc = wlk__check_ident(part, WLK_PARTITION_MAX);
	if (rc)
		return rc;
	put_field(&p, origin, strlen(origin));
	put_field(&p, bucket, strlen(bucket));
	put_field(&p, part, strlen(part));
	hi = wlk__siphash(name_key_hi, buf, (size_t)(p - buf));
	lo = wlk__siphash(name_key_lo, buf, (size_t)(p - buf));
	for (int i = 0; i < 8; i++) {
		key[i] = (uint8_t)(hi >> (56 - 8 * i));
		key[8 + i] = (uint8_t)(lo >> (56 - 8 * i));
	}
	snprintf(shm_name, WLK_SHM_NAME_MAX, "/wlk%u-%u-%016llx%016llx",
		 WLK_LAYOUT_VERSION, (unsigned int)geteuid(),
		 (unsigned long long)hi, (unsigned long long)lo);
	return 0;
}

/* Base names are far shorter than WLK_SHM_NAME_MAX (wlk__bucket_key()). */
void wlk__generation_name(char *dst, const char *base, unsigned int gen)
{
	size_t len = strnlen(base, WLK_SHM_NAME_MAX - 8);

	memcpy(dst, base, len);
	dst[len] = '\0';
	if (gen)
		snprintf(dst + len, 8, "~%u", gen % WLK_MAX_GENERATIONS);
}
