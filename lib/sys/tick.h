/* SPDX-License-Identifier: MIT */
/*
 * tick.h - the scheduler's tick as a waiter sees it (tick.c): the
 * arithmetic, kept here so that the unit tests check it (testing.h).
 */
#ifndef WLK_TICK_H
#define WLK_TICK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/*
 * The first moment after @now that comes no sooner than every CPU's next
 * tick: the next multiple of @period, plus @skew (0, or half a period on
 * a kernel that skews each CPU's tick by less than that). Each CPU's next
 * tick after @now comes at most its offset past that multiple, and no
 * offset reaches @skew.
 */
static inline uint64_t wlk__tick_next(uint64_t now, uint64_t period,
				      uint64_t skew)
{
	return (now / period + 1) * period + skew;
}

/* The kernel's command line (@n bytes of @s, as /proc/cmdline has it):
 * whether it asks for skewed ticks, "skew_tick=N" with N not 0 (a
 * parameter's name may spell '_' as '-'). Words after "--" are init's. */
static inline bool wlk__tick_skewed(const char *s, size_t n)
{
	static const char key[] = "skew_tick=";
	size_t i = 0;

	while (i < n) {
		size_t j = i, k = 0;

		while (j < n && s[j] != ' ' && s[j] != '\n' && s[j] != '\0')
			j++;
		if (j - i == 2 && s[i] == '-' && s[i + 1] == '-')
			return false;
		while (k + 1 < sizeof(key) && i + k < j &&
		       (s[i + k] == key[k] || (key[k] == '_' && s[i + k] == '-')))
			k++;
		if (k + 1 == sizeof(key)) {
			bool on = false;

			for (size_t v = i + k; v < j; v++)
				on |= s[v] >= '1' && s[v] <= '9';
			if (on)
				return true;
		}
		i = j + 1;
	}
	return false;
}

#endif /* WLK_TICK_H */
