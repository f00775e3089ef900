// What every benchmark of tether-bench shares: a clock, the comma-separated
// lists its flags take, percentiles of timed operations, and the number
// formats of its Markdown tables. Benchmarks print tables (stdout) and
// never assert a speed; each figure stands beside a baseline measured in
// the same run (docs/PERFORMANCE.md).
//
// Ownership: returns values.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tether {

/// How long each cell of a table is measured.
struct BenchTiming {
  double min_time_s = 0.3;  // at least this long (seconds)
  int min_reps = 5;         // at least this many timed operations
  int max_reps = 300;       // at most this many timed operations
};

/// Seconds on the steady clock.
double Now();

/// "100,1e5,1000000" as integers (each read as a double first, so 1e5
/// works; empty items skipped). A malformed number throws, as std::stod.
std::vector<int64_t> ParseList(const std::string& s);

/// "pull,push" as names (empty items skipped).
std::vector<std::string> ParseNames(const std::string& s);

/// --shapes ("KEYSxDIM,...", KEYS may be written 1e5) as (keys, dim) pairs.
/// False (after one line on stderr naming `mode` and the item) for a bad
/// one.
bool ParseShapes(const char* mode, const std::string& text, std::vector<std::pair<int64_t, int64_t>>* shapes);

struct Summary {
  double median = 0, p99 = 0;  // seconds
  int reps = 0;
};

/// Median and nearest-rank 99th percentile of the timed operations.
Summary Summarize(std::vector<double> t);

/// printf of one double.
std::string Fmt(const char* f, double v);

/// Large counts for tables: 1.2e6 → "1.20M", 1500 → "1.5k".
std::string Si(double v);

}  // namespace tether
