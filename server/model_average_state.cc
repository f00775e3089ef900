// ModelAverager's shard state (server/model_average.h SaveState /
// RestoreState): pending deltas, rounds not merged, velocity and counters,
// for a replica that joins a running shard. Sums are written with their
// keys ascending; the merge sorts keys itself, so the order of the maps
// changes nothing it computes.
#include <algorithm>
#include <string>
#include <vector>

#include "server/model_average.h"

namespace tether {

void ModelAverager::SaveSums(uint32_t table, const TableSums& t, AverageSumsState* st,
                             std::vector<std::string>* table_bytes) {
  st->set_table_id(table);
  st->set_dim(t.dim);
  st->set_dense(t.is_dense);
  st->set_rows(t.rows.size());
  st->set_dense_floats(t.dense.size());
  std::vector<uint64_t> keys;
  keys.reserve(t.rows.size());
  for (const auto& kv : t.rows) keys.push_back(kv.first);
  std::sort(keys.begin(), keys.end());
  std::string* out = &(*table_bytes)[table];
  AppendRaw(out, keys.data(), keys.size());
  for (uint64_t k : keys) AppendRaw(out, t.rows.at(k).data(), t.rows.at(k).size());
  AppendRaw(out, t.dense.data(), t.dense.size());
}

void ModelAverager::SaveState(ModelAverageState* st, std::vector<std::string>* table_bytes) const {
  std::vector<int> ranks;
  for (const auto& kv : pending_) ranks.push_back(kv.first);
  std::sort(ranks.begin(), ranks.end());
  for (int rank : ranks) {
    const Pending& p = pending_.at(rank);
    AveragePendingState* ps = st->add_pending();
    ps->set_rank(rank);
    ps->set_round(p.round);
    for (const auto& [id, t] : p.tables) SaveSums(id, t, ps->add_tables(), table_bytes);
  }
  for (const auto& [round, r] : rounds_) {
    AverageRoundState* rs = st->add_rounds();
    rs->set_round(round);
    rs->set_weight(r.weight);
    rs->set_deltas(r.deltas);
    for (const auto& [id, t] : r.tables) SaveSums(id, t, rs->add_tables(), table_bytes);
  }
  for (const auto& [id, t] : velocity_) SaveSums(id, t, st->add_velocity(), table_bytes);
  st->set_merged_before(merged_before_);
  st->set_rounds_merged(rounds_merged_);
  st->set_deltas_dropped(deltas_dropped_);
  st->set_deltas_merged(deltas_merged_);
  st->set_deltas_discarded(deltas_discarded_);
}

Status ModelAverager::RestoreSums(const AverageSumsState& st, const std::vector<TableShape>& tables,
                                  std::vector<StateReader>* table_bytes, Sums* out) {
  const uint32_t id = st.table_id();
  if (id >= tables.size() || out->count(id) != 0)
    return Status::DataLoss("shard state: kv.average: sums of table " + std::to_string(id) +
                            ", unknown or listed twice");
  StateReader* in = &(*table_bytes)[id];
  const TableShape& shape = tables[id];
  // Sums of a row table have the table's dim (0 while empty); dense sums
  // the shard's slice.
  const bool rows_ok = !shape.dense && (st.dim() == shape.dim || (st.dim() == 0 && st.rows() == 0));
  const bool dense_ok = st.dense() ? shape.dense && st.dense_floats() == shape.slice && st.rows() == 0
                                   : st.dense_floats() == 0;
  if (!dense_ok || (st.rows() > 0 && !rows_ok) || (st.dim() != 0 && st.dim() != shape.dim))
    return in->Error("average sums of dim " + std::to_string(st.dim()) + ", " + std::to_string(st.rows()) +
                     " rows and " + std::to_string(st.dense_floats()) + " dense floats do not fit the table");
  TableSums& t = (*out)[id];
  t.dim = st.dim();
  t.is_dense = st.dense();
  std::vector<uint64_t> keys;
  TETHER_RETURN_IF_ERROR(in->Read("average keys", st.rows(), &keys));
  for (size_t i = 1; i < keys.size(); ++i)
    if (keys[i] <= keys[i - 1]) return in->Error("average keys not ascending");
  if (!in->Holds<float>(keys.size() * uint64_t{t.dim})) return in->Error("average rows: past the bytes left");
  for (uint64_t k : keys) TETHER_RETURN_IF_ERROR(in->Read("average rows", t.dim, &t.rows[k]));
  return in->Read("average dense sums", st.dense_floats(), &t.dense);
}

Status ModelAverager::RestoreState(const ModelAverageState& st, const std::vector<TableShape>& tables, int max_ranks,
                                   std::vector<StateReader>* table_bytes) {
  if (!pending_.empty() || !rounds_.empty() || !velocity_.empty() || merged_before_ != 0)
    return Status::FailedPrecondition("model averaging: a state is restored into a fresh averager only");
  int last_rank = -1;
  for (const AveragePendingState& ps : st.pending()) {
    if (ps.rank() <= last_rank || ps.rank() >= max_ranks || ps.round() < -1)
      return Status::DataLoss("shard state: kv.average.pending: rank " + std::to_string(ps.rank()) + " (round " +
                              std::to_string(ps.round()) + ") out of order or range");
    last_rank = ps.rank();
    Pending& p = pending_[ps.rank()];
    p.round = ps.round();
    for (const AverageSumsState& s : ps.tables())
      TETHER_RETURN_IF_ERROR(RestoreSums(s, tables, table_bytes, &p.tables));
  }
  for (const AverageRoundState& rs : st.rounds()) {
    if ((!rounds_.empty() && rs.round() <= rounds_.rbegin()->first) || !(rs.weight() >= 0))
      return Status::DataLoss("shard state: kv.average.rounds: round " + std::to_string(rs.round()) +
                              " out of order, or its weight is not a number >= 0");
    Round& r = rounds_[rs.round()];
    r.weight = rs.weight();
    r.deltas = rs.deltas();
    for (const AverageSumsState& s : rs.tables())
      TETHER_RETURN_IF_ERROR(RestoreSums(s, tables, table_bytes, &r.tables));
  }
  for (const AverageSumsState& s : st.velocity())
    TETHER_RETURN_IF_ERROR(RestoreSums(s, tables, table_bytes, &velocity_));
  merged_before_ = st.merged_before();
  rounds_merged_ = st.rounds_merged();
  deltas_dropped_ = st.deltas_dropped();
  deltas_merged_ = st.deltas_merged();
  deltas_discarded_ = st.deltas_discarded();
  return Status::OK();
}

}  // namespace tether
