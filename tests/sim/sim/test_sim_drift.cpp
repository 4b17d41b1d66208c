// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Config drift between heads (doc/drift.md) in the sim: two smhad register
// their ServiceRecords with the master's simulated SA and read each other's.
// Head 2 gets another partitions file: both raise config_drift naming
// partitions; once it matches again, both clear. A head that has not
// registered is shown as unknown, never as drift; a new master's SA gets the
// records again.
#include <catch2/catch.hpp>

#include <string>

#include "smha/fabric/drift.hpp"
#include "smha/opensm/conf.hpp"
#include "smha/sim/cluster.hpp"

using namespace smha;
using namespace smha::sim;

namespace {

constexpr const char* kPartitions = "/etc/opensm/partitions.conf";

// Head i's digests from the opensm.conf smhad renders for it, with the
// partitions file as it is on that head's file system.
fabric::ConfigDigests digests(Cluster& c, int i) {
  config::Config cfg;
  cfg.source_path = "/etc/smha/smha.yaml";
  cfg.opensm.extra.push_back({"partition_config_file", kPartitions, {}});
  opensm::RenderInputs in;
  in.sm_priority = static_cast<std::uint8_t>(10 + i);  // per head: left out
  in.port_guid = c.fabric().guid(c.head(i));
  in.policy_files = opensm::hash_policy_files(cfg, c.fabric().fs(c.head(i)));
  fabric::DigestInputs d;
  d.rendered_conf = opensm::render_opensm_conf(cfg, in);
  d.ha_policy = "poll_interval_ms 100\n";
  d.opensm = "3.3.23 upstream";
  d.sm_key = 1;
  return fabric::compute_digests(d);
}

void write_partitions(Cluster& c, int i, const std::string& text) {
  REQUIRE(c.fabric().fs(c.head(i)).write_atomic(kPartitions, text, 0644).ok());
}

int count(const Cluster& c, int head, const std::string& what) {
  int n = 0;
  for (const auto& r : c.records(head))
    if (r.what == what && r.kind == "config_drift") ++n;
  return n;
}

std::string last_alarm(const Cluster& c, int head) {
  std::string d;
  for (const auto& r : c.records(head))
    if (r.what == "alarm" && r.kind == "config_drift") d = r.detail;
  return d;
}

}  // namespace

TEST_CASE("Config drift: another partitions file on one head raises config_drift on both, a fix clears it",
          "[drift][sim]") {
  Cluster c(7);
  int service_mads = 0;
  for (int i = 0; i < 2; ++i) {
    Cluster::Tap tap;
    tap.request = [&service_mads](const char* a) {
      if (std::string(a).rfind("ServiceRecord", 0) == 0) ++service_mads;
    };
    c.set_tap(i, tap);
  }
  write_partitions(c, 0, "Default=0x7fff, ipoib : ALL=full;\n");
  write_partitions(c, 1, "Default=0x7fff, ipoib : ALL=full;\n");
  c.start_all_smhad();
  REQUIRE(c.run_until([&] { return c.fabric().active_masters().size() == 1; }, seconds(30)));

  // Head 1 alone has its digests: head 2 has no record, which is unknown.
  c.watchers(0)->drift().set_own(digests(c, 0));
  c.run_for(seconds(30));
  const auto& p0 = c.watchers(0)->drift().peers();
  REQUIRE(p0.size() == 1);
  CHECK(p0[0].state == fabric::PeerDriftState::Unknown);
  CHECK(p0[0].detail.find("no smha record") != std::string::npos);
  CHECK(count(c, 0, "alarm") == 0);

  // Head 2 with another partitions file.
  write_partitions(c, 1, "Default=0x7fff, ipoib : ALL=full;\nstorage=0x0002 : ALL=full;\n");
  c.watchers(1)->drift().set_own(digests(c, 1));
  REQUIRE(c.run_until([&] { return count(c, 0, "alarm") > 0 && count(c, 1, "alarm") > 0; }, seconds(60)));
  CHECK(last_alarm(c, 0).find("partitions differ") != std::string::npos);
  CHECK(last_alarm(c, 1).find("partitions differ") != std::string::npos);
  CHECK(last_alarm(c, 0).find("opensm_conf") == std::string::npos);  // GUID and priority are per head
  CHECK(c.watchers(0)->drift().peers()[0].differing ==
        std::vector<fabric::DriftComponent>{fabric::DriftComponent::Partitions});

  // Fixed: both clear, and stay clear.
  write_partitions(c, 1, "Default=0x7fff, ipoib : ALL=full;\n");
  c.watchers(1)->drift().set_own(digests(c, 1));
  REQUIRE(c.run_until([&] { return count(c, 0, "clear") > 0 && count(c, 1, "clear") > 0; }, seconds(60)));
  c.run_for(seconds(60));
  CHECK(count(c, 0, "alarm") == 1);
  CHECK(count(c, 1, "alarm") == 1);
  CHECK(c.watchers(0)->drift().peers()[0].state == fabric::PeerDriftState::Match);
  CHECK(c.watchers(1)->drift().peers()[0].state == fabric::PeerDriftState::Match);
  CHECK(c.watchers(0)->drift().stats().rejected_foreign == 0);
  CHECK(c.watchers(0)->drift().stats().rejected_data == 0);
  // Bounded: about one Set and one Get per 20 s per head (~240 s of it here).
  CHECK(service_mads <= 2 * 2 * 240 / 20 + 12);
}

TEST_CASE("Config drift: after a takeover the new master's SA gets the records again", "[drift][sim]") {
  Cluster c(11);
  write_partitions(c, 0, "A\n");
  write_partitions(c, 1, "B\n");
  c.start_all_smhad();
  REQUIRE(c.run_until([&] { return c.fabric().active_masters().size() == 1; }, seconds(30)));
  for (int i = 0; i < 2; ++i) c.watchers(i)->drift().set_own(digests(c, i));
  REQUIRE(c.run_until([&] { return count(c, 0, "alarm") > 0 && count(c, 1, "alarm") > 0; }, seconds(60)));
  // The master's OpenSM dies for good: its SA and the records it kept go with it.
  const NodeId master = c.fabric().active_masters().front();
  const int survivor = c.head(0) == master ? 1 : 0;
  c.crash_smhad(1 - survivor);
  REQUIRE(c.fabric().signal_opensm(master, 9));
  REQUIRE(c.run_until([&] {
    auto m = c.fabric().active_masters();
    return m.size() == 1 && m.front() == c.head(survivor);
  }, seconds(30)));
  c.run_for(seconds(30));
  // The survivor registered with its own SA (the new master's): registrations went on.
  const auto& st = c.watchers(survivor)->drift().stats();
  CHECK(st.sa_lid == c.fabric().lid(c.head(survivor)));
  CHECK(st.last_register_error.empty());
  // The dead head's record is gone with the old master's SA: unknown after its lease, not drift.
  c.run_for(seconds(60));
  CHECK(c.watchers(survivor)->drift().peers()[0].state == fabric::PeerDriftState::Unknown);
  CHECK(count(c, survivor, "clear") == 1);
}
