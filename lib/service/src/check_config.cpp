// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/service/check_config.hpp"

#include <algorithm>
#include <ostream>

#include "smha/config/keys.hpp"
#include "smha/core/state_dir.hpp"
#include "smha/head/plan.hpp"
#include "smha/mad/umad_transport.hpp"
#include "smha/opensm/check.hpp"
#include "smha/os/asio_scheduler.hpp"
#include "smha/peer/tls_files.hpp"
#include "smha/service/hook_dispatcher.hpp"
#include "smha/service/instances.hpp"

namespace smha::service {

std::optional<fabric::DiscoveryResult> probe_routes(const config::Config& cfg) {
  boost::asio::io_context io;
  SteadyClock clock;
  mad::PortSelector sel;
  sel.ca = cfg.port.ca;
  sel.port = cfg.port.port;
  sel.guid = cfg.port.port_guid;
  auto transport = mad::UmadTransport::open(io, sel, clock);
  if (!transport) return std::nullopt;
  os::AsioScheduler sched(io, clock);
  fabric::Discovery discovery(sched, **transport);
  std::vector<Guid> targets;
  std::vector<DrPath> hints;  // a configured dr_path that leads to its peer is found there first
  for (const auto& p : cfg.peers) {
    targets.push_back(p.port_guid);
    if (p.dr_path) hints.push_back(*p.dr_path);
  }
  std::optional<fabric::DiscoveryResult> out;
  discovery.start(targets, [&out](const fabric::DiscoveryResult& r) { out = r; }, hints);
  while (!out && io.run_one() > 0) {
  }
  return out;
}

std::vector<config::Diagnostic> route_warnings(const config::Config& cfg,
                                               const fabric::DiscoveryResult& found) {
  std::vector<config::Diagnostic> w;
  for (std::size_t i = 0; i < cfg.peers.size(); ++i) {
    const auto& p = cfg.peers[i];
    const std::string at = "peers[" + std::to_string(i) + "]";
    auto it = found.found.find(p.port_guid);
    if (it == found.found.end()) {
      w.push_back(config::Diagnostic{cfg.source_path, cfg.position_of(at + ".port_guid"), at + ".port_guid",
                                     "peer " + p.name + " (" + to_string(p.port_guid) +
                                         ") is on no port of the fabric: " + fabric::not_found_text(found)});
      continue;
    }
    const auto& r = it->second;
    if (p.lid && r.lid_known && r.lid.value != 0 && r.lid != *p.lid)  // 0: no LID assigned yet
      w.push_back(config::Diagnostic{cfg.source_path, cfg.position_of(at + ".lid"), at + ".lid",
                                     "peer " + p.name + " is at LID " + std::to_string(r.lid.value) +
                                         ", not " + std::to_string(p.lid->value) +
                                         " (directed-route discovery)"});
    if (p.dr_path && *p.dr_path != r.path)
      w.push_back(config::Diagnostic{cfg.source_path, cfg.position_of(at + ".dr_path"), at + ".dr_path",
                                     "peer " + p.name + " is at directed route " + to_string(r.path) +
                                         ", not " + to_string(*p.dr_path) + " (directed-route discovery)"});
  }
  return w;
}

int run_check_config(const std::string& path, opensm::OpensmRunner& runner, std::ostream& out,
                     std::ostream& err, const RouteProbe& probe, const config::LoadOptions& load) {
  auto loaded = config::load_config(path, load);
  if (!loaded.ok()) {  // nothing below can be checked without a Config
    for (const auto& e : loaded.errors()) err << "error: " << e.to_string() << '\n';
    err << path << ": " << loaded.errors().size() << " error(s)\n";
    return 1;
  }
  const config::Config& cfg = loaded.value();
  // Every check runs whatever the others found, so one run shows every problem.
  const opensm::CheckReport report = opensm::check_loaded_config(cfg, runner);
  std::vector<std::string> errors;
  for (const auto& e : report.errors) errors.push_back(e.to_string());
  if (auto st = HookDispatcher::check(cfg); !st.ok()) errors.push_back(path + ": " + st.error().message);
  // state_dir: what start-up creates and writes (nothing is created here).
  if (auto st = check_writable_dir(cfg.state_dir, false); !st.ok())
    errors.push_back(path + ": state_dir " + cfg.state_dir + " is not usable: " + st.error().message);
  for (const auto& m : instance_conflicts(cfg)) errors.push_back(path + ": " + m);
  // Every key the file sets is one of the key table's (config::key_table):
  // how a reload applies it is known. The loader takes its keys from the
  // table, so this holds unless the two part.
  for (const auto& [written, pos] : cfg.positions)
    if (config::find_key(config::table_path(written)) == nullptr)
      errors.push_back(config::Diagnostic{path, pos, written, "not in smhad's key table: a reload would not know it"}
                           .to_string());
  // The peer channel's certificate, key and CA: the check start-up makes
  // before the channel listens (peer::load_tls_files), so a missing file or a
  // key others can read fails here too, not only at the next start.
  if (const auto& k = cfg.continuity; k.enabled)
    if (auto st = peer::check_tls_files({k.certificate, k.private_key, k.ca}); !st.ok())
      errors.push_back(path + ": " + st.error().message);
  // The HA policy start-up builds from the file (map_config, sm::validate).
  // Without node.port_guid start-up takes the GUID of the opened port; here a
  // stand-in that no peer uses.
  Guid own{1};
  for (const auto& peer : cfg.peers) own = Guid{std::max(own.value, peer.port_guid.value + 1)};
  if (auto mapped = head::map_config(cfg, cfg.port.port_guid.value_or(own)); !mapped)
    errors.push_back(mapped.error().message);
  for (const auto& w : report.warnings) err << "warning: " << w.to_string() << '\n';
  for (const auto& e : errors) err << "error: " << e << '\n';
  if (!errors.empty()) {
    err << path << ": " << errors.size() << " error(s)\n";
    return 1;
  }
  if (probe)
    if (auto found = probe(cfg))
      for (const auto& d : route_warnings(cfg, *found)) err << "warning: " << d.to_string() << '\n';
  out << path << ": OK for " << report.capabilities->describe() << '\n';
  return 0;
}

}  // namespace smha::service
