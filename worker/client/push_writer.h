// PushRowWriter, PushDenseWriter: one 16-bit push's values frame, written
// while it is sent (a row table's rows; a dense table's range).
//
// Why: PushEncoder::EncodeRows gathers, scales, corrects (error feedback)
// and rounds a push's rows in one pass before the message is sent, so for a
// push larger than one chunk (kShardFrameBytes, core/wire_limits.h) that
// pass and the sending are serial: no chunk leaves until the last row is
// encoded, and on a wide push the pass takes about as long as the transfer.
// A PushRowWriter does the same pass in steps: WriteThrough(end) before the
// sender queues the chunk that ends at `end` (Message::write_values), so
// that ZeroMQ's I/O thread sends one chunk while the caller's thread
// encodes the next. The bytes, the residuals and the order of the residual
// store's lookups are EncodeRows's exactly (EncodeRows is this writer run
// to its end at once); a PushDenseWriter's are EncodeDense's.
//
// Lifetime and ownership: `encoder`, `keys`, `grads`, `rows` and `list`
// must outlive the writer. The writer holds a reference to its frame (a
// copy of frame() shares its bytes, as a Message and the copies kept for a
// resend do) until TakeFrame() or destruction, so a message dropped unsent
// leaves nothing written through a freed buffer. The residual store's
// key-list bracket (ResidualStore::BeginList) opens at the first write and
// closes at Finish(); no other push of the same table may be encoded in
// between (for a dense table: of the same range). The destructors call
// Finish().
//
// Thread-compatible: the client's thread (ZeroMQ's I/O thread reads only
// chunks already queued, which are written by then).
#pragma once

#include <cstddef>
#include <cstdint>

#include <zmq.hpp>

#include "core/net/frame_pool.h"
#include "worker/client/push_encoder.h"
#include "worker/client/residual_store.h"

namespace tether {

class PushRowWriter {
 public:
  /// n rows of `table` (PushEncoder::EncodeRows's arguments): row i's
  /// gradient is the dim floats at grads + r·dim, r = rows[i] (rows null:
  /// r = i), times `scale`; keys[i] its key. Takes the frame (n·dim values
  /// in the table's push encoding) from `pool`; writes nothing yet.
  /// Requires encoder->narrows(table). Throws std::bad_alloc as
  /// FramePool::Take.
  PushRowWriter(PushEncoder* encoder, uint32_t table, const uint64_t* keys, size_t n, const float* grads,
                const uint32_t* rows, float scale, FramePool* pool, const ResidualStore::KeyList& list = nullptr);
  ~PushRowWriter();
  PushRowWriter(const PushRowWriter&) = delete;
  PushRowWriter& operator=(const PushRowWriter&) = delete;

  /// The values frame; a copy (zmq::message_t::copy) shares its bytes.
  /// Its size is a multiple of the row's bytes.
  zmq::message_t& frame() { return frame_; }
  /// Writes whole rows until frame bytes [0, end) are written (end past
  /// the frame: all of it); rows already written stay as they are.
  void WriteThrough(size_t end);
  /// Writes the rows not written yet and closes the residual store's
  /// bracket. Idempotent.
  void Finish();
  /// After Finish(): the frame, moved out of the writer.
  zmq::message_t TakeFrame();
  /// Rows written so far (of n).
  size_t written_rows() const { return next_; }

 private:
  // Writes rows [next_, at least `end`).
  void WriteRows(size_t end);
  // The rows one at a time through the residual store (no known run).
  void WriteLookedUp(size_t end);

  PushEncoder* encoder_;
  const PushEncoder::Table& spec_;
  const uint64_t* keys_;
  size_t n_;
  const float* grads_;
  const uint32_t* rows_;
  float scale_;
  ResidualStore* store_;  // null without error feedback
  ResidualStore::KeyList list_;
  size_t row_bytes_;
  zmq::message_t frame_;
  unsigned char* out_;
  bool begun_ = false, finished_ = false;
  float* run_ = nullptr;  // the list's residuals as one run (ResidualStore::KnownRun), if found
  size_t next_ = 0;       // rows [0, next_) written
  size_t loaded_ = 0;     // keys [next_, loaded_) have their index entries on the way
  size_t gathered_end_;   // rows [next_, gathered_end_) have their gradients one after the other
};

/// A dense table's push of floats [begin, end) of `grad` (the whole
/// table) times `scale`, written while it is sent: PushEncoder::EncodeDense
/// in steps. Lifetime, ownership and thread-safety as PushRowWriter's.
class PushDenseWriter {
 public:
  /// Requires encoder->narrows(table). Takes the frame ((end − begin)
  /// values in the table's push encoding) from `pool`; writes nothing yet.
  /// Throws std::bad_alloc as FramePool::Take.
  PushDenseWriter(PushEncoder* encoder, uint32_t table, uint64_t begin, uint64_t end, const float* grad, float scale,
                  FramePool* pool);
  ~PushDenseWriter();
  PushDenseWriter(const PushDenseWriter&) = delete;
  PushDenseWriter& operator=(const PushDenseWriter&) = delete;

  zmq::message_t& frame() { return frame_; }
  /// Writes whole values until frame bytes [0, end) are written.
  void WriteThrough(size_t end);
  /// Writes the values not written yet. Idempotent.
  void Finish();
  /// After Finish(): the frame, moved out of the writer.
  zmq::message_t TakeFrame();
  /// Values written so far (of end − begin).
  uint64_t written_values() const { return next_; }

 private:
  PushEncoder* encoder_;
  WireEncoding wire_;
  const float* grad_;      // grad + begin
  float* residual_;        // the range's residuals, or null without error feedback
  uint64_t count_;
  float scale_;
  size_t value_bytes_;
  zmq::message_t frame_;
  unsigned char* out_;
  uint64_t next_ = 0;      // values [0, next_) written
};

}  // namespace tether
