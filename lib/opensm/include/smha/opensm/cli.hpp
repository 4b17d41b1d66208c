// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The logic behind `smhad --check-config`, `smhad --print-opensm-conf` and
// `smctl render-config`, kept out of the binaries so it is testable.
#pragma once

#include <iosfwd>
#include <string>

#include "smha/opensm/check.hpp"
#include "smha/os/file_system.hpp"

namespace smha::opensm {

// A FileSystem that only reads (for `render-config --diff`, which must never
// write). write_atomic fails with code "permission" and changes nothing.
class ReadOnlyFileSystem final : public os::FileSystem {
 public:
  Status write_atomic(const std::string& path, std::string_view content, unsigned mode) override;
  Result<std::string> read(const std::string& path) const override;
};

// Prints every warning and error of `report` to `err`, one per line
// ("warning: <file>:<line>:<col>: <key>: ..." / "error: ...").
void print_report(const CheckReport& report, std::ostream& err);

// --check-config: returns 0 if the config is valid for the installed OpenSM, 1 if not.
int run_check_config(const std::string& path, OpensmRunner& runner, std::ostream& out,
                     std::ostream& err);

// run_render_config's results.
constexpr int kRenderOk = 0;       // printed; with diff: the file is up to date
constexpr int kRenderError = 1;    // errors printed to `err`
constexpr int kRenderDiffers = 2;  // with diff: the file at opensm.conf_path differs

// --print-opensm-conf / render-config: prints the rendered file or the errors.
// sm_priority is the value OpenSM runs with, not the configured one: the value
// in the file at opensm.conf_path when it is one of this head's rendered values
// (standby, master, yield, claim; doc/ha-engine.md "Rendered priorities"), else
// the standby value smhad starts with; a "note:" line on `err` says which.
// With `diff`, prints what would change versus the file at opensm.conf_path
// (read through `fs`; a missing file diffs against empty) instead.
int run_render_config(const std::string& path, OpensmRunner& runner, const os::FileSystem& fs,
                      bool diff, std::ostream& out, std::ostream& err, const config::LoadOptions& load = {});

}  // namespace smha::opensm
