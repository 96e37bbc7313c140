#!/bin/sh
# SPDX-License-Identifier: MIT
# gc.sh - a real shm-inspect gc, in isolation: in a mount namespace of its
# own with a private tmpfs on /dev/shm (so that it cannot remove the
# segments of tests running beside it, nor see them), one bucket is live
# (weblocks-run holds a lock in it) and one stale (its weblocks-run was
# SIGKILLed holding a lock). gc must remove the stale one only, and the
# live one must still work. Needs root and unshare(1): skipped otherwise.
set -u

skip() {
	echo "SKIP: $*"
	exit 77
}
fail() {
	echo "FAIL: $*"
	exit 1
}

if [ -z "${WLK_GC_NS:-}" ]; then
	: "${WLK_SHM_INSPECT:?}" "${WLK_WEBLOCKS_RUN:?}"
	[ "$(id -u)" = 0 ] || skip "needs root for a private /dev/shm"
	command -v unshare >/dev/null || skip "no unshare(1)"
	unshare --mount --propagation private true 2>/dev/null ||
		skip "unshare --mount is not allowed here"
	WLK_GC_NS=1 exec unshare --mount --propagation private sh "$0"
fi

mount -t tmpfs -o mode=1777 wlk-gc-test /dev/shm ||
	fail "cannot mount a tmpfs on /dev/shm"
inspect=$WLK_SHM_INSPECT
run=$WLK_WEBLOCKS_RUN
tmp=$(mktemp -d)
live=
stale=
trap 'kill $live $stale 2>/dev/null; rm -rf "$tmp"' EXIT

# Start weblocks-run on ORIGIN holding "job"; returns once the command runs,
# that is once the lock is held (the command opens the fifo).
hold() {
	mkfifo "$tmp/ready"
	"$run" "$1" job -- sh -c 'echo >"$0"; exec sleep 600' "$tmp/ready" &
	pid=$!
	read -r _ <"$tmp/ready"
	rm -f "$tmp/ready"
}

hold https://gc-live.example
live=$pid
live_seg=$(ls /dev/shm)
[ "$(printf '%s\n' "$live_seg" | wc -l)" = 1 ] && [ -n "$live_seg" ] ||
	fail "expected one segment in the private /dev/shm, have: $live_seg"
hold https://gc-stale.example
stale=$pid
stale_seg=$(ls /dev/shm | grep -vxF "$live_seg")
[ -n "$stale_seg" ] || fail "no second segment"
kill -KILL "$stale"
wait "$stale" 2>/dev/null
stale=

echo "live: $live_seg; stale (weblocks-run SIGKILLed holding a lock): $stale_seg"
"$inspect" list
"$inspect" gc >"$tmp/gc.out" 2>&1
rc=$?
cat "$tmp/gc.out"
[ "$rc" = 0 ] || fail "shm-inspect gc exited $rc"
[ -e "/dev/shm/$stale_seg" ] && fail "gc left the stale segment $stale_seg"
[ -e "/dev/shm/$live_seg" ] || fail "gc removed the live segment $live_seg"
"$inspect" check https://gc-live.example ||
	fail "the live bucket does not check out after gc"
"$run" --if-available https://gc-live.example job -- true
rc=$?
[ "$rc" = 75 ] || fail "the live bucket's lock is not held after gc ($rc)"
echo "gc removed the stale segment only"
