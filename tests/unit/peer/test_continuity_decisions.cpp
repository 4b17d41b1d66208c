// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// ContinuityDecisions: Continuity's choices tick by tick without a channel,
// TLS, files or timers: outbound copies only while this head's OpenSM is
// MASTER, what a new mastership may send, and when sa_copy_stale and
// sa_copy_trimmed say what.
#include <catch2/catch.hpp>

#include "smha/peer/continuity_decisions.hpp"

using namespace smha;
using namespace smha::peer;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

constexpr Guid kOwn{0x0002c90300000001ULL};
constexpr Guid kOther{0x0002c90300000002ULL};

const TimePoint t0{};
const WallTime w0{std::chrono::seconds(1'700'000'000)};

InBandFacts facts(std::optional<Guid> master, std::optional<SmState> local) { return InBandFacts{master, local}; }
const InBandFacts kWeMaster = facts(kOwn, SmState::Master);
const InBandFacts kOtherMaster = facts(kOther, SmState::Standby);
const InBandFacts kNoMaster = facts(std::nullopt, SmState::Standby);

HeldCopy held(WallTime confirmed, WallTime written) {
  HeldCopy h;
  h.generation = 7;
  h.from = "head02";
  h.master_guid = kOther;
  h.confirmed = confirmed;
  h.written = written;
  return h;
}

}  // namespace

TEST_CASE("continuity decisions: outbound copies on only while our SM is MASTER", "[peer][continuity]") {
  ContinuityDecisions d(kOwn, seconds(1), seconds(120));
  d.start(t0, w0);

  auto s = d.step(kOtherMaster, t0 + seconds(1), w0 + seconds(1));
  CHECK_FALSE(s.master);
  CHECK_FALSE(s.changed);  // off from the start: nothing to disconnect

  // The SM that answers MASTER is ours, but our own SM says STANDBY: not MASTER.
  s = d.step(facts(kOwn, SmState::Standby), t0 + seconds(2), w0 + seconds(2));
  CHECK_FALSE(s.master);

  s = d.step(kWeMaster, t0 + seconds(3), w0 + seconds(3));
  CHECK(s.master);
  CHECK(s.changed);  // connect
  CHECK(s.master_since == w0 + seconds(2));  // the last tick that saw it not MASTER
  CHECK(s.note_takeover);
  CHECK(d.master());

  s = d.step(kWeMaster, t0 + seconds(4), w0 + seconds(4));
  CHECK(s.master);
  CHECK_FALSE(s.changed);
  CHECK_FALSE(s.master_since);
  CHECK_FALSE(s.note_takeover);

  s = d.step(kOtherMaster, t0 + seconds(5), w0 + seconds(5));
  CHECK_FALSE(s.master);
  CHECK(s.changed);  // disconnect
  CHECK_FALSE(d.master());
}

TEST_CASE("continuity decisions: MASTER at start is no takeover, its dumps date from the start", "[peer][continuity]") {
  ContinuityDecisions d(kOwn, seconds(1), seconds(120));
  d.start(t0, w0);
  const auto s = d.step(kWeMaster, t0 + seconds(1), w0 + seconds(1));
  CHECK(s.changed);
  CHECK(s.master_since == w0);
  CHECK_FALSE(s.note_takeover);  // within the first two ticks: smhad started beside a MASTER
}

TEST_CASE("continuity decisions: sa_copy_stale waits for the grace period, then names the cause", "[peer][continuity]") {
  ContinuityDecisions d(kOwn, seconds(1), seconds(120));
  d.start(t0, w0);
  const SaCopyFacts none;

  // No copy yet, within the grace: nothing to say.
  d.step(kOtherMaster, t0 + seconds(60), w0 + seconds(60));
  CHECK(d.stale_detail(kOtherMaster, none, t0 + seconds(60), w0 + seconds(60)).empty());

  // After it: no copy yet from the master.
  d.step(kOtherMaster, t0 + seconds(120), w0 + seconds(120));
  const std::string no_copy = d.stale_detail(kOtherMaster, none, t0 + seconds(120), w0 + seconds(120));
  CHECK_THAT(no_copy, StartsWith("no copy yet from the master (SM " + to_string(kOther) + ")"));
  CHECK_THAT(no_copy, Contains("restores no multicast group"));

  // A copy confirmed 10 s ago: current, cleared.
  const HeldCopy fresh = held(w0 + seconds(110), w0 + seconds(100));
  CHECK(d.stale_detail(kOtherMaster, {&fresh, nullptr, nullptr}, t0 + seconds(120), w0 + seconds(120)).empty());

  // The same copy 200 s later, never confirmed since: too old.
  const std::string old = d.stale_detail(kOtherMaster, {&fresh, nullptr, nullptr}, t0 + seconds(320), w0 + seconds(320));
  CHECK_THAT(old, StartsWith("no copy or confirmation from the master for 210 s (bound 120 s)"));
  CHECK_THAT(old, Contains("restores the SA copy from head02 generation 7, its content written 220 s ago"));
}

TEST_CASE("continuity decisions: a notice or a refused copy raises at once", "[peer][continuity]") {
  ContinuityDecisions d(kOwn, seconds(1), seconds(120));
  d.start(t0, w0);
  const HeldCopy h = held(w0 + seconds(1), w0 + seconds(1));
  MasterNotice n;
  n.from = "head02";
  n.received = w0 + seconds(5);
  n.since = w0 + seconds(3);
  n.problem = "dump too large";
  d.step(kOtherMaster, t0 + seconds(5), w0 + seconds(5));
  CHECK_THAT(d.stale_detail(kOtherMaster, {&h, &n, nullptr}, t0 + seconds(5), w0 + seconds(5)),
             StartsWith("not sent: dump too large (head02's SA moved on from the last copy 2 s ago)"));

  Refusal r;
  r.reason = RefuseReason::Older;
  r.from = "head02";
  r.text = "generation 3 below 7";
  CHECK_THAT(d.stale_detail(kOtherMaster, {&h, nullptr, &r}, t0 + seconds(5), w0 + seconds(5)),
             StartsWith("copies from head02 refused as older: generation 3 below 7"));
  // A refusal that says nothing of the content (not from the master) waits like no refusal.
  r.reason = RefuseReason::NotMaster;
  CHECK(d.stale_detail(kOtherMaster, {&h, nullptr, &r}, t0 + seconds(5), w0 + seconds(5)).empty());
}

TEST_CASE("continuity decisions: no MASTER seen for max_copy_age is stale, never on the MASTER", "[peer][continuity]") {
  ContinuityDecisions d(kOwn, seconds(1), seconds(120));
  d.start(t0, w0);
  d.step(kNoMaster, t0 + seconds(130), w0 + seconds(130));
  CHECK(d.stale_detail(kNoMaster, {}, t0 + seconds(130), w0 + seconds(130)).empty());  // since 130 s only
  d.step(kNoMaster, t0 + seconds(250), w0 + seconds(250));
  CHECK_THAT(d.stale_detail(kNoMaster, {}, t0 + seconds(250), w0 + seconds(250)),
             StartsWith("no MASTER seen in this head's polling for 120 s"));
  // A MASTER answering again resets it.
  d.step(kOtherMaster, t0 + seconds(251), w0 + seconds(251));
  const HeldCopy h = held(w0 + seconds(250), w0 + seconds(250));
  CHECK(d.stale_detail(kOtherMaster, {&h, nullptr, nullptr}, t0 + seconds(251), w0 + seconds(251)).empty());

  d.step(kWeMaster, t0 + seconds(252), w0 + seconds(252));
  CHECK(d.stale_detail(kWeMaster, {}, t0 + seconds(400), w0 + seconds(400)).empty());
}

TEST_CASE("continuity decisions: sa_copy_trimmed on the master and on a standby", "[peer][continuity]") {
  ContinuityDecisions d(kOwn, seconds(1), seconds(120));
  d.start(t0, w0);
  HeldCopy h = held(w0, w0);
  CHECK(d.trimmed_detail("", &h).empty());
  h.trimmed = "2 groups";
  CHECK(d.trimmed_detail("ignored on a standby", &h) == "the SA copy from head02 leaves out 2 groups");
  CHECK(d.trimmed_detail("", nullptr).empty());
  d.step(kWeMaster, t0 + seconds(1), w0 + seconds(1));
  CHECK(d.trimmed_detail("", &h).empty());
  CHECK(d.trimmed_detail("3 ServiceRecords", &h) == "the SA copy sent to the standbys leaves out 3 ServiceRecords");
}
