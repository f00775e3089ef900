#include "telemetry/metrics_log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/testing/file_bytes.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

using testing::ReadFileBytes;
using testing::WriteFileBytes;

TEST(MetricsLogTest, MakesTheFolderAndItsParentsAndWritesOneObjectALine) {
  testing::ScopedTempDir tmp;
  const std::string dir = tmp.path() + "/out/bibtex";
  auto log = MetricsLog::Open(dir, "worker", 3, {});
  ASSERT_TRUE(log.ok()) << log.status().message();
  (*log)->Write({{"kind", "clock"}, {"clock", 7}});
  ASSERT_TRUE((*log)->Flush().ok());
  EXPECT_EQ((*log)->path(), dir + "/worker-3.jsonl");
  EXPECT_EQ((*log)->moved_to(), "");
  const std::string text = ReadFileBytes(dir + "/worker-3.jsonl");
  ASSERT_EQ(text.back(), '\n');
  const nlohmann::json line = nlohmann::json::parse(text);
  EXPECT_EQ(line["kind"], "clock");
  EXPECT_EQ(line["clock"], 7);
  EXPECT_EQ(line["role"], "worker");
  EXPECT_EQ(line["rank"], 3);
  EXPECT_TRUE(line.contains("t") && line.contains("unix_time"));
}

TEST(MetricsLogTest, AnEarlierRunIsMovedAsideNeverAppendedTo) {
  testing::ScopedTempDir tmp;
  const std::string dir = tmp.path();
  // An empty file (a process that wrote nothing) is simply reused.
  WriteFileBytes(dir + "/server-0.jsonl", "");
  {
    auto log = MetricsLog::Open(dir, "server", 0, {});
    ASSERT_TRUE(log.ok());
    EXPECT_EQ((*log)->moved_to(), "");
    (*log)->Write({{"run", 1}});
  }
  // Two more runs: each earlier one keeps its lines in a file of its own,
  // oldest first; a name already taken is skipped, never overwritten.
  WriteFileBytes(dir + "/server-0.2.jsonl", "{\"someone\":\"else\"}\n");
  for (int run = 2; run <= 3; ++run) {
    auto log = MetricsLog::Open(dir, "server", 0, {});
    ASSERT_TRUE(log.ok()) << log.status().message();
    EXPECT_EQ((*log)->moved_to(), dir + (run == 2 ? "/server-0.1.jsonl" : "/server-0.3.jsonl"));
    (*log)->Write({{"run", run}});
  }
  EXPECT_EQ(nlohmann::json::parse(ReadFileBytes(dir + "/server-0.1.jsonl"))["run"], 1);
  EXPECT_EQ(ReadFileBytes(dir + "/server-0.2.jsonl"), "{\"someone\":\"else\"}\n");
  EXPECT_EQ(nlohmann::json::parse(ReadFileBytes(dir + "/server-0.3.jsonl"))["run"], 2);
  EXPECT_EQ(nlohmann::json::parse(ReadFileBytes(dir + "/server-0.jsonl"))["run"], 3);
}

TEST(MetricsLogTest, AFolderThatCannotBeMadeIsNamed) {
  testing::ScopedTempDir tmp;
  WriteFileBytes(tmp.path() + "/file", "x");
  auto log = MetricsLog::Open(tmp.path() + "/file/sub", "worker", 0, {});
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("cannot create metrics directory " + tmp.path() + "/file/sub"),
            std::string::npos)
      << log.status().message();
}

TEST(MetricsLogTest, ALinkStaysAndItsTargetIsMovedAsideInItsOwnFolder) {
  testing::ScopedTempDir tmp;
  const std::string dir = tmp.path() + "/mdir";
  std::filesystem::create_directories(dir);
  std::filesystem::create_directories(tmp.path() + "/real");
  WriteFileBytes(tmp.path() + "/real/w0.jsonl", "{\"run\":1}\n");
  std::filesystem::create_symlink("../real/w0.jsonl", dir + "/worker-0.jsonl");
  {
    auto log = MetricsLog::Open(dir, "worker", 0, {});
    ASSERT_TRUE(log.ok()) << log.status().message();
    EXPECT_EQ((*log)->moved_to(), tmp.path() + "/real/w0.1.jsonl");
    (*log)->Write({{"run", 2}});
    ASSERT_TRUE((*log)->Flush().ok());
  }
  EXPECT_TRUE(std::filesystem::is_symlink(dir + "/worker-0.jsonl"));
  EXPECT_EQ(std::filesystem::read_symlink(dir + "/worker-0.jsonl"), "../real/w0.jsonl");
  EXPECT_EQ(ReadFileBytes(tmp.path() + "/real/w0.1.jsonl"), "{\"run\":1}\n");
  EXPECT_EQ(nlohmann::json::parse(ReadFileBytes(tmp.path() + "/real/w0.jsonl"))["run"], 2);
  // Nothing else appeared in the metrics folder (the link's name is not
  // moved aside there) but the process's lock file.
  std::set<std::string> entries;
  for (const auto& e : std::filesystem::directory_iterator(dir)) entries.insert(e.path().filename().string());
  EXPECT_EQ(entries, (std::set<std::string>{"worker-0.jsonl", "worker-0.lock"}));
  // A target without .jsonl: NAME.1 next to it.
  WriteFileBytes(tmp.path() + "/real/log", "{\"run\":3}\n");
  std::filesystem::create_symlink("../real/log", dir + "/server-0.jsonl");
  auto log = MetricsLog::Open(dir, "server", 0, {});
  ASSERT_TRUE(log.ok()) << log.status().message();
  EXPECT_EQ((*log)->moved_to(), tmp.path() + "/real/log.1");
}

TEST(MetricsLogTest, AStreamOrAFolderThereIsRefusedNamingTheField) {
  testing::ScopedTempDir tmp;
  const std::string dir = tmp.path();
  ASSERT_EQ(::mkfifo((dir + "/worker-0.jsonl").c_str(), 0600), 0) << std::strerror(errno);
  auto log = MetricsLog::Open(dir, "worker", 0, {});
  EXPECT_EQ(log.status().message(),
            "train.metrics_dir (--metrics_dir)=" + dir +
                "/worker-0.jsonl: is a character device or FIFO, not a regular file; an earlier run's lines there "
                "would be moved aside, which it cannot be: remove it, or give another folder");
  EXPECT_TRUE(std::filesystem::is_fifo(dir + "/worker-0.jsonl"));
  std::filesystem::create_directories(dir + "/worker-1.jsonl");
  log = MetricsLog::Open(dir, "worker", 1, {});
  EXPECT_EQ(log.status().message(),
            "train.metrics_dir (--metrics_dir)=" + dir + "/worker-1.jsonl: is a directory; give a file name");
  EXPECT_TRUE(std::filesystem::is_directory(dir + "/worker-1.jsonl"));
}

TEST(MetricsLogTest, ALinkToAnInputIsRefusedAndTheInputKept) {
  testing::ScopedTempDir tmp;
  const std::string train = tmp.path() + "/train.txt";
  WriteFileBytes(train, "1 1:0.5\n");
  std::filesystem::create_directories(tmp.path() + "/mdir");
  std::filesystem::create_symlink(train, tmp.path() + "/mdir/worker-0.jsonl");
  auto log = MetricsLog::Open(tmp.path() + "/mdir", "worker", 0, {{"data.train_file", train}});
  EXPECT_EQ(log.status().message(), "train.metrics_dir (--metrics_dir)=" + tmp.path() +
                                        "/mdir/worker-0.jsonl is the same file as data.train_file=" + train +
                                        ": writing it would destroy an input of this run; give another file name");
  EXPECT_EQ(ReadFileBytes(train), "1 1:0.5\n");
  EXPECT_TRUE(std::filesystem::is_symlink(tmp.path() + "/mdir/worker-0.jsonl"));
}

TEST(MetricsLogTest, ASecondLiveProcessOfOneRankIsRefusedOtherRanksShareTheFolder) {
  testing::ScopedTempDir tmp;
  const std::string dir = tmp.path() + "/md";
  auto first = MetricsLog::Open(dir, "worker", 0, {});
  ASSERT_TRUE(first.ok()) << first.status().message();
  (*first)->Write({{"run", 1}});
  ASSERT_TRUE((*first)->Flush().ok());
  // The other processes of the job: a file and a lock each.
  auto rank1 = MetricsLog::Open(dir, "worker", 1, {});
  auto server0 = MetricsLog::Open(dir, "server", 0, {});
  ASSERT_TRUE(rank1.ok()) << rank1.status().message();
  ASSERT_TRUE(server0.ok()) << server0.status().message();

  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string refused = "train.metrics_dir (--metrics_dir)=" + dir + ": worker-0.jsonl: in use by a live job (pid " +
                              std::to_string(getpid()) + " on host " + host + ", holding " + dir +
                              "/worker-0.lock): another process of that rank writes it; give this job its own folder "
                              "(each process of one job writes a file of its own there) (a lock of a process that "
                              "died is released with it)";
  EXPECT_EQ(MetricsLog::CheckPath(dir, "worker", 0, {}).message(), refused);
  auto second = MetricsLog::Open(dir, "worker", 0, {});
  EXPECT_EQ(second.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(second.status().message(), refused);
  // Refused before anything moved: the live run's file is where it was.
  EXPECT_EQ(nlohmann::json::parse(ReadFileBytes(dir + "/worker-0.jsonl"))["run"], 1);
  EXPECT_FALSE(std::filesystem::exists(dir + "/worker-0.1.jsonl"));

  first->reset();  // the first process ends: its file is an earlier run now
  EXPECT_TRUE(MetricsLog::CheckPath(dir, "worker", 0, {}).ok());
  auto third = MetricsLog::Open(dir, "worker", 0, {});
  ASSERT_TRUE(third.ok()) << third.status().message();
  EXPECT_EQ((*third)->moved_to(), dir + "/worker-0.1.jsonl");
}

}  // namespace
}  // namespace tether
