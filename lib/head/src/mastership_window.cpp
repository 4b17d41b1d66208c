// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/head/mastership_window.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "smha/head/event_log.hpp"

namespace smha::head {

using nlohmann::json;

void ActCountRates::record(const SmInfo& info, TimePoint received, bool sample) {
  Track& t = sms_[info.guid.value];
  if (t.last && info.state == t.last->state && info.act_count >= t.last->act_count && received - t.last_at < kMinGap)
    return;  // the same round's other answer
  if (t.last && info.act_count < t.last->act_count) {
    t.rates.clear();  // its OpenSM restarted: ActCount starts over
  } else if (sample && t.last && t.last->state == SmState::Standby && info.state == SmState::Standby &&
             received > t.last_at) {
    if (t.rates.size() >= 64) t.rates.erase(t.rates.begin());
    t.rates.push_back((info.act_count - t.last->act_count) /
                      std::chrono::duration<double>(received - t.last_at).count());
  }
  t.last = info;
  t.last_at = received;
}

const ActCountRates::Track* ActCountRates::find(Guid g) const {
  auto it = sms_.find(g.value);
  return it == sms_.end() ? nullptr : &it->second;
}

MastershipWindow::MastershipWindow(Guid own, std::string own_name, std::vector<Head> peers, TimePoint start,
                                   ActCountRates rates)
    : own_(own), own_name_(std::move(own_name)), peers_(std::move(peers)), start_(start), rates_(std::move(rates)) {
  plan_.push_back(own_);
  leg_asked_.push_back(start_);
}

std::string MastershipWindow::name(Guid g) const {
  if (g == own_) return own_name_.empty() ? "this head (" + to_string(g) + ")" : own_name_ + " (this head)";
  for (const auto& p : peers_)
    if (p.guid == g) return p.name;
  return "SM " + to_string(g) + " (not a configured head)";
}

std::string MastershipWindow::at(TimePoint t) const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "+%.0f ms", std::chrono::duration<double, std::milli>(t - start_).count());
  return buf;
}

void MastershipWindow::fail(std::string why) {
  if (!violation_) violation_ = std::move(why);
}

void MastershipWindow::set_target(Guid target) {
  if (plan_.size() == 1 && target != plan_[0]) {
    plan_.push_back(target);
    leg_asked_.push_back(start_);
  }
}

void MastershipWindow::plan_pull(Guid master) {
  if (plan_.size() != 1 || master == own_) return;
  plan_ = {master, own_};
  leg_asked_ = {start_, start_};
  log_left_ = true;  // our OpenSM starts STANDBY: its one planned change is to MASTER
}

void MastershipWindow::plan_failback(TimePoint when) {
  if (plan_.size() == 2) {
    plan_.push_back(own_);
    leg_asked_.push_back(when);
  }
}

void MastershipWindow::master_seen(Guid who, TimePoint sent, TimePoint received, const std::string& how) {
  if (masters_.empty() || masters_.back()["guid"] != to_string(who))
    masters_.push_back({{"guid", to_string(who)}, {"name", name(who)}, {"at", at(received)}, {"via", how}});
  if (plan_.size() == 1 && who != own_) set_target(who);  // no target named: the first new master
  if (holder_ + 1 < plan_.size() && who == plan_[holder_ + 1]) {
    ++holder_;
    holder_seen_ = received;
    return;
  }
  if (who == plan_[holder_]) {
    if (!holder_seen_) holder_seen_ = received;
    return;
  }
  const bool planned_earlier =
      std::find(plan_.begin(), plan_.begin() + static_cast<std::ptrdiff_t>(holder_), who) !=
      plan_.begin() + static_cast<std::ptrdiff_t>(holder_);
  if (planned_earlier) {
    // Only when the query left after the new master's answer came back is the
    // order certain (the answers of one round race each other).
    if (holder_seen_ && sent > *holder_seen_)
      fail("flip-back: " + name(who) + " was MASTER again at " + at(received) + " (" + how + ") after " +
           name(plan_[holder_]) + " had taken over at " + at(*holder_seen_));
    return;
  }
  fail(name(who) + " was MASTER at " + at(received) + " (" + how + "); the planned master then was " +
       name(plan_[holder_]) + (plan_.size() > holder_ + 1 ? " or " + name(plan_[holder_ + 1]) : std::string()));
}

void MastershipWindow::not_master_seen(Guid who, TimePoint sent, TimePoint received, const std::string& how) {
  // This head leaving MASTER is the first leg, asked for when the window opened.
  if (holder_ == 0 || who != plan_[holder_] || !holder_seen_ || sent <= *holder_seen_) return;
  // Leaving is expected once the next leg was asked for (before the query left).
  if (holder_ + 1 < plan_.size() && leg_asked_[holder_ + 1] <= received) return;
  fail(name(who) + " left MASTER at " + at(received) + " (" + how + ") before " +
       (holder_ + 1 < plan_.size() ? "its leg ended" : std::string("the window ended")) +
       ": mastership moved on its own");
}

void MastershipWindow::check_sweep(const SmInfo& info, TimePoint received, const std::string& via) {
  const ActCountRates::Track* t = rates_.find(info.guid);
  if (t && t->last && info.state == t->last->state && info.act_count >= t->last->act_count &&
      received - t->last_at < ActCountRates::kMinGap)
    return;  // the same round's other answer: judged with the next gap
  if (!t || !t->last || t->last->state != SmState::Standby || info.state != SmState::Standby ||
      received <= t->last_at || info.act_count < t->last->act_count || t->rates.size() < kRateSamples) {
    rates_.record(info, received);
    return;
  }
  const double gap_s = std::chrono::duration<double>(received - t->last_at).count();
  const std::uint32_t rise = info.act_count - t->last->act_count;
  std::vector<double> r = t->rates;
  std::nth_element(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(r.size() / 2), r.end());
  const double limit = 2 * r[r.size() / 2] * gap_s + kSweepSlack;
  if (rise <= limit) {
    rates_.record(info, received);
    return;
  }
  rates_.record(info, received, false);  // a sweep is no rate sample
  sweeps_.push_back({{"guid", to_string(info.guid)}, {"name", name(info.guid)}, {"at", at(received)},
                     {"act_count_rise", rise}, {"limit", std::lround(limit)}});
  fail(name(info.guid) + " swept between two STANDBY answers (ActCount +" + std::to_string(rise) + " in " +
       std::to_string(std::lround(gap_s * 1000)) + " ms, its own rate allows " + std::to_string(std::lround(limit)) +
       "; " + via + " at " + at(received) + "): it was MASTER or DISCOVERING in between");
}

void MastershipWindow::sminfo(const SmInfo& info, TimePoint sent, TimePoint received, const std::string& via) {
  ++answers_;
  const std::string how = "SMInfo " + via + " answered " + std::string(to_string(info.state));
  if (info.state == SmState::Master) master_seen(info.guid, sent, received, how);
  else not_master_seen(info.guid, sent, received, how);
  check_sweep(info, received, via);
}

void MastershipWindow::local_port(Lid own_lid, Lid master_sm_lid, TimePoint sent, TimePoint received) {
  ++port_samples_;
  if (own_lid.value != 0) own_lid_ = own_lid;
  if (master_sm_lid.value == 0) return;
  const bool changed = port_master_ && *port_master_ != master_sm_lid;
  // The sweep that wrote the new value came after the previous sample was
  // asked for: that is the earliest it can have happened.
  const TimePoint earliest = port_sample_sent_;
  port_master_ = master_sm_lid;
  port_sample_sent_ = sent;
  if (!changed) return;  // the first sample names whoever swept last, maybe before the window
  std::optional<Guid> who;
  if (own_lid_ && *own_lid_ == master_sm_lid) who = own_;
  for (const auto& p : peers_)
    if (p.lid && *p.lid == master_sm_lid) who = p.guid;
  const std::string how = "our port's MasterSMLID changed to " + std::to_string(master_sm_lid.value);
  if (!who) {
    fail("an SM at LID " + std::to_string(master_sm_lid.value) + " that is not a configured head swept our port as MASTER (" +
         how + " at " + at(received) + ")");
    return;
  }
  master_seen(*who, earliest, received, how);
}

void MastershipWindow::event(const EventRecord& e) {
  if (e.type == EventType::Alarm && e.alarm == AlarmKind::TwoMasters) fail("two MASTERs seen: " + e.evidence);
  if (e.type == EventType::Transition) {
    // The engine's own view of the local SM, stamped at the end of its round.
    if (e.to == SmState::Master) master_seen(own_, e.at, e.at, "this head's transition " + e.reason);
    else if (e.from == SmState::Master && e.to) not_master_seen(own_, e.at, e.at, "this head's transition " + e.reason);
  }
  if (e.type == EventType::OpensmState) {
    // OpenSM's own log of this head: read once per poll interval, so a line may
    // arrive a leg late; its order is what counts. Over the window: MASTER,
    // left once, and MASTER once more only after the failback was asked for.
    const bool to_master = e.to == SmState::Master;
    // This head's MASTER again is planned after a failback was asked for, or
    // in a pull (a plan that does not start with this head).
    const bool failback = plan_.size() == 3 || plan_[0] != own_;
    if (!to_master && !log_left_) {
      log_left_ = true;
    } else if (to_master && log_left_ && !log_regained_) {
      if (!failback)
        fail("flip-back: this head's OpenSM was MASTER again after it had handed over (" + e.evidence + ")");
      log_regained_ = true;
    } else if (!to_master && log_regained_) {
      fail("this head's OpenSM left MASTER again after regaining it (" + e.evidence + ")");
    } else if (to_master && log_regained_) {
      fail("this head's OpenSM entered MASTER twice (" + e.evidence + ")");
    }
  }
}

json MastershipWindow::summary() const {
  json plan = json::array();
  for (const auto& g : plan_) plan.push_back(name(g));
  // Each SM's ActCount as last seen and its median rate as STANDBY (per second).
  json act = json::object();
  for (const auto& [g, t] : rates_.all()) {
    if (!t.last) continue;
    std::vector<double> r = t.rates;
    double median = 0;
    if (!r.empty()) {
      std::nth_element(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(r.size() / 2), r.end());
      median = r[r.size() / 2];
    }
    act[name(Guid{g})] = {{"act_count", t.last->act_count}, {"state", std::string(to_string(t.last->state))},
                          {"standby_rate_per_s", std::lround(median)}, {"rate_samples", t.rates.size()}};
  }
  return json{{"plan", plan},
              {"masters_seen", masters_},
              {"sweeps", sweeps_},
              {"act_counts", act},
              {"sminfo_answers", answers_},
              {"port_samples", port_samples_}};
}

}  // namespace smha::head
