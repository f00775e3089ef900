#include "core/finite_scan.h"

#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace tether {
namespace {

TEST(FiniteScanTest, FindsTheFirstNanOrInfinityInAnyBlock) {
  std::vector<float> v(10000, 1.5f);
  EXPECT_EQ(FirstNonFinite(v.data(), v.size()), v.size());
  EXPECT_EQ(FirstNonFinite(v.data(), 0), 0u);
  v[9999] = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FirstNonFinite(v.data(), v.size()), 9999u);
  v[4096] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(FirstNonFinite(v.data(), v.size()), 4096u);
  v[7] = std::nanf("");
  EXPECT_EQ(FirstNonFinite(v.data(), v.size()), 7u);
  EXPECT_EQ(FirstNonFinite(v.data(), 7), 7u);  // the scan stops at n
  // The largest finite float and subnormals are finite.
  std::vector<float> edge = {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                             std::numeric_limits<float>::denorm_min(), -0.0f};
  EXPECT_EQ(FirstNonFinite(edge.data(), edge.size()), edge.size());
}

}  // namespace
}  // namespace tether
