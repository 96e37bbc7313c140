#!/bin/sh
# SPDX-License-Identifier: MIT
# check.sh - weblocks.pc serves a program built from the outside: with only
# weblocks.pc on pkg-config's path (no liburcu .pc files, as on a machine
# without liburcu-dev), pkg-config --cflags --libs succeeds and names no
# liburcu, and examples/hello.c builds with it and runs; with --static and
# the system's .pc path, it links statically. The .pc is this build's, its
# directories pointed at the build tree.
set -eu

: "${builddir:?}" "${abs_top_srcdir:?}"
pkgconfig=${PKG_CONFIG:-pkg-config}
cc=${WLK_CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

mkdir "$tmp/pc"
sed -e "s|^libdir=.*|libdir=$builddir/lib/.libs|" \
	-e "s|^includedir=.*|includedir=$abs_top_srcdir/include|" \
	"$builddir/lib/weblocks.pc" >"$tmp/pc/weblocks.pc"

flags=$(PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR="$tmp/pc" \
	"$pkgconfig" --cflags --libs weblocks) || {
	echo "FAIL: pkg-config --cflags --libs weblocks needs more than weblocks.pc"
	exit 1
}
echo "shared: $flags"
case $flags in
*urcu*)
	echo "FAIL: a shared link is given liburcu's flags"
	exit 1
	;;
esac
# shellcheck disable=SC2086 # the flags are words
$cc ${WLK_CFLAGS:-} -o "$tmp/hello" "$abs_top_srcdir/examples/hello.c" \
	$flags ${WLK_LDFLAGS:-}
LD_LIBRARY_PATH=$builddir/lib/.libs "$tmp/hello"

case " ${WLK_CFLAGS:-} ${WLK_LDFLAGS:-} " in
*-fsanitize*)
	# The sanitizers' runtimes have no static form to link with -static.
	echo "static: skipped (sanitizer build)"
	exit 0
	;;
esac
# With the etcd engine too: libcurl is not linked but loaded at its first
# use (lib/etcd/libcurl.c), so json-c is all it adds; the linker warns
# that a static program's dlopen() needs the same glibc at run time.
syspath=$("$pkgconfig" --variable pc_path pkg-config)
flags=$(PKG_CONFIG_PATH= PKG_CONFIG_LIBDIR="$tmp/pc:$syspath" \
	"$pkgconfig" --static --cflags --libs weblocks)
echo "static: $flags"
# shellcheck disable=SC2086
$cc ${WLK_CFLAGS:-} -static -o "$tmp/hello-static" \
	"$abs_top_srcdir/examples/hello.c" $flags
"$tmp/hello-static"
