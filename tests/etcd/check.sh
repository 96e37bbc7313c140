#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check.sh - the behaviour suites once more, on the etcd engine: start a
# throw-away three-member cluster on loopback (tests/etcd/cluster.sh, data
# under BUILDDIR/etcd-cluster), run tests/unit/unit and
# tests/multiproc/multiproc with WEBLOCKS_BACKEND naming it (the tests
# skip, with the reason, what only the shared-memory engine has), then
# the etcd fault tests (tests/etcd/faults: a leader killed while requests
# wait, a lease that expires, with single names and with scopes held and
# queued, a member restarted, a release resent after its reply was lost,
# a release after its lease ended unseen, two detect_deadlocks requests
# closing one cycle at once, a process's managers on one lease and one
# thread and one watch stream per bucket, a watch stream cut and started
# again while a lock's key is deleted, a killed process's locks of all
# its managers passed on, a holder killed, exec'd or forked whose guard
# revokes its lease at once: tests/etcd/guard.c) and a
# short torture run
# (tests/torture), and stop the members by their pids. Ends with "N
# passed, N failed", which tests/run.sh adds to its totals; in a
# sanitized build, each program's log with a sanitizer report counts as
# one failure more. Without etcd installed it says so and counts nothing.
# tests/run.sh runs it on its plain build and on its ASan+UBSan build
# (about 3 minutes on 2 CPUs).
#
# usage: check.sh BUILDDIR [SRCDIR]
set -uo pipefail

build=$(cd "${1:?usage: check.sh BUILDDIR}" && pwd)
src=${2:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
cluster=$build/etcd-cluster
# Short leases keep the lease tests short; the cluster's 500 ms election
# timeout allows them (cluster.sh).
export WEBLOCKS_ETCD_TTL=${WEBLOCKS_ETCD_TTL:-2}
suite_timeout=${ETCD_SUITE_TIMEOUT:-900}

passed=0
failed=0
synth_re='Passing: *([0-9]+) *\| *Failing: *([0-9]+)'

if ! command -v etcd >/dev/null; then
	echo "etcd: SKIPPED: etcd is not installed (Debian: etcd-server);" \
		"the etcd engine's tests did not run"
	echo "0 passed, 0 failed"
	exit 0
fi
if [[ ! -x $build/tests/etcd/faults ]]; then
	echo "etcd: SKIPPED: this build has no etcd engine (configure" \
		"--enable-etcd needs libcurl4-openssl-dev and libjson-c-dev)"
	echo "0 passed, 0 failed"
	exit 0
fi

stop() { bash "$src/tests/etcd/cluster.sh" stop "$cluster"; }
trap stop EXIT
rm -rf "$cluster"
if ! backend=$(bash "$src/tests/etcd/cluster.sh" start "$cluster"); then
	echo "etcd: the cluster did not start"
	tail -n 20 "$cluster"/m*.log
	echo "0 passed, 1 failed"
	exit 1
fi
export WEBLOCKS_BACKEND=$backend
# The build's guard, not the installed one (lib/etcd/guard.c).
export WEBLOCKS_ETCD_GUARD=${WEBLOCKS_ETCD_GUARD:-$build/tools/etcd-guard}
export WLK_ETCD_CLUSTER=$cluster WLK_ETCD_CLUSTER_SH=$src/tests/etcd/cluster.sh
echo "etcd: cluster $backend (data in $cluster)"

# sanitizer NAME LOG: in a sanitized build, a report in LOG (a leak a
# Criterion worker reports after its verdict does not fail the test) is
# one failed test more, as tests/run.sh counts them.
sanitizer() {
	local n
	n=$(grep -a -c -E 'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$2" ||
		true)
	if ((n > 0)); then
		echo "etcd: $1: sanitizer reports: $n"
		grep -a -A 12 -E 'ERROR: [A-Za-z]+Sanitizer|runtime error:' \
			"$2" | head -n 40
		failed=$((failed + 1))
	fi
}

# run NAME PROGRAM [ARGS...]: one Criterion program, its log beside it.
run() {
	local name=$1 log=$build/etcd-$1.log rc=0 synth
	shift
	timeout -k 10 "$suite_timeout" "$@" >"$log" 2>&1 || rc=$?
	synth=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -a -o 'Synthesis:.*' |
		tail -n 1)
	if [[ $synth =~ $synth_re ]]; then
		passed=$((passed + BASH_REMATCH[1]))
		failed=$((failed + BASH_REMATCH[2]))
		echo "etcd: $name: $synth"
		if ((BASH_REMATCH[2] > 0)); then
			grep -a -B 3 -E '^\[FAIL\]' "$log" | head -n 60
		fi
	else
		echo "etcd: $name: no result (exit $rc)"
		tail -n 30 "$log"
		failed=$((failed + 1))
	fi
	sanitizer "$name" "$log"
}

# The behaviour suites run a few tests at a time: they all go through
# the one cluster, whose round trips set the pace, and a test's own
# timeout must not be eaten by the others' load.
jobs=${ETCD_JOBS:-4}
run unit "$build/tests/unit/unit" -j"$jobs"
run multiproc "$build/tests/multiproc/multiproc" -j"$jobs"
# The fault tests kill and restart members: one at a time.
run faults "$build/tests/etcd/faults" -j1

# The torture (tests/torture.c: its invariant checker, workers SIGKILLed)
# on etcd: kills 200 ms apart at most, since a worker needs round trips
# to the cluster to get anywhere; a fifth of the requests scopes (its
# default); one test, by its exit status.
log=$build/etcd-torture.log
if timeout -k 10 300 "$build/tests/torture" -p 6 -n 3 -k 60 -g 200 \
	-t 120 >"$log" 2>&1; then
	passed=$((passed + 1))
else
	failed=$((failed + 1))
	tail -n 20 "$log"
fi
echo "etcd: $(grep -a '^torture: .*kills=' "$log" | tail -n 1)"
sanitizer torture "$log"

echo "$passed passed, $failed failed"
((failed == 0))
