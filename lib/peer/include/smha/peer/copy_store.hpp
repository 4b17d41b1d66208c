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
//   future        its generation is more than kMaxGenerationAhead ahead of this
//                 head's wall clock in ms (generations are at least the sender's
//                 wall clock in ms, so only a stolen key or a broken clock makes one)
//   older         its generation is below the one held, and the one held is
//                 plausible (not over kMaxGenerationAhead ahead): an implausible
//                 generation held (a restart, a clock stepped back) blocks nothing;
//                 the answer carries the generation held, so a master whose
//                 clock stepped back continues above it
//   replayed      the same generation with other content
//   too_large     over continuity.max_copy_bytes
//   malformed     the file does not parse as OpenSM reads it (opensm::parse_sa_dump,
//                 opensm::parse_guid2lid with no record skipped)
//   write_failed  the atomic write failed
//
// The same generation with the same content confirms the copy held (the
// master re-sends every refresh interval): nothing is written, its age
// starts again. The generation and who sent it are kept beside the copy
// (<path>.smha), so a restarted smhad knows what it holds. A copy knows how
// old its content is (`written`: the master's OpenSM wrote it then, from the
// meta's age_ms on this head's clock) apart from its last confirmation.
//
// A notice from the master (its current file was not sent, and why) is
// checked as a copy's sender is (identity .. local_master) and kept until
// the next copy of that kind is applied or confirmed: the copy held is then
// no longer the master's current state.
//
// CopySender, on the head whose OpenSM is MASTER, reads its OpenSM's files
// and says what to send: a copy whose content changed gets a new generation,
// above every generation this head has sent or received and at least the
// wall clock in milliseconds (so it grows across takeovers even when the
// channel was down); unchanged content is re-sent with its generation every
// refresh interval. From the SA dump it first leaves out the records OpenSM
// could not load back and those over `bounds` (opensm::trim_sa_dump; shown
// by trimmed()). A file of its own OpenSM that still does not parse is not sent
// (and shown), and read again only when its stamp changes. An SA dump
// written before this head's OpenSM became MASTER (set_master_since) is not
// this master's SA and is never sent. What is not sent is said in a notice,
// at once and every refresh interval while it lasts.
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
  Future,
};
inline constexpr std::size_t kRefuseReasons = 11;
// The token in status, metrics labels and answers: "identity", "not_a_peer", ...
std::string_view to_string(RefuseReason r);

// How far a generation may be ahead of the receiver's wall clock in ms.
inline constexpr std::uint64_t kMaxGenerationAheadMs = 24ULL * 3600 * 1000;
// `generation` is at most kMaxGenerationAheadMs ahead of `now` (no overflow).
bool plausible_generation(std::uint64_t generation, WallTime now);

// An SA dump's records by kind, counted line by line (also when the dump does
// not parse: what a notice says of it).
SaCounts rough_counts(std::string_view dump);
SaCounts counts_of(const opensm::SaDump& dump);

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
  WallTime confirmed{};  // when the master last sent this content as its current one
  WallTime written{};    // when the master's OpenSM wrote this content (meta age_ms; this head's clock)
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
  std::uint64_t held = 0;  // the generation held of that kind after it (0: none), for the answer
};

// The master's last notice of a kind: its current file was not sent.
struct MasterNotice {
  std::string from;
  WallTime received{};
  WallTime since{};  // received - age_ms: when the master's state moved on from the last copy it sent
  std::string problem;
  std::optional<SaCounts> counts;
};

// The last refusal of a kind since a copy of it was last applied or confirmed.
struct Refusal {
  RefuseReason reason = RefuseReason::Malformed;
  std::string from;
  std::string text;
  WallTime at{};
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

  // A notice from `tls_peer`: the same sender checks as a copy (identity ..
  // local_master); accepted, it is kept as notice(kind) until the next copy of
  // that kind is applied or confirmed. Never writes.
  Verdict notice(const NoticeMeta& meta, const std::string& tls_peer, const InBandFacts& facts);

  const std::optional<HeldCopy>& held(FrameKind kind) const { return held_[kind_index(kind)]; }
  const std::optional<MasterNotice>& notice(FrameKind kind) const { return notices_[kind_index(kind)]; }
  const std::optional<Refusal>& refusal(FrameKind kind) const { return refusals_[kind_index(kind)]; }
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
  // The checks of who sends (identity .. local_master); nullopt: passed.
  std::optional<Verdict> check_sender(const std::string& what, const std::string& from, Guid master_guid,
                                      const std::string& fabric, const std::string& tls_peer,
                                      const InBandFacts& facts);
  Verdict judge(FrameKind kind, const CopyMeta& meta, std::string_view body, const std::string& tls_peer,
                const InBandFacts& facts);
  CopyStoreConfig cfg_;
  os::FileSystem& fs_;
  const Clock& clock_;
  std::array<std::optional<HeldCopy>, kCopyKinds> held_;
  std::array<std::optional<MasterNotice>, kCopyKinds> notices_;
  std::array<std::optional<Refusal>, kCopyKinds> refusals_;
  std::uint64_t received_ = 0;
  std::uint64_t applied_ = 0;
  std::uint64_t confirmed_ = 0;
  std::array<std::uint64_t, kRefuseReasons> refused_{};
  std::string last_refusal_;
};

// One file the master's head sends, or (notice) says it does not send.
struct Outgoing {
  FrameKind kind = FrameKind::SaDump;
  std::uint64_t generation = 0;
  std::string body;
  WallTime read_at{};
  std::uint64_t age_ms = 0;  // the file's age (a notice: see NoticeMeta::age_ms)
  bool notice = false;
  std::string problem;       // a notice: why not sent
  std::optional<SaCounts> counts;
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
  // When this head's OpenSM became MASTER, at the latest (nullopt: not known
  // to be MASTER, nothing is held back). An SA dump whose mtime is before it
  // is from an earlier mastership or process: not sent ("waiting for this
  // master's first dump"), also when its mtime cannot be read.
  void set_master_since(std::optional<WallTime> since) { master_since_ = since; }
  // A peer answered `older`, holding `held` above our generation of `kind`
  // (this head's clock stepped back): the next poll sends that file again
  // with a generation above `held`. Ignored when `held` is implausible
  // against our clock (kMaxGenerationAheadMs) or not above what we sent.
  // Returns whether it took effect.
  bool continue_above(FrameKind kind, std::uint64_t held);
  // What the last poll said of `kind`: "" when it is sendable.
  const std::string& problem(FrameKind kind) const { return problem_[kind_index(kind)]; }
  // What the SA copy last read leaves out of OpenSM's dump (opensm::trim_summary; "" nothing).
  const std::string& trimmed() const { return trimmed_; }
  std::uint64_t generation() const { return last_generation_; }
  // The generation of the last copy of `kind` sent (0: none).
  std::uint64_t generation(FrameKind kind) const {
    const auto& l = last_[kind_index(kind)];
    return l ? l->generation : 0;
  }
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
  // Above `floor`, what was sent and the wall clock; implausible ones ignored.
  std::uint64_t next_generation(std::uint64_t floor);
  // Records why `kind` is not sent; a notice is due when that changed or
  // its refresh is.
  void not_sent(std::vector<Outgoing>& out, FrameKind kind, std::string problem, std::uint64_t age_ms,
                std::optional<SaCounts> counts);
  CopySenderConfig cfg_;
  os::FileSystem& fs_;
  const Clock& clock_;
  std::array<std::optional<Last>, kCopyKinds> last_;
  std::array<std::string, kCopyKinds> problem_;
  std::string trimmed_;
  // A file that was not sendable, by stamp: not read again until it changes.
  std::array<std::optional<os::FileSystem::Stamp>, kCopyKinds> bad_stamp_;
  std::array<std::optional<SaCounts>, kCopyKinds> bad_counts_;
  std::array<std::optional<TimePoint>, kCopyKinds> noticed_at_;  // the last notice (reset by a copy)
  std::array<std::string, kCopyKinds> noticed_;                   // its problem
  std::array<bool, kCopyKinds> regenerate_{};
  std::uint64_t above_ = 0;  // continue_above()'s floor
  std::optional<WallTime> master_since_;
  std::uint64_t last_generation_ = 0;
  std::uint64_t sent_ = 0;
};

}  // namespace smha::peer
