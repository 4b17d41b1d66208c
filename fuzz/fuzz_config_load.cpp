// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// libFuzzer target: the smha.yaml loader (yaml-cpp parse, tag and document
// checks, every key's validation, the cross checks) on any text.
// Invariants checked: no crash/UB/leak; a refused file has at least one
// diagnostic and each names the file; an accepted one has a node name within
// the caps and no more peers than kMaxPeers.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "smha/config/config.hpp"
#include "smha/core/fabric_name.hpp"

using namespace smha::config;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = load_config_from_string(text, "fuzz.yaml");
  if (!r.ok()) {
    if (r.errors().empty()) std::abort();
    for (const auto& d : r.errors())
      if (d.to_string().rfind("fuzz.yaml", 0) != 0) std::abort();
    return 0;
  }
  const Config& c = r.value();
  if (c.node_name.empty() || c.node_name.size() > kMaxNameBytes) std::abort();
  if (c.peers.size() > kMaxPeers) std::abort();
  if (!c.fabric.empty() && smha::fabric_name_problem(c.fabric)) std::abort();
  // As the instance smhad@fab0 loads it: the instance's name, or an error.
  auto as_instance = load_config_from_string(text, "fuzz.yaml", LoadOptions{"fab0"});
  if (as_instance.ok() && as_instance.value().fabric != "fab0") std::abort();
  return 0;
}
