// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Capability probe: what the installed OpenSM is and which opensm.conf keys it
// knows. `opensm -c FILE` writes every key it knows (with its default) to FILE
// and exits without touching the fabric (measured with OpenSM 3.3.23: no umad
// device is opened, nothing is logged to the log file, exit status 0);
// `opensm -F CONF -c FILE` first reads CONF, so FILE shows how each value was
// taken, and the output names every key it did not know ("Unrecognized token").
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "smha/core/result.hpp"
#include "smha/opensm/conf.hpp"

namespace smha::opensm {

// What one `opensm [-F CONF] -c DUMP` run produced.
struct ProbeOutput {
  std::string output;  // stdout and stderr, interleaved
  std::string dump;    // the file written by -c
};

// Runs OpenSM in its config-dump mode. A seam, so tests can feed captured output.
class OpensmRunner {
 public:
  virtual ~OpensmRunner() = default;
  // Runs `binary [-F <config_text in a temp file>] -c <temp file>`. Errors:
  // "exec" (cannot start), "timeout" (killed), "failed" (no dump written),
  // "io" (temp directory, config file or pipe).
  virtual Result<ProbeOutput> run(const std::string& binary,
                                  std::optional<std::string_view> config_text) = 0;
};

// The real runner: posix_spawn without a shell, in its own process group, with
// stdin from /dev/null and a private temp directory (mode 0700, also its cwd;
// removed afterwards) holding the config (0600) and the dump. If it has not exited within `timeout` its process group
// is killed (SIGKILL, by pid) and reaped.
class ExecOpensmRunner final : public OpensmRunner {
 public:
  explicit ExecOpensmRunner(std::chrono::milliseconds timeout = std::chrono::seconds(10))
      : timeout_(timeout) {}
  Result<ProbeOutput> run(const std::string& binary,
                          std::optional<std::string_view> config_text) override;

 private:
  std::chrono::milliseconds timeout_;
};

struct Capabilities {
  std::string binary;
  std::string version;  // e.g. "3.3.23"; "unknown" if the banner had none
  Flavor flavor = Flavor::Upstream;
  ConfMap defaults;     // every key the binary knows -> its default value
  bool adaptive_routing = false;  // knows NVIDIA's AR keys (ar_mode / ar_sl_mask)
  bool sharp = false;             // knows sharp_enabled

  bool knows(std::string_view key) const { return defaults.count(std::string(key)) != 0; }
  // "OpenSM 3.3.23 (upstream) at /usr/sbin/opensm"
  std::string describe() const;
};

// Interprets a probe run of `binary`. Error "failed" if the dump holds no keys.
Result<Capabilities> parse_probe(const std::string& binary, const ProbeOutput& output);

// Runs the probe (no config file) and interprets it.
Result<Capabilities> probe_opensm(OpensmRunner& runner, const std::string& binary);

}  // namespace smha::opensm
