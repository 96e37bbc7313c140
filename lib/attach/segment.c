/* SPDX-License-Identifier: MIT */
/*
 * segment.c - naming, creating, attaching, validating and removing a
 * bucket's segment (the protocol is described in layout.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attach.h"

#define SHM_DIR "/dev/shm"
#define DEFAULT_MODE 0600u
#define ALLOWED_MODE 0666u
/* The bits every segment has: its owner's processes open it read-write. */
#define OWNER_MODE 0600u
#define PAGE 4096u
/* Largest segment a geometry may ask for. */
#define MAX_SEGMENT_SIZE (1ull << 30)
/*
 * Why a segment in use cannot be attached, besides real errors: it belongs
 * to another bucket (a hash collision: both live on, in two generations),
 * or its header is broken (it is poisoned, so that its users stop, and
 * openers move on to the next generation).
 */
#define SEG_FOREIGN (-EXDEV)
#define SEG_BROKEN WLK__SEG_BROKEN
/* A stale generation with a later one after it: never re-created. */
#define SEG_SUPERSEDED (-ESTALE)

static size_t round_up(size_t v, size_t a)
{
	return (v + a - 1) / a * a;
}

/* The geometry a segment with these capacities has. */
static int geo_compute(uint32_t names, uint32_t requests, uint32_t name_len,
		       struct wlk__geo *g)
{
	uint64_t end;

	if (!names || names > WLK_LIMIT_MAX_NAMES || !requests ||
	    requests > WLK_LIMIT_MAX_REQUESTS || !name_len ||
	    name_len > WLK_LIMIT_MAX_NAME_LEN)
		return WLK_EINVAL;
	g->max_agents = WLK_MAX_AGENTS;
	g->max_clients = WLK_MAX_CLIENTS;
	g->max_names = names;
	g->max_requests = requests;
	g->max_name_len = name_len;
	g->name_stride = (uint32_t)round_up(sizeof(struct wlk_seg_name) +
					    name_len, WLK_CACHELINE);
	g->hash_buckets = 1;
	while (g->hash_buckets < 2 * names)
		g->hash_buckets <<= 1;
	g->off_agents = WLK_HEADER_SIZE;
	g->off_clients = g->off_agents +
			 (size_t)g->max_agents * sizeof(struct wlk_seg_agent);
	g->off_names = g->off_clients +
		       (size_t)g->max_clients * sizeof(struct wlk_seg_client);
	g->off_requests = g->off_names + (size_t)names * g->name_stride;
	g->off_hash = g->off_requests +
		      (size_t)requests * sizeof(struct wlk_seg_request);
	end = g->off_hash + (uint64_t)g->hash_buckets * sizeof(uint32_t);
	if (end > MAX_SEGMENT_SIZE)
		return WLK_EINVAL;
	g->size = round_up((size_t)end, PAGE);
	return 0;
}

int wlk__ofd_lock(int fd, short type, off_t byte, bool wait)
{
	struct flock fl = {
		.l_type = type,
		.l_whence = SEEK_SET,
		.l_start = byte,
		.l_len = 1,
	};

	while (fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) < 0) {
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EACCES)
			return -EBUSY;
		return wlk__errno(errno);
	}
	return 0;
}

/* Whether the name still refers to the file we opened (not unlinked). */
static bool name_is_fd(const char *shm_name, int fd)
{
	char path[sizeof(SHM_DIR) + WLK_SHM_NAME_MAX];
	struct stat a, b;

	snprintf(path, sizeof(path), SHM_DIR "%s", shm_name);
	return stat(path, &a) == 0 && fstat(fd, &b) == 0 &&
	       a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static void pidns_id(uint64_t *dev, uint64_t *ino)
{
	struct stat st;

	*dev = 0;
	*ino = 0;
	if (stat("/proc/self/ns/pid", &st) == 0) {
		*dev = (uint64_t)st.st_dev;
		*ino = (uint64_t)st.st_ino;
	}
}

static void set_ident(char *dst, uint32_t *len, const char *src)
{
	*len = (uint32_t)strlen(src);
	memcpy(dst, src, *len);
}

/*
 * Initialise a segment nobody is attached to, from scratch; its tokens
 * start above @mark.
 */
static int create(struct wlk__bucket *b, const char *origin,
		  const struct wlk_manager_options *o, const struct wlk__geo *g,
		  uint64_t mark)
{
	struct wlk_seg_header *h;
	int rc;

	/* Truncating to 0 first discards stale content in one step. */
	if (ftruncate(b->fd, 0) < 0 || ftruncate(b->fd, (off_t)g->size) < 0)
		return wlk__errno(errno);
	/* Reserve the pages now: on a full tmpfs, ENOSPC here, not SIGBUS. */
	rc = posix_fallocate(b->fd, 0, (off_t)g->size);
	if (rc)
		return wlk__errno(rc);
	b->base = mmap(NULL, g->size, PROT_READ | PROT_WRITE, MAP_SHARED,
		       b->fd, 0);
	if (b->base == MAP_FAILED) {
		b->base = NULL;
		return wlk__errno(errno);
	}
	b->geo = *g;
	b->hdr = h = (struct wlk_seg_header *)b->base;
	h->layout_version = WLK_LAYOUT_VERSION;
	h->abi_sig = WLK_ABI_SIG;
	h->segment_size = g->size;
	h->header_size = WLK_HEADER_SIZE;
	h->creator_uid = (uint32_t)geteuid();
	pidns_id(&h->pidns_dev, &h->pidns_ino);
	if (getrandom(h->seg_key, sizeof(h->seg_key), 0) !=
	    (ssize_t)sizeof(h->seg_key))
		return wlk__errno(errno);
	h->max_agents = g->max_agents;
	h->max_clients = g->max_clients;
	h->max_names = g->max_names;
	h->max_requests = g->max_requests;
	h->max_name_len = g->max_name_len;
	h->name_stride = g->name_stride;
	h->hash_buckets = g->hash_buckets;
	h->off_agents = g->off_agents;
	h->off_clients = g->off_clients;
	h->off_names = g->off_names;
	h->off_requests = g->off_requests;
	h->off_hash = g->off_hash;
	h->created_ns = wlk__realtime_ns();
	h->next_token = mark > h->created_ns ? mark : h->created_ns;
	set_ident(h->origin, &h->origin_len, origin);
	set_ident(h->bucket, &h->bucket_len,
		  o && o->bucket ? o->bucket : WLK_DEFAULT_BUCKET);
	set_ident(h->partition, &h->partition_len,
		  o && o->partition ? o->partition : "");
	WLK_FAILPOINT(segment_create_mid);
	rc = wlk__mutex_init(&h->sync.mutex);
	for (uint32_t i = 0; !rc && i < g->max_agents; i++)
		rc = wlk__mutex_init(&wlk__agent(b, i)->u.lifeline);
	if (rc)
		return rc;
	memcpy(b->seg_key, h->seg_key, sizeof(b->seg_key));
	rc = wlk__segment_format(b);
	if (rc)
		return rc;
	h->seg_state = WLK_SEG_READY;
	/* Publish: an attacher that sees the magic sees everything above. */
	cmm_smp_wmb();
	memcpy(h->magic, WLK_SEG_MAGIC, WLK_SEG_MAGIC_LEN);
	return 0;
}

static bool ident_eq(const char *field, uint32_t len, size_t cap,
		     const char *want)
{
	return len < cap && len == strlen(want) && !memcmp(field, want, len);
}

/*
 * wlk__header_ident_eq() - whether segment header @h is the one of bucket
 * (@origin, @o's bucket and partition, their defaults when NULL).
 */
bool wlk__header_ident_eq(const struct wlk_seg_header *h, const char *origin,
			  const struct wlk_manager_options *o)
{
	return ident_eq(h->origin, h->origin_len, sizeof(h->origin), origin) &&
	       ident_eq(h->bucket, h->bucket_len, sizeof(h->bucket),
			o && o->bucket ? o->bucket : WLK_DEFAULT_BUCKET) &&
	       ident_eq(h->partition, h->partition_len, sizeof(h->partition),
			o && o->partition ? o->partition : "");
}

/*
 * wlk__header_check() - the header of a mapped segment of @file_size
 * bytes: magic, format, owner and geometry (offsets and sizes recomputed
 * from the capacities, never taken on trust). On success b->geo and
 * b->seg_key are set from it.
 * Return: 0, WLK_ECORRUPT (no segment), WLK_EFORMAT (another layout or
 * ABI), WLK_ESECURITY (another owner), or WLK__SEG_BROKEN (the geometry
 * does not add up).
 */
int wlk__header_check(struct wlk__bucket *b, size_t file_size)
{
	const struct wlk_seg_header *h = b->hdr;
	struct wlk__geo g;

	if (file_size < WLK_HEADER_SIZE || file_size > MAX_SEGMENT_SIZE)
		return WLK_ECORRUPT;
	cmm_smp_rmb();
	if (memcmp(h->magic, WLK_SEG_MAGIC, WLK_SEG_MAGIC_LEN) != 0)
		return WLK_ECORRUPT;
	if (h->layout_version != WLK_LAYOUT_VERSION ||
	    h->abi_sig != WLK_ABI_SIG || h->header_size != WLK_HEADER_SIZE)
		return WLK_EFORMAT;
	if (h->creator_uid != (uint32_t)geteuid())
		return WLK_ESECURITY;
	if (geo_compute(h->max_names, h->max_requests, h->max_name_len, &g) ||
	    g.size != h->segment_size || g.size != file_size ||
	    g.name_stride != h->name_stride ||
	    g.hash_buckets != h->hash_buckets ||
	    h->max_agents != g.max_agents || h->max_clients != g.max_clients ||
	    h->off_agents != g.off_agents || h->off_clients != g.off_clients ||
	    h->off_names != g.off_names || h->off_requests != g.off_requests ||
	    h->off_hash != g.off_hash)
		return SEG_BROKEN;
	b->geo = g;
	memcpy(b->seg_key, h->seg_key, sizeof(b->seg_key));
	return 0;
}

/* Whether this process is in the PID namespace that created the segment. */
bool wlk__same_pidns(const struct wlk_seg_header *h)
{
	uint64_t dev, ino;

	pidns_id(&dev, &ino);
	return (!h->pidns_dev && !h->pidns_ino) ||
	       (dev == h->pidns_dev && ino == h->pidns_ino);
}

/* Check an existing segment before attaching to it. */
static int validate(struct wlk__bucket *b, const char *origin,
		    const struct wlk_manager_options *o, size_t file_size)
{
	const struct wlk_seg_header *h = b->hdr;
	int rc = wlk__header_check(b, file_size);

	if (rc)
		return rc;
	/* Robust mutex owners are namespace-local thread ids. */
	if (!wlk__same_pidns(h))
		return WLK_ESECURITY;
	/* Any state but READY is one its users already fail on (mutex.c):
	 * a damaged one is poisoned as well, and openers move on; so is a
	 * mutex of another kind (mutex.c). */
	if (uatomic_read(&h->seg_state) != WLK_SEG_READY ||
	    !wlk__mutex_sane(&h->sync.mutex))
		return SEG_BROKEN;
	if (!wlk__header_ident_eq(h, origin, o))
		return SEG_FOREIGN;
	return 0;
}

/*
 * Switch off the fast path of every name of a segment being poisoned
 * (layout.h, FAST PATH): its users' uncontended acquires and releases then
 * take the mutex and fail as everything else does, rather than go on
 * granting beside the next generation (with tokens of their own). ON is
 * cleared by CAS, as an inflation does; nothing under the mutex sets it
 * again, since lockers of a poisoned segment do nothing. The geometry may
 * be what is broken: entries are bounded by the mapping only, and a word
 * that is no fast word is at worst changed in a segment nobody may use.
 */
static void fast_off_all(struct wlk__bucket *b)
{
	const struct wlk_seg_header *h = b->hdr;
	const size_t fast = offsetof(struct wlk_seg_name, fast);
	uint64_t off = h->off_names, stride = h->name_stride, n;

	if (off < WLK_HEADER_SIZE || off >= b->geo.size || off % 8 ||
	    stride < sizeof(struct wlk_seg_name) || stride % 8)
		return;
	n = (b->geo.size - off) / stride;
	if (n > h->max_names)
		n = h->max_names;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t *w = (uint64_t *)(void *)(b->base + off +
						   i * stride + fast);
		uint64_t f = uatomic_read(w), seen;

		while ((f & WLK_FAST_ON) &&
		       (seen = uatomic_cmpxchg(w, f, f & ~WLK_FAST_ON)) != f)
			f = seen;
	}
}

static int attach_existing(struct wlk__bucket *b, const char *origin,
			   const struct wlk_manager_options *o)
{
	struct stat st;
	int rc;

	rc = wlk__ofd_lock(b->fd, F_RDLCK, WLK_LOCK_ATTACH, false);
	if (rc)
		return rc == -EBUSY ? WLK_ECORRUPT : rc;
	if (fstat(b->fd, &st) < 0)
		return wlk__errno(errno);
	if ((size_t)st.st_size < WLK_HEADER_SIZE ||
	    (uint64_t)st.st_size > MAX_SEGMENT_SIZE)
		return WLK_ECORRUPT;
	b->base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
		       MAP_SHARED, b->fd, 0);
	if (b->base == MAP_FAILED) {
		b->base = NULL;
		return wlk__errno(errno);
	}
	b->hdr = (struct wlk_seg_header *)b->base;
	b->geo.size = (size_t)st.st_size; /* for munmap if validation fails */
	rc = validate(b, origin, o, (size_t)st.st_size);
	/* Its users must stop: they may trust a geometry no longer there. */
	if (rc == SEG_BROKEN) {
		uatomic_set(&b->hdr->seg_state, WLK_SEG_POISONED);
		fast_off_all(b);
	}
	return rc;
}

/*
 * Why shm_open(@shm_name) failed with @err. Something other than a regular
 * file at the name (glibc reports a directory as EINVAL, a symbolic link
 * as ELOOP) is refused as a file of another owner is, not taken for a bad
 * argument.
 */
static int open_error(const char *shm_name, int err)
{
	char path[sizeof(SHM_DIR) + WLK_SHM_NAME_MAX];
	struct stat st;

	if (err == EACCES)
		return WLK_ESECURITY;
	snprintf(path, sizeof(path), SHM_DIR "%s", shm_name);
	if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode))
		return WLK_ESECURITY;
	return wlk__errno(err);
}

/* Owned by us, and no looser than @perm; *@mode gets its permissions. */
static int check_file(int fd, unsigned int perm, unsigned int *mode)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return wlk__errno(errno);
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 0777 & ~perm))
		return WLK_ESECURITY;
	*mode = st.st_mode & 0777;
	return 0;
}

static int options_perm(const struct wlk_manager_options *o,
			unsigned int *perm)
{
	*perm = o && o->permissions ? o->permissions : DEFAULT_MODE;
	/* Without the owner's bits only the creator could use it, and
	 * nobody could remove it. */
	if ((*perm & ~ALLOWED_MODE) || (*perm & OWNER_MODE) != OWNER_MODE)
		return WLK_EINVAL;
	return 0;
}

/* The check check_file() made, for a bucket this process has mapped. */
int wlk__segment_perm_check(const struct wlk__bucket *b,
			    const struct wlk_manager_options *o)
{
	unsigned int perm;
	int rc = options_perm(o, &perm);

	if (rc)
		return rc;
	return (b->mode & ~perm) ? WLK_ESECURITY : 0;
}

/* Whether generation @gen + 1 of the bucket's segment exists. */
static bool superseded(const struct wlk__bucket *b, unsigned int gen)
{
	char name[WLK_SHM_NAME_MAX], path[sizeof(SHM_DIR) + WLK_SHM_NAME_MAX];
	struct stat st;

	if (gen + 1 >= WLK_MAX_GENERATIONS)
		return false;
	wlk__generation_name(name, b->base_name, gen + 1);
	snprintf(path, sizeof(path), SHM_DIR "%s", name);
	return stat(path, &st) == 0;
}

/*
 * The largest fencing token the bucket's segments hold: generation @gen,
 * whose file b->fd is and which is about to be initialised, and the others.
 */
static uint64_t token_mark(const struct wlk__bucket *b, unsigned int gen)
{
	char name[WLK_SHM_NAME_MAX];
	uint64_t mark = wlk__token_mark_fd(b->fd);

	for (unsigned int i = 0; i < WLK_MAX_GENERATIONS; i++) {
		unsigned int mode;
		uint64_t t;
		int fd;

		if (i == gen)
			continue;
		wlk__generation_name(name, b->base_name, i);
		/* Non-blocking: a FIFO squatting the name is not waited on. */
		fd = shm_open(name, O_RDONLY | O_NONBLOCK, 0);
		if (fd < 0)
			continue;
		if (check_file(fd, ALLOWED_MODE, &mode) == 0) {
			t = wlk__token_mark_fd(fd);
			if (t > mark)
				mark = t;
		}
		close(fd);
	}
	return mark;
}

/* One attempt; -EAGAIN asks the caller to start over. */
static int attach_once(struct wlk__bucket *b, const char *origin,
		       const struct wlk_manager_options *o,
		       const struct wlk__geo *g, unsigned int perm,
		       unsigned int gen)
{
	bool created = true;
	int rc;

	b->fd = shm_open(b->shm_name, O_RDWR | O_CREAT | O_EXCL, perm);
	if (b->fd < 0 && errno == EEXIST) {
		created = false;
		b->fd = shm_open(b->shm_name, O_RDWR, 0);
		if (b->fd < 0 && errno == ENOENT)
			return -EAGAIN; /* removed meanwhile */
	}
	if (b->fd < 0)
		return open_error(b->shm_name, errno);
	/* shm_open() applied the umask; the mode must be exactly perm. */
	if (created && fchmod(b->fd, perm) < 0)
		return wlk__errno(errno);
	rc = check_file(b->fd, perm, &b->mode);
	if (rc)
		return rc;
	rc = wlk__ofd_lock(b->fd, F_WRLCK, WLK_LOCK_INIT, true);
	if (rc)
		return rc;
	if (!name_is_fd(b->shm_name, b->fd))
		return -EAGAIN; /* unlinked between open and lock */
	rc = wlk__ofd_lock(b->fd, F_WRLCK, WLK_LOCK_ATTACH, false);
	if (rc == 0 && superseded(b, gen)) {
		/* Its successor may be in use: re-creating this one would
		 * split the bucket in two. */
		rc = SEG_SUPERSEDED;
	} else if (rc == 0) {
		/* Nobody is attached: whatever is there is stale. */
		rc = create(b, origin, o, g, token_mark(b, gen));
		/* Not sized (ENOSPC) or not initialised, it would stay as a
		 * damaged file; under both locks it is ours alone. Openers
		 * waiting for the init lock find the name gone and retry. */
		if (rc)
			shm_unlink(b->shm_name);
		else
			rc = wlk__ofd_lock(b->fd, F_RDLCK, WLK_LOCK_ATTACH,
					   false);
	} else if (rc == -EBUSY) {
		rc = attach_existing(b, origin, o);
	}
	if (!rc)
		rc = wlk__ofd_lock(b->fd, F_UNLCK, WLK_LOCK_INIT, false);
	return rc;
}

/*
 * wlk__segment_attach() - open or create the segment named b->shm_name and
 * map it; on success b->fd, b->base, b->hdr and b->geo are set, and the
 * attach lock is held for as long as b->fd is open.
 */
int wlk__segment_attach(struct wlk__bucket *b, const char *origin,
			const struct wlk_manager_options *o)
{
	unsigned int perm;
	struct wlk__geo g;
	int rc;

	rc = options_perm(o, &perm);
	if (rc)
		return rc;
	rc = geo_compute(o && o->max_names ? o->max_names
					   : WLK_DEFAULT_MAX_NAMES,
			 o && o->max_requests ? o->max_requests
					      : WLK_DEFAULT_MAX_REQUESTS,
			 o && o->max_name_len ? o->max_name_len
					      : WLK_DEFAULT_MAX_NAME_LEN, &g);
	if (rc)
		return rc;
	for (unsigned int gen = 0; gen < WLK_MAX_GENERATIONS; gen++) {
		wlk__generation_name(b->shm_name, b->base_name, gen);
		rc = -EAGAIN;
		for (int i = 0; i < ATTACH_RETRIES; i++) {
			rc = attach_once(b, origin, o, &g, perm, gen);
			if (rc)
				wlk__segment_detach(b);
			if (rc != -EAGAIN)
				break;
		}
		if (rc == SEG_FOREIGN || rc == SEG_BROKEN ||
		    rc == SEG_SUPERSEDED)
			continue; /* detached already */
		if (rc || !b->hdr)
			return rc ? rc : WLK_ECORRUPT;
		return 0;
	}
	return WLK_ECORRUPT;
}

void wlk__segment_detach(struct wlk__bucket *b)
{
	if (b->base)
		munmap(b->base, b->geo.size);
	if (b->fd >= 0)
		close(b->fd); /* drops the OFD locks of this description */
	b->base = NULL;
	b->hdr = NULL;
	b->fd = -1;
}

/* Unlink a segment nobody is attached to. */
static int remove_one(const char *shm_name)
{
	unsigned int mode;
	int fd, rc;

	fd = shm_open(shm_name, O_RDWR, 0);
	if (fd < 0)
		return open_error(shm_name, errno);
	rc = check_file(fd, ALLOWED_MODE, &mode);
	if (!rc)
		rc = wlk__ofd_lock(fd, F_WRLCK, WLK_LOCK_INIT, true);
	if (!rc)
		rc = wlk__ofd_lock(fd, F_WRLCK, WLK_LOCK_ATTACH, false);
	if (!rc && !name_is_fd(shm_name, fd))
		rc = -ENOENT; /* somebody else removed it first */
	if (!rc && shm_unlink(shm_name) < 0)
		rc = wlk__errno(errno);
	close(fd);
	return rc;
}

/* Unlink every generation of a bucket's segment. */
int wlk__segment_remove(const char *base_name)
{
	char name[WLK_SHM_NAME_MAX];
	int rc = -ENOENT;

	for (unsigned int gen = 0; gen < WLK_MAX_GENERATIONS; gen++) {
		int r;

		wlk__generation_name(name, base_name, gen);
		r = remove_one(name);
		if (r == -ENOENT)
			continue;
		if (r)
			return r;
		rc = 0;
	}
	return rc;
}
