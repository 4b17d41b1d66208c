// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/opensm/log_follower.hpp"

#include <array>

namespace smha::opensm {

std::optional<LoggedSmState> parse_sm_state_line(std::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  constexpr std::string_view kHead = "Entering ", kTail = " state";
  // The message is everything after OpenSM's " -> " prefix; a line without it
  // (stdout, syslog forwarding) is the message itself.
  std::string_view stamp, msg = line;
  if (auto arrow = line.find(" -> "); arrow != std::string_view::npos) {
    msg = line.substr(arrow + 4);
    stamp = line.substr(0, arrow);
    // Drop " [thread] 0xNN" after the time stamp.
    if (auto bracket = stamp.find(" ["); bracket != std::string_view::npos) stamp = stamp.substr(0, bracket);
  }
  if (!msg.starts_with(kHead) || !msg.ends_with(kTail)) return std::nullopt;
  msg = msg.substr(kHead.size(), msg.size() - kHead.size() - kTail.size());
  static constexpr std::array<std::string_view, 4> kStates = {"MASTER", "STANDBY", "DISCOVERING", "NOTACTIVE"};
  for (auto s : kStates)
    if (msg == s) return LoggedSmState{std::string(s), std::string(stamp)};
  return std::nullopt;
}

OpensmLogFollower::OpensmLogFollower(const os::FileSystem& fs, std::string path, std::size_t max_read)
    : fs_(fs), path_(std::move(path)), max_read_(max_read == 0 ? 1 : max_read) {}

void OpensmLogFollower::skip_existing() {
  auto t = fs_.read_tail(path_, UINT64_MAX, 0);
  offset_ = t ? t->size : 0;
}

std::vector<LoggedSmState> OpensmLogFollower::poll() {
  std::vector<LoggedSmState> out;
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
    if (auto s = parse_sm_state_line(lines.substr(0, nl))) out.push_back(std::move(*s));
    lines.remove_prefix(nl + 1);
  }
  return out;
}

}  // namespace smha::opensm
