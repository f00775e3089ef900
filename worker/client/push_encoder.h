// PushEncoder: a worker's pushes in their table's push encoding
// (TableSpec.push_wire, core/wire_codec.h). A 16-bit push is gathered,
// scaled, corrected by the rows' residuals and rounded in one pass into the
// values frame; with error feedback each row keeps what the rounding lost
// (worker/client/residual_store.h; Seide et al., Interspeech 2014;
// Karimireddy et al., ICML 2019). Float32 tables are not its business (the
// client copies them as before).
//
// Residuals: per table, a ResidualStore of row tables (bounded by
// `residual_bytes` per table, or the table's num_keys rows if fewer), one
// float per value of dense tables (the worker holds the dense table itself
// anyway). They are part of the worker's checkpoint (SaveResiduals,
// RestoreResiduals; checkpoint/residual_file.h), so a resumed job pushes
// what the stopped one would have.
//
// Thread-compatible (the client's one thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/residual_file.h"
#include "core/net/frame_pool.h"
#include "proto/tables.pb.h"
#include "worker/client/residual_store.h"

namespace tether {

class PushDenseWriter;
class PushRowWriter;

class PushEncoder {
 public:
  struct Table {
    std::string name;             // TableSpec.name (checkpoints name residuals by it)
    WireEncoding wire = FP32;     // the table's push_wire
    bool error_feedback = false;  // read only when wire is 16-bit
    bool dense = false;
    uint32_t dim = 1;             // row tables
    uint64_t size = 0;            // dense tables: floats in the table
    uint64_t num_keys = 0;        // row tables: 0 = unbounded
  };
  struct Stats {
    uint64_t saturated = 0;         // values clamped to the encoding's largest finite value
    uint64_t residual_rows = 0;     // rows holding a residual now, over the tables
    uint64_t residual_evicted = 0;  // rows whose residual was dropped for room
    double residual_evicted_l1 = 0; // Σ |residual| of those
  };

  /// Default residual memory per row table: 64 MiB.
  static constexpr uint64_t kDefaultResidualBytes = 64ull << 20;

  PushEncoder(std::vector<Table> tables, uint64_t residual_bytes);

  /// The table's push encoding (FP32 for an id out of range).
  WireEncoding wire(uint32_t table) const;
  bool narrows(uint32_t table) const { return IsHalf(table); }

  /// A values frame of n rows of `table`: row i's gradient is the dim
  /// floats at grads + r·dim, r = rows[i] (rows null: r = i), times
  /// `scale`. keys[i] is row i's key (its residual). `list`: null, or an
  /// immutable list holding keys[0, n) themselves, in order (the caller
  /// compared them: the worker's key-list cache entry the request names):
  /// the residual store then finds a list it found before in one run
  /// without comparing its keys (ResidualStore::KnownRun). Call only when
  /// narrows(table). The same, written while it is sent: PushRowWriter
  /// (worker/client/push_writer.h).
  zmq::message_t EncodeRows(uint32_t table, const uint64_t* keys, size_t n, const float* grads, const uint32_t* rows,
                            float scale, FramePool* pool, const ResidualStore::KeyList& list = nullptr);
  /// A values frame of dense `table`'s floats [begin, end) of `grad` (the
  /// whole table), times `scale`. Call only when narrows(table). The same,
  /// written while it is sent: PushDenseWriter.
  zmq::message_t EncodeDense(uint32_t table, uint64_t begin, uint64_t end, const float* grad, float scale,
                             FramePool* pool);

  /// The residuals as a checkpoint keeps them: one entry per table with
  /// error feedback (row tables: the rows held, least recently pushed
  /// first). Empty when no table keeps residuals.
  std::vector<ResidualTable> SaveResiduals() const;
  /// Puts back what SaveResiduals gave, `tables` checked against the job's
  /// tables first (DiffResidualTables): rows in the given order (so the
  /// same recency), the dropped-row counters continued. A row table's
  /// store smaller than the rows given drops the least recent, counted. An
  /// entry of a table whose pushes keep no residuals now (float32, or error
  /// feedback off) is skipped: returns the names of those.
  std::vector<std::string> RestoreResiduals(const std::vector<ResidualTable>& tables);

  Stats stats() const;
  /// The row table's residuals (null without error feedback).
  const ResidualStore* residuals(uint32_t table) const;
  /// A dense table's residuals (size() floats; null without error feedback).
  const float* dense_residuals(uint32_t table) const;

 private:
  // The writers encode through tables_, rows_, dense_ and EncodeInRuns, and count in saturated_.
  friend class PushDenseWriter;
  friend class PushRowWriter;

  bool IsHalf(uint32_t table) const;
  // Rows [begin, end) (row i's gradient at grads + r·dim, r = rows[i], or i
  // when rows is null) times `scale` into `out` (row i at out + i · the
  // row's bytes), one call per run of contiguous gradients, with error
  // feedback through `residuals` (row i at residuals + i·dim) when
  // non-null. Returns the values saturated.
  static uint64_t EncodeInRuns(WireEncoding wire, uint32_t dim, const float* grads, const uint32_t* rows,
                               size_t begin, size_t end, float scale, float* residuals, unsigned char* out);

  std::vector<Table> tables_;
  std::vector<std::unique_ptr<ResidualStore>> rows_;  // per table, row tables with error feedback
  std::vector<std::vector<float>> dense_;             // per table, dense tables with error feedback
  uint64_t saturated_ = 0;
};

}  // namespace tether
