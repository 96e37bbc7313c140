/* SPDX-License-Identifier: MIT */
/*
 * abi.c - the library's version, as configure.ac defines it.
 */
#include "internal.h"

/* One version, configure.ac's; the header restates it. */
_Static_assert(WLK_VERSION_MAJOR == WLK_CONFIG_VERSION_MAJOR &&
		       WLK_VERSION_MINOR == WLK_CONFIG_VERSION_MINOR &&
		       WLK_VERSION_PATCH == WLK_CONFIG_VERSION_PATCH,
	       "include/weblocks.h's WLK_VERSION_* differ from configure.ac");

WLK_EXPORT unsigned int wlk_version(void)
{
	return (WLK_CONFIG_VERSION_MAJOR << 16) |
	       (WLK_CONFIG_VERSION_MINOR << 8) | WLK_CONFIG_VERSION_PATCH;
}

WLK_EXPORT const char *wlk_version_string(void)
{
	return PACKAGE_VERSION;
}
