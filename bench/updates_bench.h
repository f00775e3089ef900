// tether-bench updates: the server's optimizer steps on pushed rows, on one
// core, against a STREAM copy/triad probe of the same machine in the same
// run (McCalpin 1995). Three figures per optimizer and row width: the table
// path (ServerTable::PushRows: lookup, step, finiteness check), and the bare
// step (Optimizer::Apply on a plain array laid out as the table's) on the
// same rows scattered in the table path's order and in order; the working
// set is a multiple of the last-level cache, so memory, not cache, is
// measured. Prints Markdown on stdout.
//
// Ownership: the benchmark owns its tables and arrays.
// Thread-safety: one thread (the measurement is single-core by design).
#pragma once

#include <cstdint>
#include <string>

#include "bench/bench_util.h"

namespace tether {

struct UpdatesBenchOptions {
  std::string dims;                          // row widths in floats; "" = 64,256
  std::string optimizers = "sgd,adagrad,adam";
  int64_t rows = 500000;       // rows in the table, at least (raised to fill llc_multiple × the LLC)
  double llc_multiple = 4;     // the working set as a multiple of the last-level cache
  int64_t llc_bytes = 0;       // last-level cache in bytes; 0: sysfs, else sysconf, else 64 MiB
  int batch = 1000;            // rows per push (random, sorted, unique)
  int64_t stream_floats = int64_t{1} << 25;  // floats per probe array, at least (raised to llc_multiple × the LLC)
  BenchTiming timing;          // min_time_s and min_reps per figure
};

/// Runs the benchmark; returns 0, or 2 for an optimizer name it does not
/// know (named on stderr).
int RunUpdatesBench(const UpdatesBenchOptions& options);

}  // namespace tether
