// Memory sizing at start-up (bounded worker memory): byte sizes
// as users write them, the memory a process may count on, the worker
// cache's capacity, and the check that a worker's cache and dense tables
// fit. A server's own check (its shard of the tables) is CheckShardFits in
// server/shard_memory.h, which knows the optimizers' state.
//
// "Fits" means: what the process must hold for the job, computed from the
// tables alone, is at most the memory it may count on (MemoryBudget). The
// training data, minibatch buffers and the transport's queues are not
// counted (they depend on the data and the load, not on the model), so a
// job that passes can still run short; one that fails would certainly not
// run within that memory.
//
// Pure functions of their inputs, but for ReadMemAvailableBytes (a file)
// and MemoryBudget (which reads it); thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/process_limits.h"
#include "core/status.h"
#include "proto/config.pb.h"
#include "proto/tables.pb.h"

namespace tether {

/// Bytes the worker's parameter cache charges per kept row or dense slice on
/// top of its values: an estimate of its hash-map node, LRU link and heap
/// headers (ParamCache::kEntryOverheadBytes).
inline constexpr uint64_t kCacheEntryOverheadBytes = 128;

/// A byte size as written in a flag: a non-negative number, optionally with
/// a unit, in any case: B; KB, MB, GB, TB (powers of 1000); KiB, MiB, GiB,
/// TiB (powers of 1024). "64MiB" = 67108864, "1.5GB" = 1500000000,
/// "4096" = 4096 bytes. Fractions of a byte round down.
/// Errors: InvalidArgument naming the text and the accepted forms.
StatusOr<uint64_t> ParseByteSize(const std::string& text);

/// "64.0 MiB (67108864 bytes)"; "512 bytes" below 1 KiB.
std::string FormatBytes(uint64_t bytes);

/// MemAvailable from a /proc/meminfo-style file (the "MemAvailable: N kB"
/// line), in bytes. Errors: NotFound (the file cannot be read), DataLoss
/// (no such line, or a bad number; the message names the file).
StatusOr<uint64_t> ReadMemAvailableBytes(const std::string& meminfo_path = "/proc/meminfo");

/// The memory a process counts on: consistency.memory_limit_bytes when set,
/// else MemAvailable of `meminfo_path` now or, when lower, what the
/// process's cgroup and address-space limits leave (LimitedMemoryBytes of
/// `*limits`, CurrentProcessLimits() when null; core/process_limits.h).
/// `bytes` 0 means unknown (nothing could be read: no check is made).
/// `source` says which, for messages: "consistency.memory_limit_bytes
/// (--memory_limit)", "MemAvailable in /proc/meminfo", "the cgroup memory
/// limit (FILE)" or "the address-space limit (RLIMIT_AS, ulimit -v)".
struct MemoryBudget {
  uint64_t bytes = 0;
  std::string source;
};
MemoryBudget MemoryBudgetFor(const JobConfig& config, const std::string& meminfo_path = "/proc/meminfo",
                             const ProcessLimits* limits = nullptr);

/// Bytes of a table's weights: ROW num_keys × dim floats (0 when num_keys
/// is 0: unbounded), DENSE size floats.
uint64_t TableWeightBytes(const TableSpec& table);

/// The worker cache's capacity in bytes (0: unbounded), from the job's
/// consistency: cache_capacity_bytes, or cache_capacity_fraction × the
/// model's bytes (Σ TableWeightBytes of `tables`), rounded down, at least 1.
/// Errors: FailedPrecondition when a fraction is set and a row table has no
/// num_keys (its size is unknown), naming the table.
StatusOr<uint64_t> ResolveCacheCapacity(const JobConfig& config, const std::vector<TableSpec>& tables);

/// Whether a worker fits in `budget`: its cache (the capacity, or, when
/// unbounded, every row and slice of its cached tables at full size with
/// the cache's per-entry charge; row tables of unbounded keys counted 0)
/// plus the model's own copy of every dense table (size floats). `who`
/// ("worker 1") starts the message. Budget 0: no check.
/// Errors: ResourceExhausted "worker 1 does not fit in memory: it needs
/// ... = parameter cache ... + dense tables ..., but ... are available
/// (MemAvailable in /proc/meminfo); ...", every size in bytes.
Status CheckWorkerFits(const std::string& who, const std::vector<TableSpec>& tables, uint64_t cache_capacity_bytes,
                       const MemoryBudget& budget);

}  // namespace tether
