#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh - build the libFuzzer target tests/fuzz/fuzz_inspect.c and run it.
#
# usage: tests/fuzz/run.sh [BUILDDIR [SECONDS]]
#
# BUILDDIR is a configured build directory (for config.h; default
# ./build); SECONDS how long to fuzz (default 60). Needs clang with
# libFuzzer and pkg-config's liburcu-bp and liburcu-cds. The program and
# the corpus go in BUILDDIR/fuzz-inspect and BUILDDIR/fuzz-corpus; a crash
# leaves crash-* files in BUILDDIR to replay with
# BUILDDIR/fuzz-inspect crash-...
set -euo pipefail

srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# The library is compiled in whole: every layer folder on the path.
lib_inc=()
for d in "$srcdir"/lib/*/; do lib_inc+=(-I"$d"); done
builddir=$(cd "${1:-build}" && pwd)
seconds=${2:-60}
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
san=-fsanitize=fuzzer,address,undefined

[[ -f $builddir/config.h ]] || {
	echo "run.sh: $builddir/config.h missing: configure first" >&2
	exit 1
}
# Only the inspection code and what it calls are fuzzed; the library is
# compiled in whole for simplicity.
clang -std=gnu11 -g -O1 $san -fno-omit-frame-pointer -pthread \
	-include "$builddir/config.h" -DWLK_BUILDING_LIBRARY \
	-I"$srcdir/include" -I"$srcdir/lib" "${lib_inc[@]}" \
	$(pkg-config --cflags liburcu-bp liburcu-cds) \
	"$srcdir"/lib/*/*.c "$srcdir"/tools/render.c "$srcdir"/tools/text.c \
	"$srcdir"/tools/deadlock.c "$srcdir"/tools/json.c \
	"$srcdir"/tests/fuzz/fuzz_inspect.c \
	$(pkg-config --libs liburcu-bp liburcu-cds) "${etcd[@]}" -lrt \
	-o "$builddir/fuzz-inspect"
mkdir -p "$builddir/fuzz-corpus"
cd "$builddir"
exec ./fuzz-inspect -max_total_time="$seconds" -max_len=4096 \
	-timeout=10 fuzz-corpus
