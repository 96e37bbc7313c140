/* SPDX-License-Identifier: MIT */
/*
 * abi.c - the library's version (configure.ac's), and the public limits
 * tied to the segment format's. The size rule of the option structs is
 * sys/options.c's.
 */
#include "api.h"

/* The public names of fixed limits are the segment format's numbers. */
_Static_assert(WLK_LIMIT_AGENTS == WLK_MAX_AGENTS &&
		       WLK_LIMIT_CLIENTS == WLK_MAX_CLIENTS,
	       "weblocks.h's WLK_LIMIT_* differ from layout.h");

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
