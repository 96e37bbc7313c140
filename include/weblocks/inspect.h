/* SPDX-License-Identifier: MIT */
/*
 * weblocks/inspect.h - look inside bucket segments (what shm-inspect uses).
 *
 * OVERVIEW
 *
 * A debugging interface, in the spirit of lslocks(8) and LMDB's mdb_stat:
 * find this user's weblocks segments, and copy out everything a segment
 * holds - its header, the processes attached (agents) and whether each is
 * alive, the managers (clients), and every held, pending and stolen
 * request with its fencing token and times.
 *
 * By default a segment is opened and mapped read-only and no lock is taken,
 * so inspection works while a process is stuck holding the segment mutex,
 * and never changes anything; the copy may then catch an operation halfway.
 * With WLK_INSPECT_LOCKED the copy is made under the segment mutex and is
 * consistent; taking the mutex repairs the segment first if its previous
 * owner died inside the critical section (as any process of the bucket
 * would).
 *
 * Everything read from a segment is bounded before use: a truncated,
 * foreign, corrupt or newer segment gives an error, never a crash. One
 * hazard remains that no check can rule out: a segment truncated by
 * another process *while* it is mapped makes reads beyond the new end
 * raise SIGBUS. shm-inspect handles that signal; other tools should too.
 *
 * Times: the *_realtime_ns fields are CLOCK_REALTIME; requested_ns,
 * granted_ns and now_ns are CLOCK_MONOTONIC (comparable across processes of
 * one boot).
 *
 * The structures below are allocated by the library; later versions may
 * append fields to them.
 */
#ifndef WEBLOCKS_INSPECT_H
#define WEBLOCKS_INSPECT_H

#include <weblocks.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Flags of wlk_inspect_open() and wlk_inspect_open_segment(). */
#define WLK_INSPECT_LOCKED 0x1u /* copy under the segment mutex */

struct wlk_inspect; /* one open segment */

/* Liveness of an agent, read from its lifeline without taking it. */
enum wlk_liveness {
	WLK_ALIVE = 0,   /* its lifeline is held by a thread that exists */
	WLK_DEAD = 1,    /* the kernel marked its lifeline owner-dead, or
			    nothing holds it: it will be reaped */
	WLK_UNKNOWN = 2, /* cannot tell (another PID namespace) */
};

/* State of a request. */
enum wlk_request_state {
	WLK_REQ_HELD = 0,
	WLK_REQ_PENDING = 1,
	WLK_REQ_STOLEN = 2, /* stolen; its holder has not released it yet */
};

/**
 * struct wlk_inspect_header - what a segment says about itself.
 * @path:            its file, /dev/shm/wlk<version>-<uid>-<hash>[~<gen>].
 * @generation:      0, or the generation that replaced a poisoned one.
 * @layout_version:  the segment format version.
 * @segment_size:    bytes.
 * @created_realtime_ns: when it was (re)initialised.
 * @origin:          the bucket's origin.
 * @bucket:          the bucket's name.
 * @partition:       the bucket's partition.
 * @poisoned:        found unrepairable, or its state is damaged: its users
 *                   get WLK_ECORRUPT, new openers a new generation.
 * @needs_repair:    an operation found a bad index; the next locker
 *                   repairs.
 * @recovery_epoch:  repairs so far.
 * @reaped_agents:   dead processes reaped so far.
 * @last_token:      the largest fencing token given out so far, or the
 *                   value this segment's tokens start above (see
 *                   wlk_lock_token()) if that is larger.
 * @max_agents:      capacity of the agent (process) table.
 * @max_clients:     capacity of the client (manager) table.
 * @max_names:       capacity of the name table.
 * @max_requests:    capacity of the request table.
 * @max_name_len:    longest name, in bytes.
 * @agents:          agents in use.
 * @clients:         clients in use.
 * @names:           names in use.
 * @requests:        requests in use (held, pending or stolen; not the
 *                   slots managers keep in reserve for the fast path).
 * @mutex_owner_tid: thread holding the segment mutex, or 0.
 * @mutex_owner_dead: that thread died holding it (the next locker repairs).
 * @locked:          the copy was made under the segment mutex.
 * @now_ns:          CLOCK_MONOTONIC when the copy was made.
 */
struct wlk_inspect_header {
	const char *path;
	unsigned int generation;
	uint32_t layout_version;
	uint64_t segment_size;
	uint64_t created_realtime_ns;
	const char *origin;
	const char *bucket;
	const char *partition;
	bool poisoned;
	bool needs_repair;
	uint64_t recovery_epoch;
	uint64_t reaped_agents;
	uint64_t last_token;
	uint32_t max_agents, max_clients, max_names, max_requests;
	uint32_t max_name_len;
	uint32_t agents, clients, names, requests;
	pid_t mutex_owner_tid;
	bool mutex_owner_dead;
	bool locked;
	uint64_t now_ns;
};

/**
 * struct wlk_inspect_agent - a process attached to the segment.
 * @slot:        its slot in the agent table.
 * @pid:         its process id (in the segment creator's PID namespace).
 * @anchor_tid:  the thread holding its lifeline, 0 if none.
 * @attached_realtime_ns: when it attached.
 * @liveness:    checked now, from its lifeline and the thread's existence.
 */
struct wlk_inspect_agent {
	uint32_t slot;
	pid_t pid;
	pid_t anchor_tid;
	uint64_t attached_realtime_ns;
	enum wlk_liveness liveness;
};

/**
 * struct wlk_inspect_client - a manager (clientId).
 * @slot:      its slot in the client table.
 * @agent:     index into wlk_inspect_snapshot.agents, or -1.
 * @pid:       its process.
 * @client_id: its clientId.
 * @opened_realtime_ns: when it was opened.
 */
struct wlk_inspect_client {
	uint32_t slot;
	int agent;
	pid_t pid;
	const char *client_id;
	uint64_t opened_realtime_ns;
};

/**
 * struct wlk_inspect_request - a held, pending or stolen request.
 * @slot:         its slot in the request table.
 * @name:         the lock name (NUL-terminated after @name_len bytes), or
 *                NULL for a stolen request whose name entry was reused.
 * @name_len:     length of @name.
 * @mode:         %WLK_EXCLUSIVE or %WLK_SHARED.
 * @state:        held, pending or stolen.
 * @position:     pending: 0-based place in its name's queue; else 0.
 * @client:       index into wlk_inspect_snapshot.clients, or -1.
 * @client_id:    the requesting manager's clientId ("" if unknown).
 * @pid:          the requesting process (0 if unknown).
 * @token:        fencing token (0 while pending).
 * @requested_ns: CLOCK_MONOTONIC when it was requested, while pending; 0
 *                once granted (the segment keeps one time per request).
 * @granted_ns:   CLOCK_MONOTONIC when it was granted (0 while pending).
 */
struct wlk_inspect_request {
	uint32_t slot;
	const char *name;
	size_t name_len;
	enum wlk_mode mode;
	enum wlk_request_state state;
	uint32_t position;
	int client;
	const char *client_id;
	pid_t pid;
	uint64_t token;
	uint64_t requested_ns;
	uint64_t granted_ns;
};

/**
 * struct wlk_inspect_snapshot - a copy of a segment's state.
 * @header:     the header.
 * @agents:     the attached processes, @n_agents of them.
 * @n_agents:   count of @agents.
 * @clients:    the managers, @n_clients of them.
 * @n_clients:  count of @clients.
 * @requests:   per name: its held requests, then its queue in order; then
 *              the stolen ones. @n_requests of them.
 * @n_requests: count of @requests.
 * @scopes:     per request, as @requests: 0 for a single-name request; for
 *              a member of a scope (weblocks.h, SCOPES), a value its
 *              entries under each of the scope's names share (its first
 *              name's slot + 1, and that slot's generation << 32).
 * @arena_bytes: bytes of the segment kept for the text of names longer
 *              than 16 bytes and of client ids (struct wlk_manager_options
 *              arena_bytes, as its creator made it), in 32-byte chunks.
 * @arena_used: bytes of it in use, whole chunks.
 *
 * Members are only ever added at the end: the library allocates the
 * struct, so a program built against an older header reads what it knows.
 */
struct wlk_inspect_snapshot {
	struct wlk_inspect_header header;
	struct wlk_inspect_agent *agents;
	size_t n_agents;
	struct wlk_inspect_client *clients;
	size_t n_clients;
	struct wlk_inspect_request *requests;
	size_t n_requests;
	uint64_t *scopes;
	uint64_t arena_bytes;
	uint64_t arena_used;
};

/**
 * typedef wlk_inspect_list_cb - receives one segment file.
 * @path: its path, valid during the call.
 * @arg:  the argument given to wlk_inspect_list().
 *
 * Return: 0 to go on, anything else to stop the listing with that value.
 */
typedef int (*wlk_inspect_list_cb)(const char *path, void *arg);

/**
 * wlk_inspect_list() - Find this user's weblocks segments.
 * @cb:  called once per segment file owned by the effective user, of any
 *       layout version (opening another version's gives %WLK_EFORMAT), in
 *       no particular order.
 * @arg: passed to @cb.
 *
 * Context: thread-safe; reads /dev/shm.
 *
 * Return: 0, the first non-zero value @cb returned, or a negative errno
 * value from opendir() (%WLK_EINVAL if @cb is NULL).
 */
WLK_EXPORT int wlk_inspect_list(wlk_inspect_list_cb cb, void *arg);

/**
 * wlk_inspect_open() - Open the current segment of a bucket.
 * @origin: as for wlk_manager_open().
 * @o:      only @bucket and @partition are used; NULL for the defaults.
 * @flags:  0 or %WLK_INSPECT_LOCKED.
 * @out:    receives the handle; written only on success.
 *
 * The current segment is the first generation that belongs to the bucket
 * and is not poisoned (or the last one, if all are).
 *
 * Context: thread-safe. Never creates a segment.
 *
 * Return: 0, or
 * * %WLK_EINVAL, %WLK_ENAMETOOLONG, %WLK_ESECURITY - as for
 *   wlk_manager_open(), or unknown @flags.
 * * -ENOENT - the bucket has no segment.
 * * the codes of wlk_inspect_open_segment().
 */
WLK_EXPORT WLK_WARN_UNUSED int
wlk_inspect_open(const char *origin, const struct wlk_manager_options *o,
		 unsigned int flags, struct wlk_inspect **out);

/**
 * wlk_inspect_open_segment() - Open a segment by file name or path.
 * @name:  "/dev/shm/wlk1-...", "/wlk1-..." or "wlk1-...".
 * @flags: 0 or %WLK_INSPECT_LOCKED.
 * @out:   receives the handle; written only on success.
 *
 * Validates the header exactly as the library does before attaching.
 *
 * Context: thread-safe.
 *
 * Return: 0, or
 * * %WLK_EINVAL - a NULL argument, unknown @flags, or @name is not a
 *   segment name.
 * * -ENOENT, -EACCES and other -errno values from open(2) or mmap(2).
 * * %WLK_ESECURITY - not a regular file, or owned by another user.
 * * %WLK_ECORRUPT - truncated, not a weblocks segment, or a header whose
 *   geometry does not add up.
 * * %WLK_EFORMAT - another layout version or ABI (such as a newer
 *   library's segment).
 */
WLK_EXPORT WLK_WARN_UNUSED int
wlk_inspect_open_segment(const char *name, unsigned int flags,
			 struct wlk_inspect **out);

/**
 * wlk_inspect_close() - Unmap and free.
 * @in: the handle, or NULL.
 */
WLK_EXPORT void wlk_inspect_close(struct wlk_inspect *in);

/**
 * wlk_inspect_snapshot() - Copy the segment's state.
 * @in:  the handle.
 * @out: receives the copy, to free with wlk_inspect_snapshot_free();
 *       written only on success.
 *
 * Without %WLK_INSPECT_LOCKED the copy is taken without the mutex: lists
 * are walked with bounds, so an operation caught halfway shows as a
 * request missing or listed oddly, never as a crash.
 *
 * Context: thread-safe; with %WLK_INSPECT_LOCKED takes the segment mutex
 * briefly.
 *
 * Return: 0, %WLK_EINVAL, -ENOMEM, or %WLK_ECORRUPT: locked, the segment is
 * poisoned or fails repair; unlocked, its lists hold more entries than its
 * tables can (it is being scribbled on).
 *
 * With %WLK_INSPECT_LOCKED this waits for the segment mutex for as long as
 * its holder keeps it (a holder stopped with SIGSTOP blocks it). A SIGBUS
 * raised inside (see OVERVIEW) leaves what the call allocated behind.
 */
WLK_EXPORT WLK_WARN_UNUSED int
wlk_inspect_snapshot(struct wlk_inspect *in,
		     struct wlk_inspect_snapshot **out);

/**
 * wlk_inspect_snapshot_free() - Free a copy.
 * @s: the copy, or NULL.
 */
WLK_EXPORT void wlk_inspect_snapshot_free(struct wlk_inspect_snapshot *s);

/**
 * wlk_inspect_check() - Check every invariant of the segment.
 * @in:  the handle.
 * @cb:  called once per violation (at most 64, REPORT_KEPT in
 *       lib/format/tunables.h, then a summary line); or NULL.
 * @arg: passed to @cb.
 *
 * The checks of wlk_manager_validate(). Without %WLK_INSPECT_LOCKED they
 * run without the mutex, so a busy segment may show passing violations;
 * check again, or lock, before concluding.
 *
 * Context: thread-safe; allocates.
 *
 * Return: 0 if every invariant holds, %WLK_ECORRUPT if not (each reported
 * to @cb), %WLK_EINVAL, or -ENOMEM.
 */
WLK_EXPORT int wlk_inspect_check(struct wlk_inspect *in, wlk_violation_cb cb,
				 void *arg);

#ifdef __cplusplus
}
#endif

#endif /* WEBLOCKS_INSPECT_H */
