# SPDX-License-Identifier: MIT
# plots.gp - the scaling curves of part 5, from the .dat files report.awk
# writes (columns: x median p99 lo hi).
# usage: gnuplot -e "dir='OUT'" plots.gp
#
# Solid lines: the median over passes, with the range of the pass medians
# as error bars; dashed: the p99.

if (!exists("dir")) dir = "."
f(name) = dir . "/" . name . ".dat"

set terminal pngcairo size 1400,650 font "sans,11" noenhanced
set grid
set key below left Left reverse
set logscale x 10
set format x "%.0s%c"
set style line 1 lc rgb "#1f77b4" lw 2 pt 7 ps 1.1
set style line 2 lc rgb "#d62728" lw 2 pt 5 ps 1.1
set style line 3 lc rgb "#2ca02c" lw 2 pt 9 ps 1.2
set style line 4 lc rgb "#7f7f7f" lw 2 pt 13 ps 1.2
set style line 11 lc rgb "#1f77b4" lw 1 dt 2
set style line 12 lc rgb "#d62728" lw 1 dt 2
set style line 13 lc rgb "#2ca02c" lw 1 dt 2
set style line 14 lc rgb "#7f7f7f" lw 1 dt 2

# --- names held -------------------------------------------------------
set output dir . "/names.png"
set multiplot layout 1,2 \
	title "weblocks: cost vs names (held locks, name slots)"
set title "uncontended acquire+release of one more name\n" . \
	"(bucket of 2^17 names, max_name_len 32)"
set xlabel "names held by another client"
set ylabel "ns per acquire+release"
set yrange [0:*]
plot f("names.weblocks") u 1:2:4:5 w yerrorlines ls 1 \
	t "weblocks, median", \
     "" u 1:3 w l ls 11 t "weblocks, p99", \
     f("names.robust") u 1:2:4:5 w yerrorlines ls 2 \
	t "robust mutex pair, timed beside it", \
     "" u 1:3 w l ls 12 t "robust mutex pair, p99"
set title "listing the locks"
set xlabel "held entries (or name slots, for the green curve)"
set ylabel "us per call"
set logscale y 10
set yrange [*:*]
plot f("query.weblocks") u 1:2:4:5 w yerrorlines ls 1 \
	t "wlk_query(), N held entries, 2^17 name slots", \
     f("querycap.weblocks") u 1:2:4:5 w yerrorlines ls 3 \
	t "wlk_query(), 1 held entry, N name slots (max_name_len 1024)", \
     f("query.proclocks") u 1:2:4:5 w yerrorlines ls 2 \
	t "read /proc/locks, N flock(2) entries"
unset logscale y
unset multiplot

# --- queues -----------------------------------------------------------
set output dir . "/queue.png"
set multiplot layout 1,2 \
	title "weblocks: cost vs queue length (2 processes, CPU 0 and 1)"
set title "waking waiters"
set xlabel "waiters queued"
set ylabel "us"
set logscale y 10
plot f("queue.ex") u 1:2:4:5 w yerrorlines ls 1 \
	t "handoff to the head of N exclusive waiters", \
     "" u 1:3 w l ls 11 t "  p99", \
     f("queue.sh_all") u 1:2:4:5 w yerrorlines ls 2 \
	t "release -> all N shared waiters granted", \
     "" u 1:3 w l ls 12 t "  p99", \
     f("queue.sh_release") u 1:2:4:5 w yerrorlines ls 3 \
	t "the release call granting N shared waiters", \
     "" u 1:3 w l ls 13 t "  p99", \
     f("queue.sh_futex") u 1:2:4:5 w yerrorlines ls 4 \
	t "anchor: one FUTEX\\_WAKE of N threads of another process", \
     "" u 1:3 w l ls 14 t "  p99"
set title "one more request joining the queue"
set ylabel "ns per enqueue + timeout-abort"
set yrange [1:*]
plot f("queue.probe") u 1:2:4:5 w yerrorlines ls 1 \
	t "behind N pending requests, median", \
     "" u 1:3 w l ls 11 t "p99"
unset logscale y
set yrange [*:*]
unset multiplot

# --- agents -----------------------------------------------------------
set output dir . "/agents.png"
set logscale x 2
set format x "%.0f"
set multiplot layout 1,2 \
	title "weblocks: cost vs processes attached to the bucket (max 256)"
set title "uncontended acquire+release"
set xlabel "agents (processes) attached"
set ylabel "ns per acquire+release"
set yrange [0:*]
plot f("agents.pair") u 1:2:4:5 w yerrorlines ls 1 t "weblocks, median", \
     "" u 1:3 w l ls 11 t "weblocks, p99", \
     f("agents.robust") u 1:2:4:5 w yerrorlines ls 2 \
	t "robust mutex pair, timed beside it"
set title "query and attach"
set ylabel "us per call"
set logscale y 10
set yrange [*:*]
plot f("agents.query") u 1:2:4:5 w yerrorlines ls 1 t "wlk_query()", \
     f("agents.attach") u 1:2:4:5 w yerrorlines ls 3 \
	t "wlk_manager_open() in a new process"
unset multiplot
