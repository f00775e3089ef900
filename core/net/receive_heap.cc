#include "core/net/receive_heap.h"

#include <malloc.h>

namespace tether {

bool PadReceiveHeaps() {
  // Setting either turns glibc's dynamic thresholds off: blocks below
  // kReceiveHeapMmapBytes then come from the heaps (no mmap and munmap per
  // chunk), and each heap keeps the pad when it would shrink.
  const bool mmap_set = mallopt(M_MMAP_THRESHOLD, static_cast<int>(kReceiveHeapMmapBytes)) == 1;
  const bool pad_set = mallopt(M_TOP_PAD, static_cast<int>(kReceiveHeapPadBytes)) == 1;
  return mmap_set && pad_set;
}

}  // namespace tether
