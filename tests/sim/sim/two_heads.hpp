// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Two simulated OpenSM heads and an observer on one switch, for the fabric
// and simulated-OpenSM tests.
#pragma once

#include <catch2/catch.hpp>

#include <optional>
#include <string>

#include "smha/sim/fabric.hpp"

namespace smha::sim::test {

struct Two {
  Fabric f{42};
  NodeId a = f.add_node("a", Guid{0x10}, Lid{1});
  NodeId b = f.add_node("b", Guid{0x20}, Lid{2});
  NodeId obs = f.add_node("obs", Guid{0x90}, Lid{9});

  // Writes /c with `prio` and starts `opensm -F /c` on node n. `exit`, if
  // given, receives the process's exit.
  int spawn(NodeId n, int prio, std::optional<os::ExitInfo>* exit = nullptr) {
    (void)f.fs(n).write_atomic("/c", "sm_priority " + std::to_string(prio) + "\n", 0644);
    auto pid = f.runner(n).spawn({"/usr/sbin/opensm", {"opensm", "-F", "/c"}, {}, {}},
                                 [](os::OutputStream, std::string_view) {},
                                 [exit](const os::ExitInfo& e) {
                                   if (exit) *exit = e;
                                 });
    REQUIRE(pid.ok());
    return *pid;
  }
  void run_for(Duration d) { f.queue().run_until(f.queue().now() + d); }
  Result<mad::SmInfoReply> call(NodeId from, mad::Target t, std::optional<SmInfoModifier> mod,
                                SmState payload_state = SmState::Master) {
    std::optional<Result<mad::SmInfoReply>> out;
    SmInfo p;
    p.state = payload_state;
    if (mod)
      f.transport(from).set_sminfo(t, *mod, p, {}, [&](Result<mad::SmInfoReply> r) { out = r; });
    else
      f.transport(from).get_sminfo(t, {}, [&](Result<mad::SmInfoReply> r) { out = r; });
    f.queue().run_until(f.queue().now() + seconds(1), [&] { return out.has_value(); });
    REQUIRE(out);
    return *out;
  }
};


}  // namespace smha::sim::test
