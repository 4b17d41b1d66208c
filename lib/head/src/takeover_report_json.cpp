// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/head/takeover_report_json.hpp"

#include <chrono>
#include <cmath>

namespace smha::head {

using nlohmann::json;
using fabric::TakeoverReport;

namespace {

constexpr std::size_t kMaxText = 160;

json ms(const std::optional<Duration>& d) {
  if (!d) return nullptr;
  return std::round(std::chrono::duration<double, std::milli>(*d).count() * 10) / 10;  // 0.1 ms
}

json guids(const std::vector<Guid>& v) {
  json a = json::array();
  for (Guid g : v) a.push_back(to_string(g));
  return a;
}

std::optional<Duration> ms_from(const json& j, const char* key, bool& ok) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  // At most a day: a report's figures are milliseconds to seconds.
  if (!it->is_number() || it->get<double>() < 0 || it->get<double>() > 86'400'000.0) {
    ok = false;
    return std::nullopt;
  }
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double, std::milli>(it->get<double>()));
}

std::optional<std::size_t> count_from(const json& j, const char* key, bool& ok) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_unsigned() || it->get<std::uint64_t>() > 1'000'000'000) {
    ok = false;
    return std::nullopt;
  }
  return static_cast<std::size_t>(it->get<std::uint64_t>());
}

// The array at `key`: nullptr when absent, and when not an array (then ok = false).
const json* array_at(const json& j, const char* key, bool& ok) {
  auto it = j.find(key);
  if (it == j.end()) return nullptr;
  if (!it->is_array()) {
    ok = false;
    return nullptr;
  }
  return &*it;
}

std::vector<Guid> guids_from(const json& j, const char* key, bool& ok) {
  std::vector<Guid> out;
  const json* list = array_at(j, key, ok);
  if (!list) return out;
  for (const auto& g : *list) {
    if (out.size() >= fabric::kReportPortsNamed) break;
    auto guid = g.is_string() ? parse_guid(g.get<std::string>()) : std::nullopt;
    if (!guid) {
      ok = false;
      return {};
    }
    out.push_back(*guid);
  }
  return out;
}

std::string text_from(const json& j, const char* key, bool& ok) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  if (!it->is_string()) {
    ok = false;
    return {};
  }
  return it->get<std::string>().substr(0, kMaxText);
}

// A list of texts, the first `keep` kept, each cut to kMaxText.
std::vector<std::string> texts_from(const json& j, const char* key, std::size_t keep, bool& ok) {
  std::vector<std::string> out;
  const json* list = array_at(j, key, ok);
  if (!list) return out;
  for (const auto& t : *list) {
    if (!t.is_string()) ok = false;
    else if (out.size() < keep) out.push_back(t.get<std::string>().substr(0, kMaxText));
  }
  return out;
}

const json& object_at(const json& j, const char* key, bool& ok) {
  static const json kEmpty = json::object();
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return kEmpty;
  if (!it->is_object()) {
    ok = false;
    return kEmpty;
  }
  return *it;
}

}  // namespace

json takeover_report_json(const TakeoverReport& r) {
  json routing{{"engine", r.routing_engine.empty() ? json(nullptr) : json(r.routing_engine)},
               {"fallback", r.routing_fallback},
               {"failures", r.routing_failures}};
  json lids{{"compared", r.ports_compared ? json(*r.ports_compared) : json(nullptr)},
            {"changed", r.ports_compared ? json(r.lids_changed) : json(nullptr)},
            {"changed_ports", guids(r.lid_changed_ports)}};
  json msl{{"master_lid", r.master_lid.value == 0 ? json(nullptr) : json(r.master_lid.value)},
           {"sampled", r.ports_sampled ? json(*r.ports_sampled) : json(nullptr)},
           {"on_new_master", r.ports_sampled ? json(r.ports_on_new_master) : json(nullptr)},
           {"elsewhere", guids(r.ports_elsewhere)}};
  json lfts{{"compared", r.lft_entries_compared ? json(*r.lft_entries_compared) : json(nullptr)},
            {"changed", r.lft_entries_compared ? json(r.lft_entries_changed) : json(nullptr)},
            {"changed_switches", guids(r.lft_changed_switches)}};
  json copy = nullptr;
  if (r.sa_copy) {
    const auto& c = *r.sa_copy;
    copy = json{{"generation", c.generation},
                {"from", c.sender},
                {"age_s", c.age_s ? json(std::round(*c.age_s * 10) / 10) : json(nullptr)},
                {"groups", c.groups},
                {"members", c.members},
                {"service_records", c.services},
                {"subscriptions", c.informs},
                {"content_age_s", c.content_age_s ? json(std::round(*c.content_age_s * 10) / 10) : json(nullptr)},
                {"current", c.current},
                {"stale", c.stale.empty() ? json(nullptr) : json(c.stale)},
                {"missed_s", c.missed_s ? json(std::round(*c.missed_s * 10) / 10) : json(nullptr)},
                {"lost", c.lost ? json{{"groups", c.lost->groups},
                                       {"members", c.lost->members},
                                       {"service_records", c.lost->services},
                                       {"subscriptions", c.lost->informs}}
                                : json(nullptr)}};
  }
  json sa{{"after_master_ms", ms(r.sa_after_master)},
          {"outage_ms", ms(r.sa_outage)},
          {"copy", std::move(copy)},
          {"restored", fabric::sa_restored(r)},
          {"restore_error", r.sa_restore_error.empty() ? json(nullptr) : json(r.sa_restore_error)},
          {"groups_checked", r.groups_checked ? json(*r.groups_checked) : json(nullptr)},
          {"groups_kept", r.groups_checked ? json(r.groups_kept) : json(nullptr)},
          {"groups_lost", r.groups_lost},
          {"summary", fabric::sa_restore_text(r)}};
  return json{{"kind", std::string(fabric::to_string(r.kind))},
              {"previous_master", r.previous_master ? json(to_string(*r.previous_master)) : json(nullptr)},
              {"cause", r.cause},
              {"detection_ms", ms(r.detection)},
              {"to_master_ms", ms(r.to_master)},
              {"discovering_to_master_ms", ms(r.discovering_to_master)},
              {"master_to_subnet_up_ms", ms(r.master_to_subnet_up)},
              {"routing", std::move(routing)},
              {"lids", std::move(lids)},
              {"master_sm_lid", std::move(msl)},
              {"lfts", std::move(lfts)},
              {"sa", std::move(sa)},
              {"incomplete", r.incomplete},
              {"summary", fabric::summary(r)}};
}

std::optional<TakeoverReport> takeover_report_from_json(const json& j) {
  if (!j.is_object()) return std::nullopt;
  bool ok = true;
  TakeoverReport r;
  auto kind = j.find("kind");
  auto k = kind != j.end() && kind->is_string() ? fabric::report_kind_named(kind->get<std::string>()) : std::nullopt;
  if (!k) return std::nullopt;
  r.kind = *k;
  if (auto pm = text_from(j, "previous_master", ok); !pm.empty()) {
    r.previous_master = parse_guid(pm);
    if (!r.previous_master) ok = false;
  }
  r.cause = text_from(j, "cause", ok);
  r.detection = ms_from(j, "detection_ms", ok);
  r.to_master = ms_from(j, "to_master_ms", ok);
  r.discovering_to_master = ms_from(j, "discovering_to_master_ms", ok);
  r.master_to_subnet_up = ms_from(j, "master_to_subnet_up_ms", ok);
  const json& routing = object_at(j, "routing", ok);
  r.routing_engine = text_from(routing, "engine", ok);
  if (auto f = routing.find("fallback"); f != routing.end()) {
    if (f->is_boolean()) r.routing_fallback = f->get<bool>();
    else ok = false;
  }
  r.routing_failures = texts_from(routing, "failures", fabric::kReportRoutingFailures, ok);
  const json& lids = object_at(j, "lids", ok);
  r.ports_compared = count_from(lids, "compared", ok);
  r.lids_changed = count_from(lids, "changed", ok).value_or(0);
  r.lid_changed_ports = guids_from(lids, "changed_ports", ok);
  const json& msl = object_at(j, "master_sm_lid", ok);
  if (auto l = count_from(msl, "master_lid", ok)) {
    if (*l > 0xffff) ok = false;
    else r.master_lid = Lid{static_cast<std::uint16_t>(*l)};
  }
  r.ports_sampled = count_from(msl, "sampled", ok);
  r.ports_on_new_master = count_from(msl, "on_new_master", ok).value_or(0);
  r.ports_elsewhere = guids_from(msl, "elsewhere", ok);
  const json& lfts = object_at(j, "lfts", ok);
  r.lft_entries_compared = count_from(lfts, "compared", ok);
  r.lft_entries_changed = count_from(lfts, "changed", ok).value_or(0);
  r.lft_changed_switches = guids_from(lfts, "changed_switches", ok);
  const json& sa = object_at(j, "sa", ok);
  r.sa_after_master = ms_from(sa, "after_master_ms", ok);
  r.sa_outage = ms_from(sa, "outage_ms", ok);
  if (auto c = sa.find("copy"); c != sa.end() && !c->is_null()) {
    const json& copy = object_at(sa, "copy", ok);
    fabric::SaCopyInfo info;
    if (auto g = copy.find("generation"); g != copy.end() && g->is_number_unsigned()) info.generation = g->get<std::uint64_t>();
    else ok = false;
    info.sender = text_from(copy, "from", ok);
    if (auto a = copy.find("age_s"); a != copy.end() && !a->is_null()) {
      if (a->is_number() && a->get<double>() >= 0) info.age_s = a->get<double>();
      else ok = false;
    }
    info.groups = count_from(copy, "groups", ok).value_or(0);
    info.members = count_from(copy, "members", ok).value_or(0);
    info.services = count_from(copy, "service_records", ok).value_or(0);
    info.informs = count_from(copy, "subscriptions", ok).value_or(0);
    // Reports from before these fields: a copy held was taken as current.
    auto seconds_at = [&](const char* key) -> std::optional<double> {
      auto a = copy.find(key);
      if (a == copy.end() || a->is_null()) return std::nullopt;
      if (a->is_number() && a->get<double>() >= 0) return a->get<double>();
      ok = false;
      return std::nullopt;
    };
    info.content_age_s = seconds_at("content_age_s");
    info.missed_s = seconds_at("missed_s");
    if (auto cur = copy.find("current"); cur != copy.end()) {
      if (cur->is_boolean()) info.current = cur->get<bool>();
      else ok = false;
    }
    info.stale = text_from(copy, "stale", ok);
    if (auto l = copy.find("lost"); l != copy.end() && !l->is_null()) {
      const json& lost = object_at(copy, "lost", ok);
      info.lost = fabric::SaCopyInfo::Counts{count_from(lost, "groups", ok).value_or(0),
                                             count_from(lost, "members", ok).value_or(0),
                                             count_from(lost, "service_records", ok).value_or(0),
                                             count_from(lost, "subscriptions", ok).value_or(0)};
    }
    r.sa_copy = std::move(info);
  }
  r.sa_restore_error = text_from(sa, "restore_error", ok);
  r.groups_checked = count_from(sa, "groups_checked", ok);
  r.groups_kept = count_from(sa, "groups_kept", ok).value_or(0);
  r.groups_lost = texts_from(sa, "groups_lost", fabric::kReportGroupsNamed, ok);
  r.incomplete = text_from(j, "incomplete", ok);
  if (!ok) return std::nullopt;
  return r;
}

std::vector<std::pair<std::string, std::string>> takeover_report_fields(const TakeoverReport& r) {
  std::vector<std::pair<std::string, std::string>> f;
  auto add_ms = [&](const char* k, const std::optional<Duration>& d) {
    if (d) f.emplace_back(k, ms(d).dump());
  };
  if (r.previous_master) f.emplace_back("previous_master", to_string(*r.previous_master));
  add_ms("detection_ms", r.detection);
  add_ms("to_master_ms", r.to_master);
  add_ms("discovering_to_master_ms", r.discovering_to_master);
  add_ms("master_to_subnet_up_ms", r.master_to_subnet_up);
  if (!r.routing_engine.empty()) {
    f.emplace_back("routing_engine", r.routing_engine);
    f.emplace_back("routing_fallback", r.routing_fallback ? "yes" : "no");
  }
  if (r.ports_compared) {
    f.emplace_back("lids_changed", std::to_string(r.lids_changed));
    f.emplace_back("ports_compared", std::to_string(*r.ports_compared));
  }
  if (r.ports_sampled) {
    f.emplace_back("ports_on_new_master", std::to_string(r.ports_on_new_master));
    f.emplace_back("ports_sampled", std::to_string(*r.ports_sampled));
  }
  if (r.lft_entries_compared) {
    f.emplace_back("lft_entries_changed", std::to_string(r.lft_entries_changed));
    f.emplace_back("lft_entries_compared", std::to_string(*r.lft_entries_compared));
  }
  add_ms("sa_after_master_ms", r.sa_after_master);
  add_ms("sa_outage_ms", r.sa_outage);
  f.emplace_back("sa_restored", fabric::sa_restored(r) ? "yes" : r.sa_copy ? "stale" : "no");
  if (r.sa_copy) f.emplace_back("sa_copy_generation", std::to_string(r.sa_copy->generation));
  if (!r.sa_restore_error.empty()) f.emplace_back("sa_restore_error", r.sa_restore_error);
  if (r.groups_checked) {
    f.emplace_back("groups_kept", std::to_string(r.groups_kept));
    f.emplace_back("groups_checked", std::to_string(*r.groups_checked));
  }
  if (!r.incomplete.empty()) f.emplace_back("incomplete", r.incomplete);
  return f;
}

}  // namespace smha::head
