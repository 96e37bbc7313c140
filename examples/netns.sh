#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# netns.sh - examples/failover on an etcd cluster, each process on a
# "machine" of its own: network namespaces on one Linux host, joined by a
# bridge, so that they reach the cluster, and it each other, only over
# the network, as if from different machines.
#
# usage: examples/netns.sh [BUILDDIR]   (as root)
#
#   wlkN-lan          a bridge; every other namespace has a veth on it
#   wlkN-etcd1..3     one etcd member each, 10.77.0.1..3 (client port 2379)
#   wlkN-host-a..c    examples/failover a|b|c, 10.77.0.11..13, with
#                     WEBLOCKS_BACKEND naming the three members
#
# One of a, b, c becomes primary (it holds the exclusive lock "primary");
# the script SIGKILLs the primary, twice, and checks that the lock passed
# on each time: one new primary, never while the killed one was alive,
# with a higher fencing token, within PASS_ON_MS, far below the lease's
# TTL: each process's guard (the build's tools/etcd-guard) revokes its
# lease when it dies (weblocks.h, ETCD ENGINE). It ends with "netns:
# PASS" or "netns: FAIL: why" (exit 1). Everything it made (processes,
# namespaces, data) is removed on exit, also after an error or ^C.
#
# Needs root (ip netns), iproute2, etcd (Debian: etcd-server) and a build
# of this tree with the etcd engine (default BUILDDIR: build/, as
# examples/demo.sh makes it); without them it says so and exits 0.
set -euo pipefail

srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$srcdir/build}
TTL=10
# How long a new primary may take after a kill: the guard's revoke and
# the waiter's grant take milliseconds; the rest is room for a loaded
# machine. Without the guard it would take the TTL and etcd's 500 ms
# expiry scan.
PASS_ON_MS=3000
NET=10.77.0

skip() {
	echo "netns: skipped: $*"
	exit 0
}
((EUID == 0)) || skip "needs root (ip netns add, veth); run it with sudo"
command -v ip >/dev/null || skip "needs iproute2 (apt-get install iproute2)"
command -v etcd >/dev/null || skip "needs etcd (apt-get install etcd-server)"
[[ -x $build/examples/failover ]] ||
	skip "no $build/examples/failover: build first (examples/demo.sh)"
grep -q '^#define WLK_HAVE_ETCD 1' "$build/config.h" 2>/dev/null ||
	skip "$build has no etcd engine (configure --enable-etcd)"

tag=wlk$$
work=$(mktemp -d "${TMPDIR:-/tmp}/$tag.XXXXXX")
pids=()
spaces=()

cleanup() {
	local p s
	for p in "${pids[@]}"; do
		kill -KILL "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	for s in "${spaces[@]}"; do
		ip netns del "$s" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ns() { # NAME: make namespace NAME with its loopback up
	ip netns add "$1"
	spaces+=("$1")
	ip -n "$1" link set lo up
}

# plug NAME ADDR: a veth from NAME to the bridge, NAME's end at ADDR/24.
n_plugs=0
plug() {
	local a=${tag}v$n_plugs b=${tag}p$n_plugs
	n_plugs=$((n_plugs + 1))
	ip link add "$a" netns "$1" type veth peer name "$b" netns "$tag-lan"
	ip -n "$tag-lan" link set "$b" master br0 up
	ip -n "$1" addr add "$2/24" dev "$a"
	ip -n "$1" link set "$a" up
}

echo "netns: the network: a bridge in $tag-lan, members and hosts on $NET.0/24"
ns "$tag-lan"
ip -n "$tag-lan" link add br0 type bridge
ip -n "$tag-lan" link set br0 up

cluster='' backend=''
for i in 1 2 3; do
	ns "$tag-etcd$i"
	plug "$tag-etcd$i" "$NET.$i"
	cluster+="${cluster:+,}m$i=http://$NET.$i:2380"
	backend+="${backend:+,}$NET.$i:2379"
done
for i in 1 2 3; do
	ip netns exec "$tag-etcd$i" etcd --name "m$i" \
		--data-dir "$work/m$i" \
		--listen-client-urls "http://$NET.$i:2379" \
		--advertise-client-urls "http://$NET.$i:2379" \
		--listen-peer-urls "http://$NET.$i:2380" \
		--initial-advertise-peer-urls "http://$NET.$i:2380" \
		--initial-cluster "$cluster" --initial-cluster-state new \
		--initial-cluster-token "$tag" --listen-metrics-urls '' \
		--logger zap --log-level warn >"$work/m$i.log" 2>&1 &
	pids+=($!)
done

hosts=(a b c)
for i in 0 1 2; do
	ns "$tag-host-${hosts[i]}"
	plug "$tag-host-${hosts[i]}" "$NET.$((11 + i))"
done

# The cluster answers, seen from host a (over the bridge).
for ((t = 0; ; t++)); do
	if ip netns exec "$tag-host-a" curl -sf -m 1 \
		"http://$NET.1:2379/health" 2>/dev/null | grep -q true; then
		break
	fi
	((t < 200)) || {
		tail -n 5 "$work"/m*.log
		echo "netns: FAIL: the cluster did not start"
		exit 1
	}
	sleep 0.1
done
echo "netns: etcd://$backend is up; host a reaches it over the bridge"

# failover HOST: examples/failover in the host's namespace; output in
# $work/HOST.out, its pid in $work/HOST.pid.
declare -A pid_of
for h in "${hosts[@]}"; do
	ip netns exec "$tag-host-$h" env WEBLOCKS_BACKEND="etcd://$backend" \
		WEBLOCKS_ETCD_TTL=$TTL \
		WEBLOCKS_ETCD_GUARD="$build/tools/etcd-guard" \
		"$build/examples/failover" "$h" \
		>"$work/$h.out" 2>&1 &
	pid_of[$h]=$!
	pids+=($!)
done

# primaries: "HOST TOKEN" for every "primary now" line so far, in no
# order.
primaries() {
	local h
	for h in "${hosts[@]}"; do
		sed -n "s/^$h (pid [0-9]*): primary now, token \([0-9]*\)$/$h \1/p" \
			"$work/$h.out"
	done
}

# wait_primaries N: until N primary lines, or PASS_ON_MS; prints the
# elapsed ms.
wait_primaries() {
	local t0 n
	t0=$(date +%s%N)
	while :; do
		n=$(primaries | wc -l)
		((n >= $1)) && break
		(($(date +%s%N) - t0 < PASS_ON_MS * 1000000)) || break
		sleep 0.02
	done
	echo $((($(date +%s%N) - t0) / 1000000))
}

fail() {
	echo "netns: FAIL: $*"
	for h in "${hosts[@]}"; do
		sed "s/^/netns:   $h: /" "$work/$h.out"
	done
	exit 1
}

ms=$(wait_primaries 1)
(($(primaries | wc -l) == 1)) || fail "not one primary at the start"
read -r cur tok < <(primaries)
echo "netns: host $cur is primary (token $tok), after $ms ms"
dead=()
for round in 1 2; do
	# A second primary while this one lives would show up here.
	sleep 1
	(($(primaries | wc -l) == round)) ||
		fail "two primaries at once: $(primaries | paste -sd ' ')"
	kill -KILL "${pid_of[$cur]}"
	wait "${pid_of[$cur]}" 2>/dev/null || true
	dead+=("$cur")
	echo "netns: SIGKILLed host $cur's process (pid ${pid_of[$cur]})"
	ms=$(wait_primaries $((round + 1)))
	(($(primaries | wc -l) == round + 1)) ||
		fail "no single new primary within $PASS_ON_MS ms of the kill"
	read -r next ntok < <(primaries |
		grep -v -E "^($(IFS='|'; echo "${dead[*]}")) ")
	((ntok > tok)) || fail "token $ntok of $next is not above $tok"
	echo "netns: host $next is primary (token $ntok > $tok)," \
		"$ms ms after the kill (lease TTL $TTL s)"
	cur=$next tok=$ntok
done
sleep 1
(($(primaries | wc -l) == 3)) || fail "a primary too many at the end"
echo "netns: PASS: one primary at a time across three namespaces; each" \
	"killed primary's lock passed on, with a higher token"
