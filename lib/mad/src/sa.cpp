// SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
#include "smha/mad/sa.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "wire.hpp"

namespace smha::mad {
namespace {

using namespace wire;  // byte helpers and the SA header offsets

constexpr std::size_t kOffRmppVersion = offsetof(SaHeaderWire, rmpp_version);
constexpr std::size_t kOffRmppType = offsetof(SaHeaderWire, rmpp_type);
constexpr std::size_t kOffRmppFlags = offsetof(SaHeaderWire, rmpp_time_flags);
constexpr std::size_t kOffSegment = offsetof(SaHeaderWire, segment_number);
constexpr std::size_t kOffPayloadLength = offsetof(SaHeaderWire, payload_length);
constexpr std::size_t kOffAttrMod = offsetof(SaHeaderWire, attr_mod);

constexpr std::size_t kOffRecLid = offsetof(SmInfoRecordWire, lid);
constexpr std::size_t kOffRecGuid = offsetof(SmInfoRecordWire, guid);
constexpr std::size_t kOffRecSmKey = offsetof(SmInfoRecordWire, sm_key);
constexpr std::size_t kOffRecActCount = offsetof(SmInfoRecordWire, act_count);
constexpr std::size_t kOffRecPriState = offsetof(SmInfoRecordWire, priority_state);

// The largest AttributeOffset with which one record still fits in a MAD.
constexpr std::uint16_t kMaxAttrOffsetWords = kSaDataSize / 8;

void put_header(std::span<std::uint8_t> b, std::uint8_t method, std::uint64_t tid,
                std::uint16_t attr = kAttrSmInfoRecord) {
  put_sa_header(b, method, tid, attr, 0);
}

// The records the table's PayloadLength says the whole transfer has, if it
// says: RMPP active, a DATA segment, the first one, PayloadLength > 0.
std::optional<std::uint32_t> claimed_records(std::span<const std::uint8_t> mad,
                                             std::size_t record_size) {
  const std::uint8_t flags = mad[kOffRmppFlags] & 0x07;
  if (!(flags & kRmppFlagActive) || mad[kOffRmppType] != kRmppTypeData) return std::nullopt;
  if (!(flags & kRmppFlagFirst)) return std::nullopt;
  const std::uint64_t length = get_be(mad, kOffPayloadLength, 4);
  if (length == 0) return std::nullopt;
  // Every segment carries the 20-byte SA class header and up to 200 bytes of
  // records; PayloadLength counts both (segments x 220 - padding).
  const std::uint64_t segments = (length + kRmppSegmentPayload - 1) / kRmppSegmentPayload;
  const std::uint64_t header_bytes = segments * kSaClassHeaderSize;
  const std::uint64_t data = length > header_bytes ? length - header_bytes : 0;
  return static_cast<std::uint32_t>(data / record_size);
}

// What a GetTableResp's header says about its records, checked.
struct TableLayout {
  std::size_t record_size = 0;  // 0: an empty table
  std::optional<std::uint32_t> claimed;
  std::size_t slots = 0;        // whole record slots to decode
  bool truncated = false;
};

// The checks every GetTableResp gets: versions, class, method, `attr`,
// status, AttributeOffset (`min_words`..25; 0 is an empty table, an error
// unless `may_be_empty`), then which record slots hold records.
// `name` with its article (`a_name`: "an SMInfoRecord") names the attribute.
Result<TableLayout> table_layout(std::span<const std::uint8_t> mad, std::uint16_t attr, const char* name,
                                 const char* a_name, std::uint16_t min_words, bool may_be_empty) {
  if (mad.size() < kSaHeaderSize)
    return decode_error("SA response is " + std::to_string(mad.size()) +
                        " bytes; the header alone is 56");
  if (mad.size() > kMaxSaResponse)
    return decode_error("SA response is " + std::to_string(mad.size()) + " bytes; at most " +
                        std::to_string(kMaxSaResponse) + " are read");
  if (mad[kOffBaseVersion] != kBaseVersion)
    return decode_error("base version " + std::to_string(mad[kOffBaseVersion]) +
                        " at offset 0; expected 1");
  if (mad[kOffClass] != kClassSubnAdm)
    return decode_error("management class " + hex(mad[kOffClass], 2) +
                        " at offset 1 is not SubnAdm (0x03)");
  if (mad[kOffClassVersion] != kSaClassVersion)
    return decode_error("class version " + std::to_string(mad[kOffClassVersion]) +
                        " at offset 2; expected 2");
  if (mad[kOffMethod] != kMethodGetTableResp)
    return decode_error("method " + hex(mad[kOffMethod], 2) +
                        " at offset 3 is not GetTableResp (0x92)");
  const auto got_attr = static_cast<std::uint16_t>(get_be(mad, kOffAttrId, 2));
  if (got_attr != attr)
    return decode_error("attribute " + hex(got_attr, 4) + " at offset 16 is not " + name + " (" + hex(attr, 4) + ")");
  const auto status = static_cast<std::uint16_t>(get_be(mad, kOffStatus, 2));
  if (status == kSaStatusNoRecords && may_be_empty) return TableLayout{};
  if (status != 0) return mad_status_error(status, "SA status " + describe_sa_status(status));
  const auto words = static_cast<std::uint16_t>(get_be(mad, kOffAttrOffset, 2));
  if (words == 0) {
    if (may_be_empty) return TableLayout{};
    return decode_error("AttributeOffset 0 at offset 44: an empty " + std::string(name) +
                        " table (the master's SA always lists itself)");
  }
  if (words < min_words || words > kMaxAttrOffsetWords)
    return decode_error("AttributeOffset " + std::to_string(words) + " at offset 44: " + a_name + " is " +
                        std::to_string(min_words) + " 8-byte words (" + std::to_string(min_words) + ".." +
                        std::to_string(kMaxAttrOffsetWords) + " accepted)");
  TableLayout t;
  t.record_size = std::size_t{words} * 8;
  t.claimed = claimed_records(mad, t.record_size);
  t.slots = (mad.size() - kSaHeaderSize) / t.record_size;
  if (t.claimed) {
    t.slots = std::min<std::size_t>(t.slots, *t.claimed);
    t.truncated = *t.claimed > t.slots;
  } else {
    // No claim: trailing all-zero slots are the MAD's padding.
    while (t.slots > 0) {
      auto rec = mad.subspan(kSaHeaderSize + (t.slots - 1) * t.record_size, t.record_size);
      if (std::any_of(rec.begin(), rec.end(), [](std::uint8_t c) { return c != 0; })) break;
      --t.slots;
    }
    // A piece of a further record after the whole ones: the stream was cut
    // there (ibsim's one MAD, or a first segment delivered alone).
    auto tail = mad.subspan(kSaHeaderSize + ((mad.size() - kSaHeaderSize) / t.record_size) * t.record_size);
    t.truncated = std::any_of(tail.begin(), tail.end(), [](std::uint8_t c) { return c != 0; });
  }
  return t;
}

// RMPP active/first/last, segment 1, and PayloadLength for `data` bytes of
// records when asked (else 0, as under ibsim).
void put_table_rmpp(std::span<std::uint8_t> b, std::size_t data, bool payload_length) {
  b[kOffRmppVersion] = kRmppVersion;
  b[kOffRmppType] = kRmppTypeData;
  b[kOffRmppFlags] = kRmppFlagActive | kRmppFlagFirst | kRmppFlagLast;
  put_be(b, kOffSegment, 4, 1);
  if (payload_length) {
    const std::size_t segments = std::max<std::size_t>(1, (data + kSaDataSize - 1) / kSaDataSize);
    put_be(b, kOffPayloadLength, 4, data + segments * kSaClassHeaderSize);
  }
}

// The records of a checked table, each read by `read(record bytes, index,
// offset) -> Result<Record>`; the first record that does not read is the error.
template <typename Table, typename Read>
Result<Table> read_records(std::span<const std::uint8_t> mad, const TableLayout& layout, Read read) {
  Table table;
  table.claimed = layout.claimed;
  table.truncated = layout.truncated;
  table.records.reserve(layout.slots);
  for (std::size_t i = 0; i < layout.slots; ++i) {
    const std::size_t at = kSaHeaderSize + i * layout.record_size;
    auto r = read(mad.subspan(at, layout.record_size), i, at);
    if (!r) return r.error();
    table.records.push_back(std::move(*r));
  }
  return table;
}

// A GetTableResp of `records` (attribute `attr`, `size` bytes each), each
// written by `write(record bytes, record)`, RMPP as put_table_rmpp; cut at one
// MAD when `one_mad`.
template <typename Record, typename Write>
std::vector<std::uint8_t> table_response(std::uint64_t tid, std::uint16_t attr, const std::vector<Record>& records,
                                         std::size_t size, bool payload_length, bool one_mad, Write write) {
  std::vector<std::uint8_t> b(kSaHeaderSize + records.size() * size, 0);
  put_header(b, kMethodGetTableResp, tid, attr);
  put_table_rmpp(b, records.size() * size, payload_length);
  put_be(b, kOffAttrOffset, 2, records.empty() ? 0 : size / 8);
  for (std::size_t i = 0; i < records.size(); ++i)
    write(std::span<std::uint8_t>(b).subspan(kSaHeaderSize + i * size, size), records[i]);
  if (one_mad && b.size() > kMadSize) b.resize(kMadSize);
  return b;
}

}  // namespace

MadBytes encode_sminfo_record_get_table(std::uint64_t tid) {
  MadBytes b{};
  put_header(b, kMethodGetTable, tid);
  return b;
}

std::vector<std::uint8_t> encode_sminfo_record_table_response(
    std::uint64_t tid, const std::vector<SmInfoRecord>& records, bool payload_length) {
  // The whole transfer, then its first 256 bytes: a segment (and ibsim's
  // one MAD) cuts the record stream at 200 bytes, inside the 7th record.
  return table_response(tid, kAttrSmInfoRecord, records, kSmInfoRecordSize, payload_length, true,
                        [](std::span<std::uint8_t> rec, const SmInfoRecord& r) {
                          put_be(rec, kOffRecLid, 2, r.lid.value);
                          put_be(rec, kOffRecGuid, 8, r.info.guid.value);
                          put_be(rec, kOffRecSmKey, 8, r.info.sm_key);
                          put_be(rec, kOffRecActCount, 4, r.info.act_count);
                          rec[kOffRecPriState] = static_cast<std::uint8_t>(
                              ((r.info.priority & 0x0f) << 4) | (static_cast<std::uint8_t>(r.info.state) & 0x0f));
                        });
}

Result<SmInfoRecordTable> decode_sminfo_record_table(std::span<const std::uint8_t> mad) {
  auto layout = table_layout(mad, kAttrSmInfoRecord, "SMInfoRecord", "an SMInfoRecord", kSmInfoRecordOffsetWords, false);
  if (!layout) return layout.error();
  return read_records<SmInfoRecordTable>(
      mad, *layout, [](std::span<const std::uint8_t> rec, std::size_t i, std::size_t at) -> Result<SmInfoRecord> {
        SmInfoRecord r;
        r.lid = Lid{static_cast<std::uint16_t>(get_be(rec, kOffRecLid, 2))};
        r.info.guid = Guid{get_be(rec, kOffRecGuid, 8)};
        r.info.sm_key = get_be(rec, kOffRecSmKey, 8);
        r.info.act_count = static_cast<std::uint32_t>(get_be(rec, kOffRecActCount, 4));
        const std::uint8_t pri_state = rec[kOffRecPriState];
        r.info.priority = static_cast<std::uint8_t>(pri_state >> 4);
        const std::uint8_t state = pri_state & 0x0f;
        if (state > static_cast<std::uint8_t>(SmState::Master))
          return decode_error("SMInfoRecord " + std::to_string(i) + " SMState " + std::to_string(state) +
                              " at offset " + std::to_string(at + kOffRecPriState) + " (low nibble) is not 0..3");
        r.info.state = static_cast<SmState>(state);
        return r;
      });
}

MadBytes encode_is_sm_port_record_get_table(std::uint64_t tid) {
  MadBytes b{};
  put_header(b, kMethodGetTable, tid, kAttrPortInfoRecord);
  put_be(b, kOffAttrMod, 4, kSaEnhancedCompMask);
  put_be(b, kOffAttrOffset, 2, kPortInfoRecordOffsetWords);
  put_be(b, kOffCompMask, 8, kPirCompCapabilityMask);
  auto rec = std::span<std::uint8_t>(b).subspan(kSaHeaderSize, kPortInfoRecordSize);
  put_be(rec, offsetof(PortInfoRecordWire, port_info) + offsetof(PortInfoWire, capability_mask), 4, kCapIsSm);
  return b;
}

std::vector<std::uint8_t> encode_port_info_record_table_response(
    std::uint64_t tid, const std::vector<PortInfoRecord>& records, bool payload_length, bool one_mad) {
  return table_response(tid, kAttrPortInfoRecord, records, kPortInfoRecordSize, payload_length, one_mad,
                        [](std::span<std::uint8_t> rec, const PortInfoRecord& r) {
                          put_be(rec, offsetof(PortInfoRecordWire, lid), 2, r.lid.value);
                          rec[offsetof(PortInfoRecordWire, port_num)] = r.port_num;
                          const auto pi = encode_portinfo(r.info);
                          std::copy(pi.begin(), pi.end(), rec.begin() + offsetof(PortInfoRecordWire, port_info));
                        });
}

Result<PortInfoRecordTable> decode_port_info_record_table(std::span<const std::uint8_t> mad) {
  auto layout = table_layout(mad, kAttrPortInfoRecord, "PortInfoRecord", "a PortInfoRecord", kPortInfoRecordOffsetWords, true);
  if (!layout) return layout.error();
  return read_records<PortInfoRecordTable>(
      mad, *layout, [](std::span<const std::uint8_t> rec, std::size_t i, std::size_t at) -> Result<PortInfoRecord> {
        PortInfoRecord r;
        r.lid = Lid{static_cast<std::uint16_t>(get_be(rec, offsetof(PortInfoRecordWire, lid), 2))};
        r.port_num = rec[offsetof(PortInfoRecordWire, port_num)];
        auto pi = decode_portinfo(rec.subspan(offsetof(PortInfoRecordWire, port_info), kSmpDataSize));
        if (!pi)
          return decode_error("PortInfoRecord " + std::to_string(i) + " at offset " + std::to_string(at) + ": " +
                              pi.error().message);
        r.info = *pi;
        return r;
      });
}

std::string describe_sa_status(std::uint16_t status) {
  // IBA Table 108 (bits 0-4, as describe_mad_status) and Table 187: the SA's
  // class-specific code in bits 8-15.
  const std::string text = hex(status, 4);
  if (status == 0) return text + ": success";
  std::string what = describe_mad_status_common(status);
  auto add = [&what](const char* s) { what += what.empty() ? s : std::string("; ") + s; };
  switch (status >> 8) {
    case 0: break;
    case 1: add("no resources"); break;
    case 2: add("request invalid"); break;
    case 3: add("no records"); break;
    case 4: add("too many records"); break;
    case 5: add("invalid GID"); break;
    case 6: add("insufficient components"); break;
    case 7: add("request denied"); break;
    default: add("reserved SA status code"); break;
  }
  return text + ": " + what;
}

}  // namespace smha::mad
