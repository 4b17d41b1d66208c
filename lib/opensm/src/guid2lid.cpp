// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/opensm/guid2lid.hpp"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <set>

namespace smha::opensm {

namespace {

// "0x" + 1..max_hex_digits hex digits (what osm_db_store writes).
bool parse_number(std::string_view s, int max_hex_digits, std::uint64_t& out) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    if (s.empty() || s.size() > static_cast<std::size_t>(max_hex_digits)) return false;
    std::uint64_t v = 0;
    for (char ch : s) {
      int d;
      if (ch >= '0' && ch <= '9') d = ch - '0';
      else if (ch >= 'a' && ch <= 'f') d = ch - 'a' + 10;
      else if (ch >= 'A' && ch <= 'F') d = ch - 'A' + 10;
      else return false;
      v = (v << 4) | static_cast<std::uint64_t>(d);
    }
    out = v;
    return true;
  }
  return false;
}

std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> w;
  std::size_t i = 0;
  while (i < line.size() && w.size() < 4) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    if (j > i) w.push_back(line.substr(i, j - i));
    i = j;
  }
  return w;
}

}  // namespace

std::string guid2lid_entry_problem(const Guid2LidEntry& e) {
  char buf[96];
  if (e.guid.value == 0) return "port GUID 0";
  if (e.min_lid == 0) return "LID 0";
  if (e.max_lid > kMaxUnicastLid || e.min_lid > kMaxUnicastLid) {
    std::snprintf(buf, sizeof buf, "LID 0x%04x past the unicast range (0x0001-0x%04x)",
                  static_cast<unsigned>(std::max(e.min_lid, e.max_lid)), static_cast<unsigned>(kMaxUnicastLid));
    return buf;
  }
  if (e.min_lid > e.max_lid) {
    std::snprintf(buf, sizeof buf, "min LID 0x%04x above max LID 0x%04x", static_cast<unsigned>(e.min_lid),
                  static_cast<unsigned>(e.max_lid));
    return buf;
  }
  const unsigned n = static_cast<unsigned>(e.max_lid - e.min_lid) + 1;
  if (n > (1u << kMaxLmc)) {
    std::snprintf(buf, sizeof buf, "%u LIDs (LMC allows at most %u)", n, 1u << kMaxLmc);
    return buf;
  }
  if ((n & (n - 1)) != 0 || (e.min_lid & (n - 1)) != 0) {
    std::snprintf(buf, sizeof buf, "LID range 0x%04x-0x%04x not aligned to a power of two",
                  static_cast<unsigned>(e.min_lid), static_cast<unsigned>(e.max_lid));
    return buf;
  }
  return {};
}

std::string render_guid2lid(const std::vector<Guid2LidEntry>& entries) {
  std::string out;
  out.reserve(entries.size() * 36);
  char buf[64];
  for (const auto& e : entries) {
    // osm_db_pack.c: "0x%016" PRIx64 key, "0x%04x 0x%04x" value; "%s %s\n\n".
    std::snprintf(buf, sizeof buf, "0x%016" PRIx64 " 0x%04x 0x%04x\n\n", e.guid.value,
                  static_cast<unsigned>(e.min_lid), static_cast<unsigned>(e.max_lid));
    out += buf;
  }
  return out;
}

Result<Guid2LidFile> parse_guid2lid(std::string_view text, std::size_t max_entries, std::size_t max_bytes) {
  if (text.size() > max_bytes)
    return Error{Errc::TooLarge, "guid2lid: " + std::to_string(text.size()) + " bytes, more than the " +
                                  std::to_string(max_bytes) + " accepted"};
  Guid2LidFile f;
  std::set<std::uint64_t> seen;
  auto skip = [&](std::size_t line_no, const std::string& why) {
    ++f.skipped;
    if (f.problems.size() < Guid2LidFile::kMaxProblems)
      f.problems.push_back("line " + std::to_string(line_no) + ": " + why);
  };
  std::size_t pos = 0;
  std::size_t line_no = 0;
  bool in_record = false;      // a record line was read, its empty line not yet
  bool record_spans = false;   // the record has more lines than one
  bool record_bad = false;     // already skipped (counted once)
  std::size_t record_line = 0;
  Guid2LidEntry pending;
  auto finish = [&] {
    if (!in_record) return;
    in_record = false;
    if (record_bad) return;
    if (record_spans) {
      skip(record_line, "a record of more than one line");
    } else {
      if (f.entries.size() >= max_entries) {
        skip(record_line, "more than " + std::to_string(max_entries) + " entries");
      } else if (!seen.insert(pending.guid.value).second) {
        skip(record_line, "port GUID " + to_string(pending.guid) + " listed again");
      } else {
        f.entries.push_back(pending);
      }
    }
  };
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (line.empty()) {
      finish();
      continue;
    }
    if (in_record) {
      record_spans = true;  // OpenSM would add this line to the record's value
      continue;
    }
    if (line[0] == ' ' || line[0] == '\t') {
      skip(line_no, "a line starting with white space outside a record");
      continue;
    }
    in_record = true;
    record_spans = false;
    record_bad = true;
    record_line = line_no;
    const auto w = words(line);
    std::uint64_t guid = 0, lo = 0, hi = 0;
    if (w.size() != 3) {
      skip(line_no, "not \"0x<port GUID> 0x<min LID> 0x<max LID>\"");
      continue;
    }
    if (!parse_number(w[0], 16, guid)) {
      skip(line_no, "port GUID is not 0x and 1-16 hex digits");
      continue;
    }
    if (!parse_number(w[1], 4, lo) || !parse_number(w[2], 4, hi)) {
      skip(line_no, "LID is not 0x and 1-4 hex digits");
      continue;
    }
    pending = Guid2LidEntry{Guid{guid}, static_cast<std::uint16_t>(lo), static_cast<std::uint16_t>(hi)};
    if (auto why = guid2lid_entry_problem(pending); !why.empty()) {
      skip(line_no, to_string(pending.guid) + ": " + why);
      continue;
    }
    record_bad = false;
  }
  finish();
  return f;
}

}  // namespace smha::opensm
