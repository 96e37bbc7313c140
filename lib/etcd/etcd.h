/* SPDX-License-Identifier: MIT */
/*
 * etcd.h - the etcd engine: a bucket's lock state as keys of an etcd v3
 * cluster, reached through its JSON gateway (HTTP/1.1) with libcurl and
 * json-c. What its files share.
 *
 * The mapping (weblocks.h, ETCD ENGINE):
 *
 *  - A request is one key, attached to its process's lease (one per
 *    process and cluster, shared by its managers: registry.c):
 *        wlk2/<origin>.<bucket>.<partition>/<name>/<c><m>-<lease>-<seq>
 *    where c is '0' for a steal and '1' otherwise, m is 'x' or 's', lease
 *    and seq 16 hex digits each; seq's first 8 are the manager's number in
 *    its process, so that lease and number name the manager (its client,
 *    deadlock.c), its last 8 a serial the manager reuses (acquire.c,
 *    SERIALS): a name's keys do not pile up as tombstones in etcd's
 *    index, which every range of the name would walk. Names and
 *    identifiers are escaped (codec.c, ESCAPES: any byte but letters,
 *    digits and "-_~:" as "%XX"), so no byte of them can reach outside
 *    its bucket's or name's prefix. The value is "<m> <pid> <clientId>".
 *  - The entries of a name, ordered by (c, create_revision), are one list:
 *    an entry is held iff it is exclusive and first, or shared and no
 *    exclusive entry precedes it; the rest are pending, in request order.
 *    Nobody grants: deleting an entry makes the next ones held.
 *  - The fencing token of a grant is the revision of the read that first
 *    shows the entry held: cluster-wide, and above every earlier grant of
 *    the name (that grant's entry was deleted before, at a lower revision).
 *  - The process's agent thread renews its lease and watches the
 *    deletions of each bucket in use, one stream per bucket: it marks the
 *    locks whose keys vanish as stolen, and wakes the waiters of the
 *    managers of the bucket, who read their name again.
 */
#ifndef WLK_ETCD_H
#define WLK_ETCD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include <json-c/json.h>

#include "engine.h"

/* The environment variable naming a backend (engine.h). */
#define WLK_ETCD_ENV WLK_BACKEND_ENV
/* Lease TTL in seconds, from the environment; the default otherwise. */
#define WLK_ETCD_TTL_ENV "WEBLOCKS_ETCD_TTL"
#define WLK_ETCD_TTL_DEFAULT 10
#define WLK_ETCD_TTL_MAX 3600
/* How long a call tries the members before it gives up, in ms. */
#define WLK_ETCD_TIMEOUT_ENV "WEBLOCKS_ETCD_TIMEOUT_MS"
#define WLK_ETCD_TIMEOUT_DEFAULT_MS 5000
#define WLK_ETCD_TIMEOUT_MAX_MS 600000

/* The agent's guard (guard.c): its program, from the environment, or
 * WLK_ETCD_GUARD_PATH (the build's pkglibexecdir), or none for
 * WLK_ETCD_GUARD_OFF; the protocol its first argument names; what tells
 * it to quit; the lowest descriptor our ends are kept at during a spawn
 * (above the guard's, 3 and 4). */
#define WLK_ETCD_GUARD_ENV "WEBLOCKS_ETCD_GUARD"
#define WLK_ETCD_GUARD_OFF "none"
#define WLK_ETCD_GUARD_PROTO "wlk-guard-1"
#define WLK_ETCD_GUARD_QUIT UINT64_C(0)
#define WLK_ETCD_GUARD_FD_MIN 5

/* The scheme of a backend string. */
#define WLK_ETCD_SCHEME "etcd://"
/* At most this many members in a backend string, each host:port at most
 * WLK_ETCD_HOST_MAX bytes. */
#define WLK_ETCD_MEMBERS_MAX 16
#define WLK_ETCD_HOST_MAX 255

/* An entry key's tail, "<c><m>-<16 hex lease>-<16 hex seq>", and its
 * lease's digits. */
#define LEASE_DIGITS 16
#define KEY_TAIL (2 + 1 + LEASE_DIGITS + 1 + 16)

/* Serials of released keys a manager keeps for its next requests
 * (acquire.c, SERIALS). */
#define WLK_ETCD_SPARE_SERIALS 32

/* Handles kept for reuse per connection (their TCP connections stay up). */
#define WLK_ETCD_POOL 8

/* The members of a cluster and the HTTP handles talking to them. */
struct wlk__etcd_conn {
	char *url[WLK_ETCD_MEMBERS_MAX]; /* "http://host:port" */
	unsigned int n_url;
	unsigned int cur;       /* [A] the member that answered last */
	uint64_t timeout_ms;    /* per call, across members */
	pthread_mutex_t mu;     /* guards the pool */
	void *pool[WLK_ETCD_POOL]; /* CURL * */
	unsigned int n_pool;
	unsigned long fork_gen; /* the process the handles belong to */
};

/* One entry of a name, parsed from a range reply. */
struct wlk__etcd_entry {
	char *key;       /* the key's bytes, NUL-terminated */
	size_t key_len;
	size_t name_len; /* the escaped name: key[prefix_len, +name_len) */
	int cls;         /* 0: steal, 1: otherwise */
	enum wlk_mode mode;
	int64_t create_rev;
	pid_t pid;
	char *value;           /* NUL-terminated */
	const char *client_id; /* in value */
	unsigned int scope_n;  /* its scope's members (scope.c), or 0 */
	bool clear;            /* set by wlk__etcd_classify(): clear on its
				  name by the grant rule */
	bool held;             /* and, for a scope's member, every member
				  clear */
	uint8_t mark;          /* scratch, for one walk (scope.c, steal.c) */
};

/* The entries of a range reply, and the revision it was read at. */
struct wlk__etcd_kvs {
	struct wlk__etcd_entry *e;
	size_t n;
	int64_t revision;
	size_t prefix_len; /* the bucket's */
};

/* Managers of one cluster in a process share an agent (registry.c):
 * one lease, one thread; and one watch stream per bucket (watch.c). */
struct wlk__etcd_agent;

/* watch.c: a bucket's stream, shared by the process's managers of it
 * (CURLM and CURL handles as void *). Its stream is the agent thread's
 * alone; the rest is under its agent's mu. */
struct wlk__etcd_watch {
	struct cds_list_head link; /* in its agent's watches */
	struct wlk__etcd_agent *a;
	char *prefix; /* the bucket's */
	size_t prefix_len;
	unsigned int users;  /* managers on it; 0: the agent ends it */
	uint32_t created;    /* [A] futex: 1 once its stream was created */
	int64_t rev;         /* resume the stream from here, or 0 */
	bool restarted;      /* it broke: check the locks once back */
	bool live;           /* this stream was created (etcd said so) */
	uint64_t retry_at;   /* when to try to start it (or check) again */
	void *h;       /* CURL * */
	void *hdr;     /* struct curl_slist * */
	json_tokener *tok;
	char *body;
	size_t pending; /* bytes of the message being parsed */
	unsigned int member;
	bool failed; /* a message we could not read: restart */
	bool compacted;
};

/* registry.c and agent.c: a process's client of one cluster. */
struct wlk__etcd_agent {
	struct cds_list_head link; /* in the registry, under its mutex */
	char *backend;             /* its key: the backend string */
	unsigned long fork_gen;    /* the process it belongs to */
	unsigned long users;       /* its open managers; under the
				      registry's mutex */
	unsigned long refs;        /* [A] its managers not yet freed: a
				      closed one's requests still read the
				      lease */
	bool dead;                 /* under lease_mu: its lease revoked */
	struct wlk__etcd_conn conn; /* the keepalives' and the watches' */
	unsigned int ttl;          /* seconds */
	uint64_t lease;            /* [A] the current lease */
	pthread_mutex_t lease_mu;  /* one renewal at a time; before mu */
	pthread_mutex_t mu;        /* guards managers and watches */
	struct cds_list_head managers; /* struct wlk__etcd_manager.peer */
	struct cds_list_head watches;  /* struct wlk__etcd_watch */
	uint32_t next_no;          /* under mu: the next manager's number */
	pthread_t thread;
	uint32_t stop;             /* [A] the thread should end */
	void *multi;               /* CURLM * of the thread */
	int guard_fd;              /* our end of the guard's pair (guard.c),
				      or -1 */
	char *guard_path;          /* the guard's program, or NULL: none */
};

struct wlk__etcd_manager {
	struct wlk_manager base;
	struct wlk__etcd_conn conn;
	char *prefix; /* the bucket's prefix */
	size_t prefix_len;
	struct wlk__etcd_agent *a;  /* its agent (registry.c), or NULL */
	struct wlk__etcd_watch *w;  /* its bucket's watch, or NULL */
	struct cds_list_head peer;  /* in a->managers, under a->mu */
	uint32_t no;         /* its number in the agent: its keys' client */
	bool woken;          /* under a->mu: a watch message concerns it */
	uint32_t seq;        /* under lmu: the last serial made */
	uint32_t spare[WLK_ETCD_SPARE_SERIALS]; /* under lmu: reusable */
	unsigned int n_spare;
	uint32_t events;     /* [A] futex: bumped by deletions in the bucket */
	int64_t woke_rev;    /* [A] the revision of the last deletion that
				woke its waiters (watch.c) */
	pthread_mutex_t lmu; /* guards locks */
	struct cds_list_head locks; /* struct wlk__etcd_lock, pending+held */
	struct cds_list_head all;   /* in gone.c's list of open managers */
	int ring_fd;      /* [A] efd while an async context exists, or -1 */
	int efd;          /* the async descriptor's eventfd, or -1 */
	struct wlk__etcd_actx *actx; /* async.c's, under base.amu */
	bool detect;      /* detect_deadlocks */
};

/* One key of a scope's request (scope.c): its name's prefix is the
 * first len - KEY_TAIL bytes. */
struct wlk__etcd_member {
	char *key;
	size_t len;
};

struct wlk__etcd_lock {
	struct wlk_lock base;
	struct cds_list_head link; /* in m->locks, under m->lmu */
	char *key;      /* a scope's: its first member's, mem[0].key */
	size_t key_len;
	struct wlk__etcd_member *mem; /* a scope's keys (base.n_scope), or
					 NULL for a single name */
	uint64_t lease;  /* the lease its key is on */
	int64_t put_rev; /* [A] the revision its key was put at, or 0 */
	int64_t del_rev; /* under m->lmu: its key's last deletion seen
			    while put_rev was 0 (gone.c) */
	uint32_t serial; /* its keys' serial (acquire.c, SERIALS) */
	bool unsure;     /* a call on its keys may have applied twice */
	uint32_t gone;  /* [A] its key was deleted by someone else */
	bool releasing; /* under m->lmu: our own delete is on its way */
	bool granted;   /* an async request's: held, not yet dispatched */
};

static inline struct wlk__etcd_manager *wlk__etcd_m(struct wlk_manager *m)
{
	return (struct wlk__etcd_manager *)m;
}

static inline struct wlk__etcd_lock *wlk__etcd_l(struct wlk_lock *l)
{
	return (struct wlk__etcd_lock *)l;
}

/* http.c */
int wlk__etcd_conn_init(struct wlk__etcd_conn *c,
			const char *backend) WLK_INTERNAL;
void wlk__etcd_conn_fini(struct wlk__etcd_conn *c) WLK_INTERNAL;
extern WLK_TLS bool wlk__etcd_unsure WLK_INTERNAL;
int wlk__etcd_call(struct wlk__etcd_conn *c, const char *path,
		   struct json_object *req,
		   struct json_object **out) WLK_INTERNAL;
const char *wlk__etcd_backend(const struct wlk_manager_options *o)
	WLK_INTERNAL;
void *wlk__etcd_handle_new(void) WLK_INTERNAL;
/* A curl write callback (curl_write_callback), without curl's header. */
typedef size_t (*wlk__etcd_write_fn)(char *data, size_t size, size_t nmemb,
				     void *arg);
void wlk__etcd_post_setup(void *h, const char *url, const char *body,
			  wlk__etcd_write_fn write, void *arg,
			  long connect_ms, long total_ms) WLK_INTERNAL;

/* codec.c */
char *wlk__etcd_b64(const void *p, size_t n) WLK_INTERNAL;
int wlk__etcd_unb64(const char *s, char **out, size_t *n) WLK_INTERNAL;
int wlk__etcd_unesc(const char *s, size_t n, char *out,
		    size_t *len) WLK_INTERNAL;
int wlk__etcd_bucket_prefix(const char *origin,
			    const struct wlk_manager_options *o, char **out,
			    size_t *len) WLK_INTERNAL;
char *wlk__etcd_name_prefix(const char *prefix, size_t prefix_len,
			    const char *name, size_t name_len,
			    size_t *len) WLK_INTERNAL;
char *wlk__etcd_range_end(const char *key, size_t len) WLK_INTERNAL;
int wlk__etcd_int64(struct json_object *o, const char *field,
		    int64_t *out) WLK_INTERNAL;
struct json_object *wlk__etcd_jkey(const char *key, size_t len) WLK_INTERNAL;
struct json_object *wlk__etcd_jstr_int(int64_t v) WLK_INTERNAL;

/* kvs.c */
int wlk__etcd_kvs_parse(struct json_object *range, const char *prefix,
			size_t prefix_len, int64_t revision,
			struct wlk__etcd_kvs *out) WLK_INTERNAL;
void wlk__etcd_kvs_free(struct wlk__etcd_kvs *k) WLK_INTERNAL;
struct wlk__etcd_entry *wlk__etcd_kvs_find(struct wlk__etcd_kvs *k,
					   const char *key,
					   size_t len) WLK_INTERNAL;
int wlk__etcd_range_since(struct wlk__etcd_manager *m, const char *key,
			  size_t len, int64_t since,
			  struct wlk__etcd_kvs *out) WLK_INTERNAL;
int wlk__etcd_range(struct wlk__etcd_manager *m, const char *key,
		    size_t len, struct wlk__etcd_kvs *out) WLK_INTERNAL;
struct json_object *wlk__etcd_op_range(const char *key,
				       size_t len) WLK_INTERNAL;
struct json_object *wlk__etcd_cmp(const char *key, size_t len,
				  bool range, const char *target,
				  const char *result, int64_t v) WLK_INTERNAL;
int wlk__etcd_txn_reply(struct json_object *rep, const char *prefix,
			size_t prefix_len, bool bare_ok, bool *succeeded,
			struct wlk__etcd_kvs *kvs) WLK_INTERNAL;
int wlk__etcd_kvs_own(struct wlk__etcd_kvs *k, const char *prefix,
		      const char *key, size_t len,
		      const char *value) WLK_INTERNAL;

/* classify.c */
void wlk__etcd_classify(struct wlk__etcd_kvs *k) WLK_INTERNAL;
bool wlk__etcd_same_scope(const struct wlk__etcd_entry *a,
			  const struct wlk__etcd_entry *b) WLK_INTERNAL;
bool wlk__etcd_same_name(const struct wlk__etcd_entry *a,
			 const struct wlk__etcd_entry *b,
			 size_t p) WLK_INTERNAL;

/* bucket.c */
int wlk__etcd_bucket_join(struct wlk__etcd_manager *m, uint32_t max_name_len,
			  uint32_t *out) WLK_INTERNAL;
int wlk__etcd_bucket_remove(struct wlk__etcd_manager *m) WLK_INTERNAL;
int wlk__etcd_bucket_leave(struct wlk__etcd_manager *m,
			   uint64_t lease) WLK_INTERNAL;

/* gone.c */
void wlk__etcd_local_add(struct wlk__etcd_manager *m, bool on) WLK_INTERNAL;
void wlk__etcd_local_gone(const char *key, size_t len,
			  int64_t rev) WLK_INTERNAL;
void wlk__etcd_local_forget(void) WLK_INTERNAL;
bool wlk__etcd_mark_gone(struct wlk__etcd_manager *m, const char *key,
			 size_t len, int64_t rev) WLK_INTERNAL;
void wlk__etcd_put_at(struct wlk__etcd_manager *m, struct wlk__etcd_lock *l,
		      int64_t rev) WLK_INTERNAL;
void wlk__etcd_wake(struct wlk__etcd_manager *m) WLK_INTERNAL;

/* watch.c */
int wlk__etcd_watch_begin(void *multi,
			  struct wlk__etcd_watch *w) WLK_INTERNAL;
void wlk__etcd_watch_end(void *multi,
			 struct wlk__etcd_watch *w) WLK_INTERNAL;
void wlk__etcd_watch_free(void *multi,
			  struct wlk__etcd_watch *w) WLK_INTERNAL;
void wlk__etcd_watch_resync(struct wlk__etcd_watch *w) WLK_INTERNAL;

/* agent.c */
int wlk__etcd_agent_start(struct wlk__etcd_agent *a) WLK_INTERNAL;
void wlk__etcd_agent_stop(struct wlk__etcd_agent *a) WLK_INTERNAL;

/* guard.c */
int wlk__etcd_guard_init(struct wlk__etcd_agent *a) WLK_INTERNAL;
int wlk__etcd_guard_start(struct wlk__etcd_agent *a) WLK_INTERNAL;
void wlk__etcd_guard_lease(struct wlk__etcd_agent *a,
			   uint64_t id) WLK_INTERNAL;
void wlk__etcd_guard_tend(struct wlk__etcd_agent *a) WLK_INTERNAL;
void wlk__etcd_guard_stop(struct wlk__etcd_agent *a) WLK_INTERNAL;
int wlk__etcd_lease_grant(struct wlk__etcd_conn *c, unsigned int ttl,
			  uint64_t *id) WLK_INTERNAL;
int wlk__etcd_lease_renew(struct wlk__etcd_agent *a,
			  uint64_t old) WLK_INTERNAL;
int wlk__etcd_lease_alive(struct wlk__etcd_agent *a,
			  uint64_t lease) WLK_INTERNAL;

/* registry.c */
int wlk__etcd_agent_join(struct wlk__etcd_manager *m, const char *backend,
			 unsigned int ttl, uint32_t max_name_len,
			 uint32_t *out) WLK_INTERNAL;
void wlk__etcd_agent_leave(struct wlk__etcd_manager *m) WLK_INTERNAL;
void wlk__etcd_agent_drop(struct wlk__etcd_manager *m) WLK_INTERNAL;

/* The lease @m's requests go on now. */
static inline uint64_t wlk__etcd_lease(struct wlk__etcd_manager *m)
{
	return uatomic_read(&m->a->lease);
}

/* A key's client (deadlock.c): its lease's digits, '-', and the first
 * CLIENT_NO_DIGITS of its seq, its manager's number (acquire.c). */
#define CLIENT_NO_DIGITS 8
#define CLIENT_DIGITS (LEASE_DIGITS + 1 + CLIENT_NO_DIGITS)
#define SEQ_NO_SHIFT 32

/* txn.c: a request's transactions */
/* "<m>[<members>] <pid> <clientId>" (scope.c: the members of a scope) */
#define WLK_ETCD_VALUE_MAX (2 + 2 + 11 + 1 + WLK_CLIENT_ID_MAX + 1)
struct wlk__etcd_req {
	struct wlk__etcd_manager *m;
	struct wlk__etcd_lock *l;
	char *np; /* the name's prefix */
	size_t np_len;
	char value[WLK_ETCD_VALUE_MAX];
	uint64_t lease;
};
struct json_object *wlk__etcd_op_put_key(struct wlk__etcd_req *r,
					 const char *key,
					 size_t len) WLK_INTERNAL;
struct json_object *wlk__etcd_op_delete(const char *key,
					size_t len) WLK_INTERNAL;
struct json_object *wlk__etcd_list(struct json_object *a,
				   struct json_object *b,
				   struct json_object *c) WLK_INTERNAL;
int wlk__etcd_txn(struct wlk__etcd_req *r, struct json_object *cmp,
		  struct json_object *ok, struct json_object *fail,
		  bool *succeeded, struct wlk__etcd_kvs *kvs) WLK_INTERNAL;
int wlk__etcd_txn_bare(struct wlk__etcd_req *r, struct json_object *cmp,
		       struct json_object *ok, struct json_object *fail,
		       bool *succeeded, struct wlk__etcd_kvs *kvs) WLK_INTERNAL;
int wlk__etcd_grant_if_held(struct wlk__etcd_req *r, struct wlk__etcd_kvs *k,
			    bool *held) WLK_INTERNAL;
int wlk__etcd_grant_of(struct wlk__etcd_manager *m, struct wlk__etcd_lock *l,
		       struct wlk__etcd_kvs *k, bool *held) WLK_INTERNAL;
int wlk__etcd_delete(struct wlk__etcd_manager *m, struct wlk__etcd_lock *l,
		     int64_t *deleted) WLK_INTERNAL;

/* deleter.c */
bool wlk__etcd_deleted_by_us(struct wlk__etcd_manager *m,
			     struct wlk__etcd_lock *l) WLK_INTERNAL;

/* scope.c: a request's keys, one per name (a single name's is one) */
static inline unsigned int wlk__etcd_nkeys(const struct wlk__etcd_lock *l)
{
	return l->mem ? l->base.n_scope : 1;
}

static inline const char *wlk__etcd_key(const struct wlk__etcd_lock *l,
					unsigned int i, size_t *len)
{
	*len = l->mem ? l->mem[i].len : l->key_len;
	return l->mem ? l->mem[i].key : l->key;
}

int wlk__etcd_scope_keys(struct wlk__etcd_manager *m,
			 struct wlk__etcd_lock *l, const char *tail,
			 size_t tail_len) WLK_INTERNAL;
void wlk__etcd_forget_keys(struct wlk__etcd_lock *l) WLK_INTERNAL;
int wlk__etcd_add_puts(struct json_object *ops,
		       struct wlk__etcd_req *r) WLK_INTERNAL;
int wlk__etcd_add_ranges(struct json_object *ops,
			 const struct wlk__etcd_lock *l) WLK_INTERNAL;
int wlk__etcd_read(struct wlk__etcd_manager *m, struct wlk__etcd_lock *l,
		   int64_t since, struct wlk__etcd_kvs *out) WLK_INTERNAL;
bool wlk__etcd_on_names(const struct wlk__etcd_lock *l,
			const struct wlk__etcd_entry *e) WLK_INTERNAL;

/* atonce.c */
int wlk__etcd_if_available(struct wlk__etcd_req *r, bool *held) WLK_INTERNAL;
/* steal.c */
int wlk__etcd_steal(struct wlk__etcd_req *r, bool *held) WLK_INTERNAL;
/* deadlock.c */
int wlk__etcd_put_checked(struct wlk__etcd_req *r,
			  struct wlk__etcd_kvs *k) WLK_INTERNAL;

/* acquire.c */
int wlk__etcd_acquire(struct wlk_manager *m, struct wlk_lock *l,
		      const struct wlk_options *o, bool *held) WLK_INTERNAL;
int wlk__etcd_release(struct wlk_lock *l) WLK_INTERNAL;
int wlk__etcd_submit(struct wlk__etcd_manager *m, struct wlk_lock *pl,
		     const struct wlk_options *o, bool wait, bool *held,
		     bool *queued) WLK_INTERNAL;
int wlk__etcd_check(struct wlk__etcd_manager *m, struct wlk_lock *pl,
		    bool *held) WLK_INTERNAL;
void wlk__etcd_drop(struct wlk__etcd_manager *m,
		    struct wlk_lock *pl) WLK_INTERNAL;

/* The agent's ring, and async.c's: the async descriptor becomes
 * readable (inline: the agent is below async.c). */
static inline void wlk__etcd_ring(struct wlk__etcd_manager *m)
{
	int fd = uatomic_read(&m->ring_fd);

	if (fd >= 0)
		(void)!write(fd, &(uint64_t){ 1 }, sizeof(uint64_t));
}

/* async.c: struct wlk__engine's async ops */
int wlk__etcd_async_open(struct wlk_manager *m) WLK_INTERNAL;
int wlk__etcd_async_fd(struct wlk_manager *m) WLK_INTERNAL;
int wlk__etcd_async_watch_fd(struct wlk_manager *m, int fd) WLK_INTERNAL;
void wlk__etcd_async_ring(struct wlk_manager *m) WLK_INTERNAL;
int wlk__etcd_async_request(struct wlk_manager *m, struct wlk_async *r,
			    const struct wlk_options *o) WLK_INTERNAL;
bool wlk__etcd_async_drain(struct wlk_manager *m) WLK_INTERNAL;
void wlk__etcd_async_settle(struct wlk_manager *m, struct wlk_async *r,
			    int why) WLK_INTERNAL;
void wlk__etcd_async_arm(struct wlk_manager *m) WLK_INTERNAL;
void wlk__etcd_async_close(struct wlk_manager *m) WLK_INTERNAL;

/* query.c */
int wlk__etcd_query(struct wlk_manager *m,
		    struct wlk_snapshot **out) WLK_INTERNAL;
int wlk__etcd_validate(struct wlk_manager *m, wlk_violation_cb cb,
		       void *arg) WLK_INTERNAL;

#endif /* WLK_ETCD_H */
