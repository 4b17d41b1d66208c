// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/opensm/sa_dump.hpp"

#include <array>
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

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
                                               const std::array<Field, N>& fields, const char* record,
                                               std::size_t count = N) {
  std::vector<std::uint64_t> values;
  for (std::size_t i = 0; i < count && i < N; ++i) {
    const Field& f = fields[i];
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

enum class LineKind : std::uint8_t { Blank, Group, Member, Service, Inform, GuidInfo, Other };

// A record line's kind by how it starts (after blanks), as the loader tells them apart.
LineKind kind_of(std::string_view rest) {
  if (rest.empty() || rest[0] == '#' || rest == "\n") return LineKind::Blank;
  if (rest.starts_with("MC Group")) return LineKind::Group;
  if (rest.starts_with("mcm_port")) return LineKind::Member;
  if (rest.starts_with("Service Record:")) return LineKind::Service;
  if (rest.starts_with("InformInfo Record:")) return LineKind::Inform;
  if (rest.starts_with("GUIDInfo Record:")) return LineKind::GuidInfo;
  return LineKind::Other;
}

std::size_t skip_blanks(std::string_view line) {
  std::size_t p = 0;
  while (p < line.size() && is_space(line[p])) ++p;
  return p;
}

// One line (with its newline, as fgets hands it over) checked as the loader
// reads it, on its own: what it is and its values, or what is wrong with it
// (the text after "line N", starting " is ..." or ": ...").
struct LineCheck {
  LineKind kind = LineKind::Blank;
  std::vector<std::uint64_t> values;
  bool well_known = false;
  std::optional<std::string> error;
};

LineCheck check_line(std::string_view line) {
  LineCheck c;
  if (line.size() > kMaxSaDumpLine) {
    c.kind = kind_of(line.substr(skip_blanks(line)));
    c.error = " is " + std::to_string(line.size()) + " bytes; OpenSM reads at most " +
              std::to_string(kMaxSaDumpLine) + " a line";
    return c;
  }
  const std::size_t p = skip_blanks(line);
  const std::string_view rest = line.substr(p);
  c.kind = kind_of(rest);
  if (line.find('\0') != std::string_view::npos) {
    c.error = " has a NUL byte";
    return c;
  }
  auto take = [&](Result<std::vector<std::uint64_t>> v) {
    if (!v) c.error = ": " + v.error().message;
    else c.values = std::move(*v);
  };
  switch (c.kind) {
    case LineKind::Blank: break;
    case LineKind::Group:
      take(read_fields(line, p, kGroupFields, "MC Group"));
      if (c.error) break;
      c.well_known = rest.find("(well known)") != std::string_view::npos;
      if (c.values[0] < 0xc000 || c.values[0] == 0xffff)
        c.error = ": MC Group MLID " + std::to_string(c.values[0]) + " is not a multicast LID (0xc000..0xfffe)";
      else if ((c.values[1] >> 56) != 0xff)
        c.error = ": MC Group mgid is not a multicast GID";
      break;
    case LineKind::Member: take(read_fields(line, p, kMemberFields, "mcm_port")); break;
    case LineKind::Service: take(read_fields(line, p, kServiceFields, "Service Record")); break;
    case LineKind::Inform: take(read_fields(line, p, kInformFields, "InformInfo Record")); break;
    case LineKind::GuidInfo: take(read_fields(line, p, kGuidInfoFields, "GUIDInfo Record")); break;
    case LineKind::Other:
      c.error = " is no record OpenSM writes (\"" + std::string(rest.substr(0, std::min<std::size_t>(rest.size(), 24))) +
                "\"...)";
      break;
  }
  return c;
}

// The lines of `text` as fgets reads them (each with its newline).
template <typename F>
void for_each_line(std::string_view text, F&& f) {
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t nl = text.find('\n', start);
    const std::size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    f(text.substr(start, end - start), start);
    start = end;
  }
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
  std::optional<Error> failed;
  for_each_line(text, [&](std::string_view line, std::size_t) {
    if (failed) return;
    ++lineno;
    LineCheck c = check_line(line);
    if (c.error) {
      failed = make_error(Errc::Parse, "line " + std::to_string(lineno) + *c.error);
      return;
    }
    switch (c.kind) {
      case LineKind::Blank: break;
      case LineKind::Group: {
        SaDumpGroup g;
        g.mlid = static_cast<std::uint16_t>(c.values[0]);
        g.mgid_prefix = c.values[1];
        g.mgid_id = c.values[2];
        g.well_known = c.well_known;
        dump.groups.push_back(g);
        group = dump.groups.size() - 1;
        break;
      }
      case LineKind::Member: {
        if (group == kNoGroup) {
          failed = make_error(Errc::Parse, "line " + std::to_string(lineno) + ": mcm_port before any MC Group");
          return;
        }
        SaDumpGroup& g = dump.groups[group];
        ++g.members;
        ++dump.members;
        // scope_state: Scope << 4 | JoinState; JoinState bit 0 is FullMember.
        if (g.full_member_guid == 0 && (c.values[2] & 0x1) != 0) {
          g.full_member_prefix = c.values[0];
          g.full_member_guid = c.values[1];
        }
        break;
      }
      case LineKind::Service: group = kNoGroup, ++dump.services; break;
      case LineKind::Inform: group = kNoGroup, ++dump.informs; break;
      case LineKind::GuidInfo: group = kNoGroup, ++dump.guidinfo; break;
      case LineKind::Other: break;  // an error above
    }
  });
  if (failed) return *failed;
  return dump;
}

namespace {

// A record as trim_sa_dump() sees it: its line and every line after it up to
// the next record (blank lines, and the fragments of a line split by a
// newline inside a value).
struct Span {
  std::size_t begin = 0, end = 0;  // bytes of `text`
  std::size_t lines = 0;
  LineKind kind = LineKind::Blank;  // Blank: what precedes the first record
  bool bad = false;                 // OpenSM could not load it back as written
  std::uint64_t gid_prefix = 0, gid_guid = 0;  // the registering port, when readable
  bool keep = true;
};

bool is_record(LineKind k) { return k != LineKind::Blank && k != LineKind::Other; }

// The port GID a record names, read as far as it goes (a split line still has it).
void read_gid(std::string_view line, Span& s) {
  const std::size_t p = skip_blanks(line);
  auto take = [&s](const Result<std::vector<std::uint64_t>>& v, std::size_t at) {
    if (v && v->size() >= at + 2) s.gid_prefix = (*v)[at], s.gid_guid = (*v)[at + 1];
  };
  switch (s.kind) {
    case LineKind::Service: take(read_fields(line, p, kServiceFields, "", 3), 1); break;
    case LineKind::Inform: take(read_fields(line, p, kInformFields, "", 2), 0); break;
    case LineKind::Member: take(read_fields(line, p, kMemberFields, "", 2), 0); break;
    case LineKind::Group: take(read_fields(line, p, kGroupFields, "", 5), 3); break;
    default: break;
  }
}

// How many records each port keeps: at most `per_port` (0: no bound); then,
// while they hold more than `total` (0: no bound), the same share for every
// port, the remainder to the ports seen first.
std::vector<std::size_t> shares(const std::vector<std::size_t>& counts, std::size_t per_port, std::size_t total) {
  std::vector<std::size_t> keep = counts;
  if (per_port != 0)
    for (auto& k : keep) k = std::min(k, per_port);
  std::size_t sum = 0;
  for (auto k : keep) sum += k;
  if (total == 0 || sum <= total) return keep;
  auto held = [&](std::size_t share) {
    std::size_t n = 0;
    for (auto k : keep) n += std::min(k, share);
    return n;
  };
  std::size_t lo = 0, hi = total;  // the largest share whose sum is within total
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo + 1) / 2;
    if (held(mid) <= total) lo = mid;
    else hi = mid - 1;
  }
  std::size_t left = total - held(lo);
  for (auto& k : keep) {
    const bool more = k > lo;
    k = std::min(k, lo);
    if (more && left > 0) ++k, --left;
  }
  return keep;
}

std::string hex64(std::uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%016llx", static_cast<unsigned long long>(v));
  return b;
}

}  // namespace

SaDumpTrim trim_sa_dump(std::string_view text, const SaDumpBounds& bounds) {
  std::vector<Span> spans;
  bool after_blank = true;
  for_each_line(text, [&](std::string_view line, std::size_t at) {
    const LineCheck c = check_line(line);
    // OpenSM ends every record with a blank line. A record's start right
    // after a broken one is a fragment of it (a ServiceName may hold
    // "\nMC Group ..."), not a record of its own.
    const bool starts = is_record(c.kind) && (spans.empty() || !spans.back().bad || after_blank);
    after_blank = c.kind == LineKind::Blank;
    if (starts || spans.empty()) {
      Span s;
      s.begin = at;
      s.kind = starts ? c.kind : LineKind::Blank;
      read_gid(line, s);
      spans.push_back(s);
    }
    Span& s = spans.back();
    s.end = at + line.size();
    ++s.lines;
    if (c.error) s.bad = true;
  });

  SaDumpTrim out;
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::size_t> port_index;
  auto port = [&](const Span& s) -> TrimmedPort& {
    const auto key = std::make_pair(s.gid_prefix, s.gid_guid);
    auto [it, added] = port_index.try_emplace(key, out.ports.size());
    if (added) out.ports.push_back(TrimmedPort{s.gid_prefix, s.gid_guid});
    return out.ports[it->second];
  };
  // Records OpenSM could not load back, groups with their members, and the
  // ServiceRecords and InformInfo records of each port in file order.
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::size_t group = kNone;  // the group span mcm_port lines belong to
  std::size_t groups = 0;
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::size_t> service_port, inform_port;
  std::vector<std::size_t> service_counts, inform_counts;
  for (std::size_t i = 0; i < spans.size(); ++i) {
    Span& s = spans[i];
    if (s.kind == LineKind::Member) {
      if (group == kNone || !spans[group].keep) {
        // Its group was left out (it goes along) or there is none (unloadable).
        if (group == kNone) ++port(s).unloadable, ++out.unloadable;
        s.keep = false;
        continue;
      }
    } else if (s.kind != LineKind::Blank) {
      group = s.kind == LineKind::Group ? i : kNone;
    }
    if (s.bad) {
      s.keep = false;
      ++port(s).unloadable;
      ++out.unloadable;
      continue;
    }
    if (s.kind == LineKind::Group && bounds.groups != 0 && ++groups > bounds.groups) {
      s.keep = false;
      ++out.groups;
    } else if (s.kind == LineKind::Service || s.kind == LineKind::Inform) {
      auto& index = s.kind == LineKind::Service ? service_port : inform_port;
      auto& counts = s.kind == LineKind::Service ? service_counts : inform_counts;
      auto [it, added] = index.try_emplace(std::make_pair(s.gid_prefix, s.gid_guid), counts.size());
      if (added) counts.push_back(0);
      ++counts[it->second];
    }
  }
  const auto service_keep = shares(service_counts, bounds.services_per_port, bounds.services);
  const auto inform_keep = shares(inform_counts, bounds.informs_per_port, bounds.informs);
  std::vector<std::size_t> service_seen(service_counts.size()), inform_seen(inform_counts.size());
  for (Span& s : spans) {
    if (!s.keep || (s.kind != LineKind::Service && s.kind != LineKind::Inform)) continue;
    const bool service = s.kind == LineKind::Service;
    const std::size_t i = (service ? service_port : inform_port).at(std::make_pair(s.gid_prefix, s.gid_guid));
    auto& seen = service ? service_seen : inform_seen;
    if (++seen[i] <= (service ? service_keep : inform_keep)[i]) continue;
    s.keep = false;
    if (service) ++port(s).services, ++out.services;
    else ++port(s).informs, ++out.informs;
  }
  out.text.reserve(text.size());
  for (const Span& s : spans) {
    if (s.keep) out.text.append(text.substr(s.begin, s.end - s.begin));
    else out.lines += s.lines;
  }
  std::stable_sort(out.ports.begin(), out.ports.end(), [](const TrimmedPort& a, const TrimmedPort& b) {
    return a.unloadable + a.services + a.informs > b.unloadable + b.services + b.informs;
  });
  return out;
}

std::string trim_summary(const SaDumpTrim& trim, const SaDumpBounds& b, std::size_t max_ports) {
  if (!trim.any()) return {};
  auto bound = [](std::size_t n) { return n == 0 ? std::string("none") : std::to_string(n); };
  std::string s;
  auto part = [&s](const std::string& p) { s += (s.empty() ? "" : ", ") + p; };
  if (trim.unloadable != 0)
    part(std::to_string(trim.unloadable) + (trim.unloadable == 1 ? " record" : " records") +
         " OpenSM could not load back");
  if (trim.services != 0)
    part(std::to_string(trim.services) + " ServiceRecords over the bounds (" + bound(b.services_per_port) +
         " a port, " + bound(b.services) + " in all)");
  if (trim.informs != 0)
    part(std::to_string(trim.informs) + " InformInfo records over the bounds (" + bound(b.informs_per_port) +
         " a port, " + bound(b.informs) + " in all)");
  if (trim.groups != 0) part(std::to_string(trim.groups) + " multicast groups over the bound of " + bound(b.groups));
  std::string ports;
  std::size_t named = 0;
  for (const auto& p : trim.ports) {
    if (named == max_ports) {
      ports += ", and " + std::to_string(trim.ports.size() - named) + " more ports";
      break;
    }
    ports += (named++ == 0 ? "" : ", ") + std::to_string(p.unloadable + p.services + p.informs);
    if (p.gid_prefix == 0 && p.gid_guid == 0) ports += " with no readable port GID";
    else ports += " registered by port GID " + hex64(p.gid_prefix) + ":" + hex64(p.gid_guid);
  }
  return ports.empty() ? s : s + ": " + ports;
}

std::string summary_text(const SaDump& dump) {
  return std::to_string(dump.groups.size()) + " groups (" + std::to_string(dump.members) + " members), " +
         std::to_string(dump.services) + " ServiceRecords, " + std::to_string(dump.informs) + " subscriptions";
}

}  // namespace smha::opensm
