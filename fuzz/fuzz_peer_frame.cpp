// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// libFuzzer target: the peer channel's framing as a receiver reads it
// (doc/continuity.md): a 16-byte header, then the meta JSON, on any bytes.
// Invariants checked: no crash/UB/leak; an accepted header's lengths are
// within their caps; an accepted copy meta encodes back into a frame whose
// meta decodes to the same; an accepted answer and notice likewise; an
// answer or notice header never announces a body.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include "smha/peer/frame.hpp"

using namespace smha::peer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::uint8_t> bytes(data, size);
  if (size >= kFrameHeaderSize) {
    auto h = decode_frame_header(bytes.first(kFrameHeaderSize), 1 << 20);
    if (h.ok()) {
      if (h->meta_len < 2 || h->meta_len > kMaxMetaBytes || h->body_len > (1u << 20)) std::abort();
      if ((h->kind == FrameKind::Answer || h->kind == FrameKind::Notice) && h->body_len != 0) std::abort();
    }
  }
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto m = decode_copy_meta(text); m.ok()) {
    if (m->generation == 0 || m->from.empty() || m->from.size() > 64) std::abort();
    const auto f = encode_copy_frame(FrameKind::SaDump, *m, "");
    auto h = decode_frame_header(std::span(f).first(kFrameHeaderSize), 0);
    if (!h.ok()) std::abort();
    auto again = decode_copy_meta(std::string_view(reinterpret_cast<const char*>(f.data()) + kFrameHeaderSize, h->meta_len));
    if (!again.ok() || !(*again == *m)) std::abort();
  }
  if (auto a = decode_answer_meta(text); a.ok()) {
    const auto f = encode_answer_frame(*a);
    auto h = decode_frame_header(std::span(f).first(kFrameHeaderSize), 0);
    if (!h.ok()) std::abort();
    auto again = decode_answer_meta(std::string_view(reinterpret_cast<const char*>(f.data()) + kFrameHeaderSize, h->meta_len));
    if (!again.ok() || !(*again == *a)) std::abort();
  }
  if (auto n = decode_notice_meta(text); n.ok()) {
    if (n->from.empty() || n->from.size() > 64 || n->problem.size() > 512) std::abort();
    const auto f = encode_notice_frame(*n);
    auto h = decode_frame_header(std::span(f).first(kFrameHeaderSize), 0);
    if (!h.ok() || h->kind != FrameKind::Notice) std::abort();
    auto again = decode_notice_meta(std::string_view(reinterpret_cast<const char*>(f.data()) + kFrameHeaderSize, h->meta_len));
    if (!again.ok() || !(*again == *n)) std::abort();
  }
  return 0;
}
