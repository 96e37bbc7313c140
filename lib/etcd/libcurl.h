/* SPDX-License-Identifier: MIT */
/*
 * libcurl.h - the libcurl functions the etcd engine calls, reached through
 * wlk__curl once wlk__curl_load() has found them (libcurl.c says why it is
 * not linked). The files that talk HTTP include this, not <curl/curl.h>
 * alone, and call wlk__curl.easy_setopt() where they would call
 * curl_easy_setopt(): the types and constants are curl's own.
 */
#ifndef WLK_ETCD_LIBCURL_H
#define WLK_ETCD_LIBCURL_H

#include <curl/curl.h>

#include "seg.h"

/* Each member has the type of the curl function of the same name, with
 * "curl_" left off. */
struct wlk__curl {
	CURLcode (*global_init)(long flags);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *h, CURLoption opt, ...);
	CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
	CURLcode (*easy_perform)(CURL *h);
	void (*easy_reset)(CURL *h);
	void (*easy_cleanup)(CURL *h);
	CURLM *(*multi_init)(void);
	CURLMcode (*multi_add_handle)(CURLM *m, CURL *h);
	CURLMcode (*multi_remove_handle)(CURLM *m, CURL *h);
	CURLMcode (*multi_perform)(CURLM *m, int *running);
	CURLMcode (*multi_poll)(CURLM *m, struct curl_waitfd extra[],
				unsigned int n_extra, int timeout_ms,
				int *numfds);
	CURLMcode (*multi_wakeup)(CURLM *m);
	CURLMsg *(*multi_info_read)(CURLM *m, int *left);
	CURLMcode (*multi_cleanup)(CURLM *m);
	struct curl_slist *(*slist_append)(struct curl_slist *l,
					   const char *s);
	void (*slist_free_all)(struct curl_slist *l);
};

/* Filled by wlk__curl_load(); read only after it returned 0. */
extern struct wlk__curl wlk__curl WLK_INTERNAL;

int wlk__curl_load(void) WLK_INTERNAL;

#endif /* WLK_ETCD_LIBCURL_H */
