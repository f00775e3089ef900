// The finiteness scan of float32 values: where the first NaN or infinity
// is. A server refuses a push holding one (server/request_check.h), so no
// non-finite value ever reaches a table; the inbox runs the same scan on
// each piece of a chunked message as it joins it, while the piece is still
// in cache (core/net/inbox.h), so the check costs no second pass over a
// wide push.
//
// Pure functions, thread-safe.
#pragma once

#include <cstdint>

namespace tether {

/// Index of the first NaN or infinity among v[0, n), or n when there is
/// none. Whole blocks are scanned branch-free (vectorised); the exact index
/// is looked for only in a block that has one.
uint64_t FirstNonFinite(const float* v, uint64_t n);

}  // namespace tether
