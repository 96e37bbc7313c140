/* SPDX-License-Identifier: MIT */
/*
 * registry.c - this process's mapped buckets, and fork handling.
 *
 * Every manager of one bucket in a process shares one mapping and one agent
 * slot. The registry finds it: an RCU lock-free hash table (liburcu, bp
 * flavour, so callers never register threads) for lookups, a mutex for
 * creation and removal. Nothing here lives in shared memory.
 *
 * fork: the child inherits mappings and managers that belong to its parent's
 * agent. The fork generation, bumped in the child, marks them: they are
 * never found by lookups in the child, and every call on an inherited
 * handle returns WLK_ESTATE. liburcu-bp's own fork hooks keep its grace
 * periods usable in the child.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attach.h"

/*
 * The anchor thread holds one lifeline (a robust mutex) per mapped bucket;
 * the kernel releases at most 2048 robust mutexes of a dying thread, so a
 * process maps at most this many buckets at once (weblocks.h, LIMITS).
 */
#define MAX_BUCKETS WLK_LIMIT_BUCKETS

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t reg_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct cds_lfht *registry;
static unsigned int n_mapped;  /* buckets mapped by this incarnation; under
				  reg_mutex */
static int init_error;

static void before_fork(void)
{
	pthread_mutex_lock(&reg_mutex);
	wlk__anchor_before_fork();
	urcu_bp_before_fork();
}

static void after_fork_parent(void)
{
	urcu_bp_after_fork_parent();
	wlk__anchor_after_fork_parent();
	pthread_mutex_unlock(&reg_mutex);
}

static void after_fork_child(void)
{
	urcu_bp_after_fork_child();
	wlk__fork_gen_bump();
	n_mapped = 0;
	wlk__anchor_after_fork_child();
	pthread_mutex_unlock(&reg_mutex);
}

static void init_once(void)
{
	registry = cds_lfht_new_flavor(REGISTRY_INIT_BUCKETS,
				       REGISTRY_INIT_BUCKETS, 0, 0,
				       &urcu_bp_flavor, NULL);
	if (!registry) {
		init_error = -ENOMEM;
		return;
	}
	init_error = pthread_atfork(before_fork, after_fork_parent,
				    after_fork_child);
	init_error = init_error ? -init_error : 0;
}

static unsigned long key_hash(const uint8_t key[WLK_KEY_BYTES])
{
	unsigned long h;

	memcpy(&h, key, sizeof(h));
	return h;
}

static int match(struct cds_lfht_node *node, const void *key)
{
	struct wlk__bucket *b = caa_container_of(node, struct wlk__bucket,
						 node);

	return !memcmp(b->key, key, WLK_KEY_BYTES) &&
	       b->fork_gen == wlk__fork_gen();
}

/* Take a reference unless the bucket is already on its way out. */
static bool ref_get_unless_zero(struct wlk__bucket *b)
{
	unsigned long old = uatomic_read(&b->refs);

	while (old) {
		unsigned long seen = uatomic_cmpxchg(&b->refs, old, old + 1);

		if (seen == old)
			return true;
		old = seen;
	}
	return false;
}

static struct wlk__bucket *lookup(const uint8_t key[WLK_KEY_BYTES])
{
	struct cds_lfht_iter it;
	struct cds_lfht_node *node;
	struct wlk__bucket *found = NULL;

	urcu_bp_read_lock();
	cds_lfht_lookup(registry, key_hash(key), match, key, &it);
	for (node = cds_lfht_iter_get_node(&it); node && !found;
	     cds_lfht_next_duplicate(registry, match, key, &it),
	     node = cds_lfht_iter_get_node(&it)) {
		struct wlk__bucket *b = caa_container_of(node,
							 struct wlk__bucket,
							 node);
		if (ref_get_unless_zero(b))
			found = b;
	}
	urcu_bp_read_unlock();
	return found;
}

static int create(const char *origin, const struct wlk_manager_options *o,
		  const uint8_t key[WLK_KEY_BYTES], const char *shm_name,
		  struct wlk__bucket **out)
{
	struct wlk__bucket *b;
	int rc;

	if (n_mapped >= MAX_BUCKETS)
		return WLK_EFULL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->fd = -1;
	b->refs = 1;
	b->fork_gen = wlk__fork_gen();
	memcpy(b->key, key, WLK_KEY_BYTES);
	memcpy(b->base_name, shm_name, WLK_SHM_NAME_MAX);
	rc = wlk__segment_attach(b, origin, o);
	if (!rc) {
		rc = wlk__anchor_attach(b);
		if (rc)
			wlk__segment_detach(b);
	}
	if (rc) {
		free(b);
		return rc;
	}
	cds_lfht_node_init(&b->node);
	urcu_bp_read_lock();
	cds_lfht_add(registry, key_hash(key), &b->node);
	urcu_bp_read_unlock();
	n_mapped++;
	*out = b;
	return 0;
}

/*
 * wlk__bucket_get() - find or map the bucket of (origin, options) and take
 * a reference to it.
 */
int wlk__bucket_get(const char *origin, const struct wlk_manager_options *o,
		    struct wlk__bucket **out)
{
	uint8_t key[WLK_KEY_BYTES];
	char shm_name[WLK_SHM_NAME_MAX];
	struct wlk__bucket *b;
	int rc;

	rc = wlk__bucket_key(origin, o, key, shm_name);
	if (rc)
		return rc;
	pthread_once(&once, init_once);
	if (init_error)
		return init_error;
	b = lookup(key);
	if (!b) {
		/* Creation is serialised so that a bucket is mapped once. */
		pthread_mutex_lock(&reg_mutex);
		b = lookup(key);
		rc = b ? 0 : create(origin, o, key, shm_name, &b);
		pthread_mutex_unlock(&reg_mutex);
		if (rc)
			return rc;
	}
	/* Already mapped here: the file was checked, the options were not. */
	rc = wlk__segment_perm_check(b, o);
	if (rc) {
		wlk__bucket_put(b);
		return rc;
	}
	*out = b;
	return 0;
}

/*
 * wlk__bucket_put() - drop a reference; the last one unregisters the agent
 * (only in the process that registered it) and unmaps the segment once no
 * RCU reader can still see the bucket.
 */
void wlk__bucket_put(struct wlk__bucket *b)
{
	if (uatomic_sub_return(&b->refs, 1))
		return;
	pthread_mutex_lock(&reg_mutex);
	urcu_bp_read_lock();
	cds_lfht_del(registry, &b->node);
	urcu_bp_read_unlock();
	if (b->fork_gen == wlk__fork_gen())
		n_mapped--;
	pthread_mutex_unlock(&reg_mutex);
	urcu_bp_synchronize_rcu();
	/* Unlock the lifeline before unmapping: a robust mutex unmapped while
	 * held is never recovered. In a fork child it is the parent's. */
	if (b->fork_gen == wlk__fork_gen())
		wlk__anchor_detach(b);
	wlk__segment_detach(b);
	free(b);
}
