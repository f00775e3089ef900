#include "worker/chunk_feed.h"

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

ChunkFeed::ChunkFeed(DataOnDemandChunk shape, const CsrMatrix* features, const CsrMatrix* labels,
                     ChunkFeedHooks hooks)
    : shape_(std::move(shape)), features_(features), labels_(labels), hooks_(std::move(hooks)) {
  epoch_rows_.assign(static_cast<size_t>(std::max<int64_t>(0, shape_.epochs())), 0);
}

Status ChunkFeed::Fetch() {
  int backoff_ms = 2;
  int64_t last_max_clock = -1;
  while (!next_ && !done_ && !stopped_) {
    DataOnDemandChunk req = shape_;
    if (current_) {
      req.set_completed_id(current_->id());
      req.set_completed_rows(static_cast<int64_t>(current_->end() - current_->begin()));
    }
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
        if (reply.end() <= reply.begin() || reply.end() > static_cast<uint64_t>(features_->rows) ||
            reply.epoch() < 0 || reply.epoch() >= shape_.epochs())
          return Status::Internal("shard 0 dealt chunk " + std::to_string(reply.id()) + " (rows [" +
                                  std::to_string(reply.begin()) + ", " + std::to_string(reply.end()) + ") of epoch " +
                                  std::to_string(reply.epoch()) + ") outside this worker's " +
                                  std::to_string(features_->rows) + " training rows and " +
                                  std::to_string(shape_.epochs()) + " epochs");
        chunks_redealt_ += reply.redealt() ? 1 : 0;
        next_ = std::move(reply);
        break;
      case DataOnDemandChunk::DONE:
        done_ = true;
        break;
      case DataOnDemandChunk::WAIT: {
        const auto t0 = std::chrono::steady_clock::now();
        while (hooks_.clock() < reply.max_clock()) {
          TETHER_RETURN_IF_ERROR(hooks_.empty_clock());
          ++empty_clocks_;
        }
        // While the others still clock (under a bound their next read may
        // wait on this worker's clock), poll at the shortest interval.
        if (reply.max_clock() > last_max_clock) backoff_ms = 2;
        last_max_clock = reply.max_clock();
        TETHER_RETURN_IF_ERROR(hooks_.idle(backoff_ms));
        backoff_ms = std::min(50, 2 * backoff_ms);
        wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (hooks_.stop && hooks_.stop()) stopped_ = true;
        break;
      }
      default:
        return Status::Internal("shard 0 answered CHUNK_NEXT with unknown kind " + std::to_string(reply.kind()));
    }
  }
  return Status::OK();
}

StatusOr<int> ChunkFeed::FirstEpoch() {
  TETHER_RETURN_IF_ERROR(Fetch());
  if (next_) return static_cast<int>(next_->epoch());
  return static_cast<int>(shape_.epochs());
}

StatusOr<bool> ChunkFeed::Next(int epoch, CsrMatrix* x, CsrMatrix* y) {
  TETHER_RETURN_IF_ERROR(Fetch());
  if (!next_ || next_->epoch() > epoch) return false;  // done, stopped, or a later epoch's: kept
  if (next_->epoch() < epoch)
    return Status::Internal("shard 0 dealt a chunk of epoch " + std::to_string(next_->epoch() + 1) +
                            " while this worker is in epoch " + std::to_string(epoch + 1));
  current_ = std::move(next_);
  next_.reset();
  const std::vector<int64_t> order = ChunkRowOrder(shape_.seed(), current_->epoch(), current_->begin(), current_->end());
  *x = GatherRows(*features_, order);
  *y = GatherRows(*labels_, order);
  return true;
}

}  // namespace tether
