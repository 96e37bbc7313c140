/* SPDX-License-Identifier: MIT */
/* t_death.c - placeholder, being written. */
#include "../common.h"
