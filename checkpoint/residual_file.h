// Residual files: a worker's error-feedback residuals in a checkpoint,
// DIR/ckpt-.../worker-<r>.residuals (worker/client/residual_store.h,
// worker/client/push_encoder.h). With 16-bit pushes and error feedback each
// row keeps what the rounding of its last push lost; a resume that starts
// them at zero is not the run that was stopped, so the worker writes them
// beside its state file, and its WorkerState records the file's name, size
// and XXH3-64 (WorkerState.residual_file). The file is written from plain
// arrays and read back into them: how the worker holds its residuals is not
// this library's business.
//
// Format (little-endian), kResidualFormatVersion:
//   8 bytes   "TTHRRESD"
//   4 bytes   format version
//   4 bytes   number of tables
//   then per table:
//     4 bytes   n, the length of the table's name (1 to 4096), then n bytes
//     1 byte    1 for a dense table, 0 for a row table
//     4 bytes   dim: floats a row (row tables), 0 (dense tables)
//     8 bytes   count: rows (row tables) or floats (dense tables)
//     8 bytes   rows whose residual was dropped for room (ResidualStore::evicted)
//     8 bytes   Σ |residual| of those, a double
//     row tables: count × uint64 keys, least recently pushed first, then
//                 count × dim floats in the same order;
//     dense tables: count floats.
// The file ends after the last table.
//
// Thread-safety: the functions are re-entrant; the tables are values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "proto/tables.pb.h"

namespace tether {

inline constexpr uint32_t kResidualFormatVersion = 1;

/// "worker-2.residuals".
std::string ResidualFileName(int rank);

/// One table's residuals.
struct ResidualTable {
  std::string table;            // TableSpec.name
  bool dense = false;
  uint32_t dim = 0;             // row tables: floats a row (≥ 1); dense tables: 0
  std::vector<uint64_t> keys;   // row tables: the rows held, least recently pushed first
  std::vector<float> values;    // row tables: keys.size() × dim; dense tables: the table's floats
  uint64_t evicted = 0;         // rows whose residual was dropped for room
  double evicted_l1 = 0;        // Σ |residual| of those
};

/// Writes ckpt_dir/worker-<rank>.residuals atomically (temporary name,
/// fsync, rename); `*written` gets its name, size and XXH3-64 (the caller
/// records it in the WorkerState). Errors: InvalidArgument for a table
/// whose values do not match its keys and dim (a programming error);
/// IOError naming the file.
Status WriteResidualFile(FileSystem* fs, const std::string& ckpt_dir, int rank,
                         const std::vector<ResidualTable>& tables, CheckpointFile* written);

/// Reads the residual file `expected` (the WorkerState's record) from
/// ckpt_dir. Errors, each naming the file: NotFound (missing); DataLoss for
/// a size or XXH3-64 other than the record's (a truncated, replaced or
/// corrupt file), a file that is not a residual file, another format
/// version, or contents that do not parse (a count past the file's end,
/// bytes after the last table, a name used twice).
StatusOr<std::vector<ResidualTable>> ReadResidualFile(const std::string& ckpt_dir, const CheckpointFile& expected);

/// The residuals against the job's tables: every table named is one of
/// `tables`, of the same kind, row width (dim) and, for a dense table,
/// size; no key lies past a bounded table's num_keys. "" when they fit,
/// else a message naming `path`, the table and both values.
std::string DiffResidualTables(const std::vector<ResidualTable>& residuals, const std::vector<TableSpec>& tables,
                               const std::string& path);

/// The line a resume logs once the push encoder took `residuals` (read from
/// `file`) and skipped the tables named in `skipped`: the tables and rows
/// restored, and each table skipped with its rows and why, from its spec in
/// `tables` ("pushed in fp32 now" when its push_wire is not 16-bit, else
/// "error feedback off"). E.g. "error-feedback residuals in
/// worker-0.residuals not restored: table w1 (1995 rows: pushed in fp32
/// now)".
std::string DescribeResidualRestore(const std::string& file, const std::vector<ResidualTable>& residuals,
                                    const std::vector<std::string>& skipped, const std::vector<TableSpec>& tables);

}  // namespace tether
