#!/bin/sh
# SPDX-License-Identifier: MIT
# curl-load.sh - libcurl is loaded by the etcd engine's first use, not with
# libweblocks; a libcurl without curl's functions makes the engine refuse
# with WLK_ENOTSUPPORTED (tests/etcd/curl_load.c).
set -eu

: "${builddir:?run from make check}"
prog=$builddir/tests/etcd/curl-load
fake=$builddir/tests/etcd/.libs/fakecurl.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

status=0
"$prog" lazy || status=1
ln -s "$fake" "$tmp/libcurl.so.4"
LD_LIBRARY_PATH="$tmp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
	"$prog" fake || status=1
exit $status
