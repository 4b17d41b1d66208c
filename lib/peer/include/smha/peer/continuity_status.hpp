// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// status.continuity, typed (doc/control-protocol.md): what Continuity::status()
// samples on the peer thread and ContinuityThread hands to the main loop, and
// its one renderer, continuity_json(), run when the status is asked. Times are
// kept as wall-clock points, so every age is as of the reply. The renderer sits
// beside these types (lib/head does not depend on lib/peer).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "smha/core/clock.hpp"
#include "smha/core/types.hpp"
#include "smha/peer/channel.hpp"
#include "smha/peer/copy_store.hpp"

namespace smha::peer {

// A copy held here (CopyStore::held), without its content.
struct CopyStatus {
  std::uint64_t generation = 0;
  std::string from;
  Guid master_guid;
  std::size_t bytes = 0;
  WallTime received{};   // written here
  WallTime confirmed{};  // last confirmed by the master
  WallTime written{};    // the master's OpenSM wrote its content
  // sa_dump: what it holds, what the master left out, and whether it is
  // current (Continuity::sa_copy_current when sampled; `stale` says why not).
  SaCounts sa;
  std::string trimmed;
  bool current = false;
  std::string stale;
  std::size_t guid2lid_entries = 0;  // guid2lid
};

// The copies this head held when its OpenSM last became MASTER.
struct TakeoverCopies {
  WallTime at{};
  std::optional<CopyStatus> sa_copy;
  std::optional<CopyStatus> guid2lid_copy;
};

struct ContinuityStatus {
  bool sending = false;  // this head's SM is MASTER: copies go out
  bool listening = false;
  std::string listen;  // "host:port"; empty: no listener configured
  std::string sa_db_file;
  Duration max_copy_age{};
  std::array<std::optional<CopyStatus>, kCopyKinds> copies;       // by kind_index
  std::array<std::optional<MasterNotice>, kCopyKinds> not_sent;  // the master's last notice, by kind_index
  std::string stale;  // the sa_copy_stale alarm's detail; empty: not raised
  std::uint64_t received = 0, applied = 0, confirmed = 0;
  std::array<std::uint64_t, kRefuseReasons> refused{};
  std::string last_refusal;
  std::uint64_t sent = 0, sent_generation = 0;
  std::array<std::string, kCopyKinds> send_problem;  // CopySender::problem, by kind_index
  std::string sent_trimmed;                          // CopySender::trimmed
  ChannelCounters channel;
  std::vector<PeerLink> peers;
  std::optional<TakeoverCopies> at_takeover;  // nullopt: not MASTER since smhad started
};

// status.continuity as of `now`; nullptr: no channel ({"enabled": false}).
nlohmann::json continuity_json(const ContinuityStatus* s, WallTime now);

}  // namespace smha::peer
