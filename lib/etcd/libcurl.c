/* SPDX-License-Identifier: MIT */
/*
 * libcurl.c - libcurl, loaded when the first manager of an etcd bucket
 * opens, not when libweblocks loads.
 *
 * libcurl brings some thirty libraries with it (TLS, Kerberos, LDAP, SSH,
 * IDN, ...). Linked into libweblocks, they were loaded and relocated at
 * the start of every program that links it, and unmapped at its exit,
 * whether or not it ever named an etcd cluster: an empty program linked
 * with libweblocks took about 7 ms from exec to exit on the development
 * VM, against under 1 ms without libcurl (bench/startup.c measures it).
 * So the etcd engine dlopen()s libcurl, by its soname
 * (WLK_CURL_SONAME, configure's CURL_SONAME), the first time it is
 * needed, and calls it through a table (libcurl.h). RTLD_LOCAL keeps
 * curl's symbols, and its dependencies', out of the program's global
 * scope; the library is never unloaded.
 *
 * A process where it cannot be loaded (not installed, or an older one
 * without a function the engine calls) cannot use the engine: opening or
 * removing an etcd bucket fails with WLK_ENOTSUPPORTED, as in a build
 * without it. The library logs nothing; /proc/PID/maps shows whether a
 * process has loaded libcurl.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "libcurl.h"
#include "etcd.h"

struct wlk__curl wlk__curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_rc = WLK_ENOTSUPPORTED;

/* Where each function of the table is, and its name in libcurl. Written
 * as a list of member offsets, so that a function added to the table
 * without a line here is caught by the count check below. */
#define CURL_FN(member)                                                       \
	{offsetof(struct wlk__curl, member), "curl_" #member}

static const struct {
	size_t off;
	const char *sym;
} fns[] = {
	CURL_FN(global_init),	  CURL_FN(easy_init),
	CURL_FN(easy_setopt),	  CURL_FN(easy_getinfo),
	CURL_FN(easy_perform),	  CURL_FN(easy_reset),
	CURL_FN(easy_cleanup),	  CURL_FN(multi_init),
	CURL_FN(multi_add_handle), CURL_FN(multi_remove_handle),
	CURL_FN(multi_perform),	  CURL_FN(multi_poll),
	CURL_FN(multi_wakeup),	  CURL_FN(multi_info_read),
	CURL_FN(multi_cleanup),	  CURL_FN(slist_append),
	CURL_FN(slist_free_all),
};

_Static_assert(sizeof(fns) / sizeof(fns[0]) ==
		       sizeof(struct wlk__curl) / sizeof(void (*)(void)),
	       "a member of struct wlk__curl has no line in fns[]");

static void load(void)
{
	struct wlk__curl t;
	void *lib = dlopen(WLK_CURL_SONAME, RTLD_NOW | RTLD_LOCAL);

	if (!lib)
		return;
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		void *f = dlsym(lib, fns[i].sym);

		if (!f) /* too old a libcurl: left loaded, unused */
			return;
		memcpy((char *)&t + fns[i].off, &f, sizeof(f));
	}
	wlk__curl = t;
	load_rc = 0;
}

/*
 * wlk__curl_load() - load libcurl and fill wlk__curl, once per process.
 *
 * Context: any thread; may sleep (the dynamic loader); fork-safe (a child
 * inherits the loaded library and the table).
 * Return: 0, or WLK_ENOTSUPPORTED if libcurl cannot be loaded or lacks a
 * function of the table (then and ever after in this process).
 */
int wlk__curl_load(void)
{
	pthread_once(&load_once, load);
	return load_rc;
}
