// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/head/event_journal.hpp"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <iomanip>
#include <sstream>

#include <fmt/chrono.h>
#include <nlohmann/json.hpp>

#include "smha/core/text.hpp"
#include "smha/head/takeover_report_json.hpp"

namespace smha::head {

namespace {


std::string cut(const std::string& s) {
  if (s.size() <= kMaxFieldBytes) return s;
  std::string out = s.substr(0, kMaxFieldBytes);
  // Do not leave half a UTF-8 sequence at the end.
  while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
  if (!out.empty() && (static_cast<unsigned char>(out.back()) & 0x80)) out.pop_back();
  return out + "...";
}

}  // namespace

std::string format_utc(std::chrono::system_clock::time_point t) {
  const auto secs = std::chrono::floor<std::chrono::seconds>(t);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - secs).count();
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03}Z", fmt::gmtime(std::chrono::system_clock::to_time_t(secs)), ms);
}

std::optional<std::chrono::system_clock::time_point> parse_utc(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS.mmmZ
  if (text.size() != 24 || text[4] != '-' || text[7] != '-' || text[10] != 'T' || text[13] != ':' ||
      text[16] != ':' || text[19] != '.' || text[23] != 'Z')
    return std::nullopt;
  auto num = [&](std::size_t at, std::size_t len) -> std::optional<int> {
    int v = 0;
    for (std::size_t i = at; i < at + len; ++i) {
      if (text[i] < '0' || text[i] > '9') return std::nullopt;
      v = v * 10 + (text[i] - '0');
    }
    return v;
  };
  auto y = num(0, 4), mo = num(5, 2), d = num(8, 2), h = num(11, 2), mi = num(14, 2), s = num(17, 2),
       ms = num(20, 3);
  if (!y || !mo || !d || !h || !mi || !s || !ms) return std::nullopt;
  if (*mo < 1 || *mo > 12 || *d < 1 || *d > 31 || *h > 23 || *mi > 59 || *s > 60) return std::nullopt;
  std::tm tm{};
  tm.tm_year = *y - 1900;
  tm.tm_mon = *mo - 1;
  tm.tm_mday = *d;
  tm.tm_hour = *h;
  tm.tm_min = *mi;
  tm.tm_sec = *s;
  const std::time_t tt = ::timegm(&tm);
  return std::chrono::system_clock::from_time_t(tt) + std::chrono::milliseconds(*ms);
}

nlohmann::json event_nodes_json(const std::vector<EventNode>& nodes, bool for_people) {
  auto text = [&](const std::string& t) -> nlohmann::json {
    if (t.empty()) return nullptr;
    return for_people ? printable(t) : t.substr(0, kMaxNodeTextBytes);
  };
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t i = 0; i < nodes.size() && i < kMaxEventNodes; ++i)
    out.push_back({{"name", text(nodes[i].name)},
                   {"guid", to_string(nodes[i].guid)},
                   {"node_description", text(nodes[i].description)}});
  return out;
}

void add_event_state_fields(nlohmann::json& j, const EventRecord& e) {
  if (e.from) j["from"] = std::string(to_string(*e.from));
  if (e.to) j["to"] = std::string(to_string(*e.to));
  if (e.preempt) j["preempt"] = true;
}

std::string encode_event_line(const EventRecord& e) {
  nlohmann::json j{{"seq", e.seq},
                   {"time", format_utc(e.wall)},
                   {"kind", e.kind},
                   {"reason", cut(e.reason)},
                   {"evidence", cut(e.evidence)}};
  add_event_state_fields(j, e);
  if (!e.nodes.empty()) j["nodes"] = event_nodes_json(e.nodes, false);
  if (e.report) j["report"] = takeover_report_json(*e.report);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<EventRecord> decode_event_line(std::string_view line) {
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  auto str = [&](const char* k) -> const nlohmann::json* {
    auto it = j.find(k);
    return (it != j.end() && it->is_string()) ? &*it : nullptr;
  };
  auto seq = j.find("seq");
  if (seq == j.end() || !seq->is_number_unsigned() || !str("time") || !str("kind") || !str("reason") ||
      !str("evidence"))
    return std::nullopt;
  auto wall = parse_utc(str("time")->get<std::string>());
  if (!wall || seq->get<std::uint64_t>() == 0 || seq->get<std::uint64_t>() > kMaxEventSeq) return std::nullopt;
  EventRecord e;
  e.seq = seq->get<std::uint64_t>();
  e.wall = *wall;
  e.kind = str("kind")->get<std::string>();
  e.reason = str("reason")->get<std::string>();
  e.evidence = str("evidence")->get<std::string>();
  set_type_from_kind(e);
  // The typed states of a transition (older smhad wrote none: unset).
  if (const auto* from = str("from")) e.from = sm_state_named(from->get<std::string>());
  if (const auto* to = str("to")) e.to = sm_state_named(to->get<std::string>());
  if (auto p = j.find("preempt"); p != j.end() && p->is_boolean()) e.preempt = p->get<bool>();
  // A report that does not parse is left out, the event kept.
  if (auto r = j.find("report"); r != j.end() && e.type == EventType::TakeoverReport)
    e.report = takeover_report_from_json(*r);
  // Nodes are a courtesy: a malformed entry is left out, the event kept.
  if (auto nodes = j.find("nodes"); nodes != j.end() && nodes->is_array()) {
    for (const auto& n : *nodes) {
      if (e.nodes.size() >= kMaxEventNodes) break;
      if (!n.is_object()) continue;
      auto g = n.find("guid");
      const auto guid = g != n.end() && g->is_string() ? parse_guid(g->get<std::string>()) : std::nullopt;
      if (!guid) continue;
      auto text = [&](const char* k) {
        auto it = n.find(k);
        return it != n.end() && it->is_string() ? it->get<std::string>().substr(0, kMaxNodeTextBytes)
                                                : std::string();
      };
      e.nodes.push_back(EventNode{text("name"), *guid, text("node_description")});
    }
  }
  return e;
}

EventJournal::EventJournal(os::FileSystem& fs, std::string path, std::size_t keep)
    : fs_(fs), path_(std::move(path)), keep_(keep) {}

Result<EventJournal::Loaded> EventJournal::load() {
  Loaded out;
  tail_.clear();
  lines_ = 0;
  cut_line_ = false;
  auto tail = fs_.read_tail(path_, 0, kMaxJournalReadBytes);
  if (!tail.ok()) {
    if (tail.error().code == Errc::NotFound) return out;
    return Error{Errc::Io, "event journal: " + tail.error().message};
  }
  const std::string& all = tail->text;
  const bool cut_start = tail->size > all.size();
  std::size_t at = 0;
  if (cut_start) {
    // The first line read is most likely a part of one; skip to the next.
    const auto nl = all.find('\n');
    at = nl == std::string::npos ? all.size() : nl + 1;
    ++out.skipped;
  }
  std::uint64_t last_seq = 0;
  while (at < all.size()) {
    auto nl = all.find('\n', at);
    const std::size_t end = nl == std::string::npos ? all.size() : nl;
    const std::string_view line(all.data() + at, end - at);
    at = end + 1;
    ++lines_;
    auto e = decode_event_line(line);
    // Sequence numbers only grow; a line that goes back is not trusted.
    if (!e || e->seq <= last_seq) {
      ++out.skipped;
      continue;
    }
    last_seq = e->seq;
    tail_.push_back(std::move(*e));
    if (tail_.size() > keep_) tail_.pop_front();
  }
  cut_line_ = !all.empty() && all.back() != '\n';
  // A file larger than what was read is rewritten with the newest events first thing.
  if (cut_start) lines_ = 2 * keep_;
  out.events.assign(tail_.begin(), tail_.end());
  return out;
}

Status EventJournal::append(const EventRecord& e) {
  tail_.push_back(e);
  if (tail_.size() > keep_) tail_.pop_front();
  if (lines_ + 1 >= 2 * keep_) return compact();
  const std::string line = (cut_line_ ? "\n" : "") + encode_event_line(e) + "\n";
  std::size_t done = 0;
  if (auto st = fs_.append(path_, line, 0640, &done); !st.ok()) {
    // A part of the line is on disk (ENOSPC, EFBIG): the next one starts afresh.
    if (done > 0) cut_line_ = true;
    return Error{Errc::Io, "event journal: " + st.error().message};
  }
  cut_line_ = false;
  ++lines_;
  return Status::Ok();
}

Status EventJournal::compact() {
  std::string text;
  for (const auto& e : tail_) text += encode_event_line(e) + "\n";
  if (auto st = fs_.write_atomic(path_, text, 0640); !st.ok()) return st;
  cut_line_ = false;
  lines_ = tail_.size();
  return Status::Ok();
}

}  // namespace smha::head
