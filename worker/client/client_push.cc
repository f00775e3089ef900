// WorkerClient's push path (worker/client/client.h): row pushes (copied,
// gathered from the caller's rows, or sent by reference to PushValues),
// 16-bit encoding with error feedback (PushEncoder), the staleness scaling
// of a push, and dense pushes. The rest of the class is client.cc.
#include <algorithm>
#include <cstring>

#include <glog/logging.h>

#include "core/partition.h"
#include "core/wire_codec.h"
#include "worker/client/client.h"
#include "worker/client/client_frames.h"
#include "worker/client/local_replica.h"
#include "worker/client/push_writer.h"

namespace tether {
namespace {

// Frees a SharedSlice: drops its reference to the whole buffer (on
// ZeroMQ's I/O thread for tcp:// and ipc://; the count is atomic).
void ReleaseSlice(void* /*data*/, void* hint) { delete static_cast<std::shared_ptr<zmq::message_t>*>(hint); }

// A frame of `bytes` bytes at `offset` of `buffer`'s data, without a copy:
// it keeps the buffer alive until ZeroMQ frees the frame.
zmq::message_t SharedSlice(const std::shared_ptr<zmq::message_t>& buffer, size_t offset, size_t bytes) {
  auto* hint = new std::shared_ptr<zmq::message_t>(buffer);
  return zmq::message_t(static_cast<char*>(buffer->data()) + offset, bytes, &ReleaseSlice, hint);
}

// The inverse: src + pos[i]·dim → row i of `rows` (a shard's push values).
void GatherPushRows(const float* src, const uint32_t* pos, size_t n, uint32_t dim, float* rows) {
  if (dim == 1) {
    for (size_t i = 0; i < n; ++i) rows[i] = src[pos[i]];
    return;
  }
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && pos[j] == pos[j - 1] + 1) ++j;
    std::memcpy(rows + i * dim, src + size_t{pos[i]} * dim, (j - i) * dim * sizeof(float));
    i = j;
  }
}

// Whether a 16-bit values frame of `count` values is written while it is
// sent: only one of several chunks (a smaller one is written at once, with
// no writer to allocate).
bool WrittenWhileSent(uint64_t count, WireEncoding wire) { return count * WireBytesPerValue(wire) > kShardFrameBytes; }

// Sets m->values to `writer`'s frame, written while it is sent
// (m->write_values); returns the writer, to live until the send and then
// Finish().
template <typename Writer>
std::unique_ptr<Writer> WriteWhileSent(std::unique_ptr<Writer> writer, Message* m) {
  m->values.copy(writer->frame());
  m->write_values = [w = writer.get()](size_t end) { w->WriteThrough(end); };
  return writer;
}

}  // namespace

void WorkerClient::ScalePush(Message* m, bool values_scaled) const {
  if (push_weight_ != 1.0f) m->header.mutable_push()->set_push_weight(push_weight_);
  if (gradient_scale_ == 1.0f || values_scaled) return;
  // A frame under 34 bytes lives inside the zmq::message_t and may be
  // unaligned: each float goes through memcpy.
  auto* bytes = static_cast<unsigned char*>(m->values.data());
  for (uint64_t i = 0; i < m->header.num_values(); ++i) {
    float v;
    std::memcpy(&v, bytes + i * sizeof(float), sizeof(float));
    v *= gradient_scale_;
    std::memcpy(bytes + i * sizeof(float), &v, sizeof(float));
  }
}

RequestHandle WorkerClient::PushRows(uint32_t table, const std::vector<uint64_t>& keys, const float* grads) {
  if (replica_ != nullptr && !replica_paused_) return replica_->PushRows(table, keys, grads);
  return PushRowsAs(PUSH, table, keys, grads);
}

RequestHandle WorkerClient::PushRowsAt(uint32_t table, const std::vector<uint64_t>& keys, const uint32_t* in_rows,
                                       const float* grads) {
  if (replica_ != nullptr && !replica_paused_) {
    // The replica takes contiguous rows.
    const uint32_t dim = options_.tables[table].dim();
    at_scratch_.resize(keys.size() * size_t{dim});
    GatherPushRows(grads, in_rows, keys.size(), dim, at_scratch_.data());
    return replica_->PushRows(table, keys, at_scratch_.data());
  }
  return PushRowsAs(PUSH, table, keys, grads, in_rows);
}

PushValues WorkerClient::NewPushValues(size_t num_floats) {
  PushValues v;
  v.frame_ = std::make_shared<zmq::message_t>(channel_.frame_pool().Take(num_floats * sizeof(float)));
  v.size_ = num_floats;
  return v;
}

RequestHandle WorkerClient::PushRows(uint32_t table, const std::vector<uint64_t>& keys, const PushValues& values) {
  const uint64_t need = uint64_t{keys.size()} * options_.tables[table].dim();
  if (values.size() < need || (need > 0 && values.data() == nullptr)) {
    RequestHandle failed = DoneRequest();
    channel_.Fail(failed, Status::InvalidArgument("PushRows: " + std::to_string(keys.size()) + " keys of table " +
                                                  std::to_string(table) + " need " + std::to_string(need) +
                                                  " values, the PushValues holds " + std::to_string(values.size())));
    return failed;
  }
  if (replica_ != nullptr && !replica_paused_) return replica_->PushRows(table, keys, values.data());
  return PushRowsAs(PUSH, table, keys, values.data(), nullptr, &values);
}

RequestHandle WorkerClient::PushRows(uint32_t table, const FixedKeys& keys, const PushValues& values) {
  const FixedKeysInUse in_use(&fixed_keys_, keys.keys_);
  return PushRows(table, *keys.keys_, values);
}

std::unique_ptr<PushRowWriter> WorkerClient::SetPushRowValues(Message* m, uint32_t table, int s, size_t c0,
                                                              size_t c1, const uint64_t* ks, bool whole,
                                                              const float* grads, const uint32_t* in_rows,
                                                              const PushValues* shared, bool delta,
                                                              const KeyListCache::List& list) {
  const size_t n = c1 - c0;
  const uint32_t dim = options_.tables[table].dim();
  // The rows of this message in `grads`: contiguous from c0 (one shard, no
  // in_rows), else split_pos_ (several shards), then through in_rows
  // (PushRowsAt).
  const uint32_t* rows = nullptr;
  if (!whole || in_rows != nullptr) {
    rows = whole ? in_rows + c0 : split_pos_[s].data() + c0;
    if (!whole && in_rows != nullptr) {
      at_rows_.resize(n);
      for (size_t i = 0; i < n; ++i) at_rows_[i] = in_rows[split_pos_[s][c0 + i]];
      rows = at_rows_.data();
    }
  }
  if (!delta && push_encoder_.narrows(table)) {
    // Gathered, scaled, corrected by the rows' residuals and rounded in
    // one pass (a model delta stays float32); a frame of several chunks
    // chunk by chunk as it is sent, the next encoded while the last leaves.
    const float* base = rows == nullptr ? grads + c0 * dim : grads;
    if (!WrittenWhileSent(n * dim, push_encoder_.wire(table))) {
      m->values = push_encoder_.EncodeRows(table, ks, n, base, rows, gradient_scale_, &channel_.frame_pool(), list);
      return nullptr;
    }
    return WriteWhileSent(std::make_unique<PushRowWriter>(&push_encoder_, table, ks, n, base, rows, gradient_scale_,
                                                          &channel_.frame_pool(), list),
                          m);
  }
  if (rows == nullptr && shared != nullptr && gradient_scale_ == 1.0f && n > 0) {
    // A block of the caller's buffer, by reference: the message holds a
    // reference to the buffer until ZeroMQ frees it (ScalePush leaves the
    // values alone at scale 1).
    stats_.push_bytes_shared += n * dim * sizeof(float);
    m->values = SharedSlice(shared->frame_, c0 * dim * sizeof(float), n * dim * sizeof(float));
  } else if (rows == nullptr) {
    // The gradients are copied now (the caller may reuse `grads` at once).
    m->values = CopyFrame(channel_.frame_pool(), grads + c0 * dim, n * dim * sizeof(float));
  } else {
    m->values = channel_.frame_pool().Take(n * dim * sizeof(float));
    GatherPushRows(grads, rows, n, dim, static_cast<float*>(m->values.data()));
  }
  return nullptr;
}

RequestHandle WorkerClient::PushRowsAs(MessageType type, uint32_t table, const std::vector<uint64_t>& keys,
                                       const float* grads, const uint32_t* in_rows, const PushValues* shared) {
  const bool delta = type == PUSH_DELTA;
  RequestHandle request = channel_.NewRequest(/*sticky=*/true);
  const uint32_t dim = options_.tables[table].dim();
  const bool narrow = !delta && push_encoder_.narrows(table);
  // One shard: the keys and gradients go as they are, in contiguous blocks.
  const bool whole = num_shards_ == 1;
  ForEachRowMessage(keys, whole, table, [&](int s, size_t c0, size_t c1, const uint64_t* ks) {
    const size_t n = c1 - c0;
    Message m;
    m.header.set_type(type);
    m.header.set_table_id(table);
    m.header.set_num_keys(n);
    m.header.set_value_dim(dim);
    m.header.set_num_values(n * dim);
    if (!delta) m.header.mutable_push()->set_base_version(cache_.PushVersion(table, s));
    if (narrow) m.header.set_value_encoding(push_encoder_.wire(table));
    const uint64_t tag = NewShardRequest(delta ? PUSH_DELTA_REPLY : PUSH_REPLY, s, table);
    // A model delta always carries its keys (PUSH_DELTA names no key list).
    // The keys first: a list named tells the encoder they were compared.
    KeyListCache::List list;
    if (delta)
      m.keys = CopyFrame(channel_.frame_pool(), ks, n * sizeof(uint64_t));
    else
      list = SetRequestKeys(s, table, ks, n, &m, tag);
    const std::unique_ptr<PushRowWriter> writer =
        SetPushRowValues(&m, table, s, c0, c1, ks, whole, grads, in_rows, shared, delta, list);
    if (!delta) ScalePush(&m, narrow);  // a model delta is the replica's, never rescaled
    ShardRequest& r = requests_[tag];
    r.dim = dim;
    r.updates = n;
    if (r.key_list != 0) {
      // Kept (shared, not copied) for a resend with the keys.
      r.resend_values.copy(m.values);
      r.push_version = m.header.push().base_version();
    }
    if (!delta && cache_.StartPushRows(table, ks, n)) {
      m.header.mutable_push()->set_want_values(true);
      r.want_values = true;
      r.keys.assign(ks, ks + n);
    }
    ++stats_.pushes;
    stats_.rows_pushed += n;
    SendPart(s, &m, request, tag);
    if (writer) writer->Finish();  // the rows a send that failed early left unwritten
  });
  return request;
}

RequestHandle WorkerClient::PushDense(uint32_t table, const float* grad) {
  if (replica_ != nullptr && !replica_paused_) return replica_->PushDense(table, grad);
  return PushDenseAs(PUSH, table, grad);
}

RequestHandle WorkerClient::PushDenseAs(MessageType type, uint32_t table, const float* grad) {
  const bool delta = type == PUSH_DELTA;
  RequestHandle request = channel_.NewRequest(/*sticky=*/true);
  const uint64_t size = options_.tables[table].size();
  for (int s = 0; s < num_shards_; ++s) {
    auto [b, e] = DenseRange(size, s, num_shards_);
    if (b == e) continue;
    Message m;
    m.header.set_type(type);
    m.header.set_table_id(table);
    m.header.set_num_values(e - b);
    if (!delta) m.header.mutable_push()->set_base_version(cache_.PushVersion(table, s));
    const bool narrow = !delta && push_encoder_.narrows(table);
    std::unique_ptr<PushDenseWriter> writer;
    if (narrow) {
      m.header.set_value_encoding(push_encoder_.wire(table));
      if (WrittenWhileSent(e - b, push_encoder_.wire(table)))
        writer = WriteWhileSent(std::make_unique<PushDenseWriter>(&push_encoder_, table, b, e, grad, gradient_scale_,
                                                                  &channel_.frame_pool()),
                                &m);
      else
        m.values = push_encoder_.EncodeDense(table, b, e, grad, gradient_scale_, &channel_.frame_pool());
    } else {
      m.values = CopyFrame(channel_.frame_pool(), grad + b, (e - b) * sizeof(float));
    }
    if (!delta) ScalePush(&m, narrow);  // a model delta is the replica's, never rescaled
    const uint64_t tag = NewShardRequest(delta ? PUSH_DELTA_REPLY : PUSH_REPLY, s, table);
    ShardRequest& r = requests_[tag];
    r.dense = true;
    r.updates = 1;
    if (!delta && cache_.StartPushDense(table, s)) {
      m.header.mutable_push()->set_want_values(true);
      r.want_values = true;
    }
    ++stats_.pushes;
    SendPart(s, &m, request, tag);
    if (writer) writer->Finish();  // the values a send that failed early left unwritten
  }
  return request;
}

}  // namespace tether
