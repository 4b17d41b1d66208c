// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smhad: the smha daemon. Thin: parses argv and hands over to lib/.
// `smhad -c FILE` runs the daemon (lib/service); --check-config and
// --print-opensm-conf only check and print.
#include <iostream>

#include <CLI/CLI.hpp>

#include "smha/config/config.hpp"
#include "smha/opensm/cli.hpp"
#include "smha/opensm/probe.hpp"
#include "smha/platform/logging.hpp"
#include "smha/service/daemon.hpp"
#include "smha/service/check_config.hpp"
#include "smha/service/hook_dispatcher.hpp"
#include "smha/service/systemd_reporter.hpp"

int main(int argc, char** argv) {
  CLI::App app{"smhad - InfiniBand subnet manager high availability daemon"};
  app.set_version_flag("--version", std::string("smhad ") + SMHA_VERSION);
  std::string config_path = smha::config::kDefaultConfigPath;
  bool check_config = false;
  bool print_conf = false;
  bool observe = false;
  app.add_option("-c,--config", config_path, "configuration file")->capture_default_str();
  auto* check = app.add_flag("--check-config", check_config,
                             "validate the configuration against the installed OpenSM, print "
                             "every error, exit 0 (valid) or 1");
  app.add_flag("--print-opensm-conf", print_conf, "print the opensm.conf smhad would write")
      ->excludes(check);
  app.add_flag("--observe", observe, "poll and report only: never start, stop or steer OpenSM");
  std::string fabric;
  app.add_option("--fabric", fabric,
                 "this instance's fabric (the unit smhad@NAME passes NAME): per-instance default paths, "
                 "the metrics' fabric label, SMHA_FABRIC for hooks");
  std::string log_target = "auto";
  std::string log_level = "info";
  app.add_option("--log-target", log_target,
                 "auto (journald when run by systemd, else stderr), journal or stderr")
      ->check(CLI::IsMember({"auto", "journal", "stderr"}))
      ->capture_default_str();
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    smha::opensm::ExecOpensmRunner runner;
    if (check_config) {
      return smha::service::run_check_config(config_path, runner, std::cout, std::cerr,
                                             smha::service::probe_routes, smha::config::LoadOptions{fabric});
    }
    if (print_conf) {
      smha::opensm::ReadOnlyFileSystem fs;
      return smha::opensm::run_render_config(config_path, runner, fs, false, std::cout, std::cerr,
                                             smha::config::LoadOptions{fabric});
    }
  } catch (const std::exception& ex) {
    std::cerr << "smhad: " << ex.what() << '\n';
    return 1;
  }
  smha::platform::LogOptions log_options;
  log_options.destination = *smha::platform::parse_log_destination(log_target);
  log_options.level = spdlog::level::from_str(log_level);
  if (!fabric.empty()) {
    // A bad name is refused with the configuration's errors below.
    log_options.ident = "smhad@" + fabric;
    log_options.opensm_ident = "opensm@" + fabric;
    log_options.prefix = fabric;
  }
  if (auto st = smha::platform::setup_logging(log_options); !st.ok()) {
    std::cerr << "smhad: --log-target " << log_target << ": " << st.error().message << '\n';
    return 1;
  }
  try {
    smha::service::DaemonOptions options;
    options.config_path = config_path;
    options.observe = observe;
    options.fabric = fabric;
    return smha::service::run_daemon(options, std::cerr);
  } catch (const std::exception& ex) {
    std::cerr << "smhad: " << ex.what() << '\n';
    return 1;
  }
}
