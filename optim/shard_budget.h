// A server shard's memory budget (cluster.server_memory_bytes, flag
// --server_memory) turned into a row limit for each row table, the same on
// every shard and computed from the job's tables alone, so that every
// process that reads the same config derives the same limits. Workers put
// the limits in the TableSpecs they send at HELLO; a shard with a budget
// checks that those tables fit in it (server/shard_memory.h).
//
// A row table with max_rows reserves its rows, row keys and index when the
// shard creates it (ServerTable), so what it allocates is known exactly:
// BudgetedTableBytes.
//
// The rule, per shard:
//  1. Fixed bytes: every dense table at its largest slice over the shards
//     (weights, optimizer state and delay-compensation backups), and every row table with its own
//     max_rows at BudgetedTableBytes(max_rows).
//  2. The other row tables share the rest: each gets the same max_rows R,
//     except that a table with a fixed key count (num_keys) gets at most
//     the most of its keys one shard owns (MostKeysOnAShard): R is the
//     largest with fixed + Σ BudgetedTableBytes(min(R, keys)) ≤ budget, so
//     a table's share is in proportion to its bytes per row (plus its
//     index and sketch). A table that sets no `evict` gets LRU, unless it
//     holds all its keys (it is still counted with a key and eviction
//     metadata a row, which keeps the bytes monotone in R: conservative).
//  3. Budget < fixed + Σ BudgetedTableBytes(1): refused, naming the least.
//
// Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "proto/tables.pb.h"

namespace tether {

/// Bytes of the row index per row (ServerTable's open addressing: a 16-byte
/// slot at a load of at most 1/2).
inline constexpr uint64_t kServerIndexBytesPerRow = 32;
/// Bytes of eviction metadata per row (RowEviction::kBytesPerRow).
inline constexpr uint64_t kEvictionBytesPerRow = 36;
/// A transparent huge page. A table's row data and index blocks of this size
/// or more are allocated in whole huge pages (ServerTable's
/// HugePageAllocator), and the kernel backs a touched huge page whole.
inline constexpr uint64_t kHugePageBytes = uint64_t{2} << 20;

/// The bytes a table block of `bytes` takes: rounded up to whole huge pages
/// from kHugePageBytes on, else `bytes`.
inline uint64_t HugePageRoundedBytes(uint64_t bytes) {
  return bytes < kHugePageBytes ? bytes : (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

/// The most keys of [0, num_keys) that one of `num_shards` shards owns
/// (ShardForKey): counted exactly up to 2^26 keys, above that the mean plus
/// 8 standard deviations plus 64 (a bound no shard reaches in practice).
/// 0 when num_keys is 0 (unbounded keys).
uint64_t MostKeysOnAShard(uint64_t num_keys, int num_shards);

/// Bytes a shard spends per row of row table `t`: (dim + the optimizer's
/// state floats + delay compensation's backup_workers × dim) × 4, the
/// index's 32, the row's key (8) when the table
/// admits or evicts, and kEvictionBytesPerRow when it evicts.
uint64_t ShardRowBytes(const TableSpec& t);

/// Counters a row of `budget`'s admission sketch asks for: 4 × max_rows
/// (clamped to [2^12, 2^22]), or 2^20 without max_rows. The sketch rounds
/// it up to a power of two (server/row_admission.h, which sizes its sketch
/// by this rule).
uint64_t AdmissionSketchWidth(const TableBudget& budget);
/// Bytes of `budget`'s admission sketch: 0 without admission, else 4 rows
/// of 16-bit counters of AdmissionSketchWidth rounded up to a power of two
/// (RowAdmission::SketchBytes is this).
uint64_t AdmissionSketchBytes(const TableBudget& budget);

/// Slots of the row index of a table that reserves `rows` rows at once:
/// the least prime ≥ max(61, (2 × (rows + 1)) | 1) (ServerTable::RowIndex,
/// 16 bytes a slot, a load of at most 1/2).
uint64_t ReservedIndexSlots(uint64_t rows);

/// Bytes row table `t` allocates on a shard with `rows` rows reserved: its
/// row data (rows × (dim + state floats) × 4) and index (16 ×
/// ReservedIndexSlots(rows)), each HugePageRoundedBytes, plus rows × its
/// key, eviction metadata and delay-compensation backup bytes
/// (ShardRowBytes) and its sketch at max_rows = rows.
uint64_t BudgetedTableBytes(const TableSpec& t, uint64_t rows);

/// Applies `budget_bytes` to `tables` for `num_shards` shards by the rule
/// above: sets budget.max_rows (and evict LRU where unset, unless the table
/// holds all its keys) on every row table without its own max_rows.
/// Returns R (0 when no table shares the budget). `budget_bytes` 0: nothing changes, returns 0.
/// Errors: ResourceExhausted "cluster.server_memory_bytes (--server_memory)
/// is ..., but each shard needs at least ... bytes: ..." when the budget
/// cannot hold the fixed bytes plus one row of each shared table; `tables`
/// is then unchanged.
StatusOr<uint64_t> ApplyServerMemoryBudget(uint64_t budget_bytes, int num_shards, std::vector<TableSpec>* tables);

}  // namespace tether
