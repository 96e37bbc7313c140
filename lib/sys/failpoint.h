/* SPDX-License-Identifier: MIT */
/*
 * failpoint.h - named points where a test can have the process killed.
 *
 * Compiled in only with ./configure --enable-failpoints. Armed from the
 * environment: WLK_FAILPOINT=name kills the process (SIGKILL) the first
 * time it passes that point, WLK_FAILPOINT=name:N the Nth time. Every point
 * is listed here, so a sweep test can visit each one; WLK_FAILPOINT(x)
 * does not compile for an x not listed.
 */
#ifndef WLK_FAILPOINT_H
#define WLK_FAILPOINT_H

#define WLK_FAILPOINT_LIST(X)                                                 \
	X(segment_create_mid)   /* new segment half initialised */            \
	X(attach_after_alloc)   /* agent slot taken, mutex still held */      \
	X(request_after_name)   /* name entry created, request not yet */     \
	X(request_after_commit) /* request published, not yet queued */       \
	X(grant_after_list)     /* in the held list, word not yet HELD */     \
	X(grant_run_mid)        /* a batch of shared grants: one HELD */      \
	X(steal_after_intent)   /* intent recorded, nothing stolen yet */     \
	X(steal_mid)            /* some holders stolen, not all */            \
	X(release_after_ungrant) /* out of the held set, slot not freed */    \
	X(unqueue_after_remove) /* out of the queue, slot not freed */        \
	X(name_evict_after_unlink) /* idle name off its chain, not freed */ \
	X(drop_client_mid)      /* close: some requests dropped, not all */   \
	X(reap_after_free)      /* dead agent reaped, lifeline still held */  \
	X(recover_mid)          /* recovery: rebuilt, queues not processed */ \
	X(fast_enlist_mid)      /* fast waiter claimed, WAIT not yet set */   \
	X(fast_handoff_mid)     /* handed over, old claim not yet cleared */  \
	X(query_frozen)         /* query: fast path frozen, mutex held */ \
	X(scope_new_mid)        /* scope: a member queued, not all */        \
	X(scope_grant_mid)      /* scope: a member granted, not all */       \
	X(scope_drop_mid)       /* scope: a member freed, not all */

enum wlk__failpoint_id {
#define WLK__FP_ENUM(name) WLK_FP_##name,
	WLK_FAILPOINT_LIST(WLK__FP_ENUM)
#undef WLK__FP_ENUM
	WLK_FP_COUNT
};

#ifdef WLK_ENABLE_FAILPOINTS
void wlk__failpoint(enum wlk__failpoint_id id)
	__attribute__((__visibility__("hidden")));
#define WLK_FAILPOINT(name) wlk__failpoint(WLK_FP_##name)
#else
#define WLK_FAILPOINT(name) ((void)WLK_FP_##name)
#endif

#endif /* WLK_FAILPOINT_H */
