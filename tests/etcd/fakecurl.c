/* SPDX-License-Identifier: MIT */
/*
 * fakecurl.c - a shared object that curl-load.sh puts first on the search
 * path as libcurl.so.4: it loads, but has none of curl's functions, as a
 * libcurl too old for the etcd engine would lack some.
 */
int wlk_fakecurl(void);

int wlk_fakecurl(void)
{
	return 0;
}
