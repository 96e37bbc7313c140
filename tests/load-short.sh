#!/bin/sh
# SPDX-License-Identifier: MIT
# load-short.sh - the make check runs of tests/load: 16 processes of 4
# threads with every request option for 6 s (against the library before
# the settle fix it saw WLK_ESTATE 2-3 times in each of 3 runs), then 16
# of 2 threads and an event loop each with kills every 0-200 ms for 5 s.
# Each must show no overlap a steal does not explain, no result the header
# does not allow, nobody stuck and a valid segment at the end.
load="${builddir:-.}/tests/load"
"$load" -p 16 -T 4 -n 8 -t 6 || exit 1
exec "$load" -p 16 -T 2 -n 6 -t 5 -a -k 100
