// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// libFuzzer target: the control-socket request decoder (framing + JSON +
// envelope validation), fed in chunks as a socket would deliver it.
// Invariants checked: no crash/UB/leak; a frame never exceeds the cap; a
// decoded request re-encodes to a frame that decodes to the same request.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "smha/control/protocol.hpp"

using namespace smha::control;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the chunk size (1..256) so split frames are explored.
  std::size_t chunk = static_cast<std::size_t>(data[0]) + 1;
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);

  // A cap well below libFuzzer's input limit (scripts/fuzz-run: -max_len 4096)
  // so the frame-too-large path is reachable.
  constexpr std::size_t kCap = 1024;
  FrameDecoder decoder(kCap);
  while (!input.empty()) {
    auto piece = input.substr(0, chunk);
    input.remove_prefix(piece.size());
    auto frames = decoder.feed(piece);
    if (!frames) {
      if (!decoder.failed()) std::abort();
      break;
    }
    for (const auto& frame : *frames) {
      if (frame.size() > kCap) std::abort();
      // One JSON parse per frame for both envelopes (parse_request and
      // parse_reply are parse_json + these): half the cost of an input.
      auto doc = parse_json(frame);
      if (!doc) continue;
      auto request = request_from_json(*doc);
      (void)reply_from_json(*doc);
      if (!request) continue;
      std::string wire = encode_request(*request);
      if (wire.empty() || wire.back() != '\0') std::abort();
      auto again = parse_request(std::string_view(wire).substr(0, wire.size() - 1));
      if (!again || again->method != request->method || again->params != request->params ||
          again->id != request->id) {
        std::abort();
      }
      Reply reply = Reply::ok(request->params, request->method);
      reply.id = request->id;
      std::string out = encode_reply(reply);
      auto back = parse_reply(std::string_view(out).substr(0, out.size() - 1));
      if (!back || back->data != request->params) std::abort();
    }
  }
  return 0;
}
