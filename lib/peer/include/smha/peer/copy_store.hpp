// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// What a head does with copies of OpenSM's state (doc/continuity.md):
//
// CopyStore, on a head whose OpenSM is not MASTER, decides whether a copy
// that came over the peer channel may replace the file its own OpenSM reads
// at a takeover (sa_db_file, guid2lid), and writes it. A copy is applied
// only when every check passes, in this order, and refused (counted, never
// written) naming the first that fails:
//
//   identity      the sender's TLS certificate names the head the copy says it is from
//   not_a_peer    that head is one of this head's configured peers
//   wrong_fabric  the copy is of this head's fabric
//   not_master    this head's own SMInfo polling sees that head's SM as MASTER
//                 now (in-band; nothing the channel says makes a master)
//   local_master  this head's own SM is STANDBY or NOTACTIVE (a MASTER writes
//                 its own files; DISCOVERING may be reading them)
//   older         its generation is not below the one held
//   replayed      the same generation with other content
//   too_large     over continuity.max_copy_bytes
//   malformed     the file does not parse as OpenSM reads it (opensm::parse_sa_dump,
//                 opensm::parse_guid2lid with no record skipped)
//   write_failed  the atomic write failed
//
// The same generation with the same content confirms the copy held (the
// master re-sends every refresh interval): nothing is written, its age
// starts again. The generation and who sent it are kept beside the copy
// (<path>.smha), so a restarted smhad knows what it holds.
//
// CopySender, on the head whose OpenSM is MASTER, reads its OpenSM's files
// and says what to send: a copy whose content changed gets a new generation,
// above every generation this head has sent or received and at least the
// wall clock in milliseconds (so it grows across takeovers even when the
// channel was down); unchanged content is re-sent with its generation every
// refresh interval. From the SA dump it first leaves out the records OpenSM
// could not load back and those over `bounds` (opensm::trim_sa_dump; shown
// by trimmed()); a file of its own OpenSM that still does not parse is not
// sent (and shown).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "smha/core/clock.hpp"
#include "smha/core/types.hpp"
#include "smha/opensm/sa_dump.hpp"
#include "smha/os/file_system.hpp"
#include "smha/peer/frame.hpp"

namespace smha::peer {

enum class RefuseReason : std::uint8_t {
  Identity,
  NotAPeer,
  WrongFabric,
  NotMaster,
  LocalMaster,
  Older,
  Replayed,
  TooLarge,
  Malformed,
  WriteFailed,
};
inline constexpr std::size_t kRefuseReasons = 10;
// The token in status, metrics labels and answers: "identity", "not_a_peer", ...
std::string_view to_string(RefuseReason r);

// The two files a copy replaces, by FrameKind (SaDump, Guid2Lid).
inline constexpr std::size_t kCopyKinds = 2;
inline std::size_t kind_index(FrameKind k) { return k == FrameKind::Guid2Lid ? 1 : 0; }

struct CopyStoreConfig {
  std::string fabric;
  std::string own_name;
  std::string sa_path;        // the sa_db_file our OpenSM reads
  std::string guid2lid_path;  // <cache_dir>/guid2lid
  std::size_t max_bytes = opensm::kMaxSaDumpBytes;
  std::map<std::string, Guid> peers;  // configured peer name -> its SM port GUID
};

// What this head's own SMInfo polling says now (sm::EngineStatus).
struct InBandFacts {
  std::optional<Guid> master;           // the SM that answered MASTER in the latest round
  std::optional<SmState> local_state;   // our own SM's latest answer
};

struct HeldCopy {
  std::uint64_t generation = 0;
  std::string from;
  Guid master_guid;
  WallTime received{};   // when it was written here
  WallTime confirmed{};  // when the master last sent this content (the copy's age counts from here)
  std::size_t bytes = 0;
  std::array<std::uint8_t, 32> sha256{};
  opensm::SaDump sa;           // SaDump: what it holds
  std::string trimmed;         // SaDump: what the master left out of it (CopyMeta::trimmed)
  std::size_t guid2lid_entries = 0;  // Guid2Lid: its entries
};

struct Verdict {
  bool applied = false;    // written, or confirmed unchanged
  bool confirmed = false;  // the same copy again: nothing written
  RefuseReason reason = RefuseReason::Malformed;
  std::string text;        // why (refused) or what (applied)
};

// SHA-256 of `data` (OpenSSL).
std::array<std::uint8_t, 32> sha256(std::string_view data);

class CopyStore {
 public:
  CopyStore(CopyStoreConfig cfg, os::FileSystem& fs, const Clock& clock);

  // Reads what an earlier run left (<path>.smha and the file): a copy whose
  // record and file agree is held again. Never fails: what does not read is
  // not held.
  void load();

  // A copy `kind` with `meta` and `body` from the peer whose certificate
  // named `tls_peer`, judged against `facts`.
  Verdict offer(FrameKind kind, const CopyMeta& meta, std::string_view body, const std::string& tls_peer,
                const InBandFacts& facts);

  const std::optional<HeldCopy>& held(FrameKind kind) const { return held_[kind_index(kind)]; }
  // The highest generation held (either file); 0 when none.
  std::uint64_t highest_generation() const;
  std::uint64_t received() const { return received_; }
  std::uint64_t applied() const { return applied_; }
  std::uint64_t confirmed() const { return confirmed_; }
  const std::array<std::uint64_t, kRefuseReasons>& refused() const { return refused_; }
  // The last refusal ("" if none): "<peer>: <text>".
  const std::string& last_refusal() const { return last_refusal_; }
  const CopyStoreConfig& config() const { return cfg_; }
  const std::string& path(FrameKind kind) const;

 private:
  Verdict refuse(RefuseReason r, std::string text, const std::string& peer);
  CopyStoreConfig cfg_;
  os::FileSystem& fs_;
  const Clock& clock_;
  std::array<std::optional<HeldCopy>, kCopyKinds> held_;
  std::uint64_t received_ = 0;
  std::uint64_t applied_ = 0;
  std::uint64_t confirmed_ = 0;
  std::array<std::uint64_t, kRefuseReasons> refused_{};
  std::string last_refusal_;
};

// One file the master's head sends.
struct Outgoing {
  FrameKind kind = FrameKind::SaDump;
  std::uint64_t generation = 0;
  std::string body;
  WallTime read_at{};
};

struct CopySenderConfig {
  std::string sa_dump_path;   // <dump_files_dir>/opensm-sa.dump
  std::string guid2lid_path;  // <cache_dir>/guid2lid
  std::size_t max_bytes = opensm::kMaxSaDumpBytes;
  Duration refresh = seconds(30);
  opensm::SaDumpBounds bounds;  // what an SA copy may carry (opensm::trim_sa_dump)
};

class CopySender {
 public:
  CopySender(CopySenderConfig cfg, os::FileSystem& fs, const Clock& clock);
  // Reads both files; returns what is due: a changed file with a new
  // generation above `floor` (the highest generation this head holds from
  // others), or an unchanged one whose refresh is due. A file that is missing,
  // too large or does not parse is not sent; problem() says why.
  std::vector<Outgoing> poll(std::uint64_t floor);
  // Forgets what was sent (this head stopped being MASTER): the next poll
  // sends both files with new generations.
  void reset();
  // What the last poll said of `kind`: "" when it is sendable.
  const std::string& problem(FrameKind kind) const { return problem_[kind_index(kind)]; }
  // What the SA copy last read leaves out of OpenSM's dump (opensm::trim_summary; "" nothing).
  const std::string& trimmed() const { return trimmed_; }
  std::uint64_t generation() const { return last_generation_; }
  std::uint64_t sent() const { return sent_; }

 private:
  struct Last {
    std::array<std::uint8_t, 32> sha{};
    std::uint64_t generation = 0;
    TimePoint sent_at{};
    // The file's stamp when read, and what was read: an unchanged stamp is
    // not read (or parsed) again; a refresh re-sends `body`.
    std::optional<os::FileSystem::Stamp> stamp;
    std::string body;
  };
  CopySenderConfig cfg_;
  os::FileSystem& fs_;
  const Clock& clock_;
  std::array<std::optional<Last>, kCopyKinds> last_;
  std::array<std::string, kCopyKinds> problem_;
  std::string trimmed_;
  std::uint64_t last_generation_ = 0;
  std::uint64_t sent_ = 0;
};

}  // namespace smha::peer
