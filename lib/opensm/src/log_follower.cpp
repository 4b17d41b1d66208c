// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/opensm/log_follower.hpp"

#include <array>
#include <utility>

namespace smha::opensm {

namespace {

// A log line's message (everything after OpenSM's " -> " prefix; a line
// without it, as on stdout or from syslog forwarding, is the message itself)
// and its time stamp (without " [thread] 0xNN").
std::pair<std::string_view, std::string_view> split_line(std::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  std::string_view stamp, msg = line;
  if (auto arrow = line.find(" -> "); arrow != std::string_view::npos) {
    msg = line.substr(arrow + 4);
    stamp = line.substr(0, arrow);
    if (auto bracket = stamp.find(" ["); bracket != std::string_view::npos) stamp = stamp.substr(0, bracket);
  }
  return {stamp, msg};
}

std::optional<std::string_view> sm_state_of(std::string_view msg) {
  constexpr std::string_view kHead = "Entering ", kTail = " state";
  if (!msg.starts_with(kHead) || !msg.ends_with(kTail)) return std::nullopt;
  msg = msg.substr(kHead.size(), msg.size() - kHead.size() - kTail.size());
  static constexpr std::array<std::string_view, 4> kStates = {"MASTER", "STANDBY", "DISCOVERING", "NOTACTIVE"};
  for (auto s : kStates)
    if (msg == s) return s;
  return std::nullopt;
}

// At most this much of a message is kept (a routing failure names an engine).
constexpr std::size_t kMaxEventText = 160;

}  // namespace

std::optional<LoggedSmState> parse_sm_state_line(std::string_view line) {
  auto [stamp, msg] = split_line(line);
  if (auto s = sm_state_of(msg)) return LoggedSmState{std::string(*s), std::string(stamp)};
  return std::nullopt;
}

// The messages, from OpenSM 3.3: osm_report_sm_state() (state),
// osm_state_mgr.c (SUBNET UP), osm_ucast_mgr.c ucast_mgr_route() ("%s: cannot
// build lid matrices", "%s: cannot build fwd tables") and
// osm_ucast_mgr_process() ("%s tables configured on all switches", "No routing
// engine able to successfully configure  switch tables on current fabric") and
// osm_sa.c, loading sa_db_file ("ERR 4C02: Can't open sa db file", "PARSE
// ERROR: ...", "cannot create MC group with mlid ...").
std::optional<LoggedEvent> parse_log_event(std::string_view line) {
  const auto parts = split_line(line);
  const std::string_view stamp = parts.first;
  std::string_view msg = parts.second;
  using K = LoggedEvent::Kind;
  auto make = [&](K k, std::string_view text) {
    return LoggedEvent{k, std::string(text.substr(0, kMaxEventText)), std::string(stamp)};
  };
  if (auto s = sm_state_of(msg)) return make(K::SmState, *s);
  if (msg == "SUBNET UP") return make(K::SubnetUp, "");
  constexpr std::string_view kRoute = "ucast_mgr_route: ", kCannot = ": cannot build ";
  if (msg.starts_with(kRoute) && msg.find(kCannot) != std::string_view::npos)
    return make(K::RoutingFailed, msg.substr(kRoute.size()));
  if (msg.find("No routing engine able") != std::string_view::npos) return make(K::RoutingFailed, "no routing engine could configure the switches");
  // osm_sa.c osm_sa_db_file_load() and load_mcgroup() (OSM_LOG puts the
  // function's name first).
  for (std::string_view prefix : {"osm_sa_db_file_load: ERR 4C02: ", "osm_sa_db_file_load: PARSE ERROR: ",
                                  "load_mcgroup: cannot create MC group with mlid "})
    if (msg.starts_with(prefix)) return make(K::SaRestoreFailed, msg.substr(msg.find(": ") + 2));
  constexpr std::string_view kDone = " tables configured on all switches";
  if (msg.ends_with(kDone)) {
    msg.remove_suffix(kDone.size());
    if (auto colon = msg.rfind(": "); colon != std::string_view::npos) msg.remove_prefix(colon + 2);
    if (!msg.empty() && msg.find(' ') == std::string_view::npos) return make(K::RoutingDone, msg);
  }
  return std::nullopt;
}

std::optional<std::int64_t> stamp_us(std::string_view stamp) {
  // "Mon DD HH:MM:SS UUUUUU"
  static constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                               "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  static constexpr std::array<int, 12> kDays = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (stamp.size() != 22 || stamp[3] != ' ' || stamp[6] != ' ' || stamp[9] != ':' || stamp[12] != ':' ||
      stamp[15] != ' ')
    return std::nullopt;
  int month = -1;
  for (std::size_t i = 0; i < kMonths.size(); ++i)
    if (stamp.substr(0, 3) == kMonths[i]) month = static_cast<int>(i);
  if (month < 0) return std::nullopt;
  auto number = [&](std::size_t at, std::size_t len) -> std::optional<std::int64_t> {
    std::int64_t v = 0;
    for (std::size_t i = at; i < at + len; ++i) {
      // OpenSM prints the day as %02d; a space-padded one (syslog style) is accepted too.
      if (stamp[i] == ' ' && i == at && len == 2) continue;
      if (stamp[i] < '0' || stamp[i] > '9') return std::nullopt;
      v = v * 10 + (stamp[i] - '0');
    }
    return v;
  };
  auto day = number(4, 2), h = number(7, 2), m = number(10, 2), sec = number(13, 2), us = number(16, 6);
  if (!day || !h || !m || !sec || !us || *day < 1 || *day > kDays[static_cast<std::size_t>(month)] || *h > 23 ||
      *m > 59 || *sec > 60)
    return std::nullopt;
  std::int64_t days = *day - 1;
  for (int i = 0; i < month; ++i) days += kDays[static_cast<std::size_t>(i)];
  return (((days * 24 + *h) * 60 + *m) * 60 + *sec) * 1'000'000 + *us;
}

OpensmLogFollower::OpensmLogFollower(const os::FileSystem& fs, std::string path, std::size_t max_read)
    : fs_(fs), path_(std::move(path)), max_read_(max_read == 0 ? 1 : max_read) {}

void OpensmLogFollower::skip_existing() {
  auto t = fs_.read_tail(path_, UINT64_MAX, 0);
  offset_ = t ? t->size : 0;
}

std::vector<LoggedEvent> OpensmLogFollower::poll() {
  std::vector<LoggedEvent> out;
  auto t = fs_.read_tail(path_, offset_, max_read_);
  if (!t) {
    last_error_ = t.error();
    return out;
  }
  last_error_.reset();
  if (t->size < offset_) {  // truncated or replaced: read the new file from its start
    ++restarts_;
    offset_ = 0;
  }
  const std::uint64_t start = t->size - t->text.size();
  std::string_view text = t->text;
  if (start > offset_) {  // a burst above max_read: its older part is skipped
    skipped_ += start - offset_;
    // The first line is cut unless the skipped part ended one.
    if (auto nl = text.find('\n'); nl != std::string_view::npos) {
      skipped_ += nl + 1;
      text.remove_prefix(nl + 1);
    } else {
      skipped_ += text.size();
      text = {};
    }
  }
  const std::uint64_t text_start = t->size - text.size();
  const auto last_nl = text.rfind('\n');
  if (last_nl == std::string_view::npos) {
    // No full line yet. A line longer than max_read never ends inside one read: skip it.
    if (t->text.size() >= max_read_) {
      skipped_ += text.size();
      offset_ = t->size;
    } else {
      offset_ = text_start;
    }
    return out;
  }
  offset_ = text_start + last_nl + 1;
  std::string_view lines = text.substr(0, last_nl + 1);
  while (!lines.empty()) {
    const auto nl = lines.find('\n');
    if (auto e = parse_log_event(lines.substr(0, nl))) out.push_back(std::move(*e));
    lines.remove_prefix(nl + 1);
  }
  return out;
}

}  // namespace smha::opensm
