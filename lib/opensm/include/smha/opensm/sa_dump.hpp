// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// OpenSM's SA database dump (opensm-sa.dump, written by the master with
// sa_db_dump TRUE; read back as sa_db_file on a first master sweep;
// doc/continuity.md). One record a line, blank lines between:
//
//   MC Group 0x<mlid> [(well known)]: mgid=0x..:0x.. port_gid=0x..:0x.. qkey=0x..
//       mlid=0x.. mtu=0x.. tclass=0x.. pkey=0x.. rate=0x.. pkt_life=0x..
//       sl_flow_hop=0x.. scope_state=0x.. proxy_join=0x..
//   mcm_port: port_gid=0x..:0x.. scope_state=0x.. proxy_join=0x..
//   InformInfo Record: subscriber_gid=0x..:0x.. subscriber_enum=0x.. InformInfo: gid=...
//   Service Record: id=0x.. gid=0x..:0x.. pkey=0x.. lease=0x.. key=.. name='..' data8=..
//   GUIDInfo Record: base_guid=0x.. lid=0x.. block_num=0x.. guid0=0x.. .. guid7=0x..
//
// OpenSM's loader (osm_sa.c osm_sa_db_file_load) reads it with fgets into a
// 1 KiB buffer and finds each field with strstr from where the last one
// ended; a field it cannot find or parse stops the load there: the records
// before it are restored, the rest are not. So a copy is only worth writing
// when every line parses: parse_sa_dump() checks each line exactly as that
// loader would read it, and more (MLIDs in the multicast range, MGIDs that
// are multicast, members only after a group), and refuses the whole text on
// the first problem, naming the line and the field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "smha/core/result.hpp"

namespace smha::opensm {

// What parse_sa_dump() refuses unread. A fabric's dump is about 100 bytes a
// membership and 700 a ServiceRecord: 64 MiB is room for several hundred
// thousand of either.
inline constexpr std::size_t kMaxSaDumpBytes = 64 * 1024 * 1024;
// OpenSM reads a line into char[1024] with fgets(line, 1023): a longer line
// is cut and its tail read as another line.
inline constexpr std::size_t kMaxSaDumpLine = 1022;

struct SaDumpGroup {
  std::uint16_t mlid = 0;
  std::uint64_t mgid_prefix = 0;
  std::uint64_t mgid_id = 0;
  bool well_known = false;
  std::size_t members = 0;  // its mcm_port lines
  // Its first full member (an mcm_port whose JoinState has FullMember):
  // OpenSM closes a group without one unless it is well known. 0 when none.
  std::uint64_t full_member_prefix = 0;
  std::uint64_t full_member_guid = 0;
  friend bool operator==(const SaDumpGroup&, const SaDumpGroup&) = default;
};

struct SaDump {
  std::vector<SaDumpGroup> groups;  // in file order
  std::size_t members = 0;          // mcm_port lines, all groups
  std::size_t services = 0;         // Service Record lines
  std::size_t informs = 0;          // InformInfo Record lines
  std::size_t guidinfo = 0;         // GUIDInfo Record lines
  friend bool operator==(const SaDump&, const SaDump&) = default;
};

// Checks `text` as OpenSM's loader reads it. Errors (code Parse): "line N:
// ..." naming the record and the field, a line longer than kMaxSaDumpLine,
// a NUL byte, a line that is no record, an mcm_port before any group; code
// TooLarge when the text is longer than `max_bytes`. Never reads beyond the
// text; memory is bounded by the number of groups.
Result<SaDump> parse_sa_dump(std::string_view text, std::size_t max_bytes = kMaxSaDumpBytes);

// What a copy of the SA dump may carry (continuity.max_*; doc/continuity.md).
// OpenSM's loader looks every ServiceRecord and InformInfo up in a list of
// those loaded before (osm_svcr_get_by_rid, osm_infr_get_by_rec): its time
// grows with their square, and it runs before the new master's SA answers.
// Groups are looked up in a map. 0: no bound.
struct SaDumpBounds {
  std::size_t services_per_port = 64;
  std::size_t services = 4096;
  std::size_t informs_per_port = 64;
  std::size_t informs = 4096;
  std::size_t groups = 8192;
};

// The records trim_sa_dump() left out that one port GID registered (the
// dump's gid= of a ServiceRecord, subscriber_gid= of an InformInfo: a claim
// of the registering node, not a proof). 0:0 when no GID could be read.
struct TrimmedPort {
  std::uint64_t gid_prefix = 0;
  std::uint64_t gid_guid = 0;
  std::size_t unloadable = 0;  // records OpenSM could not load back
  std::size_t services = 0;    // ServiceRecords over a bound
  std::size_t informs = 0;     // InformInfo records over a bound
  friend bool operator==(const TrimmedPort&, const TrimmedPort&) = default;
};

struct SaDumpTrim {
  std::string text;                 // the dump without what was left out
  std::vector<TrimmedPort> ports;   // most records left out first
  std::size_t unloadable = 0;       // records left out because OpenSM could not load them back
  std::size_t services = 0;         // ServiceRecords left out over a bound
  std::size_t informs = 0;          // InformInfo records left out over a bound
  std::size_t groups = 0;           // MC Groups (with their members) left out over groups
  std::size_t lines = 0;            // lines left out, all reasons
  bool any() const { return lines != 0; }
};

// The dump `text` as a copy may carry it: what parse_sa_dump() takes, so
// that one record cannot stop the copy of every other.
//   - A record OpenSM could not load back is left out whole: its line and
//     every line after it up to the next record (a ServiceName holding a
//     newline splits OpenSM's own line; the loader would stop at the first
//     part and drop everything after it). A group left out takes its
//     mcm_port lines with it; an mcm_port with no group before it is left out.
//   - ServiceRecords and InformInfo records over `bounds`: each port keeps
//     its first ones in file order up to the per-port bound; if the ports
//     together still hold more than the total, every port is cut to the
//     same share (the ports with the most lose first).
//   - MC Groups past `bounds.groups`, in file order, with their members.
// Everything else is kept byte for byte, in order. Never fails; linear in
// the text.
SaDumpTrim trim_sa_dump(std::string_view text, const SaDumpBounds& bounds);

// What was left out, for an alarm and status, naming at most `max_ports`
// ports ("" when nothing was): "1 record OpenSM could not load back, 19936
// ServiceRecords over the bounds (64 a port, 4096 in all): 19937 registered
// by port GID 0xfe80000000000000:0x0002c90300000003".
std::string trim_summary(const SaDumpTrim& trim, const SaDumpBounds& bounds, std::size_t max_ports = 4);

// "3 groups (7 members), 2 ServiceRecords, 4 subscriptions" for status and logs.
std::string summary_text(const SaDump& dump);

}  // namespace smha::opensm
