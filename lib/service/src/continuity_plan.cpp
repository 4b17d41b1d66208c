// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/service/continuity_plan.hpp"

#include <chrono>

namespace smha::service {

peer::ContinuityConfig continuity_config(const config::Config& config, Guid own_guid) {
  const auto& k = config.continuity;
  peer::ContinuityConfig cc;
  cc.fabric = config.fabric;
  cc.own_name = config.node_name;
  cc.own_guid = own_guid;
  cc.channel.listen_host = k.listen_address;
  cc.channel.listen_port = static_cast<std::uint16_t>(k.listen_port);
  cc.channel.certificate = k.certificate;
  cc.channel.private_key = k.private_key;
  cc.channel.ca = k.ca;
  const std::size_t max_bytes = static_cast<std::size_t>(k.max_copy_mib) * 1024 * 1024;
  cc.channel.max_bytes = max_bytes;
  for (const auto& p : config.peers) {
    cc.channel.peers.push_back({p.name, p.port_guid, p.address_host, static_cast<std::uint16_t>(p.address_port)});
    cc.store.peers[p.name] = p.port_guid;
  }
  cc.store.fabric = config.fabric;
  cc.store.own_name = config.node_name;
  cc.store.sa_path = config.opensm.sa_db_file;
  cc.store.guid2lid_path = config.opensm.cache_dir + "/guid2lid";
  cc.store.max_bytes = max_bytes;
  std::string dumps = config.opensm.dump_files_dir;
  if (!dumps.empty() && dumps.back() != '/') dumps += '/';
  cc.sender.sa_dump_path = dumps + "opensm-sa.dump";
  cc.sender.guid2lid_path = cc.store.guid2lid_path;
  cc.sender.max_bytes = max_bytes;
  cc.sender.refresh = std::chrono::seconds(k.refresh_s);
  cc.sender.bounds = {static_cast<std::size_t>(k.max_services_per_port), static_cast<std::size_t>(k.max_services),
                      static_cast<std::size_t>(k.max_subscriptions_per_port),
                      static_cast<std::size_t>(k.max_subscriptions), static_cast<std::size_t>(k.max_groups)};
  cc.max_copy_age = std::chrono::seconds(k.max_copy_age_s);
  return cc;
}

}  // namespace smha::service
