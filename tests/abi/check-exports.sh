#!/bin/sh
# SPDX-License-Identifier: MIT
# check-exports.sh - the shared library exports exactly the symbols of the
# version script, and the public headers declare exactly those, all in the
# version node of its soname.
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
# The version node is named after the soname (libtool's CURRENT - AGE in
# configure.ac): a soname bump without a new node, or the reverse, would
# give two incompatible libraries the same symbol versions. Exports added
# later, compatibly, go in nodes WEBLOCKS_<soname>.<n> that inherit it.
soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[libweblocks\.so\.\([0-9]*\)\].*/\1/p')
node=$(sed -n 's/^\(WEBLOCKS_[0-9]*\)[[:space:]]*{.*/\1/p' "$symfile")
if [ "$node" != "WEBLOCKS_$soname" ]; then
	echo "FAIL: soname libweblocks.so.$soname but version node '$node' in $symfile"
	status=1
fi
nm -D --defined-only "$so" | awk '$3 ~ /^wlk_/ { print $3 }' |
	grep -v -E "@@WEBLOCKS_$soname(\.[0-9]+)?\$" >"$tmp/unversioned" || true
if [ -s "$tmp/unversioned" ]; then
	echo "FAIL: exports not in version node WEBLOCKS_$soname:"
	cat "$tmp/unversioned"; status=1
fi
n=$(wc -l <"$tmp/script")
[ "$status" = 0 ] && echo "exports: $n symbols, script, library and header" \
	"agree, all in WEBLOCKS_$soname (libweblocks.so.$soname)"
exit $status
