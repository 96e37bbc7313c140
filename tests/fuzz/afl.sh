#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# afl.sh - fuzz segment images with AFL++ (tests/fuzz/fuzz_segment.c):
# attach, query, lock requests and inspection of a damaged segment.
#
# usage: tests/fuzz/afl.sh [BUILDDIR [MINUTES]]   build, then fuzz
#        tests/fuzz/afl.sh BUILDDIR cmin          minimise the findings
#                                                 into tests/fuzz/corpus
#
# BUILDDIR is a configured build directory (for config.h; default ./build);
# MINUTES how long to fuzz (default 60). Needs AFL++ (Debian: afl++;
# afl-clang-fast, afl-fuzz, afl-cmin) and pkg-config's liburcu-bp and
# liburcu-cds. Everything goes to BUILDDIR/afl: the programs (fuzz-segment,
# built with ASan and UBSan, and fuzz-segment.cmplog for AFL++'s CmpLog)
# and the fuzzer's output, out/default (queue/, crashes/, hangs/,
# fuzzer_stats). Fuzzing starts from tests/fuzz/corpus and resumes where an
# earlier run in the same BUILDDIR stopped. One afl-fuzz instance runs,
# under nice; watch it with `afl-whatsup BUILDDIR/afl/out`.
#
# A crash or hang: replay it with a normal build of the harness, e.g.
#     WLK_FUZZ_VERBOSE=1 BUILDDIR/afl/fuzz-segment FILE
# (each file runs in a child process; the exit status says how it ended).
# After a fix, put the input into tests/fuzz/corpus as crash-WHAT or
# hang-WHAT (cmin keeps those): make check replays every file there
# (tests/fuzz/replay.sh).
set -euo pipefail

srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# The library is compiled in whole: every layer folder on the path.
lib_inc=()
for d in "$srcdir"/lib/*/; do lib_inc+=(-I"$d"); done
builddir=$(cd "${1:-build}" && pwd)
what=${2:-60}
# A build with the etcd engine compiles lib/etcd too: libcurl's header
# (the library is loaded at run time), json-c, and a path for its guard
# program, which nothing here runs (the fuzzed
# buckets are shared memory; Makefile.am gives the installed path).
etcd=()
if grep -q '^#define WLK_HAVE_ETCD 1' "$builddir/config.h" 2>/dev/null; then
	read -r -a etcd <<<"$(pkg-config --cflags libcurl) \
		$(pkg-config --cflags --libs json-c)"
	etcd+=('-DWLK_ETCD_GUARD_PATH="/nonexistent/etcd-guard"')
fi
afl=$builddir/afl
corpus=$srcdir/tests/fuzz/corpus
# The segments' names hold this ID (see fuzz_segment.c): --cleanup below
# removes what a killed input left.
export WLK_FUZZ_ID=$$

[[ -f $builddir/config.h ]] || {
	echo "afl.sh: $builddir/config.h missing: configure first" >&2
	exit 1
}
mkdir -p "$afl"

build() { # OUTPUT, then environment for afl-clang-fast
	local out=$1
	shift
	env "$@" afl-clang-fast -std=gnu11 -g -O1 -fno-omit-frame-pointer \
		-pthread -include "$builddir/config.h" -DWLK_BUILDING_LIBRARY \
		-I"$srcdir/include" -I"$srcdir/lib" "${lib_inc[@]}" \
		$(pkg-config --cflags liburcu-bp liburcu-cds) \
		"$srcdir"/lib/*/*.c "$srcdir"/tools/render.c \
		"$srcdir"/tools/text.c "$srcdir"/tools/deadlock.c \
		"$srcdir"/tools/json.c \
		"$srcdir"/tests/fuzz/fuzz_segment.c \
		$(pkg-config --libs liburcu-bp liburcu-cds) "${etcd[@]}" \
		-lrt -o "$out"
}
build "$afl/fuzz-segment" AFL_USE_ASAN=1 AFL_USE_UBSAN=1 AFL_QUIET=1
build "$afl/fuzz-segment.cmplog" AFL_LLVM_CMPLOG=1 AFL_QUIET=1

export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 \
	AFL_NO_AFFINITY=1 AFL_NO_UI=1
# What afl-fuzz asks for, and: an allocation sized by damaged counters
# fails with NULL (the library then returns -ENOMEM) instead of aborting,
# and above 256 MiB at once, since ASan takes seconds to map such a block
# (a timeout that is not a hang).
export ASAN_OPTIONS=abort_on_error=1:symbolize=0:detect_leaks=0:allocator_may_return_null=1:max_allocation_size_mb=256
trap '"$afl/fuzz-segment" --cleanup' EXIT

if [[ $what == cmin ]]; then
	# The queue and every crash and hang, minimised by the edges they
	# cover (-e: hit counts ignored, which keeps the corpus small).
	rm -rf "$afl/cmin-in" "$afl/cmin-out"
	mkdir -p "$afl/cmin-in"
	for d in queue crashes hangs; do
		find "$afl/out/default/$d" -maxdepth 1 -type f -name 'id:*' \
			-exec cp -t "$afl/cmin-in" {} + 2>/dev/null || true
	done
	find "$corpus" -type f ! -name 'crash-*' ! -name 'hang-*' \
		-exec cp -t "$afl/cmin-in" {} + 2>/dev/null || true
	afl-cmin -e -m none -t 1000 -i "$afl/cmin-in" -o "$afl/cmin-out" \
		-- "$afl/fuzz-segment"
	# Inputs that crashed or hung before a fix stay, under their names.
	mkdir -p "$corpus"
	find "$corpus" -type f ! -name 'crash-*' ! -name 'hang-*' -delete
	for f in "$afl/cmin-out"/*; do
		cp "$f" "$corpus/$(sha1sum <"$f" | cut -c1-16)"
	done
	echo "afl.sh: $(ls "$corpus" | wc -l) files in $corpus"
	exit 0
fi

if [[ -f $afl/out/default/fuzzer_stats ]]; then
	input=- # resume
else
	input=$afl/seeds
	rm -rf "$input"
	mkdir -p "$input"
	if compgen -G "$corpus/*" >/dev/null; then
		cp "$corpus"/* "$input"/
	else
		"$afl/fuzz-segment" --seeds "$input"
	fi
fi
nice -n 15 afl-fuzz -i "$input" -o "$afl/out" -m none -t 200 \
	-c "$afl/fuzz-segment.cmplog" -V $((what * 60)) -- \
	"$afl/fuzz-segment"
