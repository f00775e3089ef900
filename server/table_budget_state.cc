// A budgeted table's admission and eviction state in a checkpoint
// (TableBudgetState): saved with the shard's rows, restored or merged when
// the job resumes (server/table.h, SaveBudgetState and its peers).
#include <algorithm>
#include <string>
#include <vector>

#include "server/table.h"

namespace tether {

void ServerTable::SaveBudgetState(TableBudgetState* st) const {
  st->set_table_id(spec_.id());
  st->set_rows_admitted(rows_admitted_);
  st->set_rows_evicted(rows_evicted_);
  st->set_rows_not_admitted(rows_not_admitted_);
  st->set_clock(clock_);
  st->set_version(version_);
  if (admission_ != nullptr) {
    const std::vector<uint16_t>& c = admission_->sketch().counters();
    st->set_sketch_width(admission_->sketch().width());
    std::string* bytes = st->mutable_sketch();
    bytes->resize(c.size() * 2);
    for (size_t i = 0; i < c.size(); ++i) {
      (*bytes)[2 * i] = static_cast<char>(c[i] & 0xff);
      (*bytes)[2 * i + 1] = static_cast<char>(c[i] >> 8);
    }
  }
  if (eviction_ != nullptr) {
    for (uint64_t r : eviction_->RecencyOrder()) st->add_recency(r);
    for (uint64_t r = 0; r < eviction_->rows(); ++r) {
      st->add_touch_clock(eviction_->last_touch(r));
      st->add_pushes(eviction_->pushes(r));
    }
    st->set_sample_state(eviction_->sample_state());
  }
}

namespace {

// The sketch counters of `st` (little-endian 16-bit), or an error naming
// the table when they do not fit `sketch`.
Status SketchCounters(const TableBudgetState& st, const CountMinSketch& sketch, const std::string& table,
                      std::vector<uint16_t>* out) {
  if (st.sketch_width() != sketch.width() || st.sketch().size() != sketch.counters().size() * 2)
    return Status::DataLoss("table " + table + ": the checkpoint's admission sketch is " +
                            std::to_string(st.sketch_width()) + " counters wide (" +
                            std::to_string(st.sketch().size()) + " bytes), the job's " +
                            std::to_string(sketch.width()) + " (max_rows changed?)");
  out->resize(sketch.counters().size());
  const std::string& b = st.sketch();
  for (size_t i = 0; i < out->size(); ++i)
    (*out)[i] = static_cast<uint16_t>(static_cast<uint8_t>(b[2 * i]) | (static_cast<uint8_t>(b[2 * i + 1]) << 8));
  return Status::OK();
}

}  // namespace

Status ServerTable::RestoreBudgetState(const TableBudgetState& st) {
  std::vector<uint16_t> counters;
  if (admission_ != nullptr && st.has_sketch())
    TETHER_RETURN_IF_ERROR(SketchCounters(st, admission_->sketch(), spec_.name(), &counters));
  if (eviction_ != nullptr && static_cast<uint64_t>(st.recency_size()) != index_.size())
    return Status::DataLoss("table " + spec_.name() + ": the checkpoint's eviction metadata covers " +
                            std::to_string(st.recency_size()) + " rows, the shard file " +
                            std::to_string(index_.size()));
  if (eviction_ != nullptr) {
    const Status restored = eviction_->Restore(
        std::vector<uint64_t>(st.recency().begin(), st.recency().end()),
        std::vector<int64_t>(st.touch_clock().begin(), st.touch_clock().end()),
        std::vector<uint32_t>(st.pushes().begin(), st.pushes().end()), st.sample_state());
    if (!restored.ok()) return Status::DataLoss("table " + spec_.name() + ": " + restored.message());
  }
  if (!counters.empty()) *admission_->mutable_sketch()->mutable_counters() = std::move(counters);
  rows_admitted_ = st.rows_admitted();
  rows_evicted_ = st.rows_evicted();
  rows_not_admitted_ = st.rows_not_admitted();
  clock_ = st.clock();
  if (st.has_version()) version_ = st.version();
  return Status::OK();
}

Status ServerTable::MergeSketch(const TableBudgetState& st) {
  if (admission_ == nullptr || !st.has_sketch()) return Status::OK();
  std::vector<uint16_t> counters;
  TETHER_RETURN_IF_ERROR(SketchCounters(st, admission_->sketch(), spec_.name(), &counters));
  std::vector<uint16_t>& mine = *admission_->mutable_sketch()->mutable_counters();
  for (size_t i = 0; i < mine.size(); ++i)
    mine[i] = static_cast<uint16_t>(std::min<uint32_t>(CountMinSketch::kMaxCount, uint32_t{mine[i]} + counters[i]));
  clock_ = std::max(clock_, st.clock());
  return Status::OK();
}

}  // namespace tether
