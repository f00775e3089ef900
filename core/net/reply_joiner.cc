#include "core/net/reply_joiner.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "core/net/chunk_wire.h"

namespace tether {

void ReplyJoiner::Reset() {
  active_ = false;
  skipping_ = false;
  values_started_ = false;
  placed_ = nullptr;
  filled_ = 0;
  header_.clear();
  keys_.rebuild(size_t{0});
  values_.rebuild(size_t{0});
}

Status ReplyJoiner::Recv(zmq::socket_t& socket, Message* m) {
  if (!cut_.ok()) return std::exchange(cut_, Status::OK());
  std::vector<zmq::message_t> frames;
  while (true) {
    try {
      if (!ReadFrames(socket, &frames)) return Status::Unavailable("no message ready");
    } catch (const zmq::error_t& e) {
      return Status::IOError("receive from " + server_ + ": " + e.what());
    }
    bool complete = false;
    const Status st = Take(&frames, m, &complete);
    if (complete || !st.ok()) return st;
  }
}

Status ReplyJoiner::Take(std::vector<zmq::message_t>* frames, Message* m, bool* complete) {
  *complete = false;
  try {
    return TakeFrames(frames, m, complete);
  } catch (const std::bad_alloc&) {
    const uint64_t bytes = total();
    Reset();
    skipping_ = true;
    return Status::ResourceExhausted("from " + server_ + ": no memory for a chunked reply of " + std::to_string(bytes) +
                                     " bytes");
  }
}

Status ReplyJoiner::TakeFrames(std::vector<zmq::message_t>* frames, Message* m, bool* complete) {
  uint32_t h = 0;
  uint64_t k = 0, v = 0;
  const ChunkKind kind =
      frames->size() == 2 ? ParseChunkTag((*frames)[0].data(), (*frames)[0].size(), &h, &k, &v) : ChunkKind::kNone;
  if (kind == ChunkKind::kNone) {
    if (active_)
      cut_ = Status::DataLoss("from " + server_ + ": a chunked reply of " + std::to_string(total()) + " bytes ended after " +
                              std::to_string(filled_) + " (another message followed)");
    Reset();
    *complete = true;
    const Status st = DecodeMessage(frames, m, nullptr);
    return st.ok() ? st : Status::DataLoss("from " + server_ + ": " + st.message());
  }
  const zmq::message_t& payload = (*frames)[1];
  chunk_bytes_ += payload.size();
  if (kind == ChunkKind::kMore && !active_) {
    if (skipping_) return Status::OK();  // the rest of a stream refused before
    skipping_ = true;
    return Status::DataLoss("from " + server_ + ": a chunk of " + std::to_string(payload.size()) +
                            " bytes continues no reply (no lead chunk before it)");
  }
  if (kind == ChunkKind::kLead) TETHER_RETURN_IF_ERROR(StartReply((*frames)[0]));
  if (payload.size() > total() - filled_) {
    const uint64_t announced = total();
    Reset();
    skipping_ = true;
    return Status::DataLoss("from " + server_ + ": a chunked reply's chunks carry more than the " +
                            std::to_string(announced) + " bytes its lead chunk announced");
  }
  Fill(static_cast<const char*>(payload.data()), payload.size());
  if (filled_ == total()) {
    *complete = true;
    return Finish(m);
  }
  // A new lead that cut a stream short: the new reply is kept, the cut
  // one reported now.
  return std::exchange(cut_, Status::OK());
}

Status ReplyJoiner::StartReply(const zmq::message_t& tag) {
  uint32_t h = 0;
  uint64_t k = 0, v = 0;
  ParseChunkTag(tag.data(), tag.size(), &h, &k, &v);
  if (active_)
    cut_ = Status::DataLoss("from " + server_ + ": a chunked reply of " + std::to_string(total()) + " bytes ended after " +
                            std::to_string(filled_) + " (a new one began)");
  Reset();
  if (h > kMaxHeaderBytes || k > max_frame_bytes_ || v > max_frame_bytes_) {
    skipping_ = true;
    return Status::DataLoss("from " + server_ + ": a chunked reply announces a header of " + std::to_string(h) +
                            " bytes and frames of " + std::to_string(k) + " and " + std::to_string(v) +
                            " bytes: above the limits (" + std::to_string(kMaxHeaderBytes) + ", " +
                            std::to_string(max_frame_bytes_) + ")");
  }
  header_.reserve(h);
  keys_.rebuild(k);
  active_ = true;
  header_bytes_ = h;
  keys_bytes_ = k;
  values_bytes_ = v;
  return Status::OK();
}

void ReplyJoiner::Fill(const char* data, uint64_t n) {
  while (n > 0) {
    uint64_t at = filled_, take = 0;
    if (at < header_bytes_) {
      take = std::min<uint64_t>(n, header_bytes_ - at);
      header_.append(data, take);
    } else if ((at -= header_bytes_) < keys_bytes_) {
      take = std::min<uint64_t>(n, keys_bytes_ - at);
      std::memcpy(static_cast<char*>(keys_.data()) + at, data, take);
    } else {
      at -= keys_bytes_;
      take = std::min<uint64_t>(n, values_bytes_ - at);
      if (!values_started_) StartValues();
      std::memcpy((placed_ != nullptr ? placed_ : static_cast<char*>(values_.data())) + at, data, take);
    }
    filled_ += take;
    data += take;
    n -= take;
  }
}

void ReplyJoiner::StartValues() {
  values_started_ = true;
  MessageHeader h;
  if (place_ && h.ParseFromString(header_) && h.type() == PULL_REPLY && h.value_encoding() == FP32 &&
      values_bytes_ % sizeof(float) == 0 && h.num_values() == values_bytes_ / sizeof(float))
    placed_ = place_(h, values_bytes_);
  // Allocated once the header said what the values are (bounded by the
  // lead's check; std::bad_alloc is caught in Take).
  if (placed_ == nullptr) values_ = pool_ != nullptr ? pool_->Take(values_bytes_) : zmq::message_t(values_bytes_);
}

Status ReplyJoiner::Finish(Message* m) {
  m->header.Clear();
  m->first_non_finite = Message::kNotScanned;
  m->received_values_bytes = 0;
  m->value_pieces.clear();
  const bool parsed = m->header.ParseFromString(header_);
  const size_t header_bytes = header_.size();
  m->keys = std::move(keys_);
  const bool placed = placed_ != nullptr;
  m->values = placed ? zmq::message_t() : std::move(values_);
  m->placed_values_bytes = placed ? values_bytes_ : 0;
  Reset();
  if (!parsed) {
    m->header.Clear();
    m->keys.rebuild(size_t{0});
    m->values.rebuild(size_t{0});
    return Status::DataLoss("from " + server_ + ": a chunked reply's header does not parse (" +
                            std::to_string(header_bytes) + " bytes)");
  }
  if (placed) {
    // The values' size was checked against the header before they were
    // placed (StartValues); the keys as ValidateFrames checks them.
    if (m->keys.size() != m->header.num_keys() * sizeof(uint64_t))
      return Status::DataLoss("message PULL_REPLY from " + server_ + ": keys frame has " +
                              std::to_string(m->keys.size()) + " bytes but the header says " +
                              std::to_string(m->header.num_keys()) + " keys");
    return Status::OK();
  }
  return ValidateFrames(*m, server_);
}

}  // namespace tether
