// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// An ibsim topology file from topologies/ as a sim Topology with LIDs
// assigned, for the sim tests (a parse error fails the test with its message).
#pragma once

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>

#include "smha/sim/topology.hpp"

namespace smha::sim::testing {

inline Topology load_net(const std::string& name) {
  const std::string path = std::string(SMHA_TOPOLOGIES) + "/" + name;
  std::ifstream in(path);
  REQUIRE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  auto t = Topology::parse_ibsim(ss.str(), path);
  INFO((t.ok() ? std::string() : t.error().message));
  REQUIRE(t.ok());
  t->assign_lids();
  return std::move(*t);
}

}  // namespace smha::sim::testing
