#!/bin/sh
# SPDX-License-Identifier: MIT
# ab.sh - run one bench program against two builds of the library, in
# interleaved rounds, and print each target's ratio from every round.
#
# usage: bench/ab.sh [-n ROUNDS] [-p PASSES] PROGRAM LIBDIR_A LIBDIR_B
#
#   PROGRAM   a bench program of a build directory (bench/handoff); its
#             libtool wrapper is skipped for the binary under .libs/, or
#             the wrapper would put its own library first
#   LIBDIR_A  a directory holding libweblocks.so.1 (lib/.libs of another
#             build: a baseline, say the last release's)
#   LIBDIR_B  the same for the build to judge
#   -n        rounds (default 6): A then B, ROUNDS times
#   -p        passes per run, passed on to the program (default: its own)
#
# Why: a target such as "handoff <= 1.25x raw futex" says nothing of a
# change whose effect is smaller than the run-to-run spread of its ratio
# (on a 2-CPU VM, 0.1x-0.3x for the handoffs). Two libraries under the same
# binary, alternated, see the same machine; compare their columns, not
# one run's figure. The binary must be ABI-compatible with both (soname
# libweblocks.so.1): build it from the older tree.
#
# Output: per target, A's ratios, B's, and each side's median. Each run's
# records stay in a temporary directory, named at the end.
set -eu

rounds=6
passes=
while getopts n:p: opt; do
	case $opt in
	n) rounds=$OPTARG ;;
	p) passes="-p $OPTARG" ;;
	*) echo "usage: $0 [-n ROUNDS] [-p PASSES] PROGRAM LIBDIR_A LIBDIR_B" >&2
	   exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [ $# -ne 3 ]; then
	echo "usage: $0 [-n ROUNDS] [-p PASSES] PROGRAM LIBDIR_A LIBDIR_B" >&2
	exit 2
fi
prog=$1
libs_a=$2
libs_b=$3
real=$(dirname "$prog")/.libs/$(basename "$prog")
[ -x "$real" ] && prog=$real
for d in "$libs_a" "$libs_b"; do
	if [ ! -e "$d/libweblocks.so.1" ]; then
		echo "$0: $d/libweblocks.so.1 missing" >&2
		exit 1
	fi
done

dir=$(mktemp -d "${TMPDIR:-/tmp}/wlk-ab.XXXXXX")
i=1
while [ "$i" -le "$rounds" ]; do
	for side in a b; do
		if [ $side = a ]; then libs=$libs_a; else libs=$libs_b; fi
		# shellcheck disable=SC2086 # $passes is an option, or nothing
		if ! LD_LIBRARY_PATH=$libs "$prog" $passes \
			-o "$dir/$side.rec.$i" >"$dir/$side.log.$i" 2>&1; then
			echo "$0: round $i, side $side failed" \
				"(see $dir/$side.log.$i)" >&2
			exit 1
		fi
	done
	i=$((i + 1))
done

# A target record: tgt, key, target, status, then its figure ("1.15x",
# or "median 45.0%, ..."): its first number is the ratio compared.
for side in a b; do
	cat "$dir"/$side.rec.* | awk -F '\t' -v side=$side '
		$1 == "tgt" {
			v = $5
			sub(/^[^0-9.]*/, "", v)
			printf "%s\t%s\t%s\t%s\n", $2, $3, side, v + 0
		}'
done | sort -s -t "$(printf '\t')" -k1,2 | awk -F '\t' '
	function med(s,   n, a, i, j, t) {
		n = split(s, a, " ")
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
				t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
			}
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	{
		# A key may have more than one target: group by both.
		id = $1 " (" $2 ")"
		if (!(id in seen)) { order[++nk] = id; seen[id] = 1 }
		vals[id, $3] = vals[id, $3] " " $4
	}
	END {
		for (k = 1; k <= nk; k++) {
			key = order[k]
			printf "%s\n", key
			printf "  A:%s  (median %.3g)\n", vals[key, "a"],
				med(vals[key, "a"])
			printf "  B:%s  (median %.3g)\n", vals[key, "b"],
				med(vals[key, "b"])
		}
	}'
echo "records: $dir"
