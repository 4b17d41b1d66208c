// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
// libFuzzer: the SMP, SMInfo, PortInfo, NodeInfo, NodeDescription, forwarding
// table (SwitchInfo, LFT and MFT blocks), SA SMInfoRecord-table, SA
// ServiceRecord, MCMemberRecord, InformInfo and InformInfoRecord-table and PMA
// PortCounters decoders take any bytes without UB or crash, and whatever
// decodes re-encodes to the same fields where an encoder exists.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>
#include <algorithm>

#include "smha/core/text.hpp"
#include "smha/mad/pma.hpp"
#include "smha/mad/sa.hpp"
#include "smha/mad/sa_records.hpp"
#include "smha/mad/service_record.hpp"
#include "smha/mad/smp.hpp"

using namespace smha::mad;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::uint8_t> bytes(data, size);
  auto smp = decode_smp(bytes);
  auto info = decode_sminfo_response(bytes);
  if (info.ok() && !smp.ok()) std::abort();  // a response is an SMP first
  auto port = decode_portinfo_response(bytes);
  if (port.ok() && !smp.ok()) std::abort();
  if (port.ok() && info.ok()) std::abort();  // one attribute ID: never both
  auto node = decode_nodeinfo_response(bytes);
  if (node.ok() && (!smp.ok() || port.ok() || info.ok())) std::abort();
  auto desc = decode_node_description_response(bytes);
  if (desc.ok() && (!smp.ok() || node.ok() || port.ok() || info.ok())) std::abort();
  if (desc.ok()) {
    if (desc->size() > kNodeDescriptionSize) std::abort();
    const std::string shown = smha::printable(*desc);
    for (char c : shown)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) std::abort();  // no control characters left
  }
  if (smp.ok()) {
    MadBytes again = encode_smp(*smp);
    auto back = decode_smp(again);
    if (!back.ok() || !(*back == *smp)) std::abort();  // decode . encode is the identity on Smp
  }
  if (size >= kSmpDataSize) {
    auto payload = decode_sminfo(bytes.first(kSmpDataSize));
    if (payload.ok()) {
      auto re = decode_sminfo(encode_sminfo(*payload));
      if (!re.ok() || !(*re == *payload)) std::abort();
    }
    auto pi = decode_portinfo(bytes.first(kSmpDataSize));
    if (pi.ok()) {
      if (pi->state == PortState::Unknown) std::abort();  // only 1..4 decode
      auto re = decode_portinfo(encode_portinfo(*pi));
      if (!re.ok() || !(*re == *pi)) std::abort();
    }
  }
  if (size >= kSmpDataSize) {
    auto ni = decode_nodeinfo(bytes.first(kSmpDataSize));
    if (ni.ok()) {
      if (ni->type == NodeType::Unknown || ni->num_ports == 0 || ni->local_port > ni->num_ports)
        std::abort();
      auto re = decode_nodeinfo(encode_nodeinfo(*ni));
      if (!re.ok() || !(*re == *ni)) std::abort();
    }
    auto nd = decode_node_description(bytes.first(kSmpDataSize));
    if (!nd.ok()) std::abort();  // any 64 bytes are a description
    auto re = decode_node_description(encode_node_description(*nd));
    if (!re.ok() || *re != *nd) std::abort();
  }
  auto table = decode_sminfo_record_table(bytes);
  if (table.ok()) {
    if (smp.ok()) std::abort();  // class 0x03 is never an SMP class
    const std::size_t room = (size - kSaHeaderSize) / kSmInfoRecordSize;
    if (table->records.size() > room) std::abort();  // bounded by the bytes carried
    if (table->claimed && table->records.size() > *table->claimed) std::abort();
    if (table->claimed && table->truncated != (*table->claimed > table->records.size())) std::abort();
    // Re-encoded (first six records, no claim), the same records come back.
    std::vector<smha::mad::SmInfoRecord> first(
        table->records.begin(),
        table->records.begin() + static_cast<std::ptrdiff_t>(std::min(table->records.size(), kSmInfoRecordsPerMad)));
    bool zero_tail = false;  // an all-zero record is padding to a decoder without a claim
    for (const auto& r : first)
      zero_tail = r.lid.value == 0 && r.info.guid.value == 0 && r.info.sm_key == 0 &&
                  r.info.act_count == 0 && r.info.priority == 0 && r.info.state == smha::SmState::NotActive;
    if (!first.empty() && !zero_tail) {
      auto re = decode_sminfo_record_table(encode_sminfo_record_table_response(1, first, false));
      if (!re.ok() || re->records != first) std::abort();
    }
  }
  auto ports = decode_port_info_record_table(bytes);
  if (ports.ok()) {
    if (smp.ok() || table.ok()) std::abort();  // another class or attribute
    const std::size_t room = (size - kSaHeaderSize) / kPortInfoRecordSize;
    if (ports->records.size() > room) std::abort();
    if (ports->claimed && ports->records.size() > *ports->claimed) std::abort();
    // Re-encoded (the first two, what one MAD holds, with the claim), the
    // same records come back as far as the PortInfo decoder keeps fields.
    std::vector<smha::mad::PortInfoRecord> first(
        ports->records.begin(), ports->records.begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(ports->records.size(), 2)));
    if (!first.empty()) {
      auto re = decode_port_info_record_table(encode_port_info_record_table_response(1, first, true));
      if (!re.ok() || re->records != first || re->truncated) std::abort();
    }
  }
  for (std::uint8_t method : {kMethodGetResp, kMethodDeleteResp}) {
    auto rec = decode_service_record_response(bytes, method);
    if (!rec.ok()) continue;
    if (smp.ok() || table.ok()) std::abort();  // another class or attribute
    if (rec->name.size() > kServiceNameSize) std::abort();
    auto re = decode_service_record_response(encode_service_record_response(1, method, 0, &*rec), method);
    if (!re.ok() || !(*re == *rec)) std::abort();
  }
  auto req = decode_service_record_request(bytes);
  if (req.ok()) {
    if (req->record.name.size() > kServiceNameSize) std::abort();
    smha::Result<MadBytes> again = req->method == kMethodSet ? encode_service_record_set(req->tid, req->record)
                             : req->method == kMethodGet
                                 ? encode_service_record_get(req->tid, req->record.id, req->record.gid, req->record.name)
                                 : encode_service_record_delete(req->tid, req->record);
    if (!again.ok()) std::abort();  // every decoded name fits
    auto back = decode_service_record_request(*again);
    if (!back.ok() || back->method != req->method || back->record.gid != req->record.gid ||
        back->record.name != req->record.name)
      std::abort();
  }
  auto pc = decode_port_counters_response(bytes);
  if (pc.ok()) {
    if (smp.ok() || table.ok() || ports.ok()) std::abort();  // another class
    for (auto c : kErrorCounters)
      if (at(pc->errors, c) > counter_max(c)) std::abort();  // no counter wider than its field
    auto re = decode_port_counters_response(encode_port_counters_response(1, *pc));
    if (!re.ok() || !(*re == *pc)) std::abort();
  }
  // Forwarding tables (the census walk, the takeover report): SMPs, one
  // attribute each.
  auto top = decode_switchinfo_lft_top(bytes);
  auto lft = decode_lft_response(bytes);
  auto mft = decode_mft_response(bytes);
  if ((top.ok() || lft.ok() || mft.ok()) && !smp.ok()) std::abort();
  if (int(top.ok()) + int(lft.ok()) + int(mft.ok()) + int(info.ok()) + int(port.ok()) + int(node.ok()) > 1)
    std::abort();
  // MCMemberRecord (the takeover report's group check, the workload tools).
  for (std::uint8_t method : {kMethodGetResp, kMethodDeleteResp}) {
    auto mc = decode_mcmember_response(bytes, method);
    if (!mc.ok()) continue;
    if (smp.ok() || table.ok()) std::abort();  // another class or attribute
    auto re = decode_mcmember_response(encode_mcmember_response(1, method, 0, &*mc), method);
    if (!re.ok() || !(*re == *mc)) std::abort();
  }
  (void)decode_mcmember_request(bytes);
  (void)decode_inform_info_response(bytes);
  auto informs = decode_inform_info_record_table(bytes);
  if (informs.ok()) {
    if (smp.ok()) std::abort();
    if (informs->records.size() > (size >= kSaHeaderSize ? (size - kSaHeaderSize) / kInformInfoRecordSize : 0))
      std::abort();  // bounded by the bytes carried
  }
  (void)describe_sa_status(size >= 2 ? static_cast<std::uint16_t>(data[0] << 8 | data[1]) : 0);
  (void)describe_mad_status(size >= 2 ? static_cast<std::uint16_t>(data[0] << 8 | data[1]) : 0);
  return 0;
}
