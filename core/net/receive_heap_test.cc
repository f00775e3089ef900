// With the pad, a thread that allocates and frees a reply's worth of 1 MiB
// blocks over and over (as ZeroMQ's I/O thread and a worker do with a
// chunked pull reply's messages) reuses the pages it faulted in the first
// time: no page fault after the first round.
#include "core/net/receive_heap.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace tether {
namespace {

long MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Minor faults of rounds 2..`rounds` of: allocate `blocks` blocks of 1 MiB,
// write every byte, free them all; run on a thread of its own (a heap other
// than the main thread's, as ZeroMQ's I/O thread has).
long FaultsAfterTheFirstRound(int rounds, int blocks) {
  long faults = 0;
  std::thread t([&] {
    long start = 0;
    for (int r = 0; r < rounds; ++r) {
      if (r == 1) start = MinorFaults();
      std::vector<void*> held;
      for (int i = 0; i < blocks; ++i) {
        void* p = std::malloc(1u << 20);
        ASSERT_NE(p, nullptr);
        std::memset(p, r, 1u << 20);
        held.push_back(p);
      }
      for (void* p : held) std::free(p);
    }
    faults = MinorFaults() - start;
  });
  t.join();
  return faults;
}

TEST(ReceiveHeapTest, PaddedHeapsFaultNoPageAfterTheFirstReply) {
  ASSERT_TRUE(PadReceiveHeaps());
  ASSERT_TRUE(PadReceiveHeaps()) << "a second call is harmless";
  // 24 MiB per round: below the pad. Other threads of this process (none
  // but gtest's) may fault a few pages meanwhile.
  EXPECT_LT(FaultsAfterTheFirstRound(20, 24), 64);
}

}  // namespace
}  // namespace tether
