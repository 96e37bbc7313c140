/* SPDX-License-Identifier: MIT */
/*
 * guard.c - shm-inspect's calls into the library, guarded against SIGBUS,
 * and what their errors mean to a person and to the exit status.
 */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "shm-inspect.h"

int exit_status(int rc)
{
	switch (rc) {
	case 0:
		return EXIT_OK;
	case WLK_ECORRUPT:
	case ERR_SIGBUS:
		return EXIT_DAMAGED;
	case WLK_EFORMAT:
		return EXIT_VERSION;
	default:
		return EXIT_OPEN;
	}
}

const char *error_text(int rc)
{
	switch (rc) {
	case ERR_SIGBUS:
		return "segment truncated while mapped (damaged)";
	case -ENOENT:
		return "no such segment";
	case WLK_ECORRUPT:
		return "damaged segment: truncated, not a weblocks segment, "
		       "inconsistent header, or poisoned";
	case WLK_EFORMAT:
		return "incompatible layout version or ABI (made by another "
		       "build of libweblocks)";
	case WLK_ESECURITY:
		return "owned by another user, not a regular file, or an "
		       "opaque origin";
	default:
		return wlk_strerror(rc);
	}
}

const char *error_name(int rc)
{
	return rc == ERR_SIGBUS ? "SIGBUS" : wlk_error_name(rc);
}

void report(const char *what, int rc)
{
	fprintf(stderr, "%s: ", progname);
	esc_c(stderr, what, strlen(what));
	fprintf(stderr, ": %s (%s)\n", error_text(rc), error_name(rc));
}

/*
 * A peer that truncates a segment while we have it mapped makes our reads
 * beyond the new end raise SIGBUS; no check before the read can rule that
 * out. The handler jumps back to the guarded call, which reports a damaged
 * segment. What the library had allocated in that call is lost (memory,
 * and when the signal hits while it opens the file, a descriptor and a
 * mapping): little, once per damaged look, even in a long watch.
 */
static sigjmp_buf bus_env;
static volatile sig_atomic_t bus_armed;

static void on_sigbus(int sig)
{
	(void)sig;
	if (bus_armed) {
		bus_armed = 0;
		siglongjmp(bus_env, 1);
	}
	/* Not a guarded read: die of it, as without a handler. */
	signal(SIGBUS, SIG_DFL);
}

/*
 * The library opens a segment file without O_NONBLOCK and checks its type
 * afterwards, so a FIFO left in /dev/shm under a segment's name would
 * block us forever in open(2). Look first (the same name rules).
 */
static int not_a_file(const char *name)
{
	char path[sizeof("/dev/shm/") + NAME_MAX + 1];
	const char *base = segment_base(name);
	struct stat st;

	if (strlen(base) > NAME_MAX)
		return 0; /* the library refuses it */
	snprintf(path, sizeof(path), "/dev/shm/%s", base);
	if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) &&
	    !S_ISLNK(st.st_mode)) /* O_NOFOLLOW refuses links */
		return WLK_ESECURITY;
	return 0;
}

void guard_init(void)
{
	struct sigaction sa = {.sa_handler = on_sigbus};

	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
}

enum op { OP_OPEN, OP_OPEN_SEGMENT, OP_SNAPSHOT, OP_CHECK };

struct call {
	enum op op;
	const struct target *t;
	const char *path;
	struct wlk_inspect *in;
	struct wlk_inspect **inp;
	struct wlk_inspect_snapshot **snap;
	wlk_violation_cb cb;
	void *arg;
};

static int dispatch(struct call *c)
{
	int rc;

	switch (c->op) {
	case OP_OPEN:
		if (c->t->segment) {
			rc = not_a_file(c->t->arg);
			return rc ? rc :
				    wlk_inspect_open_segment(c->t->arg,
							     c->t->flags,
							     c->inp);
		}
		return wlk_inspect_open(c->t->arg, &c->t->mo, c->t->flags,
					c->inp);
	case OP_OPEN_SEGMENT:
		rc = not_a_file(c->path);
		return rc ? rc : wlk_inspect_open_segment(c->path, 0, c->inp);
	case OP_SNAPSHOT:
		return wlk_inspect_snapshot(c->in, c->snap);
	default:
		return wlk_inspect_check(c->in, c->cb, c->arg);
	}
}

static int guarded(struct call *c, bool locked)
{
	int rc;

	if (sigsetjmp(bus_env, 1)) {
		/*
		 * We may hold the segment mutex: going on would block every
		 * user of the bucket. Exiting hands it to the next locker as
		 * owner-dead, which repairs.
		 */
		if (locked) {
			fprintf(stderr, "%s: %s (SIGBUS) while holding the "
					"segment mutex\n",
				progname, error_text(ERR_SIGBUS));
			exit(EXIT_DAMAGED);
		}
		return ERR_SIGBUS;
	}
	bus_armed = 1;
	rc = dispatch(c);
	bus_armed = 0;
	return rc;
}

int open_target(const struct target *t, struct wlk_inspect **in)
{
	struct call c = {.op = OP_OPEN, .t = t, .inp = in};

	return guarded(&c, false);
}

int open_segment(const char *path, struct wlk_inspect **in)
{
	struct call c = {.op = OP_OPEN_SEGMENT, .path = path, .inp = in};

	return guarded(&c, false);
}

int take_snapshot(struct wlk_inspect *in, bool locked,
		  struct wlk_inspect_snapshot **s)
{
	struct call c = {.op = OP_SNAPSHOT, .in = in, .snap = s};

	return guarded(&c, locked);
}

int run_check(struct wlk_inspect *in, bool locked, wlk_violation_cb cb,
	      void *arg)
{
	struct call c = {.op = OP_CHECK, .in = in, .cb = cb, .arg = arg};

	return guarded(&c, locked);
}

