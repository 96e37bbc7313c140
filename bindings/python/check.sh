#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check.sh BUILDDIR - test the Python bindings against BUILDDIR's library.
#
# What tests/run.sh runs after the plain build (and what you can run by
# hand): installs the Debian packages it needs that are missing (as
# tests/deps.sh does), makes a throw-away venv with the system's
# site-packages, pip-installs this package into it without any index, runs
# pytest with WEBLOCKS_LIBRARY=BUILDDIR/lib/.libs/libweblocks.so, checks
# that no test left a segment in /dev/shm, and ends with one line
# "N passed, N failed". Exits non-zero if anything failed.
#
# The interoperability test's Node part runs when the Node bindings are
# built: WEBLOCKS_NODE_BINDINGS, else BUILDDIR/bindings/node (where
# bindings/node/check.sh builds them), else bindings/node of this tree;
# otherwise it is skipped, and says why.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=$(cd "$here/../.." && pwd)
# (tests/run.sh passes SRCDIR too, which this script finds itself.)
if [[ $# -lt 1 || $# -gt 2 || ! -f $1/lib/.libs/libweblocks.so ]]; then
	echo "usage: check.sh BUILDDIR (with lib/.libs/libweblocks.so)" >&2
	echo "0 passed, 1 failed"
	exit 1
fi
builddir=$(cd "$1" && pwd)
python=/usr/bin/python3	# Debian's interpreter, whatever else is on PATH

deps_who=bindings/python/check.sh
# shellcheck source=../../tests/deps.sh
source "$srcdir/tests/deps.sh"
# The interpreter, venv (with pip), pytest, the build backend, and cc for
# the interoperability test's C peer.
deps_packages=(python3 python3-venv python3-pytest python3-setuptools
	python3-wheel build-essential)
install_missing

tmp=$(mktemp -d "${TMPDIR:-/tmp}/weblocks-py.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() {	# MESSAGE: one failure before pytest could run
	echo "check.sh: $1" >&2
	echo "0 passed, 1 failed"
	exit 1
}

# Install from a copy, so that the build leaves nothing in the tree.
cp -r "$here" "$tmp/src"
rm -rf "$tmp/src/build" "$tmp/src"/*.egg-info
"$python" -m venv --system-site-packages "$tmp/venv" ||
	fail "python3 -m venv failed"
"$tmp/venv/bin/python" -m pip install -q --no-build-isolation --no-index \
	--disable-pip-version-check "$tmp/src" || fail "pip install failed"
mv "$tmp/src/weblocks" "$tmp/src/weblocks.copy"	# test what pip installed

# pytest runs from an empty directory: the tests import the installed
# package (its header says which), and its pid names the test buckets
# (https://t-PID-...).
mkdir "$tmp/run"
export WEBLOCKS_LIBRARY=$builddir/lib/.libs/libweblocks.so
export WEBLOCKS_SRCDIR=$srcdir	# the C peer's headers, bindings/node
# The Node part of the interoperability test needs the Node bindings
# built: bindings/node/check.sh (which tests/run.sh runs before this one)
# leaves its built copy in BUILDDIR/bindings/node.
if [[ -z ${WEBLOCKS_NODE_BINDINGS:-} &&
	-f $builddir/bindings/node/build/Release/weblocks.node ]]; then
	export WEBLOCKS_NODE_BINDINGS=$builddir/bindings/node
fi
export WEBLOCKS_TEST_PIDFILE=$tmp/pytest.pid
(cd "$tmp/run" && exec timeout -k 10 240 "$tmp/venv/bin/python" -m pytest \
	-p no:cacheprovider -rs "$tmp/src/tests") 2>&1 |
	tee "$tmp/pytest.log"

# "3 failed, 50 passed, 4 skipped, 1 error in 9.1s"
last=$(grep -E '^=*\s*[0-9]+ (passed|failed|error)' "$tmp/pytest.log" |
	tail -n 1)
count() { [[ $last =~ ([0-9]+)\ $1 ]] && echo "${BASH_REMATCH[1]}" || echo 0; }
passed=$(count passed)
failed=$(($(count failed) + $(count error)))
if [[ -z $last ]]; then
	echo "check.sh: pytest gave no summary (crashed or timed out)"
	failed=$((failed + 1))
fi

# Segments of this run's test buckets (https://t-PYTEST_PID-...) still in
# /dev/shm are leaks.
pid=$(cat "$tmp/pytest.pid" 2>/dev/null || echo none)
left=$(grep -l -a "https://t-$pid-" /dev/shm/wlk* 2>/dev/null || true)
if [[ -n $left ]]; then
	echo "check.sh: segments left in /dev/shm:" "${left//$'\n'/ }"
	failed=$((failed + 1))
else
	echo "check.sh: segments left in /dev/shm: none"
	passed=$((passed + 1))
fi
echo "$passed passed, $failed failed"
((failed == 0))
