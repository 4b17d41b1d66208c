// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// status.continuity from the typed ContinuityStatus: no channel, ages as of
// the reply (not of the snapshot), the takeover's copies as of the takeover.
#include <catch2/catch.hpp>

#include "smha/peer/continuity_status.hpp"

using namespace smha;
using namespace smha::peer;

namespace {

const WallTime kT0 = WallTime{} + std::chrono::hours(24 * 20000);

CopyStatus sa_copy() {
  CopyStatus c;
  c.generation = 7;
  c.from = "head01";
  c.master_guid = Guid{0x0002c90300000001};
  c.bytes = 4096;
  c.received = kT0;
  c.confirmed = kT0 + seconds(2);
  c.written = kT0 - seconds(1);
  c.sa = SaCounts{3, 12, 1, 2};
  c.current = false;
  c.stale = "last confirmed 130 s before (bound 120 s)";
  return c;
}

}  // namespace

TEST_CASE("continuity_json: without a channel only enabled false", "[peer][continuity]") {
  CHECK(continuity_json(nullptr, kT0) == nlohmann::json{{"enabled", false}});
}

TEST_CASE("continuity_json: ages as of the reply, the takeover's copies as of the takeover", "[peer][continuity]") {
  ContinuityStatus s;
  s.listening = true;
  s.listen = "127.0.0.1:4791";
  s.sa_db_file = "/var/cache/opensm/fab0/opensm-sa.copy";
  s.max_copy_age = seconds(120);
  s.copies[kind_index(FrameKind::SaDump)] = sa_copy();
  MasterNotice n;
  n.from = "head01";
  n.problem = "too large";
  n.received = kT0 + seconds(3);
  n.since = kT0;
  n.counts = SaCounts{5, 20, 1, 2};
  s.not_sent[kind_index(FrameKind::SaDump)] = n;
  s.refused[static_cast<std::size_t>(RefuseReason::Older)] = 4;
  PeerLink l;
  l.name = "head01";
  l.outbound = LinkState::Retrying;
  l.last_copy_at = kT0 + seconds(2);
  s.peers.push_back(l);
  s.at_takeover = TakeoverCopies{kT0 + seconds(12), sa_copy(), std::nullopt};

  const auto j = continuity_json(&s, kT0 + seconds(10));
  INFO(j.dump(2));
  CHECK(j["enabled"] == true);
  CHECK(j["role"] == "receiving");
  CHECK(j["listen"] == "127.0.0.1:4791");
  CHECK(j["max_copy_age_s"] == 120.0);
  const auto& c = j["copies"]["sa_dump"];
  CHECK(c["age_s"] == 8.0);
  CHECK(c["confirmed_age_s"] == 8.0);
  CHECK(c["content_age_s"] == 11.0);
  CHECK(c["written_age_s"] == 10.0);
  CHECK(c["master_guid"] == "0x0002c90300000001");
  CHECK(c["groups"] == 3);
  CHECK(c["subscriptions"] == 2);
  CHECK(c["current"] == false);
  CHECK(c["stale"] == "last confirmed 130 s before (bound 120 s)");
  CHECK(j["copies"]["guid2lid"].is_null());
  CHECK(j["not_sent"]["sa_dump"]["age_s"] == 7.0);
  CHECK(j["not_sent"]["sa_dump"]["moved_on_age_s"] == 10.0);
  CHECK(j["not_sent"]["sa_dump"]["counts"]["members"] == 20);
  CHECK(j["received"]["refused"]["older"] == 4);
  CHECK(j["peers"][0]["outbound"] == "retrying");
  CHECK(j["peers"][0]["last_copy_age_s"] == 8.0);
  CHECK(j["peers"][0]["answers"]["sa_dump"].is_null());
  // The same snapshot asked 5 s later: every age 5 s more.
  CHECK(continuity_json(&s, kT0 + seconds(15))["copies"]["sa_dump"]["age_s"] == 13.0);
  // At the takeover (12 s after kT0) the copy had been confirmed 10 s before.
  const auto& t = j["at_takeover"];
  CHECK(t["sa_copy"]["age_s"] == 10.0);
  CHECK(t["sa_copy"]["content_age_s"] == 13.0);
  CHECK(t["sa_copy"]["members"] == 12);
  CHECK(t["guid2lid_copy"].is_null());
  // A clock that stepped back shows 0, never a negative age.
  CHECK(continuity_json(&s, kT0)["copies"]["sa_dump"]["age_s"] == 0.0);
}
