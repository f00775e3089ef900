// The heap that receives a worker's chunked pull replies.
//
// A shard sends a large float32 PULL_REPLY as ZeroMQ messages of up to
// kReplyChunkBytes (core/net/reply_joiner.h). ZeroMQ's I/O thread
// allocates each one (malloc) as its bytes arrive, and the worker frees it
// once its values are copied into the caller's buffer. glibc sizes its
// trim threshold from the largest block freed (twice 1 MiB here), so with
// a few chunks queued the I/O thread's heap is shrunk after every reply
// and the next reply faults every page in again: a 1,024 × 4,096 pull
// took 1.5 times as long as one received whole, with 60–90 thousand minor
// faults per 40 pulls against 41 thousand (docs/PERFORMANCE.md). Serving
// every chunk from a heap and keeping a pad at the top of each heap (glibc's
// M_MMAP_THRESHOLD and M_TOP_PAD) lets the next reply reuse the pages: the receive_heap_test pattern (24 blocks of 1 MiB allocated
// and freed by one thread, 19 times) faults 0 pages with the pad and about
// 116 thousand without.
//
// Bound and cost: process-wide, every heap (arena) keeps up to
// kReceiveHeapPadBytes of freed memory resident instead of returning it to
// the kernel; pages never touched cost nothing. Not for a server shard,
// whose resident memory a table budget bounds.
//
// Thread-safety: PadReceiveHeaps may be called from any thread, any number
// of times (glibc's mallopt takes the allocator's lock); the setting holds
// for the rest of the process.
#pragma once

#include <cstdint>

namespace tether {

/// Freed memory each heap keeps at its top for the next reply (bytes):
/// more than the largest pull reply on the wide benchmark shapes (25.6 MB).
inline constexpr uint64_t kReceiveHeapPadBytes = 64u << 20;
/// Blocks from this size up are mapped on their own (glibc's M_MMAP_THRESHOLD;
/// its largest, 32 MiB on 64-bit): every reply chunk comes from a heap.
inline constexpr uint64_t kReceiveHeapMmapBytes = 32u << 20;

/// Sets glibc's M_TOP_PAD to kReceiveHeapPadBytes and M_MMAP_THRESHOLD to
/// kReceiveHeapMmapBytes (which turns its dynamic thresholds off). Returns
/// false where the allocator refused either (replies are still received,
/// only slower).
bool PadReceiveHeaps();

}  // namespace tether
