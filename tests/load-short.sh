#!/bin/sh
# SPDX-License-Identifier: MIT
# load-short.sh - the make check run of tests/load: 16 processes of 2
# threads and an event loop each, every request option, kills every
# 0-200 ms, for 8 s; no overlap a steal does not explain, no result the
# header does not allow, nobody stuck, a valid segment at the end.
exec "${builddir:-.}/tests/load" -p 16 -T 2 -n 6 -t 8 -a -k 100
