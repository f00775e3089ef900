// Cache hints the compiler keeps.
//
// Why: GCC does not count __builtin_prefetch as a side effect in its
// mod/ref summaries (-fipa-modref, GCC 11 and later, on from -O1). A helper
// or lambda whose only work is prefetching is summarised as doing nothing,
// and every call to it is then deleted as dead (seen with Debian 12's
// GCC 12.2 at -O2 and -O3; -fno-ipa-modref keeps them). Until 2026-12 that
// removed every row hint of server/table.cc's PrefetchSpan and of the
// optimizer's gathered step: optimizer.cc.o held no prefetch instruction,
// and a push of scattered rows paid a DRAM round trip a row. Each hint here
// is followed by an empty volatile asm that takes the address: a side
// effect the compiler must keep, which emits no instruction.
//
// A hint never faults and changes no memory; a wrong address only costs a
// wasted line. Thread-safe (no state).
#pragma once

namespace tether {

/// Hints the cache line holding `p` into all cache levels, to be read.
__attribute__((always_inline)) inline void HintRead(const void* p) {
  __builtin_prefetch(p, 0, 3);
  asm volatile("" : : "r"(p));
}

/// Hints the cache line holding `p` into all cache levels, to be written
/// (PREFETCHW where the target has it, else as HintRead).
__attribute__((always_inline)) inline void HintWrite(const void* p) {
  __builtin_prefetch(p, 1, 3);
  asm volatile("" : : "r"(p));
}

}  // namespace tether
