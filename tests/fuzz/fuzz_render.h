/* SPDX-License-Identifier: MIT */
/*
 * fuzz_render.h - what both fuzz harnesses (fuzz_segment.c, AFL++;
 * fuzz_inspect.c, libFuzzer) do with a segment they opened: render
 * everything shm-inspect would show of it, into a sink, and check it.
 */
#ifndef WLK_FUZZ_RENDER_H
#define WLK_FUZZ_RENDER_H

#include <stdio.h>

#include "../../tools/shm-inspect.h"

static void fuzz_on_violation(const char *what, void *arg)
{
	fputs(what, arg);
}

/* Render and check @in into @sink, then close it. */
static void fuzz_render(struct wlk_inspect *in, FILE *sink)
{
	struct wlk_inspect_snapshot *s = NULL;
	struct counts c;
	struct json j;

	if (!wlk_inspect_snapshot(in, &s)) {
		count_snapshot(s, &c);
		dump_text(sink, s);
		json_init(&j, sink);
		json_object(&j, NULL);
		dump_json(&j, s);
		json_end(&j);
		wlk_inspect_snapshot_free(s);
	}
	(void)wlk_inspect_check(in, fuzz_on_violation, sink);
	wlk_inspect_close(in);
}

#endif /* WLK_FUZZ_RENDER_H */
