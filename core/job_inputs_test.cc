// Every file a job reads is listed with the flag or field naming it.
#include "core/job_inputs.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

namespace fs = std::filesystem;

std::string Listed(const std::vector<NamedInput>& inputs) {
  std::string out;
  for (const NamedInput& i : inputs) out += i.source + "=" + i.path + "\n";
  return out;
}

TEST(JobInputsTest, ConfigFlagfileDataFilesSplitsAndLabels) {
  JobConfig c;
  c.mutable_data()->set_train_file("a.txt");
  c.mutable_data()->set_test_file("b.txt, c.txt");
  c.mutable_data()->set_test_split("test.split");
  c.mutable_data()->set_train_label_file("train.labels");
  EXPECT_EQ(Listed(JobInputs("job.pbtxt", "f.flags", c)),
            "flag --config=job.pbtxt\nflag --flagfile=f.flags\ndata.train_file=a.txt\ndata.test_file=b.txt\n"
            "data.test_file=c.txt\ndata.test_split=test.split\ndata.train_label_file=train.labels\n");
  EXPECT_EQ(Listed(JobInputs("", "", JobConfig())), "");
}

TEST(JobInputsTest, PatternsAreExpanded) {
  const testing::ScopedTempDir tmp;
  const fs::path dir = tmp.path();
  std::ofstream((dir / "part-1.txt").string()) << "x\n";
  std::ofstream((dir / "part-2.txt").string()) << "x\n";
  JobConfig c;
  c.mutable_data()->set_train_file((dir / "part-*.txt").string());
  EXPECT_EQ(Listed(JobInputs("", "", c)),
            "data.train_file=" + (dir / "part-1.txt").string() + "\ndata.train_file=" + (dir / "part-2.txt").string() +
                "\n");
}

}  // namespace
}  // namespace tether
