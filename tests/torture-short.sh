#!/bin/sh
# SPDX-License-Identifier: MIT
# torture-short.sh - the make check run of tests/torture: at least 1000
# SIGKILLs of lock-taking processes, zero violations, zero stuck waiters.
exec "${builddir:-.}/tests/torture" -p 6 -n 3 -k 1000 -t 120
