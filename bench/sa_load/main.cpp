// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// bench_sa_load: what an SA database copy of N records costs a takeover
// (doc/continuity.md, doc/performance.md "SA copy and takeover time").
//
// OpenSM reads its sa_db_file on its first master sweep (osm_sa_db_file_load)
// and its SA answers nothing until that sweep ends ("SUBNET UP"). For each
// kind and count, on a fresh ibsim fabric (two-switch-4hca), the bench writes
// a dump of N records as OpenSM writes them, starts OpenSM on Hca1 alone with
// sa_db_file pointing at it, and takes, from OpenSM's own log, the time from
// "Entering MASTER state" to "SUBNET UP": the SA outage a takeover with that
// copy has (a lone OpenSM's first master sweep is a takeover's). N = 0 is the
// sweep alone.
//
//   services  N ServiceRecords registered by one port (distinct service IDs)
//   informs   N InformInfo subscriptions of one port (distinct subscriber_enum)
//   groups    N multicast groups, each with the fabric's 4 CA ports as full members
//   defaults  a copy at every default bound (opensm::SaDumpBounds) at once:
//             ServiceRecords and subscriptions from ports of 64 records each,
//             and the groups as above (N is ignored)
//
// The dump is also checked with smha's parser (opensm::parse_sa_dump) and
// its trimmer at the default bounds, so the table shows what a copy carries.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "ibsim_harness.hpp"
#include "smha/opensm/sa_dump.hpp"

namespace {

using namespace std::chrono_literals;
using smha::testing::IbsimFabric;
using smha::testing::OpensmSpec;

std::string service(std::uint64_t guid, std::uint64_t id) {
  char b[1024];
  std::snprintf(b, sizeof b,
                "Service Record: id=0x%016llx gid=0xfe80000000000000:0x%016llx pkey=0xffff lease=0xffffffff "
                "key=0x0000000000000000:0x0000000000000000 name='bench-%llu' data8=0x0000000000000000:"
                "0x0000000000000000 data16=0x0000000000000000:0x0000000000000000 data32=0x0000000000000000:"
                "0x0000000000000000 data64=0x0000000000000000:0x0000000000000000 modified_time=0x0 "
                "lease_period=0xffffffff\n\n",
                static_cast<unsigned long long>(0x10000ce200000000ULL + id), static_cast<unsigned long long>(guid),
                static_cast<unsigned long long>(id));
  return b;
}

std::string inform(std::uint64_t guid, unsigned n) {
  char b[1024];
  std::snprintf(b, sizeof b,
                "InformInfo Record: subscriber_gid=0xfe80000000000000:0x%016llx subscriber_enum=0x%x InformInfo: "
                "gid=0x0000000000000000:0x0000000000000000 lid_range_begin=0xffff lid_range_end=0x0 is_generic=0x1 "
                "subscribe=0x1 trap_type=0xffff trap_num=0x%x qpn_resp_time_val=0x100 node_type=0x000004 rep_addr: "
                "lid=0x0003 path_bits=0x00 static_rate=0x00 remote_qp=0x00000001 remote_qkey=0x00000000 "
                "pkey_ix=0x0000 sl=0x00\n\n",
                static_cast<unsigned long long>(guid), n & 0xffff, 0x40 + (n >> 16));
  return b;
}

std::string group(unsigned i, const std::vector<std::uint64_t>& members) {
  const unsigned mlid = 0xc000 + i;
  char b[1024];
  std::snprintf(b, sizeof b,
                "MC Group 0x%04x : mgid=0xff12601bffff0000:0x00000001ff%06x port_gid=0xfe80000000000000:0x%016llx "
                "qkey=0x00000b1b mlid=0x%04x mtu=0x84 tclass=0x00 pkey=0xffff rate=0x83 pkt_life=0x80 "
                "sl_flow_hop=0x00000000 scope_state=0x21 proxy_join=0x0\n\n",
                mlid, i, static_cast<unsigned long long>(members.front()), mlid);
  std::string s = b;
  for (auto m : members) {
    std::snprintf(b, sizeof b, "mcm_port: port_gid=0xfe80000000000000:0x%016llx scope_state=0x21 proxy_join=0x0\n\n",
                  static_cast<unsigned long long>(m));
    s += b;
  }
  return s;
}

// "Dec 07 15:40:01 123456 [..] 0x02 -> text": the time of day in microseconds.
std::optional<long long> stamp_of(const std::string& line) {
  int h = 0, m = 0, s = 0;
  long us = 0;
  char mon[4];
  int day = 0;
  if (std::sscanf(line.c_str(), "%3s %d %d:%d:%d %ld", mon, &day, &h, &m, &s, &us) != 6) return std::nullopt;
  return ((h * 60LL + m) * 60 + s) * 1000000 + us;
}

std::optional<long long> first_stamp(const std::string& log, const std::string& needle) {
  const auto at = log.find(needle);
  if (at == std::string::npos) return std::nullopt;
  const auto begin = log.rfind('\n', at);
  return stamp_of(log.substr(begin == std::string::npos ? 0 : begin + 1));
}

struct Run {
  double outage_ms = 0;  // MASTER -> SUBNET UP
  std::size_t bytes = 0;
  std::size_t records = 0;
  std::size_t kept = 0;  // records a copy carries at the default bounds
  bool parse_errors = false;
};

Run run_one(const std::string& kind, std::size_t n) {
  IbsimFabric f(smha::testing::topology_path("two-switch-4hca.net"));
  std::vector<std::uint64_t> ports;
  for (const char* node : {"Hca1", "Hca2", "Hca3", "Hca4"}) {
    auto p = f.node_port(node);
    if (!p) throw std::runtime_error(std::string("no port at ") + node);
    ports.push_back(p->port_guid);
  }
  std::string text;
  if (kind == "defaults") {
    const smha::opensm::SaDumpBounds b;
    for (std::size_t i = 0; i < b.groups; ++i) text += group(static_cast<unsigned>(i), ports);
    for (std::size_t i = 0; i < b.informs; ++i)
      text += inform(0x0002c90300100000ULL + i / b.informs_per_port, static_cast<unsigned>(i));
    for (std::size_t i = 0; i < b.services; ++i) text += service(0x0002c90300100000ULL + i / b.services_per_port, i);
    n = b.groups + b.informs + b.services;
  }
  for (std::size_t i = 0; kind != "defaults" && i < n; ++i) {
    if (kind == "services") text += service(ports[2], i);
    else if (kind == "informs") text += inform(ports[2], static_cast<unsigned>(i));
    else text += group(static_cast<unsigned>(i), ports);
  }
  Run r;
  r.bytes = text.size();
  r.records = n;
  auto parsed = smha::opensm::parse_sa_dump(text);
  if (!parsed) throw std::runtime_error("the synthetic dump does not parse: " + parsed.error().message);
  const auto t = smha::opensm::trim_sa_dump(text, smha::opensm::SaDumpBounds{});
  auto left = smha::opensm::parse_sa_dump(t.text);
  r.kept = kind == "services"  ? left->services
           : kind == "informs" ? left->informs
           : kind == "groups"  ? left->groups.size()
                               : left->services + left->informs + left->groups.size();
  const std::string path = f.scratch_dir() + "/sa-db.dump";
  std::ofstream(path) << text;
  OpensmSpec spec;
  spec.node = "Hca1";
  spec.priority = 15;
  spec.conf_lines = {"sa_db_file " + path};
  const int idx = f.start_opensm(spec);
  if (!f.wait_subnet_up(idx, 300s)) throw std::runtime_error("no SUBNET UP within 300 s");
  const std::string log = f.log_text(idx);
  const auto master = first_stamp(log, "Entering MASTER state");
  const auto up = first_stamp(log, "SUBNET UP");
  if (!master || !up) throw std::runtime_error("no MASTER or SUBNET UP line with a time in " + f.log_path(idx));
  r.outage_ms = static_cast<double>(*up - *master) / 1000.0;
  r.parse_errors = log.find("PARSE ERROR") != std::string::npos;
  return r;
}

std::vector<std::size_t> parse_counts(const std::string& s) {
  std::vector<std::size_t> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoul(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_sa_load: OpenSM's SA outage at a takeover against the records of its SA database copy"};
  std::string kinds = "services,informs,groups";
  std::string counts = "0,1000,5000,10000,20000";
  int runs = 1;
  app.add_option("--kinds", kinds, "services, informs, groups (comma-separated)");
  app.add_option("--counts", counts, "record counts (comma-separated)");
  app.add_option("--runs", runs, "runs per cell (the median is shown)")->check(CLI::Range(1, 20));
  CLI11_PARSE(app, argc, argv);
  std::printf("| kind | records | dump | MASTER -> SUBNET UP (median of %d) | kept at the default bounds | loader |\n", runs);
  std::printf("|---|---:|---:|---:|---:|---|\n");
  std::stringstream ks(kinds);
  for (std::string kind; std::getline(ks, kind, ',');) {
    if (kind != "services" && kind != "informs" && kind != "groups" && kind != "defaults") {
      std::fprintf(stderr, "unknown kind %s\n", kind.c_str());
      return 2;
    }
    for (std::size_t n : parse_counts(counts)) {
      std::vector<double> ms;
      Run last;
      try {
        for (int i = 0; i < runs; ++i) {
          last = run_one(kind, n);
          ms.push_back(last.outage_ms);
        }
      } catch (const std::exception& e) {
        std::printf("| %s | %zu | | failed: %s | | |\n", kind.c_str(), n, e.what());
        std::fflush(stdout);
        continue;
      }
      std::sort(ms.begin(), ms.end());
      std::printf("| %s | %zu | %.1f MB | %.0f ms | %zu | %s |\n", kind.c_str(), last.records,
                  static_cast<double>(last.bytes) / 1e6,
                  ms[ms.size() / 2], last.kept, last.parse_errors ? "PARSE ERROR" : "ok");
      std::fflush(stdout);
    }
  }
  return 0;
}
