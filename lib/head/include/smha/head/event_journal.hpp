// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// EventJournal: smhad's event history on disk (state_dir/events.jsonl), so
// `smctl events` shows what happened before a restart. doc/control-protocol.md
// ("Event journal") documents the format and the bound.
//
// Format: JSON Lines, one event per line, oldest first:
//   {"seq":12,"time":"2026-12-02T14:30:00.123Z","kind":"transition",
//    "reason":"STANDBY->MASTER","evidence":"takeover_done: local SM is MASTER"}
// A transition and an opensm_state line also carry "from" and "to" (state
// names, EventRecord::from/to, where known), a handover_started of the
// preempt policy "preempt": true; lines without them (older smhad) load with
// none. Engine events also carry "nodes": [{"name":"head02","guid":"0x...",
// "node_description":"head02 HCA-1"}, ...] (EventRecord::nodes; "name" and
// "node_description" null when not known; at most kMaxEventNodes, each text
// at most kMaxNodeTextBytes). Lines without it (older smhad) load with none.
// `reason` and `evidence` are cut to kMaxFieldBytes each, so a line stays below
// about 2 x kMaxFieldBytes + 1500 bytes.
//
// Bound: append() adds a line; once the file holds 2 x `keep` lines it is
// rewritten atomically (temp + fsync + rename) with the newest `keep`. The file
// therefore never holds more than 2 x keep lines (with keep = 1000: at most
// 2000 lines, about 4 MiB in the worst case, typically ~300 KiB).
//
// Appends are plain write()s without fsync: they survive a crash or restart of
// smhad, but the last events may be lost on a power failure. Lines that do not
// parse (a line cut by a crash, hand edits), whose seq is 0 or above
// kMaxEventSeq, or whose seq does not grow are skipped when loading and
// counted. An append after a write that failed part-way (ENOSPC) starts on a
// fresh line, so the cut line is the only one lost.
//
// Loading reads the file without blocking (a FIFO or device in its place is an
// "io" error) and reads at most its last kMaxJournalReadBytes; a larger file
// (not written by smhad) loses its start and is compacted on the next append.
// Loading is linear in what is read. Single-threaded; no locks.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "smha/core/result.hpp"
#include "smha/os/file_system.hpp"
#include "smha/head/event_log.hpp"

namespace smha::head {

inline constexpr std::size_t kJournalKeep = kEventHistory;
inline constexpr std::size_t kMaxFieldBytes = 1024;
// Above 2^53 a sequence number is no longer exact in every JSON reader; far
// beyond anything a running smhad reaches, so a larger one is a bad line (and
// the next event's seq + 1 can never wrap).
inline constexpr std::uint64_t kMaxEventSeq = (std::uint64_t{1} << 53) - 1;
// What load() reads at most: the newest end of the file. 2 x keep lines of
// typical size fit many times over.
inline constexpr std::size_t kMaxJournalReadBytes = 8 * 1024 * 1024;

// "2026-12-02T14:30:00.123Z" (UTC, milliseconds), and back; nullopt if `text`
// is not in exactly that form.
std::string format_utc(std::chrono::system_clock::time_point t);
std::optional<std::chrono::system_clock::time_point> parse_utc(std::string_view text);

// One journal line (without the newline) and back.
// Longest node name or NodeDescription a journal line keeps (a
// NodeDescription is 64 bytes on the wire).
inline constexpr std::size_t kMaxNodeTextBytes = 64;
// EventRecord::nodes as JSON, texts raw (the journal) or escaped for people
// by smha::printable (control replies).
nlohmann::json event_nodes_json(const std::vector<EventNode>& nodes, bool printable);
// EventRecord::from, to ("from"/"to": state names) and preempt ("preempt":
// true), where set, into `j` (journal lines and replies alike).
void add_event_state_fields(nlohmann::json& j, const EventRecord& e);
std::string encode_event_line(const EventRecord& e);
std::optional<EventRecord> decode_event_line(std::string_view line);

class EventJournal {
 public:
  struct Loaded {
    std::vector<EventRecord> events;  // the newest `keep`, oldest first, seq ascending
    std::size_t skipped = 0;          // lines that did not parse
  };

  // Reads, appends and rewrites `path` through `fs` (which must outlive it).
  EventJournal(os::FileSystem& fs, std::string path, std::size_t keep = kJournalKeep);
  EventJournal(const EventJournal&) = delete;
  EventJournal& operator=(const EventJournal&) = delete;

  // Reads the file (its last kMaxJournalReadBytes at most). A missing file is an
  // empty journal. Error "io" (naming the path) if it exists but cannot be read
  // or is not a regular file. Remembers the line count for the bound.
  Result<Loaded> load();

  // Appends one event (opening the file on first use, mode 0640). On error
  // ("io", naming the path) the event is not on disk; the next append retries.
  Status append(const EventRecord& e);

  const std::string& path() const { return path_; }
  std::size_t lines() const { return lines_; }

 private:
  Status compact();

  os::FileSystem& fs_;
  std::string path_;
  std::size_t keep_;
  std::size_t lines_ = 0;
  bool cut_line_ = false;  // the file ends without a newline (a crash mid-write)
  std::deque<EventRecord> tail_;  // the newest `keep` events, for compaction
};

}  // namespace smha::head
