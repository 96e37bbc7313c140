#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# build-addon.sh [PKGDIR] - build PKGDIR/build/Release/weblocks.node (the
# package's own directory by default) with node-gyp against the installed
# Node headers (--nodedir=/usr: nothing is downloaded). node-gyp is the one
# on PATH, else npm's own copy. Without a node-gyp that works, the same
# sources are compiled with cc directly. The library is found as
# scripts/flags.sh says: WEBLOCKS_BUILDDIR (a build tree) or pkg-config.
set -uo pipefail

pkg=$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" && pwd)
say() { echo "build-addon: $*"; }

gyp=()
if command -v node-gyp >/dev/null; then
	gyp=(node-gyp)
elif command -v npm >/dev/null; then
	g=$(dirname "$(readlink -f "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js
	[[ -f $g ]] && gyp=(node "$g")
fi
if ((${#gyp[@]})); then
	say "${gyp[*]} rebuild --nodedir=/usr"
	if (cd "$pkg" && "${gyp[@]}" rebuild --nodedir=/usr --loglevel=warn); then
		exit 0
	fi
	say "node-gyp failed; compiling with cc instead"
fi
say "cc (no node-gyp)"
cflags=$(sh "$pkg/scripts/flags.sh" cflags) &&
	libs=$(sh "$pkg/scripts/flags.sh" libs) || exit 1
mkdir -p "$pkg/build/Release"
# shellcheck disable=SC2086
exec cc -std=gnu11 -O2 -fPIC -shared -Wall -Wextra -Wno-unused-parameter \
	-I/usr/include/node $cflags "$pkg"/src/*.c \
	-o "$pkg/build/Release/weblocks.node" $libs
