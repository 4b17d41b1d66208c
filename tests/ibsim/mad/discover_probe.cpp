// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// discover_probe: runs smha's directed-route discovery (lib/agent/discovery)
// over UmadTransport once, for the ibsim tier and doc/discovery.md's figures.
//
//   discover_probe [--in-flight N] [--max-requests N] [--timeout-ms N] PORT_GUID...
//
// Prints one JSON object: wall-clock ms, requests, MADs, nodes and ports
// searched, counters, and per target either {"path","lid","description",...}
// or {"missing":true,"status":"not found (...)"}. Exit 0 if the port opened,
// 5 if not, 2 on bad arguments.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "smha/fabric/discovery.hpp"
#include "smha/core/text.hpp"
#include "smha/mad/smp.hpp"
#include "smha/mad/umad_transport.hpp"

using namespace smha;

namespace {

class Sched final : public Scheduler {
 public:
  Sched(boost::asio::io_context& io, const Clock& clock) : io_(io), clock_(clock) {}
  TimePoint now() const override { return clock_.now(); }
  TimerId schedule_at(TimePoint when, std::function<void()> fn) override {
    const TimerId id = next_++;
    auto t = std::make_unique<boost::asio::steady_timer>(io_);
    t->expires_after(std::max(Duration::zero(), when - now()));
    t->async_wait([this, id, fn = std::move(fn)](const boost::system::error_code& ec) {
      if (ec) return;
      timers_.erase(id);
      fn();
    });
    timers_[id] = std::move(t);
    return id;
  }
  void cancel(TimerId id) override { timers_.erase(id); }

 private:
  boost::asio::io_context& io_;
  const Clock& clock_;
  TimerId next_ = 1;
  std::map<TimerId, std::unique_ptr<boost::asio::steady_timer>> timers_;
};

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  fabric::DiscoveryLimits limits;
  std::vector<Guid> targets;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto num = [&](const char* what) -> long {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "discover_probe: %s needs a value\n", what);
        std::exit(2);
      }
      return std::strtol(argv[++i], nullptr, 10);
    };
    if (a == "--in-flight") limits.in_flight = static_cast<int>(num("--in-flight"));
    else if (a == "--max-requests") limits.max_requests = static_cast<std::uint64_t>(num("--max-requests"));
    else if (a == "--timeout-ms") limits.request.timeout = milliseconds(num("--timeout-ms"));
    else {
      auto g = parse_guid(a);
      if (!g) {
        std::fprintf(stderr, "discover_probe: '%s' is not a port GUID\n", a.c_str());
        return 2;
      }
      targets.push_back(*g);
    }
  }
  boost::asio::io_context io;
  SteadyClock clock;
  auto transport = mad::UmadTransport::open(io, mad::PortSelector{}, clock);
  if (!transport) {
    std::fprintf(stderr, "discover_probe: %s\n", transport.error().message.c_str());
    return 5;
  }
  Sched sched(io, clock);
  fabric::Discovery d(sched, **transport, limits);
  std::optional<fabric::DiscoveryResult> out;
  const auto t0 = std::chrono::steady_clock::now();
  d.start(targets, [&out](const fabric::DiscoveryResult& r) { out = r; });
  while (!out && io.run_one() > 0) {
  }
  const double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!out) {
    std::fprintf(stderr, "discover_probe: the event loop ran dry\n");
    return 1;
  }
  nlohmann::json j;
  j["wall_ms"] = wall_ms;
  j["requests"] = out->requests;
  j["mads"] = out->mads;
  j["nodes"] = out->nodes;
  j["ports"] = out->ports;
  j["timeouts"] = out->timeouts;
  j["refused"] = out->refused;
  j["malformed"] = out->malformed;
  j["revisits"] = out->revisits;
  j["request_bound"] = out->request_bound;
  j["hop_bound"] = out->hop_bound;
  for (Guid g : targets) {
    auto it = out->found.find(g);
    if (it == out->found.end()) {
      j["targets"][hex(g.value)] = {{"missing", true}, {"status", fabric::not_found_text(*out)}};
      continue;
    }
    const auto& p = it->second;
    j["targets"][hex(g.value)] = {{"path", to_string(p.path)},
                                  {"lid", p.lid.value},
                                  {"lid_known", p.lid_known},
                                  {"node_guid", hex(p.node_guid.value)},
                                  {"port", p.port_num},
                                  {"description", smha::printable(p.description)}};
  }
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
