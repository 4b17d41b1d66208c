// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// The name of a fabric a head serves with one smhad instance (smha.yaml's
// `fabric`, smhad --fabric, the unit smhad@NAME, smctl -f NAME): it names
// files, a socket and a systemd unit, so it is kept to a safe alphabet.
#pragma once

#include <cctype>
#include <optional>
#include <string>
#include <string_view>

namespace smha {

inline constexpr std::size_t kMaxFabricNameBytes = 32;

// Why `name` cannot be a fabric name, or nullopt: 1 to 32 of [A-Za-z0-9_-],
// starting with a letter or digit.
inline std::optional<std::string> fabric_name_problem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name.size() > kMaxFabricNameBytes) return "is longer than 32 characters";
  for (char ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-')
      return "may hold only letters, digits, '_' and '-' (it names files, a socket and a systemd unit)";
  if (!std::isalnum(static_cast<unsigned char>(name[0]))) return "must start with a letter or digit";
  return std::nullopt;
}

// Where smhad's control sockets are (systemd's RuntimeDirectory=smha).
inline constexpr const char* kRunDir = "/run/smha";

// The control socket of instance `name` in `run_dir`: NAME.sock; the
// one-fabric smhad's, smhad.sock, for "". The one derivation: smha.yaml's
// control.socket defaults to it (lib/config) and `smctl -f NAME` connects to
// it (lib/client).
inline std::string instance_socket_path(std::string_view name, std::string_view run_dir = kRunDir) {
  return std::string(run_dir) + "/" + (name.empty() ? std::string("smhad") : std::string(name)) + ".sock";
}

}  // namespace smha
