// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// smctl: the operator's command-line tool. Thin: parses argv and dispatches.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "smctl_commands.hpp"

int main(int argc, char** argv) {
  using namespace smha::smctl;
  CLI::App app{"smctl - control and inspect smha (InfiniBand SM high availability)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("smctl ") + SMHA_VERSION);
  int exit_code = kExitOk;
  std::string fabric;
  app.add_option("-f,--fabric", fabric,
                 "the fabric whose smhad to talk to (the instance smhad@NAME, socket /run/smha/NAME.sock); "
                 "give it before the command");
  register_sminfo(app, exit_code);
  register_render_config(app, exit_code);
  register_daemon_ops(app, exit_code, fabric);
  return parse_and_run(app, argc, argv, exit_code);
}
