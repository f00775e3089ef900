// The process's limits from fixture files (cgroup v1 and v2 layouts, with
// and without a cgroup namespace) and the start-up refusals that name them.
#include "core/process_limits.h"

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

void Write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

LimitSources Fixture(const testing::ScopedTempDir& dir) {
  LimitSources s;
  s.proc_self_cgroup = dir.File("proc_self_cgroup");
  s.cgroup_root = dir.File("cgroup");
  s.proc_self_status = dir.File("status");
  s.read_rlimits = false;
  return s;
}

TEST(ProcessLimitsTest, ReadsTheLowestCgroupV2LimitOfTheCgroupAndItsAncestors) {
  testing::ScopedTempDir dir;
  Write(dir.File("proc_self_cgroup"), "0::/jobs/job42\n");
  Write(dir.File("cgroup/memory.max"), "max\n");
  Write(dir.File("cgroup/jobs/memory.max"), "4294967296\n");
  Write(dir.File("cgroup/jobs/memory.current"), "1073741824\n");
  Write(dir.File("cgroup/jobs/job42/memory.max"), "max\n");
  Write(dir.File("status"), "Name:\ttether\nVmSize:\t  102400 kB\n");
  const ProcessLimits l = ReadProcessLimits(Fixture(dir));
  EXPECT_EQ(l.cgroup_memory_bytes, 4294967296u);
  EXPECT_EQ(l.cgroup_memory_used_bytes, 1073741824u);
  EXPECT_EQ(l.cgroup_file, dir.File("cgroup/jobs/memory.max"));
  EXPECT_EQ(l.mapped_bytes, 102400u * 1024);
  std::string source;
  EXPECT_EQ(LimitedMemoryBytes(l, &source), 3221225472u);
  EXPECT_EQ(source, "the cgroup memory limit (" + dir.File("cgroup/jobs/memory.max") + ")");
}

TEST(ProcessLimitsTest, ReadsCgroupV1AndANamespacedRootAndTreatsHugeAsNoLimit) {
  testing::ScopedTempDir dir;
  // The path /proc/self/cgroup names does not exist under the mount (a
  // cgroup namespace shows the process's own cgroup as the root).
  Write(dir.File("proc_self_cgroup"), "4:memory:/outer/7f35\n0::/\n");
  Write(dir.File("cgroup/memory/memory.limit_in_bytes"), "536870912\n");
  Write(dir.File("cgroup/memory/memory.usage_in_bytes"), "104857600\n");
  ProcessLimits l = ReadProcessLimits(Fixture(dir));
  EXPECT_EQ(l.cgroup_memory_bytes, 536870912u);
  EXPECT_EQ(l.cgroup_memory_used_bytes, 104857600u);
  Write(dir.File("cgroup/memory/memory.limit_in_bytes"), "9223372036854771712\n");
  l = ReadProcessLimits(Fixture(dir));
  EXPECT_EQ(l.cgroup_memory_bytes, 0u);
  EXPECT_EQ(LimitedMemoryBytes(l, nullptr), 0u);
}

TEST(ProcessLimitsTest, AStartBelowALimitIsRefusedNamingIt) {
  LimitNeeds needs;
  ProcessLimits files;
  files.open_files = 64;
  files.open_files_hard = 64;
  Status st = FitProcessLimits(needs, &files, /*apply=*/false);
  EXPECT_EQ(st.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(st.message(),
            "the open-file limit (RLIMIT_NOFILE, ulimit -n) is 64 (hard limit 64), below the 256 Tether needs "
            "(connections, data files, checkpoints, logs): raise it (ulimit -n, or the scheduler's or the "
            "service's setting)");
  // A soft limit under a higher hard one is raised, not refused.
  ProcessLimits raised;
  raised.open_files = 64;
  raised.open_files_hard = 4096;
  EXPECT_TRUE(FitProcessLimits(needs, &raised, /*apply=*/false).ok());
  EXPECT_EQ(raised.open_files, 4096u);
  EXPECT_EQ(ConnectionDescriptorBudget(raised, 128), 4096u - 128);

  ProcessLimits as;
  as.address_space_bytes = 300ull << 20;
  as.mapped_bytes = 100ull << 20;
  st = FitProcessLimits(needs, &as, /*apply=*/false);
  EXPECT_EQ(st.message(),
            "the address-space limit (RLIMIT_AS, ulimit -v) is 300.0 MiB (314572800 bytes), and this process maps "
            "100.0 MiB (104857600 bytes) already: it needs 256.0 MiB (268435456 bytes) more to start; raise the "
            "limit (ulimit -v)");
  ProcessLimits cg;
  cg.cgroup_memory_bytes = 100ull << 20;
  cg.cgroup_memory_used_bytes = 90ull << 20;
  cg.cgroup_file = "/sys/fs/cgroup/memory.max";
  st = FitProcessLimits(needs, &cg, /*apply=*/false);
  EXPECT_EQ(st.message(),
            "the cgroup memory limit (/sys/fs/cgroup/memory.max) is 100.0 MiB (104857600 bytes), and 90.0 MiB "
            "(94371840 bytes) of it is in use: 64.0 MiB (67108864 bytes) more are needed to start; raise the "
            "container's or the job's memory limit");
  ProcessLimits fs;
  fs.file_size_bytes = 4096;
  st = FitProcessLimits(needs, &fs, /*apply=*/false);
  EXPECT_EQ(st.message(),
            "the file-size limit (RLIMIT_FSIZE, ulimit -f) is 4.0 KiB (4096 bytes), below the 1.0 MiB (1048576 "
            "bytes) a metrics file or a manifest may need: raise it (ulimit -f)");
}

TEST(ProcessLimitsTest, MemoryCeilingIsTheLowestOfMemoryAndLimits) {
  const uint64_t gib = uint64_t{1} << 30;
  ProcessLimits none;
  std::string source;
  EXPECT_EQ(MemoryCeilingBytes(none, &source, 64 * gib), 64 * gib);
  EXPECT_EQ(source, "physical memory");
  ProcessLimits cg;
  cg.cgroup_memory_bytes = 2 * gib;
  cg.cgroup_memory_used_bytes = gib;  // what is in use does not lower the ceiling
  cg.cgroup_file = "/sys/fs/cgroup/job/memory.max";
  EXPECT_EQ(MemoryCeilingBytes(cg, &source, 64 * gib), 2 * gib);
  EXPECT_EQ(source, "the cgroup memory limit (/sys/fs/cgroup/job/memory.max)");
  cg.address_space_bytes = gib;
  EXPECT_EQ(MemoryCeilingBytes(cg, &source, 64 * gib), gib);
  EXPECT_EQ(source, "the address-space limit (RLIMIT_AS, ulimit -v)");
  // A limit above the host's memory is no limit.
  ProcessLimits big;
  big.cgroup_memory_bytes = 128 * gib;
  EXPECT_EQ(MemoryCeilingBytes(big, &source, 64 * gib), 64 * gib);
  EXPECT_EQ(source, "physical memory");
  // This host's, read by sysconf.
  EXPECT_GT(MemoryCeilingBytes(none, nullptr), 0u);
}

TEST(ProcessLimitsTest, AWriteThatHitsTheFileSizeLimitIsNamed) {
  struct rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  EXPECT_EQ(FileSizeLimitNote(), old.rlim_cur == RLIM_INFINITY ? "" : FileSizeLimitNote());
  struct rlimit low = old;
  low.rlim_cur = 8192;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &low), 0);
  EXPECT_EQ(FileSizeLimitNote(), " (the file-size limit RLIMIT_FSIZE, ulimit -f, is 8192 bytes)");
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
}

}  // namespace
}  // namespace tether
