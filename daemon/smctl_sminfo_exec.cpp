// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// `smctl sminfo ARGS...` runs `smctl-sminfo ARGS...` (smctl_sminfo.cpp): the one
// SMInfo query that needs libibumad lives in its own program, so smctl, the
// tool every read-only operator runs, links neither libibumad nor libsystemd.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "smctl_commands.hpp"

namespace smha::smctl {
namespace {

constexpr const char* kHelper = "smctl-sminfo";

// Beside smctl's own executable first (a build tree, or a relocated install),
// then where the package installs it.
std::string helper_path() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto beside = self.parent_path() / kHelper;
    if (::access(beside.c_str(), X_OK) == 0) return beside.string();
  }
  return std::string(SMHA_LIBEXEC_DIR) + "/" + kHelper;
}

int run_helper(const std::vector<std::string>& args) {
  std::string path = helper_path();
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(kHelper));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);
  ::execv(path.c_str(), argv.data());
  int err = errno;
  std::fprintf(stderr, "smctl sminfo: cannot run %s: %s (the smha package installs it)\n", path.c_str(),
               std::strerror(err));
  return kExitFailure;
}

}  // namespace

void register_sminfo(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("sminfo", kSminfoDescription);
  // Every argument, --help included, is the helper's to parse.
  cmd->prefix_command();
  cmd->set_help_flag();
  cmd->callback([cmd, &exit_code] { exit_code = run_helper(cmd->remaining()); });
}

}  // namespace smha::smctl
