/* SPDX-License-Identifier: MIT */
/*
 * ratio.h - how a target's ratio is printed beside its verdict, shared by
 * bench.c (emit_ratio_target()) and bench/etcd, which prints its own.
 */
#ifndef BENCH_RATIO_H
#define BENCH_RATIO_H

/* Decimals of a target's ratio @x: two, or three where two would round @x
 * onto @bound and so hide which side of it @x is ("1.20x" for a 1.204x
 * that misses 1.2x). */
static inline int ratio_decimals(double x, double bound)
{
	double d = x - bound;

	return d > -0.005 && d < 0.005 && d != 0 ? 3 : 2;
}

#endif /* BENCH_RATIO_H */
