// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// `smctl render-config [-c FILE] [--diff]`: the opensm.conf smhad would write.
#include <iostream>
#include <memory>
#include <string>

#include "smctl_commands.hpp"
#include "smha/config/config.hpp"
#include "smha/opensm/cli.hpp"
#include "smha/opensm/probe.hpp"

namespace smha::smctl {

void register_render_config(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "render-config", "print the opensm.conf smhad would render from the configuration");
  auto config_path = std::make_shared<std::string>(config::kDefaultConfigPath);
  auto diff = std::make_shared<bool>(false);
  cmd->add_option("-c,--config", *config_path, "configuration file")->capture_default_str();
  cmd->add_flag("--diff", *diff, "show what would change versus the file at opensm.conf_path; exit 9 when it differs");
  cmd->callback([&exit_code, config_path, diff] {
    opensm::ExecOpensmRunner runner;
    opensm::ReadOnlyFileSystem fs;
    int rc = opensm::run_render_config(*config_path, runner, fs, *diff, std::cout, std::cerr);
    exit_code = rc == opensm::kRenderOk ? kExitOk : rc == opensm::kRenderDiffers ? kExitDiffers : kExitFailure;
  });
}

}  // namespace smha::smctl
