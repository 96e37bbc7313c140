#!/bin/sh
# SPDX-License-Identifier: MIT
# tabs-short.sh - examples/tabs as a test: 3 tabs for 4 s elect a primary
# and read and write a file under shared and exclusive locks, checking
# every promise as they go (one primary at a time, no reader beside a
# writer, whole lines, tokens in grant order); with -k one more tab is
# SIGKILLed while primary, and its lock must pass on to a waiting tab.
# Fails unless tabs exits 0 with violations=0 and reports the pass-on.
tabs="${builddir:-.}/examples/tabs"
out=$("$tabs" -n 3 -s 4 -k 2>&1)
rc=$?
printf '%s\n' "$out" | grep -v ' held: \|^       '
if [ "$rc" -ne 0 ]; then
	echo "FAIL: tabs exited $rc"
	exit 1
fi
if ! printf '%s\n' "$out" | grep -q 'summary: .* violations=0 failed-tabs=0$'; then
	echo "FAIL: no clean summary line"
	exit 1
fi
if ! printf '%s\n' "$out" | grep -q 'the lock passed on .* after its holder was killed'; then
	echo "FAIL: the killed tab's lock did not pass on"
	exit 1
fi
