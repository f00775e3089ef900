// RowSource: where one worker's training rows come from, chosen once per run
// from the job's data mode (MakeRowSource), so the epoch loop has one shape
// for all of them: per epoch StartEpoch, then blocks of rows (NextBlock)
// trained in minibatches until the epoch is over.
//
//   static split   this rank's partition in memory, one block per epoch,
//                  shuffled per (train.seed, rank, epoch); a resume with
//                  another number of workers first trains the rows dealt
//                  to this worker (one block, in the order dealt)
//   streamed       data.streaming: this rank's share of the files read again
//                  every epoch in blocks of data.shuffle_buffer_rows
//   on demand      train.data_on_demand: chunks dealt by shard 0
//                  (worker/train/chunk_feed.h), from the whole set in memory or
//                  from byte ranges of streamed files
//
// A block is a few thousand rows or a whole epoch: the virtual calls here
// are per block, never per minibatch or row.
//
// Ownership: a source owns the rows it holds (TrainingData, a ChunkFeed).
// Thread-safety: not thread-safe; the training thread owns it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "proto/config.pb.h"
#include "proto/stats.pb.h"
#include "proto/wire.pb.h"
#include "input/csr.h"
#include "worker/train/chunk_feed.h"
#include "worker/train/training_data.h"

namespace tether {

struct TrainReport;  // worker/trainer.h

class RowSource {
 public:
  virtual ~RowSource() = default;

  /// The epoch training starts at, given the one planned from a resume or a
  /// restart (`planned`): data on demand asks shard 0 instead (a worker
  /// joining mid-job starts at the epoch in progress; `epochs` when the job
  /// is done or a stop ended the wait, see stopped()). Errors: the feed's.
  virtual StatusOr<int> FirstEpoch(int planned) { return planned; }
  /// Starts epoch `epoch`; on the run's first epoch, training starts at row
  /// `first_row` of the first block (a resumed or restarted static share;
  /// the other sources start at 0). Errors: the stream's.
  virtual Status StartEpoch(int epoch, int64_t first_row) = 0;
  /// The epoch's next block into *x / *y (replaced), and the row of it to
  /// start at (*begin); false when the epoch is over for this worker (or
  /// stopped()). Errors: the readers', the feed's.
  virtual StatusOr<bool> NextBlock(CsrMatrix* x, CsrMatrix* y, int64_t* begin) = 0;
  /// A stop ended a wait for a chunk: the worker leaves (data on demand).
  virtual bool stopped() const { return false; }
  /// Seconds this source has waited for rows so far (data on demand: shard
  /// 0's WAIT for a chunk; 0 for the others), non-decreasing.
  virtual double wait_seconds() const { return 0; }

  /// What a checkpoint records of the epoch in progress: its rows in
  /// training order (global row ids; empty where shard 0 or a stream keeps
  /// the place), and, in an epoch of rows a resume dealt, those (else null).
  virtual const std::vector<int64_t>& epoch_lines() const = 0;
  virtual const std::vector<int64_t>* dealt_lines() const { return nullptr; }

  /// The epoch is over, `trained` rows trained in it: logs what the source
  /// saw; a streamed share learns its size (report->train_rows).
  virtual void EndEpoch(int /*epoch*/, int64_t /*trained*/, TrainReport* /*report*/) {}

  /// Data on demand: shard 0 deals the rows (the barrier says DONE, a
  /// worker that left is no failure: its chunks were dealt again).
  virtual bool dealt_by_shard0() const { return false; }
  /// This worker's counters for its barrier message: rows by epoch
  /// (*epoch_rows: rows trained per epoch, replaced by the chunks shard 0
  /// counted with data on demand), chunks.
  virtual void AddStats(WorkerStats* /*mine*/, std::vector<int64_t>* /*epoch_rows*/) const {}
};

/// What an on-demand source needs from the run: the feed's hooks
/// (ChunkFeedHooks: ask, idle, clock, empty clock, stop) and the client's
/// heartbeat for streamed files.
struct RowSourceHooks {
  ChunkFeedHooks feed;
  std::function<Status()> idle;
};

/// The source of the job's data mode over `data` (moved in). With a
/// static split, `dealt` (may be empty) are the rows a resume dealt to this
/// worker, `dealt_lines` their global ids. Errors: ChunkBytesFor's.
StatusOr<std::unique_ptr<RowSource>> MakeRowSource(const JobConfig& config, int rank, TrainingData data,
                                                   Dataset dealt, std::vector<int64_t> dealt_lines,
                                                   RowSourceHooks hooks);

}  // namespace tether
