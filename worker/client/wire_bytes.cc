#include "worker/client/wire_bytes.h"

#include "core/wire_codec.h"

namespace tether {
namespace {

// Table ids come from the job's table list; a reply naming a larger one is
// refused elsewhere and not worth a vector of this size.
constexpr uint32_t kMaxCountedTables = 1u << 16;

}  // namespace

void WireBytes::CountSent(const Message& m) {
  const MessageType t = m.header.type();
  if (t == PULL || t == PUSH || t == PUSH_DELTA) Count(m, /*sent=*/true);
}

void WireBytes::CountReceived(const Message& m) {
  const MessageType t = m.header.type();
  if (t == PULL_REPLY || t == PUSH_REPLY) Count(m, /*sent=*/false);
}

void WireBytes::Count(const Message& m, bool sent) {
  const uint32_t table = m.header.table_id();
  if (table >= kMaxCountedTables) return;
  if (tables_.size() <= table) tables_.resize(table + 1);
  DirectionBytes& d = sent ? tables_[table].sent : tables_[table].received;
  ++d.messages;
  const size_t values = m.values_size();  // a chunked reply's pieces too
  d.bytes += m.keys.size() + values;
  d.value_bytes += values;
  d.fp32_value_bytes += values / WireBytesPerValue(m.header.value_encoding()) * sizeof(float);
  if (!sent) tables_[table].received_saturated += m.header.values_saturated();
}

uint64_t WireBytes::received_saturated() const {
  uint64_t n = 0;
  for (const TableWireBytes& t : tables_) n += t.received_saturated;
  return n;
}

}  // namespace tether
