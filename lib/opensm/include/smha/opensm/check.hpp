// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Checking a Config against the installed OpenSM: deciding flavor and the
// AR/SHARP switches (plan_render), refusing rendered keys the binary does not
// know, and feeding the rendered file to the binary itself to see that every key
// was accepted with the value given. Used by `smhad --check-config`,
// `smctl render-config` and the daemon before it writes opensm.conf.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "smha/config/config.hpp"
#include "smha/opensm/conf.hpp"
#include "smha/opensm/probe.hpp"

namespace smha::opensm {

using config::Diagnostic;

struct RenderPlan {
  RenderInputs inputs;
  std::vector<Diagnostic> errors;
  std::vector<Diagnostic> warnings;
  bool ok() const { return errors.empty(); }
};

// The warning for `no_clients_rereg TRUE` in opensm.extra.
inline constexpr const char* kNoClientsReregWarning =
    "is TRUE: a new master will not tell the clients to re-register, so after a takeover they do not "
    "rejoin their multicast groups (IPoIB broadcast, rdma_cm) or re-register services and event "
    "subscriptions with its SA, which starts with none; leave it FALSE on HA heads";

// Decides the RenderInputs for `config` on the OpenSM described by `caps`:
// - flavor auto takes the probed flavor; flavor nvidia on an upstream binary is an error;
// - adaptive_routing / sharp that the binary cannot do are errors, or warnings
//   (and switched off) when opensm.downgrade_unsupported is true;
// - on upstream, every routing engine must be one upstream has built in (an
//   unknown one makes OpenSM fall back to minhop);
// - sharp_key is set on an NVIDIA SM that knows sharp_enabled (sharp: false
//   then renders SHARP disabled, not the binary's default);
// - `no_clients_rereg TRUE` in opensm.extra is a warning (kNoClientsReregWarning).
RenderPlan plan_render(const config::Config& config, const Capabilities& caps,
                       std::uint8_t sm_priority, std::optional<Guid> port_guid);

// The routing engine chain as OpenSM is told it (plan_render's effective
// adaptive routing applied, so NVIDIA AR turns ftree into ar_ftree), one name
// per entry: what OpenSM's log names when it configures the switches.
std::vector<std::string> rendered_routing_engines(const config::Config& config,
                                                  const Capabilities& caps);

// One error per key in `rendered` that `caps` does not know, naming the key, the
// OpenSM version and the YAML key it came from.
std::vector<Diagnostic> check_rendered_keys(const config::Config& config,
                                            std::string_view rendered, const Capabilities& caps);

// Feeds `rendered` to the binary (`opensm -F rendered -c dump`) and reports every
// "Unrecognized token" and every rendered key whose value OpenSM did not take
// as given. Errors from running the binary come back as one diagnostic.
std::vector<Diagnostic> verify_accepted(OpensmRunner& runner, const config::Config& config,
                                        std::string_view rendered, const Capabilities& caps);

// What the daemon calls before each write of opensm.conf (start, reload, priority
// change), with the capabilities probed once at start: plan_render, render and
// check_rendered_keys, without running OpenSM. `rendered` is set only if there
// are no errors. With `policy_fs`, the policy files opensm.conf names are read
// through it and their content hashes go into the header (hash_policy_files);
// without, the header has none.
struct PreparedConf {
  std::string rendered;
  RenderInputs inputs;
  std::vector<Diagnostic> errors;
  std::vector<Diagnostic> warnings;
  bool ok() const { return errors.empty(); }
};
PreparedConf prepare_opensm_conf(const config::Config& config, const Capabilities& caps,
                                 std::uint8_t sm_priority, std::optional<Guid> port_guid,
                                 const os::FileSystem* policy_fs = nullptr);

struct CheckReport {
  std::vector<Diagnostic> errors;
  std::vector<Diagnostic> warnings;
  std::optional<Capabilities> capabilities;
  std::string rendered;  // set when the config loaded and a plan was made
  bool ok() const { return errors.empty(); }
};

// Everything --check-config does: load + validate `path`, probe its
// opensm.binary, plan, render (configured priority, port GUID if configured),
// check the keys, and have OpenSM read the result. Every stage runs and
// reports everything it finds, whatever the stages before found, except that
// nothing runs after a file that does not load or a binary that cannot be
// probed (the later stages need a Config and the binary's key table).
// `rendered` is set only when there are no errors.
CheckReport check_config(const std::string& path, OpensmRunner& runner);
// The rendered text includes the policy files' hashes, read from disk.
CheckReport check_loaded_config(const config::Config& config, OpensmRunner& runner);

}  // namespace smha::opensm
