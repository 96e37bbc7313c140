/* SPDX-License-Identifier: MIT */
/* shm-inspect.h - what the files of the shm-inspect tool share. */
#ifndef SHM_INSPECT_H
#define SHM_INSPECT_H

#include <stdbool.h>
#include <stdio.h>

#include <weblocks.h>
#include <weblocks/inspect.h>

#include "json.h"

/* The JSON format's name and version (documented in shm-inspect(1)). */
#define FORMAT_ID "weblocks-shm-inspect/1"

/* Exit codes (documented in shm-inspect(1) and --help). */
enum {
	EXIT_OK = 0,
	EXIT_USAGE = 1,
	EXIT_OPEN = 2,    /* not found, permission, foreign owner */
	EXIT_DAMAGED = 3, /* inconsistent or damaged segment */
	EXIT_VERSION = 4, /* incompatible layout version (WLK_EFORMAT) */
	EXIT_DEADLOCK = 5, /* check: sound, but clients wait for each other */
	EXIT_STALE = 6,    /* check: locks held by dead processes, or no live
			      process attached (remove.c) */
	EXIT_BUSY = 7,     /* rm: in use, and no --force */
};

/* Not a library code: the segment shrank while mapped (SIGBUS). */
#define ERR_SIGBUS (-100000)

/* What to open: a bucket (origin + options) or a segment file. */
struct target {
	const char *arg;
	bool segment;
	bool guessed; /* segment told by the argument's form, not an option */
	struct wlk_manager_options mo;
	unsigned int flags; /* WLK_INSPECT_LOCKED */
};

/* shm-inspect.c */
extern const char *progname;
/* After an error opening @t, a line saying how to give another kind. */
void target_hint(FILE *f, const struct target *t, int rc);
/* A SEGMENT argument's file name in /dev/shm (NAME, /NAME, /dev/shm/NAME). */
const char *segment_base(const char *arg);

/* guard.c */
/* Install the SIGBUS handler the guarded calls below rely on. */
void guard_init(void);
int exit_status(int rc);
const char *error_text(int rc);
const char *error_name(int rc);
/* "shm-inspect: WHAT: message (NAME)", WHAT escaped, on stderr. */
void report(const char *what, int rc);
/* The library calls, with a SIGBUS from the mapping turned into an error. */
int open_target(const struct target *t, struct wlk_inspect **in);
int open_segment(const char *path, struct wlk_inspect **in);
int take_snapshot(struct wlk_inspect *in, bool locked,
		  struct wlk_inspect_snapshot **s);
int run_check(struct wlk_inspect *in, bool locked, wlk_violation_cb cb,
	      void *arg);

/* render.c: what both renderings use */
struct counts {
	size_t alive, dead, unknown, held, pending, stolen;
};
const char *liveness_name(enum wlk_liveness l);
/* Room for a process name (the kernel's TASK_COMM_LEN is 16). */
#define COMM_SIZE 64
/* A live agent's process name, from /proc/PID/comm (lslocks' COMMAND),
 * into @buf; NULL if dead, unknown or unreadable. */
const char *agent_command(const struct wlk_inspect_agent *a, char *buf,
			  size_t size);
const char *state_name(const struct wlk_inspect_header *h);
const char *mode_name(enum wlk_mode m);
const char *base_name(const char *path);
void count_snapshot(const struct wlk_inspect_snapshot *s, struct counts *c);
/* The agent of a request's client, or NULL. */
const struct wlk_inspect_agent *
req_agent(const struct wlk_inspect_snapshot *s,
	  const struct wlk_inspect_request *q);
/* The end of the run of requests on the name of request @i. */
size_t name_end(const struct wlk_inspect_snapshot *s, size_t i);
/* Whether holder @h keeps pending @p from being granted. */
bool conflicts(const struct wlk_inspect_request *p,
	       const struct wlk_inspect_request *h);
/* *@d = @now - @then; false when @then is unset or in the future. */
bool since(uint64_t now, uint64_t then, uint64_t *d);
/* A segment's identity members (origin .. size), as list and dump give. */
void json_identity(struct json *j, const struct wlk_inspect_header *h);
/* The members of a dump document, into its open top-level object. */
void dump_json(struct json *j, const struct wlk_inspect_snapshot *s);

/* text.c */
void dump_text(FILE *f, const struct wlk_inspect_snapshot *s);

/* deadlock.c */
long find_deadlocks(const struct wlk_inspect_snapshot *s,
		    void (*cb)(const struct wlk_inspect_snapshot *s,
			       const size_t *req, const size_t *by, size_t n,
			       void *arg),
		    void *arg);
long text_deadlocks(FILE *f, const struct wlk_inspect_snapshot *s);
void json_deadlocks(struct json *j, const struct wlk_inspect_snapshot *s);

/* list.c, check.c and remove.c */
int cmd_list(bool json);
int cmd_check(const struct target *t, bool repair);
int cmd_rm(const struct target *t, bool force);
int cmd_gc(bool dry_run);
/* No process attached is alive (all dead, or none): nobody uses it. */
bool segment_stale(const struct wlk_inspect_snapshot *s);

#endif /* SHM_INSPECT_H */
