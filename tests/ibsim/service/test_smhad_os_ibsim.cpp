// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smhad's operating-system side, through the real smhad binary under ibsim:
// sd_notify (READY/STATUS/WATCHDOG/RELOADING/STOPPING on a NOTIFY_SOCKET the test
// binds), notify hooks run on role changes, and OpenSM start failures / crash
// loops reported without respawning forever. Every process is stopped by PID
// (smhad by the fabric, the OpenSMs it started by OsmGuard).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "smha/control/client.hpp"
#include "smhad_heads.hpp"

using namespace smha;
using namespace smha::testing;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

using Head = SmhadHead;

// Extra YAML: lines inside the opensm: map and top-level lines.
struct ConfigExtras {
  std::string opensm;
  std::string top;
};
void write_config(const Head& h, int priority, const std::vector<PeerCfg>& peers,
                  const ConfigExtras& extras = {}) {
  SmhadOptions o;
  o.sm_priority = priority;
  o.opensm_extra = extras.opensm;
  o.extra = extras.top;
  write_smhad_config(h, peers, o);
}
void start_smhad(IbsimFabric& f, Head& h, std::vector<std::pair<std::string, std::string>> env,
                 OsmGuard* guard) {
  smha::testing::start_smhad(f, h, SMHA_SMHAD, std::move(env), guard);
}


// The receiving end systemd would hold: an AF_UNIX datagram socket bound to a
// path. Every datagram is kept with its arrival time.
class NotifyListener {
 public:
  struct Message {
    std::chrono::steady_clock::time_point at;
    std::string text;
  };

  explicit NotifyListener(std::string path) : path_(std::move(path)) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    REQUIRE(path_.size() < sizeof(addr.sun_path));
    std::memcpy(addr.sun_path, path_.data(), path_.size());
    REQUIRE(::bind(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~NotifyListener() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  NotifyListener(const NotifyListener&) = delete;
  NotifyListener& operator=(const NotifyListener&) = delete;

  const std::string& path() const { return path_; }

  // Receives what arrives within `timeout` (at most until the first datagram
  // after which `until` holds); returns whether `until` became true.
  bool receive_until(const std::function<bool(const Message&)>& until,
                     std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      const auto left = deadline - std::chrono::steady_clock::now();
      if (left <= 0ms) return false;
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(left).count();
      timeval tv{static_cast<time_t>(us / 1000000), static_cast<suseconds_t>(us % 1000000)};
      REQUIRE(::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n < 0) {
        REQUIRE((errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
        continue;
      }
      messages_.push_back({std::chrono::steady_clock::now(), std::string(buf, static_cast<std::size_t>(n))});
      if (until(messages_.back())) return true;
    }
  }
  // Everything received during `window`.
  void collect_for(std::chrono::milliseconds window) {
    receive_until([](const Message&) { return false; }, window);
  }

  const std::vector<Message>& messages() const { return messages_; }
  std::size_t size() const { return messages_.size(); }
  // Messages from index `from` on containing `needle`.
  std::vector<Message> matching(const std::string& needle, std::size_t from = 0) const {
    std::vector<Message> out;
    for (std::size_t i = from; i < messages_.size(); ++i)
      if (messages_[i].text.find(needle) != std::string::npos) out.push_back(messages_[i]);
    return out;
  }
  std::string dump() const {
    std::string out;
    for (const auto& m : messages_) out += "  [" + m.text + "]\n";
    return out;
  }

 private:
  std::string path_;
  int fd_ = -1;
  std::vector<Message> messages_;
};

bool has(const NotifyListener::Message& m, const std::string& needle) {
  return m.text.find(needle) != std::string::npos;
}

// Median gap between consecutive messages, in ms.
double median_gap_ms(const std::vector<NotifyListener::Message>& ms) {
  std::vector<double> gaps;
  for (std::size_t i = 1; i < ms.size(); ++i)
    gaps.push_back(std::chrono::duration<double, std::milli>(ms[i].at - ms[i - 1].at).count());
  if (gaps.empty()) return -1;
  std::sort(gaps.begin(), gaps.end());
  return gaps[gaps.size() / 2];
}

bool has_alarm(const json& s, const std::string& kind) {
  for (const auto& a : s["alarms"])
    if (a["kind"] == kind) return true;
  return false;
}

}  // namespace

TEST_CASE("smhad under a NOTIFY_SOCKET: READY after the first poll round and STATUS with the role "
          "and WATCHDOG at half of WATCHDOG_USEC and none from a stopped loop and RELOADING and "
          "STOPPING",
          "[ibsim][smhad][systemd]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  const auto hca1 = fabric.node_port("Hca1");
  const auto hca2 = fabric.node_port("Hca2");
  REQUIRE(hca1);
  REQUIRE(hca2);
  Head h{"head01", "Hca1", hca1->port_guid, fabric.scratch_dir() + "/head01"};
  // The peer is configured (GUID only) but absent (no SM on its port):
  // discovery finds its port, every poll of it is unanswered, so the status
  // shows "unreachable" once a round has finished.
  write_config(h, 10, {{"head02", hca2->port_guid, 0}});
  NotifyListener notify(fabric.scratch_dir() + "/notify.sock");
  // WatchdogSec=400ms: smhad must ping every 200 ms.
  start_smhad(fabric, h, {{"NOTIFY_SOCKET", notify.path()}, {"WATCHDOG_USEC", "400000"}}, &guard);

  // READY=1 once, carrying a STATUS that already has the first round's outcome
  // for the peer (before any round it would be "unknown").
  REQUIRE(notify.receive_until([](const auto& m) { return has(m, "READY=1"); }, 30s));
  const auto ready = notify.matching("READY=1");
  REQUIRE(ready.size() == 1);
  INFO("datagrams:\n" << notify.dump() << "smhad:\n" << smhad_log(fabric, h));
  CHECK(has(ready[0], "STATUS="));
  CHECK(has(ready[0], "peer head02 unreachable"));
  CHECK_FALSE(has(ready[0], "unknown"));
  for (const auto& m : notify.messages()) {
    if (&m == &notify.messages().back()) break;
    CHECK(m.text == "WATCHDOG=1");  // nothing but pings before READY
  }
  {
    auto s = smhad_status(h);
    REQUIRE(s);
    CHECK((*s)["rounds"].get<int>() >= 1);
  }

  // STATUS follows the role: the local SM ends MASTER (often already in READY's
  // STATUS: smhad starts OpenSM before the first round).
  const std::string master_line = "STATUS=MASTER; peer head02 unreachable";
  if (!has(ready[0], master_line))
    REQUIRE(notify.receive_until([&](const auto& m) { return has(m, master_line); }, 30s));
  json s;
  REQUIRE(wait_status(fabric, h, guard, local_master, 10s, &s));

  // kill -9 of OpenSM: the role leaves MASTER (STATUS says so) and comes back.
  const std::size_t before_kill = notify.size();
  const int first = s["opensm"]["pid"];
  REQUIRE(::kill(first, SIGKILL) == 0);
  REQUIRE(notify.receive_until(
      [&](const auto& m) { return has(m, "STATUS=") && !has(m, master_line); }, 15s));
  REQUIRE(notify.receive_until([&](const auto& m) { return has(m, master_line); }, 30s));
  CHECK(notify.matching("STATUS=", before_kill).size() >= 2);
  REQUIRE(wait_status(fabric, h, guard, [&](const json& j) { return local_master(j) && j["opensm"]["pid"] != first; }, 10s, &s));
  free_ibsim_slot(fabric, first);

  // WATCHDOG=1 every 200 ms (half of WATCHDOG_USEC), from the event loop.
  const std::size_t before_rate = notify.size();
  notify.collect_for(2000ms);
  const auto pings = notify.matching("WATCHDOG=1", before_rate);
  const double gap = median_gap_ms(pings);
  std::cout << "smhad watchdog: " << pings.size() << " pings in 2 s, median gap " << gap << " ms"
            << std::endl;
  CHECK(pings.size() >= 6);
  CHECK(pings.size() <= 12);
  CHECK(gap >= 150);
  CHECK(gap <= 300);

  // A stuck loop (SIGSTOP) sends nothing: 1 s = 5 intervals without a ping.
  REQUIRE(fabric.signal_process(h.pidx, SIGSTOP));
  REQUIRE(wait_for([&] {
    auto st = proc_stat(fabric.process_pid(h.pidx));
    return st && st->state == 'T';
  }, 5s));
  notify.collect_for(100ms);  // a ping already in flight when it stopped
  const std::size_t stopped_at = notify.size();
  notify.collect_for(1000ms);
  CHECK(notify.size() == stopped_at);
  REQUIRE(fabric.signal_process(h.pidx, SIGCONT));
  REQUIRE(notify.receive_until([](const auto& m) { return m.text == "WATCHDOG=1"; }, 2s));

  // SIGHUP: RELOADING=1, then READY=1 again.
  const std::size_t before_hup = notify.size();
  REQUIRE(fabric.signal_process(h.pidx, SIGHUP));
  REQUIRE(notify.receive_until([](const auto& m) { return has(m, "READY=1"); }, 10s));
  const auto reloading = notify.matching("RELOADING=1", before_hup);
  CHECK(reloading.size() == 1);

  // SIGTERM: STOPPING=1, exit 0.
  const std::size_t before_stop = notify.size();
  fabric.stop_process(h.pidx, SIGTERM);
  const std::string tail = smhad_log(fabric, h);
  INFO("smhad at exit:\n" << tail.substr(tail.size() > 1500 ? tail.size() - 1500 : 0));
  CHECK(fabric.process_exit_code(h.pidx).value_or(-1) == 0);
  notify.collect_for(100ms);
  CHECK(notify.matching("STOPPING=1", before_stop).size() == 1);
}

TEST_CASE("smhad runs the configured hooks on role changes and refuses a group-writable hook",
          "[ibsim][smhad][hooks]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  const auto hca1 = fabric.node_port("Hca1");
  const auto hca2 = fabric.node_port("Hca2");
  REQUIRE(hca1);
  REQUIRE(hca2);
  Head h{"head01", "Hca1", hca1->port_guid, fabric.scratch_dir() + "/head01"};
  const std::string hooks_dir = fabric.scratch_dir() + "/hooks";
  std::filesystem::create_directories(hooks_dir);
  ::chmod(fabric.scratch_dir().c_str(), 0755);
  ::chmod(hooks_dir.c_str(), 0755);
  const std::string out = fabric.scratch_dir() + "/hook.out";
  const std::string hook = hooks_dir + "/notify";
  {
    std::ofstream f(hook);
    f << "#!/bin/sh\n"
      << "echo \"argv=$* node=$SMHA_NODE event=$SMHA_EVENT new=$SMHA_NEW_STATE old=$SMHA_OLD_STATE "
         "prio=$SMHA_PRIORITY peer=$SMHA_PEER api=$SMHA_HOOK_API notify=[$NOTIFY_SOCKET] "
         "cwd=$(pwd)\" >> "
      << out << "\n";
  }
  REQUIRE(::chmod(hook.c_str(), 0755) == 0);

  // (a) A group-writable hook: smhad refuses the configuration and exits 1.
  REQUIRE(::chmod(hook.c_str(), 0775) == 0);
  const ConfigExtras extras{"", "hooks:\n  master: " + hook + "\n  standby: [" + hook +
                                    "]\n  fault: " + hook + "\nhook_timeout_s: 5\n"};
  write_config(h, 10, {{"head02", hca2->port_guid, 0}}, extras);
  start_smhad(fabric, h, {}, &guard);
  REQUIRE(wait_for([&] { return !fabric.process_running(h.pidx); }, 20s));
  CHECK(fabric.process_exit_code(h.pidx).value_or(-1) == 1);
  const std::string refused = fabric.process_stderr(h.pidx);
  INFO(refused);
  CHECK(refused.find("hooks.fault: hook '" + hook + "': writable by group or others (mode 0775)") !=
            std::string::npos);

  // (b) Mode 0755: becoming MASTER runs the master hook with the documented argv
  // and environment.
  REQUIRE(::chmod(hook.c_str(), 0755) == 0);
  start_smhad(fabric, h, {{"NOTIFY_SOCKET", fabric.scratch_dir() + "/nobody-listens"}}, &guard);
  json s;
  if (!wait_status(fabric, h, guard, local_master, 30s, &s))
    FAIL("no local MASTER: " << s.dump() << "\n" << smhad_log(fabric, h));
  std::string lines;
  REQUIRE(wait_for([&] {
    lines = read_file(out);
    return lines.find("new=MASTER") != std::string::npos;
  }, 10s));
  INFO(lines << "\nsmhad:\n" << smhad_log(fabric, h));
  std::istringstream in(lines);
  std::string master_line;
  for (std::string l; std::getline(in, l);)
    if (l.find("event=TRANSITION new=MASTER") != std::string::npos) master_line = l;
  REQUIRE_FALSE(master_line.empty());
  // argv: EVENT NEW OLD PRIORITY; the same values in the environment.
  std::istringstream words(master_line);
  std::string argv_event, argv_new, argv_old, argv_prio, env_node, env_event, env_new, env_old,
      env_prio;
  words >> argv_event >> argv_new >> argv_old >> argv_prio >> env_node >> env_event >> env_new >>
      env_old >> env_prio;
  CHECK(argv_event == "argv=TRANSITION");
  CHECK(argv_new == "MASTER");
  CHECK(argv_old != "MASTER");
  CHECK(env_node == "node=head01");
  CHECK(env_event == "event=TRANSITION");
  CHECK(env_new == "new=MASTER");
  CHECK(env_old == "old=" + argv_old);
  CHECK(env_prio == "prio=" + argv_prio);
  // The priority rendered when the state changed: the base 10 (OpenSM started at
  // it and won), or above it when the engine had raised it first.
  CHECK(std::stoi(argv_prio) >= 10);
  CHECK(std::stoi(argv_prio) <= 12);
  CHECK(master_line.find(" peer=head02 api=1 notify=[] cwd=/") != std::string::npos);

  fabric.stop_process(h.pidx, SIGTERM);
  CHECK(fabric.process_exit_code(h.pidx).value_or(-1) == 0);
}

TEST_CASE("OpenSM that cannot start is reported and not respawned and a crash loop stops after "
          "the configured count",
          "[ibsim][smhad][supervision]") {
  IbsimFabric fabric(topology_path("two-switch-4hca.net"));
  OsmGuard guard;
  const auto hca1 = fabric.node_port("Hca1");
  const auto hca2 = fabric.node_port("Hca2");
  REQUIRE(hca1);
  REQUIRE(hca2);

  // (a) log_file in a directory that does not exist: OpenSM 3.3.23 prints
  // "Cannot open file '...': No such file or directory", "Error from
  // osm_opensm_init: IB_ERROR." and exits 42 before it binds the port. It fails
  // before smhad is ready, so smhad reports it (alarm, reason) and exits 78, which
  // the unit does not restart (doc/systemd.md, "When OpenSM cannot start"); no
  // further spawn.
  Head a{"head01", "Hca1", hca1->port_guid, fabric.scratch_dir() + "/head01"};
  {
    SmhadOptions o;
    o.opensm_log_file = a.dir + "/missing/opensm.log";
    o.opensm_extra = "  restart_backoff_initial_ms: 100\n  restart_backoff_max_s: 1\n";
    write_smhad_config(a, {{"head02", hca2->port_guid, 0}}, o);
  }
  start_smhad(fabric, a, {}, &guard);
  REQUIRE(wait_for([&] { return !fabric.process_running(a.pidx); }, 30s));
  {
    const std::string full_log = fabric.process_stderr(a.pidx);
    INFO("smhad:\n" << full_log);
    CHECK(fabric.process_exit_code(a.pidx).value_or(-1) == 78);
    CHECK(full_log.find("OpenSM failed at start-up: permanent failure: cannot open its log file") !=
          std::string::npos);
    CHECK(full_log.find(a.dir + "/missing/opensm.log") != std::string::npos);
    CHECK(full_log.find("SM_ALARM kind=opensm_failed") != std::string::npos);
    CHECK(full_log.find("SM_ACTION_FAILED") == std::string::npos);
    // Not scheduled for a restart (and smhad, gone, starts nothing more).
    CHECK(full_log.find("; restarting") == std::string::npos);
  }

  // (b) crash loop with the configured thresholds: 2 crashes within 60 s stop the
  // restarts (the default would take 5). Crashes are kill -9 of a running OpenSM,
  // after smhad was ready: smhad stays up and reports it.
  json s;
  Head b{"head02", "Hca2", hca2->port_guid, fabric.scratch_dir() + "/head02"};
  write_config(b, 10, {{"head01", hca1->port_guid, 0}},
               {"  restart_backoff_initial_ms: 100\n  restart_backoff_max_s: 1\n"
                "  crash_loop_count: 2\n  crash_loop_window_s: 60\n",
                ""});
  start_smhad(fabric, b, {}, &guard);
  if (!wait_status(fabric, b, guard, local_master, 30s, &s))
    FAIL("head02 not MASTER: " << s.dump() << "\n" << smhad_log(fabric, b));
  const int p1 = s["opensm"]["pid"];
  REQUIRE(::kill(p1, SIGKILL) == 0);
  if (!wait_status(fabric, b, guard, [&](const json& j) {
        return j["opensm"]["supervisor"] == "running" && j["opensm"]["pid"] != p1 && j["opensm"]["pid"] != 0;
      }, 20s, &s))
    FAIL("OpenSM not respawned after the first kill: " << s.dump() << "\n" << smhad_log(fabric, b));
  free_ibsim_slot(fabric, p1);
  const int p2 = s["opensm"]["pid"];
  REQUIRE(::kill(p2, SIGKILL) == 0);
  if (!wait_status(fabric, b, guard, [](const json& j) { return j["opensm"]["supervisor"] == "failed"; }, 20s, &s))
    FAIL("no crash loop after the second kill: " << s.dump() << "\n" << smhad_log(fabric, b));
  free_ibsim_slot(fabric, p2);
  INFO(s.dump());
  CHECK(std::string(s["opensm"]["reason"]).find("crash loop: 2 crashes within 60s") == 0);
  CHECK(s["opensm"]["spawns"] == 2);
  CHECK(has_alarm(s, "opensm_failed"));
  const auto t1 = std::chrono::steady_clock::now();
  REQUIRE(wait_status(fabric, b, guard, [&](const json&) {
    return std::chrono::steady_clock::now() - t1 >= 2s;
  }, 10s, &s));
  CHECK(s["opensm"]["spawns"] == 2);
  fabric.stop_process(b.pidx, SIGTERM);
  CHECK(fabric.process_exit_code(b.pidx).value_or(-1) == 0);
}
