/* SPDX-License-Identifier: MIT */
/* t_failpoints.c - placeholder, being written. */
#include "../common.h"
