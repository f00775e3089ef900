// ServerTable's shard state (server/table.h SaveState / RestoreState): the
// whole table, bit for bit, for a replica that joins a running shard. The
// index is put back slot by slot (each row in the slot it held, under the
// same mapping: ordered or hashed), so later inserts, erasures and growth
// place keys as on the sender; every vector gets the room it had, so later
// growth (and resident_bytes) follows the sender's.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "server/table.h"

namespace tether {

namespace {

constexpr uint64_t kSaturated = ~uint64_t{0};

uint64_t MulSat(uint64_t a, uint64_t b) { return b != 0 && a > kSaturated / b ? kSaturated : a * b; }
uint64_t AddSat(uint64_t a, uint64_t b) { return a > kSaturated - b ? kSaturated : a + b; }

// `v` floats with exactly `room` floats reserved (room ≥ size).
template <typename V>
void ExactRoom(V* v, uint64_t room) {
  V fresh;
  fresh.reserve(std::max<uint64_t>(room, v->size()));
  fresh.assign(v->begin(), v->end());
  *v = std::move(fresh);
}

}  // namespace

std::vector<uint64_t> ServerTable::RowIndex::SlotsByRow() const {
  std::vector<uint64_t> slots(size_);
  for (uint64_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].row_plus_one != 0) slots[slots_[i].row_plus_one - 1 - first_] = i;
  return slots;
}

void ServerTable::RowIndex::SaveState(TableIndexState* st) const {
  st->set_slots(slots_.size());
  st->set_first(first_);
  st->set_hashed(hashed_);
  st->set_have_range(have_range_);
  st->set_lo(lo_);
  st->set_hi(hi_);
  st->set_scale(scale_);
}

Status ServerTable::RowIndex::Restore(const TableIndexState& st, const std::vector<uint64_t>& keys,
                                      const std::vector<uint64_t>& slots, uint64_t max_slots) {
  const uint64_t cap = st.slots(), rows = keys.size();
  if (cap > max_slots)
    return Status::DataLoss("index.slots is " + std::to_string(cap) + ", past the " + std::to_string(max_slots) +
                            " its rows can have grown it to");
  if (cap == 0 ? rows != 0 : rows >= cap)
    return Status::DataLoss("index.slots is " + std::to_string(cap) + " for " + std::to_string(rows) + " rows");
  const bool finite = std::isfinite(st.lo()) && std::isfinite(st.hi()) && std::isfinite(st.scale());
  if (!finite || st.first() > (kSaturated >> 2))
    return Status::DataLoss("index: its range, scale or first row number is out of range");
  decltype(slots_) fresh;
  fresh.assign(cap, Slot{0, 0});
  slots_ = std::move(fresh);
  fastmod_m_ = cap == 0 ? 0 : UINT64_MAX / cap + 1;
  first_ = st.first();
  hashed_ = st.hashed();
  have_range_ = st.have_range();
  lo_ = st.lo();
  hi_ = st.hi();
  scale_ = st.scale();
  size_ = rows;
  for (uint64_t r = 0; r < rows; ++r) {
    if (slots[r] >= cap || slots_[slots[r]].row_plus_one != 0)
      return Status::DataLoss("index slot of row " + std::to_string(r) + " is " + std::to_string(slots[r]) +
                              ": out of range or taken twice");
    slots_[slots[r]] = Slot{keys[r], first_ + r + 1};
  }
  // Every key is found at its own row by a probe from its home slot (as
  // Find probes), in a bounded number of steps in all.
  uint64_t steps = AddSat(MulSat(cap, 64), rows);
  for (uint64_t r = 0; r < rows; ++r) {
    uint64_t i = HomeOutOfLine(keys[r]);
    while (slots_[i].row_plus_one != 0 && slots_[i].key != keys[r] && steps > 0) {
      i = Next(i);
      --steps;
    }
    if (slots_[i].row_plus_one != first_ + r + 1 || slots_[i].key != keys[r])
      return Status::DataLoss("index: the key of row " + std::to_string(r) + " (" + std::to_string(keys[r]) +
                              ") is not found at its row from its home slot");
  }
  return Status::OK();
}

void ServerTable::SaveState(TableState* st, std::string* bytes) const {
  st->set_table_id(spec_.id());
  st->set_version(version_);
  st->set_clock(clock_);
  st->set_serial(serial_);
  st->set_rows_admitted(rows_admitted_);
  st->set_rows_evicted(rows_evicted_);
  st->set_rows_not_admitted(rows_not_admitted_);
  st->set_max_rows(max_rows_);
  st->set_stride(stride_);
  st->set_rows(index_.size());
  st->set_data_floats(data_.size());
  st->set_data_capacity(data_.capacity());
  st->set_row_keys_capacity(row_keys_.capacity());
  if (IsRowTable(spec_)) {
    index_.SaveState(st->mutable_index());
    const std::vector<uint64_t> keys = KeysByRow(), slots = index_.SlotsByRow();
    AppendRaw(bytes, keys.data(), keys.size());
    AppendRaw(bytes, slots.data(), slots.size());
  }
  AppendRaw(bytes, data_.data(), data_.size());
  if (backups_ != nullptr) {
    st->set_backup_spans(backups_->spans());
    st->set_backup_capacity(backups_->capacity_floats());
    AppendRaw(bytes, backups_->data(), backups_->spans() * backups_->workers() * backups_->width());
  }
  if (eviction_ != nullptr) {
    st->set_eviction(true);
    st->set_sample_state(eviction_->sample_state());
    const std::vector<uint64_t> order = eviction_->RecencyOrder();
    const uint64_t n = eviction_->rows();
    std::vector<int64_t> clocks(n);
    std::vector<uint64_t> serials(n);
    std::vector<uint32_t> pushes(n);
    for (uint64_t r = 0; r < n; ++r) {
      clocks[r] = eviction_->last_touch(r);
      serials[r] = eviction_->serial(r);
      pushes[r] = eviction_->pushes(r);
    }
    AppendRaw(bytes, order.data(), n);
    AppendRaw(bytes, clocks.data(), n);
    AppendRaw(bytes, serials.data(), n);
    AppendRaw(bytes, pushes.data(), n);
  }
  if (admission_ != nullptr) {
    st->set_sketch_width(admission_->sketch().width());
    const std::vector<uint16_t>& c = admission_->sketch().counters();
    AppendRaw(bytes, c.data(), c.size());
  }
}

uint64_t ServerTable::RoomBound(uint64_t needed, uint64_t unit, uint64_t fresh) const {
  // Growth one unit at a time at most doubles; a budget reserves max_rows
  // units, and a budgeted table's rows may shrink (evictions) below the
  // room they grew.
  uint64_t bound = std::max(fresh, AddSat(MulSat(needed, 2), unit));
  if (IsRowTable(spec_) && spec_.has_budget() && spec_.budget().max_rows() > 0)
    bound = std::max(bound, AddSat(MulSat(MulSat(max_rows_, unit), 2), unit));
  return bound;
}

Status ServerTable::RestoreRows(const TableState& st, StateReader* in) {
  const uint64_t rows = st.rows();
  if (IsRowTable(spec_)) {
    std::vector<uint64_t> keys, slots;
    TETHER_RETURN_IF_ERROR(in->Read("keys by row", rows, &keys));
    TETHER_RETURN_IF_ERROR(in->Read("index slot by row", rows, &slots));
    const bool may_shrink = budgeted_ || spec_.budget().max_rows() > 0;
    const uint64_t grown = may_shrink ? std::max(rows, max_rows_) : rows;
    const uint64_t max_slots = std::max<uint64_t>(index_.bytes() / 16, AddSat(MulSat(AddSat(grown, 1), 4), 2048));
    const Status index = index_.Restore(st.index(), keys, slots, max_slots);
    if (!index.ok()) return in->Error(index.message());
    if (budgeted_) {
      if (st.row_keys_capacity() < rows || st.row_keys_capacity() > RoomBound(rows, 1, row_keys_.capacity()))
        return in->Error("row_keys_capacity " + std::to_string(st.row_keys_capacity()) + " for " +
                         std::to_string(rows) + " rows");
      row_keys_ = std::move(keys);
      ExactRoom(&row_keys_, st.row_keys_capacity());
    }
  }
  const uint64_t floats = st.data_floats();
  if (st.data_capacity() < floats || st.data_capacity() > RoomBound(floats, stride_, data_.capacity()))
    return in->Error("data_capacity " + std::to_string(st.data_capacity()) + " for " + std::to_string(floats) +
                     " floats");
  if (!in->Holds<float>(floats)) return in->Error("rows: " + std::to_string(floats) + " floats, past the bytes left");
  decltype(data_) data;
  data.reserve(st.data_capacity());
  data.resize(floats);
  TETHER_RETURN_IF_ERROR(in->ReadInto("rows", floats, data.data()));
  data_ = std::move(data);
  return Status::OK();
}

Status ServerTable::RestoreBackups(const TableState& st, StateReader* in) {
  if (backups_ == nullptr) {
    if (st.backup_spans() != 0 || st.backup_capacity() != 0)
      return in->Error("backup_spans " + std::to_string(st.backup_spans()) + " for a table without delay compensation");
    return Status::OK();
  }
  const uint64_t spans = IsDenseTable(spec_) ? 1 : st.rows();
  if (st.backup_spans() != spans)
    return in->Error("backup_spans " + std::to_string(st.backup_spans()) + ", expected " + std::to_string(spans));
  const uint64_t block = MulSat(backups_->workers(), backups_->width());
  const uint64_t floats = MulSat(spans, block);
  if (!in->Holds<float>(floats)) return in->Error("backups: past the bytes left");
  if (st.backup_capacity() < floats || st.backup_capacity() > RoomBound(floats, block, backups_->capacity_floats()))
    return in->Error("backup_capacity " + std::to_string(st.backup_capacity()) + " for " + std::to_string(floats) +
                     " floats");
  std::vector<float> data;
  TETHER_RETURN_IF_ERROR(in->Read("backups", floats, &data));
  backups_->Restore(spans, st.backup_capacity(), data.data());
  return Status::OK();
}

Status ServerTable::RestoreBudget(const TableState& st, StateReader* in) {
  if (st.eviction() != (eviction_ != nullptr))
    return in->Error(std::string("eviction metadata ") + (st.eviction() ? "sent for a table that evicts nothing"
                                                                        : "missing for a table that evicts"));
  if (eviction_ != nullptr) {
    const uint64_t n = st.rows();
    std::vector<uint64_t> order, serials;
    std::vector<int64_t> clocks;
    std::vector<uint32_t> pushes;
    TETHER_RETURN_IF_ERROR(in->Read("eviction recency", n, &order));
    TETHER_RETURN_IF_ERROR(in->Read("eviction touch clocks", n, &clocks));
    TETHER_RETURN_IF_ERROR(in->Read("eviction request serials", n, &serials));
    TETHER_RETURN_IF_ERROR(in->Read("eviction push counts", n, &pushes));
    for (uint64_t s : serials)
      if (s > st.serial())
        return in->Error("eviction request serial " + std::to_string(s) + " past the table's " +
                         std::to_string(st.serial()));
    const Status restored = eviction_->Restore(order, clocks, pushes, st.sample_state(), &serials);
    if (!restored.ok()) return in->Error(restored.message());
  }
  const uint64_t width = admission_ == nullptr ? 0 : admission_->sketch().width();
  if (st.sketch_width() != width)
    return in->Error("sketch_width " + std::to_string(st.sketch_width()) + ", the table's " + std::to_string(width));
  if (admission_ != nullptr) {
    std::vector<uint16_t>& c = *admission_->mutable_sketch()->mutable_counters();
    TETHER_RETURN_IF_ERROR(in->ReadInto("admission sketch", c.size(), c.data()));
  }
  return Status::OK();
}

Status ServerTable::RestoreState(const TableState& st, StateReader* in) {
  if (index_.size() != 0 || version_ != 0)
    return Status::FailedPrecondition("table " + spec_.name() + ": a state is restored into a fresh table only");
  if (st.table_id() != spec_.id()) return in->Error("table_id " + std::to_string(st.table_id()));
  if (st.stride() != stride_)
    return in->Error("stride " + std::to_string(st.stride()) + ", the table's " + std::to_string(stride_));
  if (IsDenseTable(spec_) ? st.rows() != 0 || st.data_floats() != data_.size()
                          : st.data_floats() != MulSat(st.rows(), stride_))
    return in->Error("rows " + std::to_string(st.rows()) + " and data_floats " + std::to_string(st.data_floats()) +
                     " disagree with the table's shape");
  if (IsRowTable(spec_) && st.rows() > max_rows_)
    return in->Error("rows " + std::to_string(st.rows()) + " past max_rows " + std::to_string(max_rows_));
  TETHER_RETURN_IF_ERROR(RestoreRows(st, in));
  TETHER_RETURN_IF_ERROR(RestoreBackups(st, in));
  TETHER_RETURN_IF_ERROR(RestoreBudget(st, in));
  version_ = st.version();
  clock_ = st.clock();
  serial_ = st.serial();
  rows_admitted_ = st.rows_admitted();
  rows_evicted_ = st.rows_evicted();
  rows_not_admitted_ = st.rows_not_admitted();
  return Status::OK();
}

}  // namespace tether
