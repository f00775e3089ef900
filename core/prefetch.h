// Cache hints the compiler keeps.
//
// Why: GCC treats __builtin_prefetch as free of side effects. A helper or
// lambda whose only work is prefetching is therefore found "const" by GCC's
// interprocedural pure-const pass, and every call to it, whose result is
// unused, is deleted (GCC 12 at -O2 and -O3). Until 2026-12 that removed
// every row hint of server/table.cc's PrefetchSpan and of the optimizer's
// gathered step: optimizer.cc.o held no prefetch instruction at all, and a
// push of scattered rows paid a DRAM round trip a row. Each hint here is
// followed by an empty volatile asm that takes the address: a side effect
// the compiler must keep, which emits no instruction.
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
