// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/service/head_status.hpp"

#include "smha/core/text.hpp"

namespace smha::service {

using nlohmann::json;

std::optional<SmState> SmView::state() const {
  if (answer && shown == to_string(answer->state)) return answer->state;
  return std::nullopt;
}

json to_json(const SmView& p) {
  json j;
  j["name"] = p.name;
  j["guid"] = to_string(p.guid);
  j["lid"] = p.lid ? json(p.lid->value) : json(nullptr);
  j["dr_path"] = p.dr ? json(to_string(*p.dr)) : json(nullptr);
  j["configured_lid"] = p.configured_lid ? json(p.configured_lid->value) : json(nullptr);
  j["configured_dr_path"] = p.configured_dr ? json(to_string(*p.configured_dr)) : json(nullptr);
  j["addressed"] = p.lid.has_value() || p.dr.has_value();
  j["node_description"] = p.node_description.empty() ? json(nullptr) : json(printable(p.node_description));
  j["route"] = p.route ? json(*p.route) : json(nullptr);
  j["state"] = p.shown;
  if (p.answer) {
    j["priority"] = p.answer->priority;
    j["act_count"] = p.answer->act_count;
    j["rtt_ms"] = p.answer->rtt_ms;
    j["last_answer_age_s"] = p.answer->age_s;
  }
  if (p.last_poll_answered) j["last_poll_answered"] = *p.last_poll_answered;
  if (p.last_poll_age_s) j["last_poll_age_s"] = *p.last_poll_age_s;
  return j;
}

}  // namespace smha::service
