#!/bin/sh
# SPDX-License-Identifier: MIT
# check.sh - make check's runs of the models: the grant broadcast
# (broadcast.pml, below), and the fast path (fastpath.pml): spin
# explores every state of 2 processes (about 6 million), asserting mutual
# exclusion and that no process waits for ever; then every state of 2
# processes and a query that copies once at any moment, with slot gens
# modulo 2 (about 8 million states, 15 s, 600 MB; modulo 4 would be
# hundreds of millions), asserting besides that no operation completes
# with a change the copy may have missed while it runs. MODEL_NP=3
# searches 3 processes (no query) with bitstate hashing and a bounded
# depth instead (minutes, about 1 GiB; a partial search).
# And the scope grant rule (scope.pml): every state of 4 requests for any
# scope of 2 names in either mode (about 11 million states, 20 s). And
# the fast path's fencing tokens (fastpath.pml with TOKENS, at the end),
# and the lanes' hold on their manager (lanes.pml).
# Skipped (exit 77) when spin(1) is not installed.
set -eu

src=${abs_top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
np=${MODEL_NP:-2}
command -v spin >/dev/null || { echo "model: spin is not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# search WHAT SPIN-DEFINES: one search of the model in $model; fails the
# script on a violation.
model=fastpath.pml
search() {
	what=$1
	shift
	# shellcheck disable=SC2068 # the defines are words
	spin -a $@ "$src/tests/model/$model" >/dev/null
	if [ "$np" -le 2 ]; then
		opts="-DSAFETY -DVECTORSZ=2048 -DCOLLAPSE"
		run="./pan -m2000000 -w24"
	else
		opts="-DSAFETY -DVECTORSZ=2048 -DBITSTATE"
		run="./pan -m5000000 -w30"
	fi
	# shellcheck disable=SC2086
	${CC:-cc} -O2 $opts -w -o pan pan.c
	$run >pan.out 2>&1 || true
	# A violation is reported as "pan:N: what (at depth D)".
	grep -E 'errors:|states, stored|^pan:[0-9]+:' pan.out || true
	if grep -q 'errors: 0' pan.out && ! grep -q -E '^pan:[0-9]+:' pan.out
	then
		if grep -q 'max search depth too small' pan.out; then
			[ "$np" -le 2 ] || {
				echo "model: $what: no violation found" \
					"(partial search: bitstate, depth" \
					"bounded)"
				return 0
			}
		else
			echo "model: $what: no violation"
			return 0
		fi
	fi
	sed -n '1,40p' pan.out
	exit 1
}

# The grant broadcast (broadcast.pml): every state of 3 waiters of one
# batch grant (4 with MODEL_NW=4: about 5 million states), asserting that
# none is left asleep.
nw=${MODEL_NW:-3}
model=broadcast.pml
search "grant broadcast, $nw waiters" -DNW="$nw"
model=scope.pml
search "scope grant rule, 4 requests on 2 names"
# How a lane keeps its manager (lanes.pml): every state of 2 threads and
# the closer (about 0.8 million states, under a second; 3 threads: about
# 41 million, a minute and 2.3 GB), asserting that the lane's reference
# is dropped once and never under a lock the lane keeps.
model=lanes.pml
search "lanes, 2 threads and a close" -DNT=2
model=fastpath.pml

search "$np processes" -DNP="$np" -DQN=0
[ "$np" -le 2 ] || exit 0
search "$np processes and a query" -DNP="$np" -DQN=1 -DG=2
# The fencing tokens (TOKENS in fastpath.pml): every state of 2 processes
# with tokens up to 5 (about 1.3 million states), asserting that each
# entrant of the critical section holds a token above the one before.
search "2 processes, fencing tokens" -DNP=2 -DQN=0 -DG=2 -DTOKENS
