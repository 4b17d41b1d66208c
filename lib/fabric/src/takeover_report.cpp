// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/fabric/takeover_report.hpp"

#include <algorithm>
#include <cstdio>

namespace smha::fabric {

std::string_view to_string(TakeoverReport::Kind k) {
  return k == TakeoverReport::Kind::Handover ? "handover" : "takeover";
}

std::optional<TakeoverReport::Kind> report_kind_named(std::string_view name) {
  if (name == "takeover") return TakeoverReport::Kind::Takeover;
  if (name == "handover") return TakeoverReport::Kind::Handover;
  return std::nullopt;
}

namespace {

std::string ms_text(Duration d) {
  char buf[32];
  const double ms = std::chrono::duration<double, std::milli>(d).count();
  std::snprintf(buf, sizeof buf, ms < 10 ? "%.1f ms" : "%.0f ms", ms);
  return buf;
}

}  // namespace

std::string sa_restore_text(const TakeoverReport& r) {
  if (!r.sa_copy) return "SA database not restored (no copy from the master)";
  const SaCopyInfo& c = *r.sa_copy;
  // ERR 4C02: OpenSM could not open the file and restored nothing; any other
  // load error stops the load at that line, after what came before it.
  const bool none = r.sa_restore_error.starts_with("ERR 4C02");
  std::string s = none                         ? "SA database not restored"
                  : !c.current                 ? "SA database restored from a stale copy"
                  : r.sa_restore_error.empty() ? "SA database restored"
                                               : "SA database restored in part";
  s += std::string(none ? ": OpenSM could not read" : !c.current ? ":" : " from") + " generation " + std::to_string(c.generation) + " of " + (c.sender.empty() ? "?" : c.sender);
  auto secs = [](double d) { return std::to_string(static_cast<long long>(d)) + " s"; };
  if (c.content_age_s && c.age_s)
    s += " (content " + secs(*c.content_age_s) + " old, last confirmed " + secs(*c.age_s) + " before)";
  else if (c.age_s)
    s += " (" + secs(*c.age_s) + " old)";
  if (!c.current) {
    s += " (" + c.stale;
    if (c.missed_s) s += "; the old master's SA changed " + secs(*c.missed_s) + " after the copy's content";
    if (c.lost)
      s += "; lost at least " + std::to_string(c.lost->groups) + " groups, " + std::to_string(c.lost->members) +
           " members, " + std::to_string(c.lost->services) + " ServiceRecords, " + std::to_string(c.lost->informs) +
           " subscriptions";
    s += ")";
  }
  if (!r.sa_restore_error.empty()) s += " (OpenSM: " + r.sa_restore_error + ")";
  if (r.groups_checked)
    s += ": groups kept their MLID " + std::to_string(r.groups_kept) + " of " + std::to_string(*r.groups_checked);
  return s;
}

bool sa_restored(const TakeoverReport& r) { return r.sa_copy && r.sa_copy->current && r.sa_restore_error.empty(); }

std::string summary(const TakeoverReport& r) {
  std::string s(to_string(r.kind));
  s += r.previous_master ? " from " + to_string(*r.previous_master) : std::string(" (no previous master seen)");
  std::string parts;
  auto add = [&](const std::string& p) { parts += (parts.empty() ? "" : ", ") + p; };
  if (r.detection) add("detected in " + ms_text(*r.detection));
  if (r.to_master) add("MASTER after " + ms_text(*r.to_master));
  if (r.discovering_to_master) add("DISCOVERING to MASTER in " + ms_text(*r.discovering_to_master));
  if (r.master_to_subnet_up) add("SUBNET UP " + ms_text(*r.master_to_subnet_up) + " after MASTER");
  if (!parts.empty()) s += ": " + parts;
  if (!r.routing_engine.empty()) {
    s += "; routing " + r.routing_engine;
    if (r.routing_fallback) {
      s += " (fell back";
      if (!r.routing_failures.empty()) s += ": " + r.routing_failures.front();
      s += ")";
    }
  }
  if (r.ports_compared)
    s += "; LIDs changed " + std::to_string(r.lids_changed) + " of " + std::to_string(*r.ports_compared);
  if (r.ports_sampled)
    s += "; " + std::to_string(r.ports_on_new_master) + " of " + std::to_string(*r.ports_sampled) +
         " active ports point at the new master";
  if (r.lft_entries_compared)
    s += "; LFT entries changed " + std::to_string(r.lft_entries_changed) + " of " +
         std::to_string(*r.lft_entries_compared);
  if (r.sa_after_master) {
    s += "; SA answering " + ms_text(*r.sa_after_master) + " after MASTER";
    if (r.sa_outage) s += " (" + ms_text(*r.sa_outage) + " after the old master's last answer)";
  }
  s += "; " + sa_restore_text(r);
  if (!r.incomplete.empty()) s += "; incomplete: " + r.incomplete;
  return s;
}

TakeoverReporter::TakeoverReporter(std::vector<std::string> configured_engines, Duration deadline)
    : engines_(std::move(configured_engines)), deadline_(deadline) {}

void TakeoverReporter::master_seen(Guid guid, TimePoint at) {
  if (guid == own_) return;
  last_master_ = guid;
  last_master_at_ = std::max(last_master_at_, at);
}

void TakeoverReporter::on_event(const sm::RecordEvent& e, TimePoint now) {
  using K = sm::EventKind;
  switch (e.kind) {
    case K::TakeoverStarted:
      if (!master_ && !takeover_at_) {
        takeover_at_ = now;
        takeover_cause_ = e.reason;
      }
      return;
    case K::TakeoverAborted:
      takeover_at_.reset();
      return;
    case K::StateChanged:
      break;
    default:
      return;
  }
  if (e.to == SmState::Master && !master_) {
    master_ = true;
    // Without a takeover the engine started, a STANDBY that became MASTER
    // while another SM was master took it over (a handover), and any other
    // state that became MASTER after the last master stopped answering MASTER
    // took over from it (smhad was starting: the engine had not yet seen our
    // SM STANDBY when the lost master's smhad sent it DISCOVER). A cold start
    // (DISCOVERING -> MASTER with no master seen, or beside another SM doing
    // the same: two masters in one round) and smhad started beside its own
    // MASTER are neither: nothing to report.
    const bool lost = last_master_ && last_master_at_ < round_at_;
    const bool unasked = !takeover_at_ && e.from != SmState::Standby && lost;
    if (!takeover_at_ && !unasked && (!last_master_ || e.from != SmState::Standby)) return;
    TakeoverReport r;
    r.kind = takeover_at_ || unasked ? TakeoverReport::Kind::Takeover : TakeoverReport::Kind::Handover;
    r.previous_master = last_master_;
    if (takeover_at_) {
      r.cause = takeover_cause_;
      if (last_master_ && *takeover_at_ >= last_master_at_) r.detection = *takeover_at_ - last_master_at_;
      r.to_master = now - *takeover_at_;
    } else if (now >= last_master_at_) {
      // The old master's last MASTER answer -> ours.
      if (unasked)
        r.cause = "master lost: local SM went " + std::string(to_string(e.from.value_or(SmState::NotActive))) +
                  "->MASTER without our DISCOVER";
      r.to_master = now - last_master_at_;
    }
    groups_to_check_.clear();
    if (sa_copy_source_) r.sa_copy = sa_copy_source_();
    if (r.sa_copy) {
      groups_to_check_ = std::move(r.sa_copy->checkable);
      r.sa_copy->checkable.clear();
    }
    pending_ = std::move(r);
    master_at_ = now;
    subnet_up_ = false;
    walk_started_ = false;
    walk_done_ = false;
    group_check_started_ = false;
    groups_done_ = groups_to_check_.empty();
    take_log();
    maybe_finish();
  } else if (e.to && e.to != SmState::Master && master_) {
    master_ = false;
    takeover_at_.reset();
    last_master_.reset();
    if (pending_) finish("our SM left MASTER before the report was complete");
  }
}

void TakeoverReporter::on_opensm_log(const opensm::LoggedEvent& e, TimePoint now) {
  using K = opensm::LoggedEvent::Kind;
  if (e.kind == K::SmState) {
    const auto us = opensm::stamp_us(e.stamp);
    if (e.text == "MASTER") {
      log_ = LoggedMastership{};
      log_->master_us = us;
      log_->master_at = now;
      if (us && discovering_us_ && *us >= *discovering_us_)
        log_->from_discovering = std::chrono::duration_cast<Duration>(std::chrono::microseconds(*us - *discovering_us_));
      else if (!us && !discovering_us_ && discovering_at_)
        log_->from_discovering = now - *discovering_at_;
      discovering_us_.reset();
      discovering_at_.reset();
      take_log();
    } else {
      log_.reset();
      discovering_us_ = e.text == "DISCOVERING" ? us : std::nullopt;
      discovering_at_ = e.text == "DISCOVERING" ? std::optional<TimePoint>(now) : std::nullopt;
    }
    return;
  }
  if (!log_ || log_->subnet_up) return;  // only the first master sweep's lines
  switch (e.kind) {
    case K::RoutingFailed:
      if (log_->failures.size() < kReportRoutingFailures) log_->failures.push_back(e.text);
      break;
    case K::RoutingDone:
      log_->engine = e.text;
      break;
    case K::SaRestoreFailed:
      if (log_->sa_restore_error.empty()) log_->sa_restore_error = e.text;
      break;
    case K::SubnetUp: {
      log_->subnet_up = true;
      const auto up_us = opensm::stamp_us(e.stamp);
      if (log_->master_us && up_us && *up_us >= *log_->master_us)
        log_->to_subnet_up = std::chrono::duration_cast<Duration>(std::chrono::microseconds(*up_us - *log_->master_us));
      else if (!log_->master_us && !up_us)
        log_->to_subnet_up = now - log_->master_at;
      break;
    }
    case K::SmState:
      break;
  }
  take_log();
  maybe_finish();
}

// The log of the mastership being reported, once it says SUBNET UP.
void TakeoverReporter::take_log() {
  if (!pending_ || !log_) return;
  if (!pending_->discovering_to_master) pending_->discovering_to_master = log_->from_discovering;
  if (subnet_up_ || !log_->subnet_up) return;
  subnet_up_ = true;
  pending_->master_to_subnet_up = log_->to_subnet_up;
  pending_->routing_engine = log_->engine;
  pending_->routing_failures = log_->failures;
  pending_->sa_restore_error = log_->sa_restore_error;
  const std::string first = engines_.empty() ? std::string("minhop") : engines_.front();
  pending_->routing_fallback = !log_->failures.empty() || (!log_->engine.empty() && log_->engine != first);
}

void TakeoverReporter::on_walk(const DiscoveryResult& r, TimePoint) {
  const bool reporting = pending_ && walk_started_ && !walk_done_;
  if (reporting) {
    TakeoverReport& p = *pending_;
    for (const auto& port : r.probed)
      if (port.port_guid == own_) p.master_lid = port.lid;
    std::size_t compared = 0, sampled = 0;
    for (const auto& port : r.probed) {
      if (port.lid.value == 0) continue;
      if (auto it = lids_.find(port.port_guid); it != lids_.end()) {
        ++compared;
        if (it->second != port.lid) {
          ++p.lids_changed;
          if (p.lid_changed_ports.size() < kReportPortsNamed) p.lid_changed_ports.push_back(port.port_guid);
        }
      }
      if (port.state != mad::PortState::Active || p.master_lid.value == 0) continue;
      ++sampled;
      if (port.master_sm_lid == p.master_lid) {
        ++p.ports_on_new_master;
      } else if (p.ports_elsewhere.size() < kReportPortsNamed) {
        p.ports_elsewhere.push_back(port.port_guid);
      }
    }
    if (!lids_.empty()) p.ports_compared = compared;
    if (p.master_lid.value != 0) p.ports_sampled = sampled;
    // Every LID either table holds; one the shorter does not hold reads 255.
    std::size_t entries = 0;
    bool any = false;
    for (const auto& [sw, lft] : r.lfts) {
      const auto before = lfts_.find(sw);
      if (!lft.complete() || before == lfts_.end()) continue;
      any = true;
      const auto& old = before->second;
      const std::size_t n = std::max(old.size(), lft.ports.size());
      std::size_t changed = 0;
      for (std::size_t lid = 1; lid < n; ++lid) {
        const std::uint8_t a = lid < old.size() ? old[lid] : 0xff, b = lid < lft.ports.size() ? lft.ports[lid] : 0xff;
        ++entries;
        if (a != b) ++changed;
      }
      p.lft_entries_changed += changed;
      if (changed != 0 && p.lft_changed_switches.size() < kReportPortsNamed) p.lft_changed_switches.push_back(sw);
    }
    if (any) p.lft_entries_compared = entries;
    walk_done_ = true;
  }
  for (const auto& port : r.probed)
    if (port.lid.value != 0) lids_[port.port_guid] = port.lid;
  for (const auto& [sw, lft] : r.lfts)
    if (lft.complete()) lfts_[sw] = lft.ports;
  if (reporting) maybe_finish();
}

void TakeoverReporter::on_sa_answer(TimePoint at) {
  if (!wants_sa_answer()) return;
  pending_->sa_after_master = at >= master_at_ ? at - master_at_ : Duration{};
  if (pending_->previous_master && at >= last_master_at_) pending_->sa_outage = at - last_master_at_;
  maybe_finish();
}

std::vector<SaCopyInfo::Group> TakeoverReporter::take_group_check() {
  // After our SA answered (without the probe: after SUBNET UP).
  const bool sa_up = sa_probe_ ? pending_ && pending_->sa_after_master.has_value() : subnet_up_;
  if (!pending_ || group_check_started_ || groups_done_ || !sa_up) return {};
  group_check_started_ = true;
  return std::move(groups_to_check_);
}

void TakeoverReporter::on_groups_checked(std::size_t checked, std::size_t kept, std::vector<std::string> lost) {
  if (!pending_ || !group_check_started_ || groups_done_) return;
  groups_done_ = true;
  pending_->groups_checked = checked;
  pending_->groups_kept = kept;
  if (lost.size() > kReportGroupsNamed) lost.resize(kReportGroupsNamed);
  pending_->groups_lost = std::move(lost);
  maybe_finish();
}

bool TakeoverReporter::wants_walk(TimePoint now) const {
  if (!pending_ || !walks_ || walk_started_) return false;
  return subnet_up_ || (!log_followed_ && now >= master_at_ + kWalkWithoutLog);
}

std::optional<TimePoint> TakeoverReporter::next_wakeup() const {
  if (!pending_) return std::nullopt;
  if (walks_ && !walk_started_ && !log_followed_ && !subnet_up_)
    return std::min(master_at_ + kWalkWithoutLog, master_at_ + deadline_);
  return master_at_ + deadline_;
}

void TakeoverReporter::tick(TimePoint now) {
  if (!pending_ || now < master_at_ + deadline_) return;
  std::string missing;
  auto add = [&](const std::string& m) { missing += (missing.empty() ? "" : ", ") + m; };
  if (!subnet_up_) add(log_followed_ ? "SUBNET UP not logged" : "OpenSM's log not followed");
  if (walks_ && !walk_done_) add(walk_started_ ? "the census walk did not end" : "no census walk");
  if (sa_probe_ && !pending_->sa_after_master) add("our SA did not answer");
  else if (!groups_done_) add("the SA copy's groups were not all checked");
  finish(missing + " within " + std::to_string(std::chrono::duration_cast<seconds>(deadline_).count()) + " s");
}

void TakeoverReporter::maybe_finish() {
  if (!pending_) return;
  const bool walked = (!walks_ || walk_done_) && (!sa_probe_ || pending_->sa_after_master) && groups_done_;
  if (subnet_up_ && walked) {
    finish("");
  } else if (!log_followed_ && walked && walk_started_) {
    finish("OpenSM's log not followed: no SUBNET UP or routing figures");
  }
}

void TakeoverReporter::finish(std::string incomplete) {
  if (!pending_) return;
  TakeoverReport r = std::move(*pending_);
  pending_.reset();
  if (!walks_ && incomplete.empty()) incomplete = "census disabled: no LID or MasterSMLID figures";
  r.incomplete = std::move(incomplete);
  last_ = r;
  if (emit_) emit_(r);
}

}  // namespace smha::fabric
