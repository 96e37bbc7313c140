/* SPDX-License-Identifier: MIT */
/*
 * token.c - where a new segment's fencing tokens start: above the clock
 * and above every token the bucket's segment files still hold (read here;
 * segment.c chooses the files).
 */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys.h"

/*
 * FENCING TOKENS ACROSS SEGMENTS (wlk_lock_token()). Within a segment a
 * name's tokens rise by one a grant, and a new entry starts at next_token,
 * above every entry evicted before it. A bucket's segment is created again
 * when nobody has it open (its content is stale), after it was removed,
 * and as the next generation after poisoning; tokens must still rise. So
 * next_token starts at the creation time in nanoseconds (CLOCK_REALTIME):
 * a segment's tokens then stay below the clock, since no name is granted
 * anywhere near once a nanosecond, unless the clock is set back. And it
 * starts above every token the bucket's segments still there hold: the
 * stale content replaced and every other generation. That covers a clock
 * set back too, unless the bucket was removed (or /dev/shm emptied).
 */

/*
 * wlk__token_mark_fd() - the largest fencing token segment file @fd
 * holds, or 0. It is read, not
 * mapped: a file we hold no lock of may shrink meanwhile. Its content is
 * untrusted, and may be damaged (a poisoned generation): every read is
 * bounded by the file's size, and damaged tokens are passed over.
 */
uint64_t wlk__token_mark_fd(int fd)
{
	const size_t tok = offsetof(struct wlk_seg_name, token);
	struct wlk_seg_header h;
	uint8_t buf[MARK_CHUNK];
	uint64_t mark = 0, off, stride, n, per;
	struct stat st;

	if (fstat(fd, &st) < 0 ||
	    pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    memcmp(h.magic, WLK_SEG_MAGIC, WLK_SEG_MAGIC_LEN) != 0 ||
	    h.layout_version != WLK_LAYOUT_VERSION || h.abi_sig != WLK_ABI_SIG)
		return 0;
	if (h.next_token < WLK_TOKEN_DAMAGED)
		mark = h.next_token;
	off = h.off_names;
	stride = h.name_stride;
	n = wlk__names_span(off, stride, h.max_names, (uint64_t)st.st_size);
	if (!n)
		return mark;
	per = stride <= sizeof(buf) ? sizeof(buf) / stride : 1;
	for (uint64_t i = 0; i < n; i += per) {
		uint64_t k = n - i < per ? n - i : per;
		size_t len = (size_t)((k - 1) * stride + tok + sizeof(mark));

		if (pread(fd, buf, len, (off_t)(off + i * stride)) !=
		    (ssize_t)len)
			break;
		for (uint64_t j = 0; j < k; j++) {
			uint64_t t;

			memcpy(&t, buf + j * stride + tok, sizeof(t));
			if (t < WLK_TOKEN_DAMAGED && t > mark)
				mark = t;
		}
	}
	return mark;
}
