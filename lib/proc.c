/* SPDX-License-Identifier: MIT */
/*
 * proc.c - this process's incarnation: the fork generation.
 *
 * The child of fork() inherits its parent's mappings, managers, anchor and
 * watcher state, none of which it owns. Each of them records the generation
 * it was made in and treats itself as inherited when the generation has
 * moved on. The registry bumps it in its atfork child handler; it lives
 * here, below the registry, so that the anchor, the watcher and the
 * failpoints can read it without calling up into the registry.
 */
#include "internal.h"

static unsigned long fork_gen; /* [A] */

unsigned long wlk__fork_gen(void)
{
	return uatomic_read(&fork_gen);
}

/* Called in the child of fork(), before any other library code runs there. */
void wlk__fork_gen_bump(void)
{
	uatomic_inc(&fork_gen);
}
