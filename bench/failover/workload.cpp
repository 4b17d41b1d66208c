// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// bench_workload_client: a compute node's workload as IPoIB and rdma_cm make
// it, and what the fabric holds of it; run at a node through umad2sim by the
// failover benchmark's --workload runs (doc/continuity.md).
//
//   bench_workload_client join   --sa-lid L [--groups G]
//   bench_workload_client check  --sa-lid L [--groups G] --member GUID ...
//   bench_workload_client tables [--mft-blocks B]
//   bench_workload_client services --sa-lid L --count N [--name NAME]
//   bench_workload_client unregister --sa-lid L
//
// join:   from this node's port, through the SA at LID L: G multicast joins
//         (SubnAdmSet(MCMemberRecord), FullMember; group 0 is IPoIB's
//         broadcast group, the others IPv6 solicited-node style groups), one
//         ServiceRecord (SubnAdmSet, infinite lease) and two InformInfo
//         subscriptions (traps 64 and 65). Prints one JSON object: the port,
//         each group's MGID and MLID, and what failed. Exit 0 when all took.
// check:  asks the SA at L what it holds of the workload of each --member
//         port: its membership of each group (SubnAdmGet(MCMemberRecord):
//         MLID or absent), its ServiceRecord (present or not), its
//         subscriptions (SubnAdmGetTable(InformInfoRecord): how many).
//         Prints one JSON object.
// unregister: deletes this node's ServiceRecord (SubnAdmDelete) through the
//         SA at L: a workload that went away.
// tables: walks the fabric by directed route from this node (smha's own
//         discovery) and reads, by SMP, every port's LID, every switch's
//         LinearForwardingTable up to its LinearFDBTop and the first B
//         blocks (32 MLIDs each) of its MulticastForwardingTable at every
//         position. Prints one JSON object.
// services: registers N ServiceRecords from this node's port (SubnAdmSet,
//         infinite lease, service IDs kServiceBulkId + 0..N-1, 8 in flight)
//         named NAME ("\n" in it becomes a newline: a name OpenSM's dump
//         splits; default "smha-bulk"), as a node flooding its SA would.
//         Prints one JSON object: how many took, the first errors.
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "smha/core/clock.hpp"
#include "smha/fabric/discovery.hpp"
#include "smha/mad/sa_records.hpp"
#include "smha/mad/service_record.hpp"
#include "smha/mad/smp.hpp"
#include "smha/mad/umad_transport.hpp"
#include "smha/os/asio_scheduler.hpp"

using namespace smha;
using namespace smha::mad;
using nlohmann::json;

namespace {

constexpr std::uint64_t kServiceId = 0x10000ce100000001ULL;
constexpr const char* kServiceName = "smha-workload";
constexpr std::uint64_t kServiceBulkId = 0x10000ce300000000ULL;

// Group g's MGID: 0 is IPoIB's IPv4 broadcast group for P_Key 0xffff
// (ff12:401b:ffff::ffff:ffff); the others are IPv6 solicited-node style
// groups of the same P_Key (ff12:601b:ffff::1:ff00:g).
Gid group_mgid(int g) {
  if (g == 0) return Gid{0xff12401bffff0000ULL, Guid{0x00000000ffffffffULL}};
  return Gid{0xff12601bffff0000ULL, Guid{0x00000001ff000000ULL | static_cast<std::uint64_t>(g)}};
}

std::string hex16(std::uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%016llx", static_cast<unsigned long long>(v));
  return b;
}

// Runs queued requests with at most `limit` in flight; each task gets a
// `next` to call when its answer (or error) is in.
class Pump {
 public:
  explicit Pump(std::size_t limit) : limit_(limit) {}
  void add(std::function<void(std::function<void()>)> task) {
    queue_.push_back(std::move(task));
    fill();
  }

 private:
  void fill() {
    while (running_ < limit_ && !queue_.empty()) {
      auto task = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
      task([this] {
        --running_;
        fill();
      });
    }
  }
  std::size_t limit_;
  std::size_t running_ = 0;
  std::deque<std::function<void(std::function<void()>)>> queue_;
};

RequestOptions sa_opts() {
  RequestOptions o;
  o.timeout = std::chrono::milliseconds(500);
  o.retries = 3;
  return o;
}

RequestOptions smp_opts() {
  RequestOptions o;
  o.timeout = std::chrono::milliseconds(200);
  o.retries = 2;
  return o;
}

// An SA answer accepted when its method and attribute are the ones expected.
UmadTransport::RawAccept sa_answer(std::uint8_t method, std::uint16_t attr) {
  return [method, attr](std::span<const std::uint8_t> mad) -> Status {
    if (mad.size() < kSaHeaderSize || mad[3] != method || (mad[16] << 8 | mad[17]) != attr)
      return make_error(Errc::Parse, "not the answer expected");
    const std::uint16_t status = static_cast<std::uint16_t>(mad[4] << 8 | mad[5]);
    if (status != 0) return mad_status_error(status, "SA status " + describe_sa_status(status));
    return Status::Ok();
  };
}

struct Args {
  std::string cmd;
  std::uint16_t sa_lid = 0;
  int groups = 4;
  int mft_blocks = 1;
  long count = 1;
  std::string name = "smha-bulk";
  std::vector<Guid> members;
};

int usage() {
  std::fprintf(stderr,
               "usage: bench_workload_client join --sa-lid L [--groups G]\n"
               "       bench_workload_client check --sa-lid L [--groups G] --member GUID ...\n"
               "       bench_workload_client tables [--mft-blocks B]\n"
               "       bench_workload_client services --sa-lid L --count N [--name NAME]\n"

               "       bench_workload_client unregister --sa-lid L\n");
  return 2;
}

bool parse(int argc, char** argv, Args& a) {
  if (argc < 2) return false;
  a.cmd = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const std::string v = argv[i + 1];
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (k == "--name") {
      a.name.clear();
      for (std::size_t j = 0; j < v.size(); ++j) {
        if (v.compare(j, 2, "\\n") == 0) a.name += '\n', ++j;
        else a.name += v[j];
      }
      if (a.name.size() > kServiceNameSize) return false;
      continue;
    }
    if (k == "--member") {
      auto g = parse_guid(v);
      if (!g) return false;
      a.members.push_back(*g);
      continue;
    }
    if (*end != '\0') return false;
    if (k == "--sa-lid" && n > 0 && n < 0xc000) a.sa_lid = static_cast<std::uint16_t>(n);
    else if (k == "--groups" && n >= 1 && n <= 64) a.groups = static_cast<int>(n);
    else if (k == "--mft-blocks" && n >= 1 && n <= 512) a.mft_blocks = static_cast<int>(n);
    else if (k == "--count" && n >= 1 && n <= 1000000) a.count = n;
    else return false;
  }
  if ((argc - 2) % 2 != 0) return false;
  if (a.cmd == "join" || a.cmd == "check") return a.sa_lid != 0 && (a.cmd == "join" || !a.members.empty());
  if (a.cmd == "services") return a.sa_lid != 0;
  if (a.cmd == "unregister") return a.sa_lid != 0;
  return a.cmd == "tables";
}

// The ServiceRecord a workload node registers (and unregister deletes).
ServiceRecord workload_service(const Gid& me) {
  ServiceRecord s;
  s.id = kServiceId;
  s.gid = me;
  s.pkey = 0xffff;
  s.lease = 0xffffffffu;
  s.name = kServiceName;
  return s;
}

json join(boost::asio::io_context& io, UmadTransport& t, const Args& a) {
  const Gid me{kDefaultSubnetPrefix, t.local_port().port_guid};
  json out{{"port_guid", hex16(me.guid.value)}, {"groups", json::array()}, {"errors", json::array()}};
  const Target sa{Lid{a.sa_lid}};
  Pump pump(4);
  for (int g = 0; g < a.groups; ++g)
    pump.add([&, g](std::function<void()> next) {
      McMemberRecord r;
      r.mgid = group_mgid(g);
      r.port_gid = me;
      r.qkey = 0x0b1b;  // IPoIB's Q_Key
      r.pkey = 0xffff;
      r.scope_state = 0x20 | kJoinFull;  // link-local scope, full member
      t.raw_request(
          sa, true, [r](std::uint64_t tid) { return encode_mcmember_join(tid, r); },
          sa_answer(kMethodGetResp, kAttrMcMemberRecord), sa_opts(), [&, g, next](Result<UmadTransport::RawReply> rep) {
            json e{{"mgid", to_string(group_mgid(g))}};
            if (!rep) {
              out["errors"].push_back("join " + to_string(group_mgid(g)) + ": " + rep.error().message);
            } else if (auto rec = decode_mcmember_response(rep->mad, kMethodGetResp); !rec) {
              out["errors"].push_back("join " + to_string(group_mgid(g)) + ": " + rec.error().message);
            } else {
              e["mlid"] = rec->mlid;
              out["groups"].push_back(e);
            }
            next();
          });
    });
  pump.add([&](std::function<void()> next) {
    const ServiceRecord s = workload_service(me);
    t.set_service_record(Lid{a.sa_lid}, s, sa_opts(), [&, next](Result<ServiceRecordReply> r) {
      out["service"] = static_cast<bool>(r);
      if (!r) out["errors"].push_back("ServiceRecord: " + r.error().message);
      next();
    });
  });
  out["informs"] = 0;
  for (std::uint16_t trap : {kTrapGidInService, kTrapGidOutOfService})
    pump.add([&, trap](std::function<void()> next) {
      InformInfo info;
      info.trap_number = trap;
      t.raw_request(
          sa, true, [info](std::uint64_t tid) { return encode_inform_info_set(tid, info); },
          sa_answer(kMethodGetResp, kAttrInformInfo), sa_opts(), [&, trap, next](Result<UmadTransport::RawReply> rep) {
            if (!rep)
              out["errors"].push_back("InformInfo trap " + std::to_string(trap) + ": " + rep.error().message);
            else
              out["informs"] = out["informs"].get<int>() + 1;
            next();
          });
    });
  io.run();
  return out;
}

json unregister(boost::asio::io_context& io, UmadTransport& t, const Args& a) {
  const Gid me{kDefaultSubnetPrefix, t.local_port().port_guid};
  json out{{"port_guid", hex16(me.guid.value)}, {"errors", json::array()}};
  const ServiceRecord s = workload_service(me);
  t.delete_service_record(Lid{a.sa_lid}, s, sa_opts(), [&](Result<ServiceRecordReply> r) {
    out["deleted"] = static_cast<bool>(r);
    if (!r) out["errors"].push_back("ServiceRecord: " + r.error().message);
  });
  io.run();
  return out;
}

json check(boost::asio::io_context& io, UmadTransport& t, const Args& a) {
  json out{{"groups", json::array()}, {"services", json::object()}, {"informs", json::object()},
           {"errors", json::array()}};
  for (int g = 0; g < a.groups; ++g) out["groups"].push_back({{"mgid", to_string(group_mgid(g))}, {"members", json::object()}});
  const Target sa{Lid{a.sa_lid}};
  Pump pump(4);
  // An SA that does not answer (still in its first sweep) is an error, not an absence.
  auto note = [&out](const std::string& what, const Error& e) { out["errors"].push_back(what + ": " + e.message); };
  for (const Guid& m : a.members) {
    const Gid port{kDefaultSubnetPrefix, m};
    const std::string key = hex16(m.value);
    for (int g = 0; g < a.groups; ++g)
      pump.add([&, g, port, key](std::function<void()> next) {
        t.get_mcmember(Lid{a.sa_lid}, group_mgid(g), port, sa_opts(),
            [&, g, key, next](Result<McMemberReply> rep) {
              auto& slot = out["groups"][static_cast<std::size_t>(g)]["members"][key];
              if (rep) {
                slot = rep->info.value;
              } else if (rep.error().code == kErrMadStatus && rep.error().mad_status == kSaStatusNoRecords) {
                slot = nullptr;
              } else {
                note("member " + key, rep.error());
              }
              next();
            });
      });
    pump.add([&, port, key](std::function<void()> next) {
      t.get_service_record(Lid{a.sa_lid}, kServiceId, port, kServiceName, sa_opts(),
                           [&, key, next](Result<ServiceRecordReply> r) {
                             if (r) out["services"][key] = true;
                             else if (r.error().code == kErrMadStatus && r.error().mad_status == kSaStatusNoRecords)
                               out["services"][key] = false;
                             else note("service " + key, r.error());
                             next();
                           });
    });
    pump.add([&, port, key](std::function<void()> next) {
      t.raw_request(
          sa, true, [port](std::uint64_t tid) -> Result<MadBytes> { return encode_inform_info_record_get_table(tid, port); },
          [](std::span<const std::uint8_t> mad) -> Status {
            // Status 0x0300 is an empty table here, not an error.
            if (mad.size() < kSaHeaderSize || mad[3] != kMethodGetTableResp || (mad[16] << 8 | mad[17]) != kAttrInformInfoRecord)
              return make_error(Errc::Parse, "not the answer expected");
            return Status::Ok();
          },
          sa_opts(), [&, key, next](Result<UmadTransport::RawReply> rep) {
            if (!rep) {
              note("informs " + key, rep.error());
            } else if (auto tab = decode_inform_info_record_table(rep->mad); !tab) {
              note("informs " + key, tab.error());
            } else {
              int n = 0;
              for (const auto& r : tab->records)
                if (r.info.trap_number == kTrapGidInService || r.info.trap_number == kTrapGidOutOfService) ++n;
              out["informs"][key] = n;
            }
            next();
          });
    });
  }
  io.run();
  return out;
}

json services(boost::asio::io_context& io, UmadTransport& t, const Args& a) {
  const Gid me{kDefaultSubnetPrefix, t.local_port().port_guid};
  json out{{"port_guid", hex16(me.guid.value)}, {"registered", 0}, {"errors", json::array()}};
  long registered = 0, failed = 0;
  Pump pump(8);
  for (long i = 0; i < a.count; ++i)
    pump.add([&, i](std::function<void()> next) {
      ServiceRecord s;
      s.id = kServiceBulkId + static_cast<std::uint64_t>(i);
      s.gid = me;
      s.pkey = 0xffff;
      s.lease = 0xffffffffu;
      s.name = a.name;
      t.set_service_record(Lid{a.sa_lid}, s, sa_opts(), [&, i, next](Result<ServiceRecordReply> r) {
        if (r) ++registered;
        else if (++failed <= 5) out["errors"].push_back("ServiceRecord " + std::to_string(i) + ": " + r.error().message);
        next();
      });
    });
  io.run();
  out["registered"] = registered;
  out["failed"] = failed;
  return out;
}

json tables(boost::asio::io_context& io, UmadTransport& t, const Args& a) {
  SteadyClock clock;
  os::AsioScheduler sched(io, clock);
  fabric::DiscoveryLimits limits;
  limits.forwarding_tables = true;  // every switch's LFT, as the census walk reads it
  fabric::Discovery d(sched, t, limits);
  std::optional<fabric::DiscoveryResult> walk;
  d.survey([&](const fabric::DiscoveryResult& r) { walk = r; });
  io.run();
  io.restart();
  json out{{"lids", json::object()}, {"lft", json::object()}, {"mft", json::object()}, {"errors", json::array()}};
  if (!walk) {
    out["errors"].push_back("the walk did not finish");
    return out;
  }
  // Every port's LID (CA ports and switch port 0), and each switch's path
  // and highest port number.
  struct Sw {
    DrPath path;
    int max_port = 0;
  };
  std::map<Guid, Sw> switches;
  for (const auto& p : walk->probed) {
    if (p.lid.value != 0) out["lids"][hex16(p.port_guid.value)] = p.lid.value;
    if (p.node_type == NodeType::Switch && p.port_num == 0) switches[p.node_guid].path = p.path;
  }
  for (const auto& e : walk->link_ends)
    if (auto it = switches.find(e.node_guid); it != switches.end())
      it->second.max_port = std::max(it->second.max_port, static_cast<int>(e.port_num));
  for (const auto& c : walk->cables)
    if (auto it = switches.find(c.a_node); it != switches.end())
      it->second.max_port = std::max(it->second.max_port, static_cast<int>(c.a_port));
  Pump pump(16);
  auto note = [&out](const std::string& what, const Error& e) { out["errors"].push_back(what + ": " + e.message); };
  for (const auto& [guid, sw] : switches) {
    const std::string key = hex16(guid.value);
    const Target at{sw.path};
    out["lft"][key] = json::array();
    out["mft"][key] = json::object();
    // The LFT as the walk read it (up to LinearFDBTop).
    if (auto l = walk->lfts.find(guid); l == walk->lfts.end())
      out["errors"].push_back("LFT of " + key + ": LinearFDBTop not read or 0");
    else if (!l->second.complete())
      out["errors"].push_back("LFT of " + key + ": " + std::to_string(l->second.blocks - l->second.blocks_read) +
                              " blocks unanswered");
    else
      out["lft"][key] = l->second.ports;
    for (int b = 0; b < a.mft_blocks; ++b)
      for (int pos = 0; pos <= sw.max_port / 16; ++pos)
        pump.add([&, at, key, b, pos](std::function<void()> next) {
          t.raw_request(
              at, false,
              [at, b, pos](std::uint64_t tid) {
                return encode_mft_get(tid, at, static_cast<std::uint16_t>(b), static_cast<std::uint8_t>(pos), 0);
              },
              [](std::span<const std::uint8_t> mad) -> Status {
                auto r = decode_mft_response(mad);
                return r ? Status::Ok() : Status(r.error());
              },
              smp_opts(), [&, key, b, pos, next](Result<UmadTransport::RawReply> r) {
                if (!r) {
                  note("MFT block " + std::to_string(b) + " position " + std::to_string(pos) + " of " + key, r.error());
                } else {
                  const auto masks = *decode_mft_response(r->mad);
                  for (std::size_t i = 0; i < kMftBlockSize; ++i) {
                    if (masks[i] == 0) continue;
                    const std::string mlid = std::to_string(kMulticastLidBase + b * kMftBlockSize + i);
                    // Ports 16*pos .. 16*pos+15 as one mask word per position.
                    out["mft"][key][mlid][std::to_string(pos)] = masks[i];
                  }
                }
                next();
              });
        });
  }
  io.run();
  out["switches"] = switches.size();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!parse(argc, argv, a)) return usage();
  boost::asio::io_context io;
  SteadyClock clock;
  auto opened = UmadTransport::open(io, PortSelector{}, clock);
  if (!opened) {
    std::fprintf(stderr, "bench_workload_client: %s\n", to_string(opened.error()).c_str());
    return 5;
  }
  json out;
  if (a.cmd == "join") out = join(io, **opened, a);
  else if (a.cmd == "check") out = check(io, **opened, a);
  else if (a.cmd == "services") out = services(io, **opened, a);
  else if (a.cmd == "unregister") out = unregister(io, **opened, a);
  else out = tables(io, **opened, a);
  std::printf("%s\n", out.dump().c_str());
  return out["errors"].empty() ? 0 : 1;
}
