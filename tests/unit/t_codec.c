/* SPDX-License-Identifier: MIT */
/*
 * t_codec.c - the segment's word codecs (lib/format/layout.h): slot words,
 * the fast word and the waiter word's claims. Their shifts and masks are
 * derived from field widths; these tests check that the fields round-trip
 * at their extremes and never overlap, which the asserts in layout.h do
 * not (they pin positions, not behaviour).
 */
#include "../common.h"
#include "testing.h"

/* The largest value a field of @bits bits holds. */
#define FIELD_MAX(bits) ((1ull << (bits)) - 1u)

Test(codec, slot_word_round_trips_gen_and_state)
{
	const uint32_t gens[] = {0, 1, 12345,
				 (uint32_t)FIELD_MAX(WLK_SLOT_GEN_BITS)};

	for (size_t i = 0; i < sizeof(gens) / sizeof(gens[0]); i++) {
		for (uint32_t st = 0; st <= WLK_STATE_MASK; st++) {
			uint32_t w = WLK_WORD(gens[i], st);

			cr_assert_eq(WLK_WORD_GEN(w), gens[i]);
			cr_assert_eq(WLK_WORD_STATE(w), st);
		}
	}
	cr_assert(WLK_SLOT_FAST <= WLK_STATE_MASK,
		  "every slot state fits the state bits");
}

Test(codec, fast_word_fields_round_trip_at_their_extremes)
{
	const uint32_t ngen = (uint32_t)FIELD_MAX(WLK_SLOT_GEN_BITS);
	const uint32_t slot1 = (uint32_t)WLK_FAST_HOLDER_MASK;
	const uint32_t sgen = (uint32_t)WLK_FAST_SGEN_MASK;
	uint64_t f = WLK_FAST(ngen, 1, slot1, sgen);

	cr_assert_eq(WLK_FAST_NGEN(f), ngen);
	cr_assert_eq(WLK_FAST_HOLDER1(f), slot1);
	cr_assert_eq(WLK_FAST_SGEN(f), sgen);
	cr_assert(f & WLK_FAST_ON);
	cr_assert_eq(f & (WLK_FAST_WAIT | WLK_FAST_SHARED), 0,
		     "a full holder and gen spill into no flag");

	f = WLK_FAST(0, 0, 0, 0) | WLK_FAST_WAIT | WLK_FAST_SHARED;
	cr_assert_eq(WLK_FAST_NGEN(f), 0);
	cr_assert_eq(WLK_FAST_HOLDER1(f), 0);
	cr_assert_eq(WLK_FAST_SGEN(f), 0);
	cr_assert_eq(f & WLK_FAST_ON, 0);
}

Test(codec, fast_word_flags_and_fields_are_disjoint_and_cover_64_bits)
{
	const uint64_t parts[] = {
		(uint64_t)FIELD_MAX(WLK_SLOT_GEN_BITS) << WLK_FAST_GEN_SHIFT,
		WLK_FAST_ON,
		WLK_FAST_WAIT,
		WLK_FAST_SHARED,
		WLK_FAST_HOLDER_MASK << WLK_FAST_HOLDER_SHIFT,
		WLK_FAST_SGEN_MASK,
	};
	uint64_t all = 0;

	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		cr_assert_eq(all & parts[i], 0, "part %zu overlaps", i);
		all |= parts[i];
	}
	cr_assert_eq(all, UINT64_MAX);
}

Test(codec, holder_field_takes_every_request_slot)
{
	uint64_t f = WLK_FAST(7, 1, WLK_LIMIT_MAX_REQUESTS, 3);

	cr_assert_eq(WLK_FAST_HOLDER1(f), WLK_LIMIT_MAX_REQUESTS,
		     "slot + 1 of the last request slot");
}

Test(codec, claim_keeps_a_slots_whole_gen)
{
	const uint32_t gens[] = {0, 1, (uint32_t)WLK_FAST_SGEN_MASK,
				 (uint32_t)WLK_FAST_SGEN_MASK + 1, 0x0abcdef1u,
				 (uint32_t)FIELD_MAX(WLK_SLOT_GEN_BITS)};

	for (size_t i = 0; i < sizeof(gens) / sizeof(gens[0]); i++) {
		uint64_t who = WLK_FAST(0, 0, 42, gens[i]) | WLK_FAST_SHARED;
		uint64_t c = WLK_CLAIM(who, gens[i]);

		cr_assert_eq(WLK_CLAIM_GEN(c), gens[i], "gen %#x", gens[i]);
		cr_assert_eq(c & WLK_FAST_WHO_MASK, who,
			     "the claim's holder part is the fast word's");
		cr_assert_eq(c & ~WLK_CLAIM_MASK, 0,
			     "nothing outside the mask");
		cr_assert_eq(WLK_FAST_HOLDER1(c), 42);
	}
}

Test(codec, claims_of_one_slot_differ_across_gens)
{
	uint64_t who = WLK_FAST(0, 0, 5, 0);
	/* Same low gen bits (the fast word's), different high ones. */
	uint64_t a = WLK_CLAIM(who, 0);
	uint64_t b = WLK_CLAIM(who, (uint32_t)WLK_FAST_SGEN_MASK + 1);

	cr_assert_neq(a, b, "a stale claim's CAS cannot clear a new one");
}
