// ChunkFeed: one worker's side of data on demand (train.data_on_demand;
// shard 0's side is server/coordinator/chunk_service.h). Per epoch the
// worker asks shard 0 for chunks until the epoch is over for it, trains
// each chunk's rows, and completes it with its next request, counting the
// rows it read. So a fast worker trains on more rows than a slow one, and
// every row is used exactly once per epoch whoever is slow, leaves or
// rejoins. Where a chunk's rows come from is a ChunkSource: the whole
// training set held in memory (chunks are rows [begin, end) of it), or
// streamed files (data.streaming; chunks are byte ranges of one file, read
// in blocks of bounded size, so the worker never holds the whole set).
//
// An epoch is over for this worker when shard 0 deals a chunk of a later
// epoch (kept for then) or says DONE; shard 0 deals no chunk of epoch e + 1
// before every chunk of e is completed (an epoch barrier), so the
// evaluation after an epoch sees all of it. While every chunk of the epoch
// is dealt but others still train theirs, shard 0 says WAIT: the feed asks
// again after a bounded backoff (2 ms doubling to 50 ms; 2 ms again while
// the fastest worker's clock moves), heartbeating, and meanwhile completes
// empty clocks up to the fastest worker's clock, so a finite staleness bound
// never has the last chunks' holders wait on it for long. A request the
// worker must carry on a CLOCK (hooks.want_clock: a stop's checkpoint clock)
// is sent on one more empty clock at once, so a stop while waiting is
// checkpointed like one while training.
//
// The network is behind ChunkFeedHooks (tests drive a ChunkService
// directly). Not thread-safe: the training thread owns it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "proto/wire.pb.h"
#include "input/csr.h"
#include "input/row_stream.h"

namespace tether {

struct ChunkFeedHooks {
  /// One CHUNK_NEXT round trip to shard 0 (JobSession::ChunkNext).
  std::function<StatusOr<DataOnDemandChunk>(const DataOnDemandChunk&)> ask;
  /// Waits `ms` milliseconds, keeping the worker alive (WorkerClient::Idle).
  std::function<Status(int ms)> idle;
  /// This worker's completed clocks, and completing one with no updates
  /// (WorkerClient::clock / Clock).
  std::function<int64_t()> clock;
  std::function<Status()> empty_clock;
  /// Called when a wait begins (the first WAIT of a request for a chunk).
  /// May be empty.
  std::function<void()> on_wait;
  /// Polled while waiting, once the clocks have caught up with the
  /// fastest worker's: true makes the feed complete one more empty clock at
  /// once, ahead of the others, because the worker has a request to carry
  /// on a CLOCK (a checkpoint clock asked of shard 0 for a stop or a timer).
  /// May be empty (never).
  std::function<bool()> want_clock;
  /// Polled while waiting; true ends the wait (stopped()). May be empty.
  /// A worker with checkpoints on answers true only once its stop
  /// checkpoint is taken (or could not be), so that a stop while waiting
  /// leaves the same way as one between minibatches.
  std::function<bool()> stop;
};

/// The order in which a worker trains the rows of chunk [begin, end) of
/// `epoch`: a permutation of begin..end−1 drawn from (seed, epoch, begin)
/// with an explicit Fisher–Yates over std::mt19937_64, so every standard
/// library and every worker that trains the chunk (a re-dealt one too)
/// sees the same order. end ≥ begin.
std::vector<int64_t> ChunkRowOrder(uint64_t seed, int64_t epoch, uint64_t begin, uint64_t end);

/// Where the rows of the chunks dealt to a worker come from. Not
/// thread-safe: the training thread owns it (through its ChunkFeed).
class ChunkSource {
 public:
  virtual ~ChunkSource() = default;
  /// "" when chunk `c` (a CHUNK reply: file, begin, end) lies within this
  /// worker's training data, else what is wrong with it.
  virtual std::string Outside(const DataOnDemandChunk& c) const = 0;
  /// Starts reading chunk `c` (of epoch c.epoch(); Outside(c) is ""), whose
  /// rows come shuffled by (seed, epoch, chunk). Errors: the reader's.
  virtual Status Begin(const DataOnDemandChunk& c, uint64_t seed) = 0;
  /// The next block of the chunk's rows into *x / *y (replaced); false,
  /// with *x / *y untouched, once the chunk is read. Errors: the reader's
  /// ("path:line: ...").
  virtual StatusOr<bool> NextBlock(CsrMatrix* x, CsrMatrix* y) = 0;
  /// The rows of the chunk begun last that have been handed out: what its
  /// completion counts once NextBlock said false.
  virtual int64_t rows() const = 0;
};

/// The whole training set in memory: a chunk is rows [begin, end) of it,
/// handed out as one block in ChunkRowOrder. `features` / `labels` are not
/// owned and outlive the source.
class InMemoryChunkSource : public ChunkSource {
 public:
  InMemoryChunkSource(const CsrMatrix* features, const CsrMatrix* labels) : features_(features), labels_(labels) {}
  std::string Outside(const DataOnDemandChunk& c) const override;
  Status Begin(const DataOnDemandChunk& c, uint64_t seed) override;
  StatusOr<bool> NextBlock(CsrMatrix* x, CsrMatrix* y) override;
  int64_t rows() const override { return handed_out_ ? static_cast<int64_t>(order_.size()) : 0; }

 private:
  const CsrMatrix* features_;
  const CsrMatrix* labels_;
  std::vector<int64_t> order_;
  bool handed_out_ = true;
};

/// Streamed files (data.streaming): a chunk is the rows whose first byte
/// lies in bytes [begin, end) of file `file` (an index into `files`, the
/// job's training files in data.train_file's order; a gzip file's chunk is
/// the whole file), read with a RowStream over that one FilePiece in blocks
/// of at most options.block_rows rows (data.shuffle_buffer_rows), each
/// block shuffled by (seed, epoch, file, begin, block). Memory: one block
/// and one read buffer, whatever the files' sizes. `prepare` (may be empty)
/// is applied to each block as read (feature scaling, targets to labels);
/// `between_buffers` (may be empty) is called between read buffers
/// (RowStream::set_between_chunks: the worker heartbeats). rows() counts
/// the rows kept (parsed, not dropped): those trained.
class StreamedChunkSource : public ChunkSource {
 public:
  StreamedChunkSource(std::vector<DataFile> files, ReadOptions read_options, RowStreamOptions options,
                      std::function<Status(Dataset*)> prepare, std::function<Status()> between_buffers);
  std::string Outside(const DataOnDemandChunk& c) const override;
  Status Begin(const DataOnDemandChunk& c, uint64_t seed) override;
  StatusOr<bool> NextBlock(CsrMatrix* x, CsrMatrix* y) override;
  int64_t rows() const override { return rows_; }
  /// The largest read buffer held so far, in bytes (the memory bound).
  size_t peak_buffer_bytes() const { return peak_buffer_bytes_; }

 private:
  std::vector<DataFile> files_;
  ReadOptions read_options_;
  RowStreamOptions options_;
  std::function<Status(Dataset*)> prepare_;
  std::function<Status()> between_buffers_;
  std::unique_ptr<RowStream> stream_;  // the chunk being read, null: none
  uint64_t block_seed_ = 0;
  int64_t epoch_ = 0;
  int64_t blocks_ = 0;
  int64_t rows_ = 0;
  size_t peak_buffer_bytes_ = 0;
};

/// The shape fields of a streamed job's CHUNK_NEXT (DataOnDemandChunk
/// file_bytes, file_gzip, chunk_bytes) for `files` and `chunk_bytes` > 0.
void SetStreamedShape(const std::vector<DataFile>& files, uint64_t chunk_bytes, DataOnDemandChunk* shape);

class ChunkFeed {
 public:
  /// `shape`: the job's shape as DataOnDemandChunk's CHUNK_NEXT fields
  /// (train_rows = features.rows, chunk_rows, epochs, seed, taper).
  /// `features` / `labels`: the whole training set, not owned, outliving
  /// the feed (an InMemoryChunkSource).
  ChunkFeed(DataOnDemandChunk shape, const CsrMatrix* features, const CsrMatrix* labels, ChunkFeedHooks hooks);
  /// Any source (owned); `shape` as it describes that source's data (for
  /// streamed files: SetStreamedShape, train_rows 0).
  ChunkFeed(DataOnDemandChunk shape, std::unique_ptr<ChunkSource> source, ChunkFeedHooks hooks);

  /// Asks for the first chunk and returns the epoch it is of: 0 at the
  /// start of a job, the epoch in progress for a worker that joins or
  /// rejoins mid-job (it skips the epochs already done), `epochs` when the
  /// job's chunks are all done, and `epochs` too when a stop ended the wait
  /// for the first chunk (stopped(): the job is not done). Call once,
  /// before Next. Errors: the hooks'.
  StatusOr<int> FirstEpoch();

  /// The next block of rows of `epoch` into *x / *y, returning true: the
  /// chunk in hand's next block, or, once it is read, the first block of
  /// the next chunk of `epoch` (the chunk in hand is completed with the
  /// rows it had, with the request for the next). In memory a chunk is one
  /// block, its rows in ChunkRowOrder. False when the epoch is over for
  /// this worker (or stopped()). Errors: the hooks' and the source's;
  /// Internal when shard 0 deals a chunk outside the training data or of
  /// an epoch already over.
  StatusOr<bool> Next(int epoch, CsrMatrix* x, CsrMatrix* y);

  /// A stop (hooks.stop) ended a wait: leave the job; the chunk in hand is
  /// not completed, and shard 0 deals it again.
  bool stopped() const { return stopped_; }
  /// Rows of this worker's chunks that shard 0 counted, by epoch (index:
  /// the 0-based epoch; skipped epochs 0).
  const std::vector<int64_t>& epoch_rows() const { return epoch_rows_; }
  uint64_t chunks_completed() const { return chunks_completed_; }
  /// Completions shard 0 refused (the chunk was taken back while this
  /// worker was declared gone): trained, not counted.
  uint64_t chunks_refused() const { return chunks_refused_; }
  /// Chunks dealt to this worker that had been dealt to a worker that left.
  uint64_t chunks_redealt() const { return chunks_redealt_; }
  /// Time spent waiting (from a WAIT reply to the answer that ended the
  /// wait, the requests between included), in seconds, and the empty clocks
  /// completed meanwhile.
  double wait_seconds() const { return wait_seconds_; }
  int64_t empty_clocks() const { return empty_clocks_; }

 private:
  // Asks (carrying the completion of current_, if any) until shard 0 deals
  // a chunk (next_), says DONE (done_) or a stop ends the wait (stopped_).
  Status Fetch();

  DataOnDemandChunk shape_;
  std::unique_ptr<ChunkSource> source_;
  ChunkFeedHooks hooks_;
  std::optional<DataOnDemandChunk> current_;  // being trained (source_ reads it), to complete
  std::optional<DataOnDemandChunk> next_;     // dealt, not begun (a later epoch's)
  bool done_ = false;
  bool stopped_ = false;
  std::vector<int64_t> epoch_rows_;
  uint64_t chunks_completed_ = 0;
  uint64_t chunks_refused_ = 0;
  uint64_t chunks_redealt_ = 0;
  double wait_seconds_ = 0;
  int64_t empty_clocks_ = 0;
};

}  // namespace tether
