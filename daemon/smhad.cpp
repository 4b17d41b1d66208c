// smhad: the smha daemon. Thin: parses argv and hands over to lib/.
// `smhad -c FILE` runs the daemon (lib/service); --check-config and
// --print-opensm-conf only check and print.
#include <iostream>

#include <CLI/CLI.hpp>

#include "smha/config/config.hpp"
#include "smha/opensm/cli.hpp"
#include "smha/opensm/probe.hpp"
#include "smha/service/daemon.hpp"

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
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    smha::opensm::ExecOpensmRunner runner;
    if (check_config) {
      return smha::opensm::run_check_config(config_path, runner, std::cout, std::cerr);
    }
    if (print_conf) {
      smha::opensm::ReadOnlyFileSystem fs;
      return smha::opensm::run_render_config(config_path, runner, fs, false, std::cout, std::cerr);
    }
  } catch (const std::exception& ex) {
    std::cerr << "smhad: " << ex.what() << '\n';
    return 1;
  }
  try {
    smha::service::DaemonOptions options;
    options.config_path = config_path;
    options.observe = observe;
    return smha::service::run_daemon(options, std::cerr);
  } catch (const std::exception& ex) {
    std::cerr << "smhad: " << ex.what() << '\n';
    return 1;
  }
}
