#!/bin/sh
# SPDX-License-Identifier: MIT
# loops.sh - the event-loop examples as tests. examples/loop: two clients
# of one process request "doc" with wlk_request_async(); the second must be
# granted only after the first released it. examples/epoll: three locks in
# an epoll loop, "b" held meanwhile by another process; it exits non-zero
# unless every lock was granted and released.
b=${builddir:-.}/examples
out=$("$b/loop" "https://t-loop-$$.example") || { printf '%s\n' "$out"; echo "FAIL: loop"; exit 1; }
printf '%s\n' "$out"
want='tab-1: requested "doc"
tab-2: requested "doc"
tab-1: holds "doc"
tab-1: releases "doc"
tab-2: holds "doc"
tab-2: releases "doc"'
got=$(printf '%s\n' "$out" | sed 's/ (token [0-9]*)$//')
[ "$got" = "$want" ] || { echo "FAIL: loop's order is not the queue's"; exit 1; }
"$b/epoll" || { echo "FAIL: epoll"; exit 1; }
