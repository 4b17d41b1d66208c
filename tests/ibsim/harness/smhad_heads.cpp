// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smhad_heads.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "smha/control/client.hpp"
#include "smha_yaml.hpp"

namespace smha::testing {

using nlohmann::json;
using namespace std::chrono_literals;

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

bool pid_running(int pid) {
  auto s = proc_stat(pid);
  return s && s->state != 'Z' && s->state != 'X';
}

bool wait_for(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kWaitStep);
  }
}

void OsmGuard::add(int pid) {
  if (pid <= 0 || pids_.count(pid)) return;
  if (auto s = proc_stat(pid)) pids_[pid] = s->start;
}

void OsmGuard::add_pidfile(const std::string& path) { pidfiles_.push_back(path); }

void OsmGuard::watch(IbsimFabric& fabric, int smhad_pidx, const std::string& pidfile) {
  smhads_.emplace_back(&fabric, smhad_pidx);
  add_pidfile(pidfile);
}

OsmGuard::~OsmGuard() {
  for (auto [fabric, pidx] : smhads_)
    if (fabric->process_running(pidx)) fabric->stop_process(pidx, SIGTERM);
  for (const auto& path : pidfiles_) {
    std::istringstream in(read_file(path));
    int pid = 0;
    unsigned long long start = 0;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("pid=", 0) == 0) pid = std::atoi(line.c_str() + 4);
      if (line.rfind("start_time=", 0) == 0) start = std::strtoull(line.c_str() + 11, nullptr, 10);
    }
    if (pid > 0 && !pids_.count(pid)) pids_[pid] = start;
  }
  for (auto [pid, start] : pids_) {
    auto s = proc_stat(pid);
    if (!s || s->start != start) continue;
    ::kill(pid, SIGKILL);
    ::kill(pid, SIGCONT);
    wait_for([pid = pid] { return !pid_running(pid); }, 5s);
  }
}

MasterView query_sm(IbsimFabric& fabric, const std::string& node, std::optional<int> lid,
                    std::chrono::milliseconds timeout) {
  std::vector<std::string> argv{"sminfo"};
  if (lid) argv.push_back(std::to_string(*lid));
  const auto r = fabric.run(node, argv, timeout);
  MasterView v;
  const auto pos = r.out.find("sm guid ");
  unsigned long long g = 0;
  int prio = -1, state = -1;
  if (r.exit_code == 0 && pos != std::string::npos &&
      std::sscanf(r.out.c_str() + pos, "sm guid 0x%llx, activity count %*u priority %d state %d", &g, &prio,
                  &state) == 3) {
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
    if (std::sscanf(line.c_str(), "Client %d: pid %d", &client, &client_pid) == 2 && client_pid == pid)
      fabric.console("X " + std::to_string(client));
  }
}

std::set<std::pair<std::uint64_t, int>> iblinkinfo_links(IbsimFabric& fabric, const std::string& node,
                                                          const std::string& width, std::chrono::milliseconds timeout) {
  const auto r = fabric.run(node, {"iblinkinfo", "--switches-only", "-l"}, timeout);
  if (r.exit_code != 0) throw std::runtime_error("iblinkinfo at " + node + " failed: " + r.err.substr(0, 500));
  // "0x<switch guid> \"Switch2\"   2    2[  ] ==( 1X  2.5 Gbps Active/  LinkUp)==>  ..."
  static const std::regex line(R"(^(0x[0-9a-f]+)\s+"[^"]*"\s+\d+\s+(\d+)\[\s*\]\s+==\(\s*(\d+X)\s)");
  std::set<std::pair<std::uint64_t, int>> out;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_search(l, m, line) && m[3] == width)
      out.emplace(std::stoull(m[1].str(), nullptr, 16), std::stoi(m[2].str()));
  }
  return out;
}

CounterReport ibqueryerrors_ports(IbsimFabric& fabric, const std::string& node, std::chrono::milliseconds timeout) {
  const auto r = fabric.run(node, {"ibqueryerrors"}, timeout);
  // It exits 1 when it found ports with errors, having printed its summary.
  if ((r.exit_code != 0 && r.exit_code != 1) || r.out.find("## Summary:") == std::string::npos)
    throw std::runtime_error("ibqueryerrors at " + node + " failed (exit " + std::to_string(r.exit_code) +
                             "): " + r.err.substr(0, 500));
  // Errors for 0x200001 "Switch2"      (a CA: Errors for "Hca4")
  //    GUID 0x200001 port 2: [SymbolErrorCounter == 25] [PortRcvErrors == 3]
  static const std::regex header(R"re(^Errors for (?:0x[0-9a-f]+ )?"([^"]*)")re");
  static const std::regex port_line(R"(^\s+GUID 0x[0-9a-f]+ port (\d+):(.*)$)");
  static const std::regex counter(R"(\[(\w+) == (\d+)\])");
  CounterReport out;
  std::string current;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_search(l, m, header)) {
      current = m[1].str();
    } else if (std::regex_search(l, m, port_line)) {
      auto& counters = out[{current, std::stoi(m[1].str())}];
      const std::string rest = m[2].str();
      for (std::sregex_iterator it(rest.begin(), rest.end(), counter), end; it != end; ++it)
        counters[(*it)[1].str()] = std::stoull((*it)[2].str());
    }
  }
  return out;
}

std::string hex_guid(std::uint64_t v) { return test::HeadYaml::hex(v); }

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket: " + std::string(std::strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  if (!ok) throw std::runtime_error("no free TCP port on 127.0.0.1");
  return ntohs(a.sin_port);
}

void write_smhad_config(const SmhadHead& h, const std::vector<PeerCfg>& peers, const SmhadOptions& o) {
  test::HeadYaml y;
  y.dir = h.dir;
  y.name = h.name;
  y.guid = h.guid;
  y.peers.clear();
  for (const auto& p : peers) y.peers.push_back(test::YamlPeer{p.name, p.guid, p.lid, p.dr_path, p.address});
  y.sm_priority = o.sm_priority;
  y.poll_interval_ms = o.poll_interval_ms;
  y.misses = o.misses;
  y.failback = o.failback;
  y.preempt_holddown_s = o.preempt_holddown_s;
  y.opensm_log_file = o.opensm_log_file;
  y.dump_files_dir = true;
  y.opensm_extra = o.opensm_extra;
  y.state_dir = h.state_dir();
  y.extra = o.extra;
  y.write(h.yaml());
}

void start_smhad(IbsimFabric& f, SmhadHead& h, const std::string& smhad_binary,
                 std::vector<std::pair<std::string, std::string>> extra_env, OsmGuard* guard) {
  // smhad and the OpenSM it starts get the kernel's send timeouts (the umad
  // timeout shim) unless the caller preloads its own set (e.g. the loss
  // shim's, which includes it): under plain umad2sim a MAD nobody answers
  // never completes, and an OpenSM sweep that sent one (e.g. to a peer SM
  // still starting) waits forever — no SIGHUP is applied after that.
  const bool preload = std::any_of(extra_env.begin(), extra_env.end(),
                                   [](const auto& kv) { return kv.first == "LD_PRELOAD"; });
  if (!preload) extra_env.emplace_back("LD_PRELOAD", umad_timeout_shim_preload());
  h.pidx = f.spawn(h.node, {smhad_binary, "-c", h.yaml(), "--log-target", "stderr"}, std::move(extra_env));
  if (guard) guard->watch(f, h.pidx, h.pidfile());
}

std::optional<control::Reply> smhad_call(const SmhadHead& h, const std::string& method, const json& params,
                                         std::chrono::milliseconds timeout) {
  auto c = control::ControlClient::connect(h.socket(), 500ms);
  if (!c) return std::nullopt;
  auto r = c.value().call(method, params, timeout);
  if (!r) return std::nullopt;
  return std::move(r).value();
}

namespace {
std::optional<json> call(const SmhadHead& h, const std::string& method, const json& params) {
  auto r = smhad_call(h, method, params, 2s);
  if (!r || !r->is_ok()) return std::nullopt;
  return r->data;
}
}  // namespace

std::optional<json> smhad_status(const SmhadHead& h) { return call(h, "status", json::object()); }

std::optional<json> smhad_events(const SmhadHead& h, int n) {
  auto d = call(h, "events", json{{"n", n}});
  if (!d || !d->contains("events")) return std::nullopt;
  return (*d)["events"];
}

std::string smhad_log(IbsimFabric& f, const SmhadHead& h) {
  std::string e = f.process_stderr(h.pidx) + f.process_stdout(h.pidx);
  return e.size() > 4000 ? e.substr(e.size() - 4000) : e;
}

bool wait_status(IbsimFabric& f, const SmhadHead& h, OsmGuard& guard,
                 const std::function<bool(const json&)>& pred, std::chrono::milliseconds timeout, json* last) {
  return wait_for([&] {
    if (!f.process_running(h.pidx)) return false;
    auto s = smhad_status(h);
    if (!s) return false;
    if (s->contains("opensm")) guard.add((*s)["opensm"].value("pid", 0));
    if (last) *last = *s;
    return pred(*s);
  }, timeout);
}

bool local_master(const json& s) {
  return s["local"]["state"] == "MASTER" && s["opensm"]["supervisor"] == "running";
}

std::string start_master_standby(IbsimFabric& f, OsmGuard& guard, SmhadHead& h1, SmhadHead& h2, json& s1,
                                 json& s2, const std::string& smhad_binary, bool watch) {
  start_smhad(f, h1, smhad_binary, {}, watch ? &guard : nullptr);
  if (!wait_status(f, h1, guard, local_master, 30s, &s1))
    return h1.name + " not MASTER: " + s1.dump() + "\n" + smhad_log(f, h1);
  start_smhad(f, h2, smhad_binary, {}, watch ? &guard : nullptr);
  if (!wait_status(f, h2, guard, [](const json& j) {
        return j["local"]["state"] == "STANDBY" && j["peers"][0]["state"] == "MASTER";
      }, 30s, &s2))
    return h2.name + " not STANDBY seeing " + h1.name + " MASTER: " + s2.dump() + "\n" + smhad_log(f, h2);
  return {};
}

}  // namespace smha::testing
