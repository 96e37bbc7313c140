/* SPDX-License-Identifier: MIT */
/*
 * cas2.h - a compare-and-swap of two adjacent 64-bit words at once, for a
 * name's fast word and its token (layout.h, TOKENS ON THE FAST PATH).
 *
 * It must be lock-free and address-free: other processes CAS the same
 * words through their own mappings. A library call (libatomic's 16-byte
 * CAS) may fall back to a lock table private to the process, which would
 * guard nothing here; so the instruction is used directly: CMPXCHG16B on
 * x86-64, where GCC does not inline it without -mcx16, and the compiler's
 * own 16-byte CAS where it promises a native one (aarch64: CASP or an
 * exclusive pair). Elsewhere the build stops, saying why.
 */
#ifndef WLK_CAS2_H
#define WLK_CAS2_H

#include <stdbool.h>
#include <stdint.h>

/* Two words, 16-byte aligned: [0] low, [1] high. */
struct wlk__pair {
	uint64_t lo;
	uint64_t hi;
};

/*
 * wlk__cas2() - if the 16 bytes at @p (16-byte aligned) are @*old, make
 * them @new. A full barrier either way, as uatomic_cmpxchg().
 * Return: whether it did; if not, @*old is what was there.
 */
static inline bool wlk__cas2(uint64_t *p, struct wlk__pair *old,
			     struct wlk__pair new)
{
#if defined(__x86_64__)
	bool ok;

	__asm__ __volatile__("lock cmpxchg16b %1"
			     : "=@ccz"(ok), "+m"(*(unsigned __int128 *)p),
			       "+a"(old->lo), "+d"(old->hi)
			     : "b"(new.lo), "c"(new.hi)
			     : "memory");
	return ok;
#elif defined(__GCC_HAVE_SYNC_COMPARE_AND_SWAP_16)
	unsigned __int128 o = ((unsigned __int128)old->hi << 64) | old->lo;
	unsigned __int128 n = ((unsigned __int128)new.hi << 64) | new.lo;
	unsigned __int128 seen = __sync_val_compare_and_swap(
		(unsigned __int128 *)p, o, n);

	if (seen == o)
		return true;
	old->lo = (uint64_t)seen;
	old->hi = (uint64_t)(seen >> 64);
	return false;
#else
#error "weblocks needs a lock-free 16-byte compare-and-swap (lib/sys/cas2.h)"
#endif
}

#endif /* WLK_CAS2_H */
