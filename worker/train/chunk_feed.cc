#include "worker/train/chunk_feed.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <utility>

namespace tether {

std::vector<int64_t> ChunkRowOrder(uint64_t seed, int64_t epoch, uint64_t begin, uint64_t end) {
  std::vector<int64_t> order;
  order.reserve(end > begin ? end - begin : 0);
  for (uint64_t r = begin; r < end; ++r) order.push_back(static_cast<int64_t>(r));
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(epoch) * 1000003ull + begin);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  return order;
}

// ---- InMemoryChunkSource

std::string InMemoryChunkSource::Outside(const DataOnDemandChunk& c) const {
  if (c.end() > c.begin() && c.end() <= static_cast<uint64_t>(features_->rows) && c.file() == 0) return "";
  return "rows [" + std::to_string(c.begin()) + ", " + std::to_string(c.end()) + ") of file " +
         std::to_string(c.file()) + " are outside this worker's " + std::to_string(features_->rows) +
         " training rows";
}

Status InMemoryChunkSource::Begin(const DataOnDemandChunk& c, uint64_t seed) {
  order_ = ChunkRowOrder(seed, c.epoch(), c.begin(), c.end());
  handed_out_ = false;
  return Status::OK();
}

StatusOr<bool> InMemoryChunkSource::NextBlock(CsrMatrix* x, CsrMatrix* y) {
  if (handed_out_) return false;
  *x = GatherRows(*features_, order_);
  *y = GatherRows(*labels_, order_);
  handed_out_ = true;
  return true;
}

// ---- StreamedChunkSource

StreamedChunkSource::StreamedChunkSource(std::vector<DataFile> files, ReadOptions read_options,
                                         RowStreamOptions options, std::function<Status(Dataset*)> prepare,
                                         std::function<Status()> between_buffers)
    : files_(std::move(files)),
      read_options_(std::move(read_options)),
      options_(options),
      prepare_(std::move(prepare)),
      between_buffers_(std::move(between_buffers)) {}

std::string StreamedChunkSource::Outside(const DataOnDemandChunk& c) const {
  const std::string what = "bytes [" + std::to_string(c.begin()) + ", " + std::to_string(c.end()) +
                           ") of training file " + std::to_string(c.file() + 1);
  if (c.file() >= files_.size())
    return what + ": this worker has " + std::to_string(files_.size()) + " training file(s)";
  const DataFile& f = files_[c.file()];
  if (c.end() <= c.begin() || c.end() > f.bytes)
    return what + ": " + f.path + " has " + std::to_string(f.bytes) + " bytes";
  if (f.gzip && (c.begin() != 0 || c.end() != f.bytes))
    return what + ": " + f.path + " is gzip, read whole (" + std::to_string(f.bytes) + " bytes)";
  return "";
}

Status StreamedChunkSource::Begin(const DataOnDemandChunk& c, uint64_t seed) {
  FilePiece piece{static_cast<int>(c.file()), c.begin(), c.end()};
  stream_ = std::make_unique<RowStream>(files_, std::vector<FilePiece>{piece}, read_options_, options_);
  if (between_buffers_) stream_->set_between_chunks(between_buffers_);
  TETHER_RETURN_IF_ERROR(stream_->Start());
  block_seed_ = seed * 0x9E3779B97F4A7C15ull ^ (static_cast<uint64_t>(c.file()) + 1) * 0xC2B2AE3D27D4EB4Full ^
                c.begin() * 0x165667B19E3779F9ull;
  epoch_ = c.epoch();
  blocks_ = 0;
  rows_ = 0;
  return Status::OK();
}

StatusOr<bool> StreamedChunkSource::NextBlock(CsrMatrix* x, CsrMatrix* y) {
  if (stream_ == nullptr) return false;
  Dataset d;
  for (;;) {
    TETHER_ASSIGN_OR_RETURN(bool more, stream_->Next(&d));
    if (!more) {
      peak_buffer_bytes_ = std::max(peak_buffer_bytes_, stream_->peak_buffer_bytes());
      stream_.reset();  // the file is closed
      return false;
    }
    if (prepare_) TETHER_RETURN_IF_ERROR(prepare_(&d));
    if (d.features.rows > 0) break;  // a block of dropped rows only: read on
  }
  const std::vector<int64_t> order = ChunkRowOrder(block_seed_ + static_cast<uint64_t>(blocks_++), epoch_, 0,
                                                   static_cast<uint64_t>(d.features.rows));
  *x = GatherRows(d.features, order);
  *y = GatherRows(d.labels, order);
  rows_ += d.features.rows;
  return true;
}

void SetStreamedShape(const std::vector<DataFile>& files, uint64_t chunk_bytes, DataOnDemandChunk* shape) {
  shape->set_train_rows(0);
  shape->clear_file_bytes();
  shape->clear_file_gzip();
  for (const DataFile& f : files) {
    shape->add_file_bytes(f.bytes);
    shape->add_file_gzip(f.gzip);
  }
  shape->set_chunk_bytes(chunk_bytes);
}

// ---- ChunkFeed

ChunkFeed::ChunkFeed(DataOnDemandChunk shape, const CsrMatrix* features, const CsrMatrix* labels,
                     ChunkFeedHooks hooks)
    : ChunkFeed(std::move(shape), std::make_unique<InMemoryChunkSource>(features, labels), std::move(hooks)) {}

ChunkFeed::ChunkFeed(DataOnDemandChunk shape, std::unique_ptr<ChunkSource> source, ChunkFeedHooks hooks)
    : shape_(std::move(shape)), source_(std::move(source)), hooks_(std::move(hooks)) {
  epoch_rows_.assign(static_cast<size_t>(std::max<int64_t>(0, shape_.epochs())), 0);
}

Status ChunkFeed::Fetch() {
  int backoff_ms = 2;
  int64_t last_max_clock = -1;
  bool waited = false;
  // The wait runs from the request answered by the first WAIT to the
  // answer that ends it, the requests between included: time the worker
  // would have spent training (the adaptive batch report's idle_s).
  std::chrono::steady_clock::time_point wait_start;
  while (!next_ && !done_ && !stopped_) {
    DataOnDemandChunk req = shape_;
    if (current_) {
      req.set_completed_id(current_->id());
      req.set_completed_rows(source_->rows());
    }
    const auto asked = std::chrono::steady_clock::now();
    TETHER_ASSIGN_OR_RETURN(DataOnDemandChunk reply, hooks_.ask(req));
    if (current_) {
      if (reply.completion_counted()) {
        ++chunks_completed_;
        epoch_rows_.at(static_cast<size_t>(current_->epoch())) += req.completed_rows();
      } else {
        ++chunks_refused_;
      }
      current_.reset();
    }
    switch (reply.kind()) {
      case DataOnDemandChunk::CHUNK:
        if (reply.epoch() < 0 || reply.epoch() >= shape_.epochs())
          return Status::Internal("shard 0 dealt chunk " + std::to_string(reply.id()) + " of epoch " +
                                  std::to_string(reply.epoch()) + ", outside this worker's " +
                                  std::to_string(shape_.epochs()) + " epochs");
        if (const std::string why = source_->Outside(reply); !why.empty())
          return Status::Internal("shard 0 dealt chunk " + std::to_string(reply.id()) + " of epoch " +
                                  std::to_string(reply.epoch() + 1) + ": " + why);
        chunks_redealt_ += reply.redealt() ? 1 : 0;
        next_ = std::move(reply);
        break;
      case DataOnDemandChunk::DONE:
        done_ = true;
        break;
      case DataOnDemandChunk::WAIT: {
        if (!waited) {
          wait_start = asked;
          if (hooks_.on_wait) hooks_.on_wait();
        }
        waited = true;
        while (hooks_.clock() < reply.max_clock()) {
          TETHER_RETURN_IF_ERROR(hooks_.empty_clock());
          ++empty_clocks_;
        }
        // While the others still clock (under a bound their next read may
        // wait on this worker's clock), poll at the shortest interval.
        if (reply.max_clock() > last_max_clock) backoff_ms = 2;
        last_max_clock = reply.max_clock();
        // A request waiting to go out on a CLOCK (a stop's or a timer's
        // checkpoint clock) cannot wait for the others to move: it goes on
        // one more empty clock now.
        if (hooks_.want_clock && hooks_.want_clock()) {
          TETHER_RETURN_IF_ERROR(hooks_.empty_clock());
          ++empty_clocks_;
        }
        TETHER_RETURN_IF_ERROR(hooks_.idle(backoff_ms));
        backoff_ms = std::min(50, 2 * backoff_ms);
        if (hooks_.stop && hooks_.stop()) stopped_ = true;
        break;
      }
      default:
        return Status::Internal("shard 0 answered CHUNK_NEXT with unknown kind " + std::to_string(reply.kind()));
    }
  }
  if (waited) wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  return Status::OK();
}

StatusOr<int> ChunkFeed::FirstEpoch() {
  TETHER_RETURN_IF_ERROR(Fetch());
  if (next_) return static_cast<int>(next_->epoch());
  return static_cast<int>(shape_.epochs());
}

StatusOr<bool> ChunkFeed::Next(int epoch, CsrMatrix* x, CsrMatrix* y) {
  for (;;) {
    if (current_) {  // the chunk in hand first
      TETHER_ASSIGN_OR_RETURN(bool more, source_->NextBlock(x, y));
      if (more) return true;
    }
    // Completes the chunk in hand (with the rows it had), then the next.
    TETHER_RETURN_IF_ERROR(Fetch());
    if (!next_ || next_->epoch() > epoch) return false;  // done, stopped, or a later epoch's: kept
    if (next_->epoch() < epoch)
      return Status::Internal("shard 0 dealt a chunk of epoch " + std::to_string(next_->epoch() + 1) +
                              " while this worker is in epoch " + std::to_string(epoch + 1));
    current_ = std::move(next_);
    next_.reset();
    TETHER_RETURN_IF_ERROR(source_->Begin(*current_, shape_.seed()));
    // A chunk may hold no row (a byte range inside one long line): it is
    // completed with 0 rows by the next turn.
  }
}

}  // namespace tether
