/* SPDX-License-Identifier: MIT */
/*
 * segment.c - creating, attaching and removing a bucket's segment (the
 * protocol is described in layout.h); its header is header.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attach.h"

#define SHM_DIR "/dev/shm"
#define DEFAULT_MODE 0600u
#define ALLOWED_MODE 0666u
/* The bits every segment has: its owner's processes open it read-write. */
#define OWNER_MODE 0600u
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
	rc = wlk__header_fill(h, origin, o, g, mark);
	if (rc)
		return rc;
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
	    (uint64_t)st.st_size > WLK__MAX_SEGMENT_SIZE)
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
	if (rc == SEG_BROKEN)
		wlk__segment_poison(b);
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
/* The whole TEXT chunks @bytes of arena make (0: the default); at least
 * 1 for a nonzero size, which the geometry then refuses if too few. */
static uint32_t arena_chunks(uint32_t bytes)
{
	return bytes && bytes < WLK_CHUNK_SIZE ? 1 : bytes / WLK_CHUNK_SIZE;
}

int wlk__segment_attach(struct wlk__bucket *b, const char *origin,
			const struct wlk_manager_options *o)
{
	unsigned int perm;
	struct wlk__geo g;
	int rc;

	rc = options_perm(o, &perm);
	if (rc)
		return rc;
	rc = wlk__geo_compute(o && o->max_names ? o->max_names
					   : WLK_DEFAULT_MAX_NAMES,
			 o && o->max_requests ? o->max_requests
					      : WLK_DEFAULT_MAX_REQUESTS,
			 o && o->max_name_len ? o->max_name_len
					      : WLK_DEFAULT_MAX_NAME_LEN,
			 o ? arena_chunks(o->arena_bytes) : 0, &g);
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
