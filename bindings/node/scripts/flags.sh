#!/bin/sh
# SPDX-License-Identifier: MIT
# flags.sh cflags|libs - compiler or linker flags for libweblocks, printed
# for binding.gyp (and check.sh).
#
# With WEBLOCKS_BUILDDIR set (an out-of-tree build of this source tree, or
# any build dir holding lib/.libs/libweblocks.so), the headers come from the
# source tree two levels above this package and the library from the build
# dir, with an rpath to it so that the addon loads that library and not an
# installed one. Otherwise pkg-config finds an installed weblocks.
set -e
here=$(cd "$(dirname "$0")/.." && pwd)
srcdir=${WEBLOCKS_SRCDIR:-$(cd "$here/../.." && pwd)}
if [ -n "$WEBLOCKS_BUILDDIR" ]; then
	b=$(cd "$WEBLOCKS_BUILDDIR" && pwd)
	case $1 in
	cflags) echo "-I$srcdir/include" ;;
	libs) echo "-L$b/lib/.libs -lweblocks -Wl,-rpath,$b/lib/.libs" ;;
	esac
else
	case $1 in
	cflags) pkg-config --cflags weblocks ;;
	libs) pkg-config --libs weblocks ;;
	esac
fi
