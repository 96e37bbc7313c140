/* SPDX-License-Identifier: MIT */
/*
 * proxy.c - the tests' stand-in for the cluster's first member (proxy.h):
 * a thread accepts, and a thread per connection pumps bytes both ways,
 * looking at what a request asks for (its request line, its put's lease).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proxy.h"

/* A proxied connection's reads. */
#define CHUNK 65536

struct pipe2 {
	struct proxy *p;
	int c, u; /* client, upstream */
};

static bool has(const char *b, size_t n, const char *s)
{
	return memmem(b, n, s, strlen(s)) != NULL;
}

/* The lease of a put in a request's bytes ("lease":"<decimal>"). */
static void note_lease(struct proxy *p, const char *b, size_t n)
{
	static const char tag[] = "\"lease\":\"";
	const char *at = memmem(b, n, tag, strlen(tag));
	long long v = 0;

	if (!at)
		return;
	for (at += strlen(tag); at < b + n && *at >= '0' && *at <= '9'; at++)
		v = v * 10 + (*at - '0');
	if (at < b + n && *at == '"' && v > 0)
		atomic_store(&p->lease, v);
}

/* The key of a put in a request's bytes ("request_put":{"key":"<b64>"):
 * counted when unlike the last put's. */
static void note_key(struct proxy *p, const char *b, size_t n)
{
	static const char tag[] = "\"request_put\":{\"key\":\"";
	const char *at = memmem(b, n, tag, strlen(tag)), *end;

	if (!at)
		return;
	at += strlen(tag);
	end = memchr(at, '"', (size_t)(b + n - at));
	if (!end || (size_t)(end - at) >= sizeof(p->put_key))
		return;
	pthread_mutex_lock(&p->put_mu);
	if (strlen(p->put_key) != (size_t)(end - at) ||
	    memcmp(p->put_key, at, (size_t)(end - at))) {
		memcpy(p->put_key, at, (size_t)(end - at));
		p->put_key[end - at] = '\0';
		atomic_fetch_add(&p->new_keys, 1);
	}
	pthread_mutex_unlock(&p->put_mu);
}

/* A pump's poll period: how soon a watch's pump sees cut_watch. */
#define CUT_POLL_MS 10

/* Hold this request back if @armed, saying so in @holding, until the
 * test lets it go (bounded). */
static void hold(struct proxy *p, atomic_int *armed, atomic_int *holding)
{
	int one = 1;

	if (!atomic_compare_exchange_strong(armed, &one, 0))
		return;
	atomic_store(holding, 1);
	for (int i = 0; i < T_WAIT_MS && !atomic_load(&p->let_go); i++)
		t_nap_ms(1);
}

/* Whether this watch stream's pump is the one to cut it. */
static bool cut(struct proxy *p, bool watch)
{
	int one = 1;

	return watch &&
	       atomic_compare_exchange_strong(&p->cut_watch, &one, 0);
}

/* Pump one connection until either side closes. */
static void *pump(void *arg)
{
	struct pipe2 *x = arg;
	struct proxy *p = x->p;
	char *buf = malloc(CHUNK);
	bool watch = false, dropping = false;

	while (buf) {
		struct pollfd f[2] = { { x->c, POLLIN, 0 },
				       { x->u, POLLIN, 0 } };
		ssize_t n;

		if (poll(f, 2, CUT_POLL_MS) < 0 || cut(p, watch))
			break;
		if (f[0].revents) {
			n = read(x->c, buf, CHUNK);
			if (n <= 0)
				break;
			if (has(buf, (size_t)n, "/v3/watch")) {
				watch = true;
				hold(p, &p->hold_watch_armed,
				     &p->holding_watch);
			}
			note_lease(p, buf, (size_t)n);
			note_key(p, buf, (size_t)n);
			if (has(buf, (size_t)n, "/v3/kv/txn")) {
				int one = 1;

				hold(p, &p->hold_armed, &p->holding);
				dropping |= atomic_compare_exchange_strong(
					&p->drop_txn_armed, &one, 0);
			}
			if (has(buf, (size_t)n, "/v3/kv/deleterange")) {
				int one = 1;

				dropping |= atomic_compare_exchange_strong(
					&p->drop_armed, &one, 0);
			}
			if (t_put(x->u, buf, (size_t)n))
				break;
		}
		if (f[1].revents) {
			n = read(x->u, buf, CHUNK);
			if (n <= 0)
				break;
			if (dropping) {
				/* The call applied; its reply is lost. */
				atomic_fetch_add(&p->dropped, 1);
				break;
			}
			if (watch && atomic_load(&p->mute_watch))
				continue;
			if (t_put(x->c, buf, (size_t)n))
				break;
		}
	}
	close(x->c);
	close(x->u);
	free(buf);
	free(x);
	return NULL;
}

static void *accept_main(void *arg)
{
	struct proxy *p = arg;
	int c;

	while ((c = accept(p->fd, NULL, NULL)) >= 0) {
		struct pipe2 *x = malloc(sizeof(*x));
		pthread_t t;

		if (!x) {
			close(c);
			continue;
		}
		x->p = p;
		x->c = c;
		x->u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (x->u < 0 || connect(x->u, (struct sockaddr *)&p->up,
					sizeof(p->up)) ||
		    pthread_create(&t, NULL, pump, x)) {
			close(c);
			if (x->u >= 0)
				close(x->u);
			free(x);
			continue;
		}
		pthread_detach(t);
	}
	return NULL;
}

void proxy_start(struct proxy *p)
{
	const char *b = getenv("WEBLOCKS_BACKEND");
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int port;

	cr_assert(b && sscanf(b, "etcd://127.0.0.1:%d", &port) == 1,
		  "not run by tests/etcd/check.sh");
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->put_mu, NULL);
	p->up = a;
	p->up.sin_port = htons((uint16_t)port);
	p->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(p->fd, 0);
	cr_assert_eq(bind(p->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(p->fd, 16), 0);
	cr_assert_eq(getsockname(p->fd, (struct sockaddr *)&a, &len), 0);
	snprintf(p->backend, sizeof(p->backend), "etcd://127.0.0.1:%d,%s",
		 ntohs(a.sin_port), b + strlen("etcd://"));
	cr_assert_eq(pthread_create(&p->t, NULL, accept_main, p), 0);
}

void proxy_start_alone(struct proxy *p)
{
	proxy_start(p);
	p->backend[strcspn(p->backend, ",")] = '\0';
}

void proxy_stop(struct proxy *p)
{
	shutdown(p->fd, SHUT_RDWR);
	close(p->fd);
	pthread_join(p->t, NULL);
}

struct wlk_manager *proxy_open(struct proxy *p, bool detect_deadlocks)
{
	struct wlk_manager_options o = { .size = sizeof(o),
					 .backend = p->backend,
					 .detect_deadlocks = detect_deadlocks };
	struct wlk_manager *m = NULL;

	T_ASSERT_RC(wlk_manager_open(t_origin, &o, &m), 0);
	return m;
}

/* @s escaped into @o (@cap bytes), as codec.c escapes an identifier or
 * a name: letters, digits and "-_~:" as they are, any other byte as '%'
 * and two upper-case hex digits. */
static size_t esc(char *o, size_t cap, const char *s)
{
	size_t k = 0;

	for (size_t i = 0; s[i]; i++) {
		unsigned char c = (unsigned char)s[i];

		cr_assert_lt(k + 4, cap, "key too long");
		if (isalnum(c) || strchr("-_~:", c))
			o[k++] = (char)c;
		else
			k += (size_t)snprintf(o + k, cap - k, "%%%02X", c);
	}
	o[k] = '\0';
	return k;
}

char *t_etcd_name_prefix(char *out, size_t cap, const char *name)
{
	size_t k = (size_t)snprintf(out, cap, "wlk2/");

	k += esc(out + k, cap - k, t_origin);
	k += (size_t)snprintf(out + k, cap - k, ".");
	k += esc(out + k, cap - k, "default");
	k += (size_t)snprintf(out + k, cap - k, "./");
	k += esc(out + k, cap - k, name);
	cr_assert_lt(k + 1, cap, "key too long");
	out[k++] = '/';
	out[k] = '\0';
	return out;
}

static void b64(char *o, size_t cap, const char *s)
{
	static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				"abcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t n = strlen(s), k = 0;

	cr_assert_lt((n + 2) / 3 * 4, cap, "too long for base64");
	for (size_t i = 0; i < n; i += 3) {
		unsigned int v = (unsigned char)s[i] << 16;

		if (i + 1 < n)
			v |= (unsigned char)s[i + 1] << 8;
		if (i + 2 < n)
			v |= (unsigned char)s[i + 2];
		o[k++] = a[v >> 18 & 63];
		o[k++] = a[v >> 12 & 63];
		o[k++] = i + 1 < n ? a[v >> 6 & 63] : '=';
		o[k++] = i + 2 < n ? a[v & 63] : '=';
	}
	o[k] = '\0';
}

void t_etcd_call(const char *path, const char *json)
{
	const char *b = getenv("WEBLOCKS_BACKEND");
	char cmd[3072];

	cr_assert(b && !strncmp(b, "etcd://", 7), "no cluster");
	b += strlen("etcd://");
	/* The JSON the tests make holds no quote: safe in the shell's ''. */
	snprintf(cmd, sizeof(cmd),
		 "curl -sf -m 5 -o /dev/null http://%.*s%s -d '%s'",
		 (int)strcspn(b, ","), b, path, json);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

void t_etcd_post(const char *path, const char *key, const char *field,
		 const char *arg)
{
	char k64[1024], a64[1024] = "", json[2560];

	b64(k64, sizeof(k64), key);
	if (field)
		b64(a64, sizeof(a64), arg);
	snprintf(json, sizeof(json), "{\"key\":\"%s\"%s%s%s%s%s}", k64,
		 field ? ",\"" : "", field ? field : "",
		 field ? "\":\"" : "", a64, field ? "\"" : "");
	t_etcd_call(path, json);
}
