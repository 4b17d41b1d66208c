// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// libFuzzer target: the opensm-sa.dump checker a standby runs on every copy
// before it is written where OpenSM reads it (doc/continuity.md), on any
// bytes. Invariants checked: no crash/UB/leak; the size cap holds; what it
// accepts has no line over OpenSM's 1022 bytes and no NUL; members are
// counted once, per group and in all; every group's MLID is multicast.
// The trimmer (trim_sa_dump) on the same bytes: what it leaves always
// parses, within the bounds; a text that parses whole loses nothing under no
// bounds; what it leaves is a subsequence of the input's lines.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "smha/opensm/sa_dump.hpp"

using namespace smha::opensm;

namespace {

void check_trim(std::string_view text, bool parses) {
  if (text.size() > (1 << 16)) return;
  const SaDumpBounds small{2, 3, 1, 2, 2};
  const auto t = trim_sa_dump(text, small);
  auto d = parse_sa_dump(t.text, 1 << 16);
  if (!d.ok()) std::abort();
  if (d->services > small.services || d->informs > small.informs || d->groups.size() > small.groups) std::abort();
  if (t.text.size() > text.size() || (t.text.size() == text.size()) == t.any()) std::abort();
  (void)trim_summary(t, small);
  // Kept lines in order: each is found at or after the previous one.
  std::size_t from = 0;
  for (std::size_t start = 0; start < t.text.size();) {
    auto nl = t.text.find('\n', start);
    const std::size_t end = nl == std::string_view::npos ? t.text.size() : nl + 1;
    const auto at = text.find(std::string_view(t.text).substr(start, end - start), from);
    if (at == std::string_view::npos) std::abort();
    from = at + (end - start);
    start = end;
  }
  const auto whole = trim_sa_dump(text, SaDumpBounds{0, 0, 0, 0, 0});
  if (parses && (whole.any() || whole.text != text)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto d = parse_sa_dump(text, 1 << 16);
  check_trim(text, d.ok());
  if (!d.ok()) {
    if (size <= (1 << 16) && d.error().code == smha::Errc::TooLarge) std::abort();
    return 0;
  }
  if (size > (1 << 16)) std::abort();
  if (text.find('\0') != std::string_view::npos) std::abort();
  std::size_t start = 0;
  while (start < text.size()) {
    auto nl = text.find('\n', start);
    const std::size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    if (end - start > kMaxSaDumpLine) std::abort();
    start = end;
  }
  std::size_t members = 0;
  for (const auto& g : d->groups) {
    if (g.mlid < 0xc000 || g.mlid == 0xffff) std::abort();
    members += g.members;
  }
  if (members != d->members) std::abort();
  return 0;
}
