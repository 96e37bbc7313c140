/* SPDX-License-Identifier: MIT */
/*
 * error.c - wlk_strerror() and wlk_error_name(), both from WLK_ERRNO_MAP.
 */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "api.h"

#define ENTRY_MSG(name, value, dom, msg) case WLK_##name: return msg;
#define ENTRY_NAME(name, value, dom, msg) case WLK_##name: return dom;

WLK_EXPORT const char *wlk_strerror(int err)
{
	const char *s = NULL;

	switch (err) {
	case 0:
		return "success";
	WLK_ERRNO_MAP(ENTRY_MSG)
	default:
		break;
	}
#ifdef HAVE_STRERRORDESC_NP
	if (err < 0 && err > INT_MIN) /* -INT_MIN overflows */
		s = strerrordesc_np(-err);
#endif
	return s ? s : "unknown error";
}

WLK_EXPORT const char *wlk_error_name(int err)
{
	const char *s = NULL;

	switch (err) {
	case 0:
		return "OK";
	WLK_ERRNO_MAP(ENTRY_NAME)
	default:
		break;
	}
#ifdef HAVE_STRERRORNAME_NP
	if (err < 0 && err > INT_MIN)
		s = strerrorname_np(-err);
#endif
	return s ? s : "UnknownError";
}

