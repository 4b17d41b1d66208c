// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/core/logger.hpp"

namespace smha {

std::shared_ptr<spdlog::logger> named_logger(const std::string& name) {
  if (auto l = spdlog::get(name)) return l;
  auto l = spdlog::default_logger()->clone(name);
  spdlog::register_logger(l);
  return l;
}

}  // namespace smha
