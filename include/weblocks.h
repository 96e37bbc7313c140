/* SPDX-License-Identifier: MIT */
/*
 * weblocks.h - the W3C Web Locks API for cooperating Linux processes.
 *
 * OVERVIEW
 *
 * libweblocks implements navigator.locks (W3C Web Locks, Working Draft,
 * sections 2-4) for processes on one Linux machine. A program opens the lock
 * manager of an origin bucket with wlk_manager_open() and requests named
 * locks, exclusive or shared, with wlk_request() (callback form) or
 * wlk_acquire()/wlk_release() (handle form). All managers opened for the same
 * (origin, bucket, partition) by processes of the same user share one lock
 * state. That state lives in one POSIX shared-memory segment per bucket,
 * guarded by a robust process-shared mutex; waiters sleep on futex words and
 * are woken by whoever grants them. There is no broker process.
 *
 * How the specification maps to C:
 *
 *  - A promise becomes a blocking call. wlk_request() returns when the
 *    spec's "released promise" would settle; the callback is the spec's
 *    LockGrantedCallback and the lock is held while it runs (the "waiting
 *    promise" settles when it returns).
 *  - An agent is a process. A clientId belongs to one manager handle: two
 *    managers in one process are two clients (like two frames) and exclude
 *    each other.
 *  - AbortSignal is struct wlk_signal. The spec's DOMExceptions are negative
 *    WLK_E* codes; wlk_error_name() gives the DOMException name.
 *  - timeout_ns is an extension: a deadline after which a request that was
 *    not yet granted leaves the queue with WLK_ETIMEDOUT.
 *  - Scopes are an extension from the spec's early draft: one request for a
 *    set of names, granted on all of them at once (SCOPES below).
 *
 * Two more headers: weblocks/async.h, requests that complete through a
 * pollable descriptor, for event loops; weblocks/inspect.h, read-only
 * inspection of segments (what tools/shm-inspect uses).
 *
 * Scheduling follows the spec exactly. Each name has a FIFO queue. A request
 * is grantable when it is first in its queue and, for an exclusive request,
 * no lock is held on the name, or, for a shared request, no exclusive lock
 * is held on it. Grants happen when the state changes (release, abort,
 * steal, close): when wlk_release() returns, the requests it unblocked are
 * already in the held set. A shared request queued behind a queued exclusive
 * one waits, even while only shared locks are held, so writers never starve.
 * Locks are not re-entrant. (With scopes in a bucket, one rule is added:
 * SCOPES below.)
 *
 * CONVENTIONS
 *
 * Functions that can fail return 0 or a negative error code: one of the
 * WLK_E* codes below, or a negated errno value. Out-parameters are written
 * only on success. A call that fails leaves nothing queued or held.
 *
 * TERMINATION MODEL (the spec's "terminate remaining locks and requests")
 *
 *  - A context ends with wlk_manager_close(): its requests are dropped,
 *    then its locks released, and the requests behind them granted (in
 *    that order, for a dead process's contexts too: none of its own
 *    requests is granted on the way out).
 *  - A process ends by dying: any signal (SIGKILL included), a crash,
 *    exit() or _exit() without closing, or exec(). Its locks are released
 *    and its queued requests dropped without anyone calling anything. A
 *    process attached to a bucket is an agent with a lifeline, a robust
 *    mutex in the segment that a library-owned thread (the anchor: one per
 *    process, all signals blocked, started at the first open) keeps locked.
 *    Requests blocked behind a process sleep on its lifeline too, so the
 *    kernel wakes them when it dies; they take over its slot, release its
 *    locks and grant the queue. Measured failover (holder SIGKILLed ->
 *    blocked waiter in another process granted): bench/results.md, part 3
 *    (bench/failover).
 *
 *    The kernel wakes such a waiter early in the holder's exit, before it
 *    frees the holder's memory, and often on the CPU where that teardown
 *    then runs (milliseconds for a large process); Linux's scheduler would
 *    let the woken waiter run only after it. So a thread blocked in
 *    wlk_request() or wlk_acquire() that saw its request first in its
 *    name's queue when it last looked (as it went to sleep, or when woken
 *    to look again, as one queued further back is when it reaches the
 *    head: below; a scope never counts as first), at the scheduler's
 *    first tick since (ticks come every 1 to 10 ms, at HZ=1000 to 100;
 *    half a period later on a kernel booted with skew_tick=1), asks for
 *    the shortest time slice Linux grants
 *    (sched_setattr(2), SCHED_OTHER's sched_runtime, 100 us; Linux 6.12
 *    or later): woken, it preempts what runs there. Its own slice is put
 *    back before the call returns, unless another thread changed its
 *    slice or policy meanwhile (a nice value set meanwhile stays). A
 *    slice as long as the kernel's default is put back as the default
 *    (computed from the online CPUs: if an administrator changed the
 *    default, the thread keeps the old length as its own). Left alone:
 *    threads of other policies (real-time, SCHED_BATCH, SCHED_IDLE), and
 *    every thread on kernels without custom slices, where
 *    sched_setattr() is refused, or in a process whose environment has
 *    WEBLOCKS_WAIT_SLICE=0 (read at its first such wait). A wake-up and
 *    four system calls, a few microseconds, per wait that lasts past a
 *    tick; a wait that ends sooner pays nothing (its timeout is due no
 *    sooner than the tick, which fires it). make bench (part 3) shows
 *    the effect.
 *
 *    A request looks for the processes blocking it among the first 64
 *    holders and requests of its name (WLK_WATCH_WALK in
 *    lib/format/tunables.h), so that queueing costs the same
 *    behind any number of requests; one queued further back is woken
 *    once when it reaches the head of the queue, to watch the processes
 *    ahead of it then (a process that dies further back blocks nobody
 *    before it gets there). A request waiting behind more than 32 other
 *    processes (WLK_WATCH_MAX), behind more than 64 shared holders, or
 *    a scope queued further back than 64, also re-checks every 100 ms
 *    (WLK_RECHECK_NS). Asynchronous requests (weblocks/async.h) are woken
 *    the same way, by exit and exec alike: a library thread sleeps on the
 *    lifelines of their blockers, and the manager's descriptor becomes
 *    readable within milliseconds of the death; beyond 32 blocking
 *    processes per manager (PIDFD_MAX) or in the process (WLK_WATCH_MAX),
 *    or behind more than 64 holders and requests, an event loop also
 *    re-checks every 100 ms. Locks of a dead process
 *    that nobody waits for are released by the next request that would
 *    wait for them, by wlk_query(), or by the next process opening the
 *    bucket.
 *  - Alive: a process stopped (SIGSTOP) or slow keeps its locks; the spec's
 *    remedy is steal. A thread that exits is not a process that died.
 *  - Stopped inside the critical section: calls hold the segment mutex
 *    only briefly, but a process stopped (SIGSTOP, a debugger) while it
 *    holds it keeps it until it continues. Meanwhile a request with a
 *    timeout or an abort signal that is not queued yet gives up on time
 *    (WLK_ETIMEDOUT or the reason, nothing queued; the signal is looked at
 *    every 5 ms, WLK_LOCK_SLICE_NS in lib/format/tunables.h), and what the fast
 *    path can do without the mutex goes on (an uncontended name, while the
 *    manager has a spare slot). Everything else that needs the mutex waits
 *    for it, in every name of the bucket:
 *    requests with neither timeout nor signal (steal included), a queued
 *    request whose timeout passes or whose signal fires (it must leave its
 *    queue first), wlk_release() of a lock not held through the fast
 *    path, wlk_query(), wlk_manager_open(), wlk_manager_close(),
 *    wlk_manager_validate(), and in weblocks/async.h a manager's first
 *    wlk_manager_fd() (or request) and wlk_manager_dispatch() with
 *    requests outstanding. A process stopped while wlk_query() copies the
 *    bucket also holds up the fast path: acquires and releases that
 *    complete during the copy wait for it (wlk_query()). SIGCONT ends it
 *    (so does SIGKILL: the mutex is robust).
 *  - fork(): the child inherits no locks and no managers; inherited handles
 *    return WLK_ESTATE and never block. The parent's death is detected even
 *    while its children live. A manager opened in the child works.
 *  - A process killed inside the segment's critical section leaves the
 *    robust mutex owner-dead: the next locker rebuilds every derived
 *    structure from the per-slot state words, redoes an interrupted steal,
 *    reaps dead agents and wakes every waiter. A segment that cannot be
 *    repaired, or whose state word is damaged, is marked poisoned (its
 *    users get WLK_ECORRUPT) and new openers get a fresh generation of it.
 *  - Not supported: processes in another PID namespace (refused at open
 *    with WLK_ESECURITY: robust mutex owners are namespace-local thread
 *    ids), other users (WLK_ESECURITY), checkpoint/restore (CRIU), and more
 *    than WLK_LIMIT_BUCKETS buckets open at once in one process (WLK_EFULL;
 *    see LIMITS). The library is never unloaded (it is linked -z nodelete:
 *    the anchor runs its code).
 *
 * LIMITS (each refusal is %WLK_EFULL, and changes nothing)
 *
 *  - Per bucket, fixed: at most %WLK_LIMIT_AGENTS processes attached at
 *    once (a process is one agent however many managers it has open in
 *    the bucket; a dead process's slot is reused by the next opener) and
 *    at most %WLK_LIMIT_CLIENTS managers open at once, across all its
 *    processes. wlk_manager_open() beyond either fails.
 *  - Per bucket, chosen by its creator (struct wlk_manager_options): at
 *    most max_names names in use, that is with a lock held or requested
 *    (names nobody uses are forgotten, least recently used first, to make
 *    room), and at most max_requests requests held or pending at once
 *    (each manager also keeps a few request slots in reserve for the
 *    uncontended path; they are taken back when the table runs out), and
 *    arena_bytes for the text of the longer names in use and of the
 *    managers' client ids. wlk_request(), wlk_acquire() and
 *    wlk_request_async() beyond any of them fail, and so does
 *    wlk_manager_open() with the arena full of names in use.
 *  - Per process: at most %WLK_LIMIT_BUCKETS buckets open at once (the
 *    kernel recovers at most 2048 robust mutexes of a dying thread, and
 *    the anchor holds one per bucket). wlk_manager_open() of one more
 *    bucket fails; more managers of a bucket already open do not count.
 *  - wlk_inspect_snapshot() (weblocks/inspect.h) shows a bucket's
 *    capacities and use: max_agents, max_clients, agents, clients, ...
 *
 * GROWING STRUCTS (the ABI)
 *
 * The option structs, struct wlk_options and struct wlk_manager_options,
 * are allocated by the caller and can grow in later versions without
 * breaking binaries built against this header. Each starts with
 * `size_t size`, the size of the struct as the caller's header knew it.
 * Set it with the initializer macro, then set the fields you use:
 *
 *     struct wlk_options o = WLK_OPTIONS_INIT;
 *     o.mode = WLK_SHARED;
 *
 * or, equally, with designated initializers:
 *
 *     struct wlk_options o = { .size = sizeof o, .mode = WLK_SHARED };
 *
 * The library reads min(size, the size it knows) bytes and treats the rest
 * as zero (a zero field always means its default), so:
 *
 *  - size 0 stands for the first layout, the fields of WLK_VERSION 0.2.0
 *    (soname libweblocks.so.1): all-zero options, `{ 0 }` or `{ .mode =
 *    WLK_SHARED }` without a size, work and always will; but a field added
 *    later is ignored unless size covers it, so set size (use the macro);
 *  - a size below that first layout, but not 0, is %WLK_EINVAL;
 *  - a size larger than this library knows (the caller was built against
 *    a newer header) is accepted only if every byte beyond what it knows is
 *    zero, that is if the caller uses none of the newer fields; otherwise
 *    %WLK_EINVAL, not a silent default. So is a size above 4096 bytes.
 *
 * Fields are only ever added at the end; none is removed or reordered
 * without a new soname. The structs the library fills in for the caller
 * (weblocks/inspect.h) have no size: they change only with a new soname.
 * wlk_version() tells the library's version at run time, WLK_VERSION_*
 * the header's.
 *
 * DEADLOCKS
 *
 * Managers that wait for each other in a cycle (one holds "a" and waits for
 * "b", another holds "b" and waits for "a") wait for ever: the spec leaves
 * lock order to the caller. A manager opened with detect_deadlocks refuses
 * a request that would close such a cycle at the moment it would be
 * queued: wlk_request(), wlk_acquire() and wlk_request_async() return
 * %WLK_EDEADLK (DeadlockError) with nothing queued, and the caller can let
 * go of what it holds and try again. A manager waits for the other managers
 * that hold a conflicting lock on a name it waits for, or are queued ahead
 * of it with a conflicting request. What the check cannot see: a manager
 * shared by threads is one client, so a request behind its own manager's
 * lock is not a wait (another thread holds it and lets go); a cycle closed
 * by a request of a manager without detect_deadlocks is not refused; and
 * a manager may wait for something other than a lock of this bucket.
 * shm-inspect dump and check report the cycles that exist. It is an
 * extension, off by default: the spec has no such error, and each request
 * that would wait pays for a walk of the bucket's pending requests under
 * the segment mutex (on etcd, every request of such a manager: ETCD
 * ENGINE below). examples/deadlock.c shows it.
 *
 * SCOPES
 *
 * An extension from the spec's early draft: a request for a set of names
 * (its scope), taken together, atomically: wlk_acquire_scope(),
 * wlk_request_scope(), wlk_request_scope_async(). Duplicate names collapse;
 * the names are kept in byte order (the draft's Lock.scope is sorted). An
 * exclusive scope is granted when nothing is held on any of its names and
 * no request queued before it has a name in common with it; a shared one
 * when nothing exclusive is held on its names and no exclusive request
 * queued before it has a name in common with it. It is granted on every
 * name at once and released on every name at once: no request ever holds
 * part of a scope, so two scopes never deadlock over their own names,
 * whatever order the caller lists them in. On each name it keeps its
 * place in the FIFO order of single-name requests; a single-name request
 * is a scope of one, so a shared one queued behind a shared scope that is
 * waiting for another name is granted (the draft's rule; without scopes
 * in a bucket it is the Working Draft's, exactly). The options act on the
 * whole scope: if_available takes every name or none, a signal or timeout
 * takes it out of every queue, steal steals every name (a holder that held
 * any of them, scope or not, loses all it held with that request). Each
 * name gets its own fencing token, in that name's order
 * (wlk_lock_scope_token()). query() shows a scope under each of its names,
 * with one &wlk_lock_info.scope value. A scope has at most %WLK_SCOPE_MAX
 * distinct names. Cost: a scope always takes the segment mutex (once to be
 * granted, once to be released), where an uncontended single name takes
 * the fast path without it; make bench (part 6) measures both. A single
 * request for two names in any order cannot deadlock, where two nested
 * wlk_acquire() calls in opposite orders can (examples/scope.c).
 *
 * ETCD ENGINE
 *
 * A manager opened with wlk_manager_options.backend, or with the
 * environment variable WEBLOCKS_BACKEND (for programs that cannot change
 * their code), set to "etcd://host:port,host:port,..." (at most 16
 * members) keeps its bucket's lock state on that etcd v3 cluster (3.4 or
 * later, through its JSON gateway, plain HTTP), shared by every process
 * of every machine that opens the same (origin, bucket, partition) on it.
 * configure --enable-etcd builds it (libcurl, json-c); a build without it
 * refuses such a manager with %WLK_ENOTSUPPORTED. libweblocks does not
 * link libcurl, whose libraries would load with every program that links
 * it (about 7 ms at each start, make bench part 1): the first manager of
 * an etcd backend in a process loads it (libcurl.so.4, RTLD_LOCAL; never
 * unloaded), and where it cannot be loaded, or lacks a function the
 * engine calls, the engine refuses with %WLK_ENOTSUPPORTED too, from
 * wlk_manager_open() and wlk_bucket_remove(). Tunables, from the
 * environment: WEBLOCKS_ETCD_TTL, the lease's TTL in seconds (default 10,
 * at most 3600), and WEBLOCKS_ETCD_TIMEOUT_MS, how long one call tries the
 * members (default 5000).
 *
 * A process is one client of a cluster, whatever its managers: they share
 * one lease, on which every key of theirs is put, kept alive by one
 * library thread (named "wlk-etcd", signals blocked), and one watch stream
 * per bucket in use, each reference-counted. The first manager of the
 * cluster in the process grants the lease and starts the thread; the last
 * one's close stops the thread and revokes the lease. A fork child shares
 * none of them: its inherited managers return %WLK_ESTATE.
 *
 * The same rules hold: modes, FIFO per name, if_available, steal, signal,
 * timeout, close (every request and lock of the manager goes in one
 * revision, one transaction, or the lease's revocation for the process's
 * last manager of the cluster, so none of its requests is granted on the
 * way out), and wlk_query() is one linearizable read, atomic across names
 * at one revision. What differs:
 *
 *  - Tokens (wlk_lock_token()) are etcd revisions: cluster-wide, every
 *    grant of a name above every earlier grant of it, but not consecutive.
 *    Shared locks granted together (by one release) may share a token,
 *    or have theirs in either order: each is the revision its waiter
 *    found it granted at.
 *    Restoring the cluster from a backup can repeat them: restore with a
 *    new --initial-cluster-token, and re-fence the resources.
 *  - A process that dies without closing (SIGKILL, a crash, exec) loses
 *    its locks through its guard: a small process the agent spawns when
 *    its lease is granted (etcd-guard, installed in the library's helper
 *    directory: $(libexecdir)/weblocks, which configure prints, or
 *    /usr/lib/<triplet>/weblocks in the Debian package), which the kernel
 *    tells of the death (a pidfd of the process, and a socket whose end
 *    the process keeps close-on-exec). The guard revokes the lease at once, so the locks pass on a few
 *    round trips after the death, whatever the TTL. The guard runs in a
 *    session of its own and is not the process's child: a wait for all
 *    its children neither waits for it nor reaps it, and its standard
 *    input and output are /dev/null. It ends when the last manager of
 *    the cluster closes; a guard that dies is replaced at the library
 *    thread's next keepalive (TTL/3). WEBLOCKS_ETCD_GUARD names
 *    another program to spawn (the tests use the build's), or "none" for
 *    no guard; it is read when a process's first manager of a cluster
 *    opens, and ignored in setuid programs. A guard that cannot be
 *    spawned is not an error: the process then runs as with none. A
 *    program that closes descriptors it did not open (as some daemons
 *    do at start) closes the guard's socket too: its guard then takes
 *    the process for gone and revokes the lease, whose locks its holders
 *    then see stolen.
 *  - Without its guard (none asked for, none spawned, a killed guard not
 *    yet replaced), or when a whole machine dies, a dead process holds
 *    its locks until its lease expires: the TTL after its last keepalive
 *    (plus an election if the leader changes meanwhile). The process
 *    renews its lease every TTL/3 from its library thread, on time, so a
 *    dead process's lease has between 2/3 of the TTL and all of it left.
 *    etcd then deletes the keys late: its lessor looks for expired
 *    leases every 500 ms (etcd 3.4, 3.5) and revokes them through raft,
 *    so the deletion comes 0-0.5 s after the expiry, and the waiter is
 *    granted about a round trip after the deletion: at most about TTL +
 *    0.5 s + a round trip after the death. bench/etcd measures both ways. A
 *    waiter cannot save that time by revoking the lease itself: until
 *    the expiry, a holder that is only slow may renew it.
 *  - Losing a lock: a process paused, or cut off from the cluster, for
 *    longer than the TTL loses its locks (those of all its managers of the
 *    cluster, on their one lease), and they are granted to others; a new
 *    lease serves the requests that follow. Its holders then see
 *    wlk_lock_stolen() true and wlk_release() return
 *    %WLK_ESTOLEN, as after a steal, once the manager learns it: when the
 *    cluster answers again (its watch, or its next keepalive), or after a
 *    whole TTL without an answer (even if the cluster kept the lease). Its
 *    requests still waiting fail with %WLK_EABORTED. Until it learns, it
 *    may believe it holds a lock another holds: only the fencing token,
 *    checked by the resource, is safe against that.
 *  - A lock stolen by another process is seen stolen by its holder when
 *    the holder's watch brings the deletion, usually within milliseconds,
 *    not when the steal returns (in the stealer's own process, at once).
 *    A watch that breaks (a member killed, a keepalive that moved to
 *    another member) resumes where it left off, and once it is back the
 *    manager reads its locks' keys again: no deletion is missed, only
 *    seen later.
 *  - A release sent twice: when a member applies a release's delete but
 *    its reply is lost (the member dies, the connection breaks), the
 *    release tries the next member, whose delete finds nothing. It then
 *    reads etcd's history, three more round trips: the revision the key
 *    was deleted at (a watch from its creation), whether an entry of the
 *    name was created at that revision (a steal deletes and puts in one
 *    transaction), and whether its lease is alive (the lease's end deletes
 *    too). Deleted by itself: 0. Stolen, lost with the lease, or history
 *    it cannot read (compacted, no answer): %WLK_ESTOLEN. So a release may
 *    report a lock stolen that it did let go (with its lease lost, or its
 *    history compacted, while the reply was lost), never the reverse.
 *  - Keys: a manager puts a released lock's key again for its next
 *    request, on any name, so a process that takes and releases a name
 *    over and over puts one key, as with etcd's own lock service. etcd
 *    keeps a deleted key in its index until the cluster is compacted,
 *    and every read of a name walks its deleted keys: with a new key per
 *    request, a name taken 7000 times made each acquire+release about
 *    1.5 ms slower (NEWS says how this was measured). A key whose
 *    delete may apply late (its call failed, or was sent again) is
 *    never put again. New processes and managers still bring new keys:
 *    compact the cluster (etcd --auto-compaction-retention), as for any
 *    etcd workload.
 *  - Errors of the cluster: no member answering within
 *    WEBLOCKS_ETCD_TIMEOUT_MS is -EHOSTUNREACH (each member is tried in
 *    turn, at most 2 s each); a reply that is not etcd's, -EPROTO; one over
 *    64 MiB, -EMSGSIZE. A request waiting for a grant reads its name again
 *    at least every second, whatever its watch says, by a linearizable
 *    read; woken by its watch, it reads the member's own state (a
 *    serializable read, no round among the members), unless that state
 *    is older than the deletion that woke it.
 *  - weblocks/async.h works the same; the descriptor is readable when
 *    a deletion on a name the manager has a request or lock on may have
 *    granted or stolen something (each dispatch then reads the bucket
 *    once), so an edge can come without news.
 *  - Scopes (SCOPES above) keep their rules: a scope is a key under each
 *    of its names, all put in one transaction (one revision, the same
 *    token on each name) and all deleted in one, by its release, a
 *    steal or the lease's end, so nobody ever sees part of one held. Its
 *    waiter reads all of its names at once (one transaction of ranges).
 *    A steal, of one name or of a scope's, reads the whole bucket (the
 *    other names of the scopes holding its names are anywhere in it): it
 *    costs in proportion to the bucket's requests.
 *  - detect_deadlocks (DEADLOCKS above) keeps its rules: each request of
 *    such a manager (but if_available and steal, which never wait) reads
 *    the whole bucket, walks its graph (a manager is its process's lease
 *    and its number in the process, both in each of its keys), and puts
 *    its keys only if no key of the bucket was put since the read, so
 *    that two requests closing one cycle between them are never both
 *    queued; a bucket changed at each of 64 tries in a row is %WLK_EFULL.
 *    A dead process's requests and locks are in the graph until its
 *    lease ends.
 *  - Not on etcd: weblocks/inspect.h (segments only). There are no
 *    tables: permissions and the capacities are checked but mean
 *    nothing, and %WLK_EFULL is only a steal whose transaction needs more
 *    compares or operations than etcd's --max-txn-ops (128) allows: one
 *    of each per key it deletes (every key of each request holding one of
 *    its names, a scope's on all of its names), one compare per name and
 *    per request that keeps a scope waiting on one of its names from
 *    being granted meanwhile, one put per name, and one read (or a
 *    request of a manager with detect_deadlocks, above). max_name_len is
 *    set by the bucket's first opener, as with a segment.
 *    wlk_manager_validate() checks that every key under the bucket's prefix
 *    is one this library wrote, and that no scope is there in part. wlk_bucket_remove() forgets the bucket's
 *    max_name_len: -EBUSY while a manager has it open, -ENOENT if none.
 *  - The cluster is the security boundary: without etcd's TLS and RBAC
 *    (not supported here) anyone who reaches it can read and change every
 *    bucket. Keys are "wlk2/<origin>.<bucket>.<partition>/<name>/..."
 *    with every byte of the four but letters, digits and "-_~:" escaped
 *    as "%XX" (so etcdctl get --prefix wlk2/ shows them readably), and
 *    no name reaches outside its bucket's keys. Processes of a release
 *    with another layout ("wlk1/": hex) never share a bucket with these.
 *  - A process costs the cluster one lease, and keeps one thread and one
 *    watch connection per bucket in use; a manager costs a few HTTP
 *    connections. An uncontended acquire and release are two round trips
 *    to the cluster: a transaction that puts the request's key only if
 *    its name has none, and a delete. A request on a busy name makes one
 *    more, which puts its key, before it waits.
 *
 * CAVEATS
 *
 *  - Only processes of the same effective user share a bucket; the segment is
 *    created mode 0600 and a segment owned by another user, or with looser
 *    permissions than asked, is refused (WLK_ESECURITY). Anyone who can
 *    write the segment can disturb the lock state of every process using it.
 *  - The segments are the files /dev/shm/wlk<layout>-<uid>-<hash>. Only
 *    their owner's processes, through this library, wlk_bucket_remove() and
 *    shm-inspect, should touch them. Truncating a live segment kills the
 *    processes using it with SIGBUS when they touch the lost pages (new
 *    openers poison it and move to a new generation, or get WLK_ECORRUPT).
 *    Unlinking one (rm, or systemd-logind's RemoveIPC=yes when the user's
 *    last session ends) silently splits the bucket in two: the processes
 *    attached keep the old file, new openers create a new one, and the same
 *    lock can then be granted on both sides. wlk_bucket_remove() refuses a
 *    bucket in use.
 *  - Segment names are predictable. Another local user can create the file
 *    of a bucket of yours first (any mode): wlk_manager_open() and
 *    wlk_bucket_remove() then refuse it with WLK_ESECURITY for as long as
 *    that file exists, and /dev/shm being sticky, only its owner or root
 *    can remove it (rm /dev/shm/wlk<layout>-<your uid>-...; ls -l /dev/shm
 *    shows the owner).
 *  - The API is thread-safe but not async-signal-safe, except
 *    wlk_signal_abort() and wlk_signal_aborted().
 */
#ifndef WEBLOCKS_H
#define WEBLOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && defined(WLK_BUILDING_LIBRARY)
#define WLK_EXPORT __attribute__((__visibility__("default")))
#else
#define WLK_EXPORT
#endif

#if defined(__GNUC__)
#define WLK_WARN_UNUSED __attribute__((__warn_unused_result__))
#else
#define WLK_WARN_UNUSED
#endif

/*
 * The version of this header: major changes break the API or ABI (before
 * 1.0, minor ones may). configure.ac defines it (m4_define wlk_version_*);
 * the library refuses to build, and make check fails, if these differ.
 * WLK_VERSION packs it as wlk_version() does; compare the two to tell the
 * header a program was built with from the library it runs with.
 */
#define WLK_VERSION_MAJOR 0
#define WLK_VERSION_MINOR 4
#define WLK_VERSION_PATCH 0
#define WLK_VERSION                                                            \
	((WLK_VERSION_MAJOR << 16) | (WLK_VERSION_MINOR << 8) |                \
	 WLK_VERSION_PATCH)

/*
 * WLK_ERRNO_MAP(XX) - the error table: XX(name, value, error name, message),
 * where the error name is the DOMException name where the spec has one and
 * the symbol otherwise (DeadlockError: the spec has no such error, and
 * WLK_EDEADLK is an extension, given only to managers that ask for it). It
 * is the single source of the enum below, of
 * wlk_strerror() and of wlk_error_name(). Codes that equal a negated errno
 * value keep that value so they compare equal to -errno.
 */
#define WLK_ERRNO_MAP(XX)                                                      \
	XX(EINVAL, -22, "TypeError",                                           \
	   "invalid argument")                                                 \
	XX(EDEADLK, -35, "DeadlockError",                                      \
	   "the request would close a cycle of managers waiting for each "     \
	   "other")                                                            \
	XX(ENAMETOOLONG, -36, "WLK_ENAMETOOLONG",                              \
	   "name longer than the bucket allows")                               \
	XX(ETIMEDOUT, -110, "TimeoutError",                                    \
	   "timed out before the lock was granted")                            \
	XX(ENOTSUPPORTED, -3001, "NotSupportedError",                          \
	   "option combination or name not supported by the specification")    \
	XX(EABORTED, -3002, "AbortError",                                      \
	   "request aborted before the lock was granted")                      \
	XX(ESTOLEN, -3003, "AbortError",                                       \
	   "lock was stolen by another request")                               \
	XX(ESTATE, -3004, "InvalidStateError",                                 \
	   "manager closed, or handle used after fork")                        \
	XX(ESECURITY, -3005, "SecurityError",                                  \
	   "opaque origin, or segment not a regular file, owned by another "  \
	   "user, or with looser permissions than asked")                      \
	XX(EFULL, -3006, "QuotaExceededError",                                 \
	   "a table of the bucket's segment is full")                          \
	XX(ECORRUPT, -3007, "WLK_ECORRUPT",                                    \
	   "segment failed validation or repair")                              \
	XX(EFORMAT, -3008, "WLK_EFORMAT",                                      \
	   "segment has an incompatible layout version")

/* The error codes. */
enum wlk_errno {
#define WLK__ERR_ENUM(name, value, dom, msg) WLK_##name = (value),
	WLK_ERRNO_MAP(WLK__ERR_ENUM)
#undef WLK__ERR_ENUM
};

/* Lock modes (LockMode). */
enum wlk_mode {
	WLK_EXCLUSIVE = 0,
	WLK_SHARED = 1,
};

/* Pass as a name_len to use strlen(name). */
#define WLK_NUL_TERMINATED ((size_t)-1)

/*
 * Limits on identifiers (bytes, not counting a terminating NUL). The origin,
 * bucket, partition and client_id are NUL-terminated byte strings compared
 * byte for byte: any byte is allowed except the ASCII control characters
 * (0x01-0x1f and 0x7f), which would let one forge lines in listings and
 * logs that show it (wlk_manager_open() refuses them with %WLK_EINVAL).
 * Spaces, '/', UTF-8 and any other byte from 0x80 up are fine.
 */
#define WLK_ORIGIN_MAX 1024
#define WLK_BUCKET_MAX 255
#define WLK_PARTITION_MAX 255
#define WLK_CLIENT_ID_MAX 127

/* Table sizes a new segment gets when the options leave them 0. */
#define WLK_DEFAULT_MAX_NAMES 1024
#define WLK_DEFAULT_MAX_REQUESTS 4096
#define WLK_DEFAULT_MAX_NAME_LEN 1024
/* Upper bounds accepted for the options above. */
#define WLK_LIMIT_MAX_NAMES (1u << 20)
#define WLK_LIMIT_MAX_REQUESTS (1u << 22)
#define WLK_LIMIT_MAX_NAME_LEN 65536

/* Distinct names in one scope (SCOPES below); more is %WLK_EINVAL. */
#define WLK_SCOPE_MAX 64

/* Fixed limits (see LIMITS above); exceeding one is %WLK_EFULL. */
#define WLK_LIMIT_AGENTS 256   /* processes attached to one bucket */
#define WLK_LIMIT_CLIENTS 1024 /* managers open in one bucket */
#define WLK_LIMIT_BUCKETS 1024 /* buckets one process has open */

/*
 * Initializers of the option structs: the defaults, with size set (see
 * GROWING STRUCTS above).
 */
#define WLK_OPTIONS_INIT { .size = sizeof(struct wlk_options) }
#define WLK_MANAGER_OPTIONS_INIT { .size = sizeof(struct wlk_manager_options) }

struct wlk_manager; /* navigator.locks of one context: a bucket + a clientId */
struct wlk_lock;    /* a granted lock */
struct wlk_signal;  /* AbortController + AbortSignal */
struct wlk_snapshot; /* result of wlk_query() */

/**
 * struct wlk_manager_options - where a manager lives and who it is.
 * @size:         sizeof(struct wlk_manager_options), as the caller's header
 *                has it (%WLK_MANAGER_OPTIONS_INIT sets it), or 0 for the
 *                first layout; see GROWING STRUCTS.
 * @bucket:       storage bucket name; NULL means "default". At most
 *                WLK_BUCKET_MAX bytes.
 * @partition:    storage partition, a separate user agent (profile, private
 *                session); NULL means "". At most WLK_PARTITION_MAX bytes.
 * @client_id:    the clientId reported by wlk_query(); NULL generates one
 *                that is unique across processes. 1..WLK_CLIENT_ID_MAX
 *                bytes. It is a label: two managers given the same string
 *                are still two clients.
 * @permissions:  file mode of the segment, a subset of 0600 | 0060 | 0006
 *                (read/write bits only) that includes 0600; 0 means 0600.
 *                (Without the owner's bits no other process could attach,
 *                and nobody could remove it: %WLK_EINVAL.) Every opener
 *                must ask for the same or looser permissions than the
 *                segment has.
 * @max_names:    capacity of the name table; 0 = WLK_DEFAULT_MAX_NAMES.
 * @max_requests: capacity of the request table (held + pending);
 *                0 = WLK_DEFAULT_MAX_REQUESTS.
 * @max_name_len: longest lock name in bytes; 0 = WLK_DEFAULT_MAX_NAME_LEN.
 * @detect_deadlocks: refuse a request of this manager that would close a
 *                cycle of managers waiting for each other, with
 *                %WLK_EDEADLK and nothing queued (DEADLOCKS below). An
 *                extension, off by default: the spec has no such error,
 *                and the check costs each request that would wait a walk
 *                of the bucket's pending requests.
 * @backend:      where the bucket's lock state lives: NULL or "" for the
 *                environment variable WEBLOCKS_BACKEND, and if that is
 *                unset or "shm", a shared-memory segment on this machine;
 *                "etcd://host:port,host:port,..." for an etcd v3 cluster
 *                (ETCD ENGINE below; %WLK_ENOTSUPPORTED from
 *                wlk_manager_open() in a build without it, or for any
 *                other scheme). Read at open only.
 * @arena_bytes:  bytes of the segment for the text of names longer than
 *                16 bytes and of client ids, taken in 32-byte chunks of
 *                24 bytes of text each (a 40-byte name takes two chunks; a
 *                generated client id, 36 bytes, two); 0 = one chunk per
 *                name slot, or the chunks of one longest name if more,
 *                and 128 more: 4096 bytes more than max_names * 32 at
 *                the defaults (the default bucket is then 512 KiB).
 *                Names nobody uses are forgotten to make room, as for
 *                max_names. Out of range (%WLK_EINVAL): below 192 (the
 *                longest client id) or a segment above 1 GiB. Ignored on
 *                etcd.
 *
 * %WLK_MANAGER_OPTIONS_INIT (or all-zero, or a NULL pointer) gives the
 * defaults. The four capacities are used only by the process that creates
 * the segment; later openers get the existing geometry.
 */
struct wlk_manager_options {
	size_t size;
	const char *bucket;
	const char *partition;
	const char *client_id;
	unsigned int permissions;
	uint32_t max_names;
	uint32_t max_requests;
	uint32_t max_name_len;
	bool detect_deadlocks;
	const char *backend;
	uint32_t arena_bytes;
};

/**
 * wlk_manager_open() - Obtain the lock manager of an origin bucket.
 * @origin: serialized origin, such as "https://example.com"; compared byte
 *          for byte, 1..WLK_ORIGIN_MAX bytes, no control characters (see
 *          WLK_ORIGIN_MAX). "null" (an opaque origin) is refused, as the
 *          spec requires.
 * @o:      options, or NULL for the defaults.
 * @out:    receives the manager; written only on success.
 *
 * Creates the bucket's segment if it does not exist, or attaches to it, and
 * registers a new client (clientId) in it. Managers of the same bucket in one
 * process share one mapping of the segment.
 *
 * Context: thread-safe; not async-signal-safe; may sleep. It waits while
 * another process is creating or attaching to the same segment (normally
 * well under a millisecond; creating a large segment first reserves all of
 * its memory), and while another process holds the segment's mutex. Neither
 * wait has a bound: behind a process stopped (SIGSTOP, a debugger) at one
 * of those points, it waits until that process continues or dies. Until
 * then, the calls of this process that map or unmap a bucket (an open of a
 * bucket it has not mapped yet, a close of a bucket's last manager) wait
 * behind it, whatever the bucket. Thread cancellation is disabled
 * during the call: a cancel takes effect at the caller's next cancellation
 * point. On etcd, a process's first manager of a cluster also starts its
 * library thread and spawns its guard (ETCD ENGINE above).
 *
 * Return: 0 on success, or
 * * %WLK_EINVAL - @origin or @out is NULL, @origin is empty, an option is out
 *   of range, @o->size is not valid (GROWING STRUCTS above), or @origin,
 *   bucket, partition or client_id contains an ASCII control character.
 * * %WLK_ESECURITY - @origin is "null", or the segment is owned by another
 *   user or has looser permissions than asked for, or its name in /dev/shm
 *   is taken by something other than a regular file (a directory, a
 *   symbolic link, a FIFO).
 * * %WLK_ENAMETOOLONG - @origin, bucket, partition or client_id too long.
 * * %WLK_EFULL - the bucket has %WLK_LIMIT_CLIENTS managers open, or
 *   no room for the client id in its arena (@o->arena_bytes), or
 *   %WLK_LIMIT_AGENTS other processes attached, or this process has
 *   %WLK_LIMIT_BUCKETS other buckets open (LIMITS above).
 * * %WLK_EFORMAT - the segment was made by an incompatible build (pointer
 *   size, mutex layout) of the library.
 * * %WLK_ECORRUPT - the segment failed validation.
 * * %WLK_ENOTSUPPORTED - the backend (@o->backend or WEBLOCKS_BACKEND) has
 *   a scheme other than "shm" and "etcd://", or is etcd in a build without
 *   the engine, or in a process where libcurl cannot be loaded (ETCD
 *   ENGINE above).
 * * -EAGAIN - this process's anchor thread could not be started (it is
 *   started by the first open: RLIMIT_NPROC, or out of threads), or the
 *   segment was removed or replaced 16 times in a row (ATTACH_RETRIES in
 *   lib/format/tunables.h) while this call attached to it.
 * * -ENOMEM, -ENOSPC (no room in /dev/shm for the segment, which is then
 *   not left behind), -EMFILE and other -errno values from shm_open(),
 *   ftruncate(), mmap() or fcntl().
 */
WLK_EXPORT WLK_WARN_UNUSED int
wlk_manager_open(const char *origin, const struct wlk_manager_options *o,
		 struct wlk_manager **out);

/**
 * wlk_manager_close() - Terminate a context: drop its locks and requests.
 * @m: the manager, or NULL (no-op).
 *
 * Terminates the manager's remaining locks and requests in the spec's order
 * (2.6): first every request of @m still queued is dropped, then every lock
 * it holds is released, and the requests waiting behind them are granted
 * and woken. So no request of @m is granted on the way out, not even for an
 * instant, and the fencing tokens go on from the last grant: a waiter
 * behind a lock of @m gets the next token of the name, as if @m's queued
 * requests had never been made. Threads blocked in wlk_request() or
 * wlk_acquire() on @m return %WLK_ESTATE. Lock handles of @m that are
 * still outstanding stay valid objects: wlk_release() on them frees them and
 * returns %WLK_ESTATE. Memory is freed when the last thread and handle are
 * done with it.
 *
 * Context: thread-safe with respect to other calls on @m that are already
 * in progress. Once this returns, @m must not be passed to any function
 * again: as with a FILE after fclose(), it may have been freed, and such a
 * call is undefined (%WLK_ESTATE is what calls already in progress, lock
 * handles of @m and managers inherited through fork() get). May sleep
 * briefly. In a fork child, closing an inherited manager only frees the
 * child's copy and touches no shared state. Thread cancellation is disabled
 * during the call.
 */
WLK_EXPORT void wlk_manager_close(struct wlk_manager *m);

/**
 * wlk_manager_client_id() - The manager's clientId.
 * @m: the manager.
 *
 * Context: thread-safe; never sleeps.
 *
 * Return: a NUL-terminated string owned by @m, valid until it is closed, or
 * NULL if @m is NULL.
 */
WLK_EXPORT const char *wlk_manager_client_id(const struct wlk_manager *m);

/**
 * wlk_bucket_remove() - Remove a bucket's segment from /dev/shm.
 * @origin: as for wlk_manager_open().
 * @o:      only @bucket and @partition are used; NULL for the defaults.
 *
 * Unlinks the segment so that the next opener creates a fresh one. A bucket
 * that some process (this one included) still has open is left alone.
 *
 * Context: thread-safe; not async-signal-safe; waits, as
 * wlk_manager_open() does, for a process that is opening the bucket.
 * Thread cancellation is disabled during the call.
 *
 * Return: 0 on success, or
 * * %WLK_EINVAL, %WLK_ESECURITY, %WLK_ENAMETOOLONG, %WLK_ENOTSUPPORTED - as
 *   for wlk_manager_open().
 * * -ENOENT - there is no such segment.
 * * -EBUSY - a process has the bucket open: a manager not closed, or a
 *   lock handle not released yet (a closed manager's handles keep its
 *   bucket mapped until wlk_release(), which then returns %WLK_ESTATE).
 * * other -errno values from shm_open() or fcntl().
 */
WLK_EXPORT int wlk_bucket_remove(const char *origin,
				 const struct wlk_manager_options *o);

/**
 * struct wlk_options - LockOptions.
 * @size:         sizeof(struct wlk_options), as the caller's header has it
 *                (%WLK_OPTIONS_INIT sets it), or 0 for the first layout;
 *                see GROWING STRUCTS.
 * @mode:         %WLK_EXCLUSIVE (default) or %WLK_SHARED.
 * @if_available: grant only if the lock can be granted at once; otherwise
 *                the callback gets NULL (wlk_acquire(): *out = NULL). Such a
 *                request never queues and never shows in "pending".
 * @steal:        release every held lock on the name (its holders see
 *                %WLK_ESTOLEN) and grant this request at once, ahead of the
 *                queue. Exclusive mode only.
 * @signal:       abort signal, or NULL.
 * @timeout_ns:   extension: give up with %WLK_ETIMEDOUT if not granted
 *                within this many nanoseconds (CLOCK_MONOTONIC); 0 waits
 *                without limit, and so does a timeout whose deadline
 *                would lie past the end of the 64-bit nanosecond clock
 *                (UINT64_MAX, or anything within the uptime of it: over
 *                584 years). It limits the wait for the grant only: a
 *                deadline that passes after the grant is ignored.
 *
 * %WLK_OPTIONS_INIT (or all-zero, or a NULL pointer) gives the defaults.
 */
struct wlk_options {
	size_t size;
	enum wlk_mode mode;
	bool if_available;
	bool steal;
	struct wlk_signal *signal;
	uint64_t timeout_ns;
};

/**
 * typedef wlk_callback - LockGrantedCallback.
 * @lock: the granted lock, or NULL when if_available could not grant it.
 * @arg:  the argument given to wlk_request().
 *
 * Return: any value; wlk_request() passes it through unchanged, in the same
 * int as its own error codes. A negative value, if it equals a WLK_E* code
 * or a negated errno, cannot be told from that error by wlk_request()'s
 * caller; return 0 or positive values, or pass results through @arg, when
 * the caller must tell them apart.
 */
typedef int (*wlk_callback)(struct wlk_lock *lock, void *arg);

/**
 * wlk_request() - Request a lock and run a callback while holding it.
 * @m:        the manager.
 * @name:     lock name: any bytes (empty, embedded NUL and non-UTF-8 are all
 *            valid and distinct), at most the bucket's max_name_len bytes,
 *            not starting with '-'.
 * @name_len: length of @name in bytes, or %WLK_NUL_TERMINATED.
 * @o:        options, or NULL for the defaults.
 * @cb:       run once with the lock held (or NULL for an if_available miss).
 * @arg:      passed to @cb.
 *
 * LockManager.request(name, options, callback). Validates in the spec's
 * order, queues the request behind earlier requests for @name, blocks until
 * it is granted, runs @cb, releases the lock and returns what @cb returned.
 * The lock handle passed to @cb is valid only during the call; @cb must not
 * wlk_release() it.
 *
 * If @o->signal is aborted, or the timeout passes, before the request is
 * granted, the request leaves the queue (the requests behind it may be
 * granted) and the abort reason or %WLK_ETIMEDOUT is returned; @cb does not
 * run. As in the spec, a signal found aborted when the lock has been granted
 * but @cb has not started yet also releases the lock and returns the reason.
 * The timeout does not: a deadline that passes after the grant is ignored,
 * and @cb runs. Once @cb has started, the signal is ignored too.
 *
 * Context: thread-safe; may sleep; not async-signal-safe. Thread
 * cancellation is disabled while waiting so that a cancelled thread never
 * leaves a request queued. The timeout and the signal also bound the wait
 * for the segment mutex before the request is queued, which a process
 * stopped inside the critical section holds up (TERMINATION MODEL above).
 * A request that has to wait spins first, for up to 20 us (WLK_SPIN_NS in
 * lib/format/tunables.h), when more than one CPU is online; a shared one no
 * longer once others of its name sleep for their grant. A request without
 * timeout or signal that finds the name held by one uncontended holder
 * spins on the name's entry, and that holder's release hands it the lock
 * directly. A blocked thread first in its name's queue asks the kernel,
 * at the scheduler's first tick after it got there, for a short time
 * slice until the call returns (TERMINATION MODEL above); it touches
 * nothing else of the thread's scheduling.
 *
 * A lock stolen between its grant and the start of @cb is still a grant:
 * @cb runs (wlk_lock_stolen() is true) and %WLK_ESTOLEN is returned.
 *
 * Return: @cb's return value if @cb ran, except %WLK_ESTOLEN if the lock was
 * stolen before @cb returned and %WLK_ESTATE if the manager was closed while
 * @cb ran (the lock was released under it). Otherwise a negative code, and
 * @cb did not run. The two share one int: a negative value returned by @cb
 * reads as the code it equals (see &typedef wlk_callback). The codes:
 * * %WLK_EINVAL - @m, @name or @cb is NULL, @o->mode is not a mode, or
 *   @o->size is not valid (GROWING STRUCTS above).
 * * %WLK_ESTATE - @m was closed by another thread during the call, or was
 *   inherited through fork(). (Calling with @m already closed is
 *   undefined: see wlk_manager_close().)
 * * %WLK_ENOTSUPPORTED - @name starts with '-'; or steal is combined with
 *   if_available or %WLK_SHARED; or a signal or a timeout is combined with
 *   steal or if_available.
 * * the signal's abort reason - the signal was already aborted, or fired
 *   before @cb started.
 * * %WLK_ENAMETOOLONG - @name is longer than the bucket's max_name_len.
 * * %WLK_ETIMEDOUT - @o->timeout_ns passed before the grant.
 * * %WLK_EFULL - the name or request table, or the arena, is full (LIMITS
 *   above); nothing changed.
 * * %WLK_EDEADLK - @m was opened with detect_deadlocks and the request
 *   would close a cycle of managers waiting for each other (DEADLOCKS
 *   above); nothing is queued. (On etcd, such a manager's request is also
 *   %WLK_EFULL when the bucket changes faster than it can check it: ETCD
 *   ENGINE above.)
 * * %WLK_ECORRUPT - the segment failed validation or repair, or the
 *   request's slot was found damaged (then it is freed) or dropped by a
 *   repair; nothing is left queued or held.
 * * -ENOMEM - out of memory.
 */
WLK_EXPORT int wlk_request(struct wlk_manager *m, const char *name,
			   size_t name_len, const struct wlk_options *o,
			   wlk_callback cb, void *arg);

/**
 * wlk_acquire() - Request a lock and return it as a handle.
 * @m:        the manager.
 * @name:     as for wlk_request().
 * @name_len: as for wlk_request().
 * @o:        options, or NULL for the defaults.
 * @out:      receives the lock; NULL on an if_available miss. Written only
 *            on success.
 *
 * The handle form of wlk_request(): the lock is held until wlk_release().
 * The timeout limits the wait for the grant; the signal acts until this
 * function returns (a signal found aborted after the grant releases the
 * lock and returns its reason). A lock stolen after its grant but before
 * this returns is returned all the same, as on every path:
 * wlk_lock_stolen() is true and wlk_release() returns %WLK_ESTOLEN (and
 * frees its request slot).
 *
 * Context: as for wlk_request().
 *
 * Return: 0 on success (with *@out NULL on an if_available miss), or the
 * negative codes listed for wlk_request().
 */
WLK_EXPORT WLK_WARN_UNUSED int
wlk_acquire(struct wlk_manager *m, const char *name, size_t name_len,
	    const struct wlk_options *o, struct wlk_lock **out);

/**
 * wlk_release() - Release a lock and free its handle.
 * @lock: a handle from wlk_acquire(), or NULL (no-op, returns 0).
 *
 * Removes the lock from the held set and grants the requests that become
 * grantable; they are in the held set when this returns. The handle is
 * freed in every case, so @lock must not be used again: a second
 * wlk_release() of it is undefined, as a second free() is (the memory may
 * already be the handle of a later lock, which it would release). Builds
 * with AddressSanitizer report it as a use after free.
 *
 * Context: thread-safe; never sleeps for another lock holder (only for the
 * segment mutex). May be called from any thread of the process that
 * acquired the lock. It makes a bounded number of system calls however
 * many waiters it grants: one waiter is woken directly, many (a run of
 * shared requests) through one broadcast that the woken pass on among
 * themselves.
 *
 * Return: 0 on success, or
 * * %WLK_ESTOLEN - the lock had been stolen; nothing else was released.
 * * %WLK_ESTATE - the manager was closed (which released the lock already),
 *   or the handle was inherited through fork() (nothing was released).
 * * %WLK_ECORRUPT - the segment failed validation or repair, or the lock's
 *   request slot was damaged (its name index out of bounds): the slot is
 *   freed and the repair that follows frees the name, which another request
 *   may have been granted already. Never a crash.
 */
WLK_EXPORT int wlk_release(struct wlk_lock *lock);

/**
 * struct wlk_call - wlk_acquire()'s arguments and result, for FFI callers.
 * @m:        the manager.
 * @name:     as for wlk_request().
 * @name_len: as for wlk_request().
 * @o:        options, or NULL for the defaults.
 * @lock:     the lock the block holds, or NULL: wlk_call_acquire() writes
 *            it, wlk_call_release() releases it and sets it to NULL.
 *
 * An FFI layer (Python's ctypes, say) pays for every argument of every
 * call: it converts it, and it describes the call to libffi anew each
 * time. A block filled in once per name and kept makes an acquire+release
 * pair two calls of one argument each, where wlk_acquire() takes five.
 * C callers have no reason to use it. The block belongs to the caller,
 * who keeps @name and @o valid while it is used; it holds at most one
 * lock at a time, so callers that hold several locks of one name (on
 * several threads, say) use one block each.
 *
 * Its layout is fixed, without a size field (GROWING STRUCTS): it is
 * wlk_acquire()'s parameter list, which changes only with a new soname.
 */
struct wlk_call {
	struct wlk_manager *m;
	const char *name;
	size_t name_len;
	const struct wlk_options *o;
	struct wlk_lock *lock;
};

/**
 * wlk_call_acquire() - wlk_acquire() with its arguments in a block.
 * @c: the block; @c->lock must be NULL.
 *
 * wlk_acquire() of the block's manager, name, name length and options,
 * with the block's @lock as its out-parameter, in every respect, after one
 * more check: a block that still holds a lock is refused, so that its
 * handle is not overwritten and lost.
 *
 * Context: as for wlk_acquire().
 *
 * Return: as for wlk_acquire() (0 with @c->lock NULL on an if_available
 * miss; @c->lock is written only on success), and
 * * %WLK_EINVAL - also if @c is NULL or @c->lock is not NULL; nothing is
 *   queued and @c is left as it was.
 */
WLK_EXPORT WLK_WARN_UNUSED int wlk_call_acquire(struct wlk_call *c);

/**
 * wlk_call_release() - wlk_release() of a block's lock.
 * @c: a block filled in by wlk_call_acquire(), or one whose @c->lock is
 *     NULL (no-op, returns 0).
 *
 * Sets @c->lock to NULL and releases the lock it held, as wlk_release()
 * does: the handle is freed in every case, so the block is ready for the
 * next wlk_call_acquire() whatever this returns.
 *
 * Context: as for wlk_release().
 *
 * Return: as for wlk_release(), and %WLK_EINVAL if @c is NULL.
 */
WLK_EXPORT int wlk_call_release(struct wlk_call *c);

/**
 * wlk_lock_name() - Lock.name.
 * @lock: the lock.
 * @len:  receives the name's length in bytes, or NULL.
 *
 * Context: thread-safe; never sleeps.
 *
 * Return: the name's bytes, exactly as requested, followed by a NUL that is
 * not part of the name; owned by @lock.
 */
WLK_EXPORT const char *wlk_lock_name(const struct wlk_lock *lock, size_t *len);

/**
 * wlk_lock_mode() - Lock.mode.
 * @lock: the lock.
 *
 * Context: thread-safe; never sleeps.
 *
 * Return: %WLK_EXCLUSIVE or %WLK_SHARED.
 */
WLK_EXPORT enum wlk_mode wlk_lock_mode(const struct wlk_lock *lock);

/**
 * wlk_lock_stolen() - Whether another request stole this lock.
 * @lock: the lock.
 *
 * The spec's released promise rejecting with AbortError. A stolen lock is no
 * longer in the held set; its holder should stop using the resource.
 *
 * Context: thread-safe; never sleeps; a single atomic load.
 *
 * Return: true if the lock was stolen.
 */
WLK_EXPORT bool wlk_lock_stolen(const struct wlk_lock *lock);

/**
 * wlk_lock_token() - Fencing token of a grant.
 * @lock: the lock.
 *
 * Every grant of a name gets a token greater than every earlier grant's of
 * the same name in the bucket, so the resource the name guards can refuse
 * writes from a holder that lost its lock (stolen, or released by close) to
 * a later one. Tokens of different names are not ordered with each other
 * (each name counts on its own, which keeps names independent).
 *
 * This holds for as long as the bucket is in use, also when its segment is
 * created again: re-initialised by the next opener after every process
 * closed it (or by shm-inspect check --repair), created afresh after
 * wlk_bucket_remove(), or replaced by a new generation after it was
 * poisoned. A segment's tokens start above its creation time in
 * nanoseconds (CLOCK_REALTIME) and above every token that the bucket's
 * earlier segments still there hold, and rise by one a grant, far slower
 * than the clock. So tokens are large numbers, not counts of grants, and
 * not above the realtime clock at their grant unless it was set back.
 *
 * The one case left is a clock set back: if CLOCK_REALTIME is set back to
 * before a token was given, and the bucket's segment is then created
 * afresh (after wlk_bucket_remove(), or a reboot emptied /dev/shm: nothing
 * is left to carry forward), that segment's tokens can stay below the one
 * given before. No holder of the removed segment is left (a segment is
 * removed only when no process has it open), so a resource that stored
 * that token refuses the new holders, but never lets an old one in. It can
 * tell: while a stored token is above the current CLOCK_REALTIME in
 * nanoseconds, the clock has gone back since it was given. A resource that
 * knows the bucket was removed meanwhile may then forget the stored token.
 *
 * Context: thread-safe; never sleeps.
 *
 * Return: the token, at least 1.
 */
WLK_EXPORT uint64_t wlk_lock_token(const struct wlk_lock *lock);

/**
 * struct wlk_name - one name of a scope.
 * @name: its bytes.
 * @len:  its length in bytes, or %WLK_NUL_TERMINATED.
 */
struct wlk_name {
	const char *name;
	size_t len;
};

/**
 * wlk_acquire_scope() - Request a lock on a set of names at once.
 * @m:     the manager.
 * @names: the scope's names, @n of them, in any order, duplicates allowed.
 * @n:     how many; at least 1.
 * @o:     options, or NULL for the defaults; as for wlk_acquire(), applied
 *         to the whole scope.
 * @out:   receives the lock; NULL on an if_available miss. Written only on
 *         success.
 *
 * wlk_acquire() for a scope (SCOPES above): the lock is held on every name
 * until wlk_release() releases every name. A set of one distinct name is
 * exactly wlk_acquire() of that name. The handle's wlk_lock_name() and
 * wlk_lock_token() are its first name's; wlk_lock_scope_count(),
 * wlk_lock_scope_name() and wlk_lock_scope_token() give all of them.
 *
 * Context: as for wlk_request(). A scope never takes the uncontended fast
 * path: it takes the segment mutex once to be queued (and granted, if it
 * can be) and once to be released. On etcd (ETCD ENGINE above), one
 * transaction to be queued and one to be released, whatever the number
 * of names.
 *
 * Return: 0 on success (with *@out NULL on an if_available miss), or
 * * %WLK_EINVAL - @m, @names, a name or @out is NULL, @n is 0, there are
 *   more than %WLK_SCOPE_MAX distinct names, or as for wlk_request();
 * * -ENOMEM - out of memory for the sorted copy of the names;
 * * the other codes of wlk_request(), checked in the same order, each name
 *   in turn where wlk_request() checks its name (%WLK_ENOTSUPPORTED for a
 *   name that starts with '-', %WLK_ENAMETOOLONG for one too long), and
 *   %WLK_EFULL if the tables (and the arena) have no room for every name
 *   and one request slot per name (on etcd, only a steal too large for
 *   one transaction: ETCD ENGINE above).
 */
WLK_EXPORT WLK_WARN_UNUSED int
wlk_acquire_scope(struct wlk_manager *m, const struct wlk_name *names,
		  size_t n, const struct wlk_options *o, struct wlk_lock **out);

/**
 * wlk_request_scope() - LockManager.request() for a set of names.
 * @m:     the manager.
 * @names: as for wlk_acquire_scope().
 * @n:     as for wlk_acquire_scope().
 * @o:     options, or NULL for the defaults.
 * @cb:    as for wlk_request(); gets the scope's lock.
 * @arg:   passed to @cb.
 *
 * wlk_request() for a scope: wlk_acquire_scope(), @cb, wlk_release().
 *
 * Context: as for wlk_request().
 *
 * Return: as wlk_request(), with the argument checks of
 * wlk_acquire_scope().
 */
WLK_EXPORT int wlk_request_scope(struct wlk_manager *m,
				 const struct wlk_name *names, size_t n,
				 const struct wlk_options *o, wlk_callback cb,
				 void *arg);

/**
 * wlk_lock_scope_count() - How many names a lock holds.
 * @lock: the lock.
 *
 * Context: thread-safe; never sleeps.
 *
 * Return: the number of distinct names of its scope; 1 for a lock from
 * wlk_acquire() or wlk_request().
 */
WLK_EXPORT size_t wlk_lock_scope_count(const struct wlk_lock *lock);

/**
 * wlk_lock_scope_name() - Lock.scope[@i].
 * @lock: the lock.
 * @i:    0 to wlk_lock_scope_count() - 1: names in byte order.
 * @len:  receives the name's length, or NULL.
 *
 * Context: thread-safe; never sleeps.
 *
 * Return: the name (NUL-terminated after *@len bytes; owned by @lock), or
 * NULL if @i is out of range.
 */
WLK_EXPORT const char *wlk_lock_scope_name(const struct wlk_lock *lock,
					   size_t i, size_t *len);

/**
 * wlk_lock_scope_token() - Fencing token of one name of a lock.
 * @lock: the lock.
 * @i:    as for wlk_lock_scope_name().
 *
 * Each name of a scope gets its own token, ordered with that name's other
 * grants as wlk_lock_token() describes.
 *
 * Context: thread-safe; never sleeps.
 *
 * Return: the token of name @i, or 0 if @i is out of range.
 */
WLK_EXPORT uint64_t wlk_lock_scope_token(const struct wlk_lock *lock,
					 size_t i);

/**
 * wlk_signal_new() - Create an abort signal (AbortController).
 * @out: receives the signal; written only on success.
 *
 * One signal may be passed to any number of requests, in any managers and
 * threads of the process; aborting it aborts all of those still waiting.
 *
 * Context: thread-safe.
 *
 * Return: 0, %WLK_EINVAL if @out is NULL, or -ENOMEM.
 */
WLK_EXPORT WLK_WARN_UNUSED int wlk_signal_new(struct wlk_signal **out);

/**
 * wlk_signal_abort() - Abort (AbortController.abort(reason)).
 * @s:      the signal.
 * @reason: the value aborted requests return; a negative code, or 0 for
 *          %WLK_EABORTED. Positive values are replaced by %WLK_EABORTED.
 *
 * The first call sets the reason; later calls do nothing. Requests using @s
 * that are still waiting leave their queues and return @reason.
 *
 * Context: any thread; async-signal-safe (an atomic store and a futex wake).
 */
WLK_EXPORT void wlk_signal_abort(struct wlk_signal *s, int reason);

/**
 * wlk_signal_aborted() - AbortSignal.aborted.
 * @s: the signal.
 *
 * Context: any thread; async-signal-safe.
 *
 * Return: true once wlk_signal_abort() has been called.
 */
WLK_EXPORT bool wlk_signal_aborted(const struct wlk_signal *s);

/**
 * wlk_signal_free() - Free a signal.
 * @s: the signal, or NULL.
 *
 * Context: no request may still be using @s.
 */
WLK_EXPORT void wlk_signal_free(struct wlk_signal *s);

/**
 * struct wlk_lock_info - LockInfo.
 * @name:      the name's bytes, NUL-terminated after @name_len bytes.
 * @name_len:  length of @name in bytes.
 * @mode:      %WLK_EXCLUSIVE or %WLK_SHARED.
 * @client_id: clientId of the requesting manager.
 * @pid:       process id of the requesting manager, in its PID namespace.
 * @scope:     0 for a single-name request; for a scope's (SCOPES above), a
 *             value that its entries under each of its names share and no
 *             other request in the snapshot has.
 */
struct wlk_lock_info {
	const char *name;
	size_t name_len;
	enum wlk_mode mode;
	const char *client_id;
	pid_t pid;
	uint64_t scope;
};

/**
 * wlk_query() - Snapshot the lock state of the manager's bucket.
 * @m:   the manager.
 * @out: receives the snapshot; written only on success.
 *
 * LockManager.query(): the held locks (one entry per holder, so each shared
 * holder has its own) and the pending requests of the whole bucket, from any
 * manager of it. Pending entries of one name are in request order; the order
 * across names and of held entries is unspecified.
 *
 * The snapshot is atomic across names: it is the state of the whole bucket
 * at one instant, with respect to every grant and release of every process,
 * those of the uncontended fast path included (a process that always takes
 * Y before Z is never shown holding Z alone). A process it would show as
 * a holder or a waiter but finds dead is reaped (its locks released, its
 * requests dropped, as at any death) and the copy taken again; it probes
 * no other process. The copy takes time in proportion to the names in use
 * (idle ones the bucket keeps included) and their held and pending
 * requests, not to the bucket's name capacity (max_names) nor to the
 * processes attached; while it runs, the bucket's segment mutex is held,
 * and an acquire or release that completes meanwhile, even one that needs
 * no mutex otherwise, waits for the copy to end before it returns, as a
 * call that takes the mutex would (so a
 * process stopped while it copies holds up every acquire and release in
 * the bucket until it continues). When no query runs, this costs the
 * uncontended acquire and release one memory load each.
 *
 * Context: thread-safe; not async-signal-safe.
 *
 * Return: 0, or
 * * %WLK_EINVAL - @m or @out is NULL.
 * * %WLK_ESTATE - @m was closed by another thread during the call, or was
 *   inherited through fork() (with @m already closed: undefined).
 * * %WLK_ECORRUPT - the segment failed validation or repair, or its usage
 *   counters were damaged (they are rebuilt, or the segment poisoned,
 *   before it returns).
 * * -ENOMEM - out of memory.
 */
WLK_EXPORT WLK_WARN_UNUSED int wlk_query(struct wlk_manager *m,
					 struct wlk_snapshot **out);

/**
 * wlk_snapshot_held_count() - Number of held entries.
 * @s: the snapshot.
 *
 * Return: the count; 0 if @s is NULL.
 */
WLK_EXPORT size_t wlk_snapshot_held_count(const struct wlk_snapshot *s);

/**
 * wlk_snapshot_held() - One held entry.
 * @s: the snapshot.
 * @i: index, below wlk_snapshot_held_count().
 *
 * Return: the entry, owned by @s; NULL if @i is out of range.
 */
WLK_EXPORT const struct wlk_lock_info *
wlk_snapshot_held(const struct wlk_snapshot *s, size_t i);

/**
 * wlk_snapshot_pending_count() - Number of pending entries.
 * @s: the snapshot.
 *
 * Return: the count; 0 if @s is NULL.
 */
WLK_EXPORT size_t wlk_snapshot_pending_count(const struct wlk_snapshot *s);

/**
 * wlk_snapshot_pending() - One pending entry.
 * @s: the snapshot.
 * @i: index, below wlk_snapshot_pending_count().
 *
 * Return: the entry, owned by @s; NULL if @i is out of range.
 */
WLK_EXPORT const struct wlk_lock_info *
wlk_snapshot_pending(const struct wlk_snapshot *s, size_t i);

/**
 * wlk_snapshot_free() - Free a snapshot.
 * @s: the snapshot, or NULL.
 */
WLK_EXPORT void wlk_snapshot_free(struct wlk_snapshot *s);

/**
 * typedef wlk_violation_cb - receives one violated invariant.
 * @what: a one-line description, valid during the call.
 * @arg:  the argument given to wlk_manager_validate().
 */
typedef void (*wlk_violation_cb)(const char *what, void *arg);

/**
 * wlk_manager_validate() - Check every invariant of the bucket's segment.
 * @m:   the manager.
 * @cb:  called once per violation found (at most 64, REPORT_KEPT in
 *       lib/format/tunables.h, then a summary line), after the segment mutex is
 *       released; or NULL.
 * @arg: passed to @cb.
 *
 * A debugging aid and the oracle of the crash tests: checks, under the
 * segment mutex, the slot states, free lists, hash chains, queues (request
 * order, nothing grantable left pending), held sets (never an exclusive
 * holder beside another), counters and cross references. Dead processes
 * that have not been reaped yet are not violations.
 *
 * Context: thread-safe; takes the segment mutex for a time linear in the
 * segment's capacity; allocates.
 *
 * Return: 0 if every invariant holds, or
 * * %WLK_ECORRUPT - at least one violation (reported through @cb).
 * * %WLK_EINVAL - @m is NULL.
 * * %WLK_ESTATE - @m was closed by another thread during the call, or was
 *   inherited through fork() (with @m already closed: undefined).
 * * -ENOMEM - out of memory.
 */
WLK_EXPORT int wlk_manager_validate(struct wlk_manager *m, wlk_violation_cb cb,
				    void *arg);

/**
 * wlk_version() - The library's version, as a number.
 *
 * The version of the library the program runs with, which may be newer
 * than the header it was built with (%WLK_VERSION).
 *
 * Context: thread-safe; async-signal-safe; never fails.
 *
 * Return: WLK_VERSION_MAJOR << 16 | WLK_VERSION_MINOR << 8 |
 * WLK_VERSION_PATCH of the library's own build: 0x000200 for 0.2.0.
 */
WLK_EXPORT unsigned int wlk_version(void);

/**
 * wlk_version_string() - The library's version, as text.
 *
 * Context: thread-safe; async-signal-safe; never fails.
 *
 * Return: a static string, "MAJOR.MINOR.PATCH" (such as "0.2.0"), the
 * package version the library was configured with; the same version as
 * wlk_version().
 */
WLK_EXPORT const char *wlk_version_string(void);

/**
 * wlk_strerror() - Describe an error code.
 * @err: a WLK_E* code or a negated errno value.
 *
 * Context: thread-safe.
 *
 * Return: a static string; "unknown error" for codes it does not know.
 */
WLK_EXPORT const char *wlk_strerror(int err);

/**
 * wlk_error_name() - Name an error code.
 * @err: a WLK_E* code or a negated errno value.
 *
 * Context: thread-safe.
 *
 * Return: a static string: the DOMException name where the spec has one
 * ("TypeError", "NotSupportedError", "AbortError", "TimeoutError",
 * "InvalidStateError", "SecurityError", "QuotaExceededError"), otherwise
 * the symbol ("WLK_ECORRUPT", "ENOMEM"); "UnknownError" for codes it does
 * not know.
 */
WLK_EXPORT const char *wlk_error_name(int err);

#ifdef __cplusplus
}
#endif

#endif /* WEBLOCKS_H */
