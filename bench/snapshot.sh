#!/bin/sh
# SPDX-License-Identifier: MIT
# snapshot.sh - what `make bench-snapshot` runs after `make bench`: make the
# run in OUTDIR the dated snapshot kept in the source tree (DEST, bench/).
#
# usage: snapshot.sh OUTDIR DEST
#
# DEST/results.md becomes the run's results.md, followed by the run
# history: one line for this run (its summary.txt), then the history of
# the snapshot it replaces (everything from its "## Run history" heading
# on). results.json and the plots are copied; plots the run did not draw
# are removed rather than left beside figures of another run. A quick or
# partial run (BENCH_QUICK, BENCH_ONLY) is not snapshotted.
set -eu

out=$1
dest=$2
heading='## Run history'

for f in results.md results.json summary.txt; do
	if [ ! -f "$out/$f" ]; then
		echo "bench-snapshot: $out/$f missing (run make bench)" >&2
		exit 1
	fi
done
if grep -q -e '^- mode: QUICK' -e '^- programs: only' "$out/results.md"
then
	echo "bench-snapshot: $out holds a quick or partial run;" \
		"a snapshot needs a full make bench" >&2
	exit 1
fi

new=$dest/results.md.new
{
	cat "$out/results.md"
	printf '\n%s\n\n' "$heading"
	echo "Newest first. Compare ratios within one run, never times" \
		"across runs."
	echo
	printf -- '- %s\n' "$(cat "$out/summary.txt")"
	# The earlier entries: the old snapshot's history, minus its heading
	# and the sentence above.
	if [ -f "$dest/results.md" ]; then
		awk -v h="$heading" '
			$0 == h { on = 1; next }
			on && /^Newest first\./ { skip = 1 }
			on && skip && /^$/ { skip = 0; next }
			on && !skip && !(n == 0 && /^$/) { print; n++ }
		' "$dest/results.md"
	fi
} > "$new"
mv "$new" "$dest/results.md"
cp "$out/results.json" "$dest/results.json"
for p in names queue agents; do
	if [ -f "$out/$p.png" ]; then
		cp "$out/$p.png" "$dest/$p.png"
	elif [ -f "$dest/$p.png" ]; then
		rm -f "$dest/$p.png"
		echo "bench-snapshot: $p.png not drawn in this run" \
			"(gnuplot?); removed $dest/$p.png" >&2
	fi
done
echo "bench-snapshot: wrote $dest/results.md, results.json and the plots" >&2
