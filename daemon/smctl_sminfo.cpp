// Placeholder until lib/mad lands: `smctl sminfo` (issue 2).
#include "smctl_commands.hpp"

namespace smha::smctl {
void register_sminfo(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("sminfo", "query SMInfo of a subnet manager");
  cmd->callback([&exit_code] { exit_code = kExitFailure; });
}
}  // namespace smha::smctl
