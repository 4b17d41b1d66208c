// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
