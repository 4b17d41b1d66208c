// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/client/instances.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <ostream>
#include <system_error>

#include "smha/control/client.hpp"
#include "smha/core/fabric_name.hpp"

namespace smha::client {

namespace fs = std::filesystem;
using nlohmann::json;

std::string instance_socket(const std::string& fabric, const std::string& run_dir) {
  return instance_socket_path(fabric, run_dir);
}

std::vector<std::pair<std::string, std::string>> list_instances(const std::string& run_dir) {
  std::vector<std::pair<std::string, std::string>> out;
  std::error_code ec;
  for (fs::directory_iterator it(run_dir, ec), end; !ec && it != end && out.size() < 256; it.increment(ec)) {
    const auto& p = it->path();
    if (p.extension() != ".sock") continue;
    std::error_code sec;
    if (!it->is_socket(sec)) continue;
    const std::string stem = p.stem().string();
    if (stem == "smhad") out.emplace_back("", p.string());
    else if (!fabric_name_problem(stem)) out.emplace_back(stem, p.string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

json status_all(const CliOptions& options, const std::string& run_dir) {
  json rows = json::array();
  const auto timeout = std::chrono::milliseconds(static_cast<long long>(options.timeout_s * 1000.0));
  for (const auto& instance : list_instances(run_dir)) {
    const std::string& socket = instance.second;
    json row{{"fabric", instance.first}, {"socket", socket}};
    auto reply = [&]() -> Result<Reply> {
      auto c = control::ControlClient::connect(socket, timeout);
      if (!c) return c.error();
      return c->call(control::method::kStatus, json::object(), timeout);
    }();
    if (!reply) {
      row["error"] = reply.error().message;
    } else if (!reply->is_ok()) {
      row["error"] = std::string(to_string(reply->result)) + ": " + reply->text;
    } else {
      // Only the fields shown, each only when it has the expected type: a
      // reply of another shape is shown as such, never thrown on.
      const json& d = reply->data;
      auto text = [](const json& o, const char* key) -> std::string {
        if (!o.is_object()) return {};
        const auto it = o.find(key);
        return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
      };
      if (!d.is_object() || text(d, "role").empty()) {
        row["error"] = "the status reply has no role";
      } else {
        row["node"] = text(d, "node");
        row["role"] = text(d, "role");
        const json ms = d.contains("mastership") ? d["mastership"] : json(nullptr);
        const std::string master = !text(ms, "node").empty() ? text(ms, "node") : text(ms, "guid");
        row["master"] = master.empty() ? json(nullptr) : json(master);
        const json lc = d.contains("last_change") ? d["last_change"] : json(nullptr);
        row["last_change"] = text(lc, "kind").empty() ? json(nullptr)
                                                      : json{{"kind", text(lc, "kind")},
                                                             {"time", text(lc, "time")},
                                                             {"outcome", text(lc, "outcome")}};
        json alarms = json::array();
        if (d.contains("alarms") && d["alarms"].is_array())
          for (const auto& a : d["alarms"])
            if (!text(a, "kind").empty()) alarms.push_back(text(a, "kind"));
        row["alarms"] = alarms;
      }
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string render_status_all_text(const json& rows) {
  std::vector<std::vector<std::string>> table{{"FABRIC", "NODE", "ROLE", "MASTER", "LAST CHANGE", "ALARMS"}};
  for (const auto& r : rows) {
    const std::string fabric = r.value("fabric", "");
    std::vector<std::string> line{fabric.empty() ? "(smhad)" : fabric};
    if (r.contains("error")) {
      line.insert(line.end(), {"-", "-", "-", "-", "no answer: " + r.value("error", "")});
    } else {
      std::string change = "-";
      if (const auto& c = r["last_change"]; c.is_object())
        change = c.value("kind", "") + " " + c.value("time", "") +
                 (c.value("outcome", "").empty() ? "" : " (" + c.value("outcome", "") + ")");
      std::string alarms;
      for (const auto& a : r["alarms"]) alarms += (alarms.empty() ? "" : ",") + a.get<std::string>();
      line.insert(line.end(), {r.value("node", ""), r.value("role", ""),
                               r["master"].is_string() ? r["master"].get<std::string>() : "none", change,
                               alarms.empty() ? "-" : alarms});
    }
    table.push_back(std::move(line));
  }
  std::vector<std::size_t> width(table[0].size(), 0);
  for (const auto& l : table)
    for (std::size_t i = 0; i + 1 < l.size(); ++i) width[i] = std::max(width[i], l[i].size());
  std::string out;
  for (const auto& l : table) {
    for (std::size_t i = 0; i < l.size(); ++i) {
      out += l[i];
      if (i + 1 < l.size()) out += std::string(width[i] - l[i].size() + 2, ' ');
    }
    out += '\n';
  }
  return out;
}

int run_status_all(const CliOptions& options, std::ostream& out, std::ostream& err, const std::string& run_dir) {
  const json rows = status_all(options, run_dir);
  if (options.json) out << rows.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
  if (rows.empty()) {
    err << "smctl: status --all: no smhad control socket in " << run_dir << '\n';
    return kExitNoDaemon;
  }
  if (!options.json) out << render_status_all_text(rows);
  const bool all = std::all_of(rows.begin(), rows.end(), [](const json& r) { return !r.contains("error"); });
  return all ? kExitOk : kExitNoDaemon;
}

}  // namespace smha::client
