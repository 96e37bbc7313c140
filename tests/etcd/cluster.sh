#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cluster.sh - a throw-away three-member etcd cluster on loopback, for the
# etcd engine's tests. Each member has its own data directory under DIR;
# the members' pids are kept in DIR/mN.pid and stopped by those pids.
#
#   cluster.sh start DIR   start m1..m3, wait until healthy, print the
#                          backend string (etcd://127.0.0.1:P1,...)
#   cluster.sh stop DIR    stop the members by pid, remove the data dirs
#   cluster.sh kill DIR N  SIGKILL member N (fault tests)
#   cluster.sh restart DIR N   start member N again on its data dir
#   cluster.sh leader DIR  the number of the member that leads
#
# Ports: BASE (env WLK_ETCD_PORT_BASE, default 23790 + a spread of the
# shell's pid) + 2*(N-1) for clients, +1 for peers. Short election
# timeouts (heartbeat 50 ms, election 500 ms) keep the fault tests short
# and let the engine's tests use a 1-2 s lease.
set -euo pipefail

# Members, and how long start waits for a healthy cluster.
MEMBERS=3
HEALTHY_TRIES=200 # x 50 ms

cmd=${1:?usage: cluster.sh start|stop|kill|restart|leader DIR [N]}
dir=${2:?usage: cluster.sh start|stop|kill|restart|leader DIR [N]}

base_port() {
	if [[ -f $dir/base ]]; then
		cat "$dir/base"
	else
		echo "${WLK_ETCD_PORT_BASE:-$((23790 + ($$ % 400) * 10))}"
	fi
}

client_port() { echo $(($(base_port) + 2 * ($1 - 1))); }
peer_port() { echo $(($(base_port) + 2 * ($1 - 1) + 1)); }

initial_cluster() {
	local i s=
	for ((i = 1; i <= MEMBERS; i++)); do
		s+="${s:+,}m$i=http://127.0.0.1:$(peer_port "$i")"
	done
	echo "$s"
}

start_member() { # N STATE
	local n=$1 cp pp
	cp=$(client_port "$n")
	pp=$(peer_port "$n")
	etcd --name "m$n" --data-dir "$dir/m$n" \
		--listen-client-urls "http://127.0.0.1:$cp" \
		--advertise-client-urls "http://127.0.0.1:$cp" \
		--listen-peer-urls "http://127.0.0.1:$pp" \
		--initial-advertise-peer-urls "http://127.0.0.1:$pp" \
		--initial-cluster "$(initial_cluster)" \
		--initial-cluster-state "$2" \
		--initial-cluster-token "wlk-test-$(base_port)" \
		--listen-metrics-urls '' --logger zap --log-level warn \
		--heartbeat-interval 50 --election-timeout 500 \
		>>"$dir/m$n.log" 2>&1 &
	echo $! >"$dir/m$n.pid"
}

healthy() { # N
	curl -sf -m 1 "http://127.0.0.1:$(client_port "$1")/health" 2>/dev/null |
		grep -q '"health":"true"'
}

backend() {
	local i s=
	for ((i = 1; i <= MEMBERS; i++)); do
		s+="${s:+,}127.0.0.1:$(client_port "$i")"
	done
	echo "etcd://$s"
}

stop_member() { # N SIGNAL
	local pidf=$dir/m$1.pid pid
	[[ -f $pidf ]] || return 0
	pid=$(cat "$pidf")
	kill "-$2" "$pid" 2>/dev/null || true
	for ((t = 0; t < 100; t++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -KILL "$pid" 2>/dev/null || true
	rm -f "$pidf"
}

case $cmd in
start)
	command -v etcd >/dev/null || {
		echo "cluster.sh: etcd not installed (Debian: etcd-server)" >&2
		exit 77
	}
	mkdir -p "$dir"
	base_port >"$dir/base.tmp" && mv "$dir/base.tmp" "$dir/base"
	for ((i = 1; i <= MEMBERS; i++)); do
		start_member "$i" new
	done
	for ((t = 0; t < HEALTHY_TRIES; t++)); do
		ok=1
		for ((i = 1; i <= MEMBERS; i++)); do
			healthy "$i" || ok=0
		done
		((ok)) && break
		sleep 0.05
	done
	if ((!ok)); then
		echo "cluster.sh: cluster not healthy; logs in $dir" >&2
		exit 1
	fi
	backend
	;;
stop)
	for ((i = 1; i <= MEMBERS; i++)); do
		stop_member "$i" TERM
	done
	rm -rf "$dir"/m[0-9]
	;;
kill)
	stop_member "${3:?member}" KILL
	;;
restart)
	start_member "${3:?member}" existing
	for ((t = 0; t < HEALTHY_TRIES; t++)); do
		healthy "$3" && exit 0
		sleep 0.05
	done
	exit 1
	;;
leader)
	for ((i = 1; i <= MEMBERS; i++)); do
		[[ -f $dir/m$i.pid ]] || continue
		if curl -sf -m 1 -X POST -d '{}' \
			"http://127.0.0.1:$(client_port "$i")/v3/maintenance/status" |
			python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d["leader"]==d["header"]["member_id"] else 1)' \
				2>/dev/null; then
			echo "$i"
			exit 0
		fi
	done
	exit 1
	;;
backend)
	backend
	;;
*)
	echo "cluster.sh: unknown command $cmd" >&2
	exit 2
	;;
esac
