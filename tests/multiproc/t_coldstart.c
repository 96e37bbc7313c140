/* SPDX-License-Identifier: MIT */
/* t_coldstart.c - placeholder, being written. */
#include "../common.h"
