#include "core/net/frame_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <new>
#include <vector>

namespace tether {
namespace {

constexpr size_t kPageBytes = 4096;
constexpr size_t kHugePageBytes = size_t{2} << 20;

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

size_t FloorPow2(size_t n) {
  size_t p = 1;
  while (p <= n / 2) p *= 2;
  return p;
}

// Maps `capacity` bytes (a multiple of the page size, or of 2 MiB from 2 MiB
// up, where the start is also 2 MiB aligned so the kernel can back it with
// huge pages) and writes every page once, so that the copy into the frame
// never takes a fault. Throws std::bad_alloc.
char* MapBuffer(size_t capacity) {
  const bool huge = capacity >= kHugePageBytes;
  const size_t len = huge ? capacity + kHugePageBytes : capacity;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  char* base = static_cast<char*>(p);
  char* data = base;
  if (huge) {
    data = reinterpret_cast<char*>(RoundUp(reinterpret_cast<uintptr_t>(base), kHugePageBytes));
    if (data > base) munmap(base, static_cast<size_t>(data - base));
    const size_t tail = static_cast<size_t>(base + len - (data + capacity));
    if (tail > 0) munmap(data + capacity, tail);
    // Advice only: where THP is off, the buffer simply uses small pages.
    (void)madvise(data, capacity, MADV_HUGEPAGE);
  }
  volatile char* touch = data;
  for (size_t off = 0; off < capacity; off += kPageBytes) touch[off] = 0;
  return data;
}

}  // namespace

struct FramePool::State {
  struct Block {
    char* data = nullptr;
    size_t capacity = 0;
    std::shared_ptr<State> state;  // set while the block is out as a frame
  };

  explicit State(const Options& o) : options(o) {}

  // ZeroMQ's free function (any thread). `keep` holds the state alive until
  // Return has released the lock, even when the pool itself is gone.
  static void FreeFrame(void* /*data*/, void* hint) {
    Block* b = static_cast<Block*>(hint);
    std::shared_ptr<State> keep = b->state;
    keep->Return(b);
  }

  void Return(Block* b) {
    std::vector<Block*> unmap;
    {
      std::lock_guard<std::mutex> lock(mu);
      ++stats.returns;
      stats.in_use_bytes -= b->capacity;
      --stats.in_use_frames;
      b->state.reset();  // the caller's `keep` still holds the state
      const uint64_t cap = options.max_idle_bytes;
      if (closed || b->capacity > cap) {
        unmap.push_back(b);
      } else {
        // The size just used is the likeliest to be asked for again: make
        // room by evicting other sizes first.
        for (auto it = idle.begin(); it != idle.end() && stats.idle_bytes + b->capacity > cap; ++it) {
          if (it->first == b->capacity) continue;
          while (!it->second.empty() && stats.idle_bytes + b->capacity > cap) {
            unmap.push_back(it->second.back());
            it->second.pop_back();
            stats.idle_bytes -= it->first;
          }
        }
        if (stats.idle_bytes + b->capacity > cap) {
          unmap.push_back(b);
        } else {
          idle[b->capacity].push_back(b);
          stats.idle_bytes += b->capacity;
        }
      }
      stats.unmaps += unmap.size();
    }
    // Outside the lock: unmapping 16 MiB takes a while.
    for (Block* u : unmap) Release(u);
  }

  static void Release(Block* b) {
    munmap(b->data, b->capacity);
    delete b;
  }

  std::vector<Block*> TakeAllIdle() {
    std::vector<Block*> out;
    for (auto& [capacity, blocks] : idle) {
      for (Block* b : blocks) out.push_back(b);
      stats.idle_bytes -= capacity * blocks.size();
      blocks.clear();
    }
    idle.clear();
    stats.unmaps += out.size();
    return out;
  }

  const Options options;
  mutable std::mutex mu;
  bool closed = false;                          // the FramePool was destroyed
  std::map<size_t, std::vector<Block*>> idle;   // capacity → idle buffers
  Stats stats;
};

FramePool::FramePool() : FramePool(Options()) {}

FramePool::FramePool(const Options& options) : state_(std::make_shared<State>(options)) {}

FramePool::~FramePool() {
  std::vector<State::Block*> unmap;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->closed = true;
    unmap = state_->TakeAllIdle();
  }
  for (State::Block* b : unmap) State::Release(b);
}

size_t FramePool::CapacityFor(size_t bytes) {
  const size_t floor = bytes >= kHugePageBytes ? kHugePageBytes : kPageBytes;
  const size_t step = std::max(floor, FloorPow2(std::max<size_t>(bytes, 1)) / 4);
  return RoundUp(std::max<size_t>(bytes, 1), step);
}

zmq::message_t FramePool::Take(size_t bytes) {
  State& s = *state_;
  if (bytes < s.options.min_pooled_bytes) return zmq::message_t(bytes);
  const size_t capacity = CapacityFor(bytes);
  State::Block* b = nullptr;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.stats.takes;
    auto it = s.idle.find(capacity);
    if (it != s.idle.end() && !it->second.empty()) {
      b = it->second.back();
      it->second.pop_back();
      s.stats.idle_bytes -= capacity;
      ++s.stats.reuses;
    } else {
      ++s.stats.maps;
    }
    s.stats.in_use_bytes += capacity;
    ++s.stats.in_use_frames;
  }
  if (b == nullptr) {
    try {
      b = new State::Block;
      b->capacity = capacity;
      b->data = MapBuffer(capacity);
    } catch (...) {
      std::lock_guard<std::mutex> lock(s.mu);
      s.stats.in_use_bytes -= capacity;
      --s.stats.in_use_frames;
      delete b;
      throw;
    }
  }
  b->state = state_;
  try {
    return zmq::message_t(b->data, bytes, &State::FreeFrame, b);
  } catch (...) {
    // ZeroMQ could not allocate the frame's descriptor: the buffer was never
    // handed over, so it goes back at once.
    State::FreeFrame(b->data, b);
    throw;
  }
}

void FramePool::Trim() {
  std::vector<State::Block*> unmap;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    unmap = state_->TakeAllIdle();
  }
  for (State::Block* b : unmap) State::Release(b);
}

FramePool::Stats FramePool::stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->stats;
}

const FramePool::Options& FramePool::options() const { return state_->options; }

}  // namespace tether
