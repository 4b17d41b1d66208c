// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/opensm/sa_dump.hpp"

#include <array>
#include <cctype>
#include <cstring>

namespace smha::opensm {

namespace {

// One field as the loader's PARSE_AHEAD reads it: the text before the value
// (found with strstr from where the last field ended) and the value, hex of
// at most `bytes` bytes, or a string (`bytes` 0).
struct Field {
  const char* name;
  int bytes;
};

// osm_sa_db_file_load's fields, in its order.
constexpr std::array<Field, 15> kGroupFields{{{" 0x", 2},
                                             {" mgid=0x", 8},
                                             {":0x", 8},
                                             {" port_gid=0x", 8},
                                             {":0x", 8},
                                             {" qkey=0x", 4},
                                             {" mlid=0x", 2},
                                             {" mtu=0x", 1},
                                             {" tclass=0x", 1},
                                             {" pkey=0x", 2},
                                             {" rate=0x", 1},
                                             {" pkt_life=0x", 1},
                                             {" sl_flow_hop=0x", 4},
                                             {" scope_state=0x", 1},
                                             {" proxy_join=0x", 1}}};
constexpr std::array<Field, 4> kMemberFields{
    {{" port_gid=0x", 8}, {":0x", 8}, {" scope_state=0x", 1}, {" proxy_join=0x", 1}}};
constexpr std::array<Field, 18> kServiceFields{{{" id=0x", 8},
                                                {" gid=0x", 8},
                                                {":0x", 8},
                                                {" pkey=0x", 2},
                                                {" lease=0x", 4},
                                                {" key=0x", 8},
                                                {":0x", 8},
                                                {" name=", 0},
                                                {" data8=0x", 8},
                                                {":0x", 8},
                                                {" data16=0x", 8},
                                                {":0x", 8},
                                                {" data32=0x", 8},
                                                {":0x", 8},
                                                {" data64=0x", 8},
                                                {":0x", 8},
                                                {" modified_time=0x", 4},
                                                {" lease_period=0x", 4}}};
constexpr std::array<Field, 20> kInformFields{{{" subscriber_gid=0x", 8},
                                               {":0x", 8},
                                               {" subscriber_enum=0x", 2},
                                               {" gid=0x", 8},
                                               {":0x", 8},
                                               {" lid_range_begin=0x", 2},
                                               {" lid_range_end=0x", 2},
                                               {" is_generic=0x", 1},
                                               {" subscribe=0x", 1},
                                               {" trap_type=0x", 2},
                                               {" trap_num=0x", 2},
                                               {" qpn_resp_time_val=0x", 4},
                                               {" node_type=0x", 4},
                                               {" rep_addr: lid=0x", 2},
                                               {" path_bits=0x", 1},
                                               {" static_rate=0x", 1},
                                               {" remote_qp=0x", 4},
                                               {" remote_qkey=0x", 4},
                                               {" pkey_ix=0x", 2},
                                               {" sl=0x", 1}}};
constexpr std::array<Field, 11> kGuidInfoFields{{{" base_guid=0x", 8},
                                                 {" lid=0x", 2},
                                                 {" block_num=0x", 1},
                                                 {" guid0=0x", 8},
                                                 {" guid1=0x", 8},
                                                 {" guid2=0x", 8},
                                                 {" guid3=0x", 8},
                                                 {" guid4=0x", 8},
                                                 {" guid5=0x", 8},
                                                 {" guid6=0x", 8},
                                                 {" guid7=0x", 8}}};

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// Reads the fields of one line from `pos` as the loader does; the values in
// order (a string field gives 0). Error text names the field.
template <std::size_t N>
Result<std::vector<std::uint64_t>> read_fields(std::string_view line, std::size_t pos,
                                               const std::array<Field, N>& fields, const char* record) {
  std::vector<std::uint64_t> values;
  for (const Field& f : fields) {
    const std::size_t at = line.find(f.name, pos);
    if (at == std::string_view::npos)
      return make_error(Errc::Parse, std::string(record) + ": no \"" + f.name + "\" field");
    pos = at + std::strlen(f.name);
    if (f.bytes == 0) {
      // unpack_string: quoted with ' or ", at most 63 bytes up to the
      // closing quote (a longer name is cut there; the next field is still
      // found), else up to the next blank.
      std::size_t q = pos;
      char delim = ' ';
      if (q < line.size() && (line[q] == '\'' || line[q] == '"')) delim = line[q++];
      std::size_t n = 0;
      while (q < line.size() && line[q] != delim && n < 63) ++q, ++n;
      if (delim != ' ' && q < line.size() && line[q] == delim) ++q;
      pos = q;
      values.push_back(0);
      continue;
    }
    // unpack_net*: strtoull(p, &q, 16), the value within the field's width,
    // then a blank or ':'. Only hex digits are taken here (strtoull would
    // also take blanks, a sign and another "0x"; OpenSM's own dump has none).
    std::size_t q = pos;
    std::uint64_t v = 0;
    bool over = false;
    while (q < line.size() && std::isxdigit(static_cast<unsigned char>(line[q]))) {
      const char c = line[q];
      const unsigned d = static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                                                                                         : (std::tolower(c) - 'a' + 10));
      if (v >> 60) over = true;
      v = v << 4 | d;
      ++q;
    }
    if (q == pos)
      return make_error(Errc::Parse, std::string(record) + ": \"" + f.name + "\" is not followed by a hex number");
    if (over || (f.bytes < 8 && v >> (8 * f.bytes)))
      return make_error(Errc::Parse, std::string(record) + ": \"" + f.name + "\" does not fit " +
                                         std::to_string(f.bytes) + " byte(s)");
    if (q >= line.size() || (!is_space(line[q]) && line[q] != ':'))
      return make_error(Errc::Parse, std::string(record) + ": \"" + f.name + "\" is not followed by a blank or ':'");
    pos = q;
    values.push_back(v);
  }
  return values;
}

Error line_error(std::size_t lineno, const Error& e) {
  return make_error(e.code, "line " + std::to_string(lineno) + ": " + e.message);
}

}  // namespace

Result<SaDump> parse_sa_dump(std::string_view text, std::size_t max_bytes) {
  if (text.size() > max_bytes)
    return make_error(Errc::TooLarge, "the SA dump is " + std::to_string(text.size()) + " bytes; at most " +
                                          std::to_string(max_bytes) + " are read");
  SaDump dump;
  constexpr std::size_t kNoGroup = static_cast<std::size_t>(-1);
  std::size_t group = kNoGroup;  // index of the group mcm_port lines add to
  std::size_t lineno = 0;
  for (std::size_t start = 0; start < text.size();) {
    ++lineno;
    const std::size_t nl = text.find('\n', start);
    // The line with its newline, as fgets hands it over.
    const std::size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    const std::string_view line = text.substr(start, end - start);
    start = end;
    if (line.size() > kMaxSaDumpLine)
      return make_error(Errc::Parse, "line " + std::to_string(lineno) + " is " + std::to_string(line.size()) +
                                         " bytes; OpenSM reads at most " + std::to_string(kMaxSaDumpLine) +
                                         " a line");
    if (line.find('\0') != std::string_view::npos)
      return make_error(Errc::Parse, "line " + std::to_string(lineno) + " has a NUL byte");
    std::size_t p = 0;
    while (p < line.size() && is_space(line[p])) ++p;
    const std::string_view rest = line.substr(p);
    if (rest.empty() || rest[0] == '#') continue;
    if (rest.starts_with("MC Group")) {
      auto v = read_fields(line, p, kGroupFields, "MC Group");
      if (!v) return line_error(lineno, v.error());
      SaDumpGroup g;
      g.mlid = static_cast<std::uint16_t>((*v)[0]);
      g.mgid_prefix = (*v)[1];
      g.mgid_id = (*v)[2];
      g.well_known = rest.find("(well known)") != std::string_view::npos;
      if (g.mlid < 0xc000 || g.mlid == 0xffff)
        return make_error(Errc::Parse, "line " + std::to_string(lineno) + ": MC Group MLID " + std::to_string(g.mlid) +
                                           " is not a multicast LID (0xc000..0xfffe)");
      if ((g.mgid_prefix >> 56) != 0xff)
        return make_error(Errc::Parse, "line " + std::to_string(lineno) + ": MC Group mgid is not a multicast GID");
      dump.groups.push_back(g);
      group = dump.groups.size() - 1;
    } else if (rest.starts_with("mcm_port")) {
      if (group == kNoGroup)
        return make_error(Errc::Parse, "line " + std::to_string(lineno) + ": mcm_port before any MC Group");
      auto v = read_fields(line, p, kMemberFields, "mcm_port");
      if (!v) return line_error(lineno, v.error());
      SaDumpGroup& g = dump.groups[group];
      ++g.members;
      ++dump.members;
      // scope_state: Scope << 4 | JoinState; JoinState bit 0 is FullMember.
      if (g.full_member_guid == 0 && ((*v)[2] & 0x1) != 0) {
        g.full_member_prefix = (*v)[0];
        g.full_member_guid = (*v)[1];
      }
    } else if (rest.starts_with("Service Record:")) {
      auto v = read_fields(line, p, kServiceFields, "Service Record");
      if (!v) return line_error(lineno, v.error());
      group = kNoGroup;
      ++dump.services;
    } else if (rest.starts_with("InformInfo Record:")) {
      auto v = read_fields(line, p, kInformFields, "InformInfo Record");
      if (!v) return line_error(lineno, v.error());
      group = kNoGroup;
      ++dump.informs;
    } else if (rest.starts_with("GUIDInfo Record:")) {
      auto v = read_fields(line, p, kGuidInfoFields, "GUIDInfo Record");
      if (!v) return line_error(lineno, v.error());
      group = kNoGroup;
      ++dump.guidinfo;
    } else {
      return make_error(Errc::Parse, "line " + std::to_string(lineno) + " is no record OpenSM writes (\"" +
                                         std::string(rest.substr(0, std::min<std::size_t>(rest.size(), 24))) +
                                         "\"...)");
    }
  }
  return dump;
}

std::string summary_text(const SaDump& dump) {
  return std::to_string(dump.groups.size()) + " groups (" + std::to_string(dump.members) + " members), " +
         std::to_string(dump.services) + " ServiceRecords, " + std::to_string(dump.informs) + " subscriptions";
}

}  // namespace smha::opensm
