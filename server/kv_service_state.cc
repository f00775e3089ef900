// KvService's shard state (server/kv_service.h SaveState / RestoreState):
// the tables (server/table_state.cc), the parked pulls, the bound waits,
// the key lists and the AVERAGE merge (server/model_average_state.cc), for
// a replica that joins a running shard.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/table_spec.h"
#include "server/kv_service.h"
#include "server/shard_input.h"

namespace tether {

namespace {

using Clock = std::chrono::steady_clock;

int64_t AgeNs(Clock::time_point now, Clock::time_point t) {
  return std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(now - t).count());
}

std::string TableWhere(size_t i, const TableSpec& spec) {
  return "shard state: kv.tables[" + std::to_string(i) + "] (" + spec.name() + ")";
}

}  // namespace

void KvService::SaveState(KvServiceState* st, std::vector<std::string>* table_rows, Clock::time_point now) const {
  *st->mutable_job_tables() = job_tables_;
  table_rows->assign(tables_.size(), std::string());
  for (size_t i = 0; i < tables_.size(); ++i) tables_[i]->SaveState(st->add_tables(), &(*table_rows)[i]);
  for (const auto& [rank, cache] : key_lists_) {
    RankKeyListsState* r = st->add_key_lists();
    r->set_rank(rank);
    r->set_capacity_bytes(cache.capacity_bytes());
    cache.ForEachLeastRecentFirst([&](uint32_t table, uint64_t id, const KeyListCache::List& list) {
      KeyListState* k = r->add_lists();
      k->set_table_id(table);
      k->set_id(id);
      k->set_rows(list->size());
      AppendRaw(&(*table_rows)[table], list->data(), list->size());
    });
    const KeyListCache::Stats& s = cache.stats();
    r->set_puts(s.puts);
    r->set_hits(s.hits);
    r->set_misses(s.misses);
    r->set_evictions(s.evictions);
    r->set_peak_bytes(s.peak_bytes);
  }
  for (const ParkedPull& p : parked_) {
    ParkedPullState* ps = st->add_parked();
    ps->set_input(EncodeShardInput(p.identity, p.request));
    ps->set_since_age_ns(AgeNs(now, p.since));
    ps->set_has_rows(p.offsets != nullptr);
    if (p.offsets != nullptr)
      AppendRaw(&(*table_rows)[p.request.header.table_id()], p.offsets->data(), p.offsets->size());
  }
  for (const BoundWait& w : bound_wait_) {
    BoundWaitState* ws = st->add_bound_wait();
    ws->set_seconds(w.seconds);
    if (w.counted_until != Clock::time_point()) ws->set_counted_until_age_ns(AgeNs(now, w.counted_until));
  }
  st->set_key_lists_defined(key_list_stats_.defined);
  st->set_key_lists_used(key_list_stats_.used);
  st->set_key_lists_unknown(key_list_stats_.unknown);
  st->set_key_lists_bytes_saved(key_list_stats_.bytes_saved);
  if (averager_ != nullptr) averager_->SaveState(st->mutable_average(), table_rows);
  if (!fatal_.ok()) st->set_fatal(fatal_.message());
  for (size_t i = 0; i < tables_.size(); ++i)
    st->mutable_tables(static_cast<int>(i))->set_raw_bytes((*table_rows)[i].size());
}

Status KvService::CheckJobTables(const KvServiceState& st) const {
  if (st.job_tables_size() == 0) {
    if (st.tables_size() != 0 || st.parked_size() != 0 || st.has_average())
      return Status::DataLoss("shard state: kv: tables, parked pulls or averaging without job_tables");
    return Status::OK();
  }
  const std::vector<TableSpec> specs(st.job_tables().begin(), st.job_tables().end());
  if (Status valid = ValidateTableSpecs(specs, num_shards_); !valid.ok())
    return Status::DataLoss("shard state: kv.job_tables: " + valid.message());
  if (st.tables_size() != st.job_tables_size())
    return Status::DataLoss("shard state: kv.tables: " + std::to_string(st.tables_size()) + " tables for " +
                            std::to_string(st.job_tables_size()) + " job tables");
  return Status::OK();
}

Status KvService::ReadRows(uint32_t table, uint64_t n, const std::string& what, std::vector<StateReader>* in,
                           KeyListCache::List* rows) const {
  if (table >= tables_.size()) return Status::DataLoss("shard state: " + what + ": table " + std::to_string(table));
  const ServerTable& t = *tables_[table];
  StateReader& r = (*in)[table];
  if (!IsRowTable(t.spec()) || t.budgeted() || n == 0)
    return r.Error(what + ": " + std::to_string(n) + " rows of a table that keeps no key lists");
  auto list = std::make_shared<std::vector<uint64_t>>();
  TETHER_RETURN_IF_ERROR(r.Read(what.c_str(), n, list.get()));
  if (!t.ValidOffsets(list->data(), n)) return r.Error(what + ": a row offset outside the table");
  *rows = std::move(list);
  return Status::OK();
}

Status KvService::RestoreKeyLists(const KvServiceState& st, std::vector<StateReader>* in) {
  int last = -1;
  for (int i = 0; i < st.key_lists_size(); ++i) {
    const RankKeyListsState& rs = st.key_lists(i);
    const std::string where = "kv.key_lists[" + std::to_string(i) + "]";
    if (rs.rank() <= last || rs.rank() >= kMaxRanks)
      return Status::DataLoss("shard state: " + where + ".rank " + std::to_string(rs.rank()) +
                              ": out of order or past " + std::to_string(kMaxRanks));
    last = rs.rank();
    KeyListCache cache(rs.capacity_bytes());
    for (int j = 0; j < rs.lists_size(); ++j) {
      const KeyListState& ls = rs.lists(j);
      const std::string what = where + ".lists[" + std::to_string(j) + "]";
      if (ls.id() == 0) return Status::DataLoss("shard state: " + what + ".id is 0");
      KeyListCache::List rows;
      TETHER_RETURN_IF_ERROR(ReadRows(ls.table_id(), ls.rows(), what, in, &rows));
      if (!cache.Put(ls.table_id(), ls.id(), std::move(rows)) || cache.size() != static_cast<size_t>(j) + 1)
        return Status::DataLoss("shard state: " + what + ": past capacity_bytes " +
                                std::to_string(rs.capacity_bytes()) + ", or listed twice");
    }
    KeyListCache::Stats s;
    s.puts = rs.puts();
    s.hits = rs.hits();
    s.misses = rs.misses();
    s.evictions = rs.evictions();
    s.peak_bytes = rs.peak_bytes();
    cache.RestoreStats(s);
    key_lists_.emplace(rs.rank(), std::move(cache));
  }
  key_list_stats_.defined = st.key_lists_defined();
  key_list_stats_.used = st.key_lists_used();
  key_list_stats_.unknown = st.key_lists_unknown();
  key_list_stats_.bytes_saved = st.key_lists_bytes_saved();
  return Status::OK();
}

Status KvService::RestoreParked(const KvServiceState& st, std::vector<StateReader>* in, Clock::time_point now) {
  for (int i = 0; i < st.parked_size(); ++i) {
    const ParkedPullState& ps = st.parked(i);
    const std::string where = "kv.parked[" + std::to_string(i) + "]";
    ShardInput input;
    TETHER_RETURN_IF_ERROR(DecodeShardInput(ps.input(), "shard state: " + where, &input));
    const MessageHeader& h = input.message.header;
    if (h.type() != PULL || h.table_id() >= tables_.size() || h.sender_rank() < 0 || h.sender_rank() >= kMaxRanks ||
        ps.since_age_ns() < 0)
      return Status::DataLoss("shard state: " + where + ": not a pull of a known table from a rank below " +
                              std::to_string(kMaxRanks) + ", or a negative age");
    const ServerTable& t = *tables_[h.table_id()];
    KeyListCache::List rows;
    if (ps.has_rows()) {
      TETHER_RETURN_IF_ERROR(ReadRows(h.table_id(), h.num_keys(), where, in, &rows));
    } else if (IsRowTable(t.spec()) && input.message.keys.size() != h.num_keys() * sizeof(uint64_t)) {
      return Status::DataLoss("shard state: " + where + ": a pull of " + std::to_string(h.num_keys()) +
                              " keys without its keys or rows");
    }
    parked_.push_back({std::move(input.identity), std::move(input.message),
                       now - std::chrono::nanoseconds(ps.since_age_ns()), std::move(rows)});
  }
  return Status::OK();
}

Status KvService::RestoreBoundWaits(const KvServiceState& st, Clock::time_point now) {
  if (st.bound_wait_size() > kMaxRanks)
    return Status::DataLoss("shard state: kv.bound_wait: " + std::to_string(st.bound_wait_size()) +
                            " ranks, past " + std::to_string(kMaxRanks));
  for (int i = 0; i < st.bound_wait_size(); ++i) {
    const BoundWaitState& ws = st.bound_wait(i);
    if (!std::isfinite(ws.seconds()) || ws.seconds() < 0 || ws.counted_until_age_ns() < 0)
      return Status::DataLoss("shard state: kv.bound_wait[" + std::to_string(i) + "]: seconds " +
                              std::to_string(ws.seconds()) + " or age " + std::to_string(ws.counted_until_age_ns()));
    BoundWait w;
    w.seconds = ws.seconds();
    if (ws.has_counted_until_age_ns()) w.counted_until = now - std::chrono::nanoseconds(ws.counted_until_age_ns());
    bound_wait_.push_back(w);
  }
  return Status::OK();
}

Status KvService::RestoreState(const KvServiceState& st, std::vector<std::string> table_rows, Clock::time_point now) {
  if (defined() || !parked_.empty() || !key_lists_.empty() || !bound_wait_.empty())
    return Status::FailedPrecondition("a key-value service state is restored into a fresh service only");
  TETHER_RETURN_IF_ERROR(CheckJobTables(st));
  if (st.job_tables_size() > 0) DefineTables(st.job_tables());
  if (table_rows.size() != tables_.size())
    return Status::DataLoss("shard state: kv: " + std::to_string(table_rows.size()) + " table strings for " +
                            std::to_string(tables_.size()) + " tables");
  std::vector<StateReader> in;
  for (size_t i = 0; i < tables_.size(); ++i) {
    const std::string where = TableWhere(i, tables_[i]->spec());
    if (st.tables(static_cast<int>(i)).raw_bytes() != table_rows[i].size())
      return Status::DataLoss(where + ": raw_bytes " + std::to_string(st.tables(static_cast<int>(i)).raw_bytes()) +
                              ", but its string holds " + std::to_string(table_rows[i].size()) + " bytes");
    in.emplace_back(table_rows[i], where);
  }
  for (size_t i = 0; i < tables_.size(); ++i)
    TETHER_RETURN_IF_ERROR(tables_[i]->RestoreState(st.tables(static_cast<int>(i)), &in[i]));
  TETHER_RETURN_IF_ERROR(RestoreKeyLists(st, &in));
  TETHER_RETURN_IF_ERROR(RestoreParked(st, &in, now));
  TETHER_RETURN_IF_ERROR(RestoreBoundWaits(st, now));
  if (st.has_average() != (averager_ != nullptr))
    return Status::DataLoss(std::string("shard state: kv.average: ") +
                            (st.has_average() ? "sent for a job without" : "missing for a job with") +
                            " consistency AVERAGE");
  if (averager_ != nullptr) {
    std::vector<ModelAverager::TableShape> shapes;
    for (const auto& t : tables_)
      shapes.push_back({IsDenseTable(t->spec()), t->spec().dim(), t->dense_end() - t->dense_begin()});
    TETHER_RETURN_IF_ERROR(averager_->RestoreState(st.average(), shapes, kMaxRanks, &in));
  }
  if (!st.fatal().empty()) fatal_ = Status::FailedPrecondition(st.fatal());
  for (const StateReader& r : in) TETHER_RETURN_IF_ERROR(r.Finish());
  return Status::OK();
}

}  // namespace tether
