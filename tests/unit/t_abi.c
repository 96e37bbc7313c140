/* SPDX-License-Identifier: MIT */
/*
 * t_abi.c - the public ABI's growth rules: the version against
 * configure's.
 */
#include <stdio.h>
#include <string.h>

#include "../common.h"

/* The version, as configure.ac defines it (config.h's PACKAGE_VERSION). */
Test(abi, version_is_configures)
{
	char header[32];
	unsigned int major, minor, patch;
	int end = 0;

	cr_assert_str_eq(wlk_version_string(), PACKAGE_VERSION,
			 "the library's version is not configure's");
	snprintf(header, sizeof(header), "%d.%d.%d", WLK_VERSION_MAJOR,
		 WLK_VERSION_MINOR, WLK_VERSION_PATCH);
	cr_assert_str_eq(header, PACKAGE_VERSION,
			 "weblocks.h's WLK_VERSION_* are not configure's");
	cr_assert_eq(sscanf(wlk_version_string(), "%u.%u.%u%n", &major,
			    &minor, &patch, &end),
		     3);
	cr_assert_eq(wlk_version_string()[end], '\0');
	cr_assert(major < 256 && minor < 256 && patch < 256);
	cr_assert_eq(wlk_version(), major << 16 | minor << 8 | patch,
		     "wlk_version() 0x%06x, wlk_version_string() %s",
		     wlk_version(), wlk_version_string());
	cr_assert_eq(wlk_version(),
		     (unsigned int)(WLK_VERSION_MAJOR << 16 |
				    WLK_VERSION_MINOR << 8 |
				    WLK_VERSION_PATCH));
	cr_assert_eq(wlk_version(), (unsigned int)WLK_VERSION);
}
