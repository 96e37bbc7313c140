/* SPDX-License-Identifier: MIT */
/*
 * options.c - what lets the option structs grow: the size rule of the
 * structs the caller allocates (weblocks.h, GROWING STRUCTS).
 *
 * A caller built against an older header passes a smaller struct, one
 * built against a newer header a larger one; each says how large in its
 * first member. The library reads what both know and takes the rest as
 * zero, the default of every field. A newer caller's fields this library
 * does not know must be zero: a request it cannot honour fails
 * (WLK_EINVAL) instead of being quietly ignored (the rule of openat2(2)
 * and clone3(2)).
 */
#include <string.h>

#include "sys.h"

/*
 * No option struct will grow this large: a larger size is garbage (a
 * struct not initialised at all), not a newer header, and its tail must
 * not be read (openat2(2) stops at a page as well).
 */
#define STRUCT_SIZE_MAX 4096

_Static_assert(WLK__OPTIONS_FIRST_SIZE <= sizeof(struct wlk_options) &&
		       WLK__MANAGER_OPTIONS_FIRST_SIZE <=
			       sizeof(struct wlk_manager_options) &&
		       sizeof(struct wlk_manager_options) <= STRUCT_SIZE_MAX,
	       "an option struct lost fields of its first layout");
_Static_assert(offsetof(struct wlk_options, size) == 0 &&
		       offsetof(struct wlk_manager_options, size) == 0,
	       "the size member must come first");

const struct wlk_options wlk__options_default = WLK_OPTIONS_INIT;
const struct wlk_manager_options wlk__manager_options_default =
	WLK_MANAGER_OPTIONS_INIT;

/*
 * wlk__struct_read() - copy a caller's struct of @size bytes (0: @first)
 * into @copy, @known bytes of this library's layout, zero-filled.
 * Return: 0, or WLK_EINVAL (a size below the first layout or beyond
 * STRUCT_SIZE_MAX, or a nonzero byte past @known), @copy untouched.
 */
int wlk__struct_read(void *copy, size_t known, size_t first, const void *src,
		     size_t size)
{
	const unsigned char *p = src;

	if (size == 0)
		size = first;
	if (size < first || size > STRUCT_SIZE_MAX)
		return WLK_EINVAL;
	for (size_t i = known; i < size; i++)
		if (p[i])
			return WLK_EINVAL;
	memset(copy, 0, known);
	memcpy(copy, src, size < known ? size : known);
	return 0;
}
