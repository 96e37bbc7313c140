/* SPDX-License-Identifier: MIT */
/*
 * testing.h - the one header of lib/ that programs outside it may include:
 * the segment format (format/layout.h) and the fail points
 * (sys/failpoint.h), for the tests that damage segments on purpose, stop a
 * process at a fail point, or size a segment, and for the fuzzer; and the
 * tick arithmetic (sys/tick.h), for its unit test. They add
 * TESTING_CPPFLAGS (Makefile.am); everything else sees include/ only.
 */
#ifndef WLK_TESTING_H
#define WLK_TESTING_H

#include "format/layout.h"
#include "sys/failpoint.h"
#include "sys/tick.h"

#endif /* WLK_TESTING_H */
