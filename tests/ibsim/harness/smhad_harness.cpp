#include "smhad_harness.hpp"

#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "smha/control/client.hpp"
#include "smha/opensm/process_identity.hpp"

namespace smha::testing {

using namespace std::chrono_literals;
using nlohmann::json;

std::optional<ProcStat> proc_stat(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  const auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 2));
  ProcStat s;
  rest >> s.state;
  std::string skip;
  for (int i = 0; i < 18; ++i) rest >> skip;  // fields 4..21
  rest >> s.start;
  return s;
}

bool running(int pid) {
  auto s = proc_stat(pid);
  return s && s->state != 'Z' && s->state != 'X';
}

bool wait_for(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
}

void OsmGuard::add(int pid) {
  if (pid <= 0 || pids_.count(pid)) return;
  if (auto s = proc_stat(pid)) pids_[pid] = s->start;
}

void OsmGuard::watch(IbsimFabric& fabric, int smhad_pidx, const std::string& pidfile) {
  watched_.push_back({&fabric, smhad_pidx, pidfile});
}

OsmGuard::~OsmGuard() {
  for (const auto& w : watched_) {
    if (w.fabric->process_running(w.pidx)) w.fabric->stop_process(w.pidx, SIGTERM);
  }
  for (const auto& w : watched_) {
    auto id = opensm::parse_pidfile(read_file(w.pidfile));
    if (id && id.value().pid > 0 && !pids_.count(id.value().pid))
      pids_[id.value().pid] = id.value().start_time;
  }
  for (auto [pid, start] : pids_) {
    auto s = proc_stat(pid);
    if (!s || s->start != start) continue;
    ::kill(pid, SIGKILL);
    wait_for([pid = pid] { return !running(pid); }, 5s);
  }
}

MasterView query_master(IbsimFabric& fabric, const std::string& node) {
  const auto r = fabric.run(node, {"sminfo"}, 10s);
  MasterView v;
  const auto pos = r.out.find("sm guid ");
  unsigned long long g = 0;
  int prio = -1, state = -1;
  if (r.exit_code == 0 && pos != std::string::npos &&
      std::sscanf(r.out.c_str() + pos, "sm guid 0x%llx, activity count %*u priority %d state %d", &g,
                  &prio, &state) == 3) {
    v.guid = g;
    v.priority = prio;
    v.state = state;
  }
  return v;
}

void free_ibsim_slot(IbsimFabric& fabric, int pid) {
  std::istringstream lines(fabric.console_query("Attached"));
  for (std::string line; std::getline(lines, line);) {
    int client = -1, client_pid = -1;
    if (std::sscanf(line.c_str(), "Client %d: pid %d", &client, &client_pid) == 2 &&
        client_pid == pid)
      fabric.console("X " + std::to_string(client));
  }
}

std::string hex(std::uint64_t v) {
  char b[32];
  std::snprintf(b, sizeof b, "0x%016llx", static_cast<unsigned long long>(v));
  return b;
}

void write_config(const Head& h, int priority, const std::vector<PeerCfg>& peers,
                  const ConfigExtras& extras) {
  std::filesystem::create_directories(h.dir + "/ctl");
  std::ofstream y(h.yaml());
  y << "node:\n  name: " << h.name << "\n  port_guid: " << hex(h.guid) << "\n";
  y << "peers:\n";
  for (const auto& p : peers)
    y << "  - name: " << p.name << "\n    port_guid: " << hex(p.guid) << "\n    lid: " << p.lid
      << "\n";
  y << "sm_priority: " << priority << "\n";
  y << "failover:\n  poll_interval_ms: 200\n  misses_before_takeover: 3\n";
  y << "opensm:\n  dump_files_dir: " << h.dir << "/\n  cache_dir: " << h.dir
    << "/cache\n  conf_path: " << h.dir << "/opensm.conf\n";
  if (extras.opensm.find("  log_file:") == std::string::npos)
    y << "  log_file: " << h.dir << "/opensm.log\n";
  y << extras.opensm;
  y << "control:\n  socket: " << h.socket() << "\n  group: root\n";
  y << "state_dir: " << h.dir << "/state\n";
  y << extras.top;
}

std::optional<json> smhad_status(const Head& h) {
  auto c = control::ControlClient::connect(h.socket(), 500ms);
  if (!c) return std::nullopt;
  auto r = c.value().call("status", json::object(), 2s);
  if (!r || !r.value().is_ok()) return std::nullopt;
  return r.value().data;
}

std::string smhad_log(IbsimFabric& f, const Head& h) {
  std::string e = f.process_stderr(h.pidx) + f.process_stdout(h.pidx);
  return e.size() > 4000 ? e.substr(e.size() - 4000) : e;
}

void start_smhad(IbsimFabric& f, Head& h,
                 std::vector<std::pair<std::string, std::string>> extra_env, OsmGuard* guard) {
  h.pidx = f.spawn(h.node, {SMHA_SMHAD, "-c", h.yaml(), "--log-target", "stderr"},
                   std::move(extra_env));
  if (guard) guard->watch(f, h.pidx, h.dir + "/state/opensm.pid");
}

bool wait_status(IbsimFabric& f, const Head& h, OsmGuard& guard,
                 const std::function<bool(const json&)>& pred, std::chrono::milliseconds timeout,
                 json* last) {
  return wait_for(
      [&] {
        if (!f.process_running(h.pidx)) return false;
        auto s = smhad_status(h);
        if (!s) return false;
        if (s->contains("opensm")) guard.add((*s)["opensm"].value("pid", 0));
        if (last) *last = *s;
        return pred(*s);
      },
      timeout);
}

bool local_master(const json& s) {
  return s["local"]["state"] == "MASTER" && s["opensm"]["supervisor"] == "running";
}

}  // namespace smha::testing
