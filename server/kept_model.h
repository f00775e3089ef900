// KeptModel: one shard's copy of its tables' weights at the end of the
// best epoch so far (train.keep_best_model with a validation split,
// docs/MODELS.md), and putting it back after training so that the final
// evaluation, the final checkpoint and --model_out hold that epoch's model.
//
// Why the copy is a consistent cut without a round of its own: every
// worker waits for its epoch's pushes to be answered (applied) before it
// sends its part of the validation round, and the round completes only
// once every worker's part is in; each worker then sends MODEL_CUT (keep,
// epoch e) to every shard before any push of epoch e + 1, and one worker's
// messages reach a shard in order. So when the first MODEL_CUT of epoch e
// reaches a shard, the shard's rows hold every update of epochs ≤ e and
// none later: the copy is taken then, and the other workers' MODEL_CUTs of
// e find it taken. Nothing waits for a worker, so a worker that leaves or
// dies meanwhile stalls nobody. Restore comes after the barrier, when no
// worker pushes any more; the first restore puts the copy back, the
// others find it done.
//
// What is copied: the weights only (not the optimizer's state, not the
// index): row tables num_rows() × dim floats in row-number order, dense
// slices their end − begin weights. Rows are only ever appended to a
// ServerTable, so row numbers (and the offsets workers' key lists hold)
// stay valid: the restore writes the weights back in place, and a row
// created after the cut gets its initializer's weights again (the weights
// it had before it existed). The optimizer's state, the update counts and
// the clocks stay as they are at the end of training.
//
// A checkpoint holds the copy (shard-<s>.kept, server/kept_model_checkpoint.h)
// and a resume puts it back (Save, Load). A replica that joins a running
// shard is sent all of it (SaveState, RestoreState: the copy, its epoch, and
// whether it was put back already).
//
// Ownership: the shard owns it; the tables are the shard's (borrowed per
// call). Thread-safety: none (Run()'s thread).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "server/table.h"

namespace tether {

class KeptModel {
 public:
  using Tables = std::vector<std::unique_ptr<ServerTable>>;

  /// MODEL_CUT keep of `epoch` (1-based): copies the weights of `tables`
  /// when `epoch` is later than the copy held (or none is held); returns
  /// whether it copied now. An epoch not later (a second worker's MODEL_CUT
  /// of the same round, or one repeated) changes nothing.
  bool Keep(int epoch, const Tables& tables);

  /// MODEL_CUT restore of `epoch`: puts the copy back into `tables` (the
  /// tables it was taken from, rows appended since allowed) the first time;
  /// returns whether it restored now (false: already restored). Errors:
  /// FailedPrecondition when no copy is held, or the copy is of another
  /// epoch than `epoch` (the workers disagree on the best epoch); nothing
  /// is changed then. InvalidArgument when `tables` are not the ones the
  /// copy came from (another count, or fewer rows).
  [[nodiscard]] StatusOr<bool> Restore(int epoch, Tables* tables);

  /// The copy held (epoch() > 0) into `out`: its epoch and per table of
  /// `tables` (the tables it was taken from) the copy's row keys (row
  /// tables: the first rows of KeysByRow()) or slice, and its weights. For a
  /// checkpoint (server/kept_model_checkpoint.h).
  void Save(const Tables& tables, KeptModelState* out) const;

  /// Holds the copy `state` describes, over `tables` restored from the same
  /// checkpoint (the copy's rows must be their first rows, by key; dense
  /// slices the same). Errors: InvalidArgument naming the table and what
  /// disagrees; nothing is changed then.
  [[nodiscard]] Status Load(const KeptModelState& state, const Tables& tables);

  /// The whole state into `*state` (cleared first): epoch 0 and nothing
  /// else before any copy; else Save's copy over `tables` and whether it
  /// was restored. For a running shard's state (proto/shard_state.proto).
  void SaveState(KeptModelState* state, const Tables& tables) const;

  /// Replaces the state with `state` (a network peer's: untrusted), over
  /// `tables` already restored to the sender's (the copy's rows must be
  /// their first rows, by key). Errors: DataLoss naming the field ("shard
  /// state: kept ...") for a negative epoch, tables or a restored flag
  /// without a copy, or what Load refuses; nothing is changed then.
  [[nodiscard]] Status RestoreState(const KeptModelState& state, const Tables& tables);

  /// The epoch of the copy held; 0 before any.
  int epoch() const { return epoch_; }
  bool restored() const { return restored_; }
  /// The copy's size in bytes (0 before any).
  uint64_t bytes() const;

 private:
  struct TableCopy {
    uint64_t rows = 0;  // row tables: rows held at the cut
    std::vector<float> weights;
  };
  // `t`'s weights from `copy`; rows created after the cut get their
  // initializer's weights.
  static void Put(const TableCopy& copy, ServerTable* t);

  int epoch_ = 0;
  bool restored_ = false;
  std::vector<TableCopy> copies_;  // by table id
};

}  // namespace tether
