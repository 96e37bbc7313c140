#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check.sh BUILDDIR - build the Node.js addon against BUILDDIR's libweblocks
# and run its tests (tests/run.sh runs this after the plain build).
#
# Installs what is missing (Debian packages, as tests/deps.sh does): nodejs
# when there is no node, the Node-API headers (libnode-dev, for Debian's
# nodejs) when node_api.h is missing, a compiler and python3. The package is
# copied to BUILDDIR/bindings/node and built there by
# scripts/build-addon.sh: node-gyp (the one on PATH, else npm's own) against
# the installed headers (--nodedir=/usr, nothing downloaded), or cc directly
# when no node-gyp works. Then `node --test` runs the suite,
# and a last check counts test buckets left in /dev/shm. The output ends
# with "N passed, N failed"; the exit status is non-zero if anything failed.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=$(cd "$here/../.." && pwd)
builddir=$(cd "${1:?usage: check.sh BUILDDIR}" && pwd)
say() { echo "check.sh: $*"; }

if [[ ! -f $builddir/lib/.libs/libweblocks.so ]]; then
	say "no $builddir/lib/.libs/libweblocks.so: build the library first"
	echo "0 passed, 1 failed"
	exit 1
fi

deps_who=check.sh
# shellcheck source=tests/deps.sh
source "$srcdir/tests/deps.sh"
# The packages to install, only those missing (this replaces deps.sh's
# list, which is the library's).
deps_packages=()
command -v node >/dev/null || deps_packages+=(nodejs)
command -v cc >/dev/null && command -v make >/dev/null ||
	deps_packages+=(build-essential)
command -v python3 >/dev/null || deps_packages+=(python3)
if [[ ! -f /usr/include/node/node_api.h ]]; then
	# Debian's nodejs keeps its headers in libnode-dev; NodeSource's
	# nodejs has them already.
	deps_packages+=(libnode-dev)
fi
if ((${#deps_packages[@]})); then
	install_missing || { echo "0 passed, 1 failed"; exit 1; }
fi
say "node $(node --version), headers $(ls -d /usr/include/node)"

# A copy of the package in the build dir, so the source tree stays clean.
pkg=$builddir/bindings/node
rm -rf "$pkg"
mkdir -p "$pkg"
(cd "$here" && tar --exclude=./build --exclude=./node_modules -cf - .) |
	(cd "$pkg" && tar -xf -)
export WEBLOCKS_BUILDDIR=$builddir WEBLOCKS_SRCDIR=$srcdir

if ! bash "$pkg/scripts/build-addon.sh" "$pkg"; then
	say "the addon did not build"
	echo "0 passed, 1 failed"
	exit 1
fi
# The addon must load BUILDDIR's library, not an installed one. (ldd's
# output is kept first: with pipefail, grep -q closing the pipe early
# would make a match look like a failure.)
libs=$(ldd "$pkg/build/Release/weblocks.node" 2>&1)
if [[ $libs != *"$builddir/lib/.libs/"* ]]; then
	say "the addon does not load $builddir/lib/.libs/libweblocks.so:"
	echo "$libs"
	echo "0 passed, 1 failed"
	exit 1
fi

# The suite. TAP ends with "# pass N" and "# fail N" (and "# cancelled N",
# counted as failed: a test cut short by a timeout).
log=$builddir/bindings-node-tap.log
say "node --test (log: $log)"
(cd "$pkg" && timeout -k 10 240 node --test --test-reporter=tap \
	test/*.test.js) >"$log" 2>&1
rc=$?
grep -E '^(not )?ok |^# (tests|pass|fail|cancelled) ' "$log" |
	grep -v '^ok .*# SKIP' | sed 's/^/  /'
count() { grep -E "^# $1 [0-9]+$" "$log" | tail -n 1 | awk '{print $3}'; }
passed=$(count pass)
failed=$(( $(count fail || echo 0) + $(count cancelled || echo 0) ))
if [[ -z $passed ]]; then
	say "node --test ended without a summary (status $rc):"
	tail -n 40 "$log"
	passed=0
	failed=$((failed + 1))
elif ((failed > 0 || rc != 0)); then
	grep -B 2 -A 30 '^not ok' "$log" | head -n 200
	((failed > 0)) || failed=1
fi

# Every test removes its bucket; shm-inspect names the origin of each
# segment, and the tests' origins are https://t-PID-node-NAME.
inspect=$builddir/tools/shm-inspect
if [[ -x $inspect ]]; then
	left=$("$inspect" list 2>/dev/null | grep -c '"https://t-[0-9]*-node-' || true)
	if ((left > 0)); then
		say "test buckets left in /dev/shm:"
		"$inspect" list 2>/dev/null | grep '"https://t-[0-9]*-node-'
		failed=$((failed + 1))
	else
		say "no test bucket left in /dev/shm"
		passed=$((passed + 1))
	fi
fi

echo "$passed passed, $failed failed"
((failed == 0))
