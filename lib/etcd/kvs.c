/* SPDX-License-Identifier: MIT */
/*
 * kvs.c - the entries of a bucket or a name as a range reply gives them:
 * parsed with every field checked (a reply is untrusted input: a key
 * outside the prefix, a malformed value or revision is -EPROTO, never a
 * crash; classify.c orders and classifies them). And the JSON pieces
 * that requests are built of: a range op, a compare.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "etcd.h"

/* The tail of an entry's key after its name's '/' (etcd.h). */
#define ID_DIGITS LEASE_DIGITS
#define TAIL_LEN KEY_TAIL
/* Longest decimal pid in a value, and scope count (WLK_SCOPE_MAX). */
#define PID_DIGITS 10
#define SCOPE_DIGITS 2

static bool hex_digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* The key's name and tail; 0 or -EPROTO. */
static int parse_key(struct wlk__etcd_entry *e, const char *prefix,
		     size_t prefix_len)
{
	const char *k = e->key, *slash, *t;
	size_t plain;

	if (e->key_len <= prefix_len || memcmp(k, prefix, prefix_len) != 0)
		return -EPROTO;
	slash = memchr(k + prefix_len, '/', e->key_len - prefix_len);
	if (!slash)
		return -EPROTO;
	e->name_len = (size_t)(slash - k) - prefix_len;
	t = slash + 1;
	if (wlk__etcd_unesc(k + prefix_len, e->name_len, NULL, &plain) ||
	    (size_t)(k + e->key_len - t) != TAIL_LEN)
		return -EPROTO;
	if ((t[0] != '0' && t[0] != '1') || (t[1] != 'x' && t[1] != 's') ||
	    t[2] != '-' || t[3 + ID_DIGITS] != '-' ||
	    !hex_digits(t + 3, ID_DIGITS) ||
	    !hex_digits(t + 4 + ID_DIGITS, ID_DIGITS) ||
	    (t[0] == '0' && t[1] != 'x'))
		return -EPROTO;
	e->cls = t[0] - '0';
	e->mode = t[1] == 'x' ? WLK_EXCLUSIVE : WLK_SHARED;
	return 0;
}

/* "<m>[<n>] <pid> <clientId>", agreeing with the key's mode; n, from 2 to
 * WLK_SCOPE_MAX, is a scope's count of members (scope.c). 0 or -EPROTO. */
static int parse_value(struct wlk__etcd_entry *e, size_t len)
{
	const char *v = e->value;
	size_t i = 1, p0;
	unsigned int n = 0;
	long pid = 0;

	if (len < 4 || v[0] != (e->mode == WLK_EXCLUSIVE ? 'x' : 's'))
		return -EPROTO;
	for (; i < len && i <= SCOPE_DIGITS && v[i] >= '0' && v[i] <= '9';
	     i++)
		n = n * 10 + (unsigned int)(v[i] - '0');
	if ((i > 1 && (n < 2 || n > WLK_SCOPE_MAX)) || i >= len ||
	    v[i] != ' ')
		return -EPROTO;
	e->scope_n = n;
	p0 = ++i;
	for (; i < len && v[i] >= '0' && v[i] <= '9'; i++) {
		if (i - p0 >= PID_DIGITS)
			return -EPROTO;
		pid = pid * 10 + (v[i] - '0');
	}
	if (i == p0 || i >= len || v[i] != ' ' || pid > INT32_MAX)
		return -EPROTO;
	e->pid = (pid_t)pid;
	e->client_id = v + i + 1;
	/* A clientId as wlk_manager_open() takes them, and no NUL inside. */
	if (strlen(e->client_id) != len - i - 1 ||
	    wlk__check_ident(e->client_id, WLK_CLIENT_ID_MAX))
		return -EPROTO;
	return 0;
}

static int parse_entry(struct json_object *kv, const char *prefix,
		       size_t prefix_len, struct wlk__etcd_entry *e)
{
	struct json_object *key, *val;
	size_t vlen;
	int rc;

	if (!json_object_is_type(kv, json_type_object) ||
	    !json_object_object_get_ex(kv, "key", &key) ||
	    !json_object_is_type(key, json_type_string) ||
	    !json_object_object_get_ex(kv, "value", &val) ||
	    !json_object_is_type(val, json_type_string))
		return -EPROTO;
	rc = wlk__etcd_int64(kv, "create_revision", &e->create_rev);
	if (!rc && e->create_rev <= 0)
		rc = -EPROTO;
	if (!rc)
		rc = wlk__etcd_unb64(json_object_get_string(key), &e->key,
				     &e->key_len);
	if (!rc)
		rc = parse_key(e, prefix, prefix_len);
	if (!rc)
		rc = wlk__etcd_unb64(json_object_get_string(val), &e->value,
				     &vlen);
	if (!rc)
		rc = parse_value(e, vlen);
	return rc;
}

void wlk__etcd_kvs_free(struct wlk__etcd_kvs *k)
{
	for (size_t i = 0; i < k->n; i++) {
		free(k->e[i].key);
		free(k->e[i].value);
	}
	free(k->e);
	k->e = NULL;
	k->n = 0;
}

/*
 * wlk__etcd_kvs_parse() - the entries of @range (a RangeResponse: "kvs"
 * absent means none), every key under @prefix, read at @revision.
 * Return: 0, -EPROTO, -ENOMEM; *@out untouched on error.
 */
int wlk__etcd_kvs_parse(struct json_object *range, const char *prefix,
			size_t prefix_len, int64_t revision,
			struct wlk__etcd_kvs *out)
{
	struct wlk__etcd_kvs k = { .revision = revision,
				   .prefix_len = prefix_len };
	struct json_object *kvs;
	size_t n;
	int rc = 0;

	if (!json_object_is_type(range, json_type_object) || revision <= 0)
		return -EPROTO;
	if (!json_object_object_get_ex(range, "kvs", &kvs)) {
		*out = k;
		return 0;
	}
	if (!json_object_is_type(kvs, json_type_array))
		return -EPROTO;
	n = json_object_array_length(kvs);
	k.e = calloc(n ? n : 1, sizeof(*k.e));
	if (!k.e)
		return -ENOMEM;
	for (size_t i = 0; i < n && !rc; i++) {
		k.n = i + 1;
		rc = parse_entry(json_object_array_get_idx(kvs, i), prefix,
				 prefix_len, &k.e[i]);
	}
	if (rc) {
		wlk__etcd_kvs_free(&k);
		return rc;
	}
	*out = k;
	return 0;
}

struct wlk__etcd_entry *wlk__etcd_kvs_find(struct wlk__etcd_kvs *k,
					   const char *key, size_t len)
{
	for (size_t i = 0; i < k->n; i++)
		if (k->e[i].key_len == len && !memcmp(k->e[i].key, key, len))
			return &k->e[i];
	return NULL;
}

/* {"request_range": {"key", "range_end"}}: every key under @key. */
struct json_object *wlk__etcd_op_range(const char *key, size_t len)
{
	struct json_object *op = json_object_new_object();
	struct json_object *r = json_object_new_object();
	char *end = wlk__etcd_range_end(key, len);

	if (!op || !r || !end) {
		json_object_put(op);
		json_object_put(r);
		free(end);
		return NULL;
	}
	json_object_object_add(r, "key", wlk__etcd_jkey(key, len));
	json_object_object_add(r, "range_end", wlk__etcd_jkey(end, len));
	json_object_object_add(op, "request_range", r);
	free(end);
	return op;
}

/*
 * wlk__etcd_cmp() - a Compare of @target ("CREATE", "MOD", "VERSION")
 * with @v by @result ("EQUAL", "LESS", "GREATER") on @key, or on every
 * key under it if @range (an empty range compares as one key of zeros).
 */
struct json_object *wlk__etcd_cmp(const char *key, size_t len, bool range,
				  const char *target, const char *result,
				  int64_t v)
{
	struct json_object *c = json_object_new_object();
	const char *field = !strcmp(target, "CREATE") ? "create_revision" :
			    !strcmp(target, "MOD")    ? "mod_revision" :
							"version";

	if (!c)
		return NULL;
	json_object_object_add(c, "key", wlk__etcd_jkey(key, len));
	if (range) {
		char *end = wlk__etcd_range_end(key, len);

		json_object_object_add(c, "range_end",
				       end ? wlk__etcd_jkey(end, len) : NULL);
		free(end);
	}
	json_object_object_add(c, "target", json_object_new_string(target));
	json_object_object_add(c, "result", json_object_new_string(result));
	json_object_object_add(c, field, wlk__etcd_jstr_int(v));
	return c;
}

static int header_revision(struct json_object *rep, int64_t *rev)
{
	struct json_object *h;

	if (!json_object_object_get_ex(rep, "header", &h))
		return -EPROTO;
	return wlk__etcd_int64(h, "revision", rev);
}

/* One range of @key's prefix into @out; @local: serializable (the member's
 * own state, without confirming with the leader that it is current). */
static int range(struct wlk__etcd_manager *m, const char *key, size_t len,
		 bool local, struct wlk__etcd_kvs *out)
{
	struct json_object *req = wlk__etcd_op_range(key, len), *r, *rep;
	int64_t rev;
	int rc;

	if (!req)
		return -ENOMEM;
	r = json_object_object_get(req, "request_range");
	if (local)
		json_object_object_add(r, "serializable",
				       json_object_new_boolean(1));
	rc = wlk__etcd_call(&m->conn, "/v3/kv/range", r, &rep);
	json_object_put(req);
	if (rc)
		return rc;
	rc = header_revision(rep, &rev);
	if (!rc)
		rc = wlk__etcd_kvs_parse(rep, m->prefix, m->prefix_len, rev,
					 out);
	json_object_put(rep);
	return rc;
}

/*
 * wlk__etcd_range() - the entries under @key (a bucket's or a name's
 * prefix), by one linearizable range. 0, or as wlk__etcd_call(), -EPROTO.
 */
int wlk__etcd_range(struct wlk__etcd_manager *m, const char *key, size_t len,
		    struct wlk__etcd_kvs *out)
{
	return range(m, key, len, false, out);
}

/*
 * wlk__etcd_range_since() - wlk__etcd_range(), for a reader that only
 * needs a state at revision @since or later: first a serializable range
 * (the member answers from its own state: no round among the members, a
 * third of a loopback read's time), and a linearizable one only if that
 * state is older than @since (the member lags). Return: as
 * wlk__etcd_range().
 */
int wlk__etcd_range_since(struct wlk__etcd_manager *m, const char *key,
			  size_t len, int64_t since,
			  struct wlk__etcd_kvs *out)
{
	int rc = range(m, key, len, true, out);

	if (rc || out->revision >= since)
		return rc;
	wlk__etcd_kvs_free(out);
	return range(m, key, len, false, out);
}

/* Append @b's entries to @a (@b emptied): 0 or -ENOMEM. */
static int kvs_append(struct wlk__etcd_kvs *a, struct wlk__etcd_kvs *b)
{
	struct wlk__etcd_entry *e;

	if (!b->n)
		return 0;
	e = realloc(a->e, (a->n + b->n) * sizeof(*e));
	if (!e)
		return -ENOMEM;
	memcpy(e + a->n, b->e, b->n * sizeof(*e));
	a->e = e;
	a->n += b->n;
	free(b->e);
	b->e = NULL;
	b->n = 0;
	return 0;
}

/*
 * wlk__etcd_kvs_own() - add to @k the entry that a Txn of ours put at
 * @k's revision under @key (in the bucket of @prefix, @k's prefix_len
 * long), with @value: what a range at that revision shows of it. 0,
 * -EPROTO (not a key or value of ours), -ENOMEM.
 */
int wlk__etcd_kvs_own(struct wlk__etcd_kvs *k, const char *prefix,
		      const char *key, size_t len, const char *value)
{
	struct wlk__etcd_entry e = { .key = strndup(key, len), .key_len = len,
				     .create_rev = k->revision,
				     .value = strdup(value) };
	struct wlk__etcd_entry *grown = NULL;
	int rc = k->revision > 0 ? 0 : -EPROTO;

	if (!rc && (!e.key || !e.value))
		rc = -ENOMEM;
	if (!rc)
		rc = parse_key(&e, prefix, k->prefix_len);
	if (!rc)
		rc = parse_value(&e, strlen(value));
	if (!rc) {
		grown = realloc(k->e, (k->n + 1) * sizeof(*grown));
		rc = grown ? 0 : -ENOMEM;
	}
	if (rc) {
		free(e.key);
		free(e.value);
		return rc;
	}
	k->e = grown;
	k->e[k->n++] = e;
	return 0;
}

/*
 * wlk__etcd_txn_reply() - whether a TxnResponse @rep succeeded, and the
 * entries of its range responses, all of them (a scope's Txn ranges each
 * of its names), into @kvs (if not NULL), at the transaction's revision.
 * @bare_ok: a Txn whose success branch ranges nothing (acquire.c); its
 * @kvs is then empty when it succeeded. 0, or -EPROTO (no range response
 * where one belongs), -ENOMEM.
 */
int wlk__etcd_txn_reply(struct json_object *rep, const char *prefix,
			size_t prefix_len, bool bare_ok, bool *succeeded,
			struct wlk__etcd_kvs *kvs)
{
	struct wlk__etcd_kvs all = { .prefix_len = prefix_len };
	struct json_object *s, *rs;
	bool any = false;
	int64_t rev;
	int rc = header_revision(rep, &rev);

	if (rc)
		return rc;
	*succeeded = json_object_object_get_ex(rep, "succeeded", &s) &&
		     json_object_get_boolean(s);
	if (!kvs)
		return 0;
	if (!json_object_object_get_ex(rep, "responses", &rs) ||
	    !json_object_is_type(rs, json_type_array))
		return -EPROTO;
	all.revision = rev;
	for (size_t i = 0; !rc && i < json_object_array_length(rs); i++) {
		struct json_object *r = json_object_array_get_idx(rs, i), *x;
		struct wlk__etcd_kvs one = { 0 };

		if (!json_object_is_type(r, json_type_object) ||
		    !json_object_object_get_ex(r, "response_range", &x))
			continue;
		any = true;
		rc = wlk__etcd_kvs_parse(x, prefix, prefix_len, rev, &one);
		if (!rc)
			rc = kvs_append(&all, &one);
		wlk__etcd_kvs_free(&one);
	}
	if (!rc && !any && !(bare_ok && *succeeded))
		rc = -EPROTO;
	if (rc) {
		wlk__etcd_kvs_free(&all);
		return rc;
	}
	*kvs = all;
	return 0;
}
