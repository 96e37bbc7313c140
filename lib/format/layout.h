/* SPDX-License-Identifier: MIT */
/*
 * layout.h - the shared-memory segment format. Everything another process
 * can see is defined here and nowhere else.
 *
 * ONE SEGMENT PER BUCKET
 *
 * Each (origin, bucket, partition) triple of one user has one POSIX shm
 * object, named
 *
 *     /wlk<WLK_LAYOUT_VERSION>-<euid>-<32 hex digits>
 *
 * where the hex digits are a 128-bit SipHash of the length-prefixed triple
 * (hash.c, wlk__bucket_key()). The origin text never appears in the name:
 * origins contain '/' and may be long. The triple itself is stored in the
 * header and compared on attach, so a hash collision is detected
 * (WLK_ECORRUPT) rather than silently sharing state. The layout version is
 * part of the name, so builds with different layouts never meet.
 *
 * OFFSET MAP (all offsets are multiples of WLK_CACHELINE)
 *
 *     0                     struct wlk_seg_header        WLK_HEADER_SIZE
 *     off_agents            struct wlk_seg_agent    [max_agents]
 *     off_clients           struct wlk_seg_client   [max_clients]
 *     off_names             struct wlk_seg_name     [max_names]
 *                           (name_stride = its size)
 *     off_requests          struct wlk_seg_request  [max_requests]
 *     off_hash              uint32_t head index     [hash_buckets]
 *     off_chunks            struct wlk_seg_chunk    [max_chunks] (TEXT)
 *     segment_size
 *
 * Cross references are uint32_t indices into these tables, WLK_NIL for
 * none; never pointers, since each process maps the segment elsewhere.
 *
 * PROTECTION TAGS on fields:
 *     [C]  constant once the segment is READY
 *     [M]  read and written only under the segment mutex
 *     [A]  atomic access (uatomic) without the mutex too
 *     [F]  futex word: atomic, and other processes sleep on it
 *     [D]  derived under [M]: rebuilt from the authoritative fields by
 *          recovery (recover.c), never trusted without a bound check
 *
 * SLOT STATE WORDS. Agents, clients, names and requests each begin with a
 * 32-bit word (gen << WLK_STATE_BITS | state). A slot is filled while FREE
 * and published by one release store of its word; freeing stores FREE with
 * gen + 1. Anything held outside the mutex refers to a slot by (index, gen)
 * and sees a recycled slot as a changed word. The words are the
 * authoritative state; lists, counts and free lists are derived from them.
 *
 * INIT PROTOCOL (segment.c). Open files hold OFD locks: byte WLK_LOCK_INIT
 * exclusively while attaching (serialises openers; a dead opener's lock
 * goes away with it), byte WLK_LOCK_ATTACH shared for as long as the
 * segment is mapped. An opener that gets WLK_LOCK_ATTACH exclusively knows
 * nobody is attached, so the content is stale: it initialises wholesale and
 * stores the magic last, with release order.
 */
#ifndef WLK_LAYOUT_H
#define WLK_LAYOUT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Bump on any change to the format this file describes (a new bit, field,
 * size or meaning; not a new way of writing the same one, which the
 * asserts pin); it is part of the segment name too. */
#define WLK_LAYOUT_VERSION 12u
#define WLK_SEG_MAGIC "WEBLOCKS"
#define WLK_SEG_MAGIC_LEN 8
#define WLK_CACHELINE 64u
#define WLK_HEADER_SIZE 4096u
#define WLK_NIL UINT32_MAX

/* OFD lock bytes of the segment file (see INIT PROTOCOL). */
#define WLK_LOCK_ATTACH 0
#define WLK_LOCK_INIT 1

/* Fixed table sizes that are not options. */
#define WLK_MAX_AGENTS 256u
#define WLK_MAX_CLIENTS 1024u
/* The bytes of an agent slot its lifeline mutex has (40 on x86-64 glibc). */
#define WLK_LIFELINE_BYTES 40u

/* Slot state words. */
#define WLK_STATE_BITS 3u
#define WLK_STATE_MASK ((1u << WLK_STATE_BITS) - 1u)
#define WLK_WORD(gen, state) (((gen) << WLK_STATE_BITS) | (state))
#define WLK_WORD_STATE(w) ((w) & WLK_STATE_MASK)
#define WLK_WORD_GEN(w) ((w) >> WLK_STATE_BITS)

enum wlk_slot_state {
	WLK_SLOT_FREE = 0,
	WLK_SLOT_USED = 1,    /* agents, clients, names */
	WLK_SLOT_PENDING = 2, /* requests: in their name's queue */
	WLK_SLOT_HELD = 3,    /* requests: in the held set */
	WLK_SLOT_STOLEN = 4,  /* requests: stolen, until the holder releases */
	WLK_SLOT_RESERVED = 5, /* requests: kept by a client for FAST PATH */
	WLK_SLOT_FAST = 6,     /* requests: claimed by its client's fast path
				* or granted through the fast word; held or
				* waiting if its name's fast word names it */
};

/*
 * FAST PATH (state/fastword.c, shm/lane.c). An uncontended acquire and its
 * release need not take the segment mutex, nor a handoff between two
 * requests. Each name entry has a 64-bit fast word:
 *
 *   63..35 name gen (29 bits)  34 ON  33 WAIT  32 SHARED
 *   31..9 holder slot + 1      8..0 its gen
 *
 * ON means the name's mutex-side state is empty (no held set, no queue) and
 * the fast path may take it: a client CASes ON|gen|0 to ON|gen|holder, with
 * holder a request slot it keeps in reserve (RESERVED, client set under the
 * mutex) and has claimed (CAS to FAST, then name/mode filled); SHARED is
 * the holder's mode. The holder releases by CASing the holder back to 0.
 * A request on the mutex path claims such a slot too (FAST, on no name: an
 * acquire in flight) before it takes the mutex, and uses it there; the
 * claim is the one thing that decides which thread uses a reserved slot
 * (shm/lane.c).
 *
 * TOKENS ON THE FAST PATH. The fast word and the name's token are one
 * aligned 16-byte word: the acquiring CAS and a handoff's CAS are 16-byte
 * CASes that put the holder in and count the token up in one step (the
 * lock's token is the name's token after it), and the release's CAS, on
 * the fast word alone, leaves the token as it is. While ON, nothing else
 * changes the token: the mutex side counts it only with ON clear (after
 * an inflation, or before a grant through the fast word, which stores ON
 * last). So the holder the fast word names has the name's token as its
 * own, for as long as ON stays set, and an inflation that adopts it reads
 * it there. The holder stores it in its slot; an inflation that finds
 * the slot's token still 0 stores the same value.
 *
 * One request may wait behind the holder without the mutex (a fast
 * waiter): it claims the name's waiter word (CAS 0 to its slot + 1, gen
 * and SHARED, the same bits as in the fast word, and the rest of the gen:
 * WLK_CLAIM) and then sets WAIT in the fast word by CAS. A claim without
 * WAIT is nobody's turn yet: an enlisting request, or one that died or
 * gave up before WAIT. With WAIT set, the holder's release is a handoff:
 * one CAS makes the waiter the holder and clears WAIT; the old holder then
 * clears the waiter word. The waiter spins on the fast word until it
 * holds, or until ON clears.
 *
 * Anything under the mutex that needs the name first inflates it: CAS ON
 * off (holder and WAIT kept), turn the holder's slot into an ordinary HELD
 * request and the waiter's (if WAIT) into the queue's only PENDING one,
 * then store the word OFF and clear the waiter word. With ON clear the fast
 * path fails and callers take the mutex. A name is deflated (ON set) when
 * its held set and queue become empty; and when the mutex side grants the
 * last request of a name nobody else holds, and that request is a blocking
 * one in a lane's slot (WLK_REQF_LANE), it grants it through the fast
 * word: ON and that slot as holder, then the slot FAST. A FAST slot holds
 * its name only while the fast word names it. A fast word with ON clear
 * and a holder is an inflation a dead process left halfway: recovery
 * finishes it. The slot-gen bits make a stale handle's release CAS fail
 * after the slot was reused.
 *
 * GRANT BROADCAST. A blocked shared waiter sleeps on its request's word
 * and on its name's grants word at once (futex_waitv), having read the
 * grants word before its last look at its own. An exclusive one does
 * without the grants word (each word of a futex_waitv costs the sleep and
 * the wake-up): an exclusive request is granted alone, and a flush wakes
 * an exclusive sleeper on its own word even when it broadcasts the name,
 * or sweeps every word rather than broadcast for it. Whoever grants
 * requests of one name to two or more sleeping waiters at once changes
 * their words, then bumps the name's grants word and wakes
 * WLK_BROADCAST_FIRST of its sleepers; a waiter that wakes to a changed
 * grants word while others still sleep on it (@sleepers), and finds that
 * value not yet in @passed, wakes every other sleeper with one
 * FUTEX_WAKE, then stores the value in @passed, so that the waiters it
 * woke make no such call of their own. A grant of N costs the granter
 * one system call waking a few, and one of those one more. Each looks at its own word; those not granted sleep
 * again. A passer killed before its wake leaves @passed alone, and the
 * others of the first few pass it on; should all of them die first, the
 * rest see their grants at their next recheck (WLK_SAFETY_RECHECK_NS).
 * tests/model/broadcast.pml checks that the chain leaves nobody asleep.
 * One grant wakes its waiter on its own word. On a kernel without
 * futex_waitv a waiter sleeps on its own word only, in slices of
 * WLK_FALLBACK_SLICE_NS, which bound how late it sees a broadcast grant.
 *
 * QUERY. A query (inspect/query.c) copies the whole bucket under the mutex, and
 * the fast path does not take it; for the copy to be one instant's state
 * (spec 4.5), the query sets the header's freeze word, then (full barrier)
 * reads the names; every fast operation, once it changed or saw a change
 * of a fast word (a CAS, or a grant it spun for), then (full barrier)
 * reads the freeze word, and if it is set waits for the mutex once before
 * it returns. By the barriers, either the query's copy saw that change or
 * the operation sees the freeze; so no operation returns with a change the
 * copy may have missed while the copy runs, and each thread has at most
 * one such change in flight, which the copy shows or not as if it came
 * just before or just after. The query clears the word before unlocking;
 * a fast operation that finds it set while holding the mutex clears it
 * (its query died copying). Uncontended, this costs one load of a line
 * only queries write.
 */
/*
 * The fields of the fast word, low to high, by their widths; every shift
 * and mask below is derived from these three and the slot word's, and the
 * asserts after them pin the result to the bit map above (a change is a
 * new layout version).
 */
#define WLK_FAST_SGEN_BITS 9u    /* the low bits of the holder's gen */
#define WLK_FAST_HOLDER_BITS 23u /* holder slot + 1 */
#define WLK_SLOT_GEN_BITS (32u - WLK_STATE_BITS) /* a slot word's gen */

#define WLK_FAST_HOLDER_SHIFT WLK_FAST_SGEN_BITS
#define WLK_FAST_SHARED_BIT (WLK_FAST_HOLDER_SHIFT + WLK_FAST_HOLDER_BITS)
#define WLK_FAST_SHARED (1ull << WLK_FAST_SHARED_BIT)
#define WLK_FAST_WAIT (1ull << (WLK_FAST_SHARED_BIT + 1u))
#define WLK_FAST_ON (1ull << (WLK_FAST_SHARED_BIT + 2u))
#define WLK_FAST_GEN_SHIFT (WLK_FAST_SHARED_BIT + 3u)
#define WLK_FAST_HOLDER_MASK ((1ull << WLK_FAST_HOLDER_BITS) - 1u)
#define WLK_FAST_SGEN_MASK ((1ull << WLK_FAST_SGEN_BITS) - 1u)
/* The holder or waiter part: slot + 1, its gen, SHARED. */
#define WLK_FAST_WHO_MASK                                                     \
	(WLK_FAST_SHARED | (WLK_FAST_HOLDER_MASK << WLK_FAST_HOLDER_SHIFT) |  \
	 WLK_FAST_SGEN_MASK)
/*
 * The waiter word (a claim) is a holder part plus the rest of the slot's
 * gen above it (bits 54..35): a claim's value comes back only after 2^29
 * claims of one slot, so a CAS that clears an old claim cannot clear a
 * new one.
 */
#define WLK_CLAIM_GEN_SHIFT (WLK_FAST_SHARED_BIT + 3u)
#define WLK_CLAIM_HIGH_BITS (WLK_SLOT_GEN_BITS - WLK_FAST_SGEN_BITS)
#define WLK_CLAIM(who, gen)                                                   \
	((who) | ((uint64_t)((gen) >> WLK_FAST_HOLDER_SHIFT)                  \
		  << WLK_CLAIM_GEN_SHIFT))
#define WLK_CLAIM_MASK                                                        \
	(WLK_FAST_WHO_MASK |                                                  \
	 (((1ull << WLK_CLAIM_HIGH_BITS) - 1u) << WLK_CLAIM_GEN_SHIFT))
#define WLK_CLAIM_GEN(c)                                                      \
	((uint32_t)(((c) >> WLK_CLAIM_GEN_SHIFT) << WLK_FAST_HOLDER_SHIFT) |  \
	 WLK_FAST_SGEN(c))
#define WLK_FAST(ngen, on, slot1, sgen)                                       \
	(((uint64_t)(ngen) << WLK_FAST_GEN_SHIFT) | ((on) ? WLK_FAST_ON : 0) | \
	 ((uint64_t)(slot1) << WLK_FAST_HOLDER_SHIFT) |                        \
	 ((uint64_t)(sgen) & WLK_FAST_SGEN_MASK))
#define WLK_FAST_NGEN(f) ((uint32_t)((f) >> WLK_FAST_GEN_SHIFT))
#define WLK_FAST_HOLDER1(f)                                                   \
	((uint32_t)(((f) >> WLK_FAST_HOLDER_SHIFT) & WLK_FAST_HOLDER_MASK))
#define WLK_FAST_SGEN(f) ((uint32_t)((f) & WLK_FAST_SGEN_MASK))

_Static_assert(WLK_FAST_HOLDER_SHIFT == 9 && WLK_FAST_SHARED_BIT == 32 &&
		       WLK_FAST_WAIT == 1ull << 33 &&
		       WLK_FAST_ON == 1ull << 34 && WLK_FAST_GEN_SHIFT == 35,
	       "the fast word's bit map (above) moved");
_Static_assert(64u - WLK_FAST_GEN_SHIFT == WLK_SLOT_GEN_BITS,
	       "a name's whole gen fits above the fast word's flags");
_Static_assert(WLK_CLAIM_GEN_SHIFT + WLK_CLAIM_HIGH_BITS <= 64u &&
		       WLK_CLAIM_HIGH_BITS == 20u,
	       "a claim holds a slot's whole gen (bits 54..35)");

/* wlk_seg_request.flags */
#define WLK_REQF_ASYNC 0x1u /* its waiter polls a doorbell, not the word */
#define WLK_REQF_LANE 0x2u  /* a blocking request in a slot its client keeps
			     * for the fast path: may be granted through the
			     * name's fast word (FAST, not HELD) */
#define WLK_REQF_SCOPE 0x4u /* a member of a scope request (SCOPES) */
#define WLK_REQF_LEAD 0x8u  /* and the one its requester waits on */
#define WLK_REQF_PARTIAL 0x10u /* its blocked waiter watches the agents of
				* only the first WLK_WATCH_WALK holders and
				* requests of its name: woken to look again
				* when it is first in the queue (reap.c) */

/* wlk_seg_name.list (NAME LISTS) */
enum wlk_name_list {
	WLK_LIST_NONE = 0, /* free, or between the lists under the mutex */
	WLK_LIST_IDLE = 1,
	WLK_LIST_BUSY = 2,
};

/* wlk_seg_header.seg_state */
enum wlk_seg_state {
	WLK_SEG_READY = 1,
	WLK_SEG_POISONED = 2, /* unrepairable; every operation: WLK_ECORRUPT */
};

/* wlk_seg_header.intent_op: multi-slot operations redone by recovery. */
enum wlk_intent_op {
	WLK_INTENT_NONE = 0,
	WLK_INTENT_STEAL = 1, /* args[0] = request index, args[1] = its gen */
	/* SCOPES; args[0] = the lead member's index, args[1] = its gen */
	WLK_INTENT_SCOPE_NEW = 2,   /* undone: every member freed */
	WLK_INTENT_SCOPE_GRANT = 3, /* redone: every member held */
	WLK_INTENT_SCOPE_DROP = 4,  /* redone: every member freed */
	WLK_INTENT_SCOPE_STEAL = 5, /* redone: the steal on every name */
};

/*
 * SCOPES (spec/scope.c). A request for a set of names (the early draft's
 * lock scope) is one request slot per name, its members, each in its own
 * name's queue or held set like any request, with WLK_REQF_SCOPE set and
 * linked into a ring by @scope (a single-name request has WLK_NIL) of
 * @scope_n members. The
 * member of the first name in byte order is the lead: its word is what
 * the requester waits on, its index and gen name the scope. Members are
 * made, granted, stolen and freed together, under the mutex and an intent
 * record, so that no request ever holds part of a scope; recovery finishes
 * (or, for one being made, undoes) what a dead process left halfway.
 *
 * The draft's grant rule, per name: a member is clear on its name when,
 * exclusive, it is the first in the queue and nothing is held; shared,
 * nothing exclusive is held and no exclusive request is ahead of it. A
 * scope is granted when every member is clear. For single-name requests
 * this is the Working Draft's rule exactly (a request that is not first
 * can be clear only behind a scope member waiting for another name).
 * Members are never fast (no LANE flag); a name with a member in its
 * queue or held set is inflated, like any name with a queue.
 */
#define WLK_SCOPE_MEMBERS_MAX 64u /* = the public WLK_SCOPE_MAX */

struct wlk_seg_header {
	/* Identity: one cache line. */
	char magic[WLK_SEG_MAGIC_LEN]; /* [C] stored last at init */
	uint32_t layout_version;       /* [C] WLK_LAYOUT_VERSION */
	uint32_t abi_sig;              /* [C] WLK_ABI_SIG */
	uint64_t segment_size;         /* [C] bytes */
	uint32_t header_size;          /* [C] WLK_HEADER_SIZE */
	uint32_t creator_uid;          /* [C] euid of the creator */
	uint64_t pidns_dev;            /* [C] creator's PID namespace */
	uint64_t pidns_ino;            /* [C] */
	uint64_t seg_key[2];           /* [C] random; keys the name hash */

	/* Geometry: two cache lines. */
	uint32_t max_agents;   /* [C] */
	uint32_t max_clients;  /* [C] */
	uint32_t max_names;    /* [C] */
	uint32_t max_requests; /* [C] */
	uint32_t max_name_len; /* [C] */
	uint32_t name_stride;  /* [C] bytes per name entry */
	uint32_t hash_buckets; /* [C] power of two */
	uint32_t max_chunks;   /* [C] TEXT chunks */
	uint64_t off_agents;   /* [C] */
	uint64_t off_clients;  /* [C] */
	uint64_t off_names;    /* [C] */
	uint64_t off_requests; /* [C] */
	uint64_t off_hash;     /* [C] */
	uint64_t created_ns;   /* [C] CLOCK_REALTIME at init */
	uint64_t off_chunks;   /* [C] */
	uint8_t geo_pad2[40];

	/* State: one cache line. */
	uint32_t seg_state;      /* [A] enum wlk_seg_state */
	uint32_t needs_repair;   /* [A] an operation found a bad index */
	uint64_t recovery_epoch; /* [M] repairs so far */
	uint64_t next_token;     /* [M] where a new name entry's tokens start:
				  * the creation time or a carried mark
				  * (token.c), then the high-water of
				  * evicted names */
	uint64_t reaped_agents;  /* [A] dead agents reaped so far */
	uint8_t state_pad[32];

	/* The segment mutex: robust, process-shared, alone on its lines. */
	union {
		pthread_mutex_t mutex;
		uint8_t bytes[WLK_CACHELINE];
	} sync;

	/* Redo intent for multi-slot operations. */
	uint32_t intent_op;    /* [M] enum wlk_intent_op; stored last */
	uint32_t intent_args[15]; /* [M] */

	/* Derived: free lists and usage counters. */
	uint32_t free_agents;   /* [D] */
	uint32_t free_clients;  /* [D] */
	uint32_t free_names;    /* [D] */
	uint32_t free_requests; /* [D] */
	uint32_t n_agents;      /* [D][A] readable without the mutex */
	uint32_t n_clients;     /* [D][A] */
	uint32_t n_names;       /* [D][A] */
	uint32_t n_requests;    /* [D][A] */
	uint64_t name_bytes;    /* [D][A] sum of used names' lengths */
	uint32_t idle_head;     /* [D] unreferenced names, least recently */
	uint32_t idle_tail;     /* [D] used first: evicted when needed */
	uint32_t busy_head;     /* [D] referenced names, in no order: what */
	uint32_t busy_tail;     /* [D] query() walks (NAME LISTS) */
	uint32_t free_chunks;   /* [D] TEXT */
	uint32_t n_chunks;      /* [D][A] TEXT chunks in use */

	/* Who the bucket is: compared on attach. */
	uint32_t origin_len;    /* [C] */
	uint32_t bucket_len;    /* [C] */
	uint32_t partition_len; /* [C] */
	uint32_t ident_pad;
	char origin[1024];      /* [C] WLK_ORIGIN_MAX */
	char bucket[256];       /* [C] WLK_BUCKET_MAX + 1 */
	char partition[256];    /* [C] WLK_PARTITION_MAX + 1 */
	uint8_t ident_pad2[48];

	/* Alone on its line: every fast operation reads it (FAST PATH,
	 * QUERY), and only a query writes it. */
	uint32_t freeze;        /* [M][A] 1 while a query copies */
	uint8_t freeze_pad[60];
};

/*
 * An agent is a process attached to the segment. Its lifeline is a robust
 * mutex its process keeps locked while alive; it is initialised once, with
 * the segment, and never again (re-initialising a mutex somebody may be
 * blocked on is undefined).
 *
 * AGENT LISTS. Every live client is on its agent's list, which runs
 * through the slots' @next, the free-list link, unused while a slot is in
 * use: a live agent's @next is its first client, a live client's @next
 * its agent's next one, WLK_NIL at the end. A client joins when it is
 * taken (wlk__client_alloc()) and leaves when it is freed
 * (wlk__client_free(), by a walk of its agent's list: as long as the
 * managers its process has open on the bucket). An agent is freed with
 * an empty list. So reaping a dead process visits its own clients, not
 * the whole client table (repair/reap.c). The lists are [D]: recovery
 * rebuilds them from the clients' agent fields, and a reap that finds one
 * damaged walks the table.
 */
struct wlk_seg_agent {
	union {
		pthread_mutex_t lifeline;
		uint8_t bytes[WLK_LIFELINE_BYTES];
	} u;
	uint32_t word;       /* [M][A] gen | FREE/USED */
	uint32_t pid;        /* [M] in the creator's PID namespace */
	uint32_t next;       /* [D] free list; in use: its first client
			      * (AGENT LISTS) */
	uint32_t doorbell;   /* [F] event counter for the agent */
	uint64_t start_ns;   /* [M] CLOCK_REALTIME at attach (diagnostics) */
};

/* A client is one manager (a clientId) of an agent; its id is TEXT. */
struct wlk_seg_client {
	uint32_t word;      /* [M][A] gen | FREE/USED */
	uint32_t agent;     /* [M] owning agent */
	uint32_t agent_gen; /* [M] */
	uint32_t pid;       /* [M] copy of the agent's pid, for query() */
	uint32_t next;      /* [D] free list; in use: its agent's next
			     * client (AGENT LISTS) */
	uint32_t id_len;    /* [M] 1..WLK_CLIENT_ID_MAX */
	uint64_t opened_ns; /* [M] CLOCK_REALTIME (diagnostics) */
	uint32_t id;        /* [M] its first TEXT chunk */
	uint32_t reqs;      /* [D] first of its request slots (CLIENT
			     * LISTS), or WLK_NIL */
	uint64_t doorbell;  /* [M] its doorbell socket (doorbell.c), 0: none */
	uint64_t bell_key;  /* [M] its doorbell eventfd's eventfd-id + 1, 0:
			     * none (doorbell.c) */
	uint32_t bell_fd;   /* [M] and that eventfd in its process */
	uint32_t bell_dgrams; /* [A] datagram rings not yet read */
};

/*
 * TEXT (state/text.c). Names longer than WLK_NAME_INLINE bytes and client
 * ids are kept in a table of chunks, so that a slot costs its entry plus
 * its text, not the longest text allowed. A text of len bytes is a chain
 * of ceil(len / WLK_CHUNK_TEXT) chunks from the first one its owner
 * records; its length is the owner's. Chunks are taken from the free list
 * and filled while their owner is FREE, and go back after its word says
 * FREE again: as with the owner's other fields, readers without the mutex
 * (wlk__name_peek()) bound the walk by the length, check every index, and
 * believe what they read only if the owner's word did not change. The
 * free list, the count in use and each chunk's @used are derived:
 * taking a chunk whose @used is set, or giving back one whose @used is
 * clear, is damage (a free list that runs in a circle, a chain given back
 * twice), found before anything is changed. Recovery tags the chunks of
 * every used owner and frees the rest; an owner whose chain is broken, or
 * shares a chunk with another, is dropped. The chunk payload
 * is a multiple of 8 bytes, so the name hash runs over a chain without
 * copying it.
 */
#define WLK_NAME_INLINE 16u
#define WLK_CHUNK_SIZE 32u
#define WLK_CHUNK_TEXT 24u
/* Chunks a bucket gets unless its creator says (arena_bytes): one per
 * name (or as many as the longest name takes, if more) and
 * WLK_CHUNKS_SPARE for client ids, which makes the default bucket
 * 512 KiB. */
#define WLK_CHUNKS_SPARE 128u

struct wlk_seg_chunk {
	uint32_t next;  /* [M] next chunk of its text, WLK_NIL after the last;
			 * [D] the free list */
	uint32_t used;  /* [D] nonzero while some text has it (while
			 * recovery rebuilds: its owner's tag) */
	uint8_t text[WLK_CHUNK_TEXT]; /* [M] */
};

/*
 * A name entry is in use while some request (held or pending) refers to it,
 * and stays in use, idle, after the last one goes: the next request for the
 * name finds it ready. Idle entries are on an LRU list and are taken over
 * when a new name finds the free list empty. An idle entry may still be
 * held through its fast word (FAST PATH); eviction inflates it first.
 *
 * NAME LISTS. A used entry is on one of two lists, through the same links
 * (list_prev, list_next) and as @list says: the idle list, or the busy
 * list (some request refers to it). A name joins the busy list when it is
 * created and when a request refers to it again (wlk__name_touch()), and
 * moves to the idle list when its last request goes (wlk__name_put()). A
 * query walks the busy list, and the idle list for names held through
 * their fast words, not the whole table. Both are [D]: recovery rebuilds
 * them from the slot words.
 * The first line is what finding the name reads and what the fast path
 * writes: two processes trading the name by the fast path (a handoff per
 * grant) move this one line between them, token included. The second line
 * is what a request changes under the mutex.
 */
struct wlk_seg_name {
	uint32_t word;      /* [M][A] gen | FREE/USED */
	uint32_t len;       /* [M] <= max_name_len */
	uint64_t hash;      /* [M] SipHash of the bytes, keyed by seg_key */
	uint64_t fast;      /* [A] FAST PATH word */
	uint64_t token;     /* [A] last fencing token given for this name;
			     * with @fast, one 16-byte word (FAST PATH) */
	uint64_t waiter;    /* [A] FAST PATH: the fast waiter's claim, or 0 */
	uint32_t chain;     /* [D][A] next in hash chain, or in the free list */
	uint32_t chunk;     /* [M] its bytes' first TEXT chunk, if longer
			     * than WLK_NAME_INLINE; else WLK_NIL */
	uint8_t text[WLK_NAME_INLINE]; /* [M] its bytes, if no longer */
	uint32_t q_head;    /* [D] pending queue, in request order */
	uint32_t q_tail;    /* [D] */
	uint32_t h_head;    /* [D] held list */
	uint32_t h_tail;    /* [D] */
	uint32_t n_excl;    /* [D] exclusive locks held */
	uint32_t n_shared;  /* [D] shared locks held */
	uint32_t n_pending; /* [D] */
	uint32_t list_prev; /* [D] links in the idle or busy list */
	uint32_t list_next; /* [D] */
	uint32_t grants;    /* [F] bumped after a batch of its requests was
			     * granted: its blocked waiters sleep on it too
			     * (GRANT BROADCAST) */
	uint32_t list;      /* [D] enum wlk_name_list: which one it is on */
	uint32_t sleepers;  /* [A] its waiters asleep on grants: a woken one
			     * passes a broadcast on only while some are
			     * (a count a killed sleeper leaves high: then
			     * every woken one passes it on) */
	uint32_t passed;    /* [A] the last grants value a woken waiter
			     * passed on to every sleeper (GRANT BROADCAST) */
	uint32_t pad2;
	uint64_t seq;       /* [M] request order: last one used */
};

/*
 * A request is pending, held or stolen; its word is what waiters sleep on.
 *
 * CLIENT LISTS. Every request slot that is not FREE is on its client's
 * list, through cprev and cnext, from the client's @reqs: taken from the
 * free list for a client (wlk__req_init()), it joins; back on the free
 * list (wlk__req_free(), wlk__req_reclaim()), it leaves. A slot kept in
 * reserve for the fast path stays on it. So a manager's close and the
 * reaping of a dead process visit their client's own slots, not the
 * whole table (spec/terminate.c, wlk__drop_client()). A slot a closed
 * client leaves to its live owner (an acquire in flight on the fast path)
 * leaves the list with the client, and its owner frees it later: a slot
 * whose client is gone is on no list. The lists are [D]: recovery
 * rebuilds them from the slots' client fields, and a walk that finds one
 * damaged falls back to the whole table.
 */
struct wlk_seg_request {
	uint32_t word;       /* [F][M] gen | FREE/PENDING/HELD/STOLEN */
	uint8_t mode;        /* [M] enum wlk_mode */
	uint8_t flags;       /* [M] WLK_REQF_* */
	uint8_t sleeping;    /* [A] its waiter is (about to be) in the kernel */
	uint8_t scope_n;     /* [M] members of its scope (SCOPES), or 0 */
	uint32_t client;     /* [M] requesting client */
	uint32_t client_gen; /* [M] */
	uint32_t name;       /* [M] name entry */
	uint32_t name_gen;   /* [M] */
	uint32_t prev;       /* [D] queue or held list links */
	uint32_t next;       /* [D] also the free list */
	uint32_t seq;        /* [M] request order in its name's queue, as
			      * serial numbers (WLK_SEQ_AFTER) */
	uint32_t scope;      /* [M] next member of its scope (SCOPES), or
			      * WLK_NIL */
	uint64_t token;      /* [A] fencing token once granted */
	uint64_t stamp_ns;   /* [M] CLOCK_MONOTONIC at request while pending,
			      * at grant once granted (diagnostics) */
	uint32_t cprev;      /* [D] links in its client's list (CLIENT */
	uint32_t cnext;      /* [D] LISTS), WLK_NIL at either end */
};

_Static_assert(sizeof(struct wlk_seg_header) <= WLK_HEADER_SIZE,
	       "header fits its page");
_Static_assert(offsetof(struct wlk_seg_header, max_agents) == 64,
	       "geometry on its own line");
_Static_assert(offsetof(struct wlk_seg_header, seg_state) == 192,
	       "state on its own line");
_Static_assert(offsetof(struct wlk_seg_header, sync) == 256,
	       "mutex on its own line");
_Static_assert(sizeof(pthread_mutex_t) <= WLK_CACHELINE,
	       "mutex fits a line");
_Static_assert(offsetof(struct wlk_seg_header, intent_op) == 320,
	       "intent on its own line");
_Static_assert(offsetof(struct wlk_seg_header, free_agents) == 384,
	       "derived on its own line");
_Static_assert(offsetof(struct wlk_seg_header, origin_len) == 448,
	       "identity strings after the derived line");
_Static_assert(offsetof(struct wlk_seg_header, freeze) == 2048 &&
		       sizeof(struct wlk_seg_header) == 2048 + WLK_CACHELINE,
	       "the freeze word alone on its line");
_Static_assert(sizeof(pthread_mutex_t) <= WLK_LIFELINE_BYTES,
	       "a lifeline fits its part of the agent slot");
_Static_assert(sizeof(struct wlk_seg_agent) == 64, "agent slot size");
_Static_assert(sizeof(struct wlk_seg_client) == 64, "client slot size");
_Static_assert(sizeof(struct wlk_seg_name) == 128, "name entry size");
_Static_assert(offsetof(struct wlk_seg_name, text) + WLK_NAME_INLINE ==
		       WLK_CACHELINE,
	       "a short name's bytes on the line finding it reads");
_Static_assert(sizeof(struct wlk_seg_chunk) == WLK_CHUNK_SIZE &&
		       WLK_CHUNK_TEXT % 8 == 0,
	       "chunk size; its text whole 8-byte words (TEXT)");
_Static_assert(offsetof(struct wlk_seg_name, fast) % 16 == 0 &&
		       offsetof(struct wlk_seg_name, token) ==
			       offsetof(struct wlk_seg_name, fast) + 8 &&
		       offsetof(struct wlk_seg_name, q_head) == WLK_CACHELINE,
	       "the fast path's fields on the first line; the fast word and "
	       "the token one aligned 16-byte word");
_Static_assert(sizeof(struct wlk_seg_request) == 64, "request slot size");
/* Whether request order @a is after @b: serial-number arithmetic, since a
 * name's order wraps after 2^32 requests; a queue holds far fewer. */
#define WLK_SEQ_AFTER(a, b) ((int32_t)((uint32_t)(a) - (uint32_t)(b)) > 0)
_Static_assert(offsetof(struct wlk_seg_request, word) == 0,
	       "futex word first, 4-byte aligned");
/*
 * Waiters sleep on a lifeline's lock word (reap.c). It is the first member
 * of glibc's public struct __pthread_mutex_s; its layout is glibc ABI.
 */
_Static_assert(offsetof(pthread_mutex_t, __data.__lock) == 0 &&
		       sizeof(((pthread_mutex_t *)0)->__data.__lock) == 4,
	       "the robust mutex lock word is a 32-bit futex at offset 0");

/*
 * ABI signature: what must agree between processes for the bytes to mean
 * the same thing. The layout of pthread_mutex_t cannot be inspected, so its
 * size and alignment stand for it (as LMDB's lock-file format does).
 */
#define WLK__ABI_MIX(h, v) (((h) * 31u) ^ (uint32_t)(v))
#define WLK_ABI_SIG                                                           \
	WLK__ABI_MIX(WLK__ABI_MIX(WLK__ABI_MIX(WLK__ABI_MIX(WLK__ABI_MIX(     \
	WLK__ABI_MIX(WLK__ABI_MIX(WLK__ABI_MIX(WLK__ABI_MIX(0x776c6b00u,      \
	sizeof(void *)), sizeof(pthread_mutex_t)),                             \
	_Alignof(pthread_mutex_t)), sizeof(struct wlk_seg_header)),            \
	sizeof(struct wlk_seg_agent)), sizeof(struct wlk_seg_client)),         \
	sizeof(struct wlk_seg_name)), sizeof(struct wlk_seg_request)),         \
	sizeof(struct wlk_seg_chunk))

#endif /* WLK_LAYOUT_H */
