/* SPDX-License-Identifier: MIT */
/*
 * inspect.c - finding, opening and validating segments for inspection
 * (weblocks/inspect.h); the copy itself is in inspect_copy.c.
 *
 * An inspector is not an agent: it never registers, never creates or
 * re-initialises a segment, and by default maps it read-only and takes no
 * lock at all. With WLK_INSPECT_LOCKED it maps the segment read-write to
 * take the mutex, and holds the attach lock (shared) so that nobody
 * re-initialises the segment under it while it looks.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inspect_internal.h"

#define SHM_DIR "/dev/shm"

/*
 * Whether a file name is a segment name of ours, of any layout version:
 * "wlk<digits>-<euid>-<hash>". Another version's segment is listed too;
 * opening it gives WLK_EFORMAT.
 */
static bool ours(const char *name)
{
	char uid[24];
	const char *p = name + 3;

	if (strncmp(name, "wlk", 3) != 0 || !(*p >= '0' && *p <= '9'))
		return false;
	while (*p >= '0' && *p <= '9')
		p++;
	snprintf(uid, sizeof(uid), "-%u-", (unsigned int)geteuid());
	return strncmp(p, uid, strlen(uid)) == 0;
}

WLK_EXPORT int wlk_inspect_list(wlk_inspect_list_cb cb, void *arg)
{
	char path[sizeof(SHM_DIR) + 256 + 1];
	struct dirent *d;
	DIR *dir;
	int rc = 0;

	if (!cb)
		return WLK_EINVAL;
	dir = opendir(SHM_DIR);
	if (!dir)
		return wlk__errno(errno);
	while (!rc && (d = readdir(dir))) {
		struct stat st;

		if (!ours(d->d_name))
			continue;
		snprintf(path, sizeof(path), SHM_DIR "/%s", d->d_name);
		if (lstat(path, &st) || !S_ISREG(st.st_mode) ||
		    st.st_uid != geteuid())
			continue;
		rc = cb(path, arg);
	}
	closedir(dir);
	return rc;
}

/* "/dev/shm/x", "/x" and "x" all name /dev/shm/x; nothing else does. */
static int segment_path(const char *name, char *path, size_t size)
{
	const char *base = name;

	if (!strncmp(name, SHM_DIR "/", sizeof(SHM_DIR)))
		base = name + sizeof(SHM_DIR);
	else if (name[0] == '/')
		base = name + 1;
	if (!*base || strchr(base, '/') || strlen(base) >= WLK_SHM_NAME_MAX)
		return WLK_EINVAL;
	snprintf(path, size, SHM_DIR "/%s", base);
	return 0;
}

/* The generation a segment name says it is ("...~<g>"), 0 if none. */
static unsigned int name_generation(const char *path)
{
	const char *tilde = strrchr(path, '~');

	return tilde ? (unsigned int)strtoul(tilde + 1, NULL, 10) : 0;
}

static int map_segment(struct wlk_inspect *in, unsigned int flags)
{
	bool rw = flags & WLK_INSPECT_LOCKED;
	struct stat st;
	int rc;

	/* O_NONBLOCK: a FIFO planted under a segment's name must not hang
	 * the inspector; a regular file ignores the flag. */
	in->b.fd = open(in->path, (rw ? O_RDWR : O_RDONLY) | O_NOFOLLOW |
					  O_CLOEXEC | O_NONBLOCK);
	/* A directory (EISDIR when opened for writing) or a symbolic link
	 * (ELOOP) is not a segment of ours, as a FIFO is not. */
	if (in->b.fd < 0 && (errno == EISDIR || errno == ELOOP))
		return WLK_ESECURITY;
	if (in->b.fd < 0)
		return wlk__errno(errno);
	if (fstat(in->b.fd, &st) < 0)
		return wlk__errno(errno);
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
		return WLK_ESECURITY;
	/* Mapping beyond the end would raise SIGBUS on access. */
	if ((size_t)st.st_size < WLK_HEADER_SIZE)
		return WLK_ECORRUPT;
	if (rw) {
		rc = wlk__ofd_lock(in->b.fd, F_RDLCK, WLK_LOCK_ATTACH, false);
		if (rc)
			return rc;
	}
	in->b.base = mmap(NULL, (size_t)st.st_size,
			  PROT_READ | (rw ? PROT_WRITE : 0), MAP_SHARED,
			  in->b.fd, 0);
	if (in->b.base == MAP_FAILED) {
		in->b.base = NULL;
		return wlk__errno(errno);
	}
	in->b.hdr = (struct wlk_seg_header *)in->b.base;
	in->b.geo.size = (size_t)st.st_size;
	rc = wlk__header_check(&in->b, (size_t)st.st_size);
	return rc == WLK__SEG_BROKEN ? WLK_ECORRUPT : rc;
}

WLK_EXPORT int wlk_inspect_open_segment(const char *name, unsigned int flags,
					struct wlk_inspect **out)
{
	struct wlk_inspect *in;
	int rc;

	if (!name || !out || (flags & ~WLK_INSPECT_LOCKED))
		return WLK_EINVAL;
	in = calloc(1, sizeof(*in));
	if (!in)
		return -ENOMEM;
	in->b.fd = -1;
	in->b.agent = WLK_NIL; /* not an agent: reaping spares nobody */
	in->flags = flags;
	rc = segment_path(name, in->path, sizeof(in->path));
	if (!rc)
		rc = map_segment(in, flags);
	if (rc) {
		wlk_inspect_close(in);
		return rc;
	}
	in->generation = name_generation(in->path);
	*out = in;
	return 0;
}

/* Whether an open segment is the bucket's. */
static bool belongs(const struct wlk_inspect *in, const char *origin,
		    const struct wlk_manager_options *o)
{
	return wlk__header_ident_eq(in->b.hdr, origin, o);
}

WLK_EXPORT int wlk_inspect_open(const char *origin,
				const struct wlk_manager_options *o,
				unsigned int flags, struct wlk_inspect **out)
{
	char base[WLK_SHM_NAME_MAX], name[WLK_SHM_NAME_MAX];
	struct wlk_manager_options copy;
	struct wlk_inspect *found = NULL;
	uint8_t key[WLK_KEY_BYTES];
	int rc, last_rc = -ENOENT;

	if (!out || (flags & ~WLK_INSPECT_LOCKED) ||
	    wlk__manager_options_read(&o, &copy))
		return WLK_EINVAL;
	rc = wlk__bucket_key(origin, o, key, base);
	if (rc)
		return rc;
	for (unsigned int gen = 0; gen < WLK_MAX_GENERATIONS; gen++) {
		struct wlk_inspect *in;

		wlk__generation_name(name, base, gen);
		rc = wlk_inspect_open_segment(name, flags, &in);
		if (rc) {
			if (rc != -ENOENT)
				last_rc = rc;
			continue;
		}
		if (!belongs(in, origin, o)) {
			wlk_inspect_close(in);
			continue;
		}
		wlk_inspect_close(found);
		found = in;
		if (uatomic_read(&in->b.hdr->seg_state) == WLK_SEG_READY)
			break;
	}
	if (!found)
		return last_rc;
	*out = found;
	return 0;
}

WLK_EXPORT void wlk_inspect_close(struct wlk_inspect *in)
{
	if (!in)
		return;
	wlk__segment_detach(&in->b);
	free(in);
}

WLK_EXPORT int wlk_inspect_check(struct wlk_inspect *in, wlk_violation_cb cb,
				 void *arg)
{
	if (!in)
		return WLK_EINVAL;
	return wlk__validate(&in->b, in->flags & WLK_INSPECT_LOCKED, cb, arg);
}
