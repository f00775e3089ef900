#include "worker/train/row_source.h"

#include <utility>

#include <glog/logging.h>

#include "core/config.h"
#include "worker/sampling.h"
#include "worker/trainer.h"

namespace tether {
namespace {

std::string Who(int rank) { return "[worker " + std::to_string(rank) + "] "; }

// This rank's partition in memory.
class StaticSplitSource : public RowSource {
 public:
  StaticSplitSource(const JobConfig& config, int rank, Dataset rows, Dataset dealt, std::vector<int64_t> dealt_lines)
      : seed_(config.train().seed()),
        rank_(rank),
        rows_(std::move(rows)),
        dealt_(std::move(dealt)),
        dealt_lines_(std::move(dealt_lines)) {}

  Status StartEpoch(int epoch, int64_t first_row) override {
    // The rows a resume dealt are the rest of the epoch it resumes, the
    // run's first.
    dealt_now_ = first_epoch_ && !dealt_lines_.empty();
    first_row_ = first_epoch_ ? first_row : 0;
    first_epoch_ = false;
    epoch_ = epoch;
    block_pending_ = true;
    return Status::OK();
  }

  StatusOr<bool> NextBlock(CsrMatrix* x, CsrMatrix* y, int64_t* begin) override {
    if (!block_pending_) return false;
    block_pending_ = false;
    *begin = first_row_;
    if (dealt_now_) {
      *x = std::move(dealt_.features);  // trained once
      *y = std::move(dealt_.labels);
      return true;
    }
    // A fixed permutation per (seed, rank, epoch): runs are reproducible.
    EpochOrder(seed_, rank_, epoch_, rows_.features.rows, &order_);
    *x = GatherRows(rows_.features, order_);
    *y = GatherRows(rows_.labels, order_);
    lines_.resize(order_.size());
    for (size_t i = 0; i < order_.size(); ++i)
      lines_[i] = static_cast<size_t>(order_[i]) < rows_.source_lines.size() ? rows_.source_lines[order_[i]]
                                                                             : order_[i] + 1;
    return true;
  }

  const std::vector<int64_t>& epoch_lines() const override { return dealt_now_ ? dealt_lines_ : lines_; }
  const std::vector<int64_t>* dealt_lines() const override { return dealt_now_ ? &dealt_lines_ : nullptr; }

 private:
  uint64_t seed_;
  int rank_;
  Dataset rows_;
  Dataset dealt_;
  std::vector<int64_t> dealt_lines_;
  bool first_epoch_ = true;
  bool dealt_now_ = false;
  bool block_pending_ = false;
  int64_t first_row_ = 0;
  int epoch_ = 0;
  std::vector<int64_t> order_;
  std::vector<int64_t> lines_;
};

// data.streaming: this rank's share read again every epoch.
class StreamedSource : public RowSource {
 public:
  StreamedSource(const JobConfig& config, int rank, std::unique_ptr<RowStream> stream)
      : config_(config), rank_(rank), stream_(std::move(stream)) {}

  Status StartEpoch(int epoch, int64_t /*first_row*/) override {
    epoch_ = epoch;
    block_no_ = 0;
    return StartStreamEpoch(config_, rank_, epoch, stream_.get());
  }

  StatusOr<bool> NextBlock(CsrMatrix* x, CsrMatrix* y, int64_t* begin) override {
    *begin = 0;
    return NextStreamBlock(config_, rank_, epoch_, stream_.get(), &block_no_, x, y);
  }

  const std::vector<int64_t>& epoch_lines() const override { return none_; }

  void EndEpoch(int epoch, int64_t trained, TrainReport* report) override {
    // No worker knows its share's size before reading it once.
    if (first_epoch_) report->train_rows = trained;
    first_epoch_ = false;
    std::string per_piece;
    for (size_t i = 0; i < stream_->pieces().size(); ++i) {
      const FilePiece& p = stream_->pieces()[i];
      const DataFile& f = stream_->files()[static_cast<size_t>(p.file)];
      per_piece += (i > 0 ? ", " : "") + f.path +
                   (p.begin > 0 || p.end < f.bytes ? "[" + std::to_string(p.begin) + "," + std::to_string(p.end) + ")"
                                                   : "") +
                   ": " + std::to_string(stream_->piece_rows_read()[i]);
    }
    LOG(INFO) << Who(rank_) << "epoch " << epoch + 1 << " streamed " << stream_->rows_read() << " rows (" << trained
              << " trained) from " << stream_->pieces().size() << " piece(s); rows per piece: " << per_piece;
  }

 private:
  const JobConfig& config_;
  int rank_;
  std::unique_ptr<RowStream> stream_;
  int epoch_ = 0;
  int64_t block_no_ = 0;
  bool first_epoch_ = true;
  std::vector<int64_t> none_;
};

// Data on demand: chunks dealt by shard 0 (ChunkFeed).
class OnDemandSource : public RowSource {
 public:
  OnDemandSource(int rank, TrainingData data) : rank_(rank), data_(std::move(data)) {}

  // The feed, over the rows this source holds (in memory, the feed points
  // into data_) or the files.
  Status MakeFeed(const JobConfig& config, RowSourceHooks hooks) {
    DataOnDemandChunk shape;
    shape.set_train_rows(static_cast<uint64_t>(data_.rows.features.rows));
    shape.set_chunk_rows(static_cast<uint64_t>(EffectiveChunkRows(config.train())));
    shape.set_epochs(config.train().epochs());
    shape.set_seed(config.train().seed());
    shape.set_taper(config.train().chunk_taper());
    if (data_.mode != TrainingData::Mode::kOnDemandStreamed) {
      what_ = std::to_string(data_.rows.features.rows) + " training rows in chunks of " +
              std::to_string(shape.chunk_rows()) + " rows";
      feed_ = std::make_unique<ChunkFeed>(shape, &data_.rows.features, &data_.rows.labels, std::move(hooks.feed));
      return Status::OK();
    }
    TETHER_ASSIGN_OR_RETURN(const uint64_t chunk_bytes, ChunkBytesFor(config, data_.files));
    SetStreamedShape(data_.files, chunk_bytes, &shape);
    RowStreamOptions so;
    so.block_rows = config.data().shuffle_buffer_rows();
    feed_ = std::make_unique<ChunkFeed>(
        shape,
        std::make_unique<StreamedChunkSource>(
            data_.files, data_.read_options, so, [&config](Dataset* d) { return PrepareStreamBlock(config, d); },
            std::move(hooks.idle)),
        std::move(hooks.feed));
    what_ = std::to_string(data_.files.size()) + " streamed training file(s) in chunks of " +
            std::to_string(chunk_bytes) + " bytes (a gzip file whole)" +
            (config.train().chunk_bytes() > 0 ? " (train.chunk_bytes)" : " (chunk_rows x bytes per row)");
    return Status::OK();
  }

  StatusOr<int> FirstEpoch(int /*planned*/) override {
    TETHER_ASSIGN_OR_RETURN(const int first, feed_->FirstEpoch());
    if (!feed_->stopped())
      LOG(INFO) << Who(rank_) << "data on demand: " << what_ << " from shard 0"
                << (first > 0 ? ", joining at epoch " + std::to_string(first + 1) : std::string());
    return first;
  }

  Status StartEpoch(int epoch, int64_t /*first_row*/) override {
    epoch_ = epoch;
    return Status::OK();
  }

  StatusOr<bool> NextBlock(CsrMatrix* x, CsrMatrix* y, int64_t* begin) override {
    *begin = 0;
    return feed_->Next(epoch_, x, y);
  }

  bool stopped() const override { return feed_->stopped(); }
  double wait_seconds() const override { return feed_->wait_seconds(); }
  const std::vector<int64_t>& epoch_lines() const override { return none_; }

  void EndEpoch(int epoch, int64_t trained, TrainReport* /*report*/) override {
    LOG(INFO) << Who(rank_) << "epoch " << epoch + 1 << " on demand: " << feed_->epoch_rows()[static_cast<size_t>(epoch)]
              << " rows counted (" << trained << " trained), " << feed_->chunks_completed()
              << " chunks completed so far, " << feed_->chunks_redealt() << " of them re-dealt, "
              << feed_->wait_seconds() << " s waiting for the epoch's last chunks";
  }

  bool dealt_by_shard0() const override { return true; }

  void AddStats(WorkerStats* mine, std::vector<int64_t>* epoch_rows) const override {
    // The rows of the chunks shard 0 counted, by epoch.
    *epoch_rows = feed_->epoch_rows();
    mine->set_chunks_completed(feed_->chunks_completed());
    mine->set_chunks_refused(feed_->chunks_refused());
  }

 private:
  int rank_;
  TrainingData data_;
  std::unique_ptr<ChunkFeed> feed_;
  std::string what_;
  int epoch_ = 0;
  std::vector<int64_t> none_;
};

}  // namespace

StatusOr<std::unique_ptr<RowSource>> MakeRowSource(const JobConfig& config, int rank, TrainingData data,
                                                   Dataset dealt, std::vector<int64_t> dealt_lines,
                                                   RowSourceHooks hooks) {
  switch (data.mode) {
    case TrainingData::Mode::kStaticSplit:
      return std::unique_ptr<RowSource>(
          new StaticSplitSource(config, rank, std::move(data.rows), std::move(dealt), std::move(dealt_lines)));
    case TrainingData::Mode::kStreamed:
      return std::unique_ptr<RowSource>(new StreamedSource(config, rank, std::move(data.stream)));
    case TrainingData::Mode::kOnDemand:
    case TrainingData::Mode::kOnDemandStreamed:
    {
      auto source = std::make_unique<OnDemandSource>(rank, std::move(data));
      TETHER_RETURN_IF_ERROR(source->MakeFeed(config, std::move(hooks)));
      return std::unique_ptr<RowSource>(std::move(source));
    }
  }
  return Status::Internal("unknown data mode");
}

}  // namespace tether
