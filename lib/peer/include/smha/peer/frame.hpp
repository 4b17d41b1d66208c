// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The peer channel's frames (doc/continuity.md): what one head's smhad sends
// another inside TLS. A frame is a 16-byte header, a JSON object (the meta)
// and a body:
//
//   0  "SMHC"        magic
//   4  1             version
//   5  kind          1 SA dump, 2 guid2lid, 3 answer, 4 notice
//   6  0 0           reserved
//   8  meta length   big-endian, 2..kMaxMetaBytes
//   12 body length   big-endian, 0..the receiver's cap
//
// A copy (kind 1 or 2) carries the file as OpenSM wrote it in the body and,
// in the meta, who sends it and from which master: {"fabric", "from" (the
// sending head's name), "master_guid" (its SM port GUID, "0x..."),
// "generation" (grows with every copy, across takeovers), "age_ms" (how old
// the file was when sent: the sender's wall clock minus the file's mtime)}.
// An answer (kind 3, no body) tells the sender what became of a copy:
// {"kind", "generation", "applied" (bool), "reason", "text", "held" (the
// generation the receiver holds of that kind, 0 none; absent from older
// peers)}. A notice (kind 4, no body) tells a receiver that the master's
// current file of a kind was NOT sent, and why: {"kind", "fabric", "from",
// "master_guid", "age_ms" (how long ago the master's state moved on from the
// last copy it sent: the unsent file's age, or the time since this master
// became MASTER when no file of this mastership exists), "problem" (text),
// "counts" (optional: {"groups", "members", "services", "subscriptions"} of
// the unsent SA dump, counted line by line even when it does not parse)}.
// A copy's meta may also carry "trimmed" (what the master left out of its SA
// dump, opensm::trim_summary; at most kMaxTrimmedText bytes).
// Pure functions over bytes; the decoders accept any input and bound what
// they read.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
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

enum class FrameKind : std::uint8_t { SaDump = 1, Guid2Lid = 2, Answer = 3, Notice = 4 };
// "sa_dump", "guid2lid", "answer", "notice"
std::string_view to_string(FrameKind k);

struct FrameHeader {
  FrameKind kind = FrameKind::Answer;
  std::uint32_t meta_len = 0;
  std::uint32_t body_len = 0;
};

// Checks the 16 header bytes: magic, version, a known kind, reserved zero,
// meta 2..kMaxMetaBytes, body at most `max_body` (0 for an answer or a notice). Errors
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
  std::uint64_t held = 0;  // the generation the receiver holds of `kind` (0: none or not said)
  friend bool operator==(const AnswerMeta&, const AnswerMeta&) = default;
};

// An SA dump's records by kind, as a notice carries them.
struct SaCounts {
  std::uint64_t groups = 0, members = 0, services = 0, subscriptions = 0;
  friend bool operator==(const SaCounts&, const SaCounts&) = default;
};

// What a notice's meta says: the master's current file of `kind` was not sent.
struct NoticeMeta {
  FrameKind kind = FrameKind::SaDump;
  std::string fabric;
  std::string from;
  Guid master_guid;
  std::uint64_t age_ms = 0;
  std::string problem;  // at most 512 bytes
  std::optional<SaCounts> counts;
  friend bool operator==(const NoticeMeta&, const NoticeMeta&) = default;
};

// Parse the meta JSON (at most kMaxMetaBytes): every field present with its
// type, names at most 64 bytes, a GUID "0x" and 16 hex digits, a generation
// above 0. Errors (code Protocol) name the field.
Result<CopyMeta> decode_copy_meta(std::string_view text);
Result<AnswerMeta> decode_answer_meta(std::string_view text);
// A notice's meta: identity fields as a copy's, "kind" sa_dump or guid2lid,
// "age_ms" an unsigned integer, "problem" a string (cut at 512 bytes),
// "counts" absent, null or an object of four unsigned integers.
Result<NoticeMeta> decode_notice_meta(std::string_view text);

// A whole frame: header, meta, body.
std::vector<std::uint8_t> encode_copy_frame(FrameKind kind, const CopyMeta& meta, std::string_view body);
std::vector<std::uint8_t> encode_answer_frame(const AnswerMeta& meta);
std::vector<std::uint8_t> encode_notice_frame(const NoticeMeta& meta);

}  // namespace smha::peer
