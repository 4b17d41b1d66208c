// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The SM census's bookkeeping (lib/agent/census): sources, heads, liveness,
// expiry, the text the unknown_sm alarm carries, bounds.
#include <catch2/catch.hpp>

#include "smha/fabric/census.hpp"

using namespace smha;
using namespace smha::fabric;

namespace {

const Guid kOwn{0x10};
const Guid kPeer{0x20};
const Guid kOther{0x30};
const Guid kSwitch{0x200000};

SmInfo sminfo(Guid g, SmState s, std::uint8_t prio) {
  SmInfo i;
  i.guid = g;
  i.state = s;
  i.priority = prio;
  return i;
}

SmPort port(Guid g, std::string desc, DrPath path, std::optional<Guid> nb, std::uint8_t nb_port) {
  SmPort p;
  p.port_guid = g;
  p.node_guid = g;
  p.node_type = smha::mad::NodeType::Ca;
  p.path = std::move(path);
  p.port_num = 1;
  p.lid = Lid{7};
  p.description = std::move(desc);
  p.description_known = true;
  p.neighbour = nb;
  p.neighbour_port = nb_port;
  return p;
}

}  // namespace

TEST_CASE("Census: heads are marked, an answering SM that is not a head is an other SM", "[agent][census]") {
  Census c({seconds(15), 8});
  c.set_heads(kOwn, {kPeer});
  const TimePoint t0{};
  c.answered(sminfo(kOwn, SmState::Master, 11), kFromPoll, Lid{1}, t0);
  c.answered(sminfo(kPeer, SmState::Standby, 10), kFromPoll, Lid{2}, t0);
  CHECK(c.others(t0).empty());
  c.walked({port(kOther, "node07 HCA-1", DrPath{{1, 5}}, kSwitch, 5)}, true, t0);
  // Seen by IsSM but never answered: listed, not alarmed.
  REQUIRE(c.entries().count(kOther));
  CHECK(c.state_text(c.entries().at(kOther), t0) == "unknown");
  CHECK(c.others(t0).empty());
  c.answered(sminfo(kOther, SmState::Standby, 0), kFromIsSm, Lid{}, t0 + seconds(1));
  auto o = c.others(t0 + seconds(1));
  REQUIRE(o.size() == 1);
  CHECK(o[0].info.guid == kOther);
  CHECK(o[0].where == "\"node07 HCA-1\" lid 7 at " + to_string(kSwitch) + " port 5");
  const auto& e = c.entries().at(kOther);
  CHECK(e.sources == (kFromIsSm));
  CHECK_FALSE(e.head);
  CHECK(c.entries().at(kOwn).local);
  CHECK(c.entries().at(kPeer).head);
  auto counts = c.count_by_state(t0 + seconds(1));
  CHECK(counts["master"] == 1);
  CHECK(counts["standby"] == 2);
  CHECK(census_sources_text(kFromPoll | kFromIsSm) == "poll,is_sm");
}

TEST_CASE("Census: an SM that stops answering is no longer an other SM after expiry, gone when IsSM clears",
          "[agent][census]") {
  Census c({seconds(15), 8});
  c.set_heads(kOwn, {kPeer});
  const TimePoint t0{};
  c.walked({port(kOther, "n", DrPath{{1, 5}}, kSwitch, 5)}, true, t0);
  c.answered(sminfo(kOther, SmState::Standby, 0), kFromIsSm, Lid{}, t0);
  CHECK(c.others(t0 + seconds(15)).size() == 1);
  c.missed(kOther);
  c.missed(kOther);
  CHECK(c.entries().at(kOther).misses == 2);
  CHECK(c.others(t0 + seconds(16)).empty());
  c.expire(t0 + seconds(16));
  REQUIRE(c.entries().count(kOther));  // IsSM still set: listed as silent
  CHECK(c.state_text(c.entries().at(kOther), t0 + seconds(16)) == "silent");
  // A partial walk does not clear IsSM; a complete one does.
  c.walked({}, false, t0 + seconds(20));
  c.expire(t0 + seconds(20));
  CHECK(c.entries().count(kOther));
  c.walked({}, true, t0 + seconds(30));
  c.expire(t0 + seconds(30));
  CHECK_FALSE(c.entries().count(kOther));
}

TEST_CASE("Census: the SM at our port's MasterSMLID is kept while it answers", "[agent][census]") {
  Census c({seconds(15), 8});
  c.set_heads(kOwn, {kPeer});
  const TimePoint t0{};
  c.answered(sminfo(kOther, SmState::Master, 15), kFromMasterSmLid, Lid{9}, t0);
  REQUIRE(c.others(t0).size() == 1);
  CHECK(c.others(t0)[0].where == "lid 9");
  c.expire(t0 + seconds(16));
  CHECK(c.entries().empty());
}

TEST_CASE("Census: bounded, odd descriptions escaped in the alarm text", "[agent][census]") {
  Census c({seconds(15), 2});
  c.set_heads(kOwn, {});
  const TimePoint t0{};
  c.answered(sminfo(Guid{1}, SmState::Standby, 0), kFromPoll, Lid{}, t0);
  c.answered(sminfo(Guid{2}, SmState::Standby, 0), kFromPoll, Lid{}, t0);
  c.answered(sminfo(Guid{3}, SmState::Standby, 0), kFromPoll, Lid{}, t0);
  CHECK(c.entries().size() == 2);
  CHECK(c.dropped() == 1);
  Census d;
  d.walked({port(kOther, std::string("evil\x1b[2J\xff", 8), DrPath{{1, 2}}, std::nullopt, 0)}, true, t0);
  d.answered(sminfo(kOther, SmState::Standby, 0), kFromIsSm, Lid{}, t0);
  const std::string w = d.others(t0).at(0).where;
  CHECK(w.find('\x1b') == std::string::npos);
  CHECK(w.find("evil") != std::string::npos);
}

TEST_CASE("Census: a recheck between walks adds an IsSM port, and clears it", "[agent][census]") {
  Census c({seconds(15), 8});
  c.set_heads(kOwn, {kPeer});
  const TimePoint t0{};
  auto p = port(kOther, "", DrPath{{1, 5}}, kSwitch, 5);
  p.description_known = false;
  c.rechecked(p, false, t0);
  CHECK(c.entries().empty());  // not IsSM, not known: nothing
  c.rechecked(p, true, t0);
  REQUIRE(c.entries().count(kOther));
  CHECK(c.entries().at(kOther).is_sm);
  CHECK(c.entries().at(kOther).description.empty());
  c.described(kOther, "node07 HCA-1");
  c.answered(sminfo(kOther, SmState::Standby, 0), kFromIsSm, Lid{}, t0);
  REQUIRE(c.others(t0).size() == 1);
  CHECK(c.others(t0)[0].where == "\"node07 HCA-1\" lid 7 at " + to_string(kSwitch) + " port 5");
  c.rechecked(p, false, t0 + seconds(1));
  CHECK_FALSE(c.entries().at(kOther).is_sm);
  c.expire(t0 + seconds(16));
  CHECK(c.entries().empty());
}

TEST_CASE("Census: heads known from polls get their cabling and LID from the walk's ports", "[agent][census]") {
  Census c({seconds(15), 8});
  c.set_heads(kOwn, {kPeer});
  const TimePoint t0{};
  c.answered(sminfo(kPeer, SmState::Standby, 10), kFromPoll, Lid{}, t0);
  auto p = port(kPeer, "head02", DrPath{{1, 4}}, kSwitch, 4);
  p.description_known = false;
  c.known_ports({p});
  const auto& e = c.entries().at(kPeer);
  CHECK(e.lid == Lid{7});
  REQUIRE(e.neighbour);
  CHECK(*e.neighbour == kSwitch);
  CHECK(e.neighbour_port == 4);
  CHECK(e.description.empty());
  CHECK_FALSE(e.is_sm);  // only a walk's IsSM or a recheck sets it
  c.described(kPeer, "head02");
  c.described(kPeer, "");  // an empty answer does not erase it
  CHECK(c.entries().at(kPeer).description == "head02");
  // An SM that appears later is filled in when it is first seen.
  c.known_ports({port(kOther, "x", DrPath{{1, 5}}, kSwitch, 5)});
  c.answered(sminfo(kOther, SmState::Standby, 0), kFromMasterSmLid, Lid{}, t0);
  CHECK(c.entries().at(kOther).neighbour_port == 5);
  CHECK(c.entries().at(kOther).description == "x");
}

TEST_CASE("Census: the SA's table adds SMs, a record counts as an answer only when it moved",
          "[agent][census][sa]") {
  Census c({seconds(15), 8});
  c.set_heads(kOwn, {kPeer});
  const TimePoint t0{};
  c.known_ports({port(kOther, "node07 HCA-1", DrPath{{1, 5}}, kSwitch, 5)});
  auto rec = [](Guid g, std::uint16_t lid, SmState s, std::uint8_t prio, std::uint32_t act) {
    SmInfo i = sminfo(g, s, prio);
    i.act_count = act;
    return mad::SmInfoRecord{Lid{lid}, i};
  };
  c.sa_table({rec(kOwn, 1, SmState::Master, 11, 500), rec(kPeer, 2, SmState::Standby, 10, 40),
              rec(kOther, 9, SmState::Standby, 0, 7)},
             true, t0);
  // First listing: live, named and located from the walk's ports, source "sa".
  REQUIRE(c.entries().count(kOther));
  const auto& e = c.entries().at(kOther);
  CHECK(e.sources == kFromSa);
  CHECK(e.sa_listed);
  CHECK(e.lid == Lid{9});
  CHECK(e.info->sm_key == 0);
  auto o = c.others(t0);
  REQUIRE(o.size() == 1);
  CHECK(o[0].where == "\"node07 HCA-1\" lid 9 at " + to_string(kSwitch) + " port 5");
  CHECK(census_sources_text(kFromPoll | kFromSa) == "poll,sa");

  // The master heard from it again (ActCount moved): live again.
  c.sa_table({rec(kOwn, 1, SmState::Master, 11, 600), rec(kOther, 9, SmState::Standby, 0, 9)}, true,
             t0 + seconds(30));
  CHECK(c.others(t0 + seconds(30)).size() == 1);
  CHECK(c.entries().at(kOther).answers == 2);

  // The SM stopped; the master still lists it with the same ActCount: the
  // record is no sign of life, so it is no other SM after the expiry, but it
  // stays listed (silent) while the SA lists it.
  c.sa_table({rec(kOwn, 1, SmState::Master, 11, 700), rec(kOther, 9, SmState::Standby, 0, 9)}, true,
             t0 + seconds(60));
  CHECK(c.others(t0 + seconds(60)).empty());
  c.expire(t0 + seconds(60));
  REQUIRE(c.entries().count(kOther));
  CHECK(c.state_text(c.entries().at(kOther), t0 + seconds(60)) == "silent");
  // A truncated table that leaves it out changes nothing; a whole one drops it.
  c.sa_table({rec(kOwn, 1, SmState::Master, 11, 800)}, false, t0 + seconds(90));
  c.expire(t0 + seconds(90));
  CHECK(c.entries().count(kOther));
  c.sa_table({rec(kOwn, 1, SmState::Master, 11, 900)}, true, t0 + seconds(120));
  c.expire(t0 + seconds(120));
  CHECK_FALSE(c.entries().count(kOther));
}

TEST_CASE("Census: an SA record does not overwrite a fresher direct answer", "[agent][census][sa]") {
  Census c({seconds(15), 8});
  c.set_heads(kOwn, {kPeer});
  const TimePoint t0{};
  SmInfo direct = sminfo(kOther, SmState::Standby, 3);
  direct.sm_key = 0x1234;
  direct.act_count = 50;
  c.answered(direct, kFromIsSm, Lid{9}, t0);
  SmInfo old = sminfo(kOther, SmState::Discovering, 3);
  old.act_count = 40;
  c.sa_table({mad::SmInfoRecord{Lid{9}, old}}, true, t0 + seconds(1));
  const auto& e = c.entries().at(kOther);
  CHECK(e.info->state == SmState::Standby);  // the direct answer, not the sweep-old record
  CHECK(e.info->sm_key == 0x1234);
  CHECK(e.answers == 1);
  CHECK(e.sources == (kFromIsSm | kFromSa));
  // Once the direct answers stop, a record that moved counts, keeping the SM_Key seen.
  old.act_count = 60;
  c.sa_table({mad::SmInfoRecord{Lid{9}, old}}, true, t0 + seconds(20));
  CHECK(c.entries().at(kOther).info->state == SmState::Discovering);
  CHECK(c.entries().at(kOther).info->sm_key == 0x1234);
  CHECK(c.others(t0 + seconds(20)).size() == 1);
}

TEST_CASE("Census: an SM answering with a head's GUID from another port is an impostor, never the head's answer",
          "[agent][census][impostor]") {
  Census c({seconds(15), 8});
  c.set_heads(kOwn, {kPeer});
  const TimePoint t0{};
  // head02 where the walk found it: switch port 1, LID 4.
  auto head02 = port(kPeer, "head02", DrPath{{1, 1}}, kSwitch, 1);
  head02.lid = Lid{4};
  c.known_ports({head02});
  c.answered(sminfo(kPeer, SmState::Standby, 10), kFromPoll, Lid{4}, t0);
  // A compute node's port with IsSM answers SMInfo as head02, MASTER at 15.
  c.walked({port(kOther, "node07 HCA-1", DrPath{{1, 5}}, kSwitch, 5)}, true, t0);
  CHECK(c.answered_at(kOther, sminfo(kPeer, SmState::Master, 15), Lid{7}, t0 + seconds(1)));
  // head02's entry keeps head02's own answer.
  CHECK(c.entries().at(kPeer).info->state == SmState::Standby);
  CHECK(c.entries().at(kPeer).info->priority == 10);
  CHECK(c.entries().at(kPeer).lid == Lid{4});
  const auto imps = c.impostors(t0 + seconds(1));
  REQUIRE(imps.size() == 1);
  CHECK(imps[0].port == kOther);
  CHECK(c.impostor_text(t0 + seconds(1)) ==
        "SM at \"node07 HCA-1\" lid 7 at " + to_string(kSwitch) + " port 5 answers as head " + to_string(kPeer) +
            " MASTER prio 15; that head is at \"head02\" lid 4 at " + to_string(kSwitch) + " port 1");
  // Our own GUID claimed is an impostor too; another GUID is just an SM.
  CHECK(c.answered_at(kOther, sminfo(kOwn, SmState::Master, 15), Lid{7}, t0 + seconds(2)));
  CHECK_FALSE(c.answered_at(Guid{0x44}, sminfo(Guid{0x45}, SmState::Standby, 1), Lid{9}, t0 + seconds(2)));
  // Answering with its own GUID ends it; so does time, or the port losing IsSM.
  CHECK_FALSE(c.answered_at(kOther, sminfo(kOther, SmState::Standby, 0), Lid{7}, t0 + seconds(3)));
  CHECK(c.impostors(t0 + seconds(3)).empty());
  CHECK(c.answered_at(kOther, sminfo(kPeer, SmState::Master, 15), Lid{7}, t0 + seconds(4)));
  CHECK(c.impostors(t0 + seconds(4) + 4 * seconds(15) + seconds(1)).empty());
  c.walked({}, true, t0 + seconds(5));
  CHECK(c.impostors(t0 + seconds(5)).empty());
  // A recheck sees its IsSM gone and the entry expires: the impostor goes
  // with it, not only after 4 x expiry (it used to stay listed then).
  c.walked({port(kOther, "node07 HCA-1", DrPath{{1, 5}}, kSwitch, 5)}, true, t0 + seconds(6));
  CHECK(c.answered_at(kOther, sminfo(kPeer, SmState::Master, 15), Lid{7}, t0 + seconds(6)));
  REQUIRE(c.impostors(t0 + seconds(7)).size() == 1);
  c.rechecked(port(kOther, "node07 HCA-1", DrPath{{1, 5}}, kSwitch, 5), false, t0 + seconds(8));
  CHECK(c.impostors(t0 + seconds(8)).empty());
  c.expire(t0 + seconds(30));  // its own answer (t0 + 3 s) is no longer live
  CHECK_FALSE(c.entries().count(kOther));
  c.walked({port(kOther, "node07 HCA-1", DrPath{{1, 5}}, kSwitch, 5)}, true, t0 + seconds(31));
  CHECK(c.impostors(t0 + seconds(31)).empty());  // IsSM again, but no forged answer since
}
