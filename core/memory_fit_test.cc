#include "core/memory_fit.h"

#include <gtest/gtest.h>

#include <fstream>

#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

TEST(MemoryFitTest, ParsesByteSizesWithUnits) {
  const std::pair<const char*, uint64_t> good[] = {
      {"0", 0},          {"4096", 4096},           {"64MiB", 64ull << 20}, {"64mib", 64ull << 20},
      {"1.5GB", 1500000000}, {"2 KiB", 2048},      {"10kb", 10000},        {"1TiB", 1ull << 40},
      {"7B", 7},         {"0.5KiB", 512}};
  for (const auto& [text, bytes] : good) {
    StatusOr<uint64_t> v = ParseByteSize(text);
    ASSERT_TRUE(v.ok()) << text << ": " << v.status().ToString();
    EXPECT_EQ(*v, bytes) << text;
  }
  for (const char* text : {"", "MiB", "-1", "12 parsecs", "1.2.3MB", "64M", "1e3"}) {
    StatusOr<uint64_t> v = ParseByteSize(text);
    EXPECT_FALSE(v.ok()) << text;
    if (!v.ok()) {
      EXPECT_NE(v.status().message().find("KiB, MiB"), std::string::npos) << v.status().message();
    }
  }
}

TEST(MemoryFitTest, FormatsBytes) {
  EXPECT_EQ(FormatBytes(512), "512 bytes");
  EXPECT_EQ(FormatBytes(64ull << 20), "64.0 MiB (67108864 bytes)");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB (1536 bytes)");
}

TEST(MemoryFitTest, ReadsMemAvailableAndPrefersTheConfiguredLimit) {
  testing::ScopedTempDir dir;
  const std::string meminfo = dir.path() + "/meminfo";
  std::ofstream(meminfo) << "MemTotal:       16000000 kB\nMemFree:         100 kB\nMemAvailable:    2000 kB\n";
  StatusOr<uint64_t> v = ReadMemAvailableBytes(meminfo);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, 2000u * 1024);
  JobConfig c;
  const ProcessLimits none;  // no cgroup or address-space limit
  MemoryBudget b = MemoryBudgetFor(c, meminfo, &none);
  EXPECT_EQ(b.bytes, 2000u * 1024);
  EXPECT_EQ(b.source, "MemAvailable in " + meminfo);
  c.mutable_consistency()->set_memory_limit_bytes(12345);
  b = MemoryBudgetFor(c, meminfo, &none);
  EXPECT_EQ(b.bytes, 12345u);
  EXPECT_EQ(b.source, "consistency.memory_limit_bytes (--memory_limit)");
  // Unreadable or without the line: unknown (0), and no check.
  c.clear_consistency();
  EXPECT_EQ(MemoryBudgetFor(c, dir.path() + "/none", &none).bytes, 0u);
  // A cgroup limit below MemAvailable decides, and is named.
  ProcessLimits cgroup;
  cgroup.cgroup_memory_bytes = 1500 * 1024;
  cgroup.cgroup_memory_used_bytes = 500 * 1024;
  cgroup.cgroup_file = "/sys/fs/cgroup/job/memory.max";
  b = MemoryBudgetFor(c, meminfo, &cgroup);
  EXPECT_EQ(b.bytes, 1000u * 1024);
  EXPECT_EQ(b.source, "the cgroup memory limit (/sys/fs/cgroup/job/memory.max)");
  std::ofstream(meminfo) << "MemTotal: 1 kB\n";
  EXPECT_EQ(ReadMemAvailableBytes(meminfo).status().code(), Status::Code::kDataLoss);
  // This host's own file reads (Linux).
  EXPECT_TRUE(ReadMemAvailableBytes().ok());
}

// An XMC-like model: w1 (100 keys × 8), b1 (dense 8), w2 (10 keys × 8).
std::vector<TableSpec> Tables(bool w1_cached = true) {
  std::vector<TableSpec> t(3);
  t[0].set_name("w1");
  t[0].set_dim(8);
  t[0].set_num_keys(100);
  t[0].mutable_consistency()->set_cache(w1_cached);
  t[1].set_name("b1");
  t[1].set_kind(TableSpec::DENSE);
  t[1].set_size(8);
  t[2].set_name("w2");
  t[2].set_dim(8);
  t[2].set_num_keys(10);
  return t;
}

TEST(MemoryFitTest, CacheCapacityFromBytesOrAFractionOfTheModel) {
  JobConfig c;
  EXPECT_EQ(*ResolveCacheCapacity(c, Tables()), 0u) << "unbounded by default";
  c.mutable_consistency()->set_cache_capacity_bytes(5000);
  EXPECT_EQ(*ResolveCacheCapacity(c, Tables()), 5000u);
  c.mutable_consistency()->clear_cache_capacity_bytes();
  c.mutable_consistency()->set_cache_capacity_fraction(0.1);
  // Model: (100·8 + 8 + 10·8) floats = 888 floats = 3552 bytes → 355.
  EXPECT_EQ(TableWeightBytes(Tables()[0]), 3200u);
  EXPECT_EQ(*ResolveCacheCapacity(c, Tables()), 355u);
  std::vector<TableSpec> unbounded = Tables();
  unbounded[0].set_num_keys(0);
  StatusOr<uint64_t> v = ResolveCacheCapacity(c, unbounded);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("table 'w1' has no bound"), std::string::npos) << v.status().message();
}

TEST(MemoryFitTest, WorkerFitsWhenCacheAndDenseTablesDo) {
  const MemoryBudget budget{10000, "consistency.memory_limit_bytes (--memory_limit)"};
  // Bounded: capacity + dense (8 floats = 32 bytes).
  EXPECT_TRUE(CheckWorkerFits("worker 0", Tables(), 9968, budget).ok());
  Status st = CheckWorkerFits("worker 0", Tables(), 9969, budget);
  ASSERT_EQ(st.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(st.message(),
            "worker 0 does not fit in memory: it needs 9.8 KiB (10001 bytes) = parameter cache 9.7 KiB (9969 bytes) "
            "(consistency.cache_capacity_bytes / _fraction) + dense tables 32 bytes (b1 32), but 9.8 KiB (10000 "
            "bytes) are available (consistency.memory_limit_bytes (--memory_limit)); give the cache a smaller "
            "capacity (--cache_capacity=64MiB or 10%), or the worker more memory (docs/OPERATIONS.md, \"Memory "
            "sizing\")");
  // Unbounded: every row of the cached tables with the entry charge.
  // w1 100 × (32 + 128) + b1 (32 + 128) + w2 10 × (32 + 128) = 17760, + dense 32.
  st = CheckWorkerFits("worker 1", Tables(), 0, budget);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("it needs 17.4 KiB (17792 bytes) = parameter cache 17.3 KiB (17760 bytes) (unbounded"),
            std::string::npos)
      << st.message();
  // w1 not cached: 160 + 1600 + 32 fits.
  EXPECT_TRUE(CheckWorkerFits("worker 1", Tables(false), 0, budget).ok());
  // No budget known: no check.
  EXPECT_TRUE(CheckWorkerFits("worker 1", Tables(), 1ull << 50, MemoryBudget{}).ok());
}

}  // namespace
}  // namespace tether
