#!/bin/sh
# SPDX-License-Identifier: MIT
# run.sh - what `make bench` runs: every benchmark program in turn, then one
# table (stdout, results.md, results.json), a one-line summary of the
# targets (summary.txt, for the run history of bench-snapshot) and the
# scaling plots (*.png), all in OUTDIR.
#
# usage: run.sh BINDIR SRCDIR OUTDIR
#   BENCH_QUICK=1   a quick run for development (fewer passes, shorter)
#   BENCH_ONLY="uncontended handoff"   run only these programs
#   BENCH_CC, BENCH_CFLAGS   the compiler and flags, for the setup lines
#   BENCH_LIBRARY   what to call the library version (default: git describe)
#   BENCH_LIBTOOL   how to run libtool (its --mode=execute runs valgrind
#                   on the programs of a build tree)
#   WEBLOCKS_BACKEND   the etcd cluster of part 6 (bench/etcd); without
#                   it, a throw-away one on loopback (tests/etcd/cluster.sh),
#                   or part 6 is skipped, saying why
#   WEBLOCKS_ETCD_TTL  part 6's lease TTL in seconds (default here: 2)
set -eu

bindir=$1
srcdir=$2
out=$3
mkdir -p "$out"
tsv=$out/results.tsv
: > "$tsv"
# Nothing of an earlier run may pass for this one's.
rm -f "$out"/*.dat "$out/names.png" "$out/queue.png" "$out/agents.png" \
	"$out/results.md" "$out/results.json" "$out/summary.txt"

q=
case ${BENCH_QUICK:-0} in
0 | '') ;;
*) q=-q ;;
esac
all="uncontended startup handoff failover throughput scale_names
	scale_segment scale_queue scale_shared scale_agents scopes etcd"
progs=${BENCH_ONLY:-$all}

setup() {
	printf 'setup\t%s\t%s\n' "$1" "$2" >> "$tsv"
}

cpu_model() {
	sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | sort -u |
		paste -sd ';' -
}

version=${BENCH_LIBRARY:-$(git -C "$srcdir" describe --always --dirty \
	2> /dev/null || echo '(not a git checkout)')}
setup date "$(date -u '+%Y-%m-%d %H:%M:%S UTC')"
setup machine "$(uname -sm), kernel $(uname -r), $(nproc) CPUs \
($(cpu_model))"
setup compiler "$(${BENCH_CC:-cc} --version | head -n 1), \
CFLAGS ${BENCH_CFLAGS:-unknown}"
setup library "weblocks $version"
setup pinning "parts 1 and 5: CPU 0 (queues: CPU 0 and 1); part 2: \
CPU 0 + CPU 1 (2 CPUs) or both on CPU 0 (1 CPU); part 3: unpinned; \
part 4: CPU 0 + CPU 1, and one unpinned run; broker server on CPU 0 \
(same CPU) or CPU 1 (other CPU)"
if [ -n "$q" ]; then
	setup mode "QUICK (BENCH_QUICK=1): 2 passes, fewer repetitions; \
for development, not for quoting"
else
	setup mode "full: 3 passes per figure, methods interleaved within \
each pass"
fi
if [ -n "${BENCH_ONLY:-}" ]; then
	# shellcheck disable=SC2086,SC2116 # the names on one line
	setup programs "only $(echo $progs) (BENCH_ONLY)"
else
	setup programs "all"
fi

# Other work on the machine skews everything: say how busy the CPUs were
# in the second before the run (the load average would still remember an
# earlier run's thousand threads).
cpu_ticks() {
	awk '/^cpu / { print $2 + $3 + $4 + $5 + $6 + $7 + $8, $5 + $6 }' \
		/proc/stat
}
# shellcheck disable=SC2046 # two numbers, split on purpose
set -- $(cpu_ticks)
sleep 1
# shellcheck disable=SC2046
set -- "$@" $(cpu_ticks)
busy=$(awk -v t0="$1" -v i0="$2" -v t1="$3" -v i1="$4" 'BEGIN {
	printf "%.0f", (t1 > t0 ? 100 * (1 - (i1 - i0) / (t1 - t0)) : 0) }')
# Instructions per pair, beside the time of part 1: callgrind counts them,
# so they do not drift. The difference of two runs (11000 and 1000 pairs)
# leaves out the set-up. (perf stat -e instructions needs hardware
# counters, which a VM often lacks; callgrind works everywhere.) In a
# build tree the programs are libtool wrapper scripts.
instr() {
	# shellcheck disable=SC2086 # BENCH_LIBTOOL is a command line
	${BENCH_LIBTOOL:+$BENCH_LIBTOOL --mode=execute} \
		valgrind --tool=callgrind --callgrind-out-file=/dev/null \
		"$bindir/uncontended" "$1" "$2" 2>&1 |
		sed -n 's/.*Collected : //p'
}
# $1 key, $2 exclusive/shared, $3 the option that runs weblocks pairs
# of that mode, $4 the robust mutex pair's count (anchor)
instr_figure() {
	w1=$(instr "$3" 1000)
	w2=$(instr "$3" 11000)
	if [ -z "$w1" ] || [ -z "$w2" ]; then
		printf 'note\tcallgrind\tinstructions per %s pair: %s\n' \
			"$2" "callgrind gave no count, not measured" >> "$tsv"
		return
	fi
	awk -v k="$1" -v m="$2" -v w1="$w1" -v w2="$w2" -v r="$4" 'BEGIN {
		w = (w2 - w1) / 10000
		if (w < 0) w = 0 # a count cannot be negative
		printf "fig\t%s\t1\tinstructions per %s pair " \
		       "(callgrind, 11000 minus 1000 pairs)\tinstr/pair" \
		       "\t%.1f\tnan\t%.1f\t%.1f\t1\n", k, m, w, w, w
		if (r != "")
			printf "anc\t%s\trobust pshared pthread mutex " \
			       "pair in shm\tinstr/pair\t%.1f\tnan\t%.1f" \
			       "\t%.1f\t1\n", k, r, r, r
	}' >> "$tsv"
}
instructions() {
	if ! command -v valgrind > /dev/null 2>&1; then
		printf 'note\tcallgrind\tinstructions per pair: %s\n' \
			"not measured (valgrind not found; apt-get install \
valgrind)" >> "$tsv"
		return
	fi
	r1=$(instr -J 1000)
	r2=$(instr -J 11000)
	r=
	if [ -n "$r1" ] && [ -n "$r2" ]; then
		r=$(awk -v a="$r1" -v b="$r2" 'BEGIN {
			r = (b - a) / 10000; printf "%.1f", r < 0 ? 0 : r }')
	fi
	instr_figure p1.ex.instr exclusive -I "$r"
	instr_figure p1.sh.instr shared -K "$r"
}

# Part 6, bench/etcd: the etcd engine on a cluster, WEBLOCKS_BACKEND's or
# a throw-away three-member one on loopback, stopped by its pids after.
# Skipped, with a note in the table saying why, without a build with the
# engine or a cluster.
etcd_skip() {
	printf 'note\tetcd\tpart 6 (the etcd engine): skipped: %s\n' "$1" \
		>> "$tsv"
	echo " skipped: $1" >&2
}
etcd_part() {
	cluster=
	if [ ! -x "$bindir/etcd" ]; then
		etcd_skip "this build has no etcd engine (configure \
--enable-etcd: libcurl4-openssl-dev, libjson-c-dev)"
		return 0
	fi
	backend=${WEBLOCKS_BACKEND:-}
	if [ -z "$backend" ]; then
		if ! command -v etcd > /dev/null 2>&1; then
			etcd_skip "WEBLOCKS_BACKEND names no cluster and etcd \
is not installed (Debian: etcd-server)"
			return 0
		fi
		cluster=$out/etcd-cluster
		rm -rf "$cluster"
		if ! backend=$(bash "$srcdir/tests/etcd/cluster.sh" start \
			"$cluster" 2> "$out/etcd-cluster.log"); then
			bash "$srcdir/tests/etcd/cluster.sh" stop "$cluster"
			etcd_skip "the throw-away cluster did not start (see \
$out/etcd-cluster.log)"
			return 0
		fi
	fi
	if [ -n "$q" ]; then
		set -- -n 100 -k 3
	else
		set -- -n 400 -k 9
	fi
	# Part 4 of bench/etcd: the command-line tools; libtool's real
	# binary, not its wrapper script, whose shell would be timed too.
	tool=$bindir/../tools/weblocks-run
	[ ! -x "$bindir/../tools/.libs/weblocks-run" ] ||
		tool=$bindir/../tools/.libs/weblocks-run
	if [ -x "$tool" ]; then
		set -- "$@" -t "$tool"
	fi
	rc=0
	LD_LIBRARY_PATH=$bindir/../lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
	WEBLOCKS_BACKEND=$backend WEBLOCKS_ETCD_TTL=${WEBLOCKS_ETCD_TTL:-2} \
	WEBLOCKS_ETCD_GUARD=${WEBLOCKS_ETCD_GUARD:-$bindir/../tools/etcd-guard} \
		"$bindir/etcd" "$@" -o "$tsv" > "$out/etcd.log" 2>&1 || rc=$?
	[ -z "$cluster" ] || bash "$srcdir/tests/etcd/cluster.sh" stop "$cluster"
	return $rc
}

start_all=$(date +%s)
for p in $progs; do
	start=$(date +%s)
	printf 'bench: %-14s' "$p" >&2
	if [ "$p" = etcd ]; then
		if ! etcd_part; then
			echo " FAILED (see $out/etcd.log)" >&2
			tail -n 5 "$out/etcd.log" >&2
			exit 1
		fi
		echo " $(($(date +%s) - start)) s" >&2
		continue
	fi
	extra=
	# bench/failover also writes its own JSON, as it always did.
	[ "$p" = failover ] && extra="-j $out/failover.json"
	# shellcheck disable=SC2086 # $q and $extra are words or nothing
	if ! "$bindir/$p" $q $extra -o "$tsv" > "$out/$p.log" 2>&1; then
		echo " FAILED (see $out/$p.log)" >&2
		tail -n 5 "$out/$p.log" >&2
		exit 1
	fi
	# Its instruction counts come right after its figures.
	if [ "$p" = uncontended ]; then
		instructions
	fi
	echo " $(($(date +%s) - start)) s" >&2
done

setup "CPU busy in the second before the run" "$busy% (other work; \
it competes with the benchmarks)"

# What the uncontended pair spends its time on (for the notes).
if command -v perf > /dev/null 2>&1 &&
	perf record -q -e cpu-clock -o "$out/perf.data" \
		"$bindir/uncontended" -P > /dev/null 2>&1; then
	perf report -i "$out/perf.data" --stdio --no-children \
		--sort symbol 2> /dev/null |
		awk '/^ +[0-9.]+%/ && n < 12 {
			sub(/\[[.k]\] +/, "")
			s = s (n ? ", " : "") $2 " " $1; n++
		}
		END {
			if (n) printf "note\tperf\tprofile of the " \
				"uncontended exclusive pair (perf record " \
				"-e cpu-clock, top symbols): %s\n", s
		}' >> "$tsv"
	rm -f "$out/perf.data" "$out/perf.data.old"
fi

awk -f "$srcdir/bench/report.awk" -v md="$out/results.md" \
	-v json="$out/results.json" -v summary="$out/summary.txt" \
	-v dir="$out" "$tsv"

cat >> "$out/results.md" << 'EOF'

## How it was measured

- Every program runs the methods it compares interleaved within each pass
  (repetition k of every method before repetition k+1 of any), so a drift
  of the machine's speed hits all of them. Passes: 3 (quick: 2).
- Part 1: one process pinned to CPU 0; per pass 9 repetitions of 20 ms
  per method, each timing batches of about 2 us (the clock's cost is
  subtracted); p99 over the batches of a pass. System calls are counted
  with the raw_syscalls:sys_enter tracepoint for the calling thread
  (perf_event_open) and cross-checked under a seccomp filter that kills
  the process on any system call.
- Part 2: two processes alternate ownership; before each handoff the
  waiter announces itself and calls acquire; the holder waits 50 us more,
  checks in /proc that the waiter is asleep, reads CLOCK_MONOTONIC and
  releases; the waiter reads the clock when its acquire returns. 5
  repetitions of 300 handoffs per method per pass, fresh processes each.
- Part 3: bench/failover (holder SIGKILLed while a waiter sleeps), 400 runs
  per method in all, interleaved, unpinned; then 40 per method with a
  holder that has written 128 MiB, killed once the waiter slept 50 ms
  (one pass: its median, and the p99 in the p99 column).
- Part 4: 250 ms runs, 2 per method per pass; a non-atomic counter in the
  critical section checks mutual exclusion after every run.
- Part 5: see the comment at the top of each bench/scale_*.c. Curves are
  in the *.png files and results.json; the .dat files hold their points.
- Part 6: bench/etcd (its comment says how) on a three-member etcd
  cluster, a throw-away one on loopback unless WEBLOCKS_BACKEND names
  one; etcd.log holds its per-kill failover table (TTL left at the kill,
  etcd's lateness, the waiter's reaction).
EOF

# Plots: gnuplot from Debian (apt-get install gnuplot-nox).
curves="names.weblocks names.robust query.weblocks querycap.weblocks
	query.proclocks queue.ex queue.sh_all queue.sh_release queue.sh_futex
	queue.probe
	agents.pair agents.robust agents.query agents.attach"
missing=
for c in $curves; do
	[ -f "$out/$c.dat" ] || missing="$missing $c"
done
if [ -n "$missing" ]; then
	echo "bench: plots skipped, curves not measured:$missing" >&2
elif command -v gnuplot > /dev/null 2>&1; then
	if gnuplot -e "dir='$out'" "$srcdir/bench/plots.gp" \
		> "$out/gnuplot.log" 2>&1; then
		echo "bench: plots written: $(cd "$out" && ls ./*.png |
			tr '\n' ' ')" >&2
	else
		echo "bench: gnuplot failed, see $out/gnuplot.log" >&2
	fi
else
	echo "bench: gnuplot not found, plots skipped" \
		"(apt-get install gnuplot-nox)" >&2
fi

# Nothing of ours may stay in /dev/shm.
# (Regular files only: a FIFO among them would block grep.)
left=$(find /dev/shm -maxdepth 1 -type f -name 'wlk*' -exec grep -l \
	-e 'bench\.invalid' -e 'failover-[0-9]*\.bench' {} + 2> /dev/null ||
	true)
left="$left $(ls /dev/shm/wlkbench-* /dev/shm/failover-*.lock \
	2> /dev/null || true)"
if [ -n "$(echo "$left" | tr -d ' \n')" ]; then
	echo "bench: WARNING: left behind in /dev/shm: $left" >&2
fi
echo "bench: $(($(date +%s) - start_all)) s; wrote $out/results.md," \
	"$out/results.json" >&2
