#!/bin/sh
# SPDX-License-Identifier: MIT
# replay.sh - make check: every input of tests/fuzz/corpus (the minimised
# corpus of tests/fuzz/afl.sh) through the harness tests/fuzz/fuzz_segment.c
# built normally, each in a child process; fails if any input crashes, or
# fails to run to the end. A regression test for what the fuzzer found.
set -eu

prog=${builddir:-.}/tests/fuzz/fuzz_segment
corpus=${abs_top_srcdir:-.}/tests/fuzz/corpus
# Damaged counters can ask for huge allocations: under ASan these must
# fail with NULL, as malloc() does without it.
ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1
export ASAN_OPTIONS
exec "$prog" "$corpus"/*
