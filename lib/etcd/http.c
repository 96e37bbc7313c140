/* SPDX-License-Identifier: MIT */
/*
 * http.c - the client side of etcd's JSON gateway: the backend string's
 * members, one unary POST with failover across them, and a small pool of
 * libcurl handles so that calls reuse their TCP connections.
 *
 * Every reply is untrusted: its size is bounded, its JSON parsed by json-c
 * into an object the callers read with checks, and a gateway error becomes
 * a library code. A call tries the members in turn, starting with the one
 * that answered last, until one answers or its time is up; the etcd
 * requests it carries are all safe to repeat (acquire.c says why).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdio.h>
#include <time.h>

#include "etcd.h"
#include "libcurl.h"

/* A reply larger than this is refused (-EMSGSIZE): a bucket's range is
 * the largest legitimate one. */
#define REPLY_MAX (64u << 20)
/* One attempt on one member: connecting, and the whole exchange. A member
 * that accepts but does not answer (stopped, cut off from its leader)
 * costs at most ATTEMPT_MS before the next member is tried. */
#define CONNECT_MS 500
#define ATTEMPT_MS 2000
/* Between rounds over all members, while the cluster elects a leader. */
#define ROUND_PAUSE_MS 100
#define NS_PER_MS UINT64_C(1000000)
/* gRPC status codes the gateway reports (google.golang.org/grpc/codes). */
#define GRPC_INVALID_ARGUMENT 3
#define GRPC_DEADLINE_EXCEEDED 4
#define GRPC_NOT_FOUND 5
#define GRPC_UNAVAILABLE 14

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void global_init(void)
{
	global_rc = wlk__curl.global_init(CURL_GLOBAL_DEFAULT);
}

/* A new handle, with curl initialised once per process; NULL if not. */
void *wlk__etcd_handle_new(void)
{
	pthread_once(&global_once, global_init);
	return global_rc == CURLE_OK ? wlk__curl.easy_init() : NULL;
}

/*
 * wlk__etcd_backend() - the backend string of @o, or of the environment
 * (WLK_ETCD_ENV) when @o names none; NULL for the shared-memory engine.
 */
const char *wlk__etcd_backend(const struct wlk_manager_options *o)
{
	const char *b = o->backend;

	if (!b || !*b)
		b = getenv(WLK_ETCD_ENV);
	return b && *b ? b : NULL;
}

/* host:port: letters, digits, '.', '-', ':', '[' and ']' only, so that no
 * member can add a path, user or query to the URL. */
static bool host_ok(const char *h, size_t n)
{
	if (n == 0 || n > WLK_ETCD_HOST_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = h[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '.' || c == '-' ||
		      c == ':' || c == '[' || c == ']'))
			return false;
	}
	return true;
}

static uint64_t env_u64(const char *name, uint64_t dflt, uint64_t max)
{
	const char *s = getenv(name);
	char *end;
	unsigned long long v;

	if (!s || !*s)
		return dflt;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v == 0 || v > max)
		return dflt;
	return v;
}

/*
 * wlk__etcd_conn_init() - parse @backend ("etcd://host:port,host:port")
 * into @c. Return: 0, WLK_EINVAL (not an etcd backend string, a member
 * not host:port, too many), or -ENOMEM.
 */
int wlk__etcd_conn_init(struct wlk__etcd_conn *c, const char *backend)
{
	size_t sl = strlen(WLK_ETCD_SCHEME);
	const char *p;
	int rc;

	memset(c, 0, sizeof(*c));
	if (strncasecmp(backend, WLK_ETCD_SCHEME, sl) != 0)
		return WLK_EINVAL;
	p = backend + sl;
	while (*p) {
		size_t n = strcspn(p, ",");

		if (!host_ok(p, n) || c->n_url == WLK_ETCD_MEMBERS_MAX) {
			wlk__etcd_conn_fini(c);
			return WLK_EINVAL;
		}
		c->url[c->n_url] = malloc(n + sizeof("http://"));
		if (!c->url[c->n_url]) {
			wlk__etcd_conn_fini(c);
			return -ENOMEM;
		}
		memcpy(c->url[c->n_url], "http://", 7);
		memcpy(c->url[c->n_url] + 7, p, n);
		c->url[c->n_url++][7 + n] = '\0';
		p += n;
		if (*p == ',' && *++p == '\0')
			break; /* a trailing comma */
	}
	if (!c->n_url)
		return WLK_EINVAL;
	c->timeout_ms = env_u64(WLK_ETCD_TIMEOUT_ENV,
				WLK_ETCD_TIMEOUT_DEFAULT_MS,
				WLK_ETCD_TIMEOUT_MAX_MS);
	c->fork_gen = wlk__fork_gen();
	rc = pthread_mutex_init(&c->mu, NULL);
	if (rc) {
		wlk__etcd_conn_fini(c);
		return wlk__errno(rc);
	}
	return 0;
}

void wlk__etcd_conn_fini(struct wlk__etcd_conn *c)
{
	/* A fork child's copies of the handles share the parent's sockets:
	 * they are left alone there. */
	if (c->fork_gen == wlk__fork_gen())
		for (unsigned int i = 0; i < c->n_pool; i++)
			wlk__curl.easy_cleanup(c->pool[i]);
	c->n_pool = 0;
	for (unsigned int i = 0; i < c->n_url; i++)
		free(c->url[i]);
	c->n_url = 0;
	if (c->fork_gen)
		pthread_mutex_destroy(&c->mu);
}

static CURL *handle_get(struct wlk__etcd_conn *c)
{
	CURL *h = NULL;

	pthread_mutex_lock(&c->mu);
	if (c->n_pool)
		h = c->pool[--c->n_pool];
	pthread_mutex_unlock(&c->mu);
	return h ? h : wlk__etcd_handle_new();
}

static void handle_put(struct wlk__etcd_conn *c, CURL *h)
{
	pthread_mutex_lock(&c->mu);
	if (c->n_pool < WLK_ETCD_POOL) {
		c->pool[c->n_pool++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&c->mu);
	if (h)
		wlk__curl.easy_cleanup(h);
}

struct buf {
	char *p;
	size_t n, cap;
};

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
	struct buf *b = arg;
	size_t n = size * nmemb;

	if (n > REPLY_MAX - b->n)
		return 0; /* too large: curl fails the transfer */
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;

		while (cap < b->n + n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p)
			return 0;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, data, n);
	b->n += n;
	b->p[b->n] = '\0';
	return n;
}

/* What one attempt came to. */
enum attempt { OK, NEXT, FAIL };

/* The gateway's error object: try another member, or a library code. */
static enum attempt gateway_error(struct json_object *j, int *rc)
{
	struct json_object *code, *msg;
	const char *s = "";

	if (json_object_object_get_ex(j, "message", &msg) &&
	    json_object_is_type(msg, json_type_string))
		s = json_object_get_string(msg);
	if (!json_object_object_get_ex(j, "code", &code) ||
	    !json_object_is_type(code, json_type_int)) {
		*rc = -EPROTO;
		return FAIL;
	}
	switch (json_object_get_int(code)) {
	case GRPC_UNAVAILABLE:
	case GRPC_DEADLINE_EXCEEDED:
		return NEXT; /* no leader, stopping, a timeout: elsewhere */
	case GRPC_NOT_FOUND:
		*rc = -ENOENT; /* a lease that expired */
		return FAIL;
	case GRPC_INVALID_ARGUMENT:
		/* "too many operations in txn request" (--max-txn-ops) */
		*rc = strstr(s, "too many") ? WLK_EFULL : -EPROTO;
		return FAIL;
	default:
		*rc = strstr(s, "no leader") ? 0 : -EPROTO;
		return *rc ? FAIL : NEXT;
	}
}

/* The header of every request: curl reads the list, never changes it. */
static struct curl_slist json_hdr = {
	.data = (char *)"Content-Type: application/json"
};

/*
 * wlk__etcd_post_setup() - set up handle @h (reset first) for one POST of
 * JSON @body to @url, the reply fed to @write(@arg): connected within
 * @connect_ms and done within @total_ms, plain HTTP only, no signals.
 * What every request to the gateway sets (this file's, deleter.c's).
 */
void wlk__etcd_post_setup(void *h, const char *url, const char *body,
			  wlk__etcd_write_fn write, void *arg,
			  long connect_ms, long total_ms)
{
	wlk__curl.easy_reset(h);
	wlk__curl.easy_setopt(h, CURLOPT_URL, url);
	wlk__curl.easy_setopt(h, CURLOPT_POSTFIELDS, body);
	wlk__curl.easy_setopt(h, CURLOPT_HTTPHEADER, &json_hdr);
	wlk__curl.easy_setopt(h, CURLOPT_WRITEFUNCTION, write);
	wlk__curl.easy_setopt(h, CURLOPT_WRITEDATA, arg);
	wlk__curl.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	wlk__curl.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
	wlk__curl.easy_setopt(h, CURLOPT_TIMEOUT_MS, total_ms);
	wlk__curl.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
}

static enum attempt attempt(CURL *h, const char *url, const char *body,
			    long ms, struct json_object **out, int *rc)
{
	struct buf b = { 0 };
	struct json_object *j;
	enum attempt a;
	long status = 0;
	CURLcode cc;

	wlk__etcd_post_setup(h, url, body, on_data, &b,
			     ms < CONNECT_MS ? ms : (long)CONNECT_MS,
			     ms < ATTEMPT_MS ? ms : (long)ATTEMPT_MS);
	wlk__curl.easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	cc = wlk__curl.easy_perform(h);
	if (cc != CURLE_OK) {
		free(b.p);
		if (cc == CURLE_WRITE_ERROR) {
			*rc = -EMSGSIZE;
			return FAIL;
		}
		return NEXT;
	}
	wlk__curl.easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	j = b.p ? json_tokener_parse(b.p) : NULL;
	free(b.p);
	if (!j || !json_object_is_type(j, json_type_object)) {
		json_object_put(j);
		/* A proxy's page or a member shutting down mid-reply. */
		if (status >= 500)
			return NEXT;
		*rc = -EPROTO;
		return FAIL;
	}
	if (json_object_object_get_ex(j, "error", NULL) ||
	    json_object_object_get_ex(j, "code", NULL) || status != 200) {
		a = gateway_error(j, rc);
		json_object_put(j);
		return a;
	}
	if (out)
		*out = j;
	else
		json_object_put(j);
	return OK;
}

/* Whether this thread's last wlk__etcd_call() may have reached etcd more
 * than once, or not at all: it failed, tried another member, or curl
 * connected anew (curl sends a request again on a fresh connection when
 * a kept one died before any reply). Who reuses keys must know
 * (acquire.c, SERIALS). */
WLK_TLS bool wlk__etcd_unsure;

/*
 * wlk__etcd_call() - POST @req (not consumed) to @path on a member of @c.
 * Return: 0 with *@out the reply object (the caller puts it; with @out
 * NULL the reply is only checked, then dropped), or
 * -EHOSTUNREACH (no member answered within c->timeout_ms), -ENOENT (a
 * lease not found), WLK_EFULL (a transaction over --max-txn-ops), -EPROTO
 * (a reply that is not etcd's), -EMSGSIZE (a reply over REPLY_MAX),
 * -ENOMEM.
 */
int wlk__etcd_call(struct wlk__etcd_conn *c, const char *path,
		   struct json_object *req, struct json_object **out)
{
	uint64_t deadline = wlk__now_ns() + c->timeout_ms * 1000000u;
	const char *body = json_object_to_json_string_ext(
		req, JSON_C_TO_STRING_PLAIN);
	char url[sizeof("http://") + WLK_ETCD_HOST_MAX + 64];
	unsigned int first = uatomic_read(&c->cur) % c->n_url;
	enum attempt a = NEXT;
	unsigned int tries = 0;
	long connects = 0;
	CURL *h;
	int rc = -EHOSTUNREACH;

	wlk__etcd_unsure = true;
	if (!body)
		return -ENOMEM;
	h = handle_get(c);
	if (!h)
		return -ENOMEM;
	for (unsigned int round = 0; a == NEXT; round++) {
		for (unsigned int i = 0; i < c->n_url && a == NEXT; i++) {
			unsigned int k = (first + i) % c->n_url;
			uint64_t now = wlk__now_ns();
			long ms;

			if (now >= deadline)
				goto out;
			ms = (long)((deadline - now) / 1000000u) + 1;
			snprintf(url, sizeof(url), "%s%s", c->url[k], path);
			a = attempt(h, url, body, ms, out, &rc);
			tries++;
			wlk__curl.easy_getinfo(h, CURLINFO_NUM_CONNECTS, &connects);
			if (a == OK) {
				uatomic_set(&c->cur, k);
				rc = 0;
			}
		}
		if (a == NEXT &&
		    wlk__now_ns() + ROUND_PAUSE_MS * NS_PER_MS < deadline) {
			struct timespec ts = { 0, ROUND_PAUSE_MS * 1000000L };

			nanosleep(&ts, NULL);
		}
	}
out:
	wlk__etcd_unsure = rc || tries > 1 || connects > 0;
	handle_put(c, h);
	return rc;
}
