#include "core/memory_fit.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/table_spec.h"

namespace tether {

StatusOr<uint64_t> ParseByteSize(const std::string& text) {
  auto bad = [&text] {
    return Status::InvalidArgument("'" + text +
                                   "' is not a byte size: expected a number of bytes, optionally with a unit "
                                   "B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), "
                                   "e.g. 64MiB");
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return bad();
  double number = 0;
  {
    std::istringstream in(text.substr(0, i));
    in >> number;
    if (in.fail() || !in.eof() || !std::isfinite(number)) return bad();
  }
  std::string unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  struct Unit {
    const char* name;
    double factor;
  };
  static const Unit kUnits[] = {{"", 1},          {"b", 1},          {"kb", 1e3},           {"mb", 1e6},
                                {"gb", 1e9},      {"tb", 1e12},      {"kib", 1024.0},       {"mib", 1048576.0},
                                {"gib", 1073741824.0}, {"tib", 1099511627776.0}};
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    const double bytes = std::floor(number * u.factor);
    if (bytes >= 18446744073709551615.0) return bad();
    return static_cast<uint64_t>(bytes);
  }
  return bad();
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  static const char* kNames[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f %s", v, kNames[u]);
  return std::string(buf) + " (" + std::to_string(bytes) + " bytes)";
}

StatusOr<uint64_t> ReadMemAvailableBytes(const std::string& meminfo_path) {
  std::ifstream in(meminfo_path);
  if (!in) return Status::NotFound("cannot read " + meminfo_path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    uint64_t kb = 0;
    std::string unit;
    fields >> kb >> unit;
    if (fields.fail() || unit != "kB") return Status::DataLoss(meminfo_path + ": bad MemAvailable line '" + line + "'");
    return kb * 1024;
  }
  return Status::DataLoss(meminfo_path + " has no MemAvailable line");
}

MemoryBudget MemoryBudgetFor(const JobConfig& config, const std::string& meminfo_path, const ProcessLimits* limits) {
  MemoryBudget b;
  if (config.consistency().memory_limit_bytes() > 0) {
    b.bytes = config.consistency().memory_limit_bytes();
    b.source = "consistency.memory_limit_bytes (--memory_limit)";
    return b;
  }
  StatusOr<uint64_t> available = ReadMemAvailableBytes(meminfo_path);
  if (available.ok()) b.bytes = *available;
  b.source = "MemAvailable in " + meminfo_path;
  // A container's or a job's limit is often far below the host's free
  // memory: the process is killed at its cgroup limit, not at MemAvailable.
  std::string source;
  const uint64_t limited = LimitedMemoryBytes(limits != nullptr ? *limits : CurrentProcessLimits(), &source);
  if (limited > 0 && (b.bytes == 0 || limited < b.bytes)) {
    b.bytes = limited;
    b.source = source;
  }
  return b;
}

uint64_t TableWeightBytes(const TableSpec& t) {
  if (IsDenseTable(t)) return t.size() * sizeof(float);
  return t.num_keys() * t.dim() * sizeof(float);
}

StatusOr<uint64_t> ResolveCacheCapacity(const JobConfig& config, const std::vector<TableSpec>& tables) {
  const ConsistencyConfig& c = config.consistency();
  if (c.cache_capacity_fraction() <= 0) return c.cache_capacity_bytes();
  uint64_t model = 0;
  for (const TableSpec& t : tables) {
    if (IsRowTable(t) && t.num_keys() == 0)
      return Status::FailedPrecondition(
          "config field consistency.cache_capacity_fraction: table '" + t.name() +
          "' has no bound on its keys (num_keys 0), so the model has no size to take a fraction of: give "
          "consistency.cache_capacity_bytes (--cache_capacity=64MiB) instead");
    model += TableWeightBytes(t);
  }
  const double bytes = std::floor(c.cache_capacity_fraction() * static_cast<double>(model));
  return std::max<uint64_t>(1, static_cast<uint64_t>(bytes));
}

Status CheckWorkerFits(const std::string& who, const std::vector<TableSpec>& tables, uint64_t cache_capacity_bytes,
                       const MemoryBudget& budget) {
  uint64_t dense = 0, cache_bound = 0;
  std::string dense_list;
  for (const TableSpec& t : tables) {
    if (IsDenseTable(t)) {
      dense += TableWeightBytes(t);
      dense_list += (dense_list.empty() ? "" : ", ") + t.name() + " " + std::to_string(TableWeightBytes(t));
    }
    const bool cached = t.consistency().cache() && TableStaleness(t) >= 0;
    if (!cached) continue;
    // Unbounded: the cache can come to hold every row of the table (a
    // dense table: its slices, the table's floats; one entry charge
    // counted, not one per shard).
    if (IsDenseTable(t)) {
      cache_bound += TableWeightBytes(t) + kCacheEntryOverheadBytes;
    } else {
      cache_bound += t.num_keys() * (t.dim() * sizeof(float) + kCacheEntryOverheadBytes);
    }
  }
  const bool bounded = cache_capacity_bytes > 0;
  const uint64_t cache = bounded ? cache_capacity_bytes : cache_bound;
  const uint64_t need = cache + dense;
  if (budget.bytes == 0 || need <= budget.bytes) return Status::OK();
  return Status::ResourceExhausted(
      who + " does not fit in memory: it needs " + FormatBytes(need) + " = parameter cache " + FormatBytes(cache) +
      (bounded ? " (consistency.cache_capacity_bytes / _fraction)"
               : " (unbounded: every row of its cached tables; consistency.cache_capacity_bytes is 0)") +
      " + dense tables " + FormatBytes(dense) + (dense_list.empty() ? "" : " (" + dense_list + ")") + ", but " +
      FormatBytes(budget.bytes) + " are available (" + budget.source +
      "); give the cache a smaller capacity (--cache_capacity=64MiB or 10%), or the worker more memory "
      "(docs/OPERATIONS.md, \"Memory sizing\")");
}

}  // namespace tether
