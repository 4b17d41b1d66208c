// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// libFuzzer target: what smhad reads back to adopt an OpenSM: the pidfile
// parser and the /proc/<pid>/stat start-time parser, on any bytes.
// Invariants checked: no crash/UB/leak; a pidfile that parses formats back to
// text that parses to the same identity.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "smha/opensm/process_identity.hpp"

using namespace smha::opensm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)parse_proc_stat_start_time(text);
  auto id = parse_pidfile(text);
  if (id.ok()) {
    auto again = parse_pidfile(format_pidfile(*id));
    if (!again.ok() || !(*again == *id)) std::abort();
  }
  return 0;
}
