// FramePool: recycled, pre-faulted buffers for large outgoing ZeroMQ frames
// (a server's pull replies, a worker's push values and keys).
//
// Why: a large frame that is freshly allocated for every message costs a page
// fault per 4 KiB the first time it is written, and glibc hands big blocks
// back to the kernel when they are freed, so the next message faults them in
// again. On loopback that cost rivalled the TCP copy itself
// (docs/PERFORMANCE.md, transport). A pooled buffer is mapped and faulted in once
// (with transparent huge pages where the kernel offers them on request) and
// then reused; ZeroMQ sends it zero-copy and gives it back through the
// frame's free function once the frame is sent (TCP: on ZeroMQ's I/O thread;
// inproc: on the receiving thread, when it drops the frame).
//
// Memory bound: the pool keeps at most `max_idle_bytes` of idle buffers
// (Options; default kDefaultFramePoolIdleBytes). A returned buffer that
// would pass the cap first evicts idle buffers of other sizes and is
// otherwise unmapped. Buffers in use are not counted against the cap: they
// are bounded by what the owner has in flight (the client's window ×
// max_message_bytes, or the replies queued on a server socket).
//
// Ownership and thread-safety: Take() may be called from any thread; the
// free function may run on any thread, also after the FramePool object is
// destroyed (the shared state lives until the last frame is returned, and
// buffers returned after that are unmapped at once). All members are
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <zmq.hpp>

namespace tether {

/// Default cap on a pool's idle buffers (bytes): 256 MiB.
inline constexpr uint64_t kDefaultFramePoolIdleBytes = uint64_t{256} << 20;
/// Frames below this many bytes are plain ZeroMQ messages (malloc keeps
/// small blocks in its own free lists, so pooling would gain nothing).
inline constexpr uint64_t kMinPooledFrameBytes = uint64_t{128} << 10;

class FramePool {
 public:
  struct Options {
    /// Idle buffers kept for reuse, at most (bytes). 0 keeps none: every
    /// pooled frame is mapped for one message and unmapped when freed.
    uint64_t max_idle_bytes = kDefaultFramePoolIdleBytes;
    /// Frames of fewer bytes bypass the pool.
    uint64_t min_pooled_bytes = kMinPooledFrameBytes;
  };

  /// Counters since construction (a snapshot; consistent with each other).
  struct Stats {
    uint64_t takes = 0;          // pooled frames handed out
    uint64_t reuses = 0;         // of those, served by an idle buffer
    uint64_t maps = 0;           // buffers newly mapped (takes − reuses)
    uint64_t unmaps = 0;         // buffers given back to the kernel (cap, Trim, shutdown)
    uint64_t returns = 0;        // frames freed by ZeroMQ / their owner
    uint64_t idle_bytes = 0;     // capacity of idle buffers now (≤ max_idle_bytes)
    uint64_t in_use_bytes = 0;   // capacity of frames not yet freed
    uint64_t in_use_frames = 0;
  };

  FramePool();
  explicit FramePool(const Options& options);
  /// Unmaps the idle buffers. Frames still in flight stay valid and are
  /// unmapped when ZeroMQ frees them.
  ~FramePool();
  FramePool(const FramePool&) = delete;
  FramePool& operator=(const FramePool&) = delete;

  /// A frame of exactly `bytes` bytes, contents undefined. At or above
  /// min_pooled_bytes its buffer comes from the pool (an idle one of the same
  /// size class, else a new pre-faulted mapping) and goes back to the pool
  /// when the message is freed; below it, a plain zmq::message_t. The data
  /// is at least 64-byte aligned when pooled (malloc-aligned otherwise).
  /// Throws std::bad_alloc when the mapping fails.
  zmq::message_t Take(size_t bytes);

  /// Unmaps every idle buffer (e.g. after a burst of unusually large frames).
  void Trim();

  Stats stats() const;
  const Options& options() const;

  /// Size class (capacity in bytes) a pooled frame of `bytes` uses: rounded
  /// up to a quarter of its power of two (≤ 25% slack), and to 2 MiB from
  /// 2 MiB up so that huge pages fit. Exposed for tests.
  static size_t CapacityFor(size_t bytes);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace tether
