// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/mad/sminfo_query.hpp"

#include <cstdio>
#include <cstring>
#include <optional>

#include <nlohmann/json.hpp>

namespace smha::mad {
namespace {

std::string key_hex(std::uint64_t key) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(key));
  return buf;
}

std::string target_text(const Target& target) {
  if (const Lid* lid = std::get_if<Lid>(&target)) return "LID " + std::to_string(lid->value);
  const auto& path = std::get<DrPath>(target);
  if (path.hops.empty()) return "local SM (directed route 0)";
  return "directed route " + to_string(path);
}

}  // namespace

Target query_target(const SminfoQuery& query) {
  if (query.lid) return *query.lid;
  if (query.dr) return *query.dr;
  return DrPath{};
}

SminfoOutcome classify(const Error& error) {
  if (error.code == kErrTimeout) return SminfoOutcome::Timeout;
  if (error.code == kErrMadStatus) return SminfoOutcome::MadStatus;
  if (error.code == kErrNoPort) return SminfoOutcome::NoPort;
  return SminfoOutcome::Failure;
}

std::string format_sminfo_text(const SminfoReport& r, bool show_key) {
  const SmInfo& i = r.reply.info;
  const LocalPortInfo& p = r.local_port;
  char rtt[32];
  std::snprintf(rtt, sizeof rtt, "%.3f", to_ms(r.reply.rtt));
  std::string out;
  out += "target:     " + target_text(r.target) + "\n";
  out += "guid:       " + to_string(i.guid) + "\n";
  out += "sm_key:     " + (show_key ? key_hex(i.sm_key) : std::string("hidden (--show-key)")) + "\n";
  out += "act_count:  " + std::to_string(i.act_count) + "\n";
  out += "priority:   " + std::to_string(i.priority) + "\n";
  out += "state:      " + std::to_string(static_cast<int>(i.state)) + " " +
         std::string(to_string(i.state)) + "\n";
  out += "local port: " + p.ca + " port " + std::to_string(p.port) + " guid " +
         to_string(p.port_guid) + " lid " + std::to_string(p.lid.value) + "\n";
  out += "rtt_ms:     " + std::string(rtt) + " (attempts " + std::to_string(r.reply.attempts) +
         ")\n";
  return out;
}

std::string format_sminfo_json(const SminfoReport& r, bool show_key) {
  const SmInfo& i = r.reply.info;
  const LocalPortInfo& p = r.local_port;
  nlohmann::json j;
  if (const Lid* lid = std::get_if<Lid>(&r.target)) {
    j["target"] = {{"lid", lid->value}};
  } else {
    j["target"] = {{"dr", to_string(std::get<DrPath>(r.target))}};
  }
  j["guid"] = to_string(i.guid);
  j["sm_key"] = show_key ? nlohmann::json(key_hex(i.sm_key)) : nlohmann::json(nullptr);
  j["act_count"] = i.act_count;
  j["priority"] = i.priority;
  j["state"] = static_cast<int>(i.state);
  j["state_name"] = std::string(to_string(i.state));
  j["local_port"] = {{"ca", p.ca},
                     {"port", p.port},
                     {"guid", to_string(p.port_guid)},
                     {"lid", p.lid.value},
                     {"sm_lid", p.sm_lid.value},
                     {"state", std::string(to_string(p.state))}};
  j["rtt_ms"] = to_ms(r.reply.rtt);
  j["attempts"] = r.reply.attempts;
  return j.dump() + "\n";
}

std::string format_error_json(const Error& error) {
  nlohmann::json j;
  j["error"] = {{"code", std::string(to_string(error.code))}, {"message", error.message}};
  return j.dump() + "\n";
}

Result<SmInfoReply> run_sminfo_get(boost::asio::io_context& io, MadTransport& transport,
                                   const Target& target, const RequestOptions& opts) {
  std::optional<Result<SmInfoReply>> result;
  transport.get_sminfo(target, opts, [&result](Result<SmInfoReply> r) { result = std::move(r); });
  io.restart();
  while (!result && io.run_one() > 0) {
  }
  if (!result) return make_error(Errc::Failed, "the event loop ran out of work before an answer");
  return std::move(*result);
}

SminfoCommandResult run_sminfo_command(const SminfoQuery& query, bool json, bool show_key,
                                       const Clock& clock) {
  SminfoCommandResult res;
  auto fail = [&res, json](const Error& e) {
    res.outcome = classify(e);
    if (json) res.out = format_error_json(e);
    res.err = "smctl sminfo: " + to_string(e) + "\n";
    return res;
  };
  boost::asio::io_context io;
  auto transport = UmadTransport::open(io, query.port, clock);
  if (!transport) return fail(transport.error());
  Target target = query_target(query);
  auto reply = run_sminfo_get(io, **transport, target, query.request);
  if (!reply) {
    Error e = reply.error();
    e.message = target_text(target) + ": " + e.message;
    return fail(e);
  }
  SminfoReport report{target, (*transport)->local_port(), *reply};
  res.outcome = SminfoOutcome::Ok;
  res.out = json ? format_sminfo_json(report, show_key) : format_sminfo_text(report, show_key);
  return res;
}

}  // namespace smha::mad
