#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# demo.sh - Quick start 1: install what is missing, build, run examples/tabs.
#
# usage: examples/demo.sh [tabs options: -n TABS -s SECONDS -o ORIGIN]
# (it adds -k: a tab is killed while it holds a lock, which passes on)
#
# Builds in build/ (or in the source tree if it is already configured there)
# and reuses that build on later runs.
set -euo pipefail

srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

deps_who=demo
# shellcheck source=tests/deps.sh
source "$srcdir/tests/deps.sh"

install_missing

# configure refuses to build out of tree once the tree is configured in place.
if [[ -f $srcdir/config.status ]]; then
	builddir=$srcdir
else
	builddir=$srcdir/build
fi

if [[ ! -x $srcdir/configure ]]; then
	echo "demo: autoreconf -fi"
	(cd "$srcdir" && autoreconf -fi)
fi
if [[ ! -f $builddir/Makefile ]]; then
	echo "demo: configuring in $builddir"
	mkdir -p "$builddir"
	(cd "$builddir" && "$srcdir/configure" -q)
fi
# make rebuilds only what changed (and reruns configure if configure.ac did).
echo "demo: building in $builddir"
make -C "$builddir" -s -j"$(nproc)"

# Run the tabs, and halfway through show what shm-inspect sees in their
# bucket's segment (the tabs print wlk_query() themselves meanwhile).
args=("$@")
origin=
for ((i = 0; i < ${#args[@]}; i++)); do
	[[ ${args[i]} == -o ]] && origin=${args[i + 1]:-}
done
if [[ -z $origin ]]; then
	origin="https://tabs-demo-$$.example"
	args+=(-o "$origin")
fi
# -k: one more tab joins the election and is SIGKILLed while it holds the
# lock "primary"; the lock passes on to the next tab in the queue.
args+=(-k)
cat <<'LEGEND'
demo: how to read what follows
  tab-N            one of the processes ("tabs") sharing the bucket
  tab-N is primary the tab now holding the exclusive lock "primary": every
                   tab queues for it, and it passes from tab to tab in FIFO
                   order (an election); "election N" counts the grants
  token            the grant's fencing token: it rises with every grant,
                   so a resource can refuse a deposed primary
  NAME held: ...   five times a second, wlk_query(): who holds the lock
  | queue: ...     NAME (client, mode, pid) and who waits for it, in order;
                   "doc" guards a file that tabs read (sh = shared) and
                   append to (ex = exclusive)
  killing tab-N    the headline: the parent SIGKILLs the tab that holds
                   "primary" (it never releases it); the next line shows
                   the lock passed on to the next tab in the queue, and how
                   many ms after the kill
  summary          violations counts any broken exclusion or token order;
                   tabs exits 1 if it is not 0
LEGEND
echo "demo: running examples/tabs ${args[*]}"
"$builddir/examples/tabs" "${args[@]}" &
tabs=$!
sleep 1.5 # pacing the show only
if kill -0 "$tabs" 2>/dev/null; then
	echo
	echo "demo: ---- shm-inspect dump $origin ----"
	"$builddir/tools/shm-inspect" dump "$origin" || true
	echo "demo: ---- end of shm-inspect ----"
	echo
fi
wait "$tabs"
