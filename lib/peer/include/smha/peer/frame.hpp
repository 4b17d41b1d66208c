// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The peer channel's frames (doc/continuity.md): what one head's smhad sends
// another inside TLS. A frame is a 16-byte header, a JSON object (the meta)
// and a body:
//
//   0  "SMHC"        magic
//   4  1             version
//   5  kind          1 SA dump, 2 guid2lid, 3 answer
//   6  0 0           reserved
//   8  meta length   big-endian, 2..kMaxMetaBytes
//   12 body length   big-endian, 0..the receiver's cap
//
// A copy (kind 1 or 2) carries the file as OpenSM wrote it in the body and,
// in the meta, who sends it and from which master: {"fabric", "from" (the
// sending head's name), "master_guid" (its SM port GUID, "0x..."),
// "generation" (grows with every copy, across takeovers), "age_ms" (how old
// the file was when sent), and optionally "trimmed" (what the master left out
// of its SA dump, opensm::trim_summary; at most kMaxTrimmedText bytes)}. An
// answer (kind 3, no body) tells the sender what became of a copy: {"kind",
// "generation", "applied" (bool), "reason", "text"}.
// Pure functions over bytes; the decoders accept any input and bound what
// they read.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "smha/core/result.hpp"
#include "smha/core/types.hpp"

namespace smha::peer {

inline constexpr std::size_t kFrameHeaderSize = 16;
inline constexpr std::uint8_t kFrameVersion = 1;
inline constexpr std::size_t kMaxMetaBytes = 4096;
inline constexpr std::size_t kMaxTrimmedText = 1024;

enum class FrameKind : std::uint8_t { SaDump = 1, Guid2Lid = 2, Answer = 3 };
// "sa_dump", "guid2lid", "answer"
std::string_view to_string(FrameKind k);

struct FrameHeader {
  FrameKind kind = FrameKind::Answer;
  std::uint32_t meta_len = 0;
  std::uint32_t body_len = 0;
};

// Checks the 16 header bytes: magic, version, a known kind, reserved zero,
// meta 2..kMaxMetaBytes, body at most `max_body` (0 for an answer). Errors
// (code Protocol, FrameTooLarge for a length over its cap) name the field.
Result<FrameHeader> decode_frame_header(std::span<const std::uint8_t> bytes, std::size_t max_body);

// What a copy's meta says.
struct CopyMeta {
  std::string fabric;
  std::string from;
  Guid master_guid;
  std::uint64_t generation = 0;
  std::uint64_t age_ms = 0;
  std::string trimmed;  // "" when nothing was left out (or an older sender)
  friend bool operator==(const CopyMeta&, const CopyMeta&) = default;
};

// What an answer's meta says.
struct AnswerMeta {
  FrameKind kind = FrameKind::SaDump;
  std::uint64_t generation = 0;
  bool applied = false;
  std::string reason;  // a RefuseReason token ("" when applied)
  std::string text;
  friend bool operator==(const AnswerMeta&, const AnswerMeta&) = default;
};

// Parse the meta JSON (at most kMaxMetaBytes): every field present with its
// type, names at most 64 bytes, a GUID "0x" and 16 hex digits, a generation
// above 0. Errors (code Protocol) name the field.
Result<CopyMeta> decode_copy_meta(std::string_view text);
Result<AnswerMeta> decode_answer_meta(std::string_view text);

// A whole frame: header, meta, body.
std::vector<std::uint8_t> encode_copy_frame(FrameKind kind, const CopyMeta& meta, std::string_view body);
std::vector<std::uint8_t> encode_answer_frame(const AnswerMeta& meta);

}  // namespace smha::peer
