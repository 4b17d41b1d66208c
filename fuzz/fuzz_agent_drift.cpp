// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// libFuzzer: the ServiceData decoder of the config drift check (doc/drift.md)
// takes any bytes (a peer's record is another host's input) without UB or
// crash, and what decodes re-encodes to the same bytes 0..55 (ServiceData64[1],
// bytes 56..63, is not read).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "smha/fabric/drift.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::uint8_t> bytes(data, size);
  auto d = smha::fabric::decode_service_data(bytes);
  if (!d.ok()) return 0;
  if (size != 64) std::abort();
  const auto again = smha::fabric::encode_service_data(*d);
  if (!std::equal(again.begin(), again.begin() + 56, bytes.begin())) std::abort();
  if (!std::all_of(again.begin() + 56, again.end(), [](std::uint8_t c) { return c == 0; })) std::abort();
  if (!smha::fabric::differing(*d, *d).empty()) std::abort();
  return 0;
}
