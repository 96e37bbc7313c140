#!/bin/sh
# SPDX-License-Identifier: MIT
# check.sh - every export of lib/libweblocks.sym has a section-3 manual
# page made from the header (man/gen/NAME.3, whose NAME line names it),
# weblocks(7) exists, and groff reads every page without a warning.
# shm-inspect's manual and --help name the segments /dev/shm/wlk<N>-...
# with N the code's WLK_LAYOUT_VERSION, and no other layout version.
set -eu

: "${builddir:?}" "${WLK_SYMFILE:?}" "${abs_top_srcdir:?}" "${WLK_SHM_INSPECT:?}"
gen=$builddir/man/gen
status=0
count=0

for f in $(sed -n 's/^[[:space:]]*\(wlk_[a-z_0-9]*\);$/\1/p' "$WLK_SYMFILE"); do
	count=$((count + 1))
	page=$gen/$f.3
	if [ ! -f "$page" ]; then
		echo "FAIL: $f is exported but has no manual page"
		status=1
	elif ! grep -q "^$f \\\\- " "$page"; then
		echo "FAIL: $page does not name $f in its NAME section"
		status=1
	fi
done
[ "$count" -gt 0 ] || { echo "FAIL: no exports in $WLK_SYMFILE"; exit 1; }
[ -f "$gen/weblocks.7" ] || { echo "FAIL: no weblocks.7"; status=1; }

layout=$(sed -n 's/^#define WLK_LAYOUT_VERSION \([0-9][0-9]*\)u*$/\1/p' \
	"$abs_top_srcdir/lib/format/layout.h")
[ -n "$layout" ] || { echo "FAIL: no WLK_LAYOUT_VERSION in layout.h"; exit 1; }
tool_man=$builddir/man/shm-inspect.1
help=$("$WLK_SHM_INSPECT" --help)
for what in "$tool_man" help; do
	if [ "$what" = help ]; then text=$help; else text=$(cat "$tool_man"); fi
	names=$(printf '%s\n' "$text" | sed 's/\\-/-/g' |
		grep -o 'wlk[0-9][0-9]*-' | sort -u | tr '\n' ' ')
	if [ "$names" != "wlk$layout- " ]; then
		echo "FAIL: $what names segments '$names', not wlk$layout-"
		status=1
	fi
done
if grep -q '@[A-Z]*@' "$tool_man"; then
	echo "FAIL: $tool_man has an unsubstituted @...@"
	status=1
fi

if command -v groff >/dev/null; then
	for page in "$gen"/*.3 "$gen"/*.7 "$tool_man"; do
		out=$(LC_ALL=C.UTF-8 groff -man -ww -z -Tutf8 "$page" 2>&1)
		if [ -n "$out" ]; then
			echo "FAIL: groff warns about $page:"
			echo "$out"
			status=1
		fi
	done
else
	echo "groff not installed: pages not rendered"
fi
echo "$count exports, $(ls "$gen" | wc -l) pages"
exit $status
