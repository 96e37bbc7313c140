#!/bin/sh
# SPDX-License-Identifier: MIT
# check-exports.sh - the shared library exports exactly the symbols of the
# version script, and the public header declares exactly those.
set -eu

libdir=${WLK_LIBDIR:-lib/.libs}
symfile=${WLK_SYMFILE:-lib/libweblocks.sym}
incdir=${WLK_INCLUDEDIR:-$(dirname "$symfile")/../include}
so=$libdir/libweblocks.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

[ -f "$so" ] || { echo "no $so (static-only build?)"; exit 77; }

nm -D --defined-only "$so" | awk '$2 == "T" || $2 == "D" || $2 == "B" { sub(/@.*/, "", $3); print $3 }' |
	sort -u >"$tmp/exported"
sed -n 's/^[[:space:]]*\(wlk_[a-z_0-9]*\);$/\1/p' "$symfile" | sort -u >"$tmp/script"
# Exported functions are declared after WLK_EXPORT, possibly on the next line.
awk '/WLK_EXPORT/ { grab = 1 } grab && match($0, /wlk_[a-z_0-9]+\(/) {
	print substr($0, RSTART, RLENGTH - 1); grab = 0 }' \
	"$incdir/weblocks.h" "$incdir"/weblocks/*.h |
	sort -u >"$tmp/header"

status=0
if ! diff -u "$tmp/script" "$tmp/exported"; then
	echo "FAIL: exports differ from $symfile"; status=1
fi
if ! diff -u "$tmp/script" "$tmp/header"; then
	echo "FAIL: WLK_EXPORT declarations differ from $symfile"; status=1
fi
n=$(wc -l <"$tmp/script")
[ "$status" = 0 ] && echo "exports: $n symbols, script, library and header agree"
exit $status
