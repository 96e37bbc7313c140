#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh - Quick start 2 and CI: install what is missing, build, run all tests.
#
# Builds from scratch, out of tree, twice:
#   build-check/  --enable-Werror; make check, then make distcheck, then
#                 each bindings/NAME/check.sh against this build's library,
#                 then the unit and multiproc suites again on the etcd
#                 engine with its fault tests (tests/etcd/check.sh)
#   build-asan/   AddressSanitizer + UndefinedBehaviorSanitizer; make check,
#                 then the etcd suites on it (tests/etcd/check.sh)
#   build-deb/    the Debian packages: built, lintian, installed, the
#                 README's example built against them (tests/debian)
# checks after each make check that no test left a segment in /dev/shm,
# and ends with each test program's Criterion "Synthesis:" line per build and
# a total "N passed, N failed". Exits non-zero if anything failed.
#
# Environment: JOBS (default: nproc), CHECK_TIMEOUT (seconds per make check,
# default 1200), DISTCHECK=no to skip make distcheck.
set -euo pipefail

srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=${JOBS:-$(nproc)}
check_timeout=${CHECK_TIMEOUT:-1200}

deps_who=run.sh
# shellcheck source=tests/deps.sh
source "$srcdir/tests/deps.sh"

passed=0
failed=0
summary=()	# lines printed at the end
bad_logs=()	# logs whose tails are printed before the summary

step_failed() {	# LABEL WHAT [LOG]
	summary+=("$1: $2: FAILED")
	failed=$((failed + 1))
	[[ -n ${3:-} ]] && bad_logs+=("$3")
	return 0
}

# "Synthesis: Tested: X | Passing: Y | Failing: Z | Crashing: W"
synth_re='Passing: *([0-9]+) *\| *Failing: *([0-9]+)'

# Add up the results of one build's make check from the test logs.
collect() {	# LABEL DIR
	local label=$1 dir=$2 trs log name result synth y z reports line
	local found=0

	while IFS= read -r -d '' trs; do
		found=1
		log=${trs%.trs}.log
		name=${log#"$dir"/}
		name=${name%.log}
		result=$(sed -n 's/^:test-result: *//p' "$trs" | head -n 1)
		# Criterion colours only terminals, but strip escapes anyway.
		synth=$(sed 's/\x1b\[[0-9;]*m//g' "$log" 2>/dev/null |
			grep -a -o 'Synthesis:.*' | tail -n 1 || true)
		# Leak reports do not fail a Criterion test: its worker
		# reports them at exit after the verdict. Count them here.
		reports=$(grep -a -c -E \
			'ERROR: [A-Za-z]+Sanitizer|runtime error:' "$log" \
			2>/dev/null || true)
		if [[ $synth =~ $synth_re ]]; then
			y=${BASH_REMATCH[1]}
			# Failing already includes Crashing.
			z=${BASH_REMATCH[2]}
			summary+=("$label: $name: ${synth% }")
			passed=$((passed + y))
			failed=$((failed + z))
			if ((z > 0)); then
				bad_logs+=("$log")
			elif [[ $result != PASS ]]; then
				summary+=("$label: $name: exit status: $result")
				failed=$((failed + 1))
				bad_logs+=("$log")
			elif ((reports > 0)); then
				summary+=("$label: $name: sanitizer reports: $reports")
				failed=$((failed + 1))
				bad_logs+=("$log")
			fi
		else
			# A script test, or a Criterion program that died
			# before its summary: count the program as one test.
			summary+=("$label: $name: $result")
			# The torture and load tests' report lines say
			# what they did.
			line=$(grep -a -h -E '^(torture|load): .*kills=' \
				"$log" 2>/dev/null | tail -n 1 || true)
			[[ -n $line ]] && summary+=("$label: $line")
			case $result in
			PASS | XFAIL)
				passed=$((passed + 1))
				;;
			SKIP) ;;
			*)
				failed=$((failed + 1))
				bad_logs+=("$log")
				;;
			esac
		fi
	done < <(find "$dir/tests" -name '*.trs' -print0 2>/dev/null | sort -z)
	# A test that was killed (timeout) leaves a log but no .trs.
	while IFS= read -r -d '' log; do
		[[ -f ${log%.log}.trs || ${log##*/} == test-suite.log ]] &&
			continue
		name=${log#"$dir"/}
		step_failed "$label" "${name%.log}: no result" "$log"
	done < <(find "$dir/tests" -name '*.log' -print0 2>/dev/null | sort -z)
	((found)) || step_failed "$label" "make check: no test results"
	return 0
}

# leftovers LABEL DIR: the tests remove the segments they create; one of a
# test origin ("https://t-PID-...") made since DIR was configured and
# still in /dev/shm is a leak, counted as a failed test.
leftovers() {
	local left

	left=$(find /dev/shm -maxdepth 1 -type f -name 'wlk*' \
		-newer "$2/config.status" -exec grep -l -a \
		'https://t-[0-9]*-' {} + 2>/dev/null || true)
	if [[ -z $left ]]; then
		summary+=("$1: segments left in /dev/shm: none")
		passed=$((passed + 1))
	else
		summary+=("$1: segments left in /dev/shm: $(echo $left)")
		failed=$((failed + 1))
	fi
}

# failures LABEL DIR: name what failed right away, next to make check's
# own "FAIL:" lines, so that an excerpt of the output around them says
# which test and which assertion (the logs' tails also come at the end).
failures() {
	local log

	for log in "${bad_logs[@]}"; do
		[[ $log == "$2"/* && -f $log ]] || continue
		echo "run.sh: $1: failures in ${log#"$2"/}:"
		sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -a -A 2 -E \
			'\[FAIL\]|Assertion|CRASH|[Cc]rash|Timed out|Warning|ERROR: |runtime error:' |
			head -n 40 || true
	done
	return 0
}

# build_and_check LABEL DIR [configure arguments...]: configure, make,
# make check. Fails if any of them did.
build_and_check() {
	local label=$1 dir=$2 rc=0

	shift 2
	echo "run.sh: == $label build in ${dir#"$srcdir"/} =="
	rm -rf "$dir"
	mkdir -p "$dir"
	if ! (cd "$dir" && "$srcdir/configure" -q "$@"); then
		step_failed "$label" configure "$dir/config.log"
		return 1
	fi
	if ! make -C "$dir" -s -j"$jobs"; then
		step_failed "$label" make
		return 1
	fi
	echo "run.sh: == $label make check =="
	timeout -k 30 "$check_timeout" make -C "$dir" -j"$jobs" check || rc=$?
	if ((rc == 124)); then
		step_failed "$label" "make check: timeout ($check_timeout s)"
	fi
	collect "$label" "$dir"
	leftovers "$label" "$dir"
	failures "$label" "$dir"
	return "$rc"
}

# scripted LABEL NAME SCRIPT BUILDDIR: run SCRIPT BUILDDIR SRCDIR, whose
# output ends with a line "N passed, N failed", which is added to the
# totals. The script installs what it needs (as deps.sh does) and exits
# non-zero if anything failed. Its whole output goes to
# BUILDDIR/NAME.log.
scripted() {
	local label=$1 name=$2 script=$3 dir=$4 log line rc re
	re='^([0-9]+) passed, ([0-9]+) failed$'

	log=$dir/$name.log
	echo "run.sh: == $label $name =="
	rc=0
	timeout -k 30 "$check_timeout" bash "$script" "$dir" "$srcdir" \
		>"$log" 2>&1 || rc=$?
	line=$(grep -a -E "$re" "$log" | tail -n 1 || true)
	if [[ $line =~ $re ]]; then
		summary+=("$label: $name: $line")
		passed=$((passed + BASH_REMATCH[1]))
		failed=$((failed + BASH_REMATCH[2]))
		if ((BASH_REMATCH[2] > 0)); then
			bad_logs+=("$log")
		elif ((rc != 0)); then
			step_failed "$label" "$name: exit $rc" "$log"
		fi
	else
		step_failed "$label" "$name: no test summary (exit $rc)" "$log"
	fi
	# A run that was skipped says why; so does the summary.
	line=$(grep -a -E '^[a-z]+: SKIPPED' "$log" | head -n 1 || true)
	[[ -n $line ]] && summary+=("$label: $line")
	return 0
}

# bindings LABEL BUILDDIR: each bindings/NAME/check.sh builds its
# package against BUILDDIR's library and runs its tests (scripted above;
# its log is BUILDDIR/bindings-NAME.log).
bindings() {
	local label=$1 dir=$2 script name

	for script in "$srcdir"/bindings/*/check.sh; do
		[[ -f $script ]] || continue
		name=${script%/check.sh}
		name=${name##*/}
		scripted "$label" "bindings-$name" "$script" "$dir"
	done
	return 0
}

# debian LABEL: tests/debian/check.sh builds the Debian packages from this
# tree in build-deb/, runs lintian, installs them, builds and runs the
# README's example against them alone, and purges them. Its step lines
# and its "N passed, N failed" go into the summary and the totals.
debian() {
	local label=$1 dir=$srcdir/build-deb line rc=0
	local re='^([0-9]+) passed, ([0-9]+) failed$'

	echo "run.sh: == $label packages =="
	rm -rf "$dir"
	mkdir -p "$dir"
	timeout -k 30 "$check_timeout" bash "$srcdir/tests/debian/check.sh" \
		"$srcdir" "$dir" >"$dir/check.log" 2>&1 || rc=$?
	while IFS= read -r line; do
		summary+=("$label: ${line#debian: }")
	done < <(grep -a '^debian: ' "$dir/check.log")
	line=$(grep -a -E "$re" "$dir/check.log" | tail -n 1 || true)
	if [[ $line =~ $re ]]; then
		passed=$((passed + BASH_REMATCH[1]))
		failed=$((failed + BASH_REMATCH[2]))
		((BASH_REMATCH[2] == 0)) || bad_logs+=("$dir/check.log")
		((rc == 0 || BASH_REMATCH[2] > 0)) ||
			step_failed "$label" "exit $rc" "$dir/check.log"
	else
		step_failed "$label" "no test summary (exit $rc)" \
			"$dir/check.log"
	fi
	return 0
}

install_missing

cd "$srcdir"
if [[ -f config.status ]]; then
	echo "run.sh: the source tree is configured in place, which rules" \
		"out the out-of-tree builds; run 'make distclean' first" >&2
	exit 1
fi
echo "run.sh: autoreconf -fi"
autoreconf -fi

# 1. The plain build, warnings as errors; then, if it passed, make
# distcheck (which builds and checks the tarball once more).
if ! build_and_check plain "$srcdir/build-check" --enable-Werror; then
	summary+=("plain: distcheck: skipped, the plain build failed")
elif [[ ${DISTCHECK:-yes} == no ]]; then
	summary+=("plain: distcheck: skipped (DISTCHECK=no)")
else
	echo "run.sh: == plain make distcheck =="
	start=$SECONDS
	if make -C "$srcdir/build-check" -j"$jobs" distcheck \
		>"$srcdir/build-check/distcheck.out" 2>&1; then
		summary+=("plain: distcheck: PASS ($((SECONDS - start)) s)")
		passed=$((passed + 1))
	else
		step_failed plain "distcheck ($((SECONDS - start)) s)" \
			"$srcdir/build-check/distcheck.out"
	fi
fi

# 1b. The language bindings, against the plain build's library.
if [[ -f $srcdir/build-check/lib/libweblocks.la ]]; then
	bindings plain "$srcdir/build-check"
fi

# 1c. The unit and multi-process suites once more on the etcd engine, on
# a three-member cluster on loopback, and its fault tests
# (tests/etcd/check.sh; skipped, saying so, only without etcd).
if [[ -x $srcdir/build-check/tests/unit/unit ]]; then
	scripted plain etcd "$srcdir/tests/etcd/check.sh" "$srcdir/build-check"
fi

# 2. The same suite under ASan and UBSan, with the fail points compiled in
# so that the crash-consistency sweep runs. The sanitizers only affect sanitized
# programs. Criterion runs each test in a worker process; leaks that a worker
# reports as it exits do not fail the test, so collect() counts them.
export ASAN_OPTIONS=detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
san=-fsanitize=address,undefined
build_and_check asan+ubsan "$srcdir/build-asan" --enable-failpoints \
	CFLAGS="-O1 -g $san -fno-omit-frame-pointer" LDFLAGS="$san" || true

# 2b. The etcd suites once more, sanitized (tests/etcd/check.sh, which
# counts the sanitizers' reports; about 3 minutes on 2 CPUs).
if [[ -x $srcdir/build-asan/tests/unit/unit ]]; then
	scripted asan+ubsan etcd "$srcdir/tests/etcd/check.sh" \
		"$srcdir/build-asan"
fi

# 3. The Debian packages, built, installed and used as a user would.
debian debian

for log in "${bad_logs[@]}"; do
	[[ -f $log ]] || continue
	echo
	echo "run.sh: ---- last lines of ${log#"$srcdir"/} ----"
	tail -n 60 "$log"
done

echo
echo "run.sh: ==== test summary ===="
for line in "${summary[@]}"; do
	echo "$line"
done
echo "$passed passed, $failed failed"
((failed == 0))
