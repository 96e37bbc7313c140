#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# demo.sh [BUILDDIR] - Quick start for Node.js: build libweblocks (unless
# BUILDDIR already has it) and the addon, then run demo/demo.js: two
# processes share navigator.locks, and the holder is killed with SIGKILL
# while the other waits.
#
# BUILDDIR defaults to build/ in the source tree (where examples/demo.sh
# builds too); the packages needed are installed if missing (as root or
# with sudo).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=$(cd "$here/../.." && pwd)
builddir=${1:-$srcdir/build}

deps_who=demo
# shellcheck source=tests/deps.sh
source "$srcdir/tests/deps.sh"
deps_packages=(build-essential autoconf automake libtool pkg-config
	liburcu-dev python3)
command -v node >/dev/null || deps_packages+=(nodejs)
[[ -f /usr/include/node/node_api.h ]] || deps_packages+=(libnode-dev)
install_missing

if [[ ! -f $builddir/lib/.libs/libweblocks.so ]]; then
	[[ -x $srcdir/configure ]] || (cd "$srcdir" && autoreconf -fi)
	mkdir -p "$builddir"
	if [[ ! -f $builddir/Makefile ]]; then
		(cd "$builddir" && "$srcdir/configure" -q --disable-tests)
	fi
	make -C "$builddir" -j"$(nproc)" >/dev/null
fi
WEBLOCKS_BUILDDIR=$builddir bash "$here/scripts/build-addon.sh" "$here"
exec node "$here/demo/demo.js"
