// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// libFuzzer: fabric health (doc/health.md) over whatever the fabric answers.
// The bytes become a census walk's link ends (each a PortInfo attribute the
// decoder accepted, as the walk keeps them) and cables, node GUIDs and ports
// drawn from a small set so that ends meet; assess_links must not crash, and
// what it reports must be consistent: no more degraded links than links, each
// below what it should run at (a ratio in [0, 1)), every rate it names a known
// one, and the same answer twice.
#include <cstddef>
#include <cstdint>
#include <array>
#include <cstdlib>
#include <string>
#include <span>

#include "smha/fabric/health.hpp"
#include "smha/mad/smp.hpp"

namespace {

struct Bytes {
  std::span<const std::uint8_t> b;
  std::size_t at = 0;
  bool more() const { return at < b.size(); }
  std::uint8_t next() { return at < b.size() ? b[at++] : 0; }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace smha;
  Bytes in{{data, size}};
  fabric::DiscoveryResult walk;
  auto node = [](std::uint8_t v) { return Guid{0x100u + (v & 0x0f)}; };
  auto type = [](std::uint8_t v) { return v & 1 ? mad::NodeType::Switch : mad::NodeType::Ca; };
  while (in.more() && walk.link_ends.size() + walk.cables.size() < 256) {
    const std::uint8_t op = in.next();
    if (op & 0x80) {
      const std::uint8_t a = in.next(), ap = in.next(), b = in.next(), bp = in.next();
      walk.cables.push_back(fabric::Cable{node(a), static_cast<std::uint8_t>(ap & 7), node(b),
                                          static_cast<std::uint8_t>(bp & 7), type(b), DrPath{{1}}});
      continue;
    }
    std::array<std::uint8_t, mad::kSmpDataSize> attr{};
    for (auto& c : attr) c = in.next();
    auto pi = mad::decode_portinfo(attr);
    if (!pi) continue;
    walk.link_ends.push_back(fabric::LinkEnd{node(op), type(op), DrPath{}, static_cast<std::uint8_t>((op >> 4) & 7),
                                             pi->state, pi->link});
  }
  fabric::HealthExpectation expect;
  if (size > 0 && data[0] & 0x40) expect.switch_ca = LinkRate{4, 3};
  const auto a = fabric::assess_links(walk, expect);
  if (a.degraded.size() > a.links) std::abort();
  for (const auto& d : a.degraded) {
    if (!d.active.known() || !d.should.known()) std::abort();
    if (!(d.fraction >= 0 && d.fraction < 1)) std::abort();
    if (to_string(d.active).find('?') != std::string::npos) std::abort();
  }
  const auto again = fabric::assess_links(walk, expect);
  if (again.degraded.size() != a.degraded.size() || again.links != a.links || again.unknown != a.unknown)
    std::abort();
  return 0;
}
