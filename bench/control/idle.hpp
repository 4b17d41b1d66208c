// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smhad's idle RSS and CPU at 10 Hz polling under ibsim, beside OpenSM's
// (bench/control/idle.cpp). Built only with SMHA_TESTS=ON (it uses the ibsim
// harness). Prints a table; returns 0 if the targets are met, 3 if not, 1 if
// no run succeeded.
#pragma once

int run_idle_bench(int runs, int seconds);
