// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// mad_probe: a UmadTransport client for the ibsim tier, for what `smctl sminfo`
// cannot do: SubnSet(SMInfo) and several requests in flight at once.
//
//   mad_probe set <lid|0,dr...> <modifier 1..5> <payload state 0..3> <timeout ms>
//   mad_probe multi <timeout ms> <target> <target> ...   (Gets, all sent at once)
//   mad_probe sa <sa lid> <timeout ms>   (SubnAdmGetTable(SMInfoRecord))
//   mad_probe sr-set <sa lid> <port guid> <data byte> <lease s> <timeout ms> [service id]
//   mad_probe sr-get <sa lid> <port guid> <timeout ms>
//   mad_probe sr-delete <sa lid> <port guid> <timeout ms>
//     (SubnAdmSet/Get/Delete(ServiceRecord) of the record named "smha" with
//     ServiceGID fe80::<port guid>; Set puts <data byte> + i in ServiceData byte i;
//     [service id]: another ServiceID than smha's, as a forger would register)
//
// Targets: a decimal LID, or a directed path starting with "0" ("0", "0,1,3").
// Prints one JSON line per request, in request order:
//   {"target":"...","ok":true,"guid":"0x...","priority":N,"state":N,"act_count":N,"attempts":N}
//   {"target":"...","ok":false,"code":"...","message":"..."}
// or, for `sa`, one line:
//   {"ok":true,"records":[{"lid":N,"guid":"0x...","priority":N,"state":N,"act_count":N}...],
//    "claimed":N|null,"truncated":B,"attempts":N}
// or, for sr-*, one line:
//   {"ok":true,"id":N,"gid":"0x...:0x...","name":"smha","lease":N,"data0":N,"data63":N,
//    "data":"<ServiceData, 128 hex digits>","attempts":N}
// and exits 0 if the port opened (whatever the answers), 5 if it did not.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "smha/mad/service_record.hpp"
#include "smha/mad/umad_transport.hpp"

using namespace smha;
using namespace smha::mad;

namespace {

std::optional<Target> parse_target(const std::string& s) {
  if (s.find(',') != std::string::npos || s == "0") {
    auto p = parse_dr_path(s);
    if (!p) return std::nullopt;
    return Target{*p};
  }
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (*end || v < 1 || v > 0xfffe) return std::nullopt;
  return Target{Lid{static_cast<std::uint16_t>(v)}};
}

nlohmann::json to_json(const std::string& target, const Result<SmInfoReply>& r) {
  nlohmann::json j{{"target", target}, {"ok", r.ok()}};
  if (r) {
    j["guid"] = to_string(r->info.guid);
    j["priority"] = r->info.priority;
    j["state"] = static_cast<int>(r->info.state);
    j["act_count"] = r->info.act_count;
    j["attempts"] = r->attempts;
  } else {
    j["code"] = r.error().code;
    j["message"] = r.error().message;
  }
  return j;
}

int usage() {
  std::fprintf(stderr,
               "usage: mad_probe set <target> <mod> <state> <timeout_ms>\n"
               "       mad_probe multi <timeout_ms> <target>...\n"
               "       mad_probe sa <sa_lid> <timeout_ms>\n"
               "       mad_probe sr-set <sa_lid> <guid> <data_byte> <lease_s> <timeout_ms>\n"
               "       mad_probe sr-get|sr-delete <sa_lid> <guid> <timeout_ms>\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() < 2) return usage();
  boost::asio::io_context io;
  SteadyClock clock;
  auto transport = UmadTransport::open(io, PortSelector{}, clock);
  if (!transport) {
    std::fprintf(stderr, "mad_probe: %s\n", transport.error().message.c_str());
    return 5;
  }
  if (args[0] == "sa" && args.size() == 3) {
    const long lid = std::strtol(args[1].c_str(), nullptr, 10);
    RequestOptions opts{std::chrono::milliseconds(std::atoi(args[2].c_str())), 0, 0};
    std::optional<Result<SmInfoRecordsReply>> got;
    (*transport)->get_sminfo_records(Lid{static_cast<std::uint16_t>(lid)}, opts,
                                     [&got](Result<SmInfoRecordsReply> r) { got = std::move(r); });
    while (!got && io.run_one() > 0) {
    }
    nlohmann::json j{{"ok", got && got->ok()}};
    if (got && got->ok()) {
      const auto& t = (*got)->info;
      nlohmann::json recs = nlohmann::json::array();
      for (const auto& r : t.records)
        recs.push_back({{"lid", r.lid.value}, {"guid", to_string(r.info.guid)},
                        {"priority", r.info.priority}, {"state", static_cast<int>(r.info.state)},
                        {"act_count", r.info.act_count}, {"sm_key", r.info.sm_key}});
      j["records"] = recs;
      j["claimed"] = t.claimed ? nlohmann::json(*t.claimed) : nlohmann::json(nullptr);
      j["truncated"] = t.truncated;
      j["attempts"] = (*got)->attempts;
    } else if (got) {
      j["code"] = got->error().code;
      j["message"] = got->error().message;
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  if (args[0].rfind("sr-", 0) == 0 && args.size() >= 4) {
    std::optional<std::uint64_t> service_id;
    if (args[0] == "sr-set" && args.size() == 7) {
      service_id = std::strtoull(args[6].c_str(), nullptr, 0);
      args.pop_back();
    }
    const auto sa = Lid{static_cast<std::uint16_t>(std::strtol(args[1].c_str(), nullptr, 10))};
    auto guid = parse_guid(args[2]);
    if (!guid) return usage();
    RequestOptions opts{std::chrono::milliseconds(std::atoi(args.back().c_str())), 0, 0};
    ServiceRecord rec;
    rec.id = 0x0200534d48410001ULL;
    rec.gid = Gid{kDefaultSubnetPrefix, *guid};
    rec.name = "smha";
    if (service_id) rec.id = *service_id;
    std::optional<Result<ServiceRecordReply>> got;
    auto done = [&got](Result<ServiceRecordReply> r) { got = std::move(r); };
    if (args[0] == "sr-set" && args.size() == 6) {
      // ServiceData: <data byte> + i in byte i (every byte distinct, so a lost one shows).
      const auto base = static_cast<std::uint8_t>(std::strtol(args[3].c_str(), nullptr, 0));
      for (std::size_t i = 0; i < rec.data.size(); ++i) rec.data[i] = static_cast<std::uint8_t>(base + i);
      rec.lease = static_cast<std::uint32_t>(std::strtoul(args[4].c_str(), nullptr, 10));
      (*transport)->set_service_record(sa, rec, opts, done);
    } else if (args[0] == "sr-get" && args.size() == 4) {
      (*transport)->get_service_record(sa, rec.id, rec.gid, rec.name, opts, done);
    } else if (args[0] == "sr-delete" && args.size() == 4) {
      (*transport)->delete_service_record(sa, rec, opts, done);
    } else {
      return usage();
    }
    while (!got && io.run_one() > 0) {
    }
    nlohmann::json j{{"ok", got && got->ok()}};
    if (got && got->ok()) {
      const auto& r = (*got)->info;
      j["id"] = r.id;
      j["gid"] = to_string(r.gid);
      j["name"] = r.name;
      j["lease"] = r.lease;
      j["data0"] = r.data[0];
      j["data63"] = r.data[63];
      std::string hex;
      char b[3];
      for (auto c : r.data) {
        std::snprintf(b, sizeof b, "%02x", c);
        hex += b;
      }
      j["data"] = hex;
      j["attempts"] = (*got)->attempts;
    } else if (got) {
      j["code"] = got->error().code;
      j["message"] = got->error().message;
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::vector<std::string> names;
  std::vector<std::optional<Result<SmInfoReply>>> results;
  auto record = [&results](std::size_t i) {
    return [&results, i](Result<SmInfoReply> r) { results[i] = std::move(r); };
  };
  if (args[0] == "set" && args.size() == 5) {
    auto target = parse_target(args[1]);
    if (!target) return usage();
    SmInfo payload;
    payload.state = static_cast<SmState>(std::atoi(args[3].c_str()));
    RequestOptions opts{std::chrono::milliseconds(std::atoi(args[4].c_str())), 0, 0};
    names.push_back(args[1]);
    results.resize(1);
    (*transport)->set_sminfo(*target, static_cast<SmInfoModifier>(std::atoi(args[2].c_str())),
                             payload, opts, record(0));
  } else if (args[0] == "multi" && args.size() >= 3) {
    RequestOptions opts{std::chrono::milliseconds(std::atoi(args[1].c_str())), 0, 0};
    results.resize(args.size() - 2);
    for (std::size_t i = 2; i < args.size(); ++i) {
      auto target = parse_target(args[i]);
      if (!target) return usage();
      names.push_back(args[i]);
      (*transport)->get_sminfo(*target, opts, record(i - 2));
    }
  } else {
    return usage();
  }
  auto all_done = [&results] {
    for (const auto& r : results)
      if (!r) return false;
    return true;
  };
  while (!all_done() && io.run_one() > 0) {
  }
  for (std::size_t i = 0; i < results.size(); ++i) {
    auto j = results[i] ? to_json(names[i], *results[i])
                        : nlohmann::json{{"target", names[i]}, {"ok", false}, {"code", "lost"}};
    std::printf("%s\n", j.dump().c_str());
  }
  return 0;
}
