// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The whole daemon (run_daemon) without a fabric: its adapters are injected.
// The IB port is a FakeTransport whose local SM answers as an OpenSM would
// with the priority in the opensm.conf smhad rendered; "OpenSM" is a real
// `sleep` started in its place (so the supervisor's pidfile and /proc checks
// see a real process), and the daemon is driven over its real control socket.
#include <catch2/catch.hpp>

#include <signal.h>
#include <stdlib.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>
#include <algorithm>

#include "smha/control/client.hpp"
#include "smha/opensm/check.hpp"
#include "smha/opensm/process_identity.hpp"
#include "smha/os/posix_process_runner.hpp"
#include "smha/service/daemon.hpp"

#include "fake_transport.hpp"
#include "smha_yaml.hpp"

using namespace smha;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

constexpr Guid kOwn{0x5eed000000000010};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The sm_priority an OpenSM started (or SIGHUPed) with `conf` would run at.
std::optional<std::uint8_t> conf_priority(const std::string& conf) {
  std::istringstream lines(read_file(conf));
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("sm_priority ", 0) == 0) return static_cast<std::uint8_t>(std::stoi(line.substr(12)));
  return std::nullopt;
}

// What the daemon asked of "OpenSM", kept by the test (the runner dies with the daemon).
struct Asked {
  std::mutex mu;
  std::vector<os::ProcessSpec> spawns;
  std::vector<int> signals;
  std::atomic<int> pid{0};   // the stand-in's, while it runs
  std::atomic<int> prio{0};  // the sm_priority it last read
};

// Starts `sleep` instead of OpenSM; SIGHUP (a priority change) makes
// "OpenSM" re-read its file instead of ending it.
class StandInRunner final : public os::ProcessRunner {
 public:
  StandInRunner(boost::asio::io_context& io, std::string conf, Asked& asked)
      : real_(io), conf_(std::move(conf)), asked_(asked) {}

  Result<int> spawn(const os::ProcessSpec& spec, OutputHandler out, ExitHandler on_exit) override {
    {
      std::lock_guard<std::mutex> lock(asked_.mu);
      asked_.spawns.push_back(spec);
    }
    os::ProcessSpec s = spec;
    s.path = "/bin/sleep";
    s.argv = {"sleep", "600"};
    auto pid = real_.spawn(s, std::move(out), [this, on_exit](const os::ExitInfo& e) {
      asked_.pid = 0;
      on_exit(e);
    });
    if (pid) {
      asked_.prio = conf_priority(conf_).value_or(0);
      asked_.pid = *pid;
    }
    return pid;
  }
  Status kill(int pid, int signal) override {
    {
      std::lock_guard<std::mutex> lock(asked_.mu);
      asked_.signals.push_back(signal);
    }
    if (signal == SIGHUP) {
      asked_.prio = conf_priority(conf_).value_or(0);
      return Status{};
    }
    return real_.kill(pid, signal);
  }
  Status adopt(int pid, ExitHandler on_exit) override { return real_.adopt(pid, std::move(on_exit)); }


 private:
  os::PosixProcessRunner real_;
  std::string conf_;
  Asked& asked_;
};

class FakePort final : public service::DaemonAdapters::Port {
 public:
  explicit FakePort(boost::asio::io_context& io) : transport_(io) {
    info_.ca = "fake0";
    info_.port = 1;
    info_.port_guid = kOwn;
    info_.lid = Lid{1};
    info_.sm_lid = Lid{1};
    info_.state = mad::PortState::Active;
  }
  mad::MadTransport& transport() override { return transport_; }
  const mad::LocalPortInfo& local_port() const override { return info_; }
  Result<mad::LocalPortInfo> refresh_local_port() override { return info_; }
  test::FakeTransport& fake() { return transport_; }

 private:
  test::FakeTransport transport_;
  mad::LocalPortInfo info_;
};

struct Head {
  std::string dir;
  Head() {
    char tmpl[] = "/tmp/smha-daemon-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    spec().write(yaml());
  }
  test::HeadYaml spec() const {
    test::HeadYaml y;
    y.dir = dir;
    y.guid = 0x5eed000000000010;
    y.peers = {{"head02", 0x5eed000000000020, 7}};
    y.sm_priority = 10;
    y.poll_interval_ms = 50;
    y.misses = 2;
    return y;
  }
  ~Head() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string yaml() const { return dir + "/smhad.yaml"; }
  std::string conf() const { return spec().conf(); }
  std::string socket() const { return spec().socket(); }
};

// Waits for `pred` on the status reply, polling the socket.
json wait_status(control::ControlClient& c, const std::function<bool(const json&)>& pred) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  json last;
  while (std::chrono::steady_clock::now() < until) {
    auto r = c.call("status");
    REQUIRE(r.ok());
    last = r.value().data;
    if (pred(last)) return last;
    std::this_thread::sleep_for(20ms);
  }
  FAIL("status never matched; last: " << last.dump());
  return last;
}

// The daemon on its own thread with the adapters above (our SM answers MASTER
// at the priority "OpenSM" last read; head02 is silent). Whatever a test does,
// the daemon is stopped and joined and the stand-in OpenSM killed by its pid.
struct DaemonRun {
  Head head;
  Asked osm;
  std::atomic<int> hook_runners{0};  // runners the daemon asked the adapters for, for its hooks
  std::atomic<int> renders{0};       // opensm.conf renderings (head::make_plan's)
  std::optional<Guid> asked_guid;  // the port the daemon opened (checked on the test's thread)
  std::function<void()> on_open_port = [] {};
  std::promise<std::function<void()>> running;
  std::promise<int> exited;
  std::ostringstream err;
  std::function<void()> stop;
  std::thread thread;

  DaemonRun() = default;
  DaemonRun(const DaemonRun&) = delete;
  DaemonRun& operator=(const DaemonRun&) = delete;
  ~DaemonRun() {
    if (stop) stop();
    if (thread.joinable()) thread.join();
    if (osm.pid != 0) ::kill(osm.pid, SIGKILL);
  }

  service::DaemonAdapters adapters() {
    service::DaemonAdapters a;
    a.open_port = [this](boost::asio::io_context& io, const mad::PortSelector& sel,
                         const Clock&) -> Result<std::unique_ptr<service::DaemonAdapters::Port>> {
      asked_guid = sel.guid;
      on_open_port();
      auto port = std::make_unique<FakePort>(io);
      port->fake().port = mad::PortInfo{Lid{1}, Lid{1}, 1, mad::PortState::Active};
      port->fake().answer = [this](const mad::Target& t) -> std::optional<SmInfo> {
        const auto* dr = std::get_if<DrPath>(&t);
        if (dr == nullptr || !dr->hops.empty() || osm.pid == 0) return std::nullopt;
        return SmInfo{kOwn, 0, 1, static_cast<std::uint8_t>(osm.prio.load()), SmState::Master};
      };
      return std::unique_ptr<service::DaemonAdapters::Port>(std::move(port));
    };
    a.probe_opensm = [](const std::string& binary) {
      return opensm::parse_probe(binary,
                                 opensm::ProbeOutput{read_file(SMHA_TEST_DATA_DIR "/probe/opensm-3.3.23.out"),
                                                     read_file(SMHA_TEST_DATA_DIR "/probe/opensm-3.3.23.dump")});
    };
    a.process_runner = [this](boost::asio::io_context& io) -> std::unique_ptr<os::ProcessRunner> {
      return std::make_unique<StandInRunner>(io, head.conf(), osm);
    };
    a.hook_runner = [this](boost::asio::io_context& io) -> std::unique_ptr<os::ProcessRunner> {
      ++hook_runners;
      return std::make_unique<os::PosixProcessRunner>(io);
    };
    a.prepare_opensm_conf = [this](const config::Config& c, const opensm::Capabilities& caps, std::uint8_t prio,
                                   std::optional<Guid> guid, const os::FileSystem* fs) {
      ++renders;
      return opensm::prepare_opensm_conf(c, caps, prio, guid, fs);
    };
    a.running = [this](std::function<void()> s) { running.set_value(std::move(s)); };
    return a;
  }

  // Starts the daemon; returns once start-up is done and its loop runs.
  void launch() {
    thread = std::thread([this, a = adapters()] {
      service::DaemonOptions o;
      o.config_path = head.yaml();
      exited.set_value(service::run_daemon(o, err, a));
    });
    auto started = running.get_future();
    REQUIRE(started.wait_for(20s) == std::future_status::ready);
    stop = started.get();
  }

  // launch(), then a client of its control socket.
  std::unique_ptr<control::ControlClient> start() {
    launch();
    auto client = control::ControlClient::connect(head.socket());
    REQUIRE(client.ok());
    return std::make_unique<control::ControlClient>(std::move(client).value());
  }

  // The daemon's exit code, once it has ended (by stop() or a signal).
  int wait_exit() {
    auto rc = exited.get_future();
    REQUIRE(rc.wait_for(10s) == std::future_status::ready);
    stop = nullptr;
    thread.join();
    return rc.get();
  }
};

}  // namespace

TEST_CASE("smhad without a fabric: starts OpenSM with our file and GUID, is MASTER, holds, and leaves OpenSM "
          "running when stopped",
          "[daemon]") {
  DaemonRun run;
  const Head& head = run.head;
  Asked& osm = run.osm;
  // A master hook: it runs through the adapters' hook runner, not one of the daemon's own.
  const std::string hook = head.dir + "/master-hook";
  const std::string marker = head.dir + "/master-hook.ran";
  std::ofstream(hook) << "#!/bin/sh\necho \"$1\" > " << marker << "\n";
  REQUIRE(::chmod(hook.c_str(), 0755) == 0);
  std::ofstream(head.yaml(), std::ios::app) << "hooks:\n  master: " << hook << "\n";
  auto client = run.start();
  CHECK(run.asked_guid == kOwn);

  const json st = wait_status(*client, [](const json& j) { return j["role"] == "master"; });
  REQUIRE(osm.pid != 0);
  CHECK(st["opensm"]["pid"] == osm.pid.load());
  // OpenSM was asked for with our rendered file and our port GUID.
  {
    std::lock_guard<std::mutex> lock(osm.mu);
    REQUIRE(osm.spawns.size() == 1);
    const auto& spec = osm.spawns[0];
    CHECK(spec.argv == std::vector<std::string>{"/usr/sbin/opensm", "-F", head.conf(), "-g", "0x5eed000000000010"});
    CHECK(spec.cwd == head.dir + "/state");
  }
  struct stat sb {};
  REQUIRE(::stat(head.conf().c_str(), &sb) == 0);
  CHECK((sb.st_mode & 0777) == 0600);  // it carries the SM_Key
  const auto recorded = opensm::parse_pidfile(read_file(head.dir + "/state/opensm.pid"));
  REQUIRE(recorded.ok());
  CHECK(recorded.value().pid == osm.pid.load());
  // As MASTER the file renders the master value and OpenSM was told (SIGHUP),
  // and the local SM answers with it.
  const json master = wait_status(*client, [&](const json& j) {
    return j["role"] == "master" && j["local"]["priority"] == j["local"]["rendered_priority"];
  });
  CHECK(conf_priority(head.conf()) == master["local"]["rendered_priority"].get<int>());
  CHECK(master["local"]["rendered_priority"].get<int>() > 10);  // above every standby value
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!std::filesystem::exists(marker) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(10ms);
  CHECK(std::filesystem::exists(marker));
  CHECK(run.hook_runners == 1);

  // The control socket's verbs reach the daemon's state.
  auto hold = client->call("hold", json{{"duration_s", 60}, {"reason", "test"}});
  REQUIRE(hold.ok());
  CHECK(hold.value().result == control::ResultCode::Ok);
  CHECK(wait_status(*client, [](const json& j) { return j["hold"]["held"] == true; })["hold"]["reason"] == "test");
  auto release = client->call("release");
  REQUIRE(release.ok());
  CHECK(release.value().result == control::ResultCode::Ok);
  wait_status(*client, [](const json& j) { return j["hold"]["held"] == false; });

  // Stopped as by SIGTERM: exit 0, OpenSM left running (the next smhad adopts it).
  const int pid = osm.pid;
  run.stop();
  CHECK(run.wait_exit() == 0);
  CHECK(::kill(pid, 0) == 0);
  std::lock_guard<std::mutex> lock(osm.mu);
  CHECK(std::count(osm.signals.begin(), osm.signals.end(), SIGHUP) >= 1);
  CHECK(std::count(osm.signals.begin(), osm.signals.end(), SIGTERM) == 0);
  CHECK(std::count(osm.signals.begin(), osm.signals.end(), SIGKILL) == 0);
  INFO(run.err.str());
}

TEST_CASE("smhad without a fabric: a SIGTERM during start-up stops it cleanly, OpenSM (if started) in its pidfile",
          "[daemon]") {
  // The signal arrives while the IB port is being opened, before OpenSM is
  // spawned: with the handlers armed later, its default action would end the
  // process between spawning OpenSM and writing the pidfile.
  DaemonRun run;
  run.on_open_port = [] { ::raise(SIGTERM); };
  run.launch();
  CHECK(run.wait_exit() == 0);
  INFO(run.err.str());
  if (run.osm.pid != 0) {
    const auto recorded = opensm::parse_pidfile(read_file(run.head.dir + "/state/opensm.pid"));
    REQUIRE(recorded.ok());
    CHECK(recorded.value().pid == run.osm.pid.load());
  }
}

TEST_CASE("smhad without a fabric: the bounds of hold and reload over the socket", "[daemon]") {
  DaemonRun run;
  auto client = run.start();
  wait_status(*client, [](const json& j) { return j["role"] == "master"; });

  SECTION("a hold duration out of bounds is refused and changes nothing") {
    for (const json& d : {json(1e300), json(-5), json(0), json(604801), json("2h")}) {
      auto r = client->call("hold", json{{"duration_s", d}, {"reason", "test"}});
      REQUIRE(r.ok());
      CHECK(r.value().result == control::ResultCode::BadRequest);
      CHECK_THAT(r.value().text, Catch::Contains("at most 604800"));
    }
    CHECK(wait_status(*client, [](const json&) { return true; })["hold"]["held"] == false);
    auto r = client->call("hold", json{{"duration_s", 604800}, {"reason", "test"}});
    REQUIRE(r.ok());
    CHECK(r.value().result == control::ResultCode::Ok);
  }

  SECTION("a param a method does not take is refused naming it, and changes nothing") {
    // A misspelt duration must not become an hour's hold.
    auto r = client->call("hold", json{{"duration", 60}, {"reason", "test"}});
    REQUIRE(r.ok());
    CHECK(r.value().result == control::ResultCode::BadRequest);
    CHECK(r.value().text == "method 'hold' takes no parameter \"duration\" (it takes: duration_s, reason)");
    CHECK(wait_status(*client, [](const json&) { return true; })["hold"]["held"] == false);
    for (const char* m : {"status", "sms", "metrics", "release", "reload"}) {
      CAPTURE(m);
      r = client->call(m, json{{"verbose", true}});
      REQUIRE(r.ok());
      CHECK(r.value().result == control::ResultCode::BadRequest);
      CHECK(r.value().text == "method '" + std::string(m) + "' takes no parameter \"verbose\" (it takes: none)");
    }
    for (const char* m : {"handover", "drill"}) {
      CAPTURE(m);
      r = client->call(m, json{{"target", "head02"}});
      REQUIRE(r.ok());
      CHECK(r.value().result == control::ResultCode::BadRequest);
      CHECK(r.value().text == "method '" + std::string(m) + "' takes no parameter \"target\" (it takes: to)");
    }
    r = client->call("events", json{{"n", 5}, {"since", 3}});
    REQUIRE(r.ok());
    CHECK(r.value().result == control::ResultCode::BadRequest);
    CHECK(r.value().text == "method 'events' takes no parameter \"since\" (it takes: n, after, wait_s)");
    // What smctl sends is taken.
    r = client->call("events", json{{control::param::kN, 5}});
    REQUIRE(r.ok());
    CHECK(r.value().result == control::ResultCode::Ok);
    CHECK(wait_status(*client, [](const json&) { return true; })["role"] == "master");
  }

  SECTION("a reload with no_clients_rereg TRUE applies it and warns that clients will not rejoin") {
    std::string y = read_file(run.head.yaml());
    y.replace(y.find("opensm:\n"), 8, "opensm:\n  extra:\n    no_clients_rereg: TRUE\n");
    std::ofstream(run.head.yaml()) << y;
    auto r = client->call("reload");
    REQUIRE(r.ok());
    CHECK(r.value().result == control::ResultCode::Ok);
    REQUIRE(r.value().data["warnings"].size() == 1);
    CHECK_THAT(r.value().data["warnings"][0].get<std::string>(),
               Catch::Contains("opensm.extra.no_clients_rereg: is TRUE") && Catch::Contains("multicast"));
    CHECK_THAT(r.value().text, Catch::Contains("; warning: ") && Catch::Contains("no_clients_rereg"));
    CHECK(read_file(run.head.conf()).find("no_clients_rereg TRUE\n") != std::string::npos);
  }

  SECTION("a reload changing a key that needs a restart is refused naming the YAML key") {
    std::string y = read_file(run.head.yaml());
    const std::string from = "  socket: " + run.head.socket() + "\n";
    REQUIRE(y.find(from) != std::string::npos);
    y.replace(y.find(from), from.size(), "  socket: " + run.head.dir + "/other.sock\n  group: daemon\n");
    y.replace(y.find("  group: root\n"), 14, "");
    y.replace(y.find("opensm:\n"), 8, "opensm:\n  crash_loop_count: 7\n");
    std::ofstream(run.head.yaml()) << y;
    auto r = client->call("reload");
    REQUIRE(r.ok());
    CHECK(r.value().result != control::ResultCode::Ok);
    CHECK_THAT(r.value().text, Catch::Contains("control.socket") && Catch::Contains("control.group") &&
                                   Catch::Contains("opensm.crash_loop_count"));
    CHECK_THAT(r.value().text, !Catch::Contains("socket_path"));
  }

  SECTION("a reload changing health.* applies it at once, with no other key changed") {
    const auto before = client->call("health");
    REQUIRE(before.ok());
    CHECK(before.value().data["health"]["alarm"]["min_links"] == 1);
    CHECK(before.value().data["health"]["errors"]["window_s"] == 3600);
    std::ofstream(run.head.yaml(), std::ios::app)
        << "health:\n  link_degraded_min_links: 4\n  error_window_s: 120\n  error_thresholds:\n"
           "    symbol_errors: 7\n";
    auto r = client->call("reload");
    REQUIRE(r.ok());
    INFO(r.value().text);
    CHECK(r.value().result == control::ResultCode::Ok);
    CHECK(r.value().data["engine_restarted"] == true);
    CHECK_THAT(r.value().text, Catch::Contains("health changed"));
    const auto after = client->call("health");
    REQUIRE(after.ok());
    const json& h = after.value().data["health"];
    CHECK(h["alarm"]["min_links"] == 4);
    CHECK(h["errors"]["window_s"] == 120);
    CHECK(h["errors"]["thresholds"]["symbol_errors"] == 7);
    CHECK(wait_status(*client, [](const json& j) { return j["role"] == "master"; })["role"] == "master");
  }

  SECTION("a reload adding the continuity section is refused naming it: restart smhad to apply") {
    std::string y = read_file(run.head.yaml());
    y.replace(y.find("    lid: 7\n"), 11, "    lid: 7\n    address: 127.0.0.1:7390\n");
    y += "continuity:\n  listen: 127.0.0.1:7390\n  certificate: /etc/smha/head01.pem\n"
         "  private_key: /etc/smha/head01.key\n  ca: /etc/smha/ca.pem\n";
    std::ofstream(run.head.yaml()) << y;
    auto r = client->call("reload");
    REQUIRE(r.ok());
    CHECK(r.value().result == control::ResultCode::Conflict);
    CHECK(r.value().data["restart_keys"] == json::array({"continuity"}));
    CHECK_THAT(r.value().text, Catch::Contains("smhad restarts: continuity;") &&
                                   Catch::Contains("restart smhad to apply"));
  }

  SECTION("a reload of a file with many errors answers their count and the first 20, and the events stay small") {
    std::string y = read_file(run.head.yaml());
    for (int i = 0; i < 500; ++i) y += "unknown_key_" + std::to_string(i) + ": 1\n";
    std::ofstream(run.head.yaml()) << y;
    auto r = client->call("reload");
    REQUIRE(r.ok());
    CHECK(r.value().result == control::ResultCode::Error);
    CHECK(r.value().data["error_count"] == 500);
    CHECK(r.value().data["errors"].size() == 20);
    CHECK_THAT(r.value().text, Catch::Contains("unknown_key_19") && !Catch::Contains("unknown_key_20:") &&
                                   Catch::Contains("and 480 more"));
    auto ev = client->call("events", json{{control::param::kN, 5}});
    REQUIRE(ev.ok());
    CHECK(ev.value().data.dump().size() < 16 * 1024);
    // The old configuration stays: still MASTER, still polling.
    CHECK(wait_status(*client, [](const json&) { return true; })["role"] == "master");
  }
}

TEST_CASE("smhad without a fabric: a reload renders opensm.conf once, applies a peer's key and says which keys changed",
          "[daemon]") {
  DaemonRun run;
  auto client = run.start();
  const json master = wait_status(*client, [](const json& j) {
    return j["role"] == "master" && j["local"]["priority"] == j["local"]["rendered_priority"];
  });
  CHECK(run.renders == 1);  // at start, for the plan
  REQUIRE(master["peers"].size() == 1);
  CHECK(master["peers"][0]["configured_lid"] == 7);
  const int before = run.renders;
  // A peer's lid, an opensm.conf key (SIGHUP) and a health key.
  test::HeadYaml y = run.head.spec();
  y.peers[0].lid = 9;
  y.opensm_extra = "  sweep_interval: 20\n";
  y.extra = "health:\n  error_window_s: 120\n";
  y.write(run.head.yaml());
  auto r = client->call("reload");
  REQUIRE(r.ok());
  INFO(r.value().text);
  CHECK(r.value().result == control::ResultCode::Ok);
  CHECK(run.renders - before == 1);
  CHECK(r.value().data["engine_restarted"] == true);
  CHECK(r.value().data["opensm_change"] == "sighup");
  CHECK(r.value().data["config_keys"] ==
        json::array({"peers[0].lid", "opensm.sweep_interval", "health.error_window_s"}));
  CHECK_THAT(r.value().text, Catch::Contains("HA policy and health changed (peers[0].lid, opensm.sweep_interval, "
                                             "health.error_window_s): engine restarted with the new settings"));
  // OpenSM's file: the new key, at the priority OpenSM runs at (set in the one rendering, not rendered again).
  const std::string conf = read_file(run.head.conf());
  CHECK(conf.find("\nsweep_interval 20\n") != std::string::npos);
  CHECK(conf_priority(run.head.conf()) == master["local"]["rendered_priority"].get<int>());
  // Applied: the peer's lid and the health window are the new ones.
  const json after = wait_status(*client, [](const json& j) {
    return j["role"] == "master" && j["peers"].size() == 1 && j["peers"][0]["configured_lid"] == 9;
  });
  CHECK(after["peers"][0]["configured_lid"] == 9);
  const auto health = client->call("health");
  REQUIRE(health.ok());
  CHECK(health.value().data["health"]["errors"]["window_s"] == 120);
  // The same file again: nothing changed, said so; one rendering again.
  const int again = run.renders;
  r = client->call("reload");
  REQUIRE(r.ok());
  CHECK(r.value().result == control::ResultCode::Ok);
  CHECK(run.renders - again == 1);
  CHECK(r.value().data["engine_restarted"] == false);
  CHECK(r.value().data["config_keys"] == json::array());
  CHECK_THAT(r.value().text, Catch::Contains("HA policy unchanged; no configuration key changed"));
}

TEST_CASE("smhad without a fabric: a port that cannot be opened fails start-up with the reason, nothing started",
          "[daemon]") {
  Head head;
  bool spawned = false;
  service::DaemonAdapters a;
  a.open_port = [](boost::asio::io_context&, const mad::PortSelector&,
                   const Clock&) -> Result<std::unique_ptr<service::DaemonAdapters::Port>> {
    return make_error(mad::kErrNoPort, "no umad port with GUID 0x5eed000000000010");
  };
  a.probe_opensm = [](const std::string&) -> Result<opensm::Capabilities> {
    FAIL("probed OpenSM without a port");
    return make_error(Errc::Config, "unreachable");
  };
  a.process_runner = [&](boost::asio::io_context&) -> std::unique_ptr<os::ProcessRunner> {
    spawned = true;
    return nullptr;
  };
  a.running = [](const std::function<void()>&) { FAIL("ran without a port"); };
  std::ostringstream err;
  service::DaemonOptions o;
  o.config_path = head.yaml();
  CHECK(service::run_daemon(o, err, a) == 1);
  CHECK_THAT(err.str(), Catch::Contains("cannot open the IB port: no umad port with GUID 0x5eed000000000010"));
  CHECK_FALSE(spawned);
  CHECK_FALSE(std::filesystem::exists(head.socket()));
}

namespace {

// A TCP port nothing listens on now (the kernel's pick), for continuity.listen.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

}  // namespace

TEST_CASE("smhad without a fabric, with the peer channel: a reload refuses what the channel took at start, "
          "naming it, and applies the rest",
          "[daemon]") {
  DaemonRun run;
  const std::string pki = run.head.dir + "/pki";
  REQUIRE(std::system((std::string(SMHA_SOURCE_DIR) + "/scripts/make-peer-certs " + pki + " head01").c_str()) == 0);
  test::HeadYaml spec = run.head.spec();
  spec.peers[0].address = "127.0.0.1:" + std::to_string(free_port());
  spec.extra = "continuity:\n  listen: 127.0.0.1:" + std::to_string(free_port()) + "\n  certificate: " + pki +
               "/head01.pem\n  private_key: " + pki + "/head01.key\n  ca: " + pki + "/ca.pem\n";
  spec.write(run.head.yaml());
  auto client = run.start();
  wait_status(*client, [](const json& j) { return j["role"] == "master" && j["continuity"]["enabled"] == true; });
  auto reload = [&](const test::HeadYaml& y) {
    y.write(run.head.yaml());
    auto r = client->call("reload");
    REQUIRE(r.ok());
    return r.value();
  };

  SECTION("a continuity key") {
    test::HeadYaml y = spec;
    y.extra += "  max_copy_age_s: 300\n";
    const auto r = reload(y);
    CHECK(r.result == control::ResultCode::Conflict);
    CHECK(r.data["restart_keys"] == json::array({"continuity.max_copy_age_s"}));
    CHECK_THAT(r.text, Catch::Contains("continuity.max_copy_age_s") && Catch::Contains("restart smhad to apply"));
  }
  SECTION("a peer's address, and a peer more") {
    test::HeadYaml y = spec;
    y.peers[0].address = "127.0.0.2:7390";
    auto r = reload(y);
    CHECK(r.result == control::ResultCode::Conflict);
    CHECK(r.data["restart_keys"] == json::array({"peers[0].address"}));
    y = spec;
    y.peers.push_back({"head03", 0x5eed000000000030, 0, "", "127.0.0.3:7390"});
    r = reload(y);
    CHECK(r.result == control::ResultCode::Conflict);
    CHECK(r.data["restart_keys"] == json::array({"peers"}));
  }
  SECTION("a peer's lid is the engine's: applied") {
    test::HeadYaml y = spec;
    y.peers[0].lid = 9;
    const auto r = reload(y);
    INFO(r.text);
    CHECK(r.result == control::ResultCode::Ok);
    CHECK(r.data["engine_restarted"] == true);
  }
}
