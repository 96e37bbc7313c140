/* SPDX-License-Identifier: MIT */
/*
 * proxy.h - a proxy in a test that stands for the cluster's first member
 * (tests/etcd/proxy.c): it forwards bytes both ways, and on request
 * drops a delete's or a Txn's reply, mutes or cuts watch streams, or
 * holds a Txn or a new watch stream back; it notes the lease and the key
 * of the puts it passes on. And the tests' own calls to the cluster, past
 * any proxy.
 */
#ifndef WLK_TESTS_ETCD_PROXY_H
#define WLK_TESTS_ETCD_PROXY_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>

#include "../common.h"

struct proxy {
	int fd;                  /* listening */
	struct sockaddr_in up;   /* the member it stands for */
	atomic_int drop_armed;   /* drop the next delete's reply */
	atomic_int drop_txn_armed; /* drop the next Txn's reply */
	atomic_int dropped;      /* replies dropped */
	atomic_int mute_watch;   /* discard what watch streams carry */
	atomic_llong lease;      /* the last lease a put named, or 0 */
	pthread_mutex_t put_mu;  /* guards put_key */
	char put_key[512];       /* the last key a put named (base64) */
	atomic_int new_keys;     /* puts of a key unlike the put before */
	atomic_int hold_armed;   /* hold the next Txn back ... */
	atomic_int holding;      /* ... which it now does ... */
	atomic_int let_go;       /* ... until this is set */
	atomic_int hold_watch_armed; /* hold the next watch's start ... */
	atomic_int holding_watch;    /* ... which it now does, until let_go */
	atomic_int cut_watch;    /* close the next watch stream that looks */
	pthread_t t;
	char backend[512];       /* the proxy, then the real members */
};

/* A proxy for the first member of WEBLOCKS_BACKEND; p->backend names it
 * first, then the members. */
void proxy_start(struct proxy *p);
/* The same, p->backend naming the proxy alone: every call and stream
 * goes through it, whichever member the engine moves on to. */
void proxy_start_alone(struct proxy *p);
/* Stop accepting; the pumps end with their connections. */
void proxy_stop(struct proxy *p);
/* A manager through the proxy, with @detect_deadlocks; closed by the
 * test (before the proxy stops), not by the fixture. */
struct wlk_manager *proxy_open(struct proxy *p, bool detect_deadlocks);

/* The prefix of the keys of @name in t_origin's default bucket, as
 * lib/etcd/codec.c makes it (etcd.h, the mapping), into @out (@cap
 * bytes, NUL-terminated); @out. */
char *t_etcd_name_prefix(char *out, size_t cap, const char *name);
/* POST @json to @path on the cluster's first member (not a proxy), and
 * assert that the call succeeded; @json holds no single quote. */
void t_etcd_call(const char *path, const char *json);
/* POST {"key": @key, "<field>": @arg} to @path on the cluster's first
 * member (not a proxy), @key and @arg in base64 (@field NULL: the key
 * only), and assert that the call succeeded. */
void t_etcd_post(const char *path, const char *key, const char *field,
		 const char *arg);

#endif /* WLK_TESTS_ETCD_PROXY_H */
