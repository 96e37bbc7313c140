#!/bin/sh
# SPDX-License-Identifier: MIT
# check.sh - the layering of lib/ (HACKING: Architecture), checked on the
# built objects: every call between files of lib/ must go down.
#
#   1. A file may call a function of its own folder or of a lower layer,
#      never of a higher one, nor of the other leaf.
#   2. The files of one folder never call each other in a circle.
#   3. Nothing outside lib/ includes a header of lib/ but lib/testing.h.
#   4. The engine seam: the API layer (api, async) calls only the system
#      primitives (sys), the choice of engine (engine) and itself; the
#      lock state it reaches through struct wlk__engine, by pointer.
#
# Rule 1 and 2 read `nm` of each layer's convenience library: an undefined
# wlk_/wlk__ symbol of a member is a call to the member that defines it.
# usage: check.sh [BUILDDIR [SRCDIR]] (default: $builddir, $abs_top_srcdir)
set -eu

build=${1:-${builddir:-.}}
src=${2:-${abs_top_srcdir:-.}}
# The layers, lowest first, with their rank. Engines (shm, etcd: rank 7)
# must not call each other; engine (the choice of engine) is above them
# all, the API layer above it. etcd is checked only where it was built.
layers="sys:1 state:2 spec:3 repair:4 attach:5 inspect:6 shm:7 engine:8 api:9 async:10"
[ -f "$build/lib/etcd/.libs/libetcd.a" ] && layers="$layers etcd:7"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
: > "$tmp/defs"
: > "$tmp/uses"
for lr in $layers; do
	l=${lr%:*} r=${lr#*:}
	a=$build/lib/$l/.libs/lib$l.a
	if [ ! -f "$a" ]; then
		echo "layering: $a not built" >&2
		exit 99
	fi
	# nm -A: "archive:member: value type name" (undefined: no value).
	nm -A "$a" 2>/dev/null | awk -v l="$l" -v r="$r" \
		-v defs="$tmp/defs" -v uses="$tmp/uses" '
	{
		n = split($1, p, ":")
		m = p[n - 1]
		sub(/^lib[a-z]*_la-/, "", m); sub(/\.o$/, "", m)
		sym = $NF
		if (sym !~ /^wlk_/)
			next
		if ($(NF - 1) == "U")
			print l, r, m, sym >> uses
		else if ($(NF - 1) ~ /^[TDBRV]$/)
			print sym, l, r, m >> defs
	}'
done

status=0
# Rule 1.
awk 'NR == FNR { dl[$1] = $2; dr[$1] = $3; df[$1] = $4; next }
     ($4 in dl) && dl[$4] != $1 && dr[$4] >= $2 {
	printf "layering: %s/%s.c calls %s of %s/%s.c, which is not below it\n",
	       $1, $3, $4, dl[$4], df[$4]
	bad = 1
     }
     END { exit bad }' "$tmp/defs" "$tmp/uses" || status=1

# Rule 2: the file graph of each folder, through tsort(1).
awk 'NR == FNR { dl[$1] = $2; df[$1] = $4; next }
     ($4 in dl) && dl[$4] == $1 && df[$4] != $3 {
	print $1 "/" $3, $1 "/" df[$4]
     }' "$tmp/defs" "$tmp/uses" | sort -u > "$tmp/edges"
if ! tsort "$tmp/edges" > /dev/null 2> "$tmp/loop"; then
	echo "layering: files of one folder call each other in a circle:"
	sed 's/^/  /' "$tmp/loop"
	status=1
fi

# Rule 4.
awk 'NR == FNR { dl[$1] = $2; df[$1] = $4; next }
     ($1 == "api" || $1 == "async") && ($4 in dl) &&
     dl[$4] !~ /^(sys|engine|api|async)$/ {
	printf "layering: %s/%s.c calls %s of %s/%s.c, past the engine seam\n",
	       $1, $3, $4, dl[$4], df[$4]
	bad = 1
     }
     END { exit bad }' "$tmp/defs" "$tmp/uses" || status=1

# Rule 3.
if grep -rnE '^#[[:space:]]*include[[:space:]]*"[^"]*lib/' \
	"$src/tests" "$src/bench" "$src/tools" "$src/examples" 2>/dev/null |
	grep -v 'lib/testing\.h"' > "$tmp/inc"; then
	echo "layering: a header of lib/ included from outside lib/:"
	sed 's/^/  /' "$tmp/inc"
	status=1
fi

n=$(wc -l < "$tmp/uses")
if [ "$status" = 0 ]; then
	echo "layering: PASS ($n calls between lib/ files, all downward;" \
		"$(wc -l < "$tmp/edges") within folders, no circle; the API" \
		"layer past the engine seam: none)"
fi
exit $status
