// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smctl's human output of smhad's replies (doc/control-protocol.md): pure
// functions of the reply's JSON. Every field shown goes through terminal_safe()
// (the daemon escaped fabric text with printable(); no backslash is doubled).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace smha::client {

// JSON of one status reply (doc/control-protocol.md, method status) rendered
// for humans, laid out like `systemctl status`.
std::string render_status_text(const nlohmann::json& status);
// Durations for people: "380ms", "4.2s", "42s", "7m05s", "2h13m", "3d04h"; "-" if
// negative. human_ms: "0.38 ms", "12.3 ms", "250 ms".
std::string human_duration(double seconds);
std::string human_ms(double milliseconds);
// The `sms` reply (doc/census.md) as a table like `chronyc sources`: one
// line per SM the census knows, then what the census walk cost.
std::string render_sms_text(const nlohmann::json& sms);
// The `health` reply (doc/health.md): what the last census walk showed of the
// links, then one line per degraded link, worst first.
std::string render_health_text(const nlohmann::json& health);
// One line per event of an `events` reply.
std::string render_events_text(const nlohmann::json& events);

}  // namespace smha::client
