#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# demo.sh - install the Python bindings into a venv, run the two-process
# demo (python -m weblocks.demo).
#
# usage: bindings/python/demo.sh [BUILDDIR]
#
# Without BUILDDIR, builds the library as examples/demo.sh does (in
# build/ of the source tree, reused on later runs). Installs the Debian
# packages that are missing, through sudo when not root. The venv is
# bindings/python/.venv-demo (kept; delete it when done).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
srcdir=$(cd "$here/../.." && pwd)
python=/usr/bin/python3

deps_who=bindings/python/demo
# shellcheck source=../../tests/deps.sh
source "$srcdir/tests/deps.sh"
python_packages=(python3 python3-venv python3-setuptools python3-wheel)
if [[ $# -ge 1 ]]; then
	deps_packages=("${python_packages[@]}")	# the library is built
	install_missing
	builddir=$(cd "$1" && pwd)
else
	deps_packages+=("${python_packages[@]}")
	install_missing
	if [[ -f $srcdir/config.status ]]; then
		builddir=$srcdir
	else
		builddir=$srcdir/build
	fi
	[[ -x $srcdir/configure ]] || (cd "$srcdir" && autoreconf -fi)
	if [[ ! -f $builddir/Makefile ]]; then
		mkdir -p "$builddir"
		(cd "$builddir" && "$srcdir/configure" -q)
	fi
	echo "demo: building the library in $builddir"
	make -C "$builddir" -s -j"$(nproc)"
fi
lib=$builddir/lib/.libs/libweblocks.so
[[ -f $lib ]] || { echo "demo: no $lib" >&2; exit 1; }

venv=$here/.venv-demo
[[ -x $venv/bin/python ]] || "$python" -m venv --system-site-packages "$venv"
# Build from a copy, so that the source tree stays clean.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$here/pyproject.toml" "$here/README.md" "$here/weblocks" "$tmp/"
echo "demo: pip install into $venv"
"$venv/bin/python" -m pip install -q --no-build-isolation --no-index \
	--disable-pip-version-check "$tmp"
echo "demo: WEBLOCKS_LIBRARY=$lib python -m weblocks.demo"
echo
(cd "$tmp" && WEBLOCKS_LIBRARY=$lib "$venv/bin/python" -m weblocks.demo)
