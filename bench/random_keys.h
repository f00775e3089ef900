// Random request keys for the transport benchmarks: `tether-bench kv` and
// the ps-lite program scripts/bench_pslite.sh compiles
// (bench/pslite_kv/kv_bench.cc) include this one header, so both sides send
// the same keys for the same seed. Header-only and standard C++ only (the
// ps-lite program is built outside Tether's build).
//
// Ownership: returns values. Thread-compatible.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace tether {

/// `n` (≥ 0) uint64 keys drawn from the whole range by std::mt19937_64
/// seeded with `seed`, sorted and unique (redrawn until there are `n`).
inline std::vector<uint64_t> RandomSortedKeys(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> keys;
  keys.reserve(static_cast<size_t>(std::max<int64_t>(n, 0)));
  while (static_cast<int64_t>(keys.size()) < n) {
    while (static_cast<int64_t>(keys.size()) < n) keys.push_back(rng());
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  }
  return keys;
}

}  // namespace tether
