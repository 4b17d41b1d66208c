// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/opensm/cli.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <ostream>
#include <sstream>

namespace smha::opensm {

Status ReadOnlyFileSystem::write_atomic(const std::string& path, std::string_view, unsigned) {
  return make_error("read_only", "refusing to write " + path + ": read-only file system seam");
}

Result<std::string> ReadOnlyFileSystem::read(const std::string& path) const {
  std::ifstream in(path);
  if (!in) {
    int err = errno;
    if (err == ENOENT) return make_error("not_found", path + ": no such file");
    return make_error("io", path + ": " + std::strerror(err));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void print_report(const CheckReport& report, std::ostream& err) {
  for (const auto& w : report.warnings) err << "warning: " << w.to_string() << '\n';
  for (const auto& e : report.errors) err << "error: " << e.to_string() << '\n';
}

int run_check_config(const std::string& path, OpensmRunner& runner, std::ostream& out,
                     std::ostream& err) {
  CheckReport report = check_config(path, runner);
  print_report(report, err);
  if (!report.ok()) {
    err << path << ": " << report.errors.size() << " error(s)\n";
    return 1;
  }
  out << path << ": OK for " << report.capabilities->describe() << '\n';
  return 0;
}

int run_render_config(const std::string& path, OpensmRunner& runner, const FileSystem& fs,
                      bool diff, std::ostream& out, std::ostream& err) {
  auto loaded = config::load_config(path);
  if (!loaded.ok()) {
    for (const auto& e : loaded.errors()) err << "error: " << e.to_string() << '\n';
    return 1;
  }
  CheckReport report = check_loaded_config(loaded.value(), runner);
  print_report(report, err);
  if (!report.ok()) return 1;
  if (!diff) {
    out << report.rendered;
    return 0;
  }
  const std::string& conf_path = loaded.value().opensm.conf_path;
  std::string current;
  if (auto r = fs.read(conf_path); r.ok()) {
    current = *r;
  } else if (r.error().code != "not_found") {
    err << "error: cannot read " << conf_path << ": " << r.error().message << '\n';
    return 1;
  }
  std::string d = diff_lines(current, report.rendered, conf_path, "rendered from " + path);
  if (d.empty()) {
    out << conf_path << " is up to date\n";
  } else {
    out << d;
  }
  return 0;
}

}  // namespace smha::opensm
