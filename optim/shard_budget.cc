#include "optim/shard_budget.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/memory_fit.h"
#include "core/partition.h"
#include "core/table_spec.h"
#include "optim/optimizer.h"

namespace tether {
namespace {

uint64_t RoundUpPow2(uint64_t x) {
  uint64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

uint64_t LargestDenseSliceBytes(const TableSpec& t, int num_shards) {
  const Optimizer optimizer(t.optimizer());
  uint64_t most = 0;
  for (int s = 0; s < num_shards; ++s) {
    const auto [b, e] = DenseRange(t.size(), s, num_shards);
    // Delay compensation's backups are a block of their own (not huge pages).
    most = std::max<uint64_t>(most, HugePageRoundedBytes((e - b + optimizer.StateFloats(e - b)) * sizeof(float)) +
                                        DelayBackupFloats(t, e - b) * sizeof(float));
  }
  return most;
}

bool IsPrime(uint64_t n) {
  if (n < 2) return false;
  for (uint64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

// The rows of the shared table `i` under the shared limit `rows`: all its
// keys on the fullest shard at most (keyed[i]; 0: unbounded keys).
uint64_t SharedRows(const std::vector<uint64_t>& keyed, size_t i, uint64_t rows) {
  return keyed[i] == 0 ? rows : std::min(rows, keyed[i]);
}

// The shared tables' bytes when each holds `rows` rows (keyed ones at most
// their keys).
uint64_t SharedBytes(const std::vector<TableSpec>& tables, const std::vector<size_t>& shared,
                     const std::vector<uint64_t>& keyed, uint64_t rows) {
  uint64_t bytes = 0;
  for (size_t i : shared) bytes += BudgetedTableBytes(tables[i], SharedRows(keyed, i, rows));
  return bytes;
}

// Counted exactly up to this many keys (~0.1 s); above, bounded.
constexpr uint64_t kMaxKeysCounted = uint64_t{1} << 26;

}  // namespace

uint64_t MostKeysOnAShard(uint64_t num_keys, int num_shards) {
  const uint64_t n = static_cast<uint64_t>(num_shards);
  if (num_keys == 0 || n <= 1) return num_keys;
  if (num_keys > kMaxKeysCounted) {
    // A shard's count is binomial (num_keys, 1/n): 8 standard deviations
    // over the mean are past what any shard of any job reaches.
    const uint64_t mean = (num_keys + n - 1) / n;
    return mean + 8 * static_cast<uint64_t>(std::ceil(std::sqrt(static_cast<double>(mean)))) + 64;
  }
  std::vector<uint64_t> count(n, 0);
  for (uint64_t k = 0; k < num_keys; ++k) ++count[ShardForKey(k, num_shards)];
  return *std::max_element(count.begin(), count.end());
}

uint64_t ShardRowBytes(const TableSpec& t) {
  const Optimizer optimizer(t.optimizer());
  uint64_t per_row = (t.dim() + optimizer.StateFloats(t.dim()) + DelayBackupFloats(t, t.dim())) * sizeof(float) +
                     kServerIndexBytesPerRow;
  if (AdmitsOrEvicts(t)) per_row += sizeof(uint64_t);  // the row's key, by row number
  if (t.budget().evict() != EVICT_NONE) per_row += kEvictionBytesPerRow;
  return per_row;
}


uint64_t ReservedIndexSlots(uint64_t rows) {
  uint64_t cap = std::max<uint64_t>(61, (2 * (rows + 1)) | 1);
  while (!IsPrime(cap)) cap += 2;
  return cap;
}

uint64_t BudgetedTableBytes(const TableSpec& t, uint64_t rows) {
  TableBudget b = t.budget();
  b.set_max_rows(rows);
  const Optimizer optimizer(t.optimizer());
  const uint64_t data_per_row = (t.dim() + optimizer.StateFloats(t.dim())) * sizeof(float);
  return HugePageRoundedBytes(rows * data_per_row) +
         rows * (ShardRowBytes(t) - kServerIndexBytesPerRow - data_per_row) +
         HugePageRoundedBytes(16 * ReservedIndexSlots(rows)) + AdmissionSketchBytes(b);
}

StatusOr<uint64_t> ApplyServerMemoryBudget(uint64_t budget_bytes, int num_shards, std::vector<TableSpec>* tables) {
  if (budget_bytes == 0) return uint64_t{0};
  std::vector<TableSpec> out = *tables;
  uint64_t fixed = 0, per_row = 0, most_keys = 0;
  std::vector<size_t> shared;
  std::vector<uint64_t> keyed(out.size(), 0);
  std::vector<bool> made_lru(out.size(), false);
  std::string rows_list;
  for (size_t i = 0; i < out.size(); ++i) {
    TableSpec& t = out[i];
    if (IsDenseTable(t)) {
      fixed += LargestDenseSliceBytes(t, num_shards);
    } else if (t.budget().max_rows() > 0) {
      fixed += BudgetedTableBytes(t, t.budget().max_rows());
    } else {
      // Sized as evicting (a key and eviction metadata a row), which is
      // conservative for a keyed table that turns out to hold all its keys.
      made_lru[i] = t.budget().evict() == EVICT_NONE;
      if (made_lru[i]) t.mutable_budget()->set_evict(LRU);
      keyed[i] = MostKeysOnAShard(t.num_keys(), num_shards);
      most_keys = std::max(most_keys, keyed[i]);
      shared.push_back(i);
      if (keyed[i] == 0) per_row += ShardRowBytes(t);
      rows_list += (rows_list.empty() ? "" : ", ") + t.name() + " " + std::to_string(BudgetedTableBytes(t, 1));
    }
  }
  const uint64_t least = fixed + SharedBytes(out, shared, keyed, 1);
  if (budget_bytes < least) {
    return Status::ResourceExhausted(
        "cluster.server_memory_bytes (--server_memory) is " + FormatBytes(budget_bytes) +
        ", but each shard needs at least " + std::to_string(least) + " bytes: " + std::to_string(fixed) +
        " for the dense tables and the tables with their own max_rows" +
        (shared.empty() ? std::string()
                        : ", plus one row of each other row table with its index and sketch (" + rows_list + ")"));
  }
  uint64_t rows = 0;
  if (!shared.empty()) {
    // The bytes grow with R, and past the most keys of a keyed table only
    // the unkeyed tables' do, each by more than ShardRowBytes a row: the
    // largest R that fits lies in [1, max(most keys, (budget − fixed) /
    // per_row)].
    uint64_t lo = 1, hi = std::max(most_keys, per_row == 0 ? 1 : (budget_bytes - fixed) / per_row);
    while (lo < hi) {
      const uint64_t mid = lo + (hi - lo + 1) / 2;
      if (fixed + SharedBytes(out, shared, keyed, mid) <= budget_bytes) lo = mid; else hi = mid - 1;
    }
    rows = lo;
    for (size_t i : shared) {
      TableBudget* b = out[i].mutable_budget();
      b->set_max_rows(SharedRows(keyed, i, rows));
      // A keyed table that holds all its keys evicts nothing (and so keeps
      // its key lists); one counted exactly never passes its max_rows.
      const bool all_keys = keyed[i] != 0 && rows >= keyed[i] && out[i].num_keys() <= kMaxKeysCounted;
      if (all_keys && made_lru[i]) b->set_evict(EVICT_NONE);
    }
  }
  *tables = std::move(out);
  return rows;
}

uint64_t AdmissionSketchWidth(const TableBudget& b) {
  if (b.max_rows() == 0) return uint64_t{1} << 20;
  return std::clamp<uint64_t>(4 * b.max_rows(), uint64_t{1} << 12, uint64_t{1} << 22);
}

uint64_t AdmissionSketchBytes(const TableBudget& b) {
  if (b.admit_after() == 0 && !(b.admit_probability() < 1.0f)) return 0;
  return 4 * RoundUpPow2(AdmissionSketchWidth(b)) * sizeof(uint16_t);
}

}  // namespace tether
