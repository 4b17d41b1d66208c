// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "smha/opensm/check.hpp"
#include "test_support.hpp"

using namespace smha;
using namespace smha::opensm;
using namespace smha::os;
using namespace smha::opensm::test;

namespace {

config::Config config_of(const std::string& yaml) {
  auto r = config::load_config_from_string(yaml, "t.yaml");
  INFO(r.error_text());
  REQUIRE(r.ok());
  return r.value();
}

std::vector<std::string> strings(const std::vector<Diagnostic>& ds) {
  std::vector<std::string> out;
  for (const auto& d : ds) out.push_back(d.to_string());
  return out;
}

const std::string kNode = "node:\n  name: a\n  port_guid: 0x10\nsm_priority: 9\n";

}  // namespace

TEST_CASE("plan: flavor auto follows the probe") {
  auto c = config_of(kNode);
  auto up = plan_render(c, caps_of("opensm-3.3.23"), 9, Guid{0x10});
  CHECK(up.ok());
  CHECK(up.warnings.empty());
  CHECK(up.inputs.flavor == Flavor::Upstream);
  CHECK(up.inputs.sm_priority == 9);
  CHECK(up.inputs.port_guid == Guid{0x10});
  auto nv = plan_render(c, caps_of("nvidia-synthetic"), 9, std::nullopt);
  CHECK(nv.ok());
  CHECK(nv.inputs.flavor == Flavor::Nvidia);
  CHECK_FALSE(nv.inputs.adaptive_routing);
  CHECK_FALSE(nv.inputs.sharp);
}

TEST_CASE("plan: flavor upstream on NVIDIA SM renders upstream keys only") {
  auto c = config_of(kNode + "opensm:\n  flavor: upstream\n");
  auto plan = plan_render(c, caps_of("nvidia-synthetic"), 9, std::nullopt);
  CHECK(plan.ok());
  CHECK(plan.inputs.flavor == Flavor::Upstream);
}

TEST_CASE("plan: flavor nvidia on upstream OpenSM is an error") {
  auto c = config_of(kNode + "opensm:\n  flavor: nvidia\n");
  auto plan = plan_render(c, caps_of("opensm-3.3.23"), 9, std::nullopt);
  CHECK(strings(plan.errors) ==
        std::vector<std::string>{"t.yaml:6:11: opensm.flavor: is nvidia, but OpenSM 3.3.23 "
                                 "(upstream) at /usr/sbin/opensm knows none of NVIDIA SM's keys "
                                 "(sharp_enabled, ar_mode)"});
}

TEST_CASE("plan: AR and SHARP on upstream are errors, or warnings with downgrade") {
  const std::string yaml = kNode + "opensm:\n  adaptive_routing: true\n  sharp: true\n";
  auto plan = plan_render(config_of(yaml), caps_of("opensm-3.3.23"), 9, std::nullopt);
  CHECK(strings(plan.errors) ==
        std::vector<std::string>{
            "t.yaml:6:21: opensm.adaptive_routing: is true, but OpenSM 3.3.23 (upstream) at "
            "/usr/sbin/opensm cannot do adaptive routing (set opensm.downgrade_unsupported: true "
            "to run without it)",
            "t.yaml:7:10: opensm.sharp: is true, but OpenSM 3.3.23 (upstream) at "
            "/usr/sbin/opensm cannot do SHARP (set opensm.downgrade_unsupported: true to run "
            "without it)"});
  CHECK(plan.warnings.empty());

  auto down = plan_render(config_of(yaml + "  downgrade_unsupported: true\n"),
                          caps_of("opensm-3.3.23"), 9, std::nullopt);
  CHECK(down.ok());
  CHECK(strings(down.warnings) ==
        std::vector<std::string>{
            "t.yaml:6:21: opensm.adaptive_routing: is true, but OpenSM 3.3.23 (upstream) at "
            "/usr/sbin/opensm cannot do adaptive routing; rendering without it "
            "(downgrade_unsupported)",
            "t.yaml:7:10: opensm.sharp: is true, but OpenSM 3.3.23 (upstream) at "
            "/usr/sbin/opensm cannot do SHARP; rendering without it (downgrade_unsupported)"});
  CHECK_FALSE(down.inputs.adaptive_routing);
  CHECK_FALSE(down.inputs.sharp);
  auto conf = parse_opensm_conf(render_opensm_conf(config_of(yaml), down.inputs));
  CHECK(conf.at("routing_engine") == "ftree,updn");
  CHECK(conf.count("sharp_enabled") == 0);
}

TEST_CASE("plan: AR and SHARP on NVIDIA SM") {
  auto c = config_of(kNode + "opensm:\n  adaptive_routing: true\n  sharp: true\n");
  auto plan = plan_render(c, caps_of("nvidia-synthetic", "/opt/nvidia/opensm"), 9, std::nullopt);
  CHECK(plan.ok());
  CHECK(plan.inputs.flavor == Flavor::Nvidia);
  CHECK(plan.inputs.adaptive_routing);
  CHECK(plan.inputs.sharp);
  auto conf = parse_opensm_conf(render_opensm_conf(c, plan.inputs));
  CHECK(conf.at("routing_engine") == "ar_ftree,ar_updn");
  CHECK(conf.at("sharp_enabled") == "2");
}

TEST_CASE("plan: sharp false on an NVIDIA SM renders SHARP disabled, not the binary's default") {
  // Recent NVIDIA SM releases enable SHARP unless the file says otherwise.
  auto off = config_of(kNode + "opensm:\n  sharp: false\n");
  auto plan = plan_render(off, caps_of("nvidia-synthetic"), 9, std::nullopt);
  CHECK(plan.ok());
  CHECK_FALSE(plan.inputs.sharp);
  CHECK(plan.inputs.sharp_key);
  CHECK(parse_opensm_conf(render_opensm_conf(off, plan.inputs)).at("sharp_enabled") == "1");
  // Not given: the same.
  auto unset = config_of(kNode);
  plan = plan_render(unset, caps_of("nvidia-synthetic"), 9, std::nullopt);
  CHECK(parse_opensm_conf(render_opensm_conf(unset, plan.inputs)).at("sharp_enabled") == "1");
  // Checked like any rendered key: the NVIDIA SM knows it, nothing to report.
  CHECK(prepare_opensm_conf(off, caps_of("nvidia-synthetic"), 9, std::nullopt).ok());
  // Upstream, or flavor upstream on an NVIDIA SM: no such key at all.
  plan = plan_render(off, caps_of("opensm-3.3.23"), 9, std::nullopt);
  CHECK_FALSE(plan.inputs.sharp_key);
  CHECK(parse_opensm_conf(render_opensm_conf(off, plan.inputs)).count("sharp_enabled") == 0);
  auto up = config_of(kNode + "opensm:\n  flavor: upstream\n");
  plan = plan_render(up, caps_of("nvidia-synthetic"), 9, std::nullopt);
  CHECK(parse_opensm_conf(render_opensm_conf(up, plan.inputs)).count("sharp_enabled") == 0);
}

TEST_CASE("plan: no_clients_rereg TRUE in extra is a warning (clients would not rejoin after a takeover)") {
  auto c = config_of(kNode + "opensm:\n  extra:\n    no_clients_rereg: true\n");
  auto plan = plan_render(c, caps_of("opensm-3.3.23"), 9, std::nullopt);
  CHECK(plan.ok());
  CHECK(strings(plan.warnings) ==
        std::vector<std::string>{std::string("t.yaml:7:5: opensm.extra.no_clients_rereg: ") + kNoClientsReregWarning});
  CHECK(std::string(kNoClientsReregWarning).find("multicast") != std::string::npos);
  CHECK(plan_render(config_of(kNode + "opensm:\n  extra:\n    no_clients_rereg: FALSE\n"),
                    caps_of("opensm-3.3.23"), 9, std::nullopt)
            .warnings.empty());
}

TEST_CASE("rendered_routing_engines: the chain OpenSM is told, one engine per entry") {
  using Engines = std::vector<std::string>;
  auto ar = config_of(kNode + "opensm:\n  adaptive_routing: true\n  routing_engine: ftree,minhop\n");
  // The takeover report compares OpenSM's logged engine with the first of these:
  // with NVIDIA AR that is ar_ftree, and ar_ftree must not read as a fallback.
  CHECK(rendered_routing_engines(ar, caps_of("nvidia-synthetic", "/opt/nvidia/opensm")) ==
        Engines{"ar_ftree", "minhop"});
  // Downgraded (upstream cannot do AR): the engines as configured.
  auto down = config_of(kNode +
                        "opensm:\n  adaptive_routing: true\n  downgrade_unsupported: true\n"
                        "  routing_engine: ftree,minhop\n");
  CHECK(rendered_routing_engines(down, caps_of("opensm-3.3.23")) == Engines{"ftree", "minhop"});
  CHECK(rendered_routing_engines(config_of(kNode), caps_of("opensm-3.3.23")) ==
        Engines{"ftree", "updn"});
}

TEST_CASE("plan: AR with no AR-capable engine does nothing, so it is an error") {
  auto c = config_of(kNode + "opensm:\n  adaptive_routing: true\n  routing_engine: minhop\n");
  auto plan = plan_render(c, caps_of("nvidia-synthetic", "/opt/nvidia/opensm"), 9, std::nullopt);
  CHECK(strings(plan.errors) ==
        std::vector<std::string>{"t.yaml:7:19: opensm.routing_engine: has no engine with an "
                                 "adaptive-routing variant (ftree or updn), so "
                                 "adaptive_routing: true would do nothing"});
}

TEST_CASE("plan: engines upstream does not have would silently become minhop") {
  auto c = config_of(kNode + "opensm:\n  routing_engine: ftree,fattree,updn\n");
  auto plan = plan_render(c, caps_of("opensm-3.3.23"), 9, std::nullopt);
  CHECK(strings(plan.errors) ==
        std::vector<std::string>{
            "t.yaml:6:19: opensm.routing_engine: engine 'fattree' is not built into OpenSM "
            "3.3.23 (upstream) at /usr/sbin/opensm; OpenSM would fall back to minhop (built in: "
            "none, minhop, updn, dnup, file, ftree, lash, dor, torus-2QoS, nue, dfsssp, sssp)"});
  // NVIDIA SM has more engines than we can list; not checked there.
  CHECK(plan_render(c, caps_of("nvidia-synthetic"), 9, std::nullopt).ok());
  CHECK(plan_render(config_of(kNode + "opensm:\n  routing_engine: torus-2QoS,no_fallback\n"),
                    caps_of("opensm-3.3.23"), 9, std::nullopt)
            .ok());
}

TEST_CASE("rendered keys the installed OpenSM does not know are errors at their YAML key") {
  auto c = config_of(kNode + "opensm:\n  extra:\n    qos: true\n    ar_mode: 2\n    shield_mode: 0\n");
  auto caps = caps_of("opensm-3.3.23");
  std::string rendered = render_opensm_conf(c, {9, std::nullopt, Flavor::Upstream, false, false});
  CHECK(strings(check_rendered_keys(c, rendered, caps)) ==
        std::vector<std::string>{
            "t.yaml:8:5: opensm.extra.ar_mode: opensm.conf key 'ar_mode' is not known to OpenSM "
            "3.3.23 (upstream) at /usr/sbin/opensm (it would ignore it with only an "
            "\"Unrecognized token\" line)",
            "t.yaml:9:5: opensm.extra.shield_mode: opensm.conf key 'shield_mode' is not known to "
            "OpenSM 3.3.23 (upstream) at /usr/sbin/opensm (it would ignore it with only an "
            "\"Unrecognized token\" line)"});
  CHECK(check_rendered_keys(c, rendered, caps_of("nvidia-synthetic")).empty());
  // A managed NVIDIA key rendered for an upstream binary points at its YAML switch.
  auto s = config_of(kNode + "opensm:\n  sharp: true\n");
  std::string nv = render_opensm_conf(s, {9, std::nullopt, Flavor::Nvidia, false, true});
  CHECK(strings(check_rendered_keys(s, nv, caps)) ==
        std::vector<std::string>{
            "t.yaml:6:10: opensm.sharp: opensm.conf key 'sharp_enabled' is not known to OpenSM "
            "3.3.23 (upstream) at /usr/sbin/opensm (it would ignore it with only an "
            "\"Unrecognized token\" line)"});
}

TEST_CASE("verify_accepted reports values OpenSM did not take and unknown tokens") {
  auto c = config_of(kNode + "opensm:\n  extra:\n    lmc: 9\n    packet_life_time: 18\n");
  auto caps = caps_of("opensm-3.3.23");
  std::string rendered = render_opensm_conf(c, {9, std::nullopt, Flavor::Upstream, false, false});
  FakeOpensm fake("opensm-3.3.23");
  // Taken as given; OpenSM prints packet_life_time in hex (0x12 == 18).
  fake.overrides = {{"packet_life_time", "0x12"}};
  CHECK(verify_accepted(fake, c, rendered, caps).empty());
  CHECK(fake.last_config == rendered);
  // OpenSM clamps lmc to 7.
  fake.overrides["lmc"] = "7";
  CHECK(strings(verify_accepted(fake, c, rendered, caps)) ==
        std::vector<std::string>{"t.yaml:7:5: opensm.extra.lmc: OpenSM 3.3.23 (upstream) at "
                                 "/usr/sbin/opensm read opensm.conf key 'lmc' as '7', not '9'"});
  // Unknown tokens.
  std::string with_unknown = rendered + "sharp_enabled 2\n";
  fake.overrides.clear();
  CHECK(strings(verify_accepted(fake, c, with_unknown, caps)) ==
        std::vector<std::string>{"t.yaml: opensm.sharp: OpenSM 3.3.23 (upstream) at "
                                 "/usr/sbin/opensm does not know opensm.conf key "
                                 "'sharp_enabled' (\"Unrecognized token\")"});
  // The runner failing.
  fake.fail = make_error(Errc::Timeout, "killed");
  CHECK(strings(verify_accepted(fake, c, rendered, caps)) ==
        std::vector<std::string>{"t.yaml: opensm.binary: could not have /usr/sbin/opensm read "
                                 "the rendered file: killed"});
}

TEST_CASE("check_config: all stages on a file") {
  std::string dir = (std::filesystem::temp_directory_path() /
                     ("smha-check-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  std::string path = dir + "/smha.yaml";
  FakeOpensm fake("opensm-3.3.23");

  std::ofstream(path) << kNode;
  auto good = check_config(path, fake);
  CHECK(good.ok());
  CHECK(fake.runs == 2);  // probe + verify
  REQUIRE(good.capabilities);
  CHECK(good.capabilities->version == "3.3.23");
  CHECK(parse_opensm_conf(good.rendered).at("sm_priority") == "9");
  CHECK(parse_opensm_conf(good.rendered).at("guid") == "0x0000000000000010");

  std::ofstream(path) << kNode + "sm_priority: 99\n";
  auto bad = check_config(path, fake);
  CHECK(strings(bad.errors) ==
        std::vector<std::string>{path + ":5:1: sm_priority: duplicate key (first set at line 4)"});
  CHECK(fake.runs == 2);  // no probe for an invalid file

  std::ofstream(path) << kNode + "opensm:\n  extra:\n    foo: 1\n";
  auto unknown = check_config(path, fake);
  CHECK(strings(unknown.errors) ==
        std::vector<std::string>{path + ":7:5: opensm.extra.foo: opensm.conf key 'foo' is not "
                                        "known to OpenSM 3.3.23 (upstream) at /usr/sbin/opensm "
                                        "(it would ignore it with only an \"Unrecognized "
                                        "token\" line)"});

  // Problems in every stage at once: the plan (AR and an engine upstream does
  // not have), keys the binary does not know, a value it does not take, and a
  // warning: all reported in one run.
  std::ofstream(path) << kNode + "opensm:\n  adaptive_routing: true\n  routing_engine: ar_ftree\n"
                                 "  extra:\n    foo: 1\n    lmc: 9\n    no_clients_rereg: true\n";
  fake.overrides = {{"lmc", "7"}};
  auto many = check_config(path, fake);
  fake.overrides.clear();
  CHECK(strings(many.errors) ==
        std::vector<std::string>{
            path + ":6:21: opensm.adaptive_routing: is true, but OpenSM 3.3.23 (upstream) at /usr/sbin/opensm "
                   "cannot do adaptive routing (set opensm.downgrade_unsupported: true to run without it)",
            path + ":7:19: opensm.routing_engine: engine 'ar_ftree' is not built into OpenSM 3.3.23 (upstream) at "
                   "/usr/sbin/opensm; OpenSM would fall back to minhop (built in: none, minhop, updn, dnup, file, "
                   "ftree, lash, dor, torus-2QoS, nue, dfsssp, sssp)",
            path + ":9:5: opensm.extra.foo: opensm.conf key 'foo' is not known to OpenSM 3.3.23 (upstream) at "
                   "/usr/sbin/opensm (it would ignore it with only an \"Unrecognized token\" line)",
            path + ":10:5: opensm.extra.lmc: OpenSM 3.3.23 (upstream) at /usr/sbin/opensm read opensm.conf key "
                   "'lmc' as '7', not '9'"});
  CHECK(strings(many.warnings) ==
        std::vector<std::string>{path + ":11:5: opensm.extra.no_clients_rereg: " + kNoClientsReregWarning,
                                 path + ": sm_key: " + config::kDefaultSmKeyWarning,
                                 path + ": sa_key: " + config::kDefaultSaKeyWarning});
  CHECK(many.rendered.empty());

  fake.fail = make_error(Errc::Exec, "cannot run /usr/sbin/opensm: No such file or directory");
  std::ofstream(path) << kNode;
  auto noexec = check_config(path, fake);
  CHECK(strings(noexec.errors) ==
        std::vector<std::string>{path + ": opensm.binary: probe failed: cannot run "
                                        "/usr/sbin/opensm: No such file or directory"});
  std::filesystem::remove_all(dir);
}

TEST_CASE("prepare_opensm_conf: plan, render and key check without running OpenSM") {
  auto caps = caps_of("opensm-3.3.23");
  auto good = prepare_opensm_conf(config_of(kNode), caps, 4, Guid{0x10});
  REQUIRE(good.ok());
  CHECK(good.inputs.sm_priority == 4);
  CHECK(parse_opensm_conf(good.rendered).at("sm_priority") == "4");
  CHECK(parse_opensm_conf(good.rendered).at("guid") == "0x0000000000000010");

  auto unknown = prepare_opensm_conf(config_of(kNode + "opensm:\n  extra:\n    foo: 1\n"), caps, 4,
                                     std::nullopt);
  CHECK(unknown.rendered.empty());
  REQUIRE(unknown.errors.size() == 1);
  CHECK(unknown.errors[0].key_path == "opensm.extra.foo");

  auto ar = prepare_opensm_conf(config_of(kNode + "opensm:\n  adaptive_routing: true\n"), caps, 4,
                                std::nullopt);
  CHECK(ar.rendered.empty());
  REQUIRE(ar.errors.size() == 1);
  CHECK(ar.errors[0].key_path == "opensm.adaptive_routing");
}
