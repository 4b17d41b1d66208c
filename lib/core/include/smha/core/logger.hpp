// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The logger a module writes through, by its name ("sm", "osm"): the one
// registered under that name (smhad's lib/platform gives it its sinks), else a
// clone of spdlog's default logger, registered (tests and the simulated
// fabric, which set only the default logger).
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace smha {

std::shared_ptr<spdlog::logger> named_logger(const std::string& name);

}  // namespace smha
