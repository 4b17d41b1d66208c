// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// `smctl sminfo`: one SubnGet(SMInfo) over libibumad, in the helper program
// smctl-sminfo that smctl runs (smctl_sminfo_exec.cpp), so that smctl itself does
// not link libibumad. Parses argv; the query and its output live in lib/mad
// (sminfo_query.hpp). Exit codes: doc/smctl.md.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "smctl_commands.hpp"
#include "smha/core/clock.hpp"
#include "smha/mad/sminfo_query.hpp"

namespace smha::smctl {
namespace {

struct SminfoArgs {
  int lid = -1;
  std::string dr;
  std::string ca;
  int port = 0;
  std::string guid;
  int timeout_ms = 1000;
  int retries = 0;
  bool json = false;
  bool show_key = false;
};

int exit_code_for(mad::SminfoOutcome outcome) {
  switch (outcome) {
    case mad::SminfoOutcome::Ok: return kExitOk;
    case mad::SminfoOutcome::Timeout: return kExitTimeout;
    case mad::SminfoOutcome::MadStatus: return kExitMadStatus;
    case mad::SminfoOutcome::NoPort: return kExitNoPort;
    case mad::SminfoOutcome::Failure: break;
  }
  return kExitFailure;
}

int run(const SminfoArgs& a) {
  mad::SminfoQuery q;
  if (a.lid >= 0) q.lid = Lid{static_cast<std::uint16_t>(a.lid)};
  if (!a.dr.empty()) {
    q.dr = parse_dr_path(a.dr);
    if (!q.dr) {
      std::fprintf(stderr, "smctl sminfo: --dr %s: expected comma-separated out-ports such as 0,1,3 (at most 63 hops, no port 0 after the first)\n", a.dr.c_str());
      return kExitUsage;
    }
  }
  q.port.ca = a.ca;
  q.port.port = a.port;
  if (!a.guid.empty()) {
    q.port.guid = parse_guid(a.guid);
    if (!q.port.guid) {
      std::fprintf(stderr, "smctl sminfo: --guid %s: expected 0x followed by 1-16 hex digits\n", a.guid.c_str());
      return kExitUsage;
    }
  }
  q.request.timeout = std::chrono::milliseconds(a.timeout_ms);
  q.request.retries = a.retries;
  SteadyClock clock;
  auto res = mad::run_sminfo_command(q, a.json, a.show_key, clock);
  std::fputs(res.out.c_str(), stdout);
  std::fputs(res.err.c_str(), stderr);
  return exit_code_for(res.outcome);
}

}  // namespace

void configure_sminfo(CLI::App& cmd, int& exit_code) {
  auto args = std::make_shared<SminfoArgs>();
  auto* lid = cmd.add_option("--lid", args->lid, "LID-routed query to this LID")
                  ->check(CLI::Range(1, 0xfffe));
  auto* dr = cmd.add_option("--dr", args->dr, "directed-route query along this path, e.g. 0,1,3");
  lid->excludes(dr);
  auto* ca = cmd.add_option("--ca", args->ca, "local CA name (default: first with an active port)");
  auto* port = cmd.add_option("--port", args->port, "local port number")->check(CLI::Range(1, 254));
  auto* guid = cmd.add_option("--guid", args->guid, "local port by port GUID (0x...)");
  guid->excludes(ca);
  guid->excludes(port);
  cmd.add_option("--timeout", args->timeout_ms, "per-attempt timeout in ms (default 1000)")
      ->check(CLI::Range(1, 600000));
  cmd.add_option("--retries", args->retries, "extra attempts after the first (default 0)")
      ->check(CLI::Range(0, 100));
  cmd.add_flag("--json", args->json, "print one JSON object");
  cmd.add_flag("--show-key", args->show_key, "print the SM_Key instead of hiding it");
  cmd.callback([args, &exit_code] { exit_code = run(*args); });
}

}  // namespace smha::smctl

// smctl-sminfo [OPTIONS]: what `smctl sminfo [OPTIONS]` runs.
int main(int argc, char** argv) {
  using namespace smha::smctl;
  CLI::App app{std::string(kSminfoDescription)};
  app.name("smctl sminfo");
  int exit_code = kExitOk;
  configure_sminfo(app, exit_code);
  return parse_and_run(app, argc, argv, exit_code);
}
