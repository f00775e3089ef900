#include "core/finite_scan.h"

#include <algorithm>
#include <cmath>

namespace tether {
namespace {

// An AVX2 clone, picked at load time where the CPU has it, scans 8 floats
// an operation instead of SSE2's 4.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define TETHER_FINITE_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define TETHER_FINITE_CLONES
#endif

// GCC's -O2 vectorises only loops of a constant trip count and simple
// operations, so the scan works in whole blocks of kScanBlock floats, then
// a scalar tail. Written as a compare to bool per float, the scan stayed
// scalar: 20% of the server's time on a 10⁵ × 64 push.
constexpr uint64_t kScanBlock = 4096;
typedef uint32_t __attribute__((may_alias)) AliasedBits;

// Bit 31 set when one of the floats is NaN or infinite: a float is
// non-finite exactly when its exponent bits are all ones, and then
// (exponent bits) + 1 in the exponent's lowest place carries into bit 31,
// which no finite float's does.
inline uint32_t NonFiniteBits(const AliasedBits* u, uint64_t n) {
  uint32_t any = 0;
  for (uint64_t i = 0; i < n; ++i) any |= (u[i] & 0x7f800000u) + 0x00800000u;
  return any & 0x80000000u;
}

}  // namespace

TETHER_FINITE_CLONES uint64_t FirstNonFinite(const float* v, uint64_t n) {
  const AliasedBits* u = reinterpret_cast<const AliasedBits*>(v);
  for (uint64_t b = 0; b < n; b += kScanBlock) {
    const uint64_t e = std::min(n, b + kScanBlock);
    if ((e - b == kScanBlock ? NonFiniteBits(u + b, kScanBlock) : NonFiniteBits(u + b, e - b)) == 0) continue;
    for (uint64_t i = b; i < e; ++i)
      if (!std::isfinite(v[i])) return i;
  }
  return n;
}

}  // namespace tether
