#!/bin/sh
# SPDX-License-Identifier: MIT
# check.sh - make install into a staging DESTDIR puts the library, the
# headers, weblocks.pc, the tools, the etcd guard (in a build with etcd)
# and the manual pages in place; make
# uninstall then takes away every file and every directory install made:
# nothing is left under the prefix, not even an empty directory.
set -u

: "${builddir:?}"
make=${WLK_MAKE:-make}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$(sed -n 's/^prefix = //p' "$builddir/Makefile")
top=$tmp/dest$prefix

if ! $make -C "$builddir" install DESTDIR="$tmp/dest" >"$tmp/install.log" 2>&1
then
	tail -n 20 "$tmp/install.log"
	echo "FAIL: make install"
	exit 1
fi
fail=0
# The etcd engine's guard (lib/etcd/guard.c), in a build with it.
guard=
grep -q '^#define WLK_HAVE_ETCD 1' "$builddir/config.h" &&
	guard=libexec/weblocks/etcd-guard
for f in include/weblocks.h include/weblocks/async.h lib/libweblocks.so.1 \
	lib/pkgconfig/weblocks.pc bin/shm-inspect bin/weblocks-run \
	share/man/man1/shm-inspect.1 share/man/man1/weblocks-run.1 \
	share/man/man3/wlk_acquire.3 share/man/man7/weblocks.7 \
	$guard; do
	if [ ! -e "$top/$f" ]; then
		echo "FAIL: make install did not install $f"
		fail=1
	fi
done
if ! $make -C "$builddir" uninstall DESTDIR="$tmp/dest" \
	>"$tmp/uninstall.log" 2>&1; then
	tail -n 20 "$tmp/uninstall.log"
	echo "FAIL: make uninstall"
	exit 1
fi
left=$(cd "$top" && find . -mindepth 1 | sort)
if [ -n "$left" ]; then
	echo "FAIL: left under the prefix after make uninstall:"
	printf '%s\n' "$left"
	fail=1
fi
[ "$fail" = 0 ] && echo "install, then uninstall: nothing left under $prefix"
exit "$fail"
