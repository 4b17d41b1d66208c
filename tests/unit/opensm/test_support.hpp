// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// Shared helpers for the opensm.conf tests: test data, a fake OpenSM that answers
// like `opensm [-F conf] -c dump`, and an in-memory FileSystem.
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "smha/config/config.hpp"
#include "smha/opensm/conf.hpp"
#include "smha/opensm/probe.hpp"
#include "smha/os/file_system.hpp"

namespace smha::opensm::test {

inline std::string data_path(const std::string& rel) {
  return std::string(SMHA_TEST_DATA_DIR) + "/" + rel;
}

inline std::string read_data(const std::string& rel) {
  std::ifstream in(data_path(rel));
  INFO("reading " << data_path(rel));
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline config::Config load_data_config(const std::string& name) {
  // The file name (not the absolute path) goes into the header, so goldens are
  // the same on every machine.
  auto r = config::load_config_from_string(read_data("render/" + name + ".yaml"), name + ".yaml");
  INFO(r.error_text());
  REQUIRE(r.ok());
  return r.value();
}

inline ProbeOutput capture(const std::string& name) {
  return ProbeOutput{read_data("probe/" + name + ".out"), read_data("probe/" + name + ".dump")};
}

inline Capabilities caps_of(const std::string& name, const std::string& binary = "/usr/sbin/opensm") {
  auto caps = parse_probe(binary, capture(name));
  REQUIRE(caps.ok());
  return *caps;
}

// Behaves like `opensm [-F conf] -c dump` for a binary whose `-c` capture is
// `capture_name`: known keys from the conf replace the defaults in the dump,
// unknown ones give "Unrecognized token". `overrides` makes it take a key
// differently from what the file says (as OpenSM does when it clamps a value).
class FakeOpensm final : public OpensmRunner {
 public:
  explicit FakeOpensm(std::string capture_name) : capture_(capture(capture_name)) {}

  Result<ProbeOutput> run(const std::string& binary,
                          std::optional<std::string_view> config_text) override {
    ++runs;
    last_binary = binary;
    if (fail) return *fail;
    if (!config_text) return capture_;
    last_config = std::string(*config_text);
    ConfMap taken = parse_opensm_conf(capture_.dump);
    std::string output;
    for (const auto& [key, value] : parse_opensm_conf(*config_text)) {
      if (taken.count(key) == 0) {
        output += " Unrecognized token: \"" + key + "\"\n";
        continue;
      }
      taken[key] = value;
    }
    for (const auto& [key, value] : overrides) taken[key] = value;
    std::string dump;
    for (const auto& [key, value] : taken) dump += key + " " + value + "\n";
    return ProbeOutput{capture_.output + output, dump};
  }

  std::map<std::string, std::string> overrides;
  std::optional<Error> fail;
  int runs = 0;
  std::string last_binary;
  std::string last_config;

 private:
  ProbeOutput capture_;
};

// Files in memory; records every write.
class MemoryFileSystem final : public os::FileSystem {
 public:
  struct Write {
    std::string path;
    std::string content;
    unsigned mode;
  };

  Status write_atomic(const std::string& path, std::string_view content, unsigned mode) override {
    if (write_error) return *write_error;
    files[path] = std::string(content);
    writes.push_back({path, std::string(content), mode});
    return Status::Ok();
  }
  Result<std::string> read(const std::string& path) const override {
    if (read_error) return *read_error;
    auto it = files.find(path);
    if (it == files.end()) return make_error(Errc::NotFound, path + ": no such file");
    return it->second;
  }

  std::map<std::string, std::string> files;
  std::vector<Write> writes;
  std::optional<Error> read_error;
  std::optional<Error> write_error;
};

}  // namespace smha::opensm::test
