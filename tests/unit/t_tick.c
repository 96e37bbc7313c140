/* SPDX-License-Identifier: MIT */
/*
 * t_tick.c - the scheduler's tick as the library reckons it (lib/sys/tick.h):
 * the first moment after now at which a timeout comes no sooner than any
 * CPU's next tick, and whether the kernel's command line skews the ticks.
 * Pure arithmetic: no segment, no fixture.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "testing.h"

#define MS 1000000ull
#define PERIOD (4 * MS) /* HZ=250 */

/* The next tick after @now of a CPU whose ticks are @off past the
 * period's multiples. */
static uint64_t cpu_next(uint64_t now, uint64_t off)
{
	uint64_t t = now - now % PERIOD + off;

	return t > now ? t : t + PERIOD;
}

Test(tick, the_next_multiple_of_the_period_strictly_after_now)
{
	cr_assert_eq(wlk__tick_next(0, PERIOD, 0), PERIOD);
	cr_assert_eq(wlk__tick_next(PERIOD - 1, PERIOD, 0), PERIOD);
	cr_assert_eq(wlk__tick_next(PERIOD, PERIOD, 0), 2 * PERIOD);
	cr_assert_eq(wlk__tick_next(7 * PERIOD + 1, PERIOD, 0), 8 * PERIOD);
}

Test(tick, never_before_any_cpus_next_tick_and_within_one_period_and_a_half)
{
	const uint64_t skews[] = {0, PERIOD / 2};
	/* CPU offsets a skewed kernel gives: below half a period. */
	const uint64_t offs[] = {0, 1, PERIOD / 8, PERIOD / 4, PERIOD / 2 - 1};

	for (size_t s = 0; s < 2; s++) {
		for (uint64_t now = 1000 * PERIOD; now < 1003 * PERIOD;
		     now += PERIOD / 16 + 7) {
			uint64_t t = wlk__tick_next(now, PERIOD, skews[s]);
			size_t n = skews[s] ? 5 : 1;

			cr_assert_gt(t, now);
			cr_assert_leq(t - now, PERIOD + skews[s]);
			for (size_t o = 0; o < n; o++)
				cr_assert_geq(t, cpu_next(now, offs[o]),
					      "now %llu, skew %llu, offset %llu",
					      (unsigned long long)now,
					      (unsigned long long)skews[s],
					      (unsigned long long)offs[o]);
		}
	}
}

static bool skewed(const char *s)
{
	return wlk__tick_skewed(s, strlen(s));
}

Test(tick, the_command_line_skews_ticks_only_with_skew_tick_not_0)
{
	cr_assert(skewed("quiet skew_tick=1 panic=1"));
	cr_assert(skewed("skew_tick=1\n"));
	cr_assert(skewed("ro skew-tick=2"));
	cr_assert(skewed("skew_tick=10"));
	cr_assert_not(skewed(""));
	cr_assert_not(skewed("quiet panic=1\n"));
	cr_assert_not(skewed("skew_tick=0"));
	cr_assert_not(skewed("skew_tick="));
	cr_assert_not(skewed("skew_tick"));
	cr_assert_not(skewed("noskew_tick=1"));
	cr_assert_not(skewed("skew_tick_x=1"));
	/* After "--" the words are init's, not the kernel's. */
	cr_assert_not(skewed("quiet -- skew_tick=1"));
	cr_assert(skewed("skew_tick=1 -- x"));
	/* Only the @n bytes given count. */
	cr_assert_not(wlk__tick_skewed("skew_tick=1", 10));
}
