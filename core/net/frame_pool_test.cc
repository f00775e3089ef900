// FramePool: reuse, the idle-memory cap, eviction, and buffers coming back
// after ZeroMQ frees them (TCP: on its I/O thread; inproc: on the receiver).
#include "core/net/frame_pool.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

namespace tether {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Waits (bounded) until the pool has seen `returns` frames come back.
bool WaitForReturns(const FramePool& pool, uint64_t returns) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (pool.stats().returns < returns) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(FramePoolTest, CapacityClasses) {
  EXPECT_EQ(FramePool::CapacityFor(1), 4096u);
  EXPECT_EQ(FramePool::CapacityFor(128 << 10), size_t{128} << 10);
  EXPECT_EQ(FramePool::CapacityFor((128 << 10) + 1), size_t{160} << 10);  // quarter steps of 128 KiB
  EXPECT_EQ(FramePool::CapacityFor(16 * kMiB), 16 * kMiB);
  EXPECT_EQ(FramePool::CapacityFor(16 * kMiB + 1), 20 * kMiB);
  EXPECT_EQ(FramePool::CapacityFor(3 * kMiB), 4 * kMiB);  // 2 MiB steps from 2 MiB up
  for (size_t b : {size_t{200000}, size_t{5000000}, size_t{123456789}}) {
    const size_t c = FramePool::CapacityFor(b);
    EXPECT_GE(c, b);
    EXPECT_LE(c, b + b / 4 + 2 * kMiB) << b;
  }
}

TEST(FramePoolTest, SmallFramesBypassThePool) {
  FramePool pool;
  {
    zmq::message_t m = pool.Take(100);
    EXPECT_EQ(m.size(), 100u);
  }
  EXPECT_EQ(pool.stats().takes, 0u);
  EXPECT_EQ(pool.stats().returns, 0u);
}

TEST(FramePoolTest, FreedFrameIsReused) {
  FramePool pool;
  void* first = nullptr;
  {
    zmq::message_t m = pool.Take(3 * kMiB);
    ASSERT_EQ(m.size(), 3 * kMiB);
    first = m.data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
    std::memset(m.data(), 7, m.size());  // writable, every byte
    EXPECT_EQ(pool.stats().in_use_frames, 1u);
    EXPECT_EQ(pool.stats().in_use_bytes, 4 * kMiB);
  }
  FramePool::Stats s = pool.stats();
  EXPECT_EQ(s.returns, 1u);
  EXPECT_EQ(s.in_use_frames, 0u);
  EXPECT_EQ(s.idle_bytes, 4 * kMiB);
  for (int i = 0; i < 5; ++i) {
    zmq::message_t m = pool.Take(3 * kMiB - 1000);  // same size class
    EXPECT_EQ(m.data(), first);
  }
  s = pool.stats();
  EXPECT_EQ(s.takes, 6u);
  EXPECT_EQ(s.reuses, 5u);
  EXPECT_EQ(s.maps, 1u);
  EXPECT_EQ(s.unmaps, 0u);
}

TEST(FramePoolTest, IdleCapIsRespected) {
  FramePool::Options o;
  o.max_idle_bytes = 5 * kMiB;  // room for two 2 MiB buffers
  FramePool pool(o);
  {
    std::vector<zmq::message_t> frames;
    for (int i = 0; i < 4; ++i) frames.push_back(pool.Take(2 * kMiB));
    EXPECT_EQ(pool.stats().in_use_bytes, 8 * kMiB);  // in-use frames are not capped
  }
  FramePool::Stats s = pool.stats();
  EXPECT_EQ(s.returns, 4u);
  EXPECT_EQ(s.idle_bytes, 4 * kMiB);
  EXPECT_EQ(s.unmaps, 2u);
  // A frame larger than the whole cap is never kept.
  { zmq::message_t big = pool.Take(8 * kMiB); }
  s = pool.stats();
  EXPECT_EQ(s.idle_bytes, 4 * kMiB);
  EXPECT_EQ(s.unmaps, 3u);
  // A new size evicts the older size to fit under the cap.
  { zmq::message_t m = pool.Take(4 * kMiB); }
  s = pool.stats();
  EXPECT_EQ(s.idle_bytes, 4 * kMiB);
  EXPECT_EQ(s.unmaps, 5u);  // both idle 2 MiB buffers went
  { zmq::message_t m = pool.Take(4 * kMiB); }
  EXPECT_EQ(pool.stats().reuses, 1u);
  pool.Trim();
  EXPECT_EQ(pool.stats().idle_bytes, 0u);
  EXPECT_EQ(pool.stats().unmaps, 6u);
}

TEST(FramePoolTest, ZeroCapKeepsNothing) {
  FramePool::Options o;
  o.max_idle_bytes = 0;
  FramePool pool(o);
  for (int i = 0; i < 3; ++i) { zmq::message_t m = pool.Take(kMiB); }
  EXPECT_EQ(pool.stats().reuses, 0u);
  EXPECT_EQ(pool.stats().unmaps, 3u);
  EXPECT_EQ(pool.stats().idle_bytes, 0u);
}

// Sends `frames` pooled frames of `bytes` over `endpoint` and checks their
// contents at the far end; every buffer must come back to the pool.
void RoundTrip(const std::string& endpoint, size_t bytes, int frames) {
  zmq::context_t ctx(1);
  zmq::socket_t rx(ctx, zmq::socket_type::pair), tx(ctx, zmq::socket_type::pair);
  rx.set(zmq::sockopt::linger, 0);
  tx.set(zmq::sockopt::linger, 0);
  rx.set(zmq::sockopt::rcvtimeo, 10000);
  tx.set(zmq::sockopt::sndtimeo, 10000);
  rx.bind(endpoint);
  tx.connect(endpoint.find("tcp://") == 0 ? rx.get(zmq::sockopt::last_endpoint) : endpoint);
  FramePool pool;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < frames; ++i) {
      zmq::message_t m = pool.Take(bytes);
      std::memset(m.data(), 'a' + round * frames + i, bytes);
      ASSERT_TRUE(tx.send(m, zmq::send_flags::none));
    }
    for (int i = 0; i < frames; ++i) {
      zmq::message_t got;
      ASSERT_TRUE(rx.recv(got));
      ASSERT_EQ(got.size(), bytes);
      const char want = static_cast<char>('a' + round * frames + i);
      EXPECT_EQ(static_cast<const char*>(got.data())[0], want);
      EXPECT_EQ(static_cast<const char*>(got.data())[bytes - 1], want);
    }
    // TCP frees the frame on ZeroMQ's I/O thread once written, inproc when
    // the receiver drops it: either way all of them come back.
    ASSERT_TRUE(WaitForReturns(pool, static_cast<uint64_t>((round + 1) * frames)));
    EXPECT_EQ(pool.stats().in_use_frames, 0u);
  }
  const FramePool::Stats s = pool.stats();
  EXPECT_EQ(s.takes, 3u * frames);
  EXPECT_EQ(s.maps, static_cast<uint64_t>(frames));  // rounds 2 and 3 reuse round 1's buffers
  EXPECT_EQ(s.reuses, 2u * frames);
}

TEST(FramePoolTest, BuffersReturnAfterZeroMqSendsThemOverTcp) { RoundTrip("tcp://127.0.0.1:0", 3 * kMiB, 4); }

TEST(FramePoolTest, BuffersReturnAfterInprocReceiverDropsThem) { RoundTrip("inproc://frame-pool-test", kMiB, 4); }

TEST(FramePoolTest, FramesOutliveThePool) {
  zmq::message_t survivor;
  {
    FramePool pool;
    survivor = pool.Take(2 * kMiB);
    { zmq::message_t idle = pool.Take(2 * kMiB); }
    std::memset(survivor.data(), 1, survivor.size());
  }
  // The pool is gone; the frame is still valid and is unmapped when dropped
  // (AddressSanitizer builds would flag a use-after-free here).
  EXPECT_EQ(static_cast<const char*>(survivor.data())[survivor.size() - 1], 1);
  survivor.rebuild(size_t{0});
}

TEST(FramePoolTest, ConcurrentTakeAndFree) {
  FramePool::Options o;
  o.max_idle_bytes = 8 * kMiB;
  FramePool pool(o);
  constexpr int kThreads = 4, kIters = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&pool, t] {
      std::vector<zmq::message_t> held;
      for (int i = 0; i < kIters; ++i) {
        held.push_back(pool.Take(((i + t) % 3 + 1) * 512 * 1024));
        static_cast<char*>(held.back().data())[0] = static_cast<char>(i);
        if (held.size() > 3) held.erase(held.begin());
      }
    });
  }
  for (auto& th : threads) th.join();
  const FramePool::Stats s = pool.stats();
  EXPECT_EQ(s.takes, static_cast<uint64_t>(kThreads * kIters));
  EXPECT_EQ(s.returns, s.takes);
  EXPECT_EQ(s.in_use_frames, 0u);
  EXPECT_EQ(s.in_use_bytes, 0u);
  EXPECT_EQ(s.maps + s.reuses, s.takes);
  EXPECT_LE(s.idle_bytes, o.max_idle_bytes);
  EXPECT_GT(s.reuses, s.takes / 2);
}

}  // namespace
}  // namespace tether
