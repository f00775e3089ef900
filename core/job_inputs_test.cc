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
  EXPECT_EQ(Listed(JobInputs("job.pbtxt", "f.flags", c, "ck")),
            "flag --config=job.pbtxt\nflag --flagfile=f.flags\ndata.train_file=a.txt\ndata.test_file=b.txt\n"
            "data.test_file=c.txt\ndata.test_split=test.split\ndata.train_label_file=train.labels\n"
            "flag --resume_from=ck\n");
  EXPECT_EQ(Listed(JobInputs("", "", JobConfig(), "")), "");
}

TEST(JobInputsTest, PatternsAreExpanded) {
  const testing::ScopedTempDir tmp;
  const fs::path dir = tmp.path();
  std::ofstream((dir / "part-1.txt").string()) << "x\n";
  std::ofstream((dir / "part-2.txt").string()) << "x\n";
  JobConfig c;
  c.mutable_data()->set_train_file((dir / "part-*.txt").string());
  EXPECT_EQ(Listed(JobInputs("", "", c, "")),
            "data.train_file=" + (dir / "part-1.txt").string() + "\ndata.train_file=" + (dir / "part-2.txt").string() +
                "\n");
}

void Write(const fs::path& path, const std::string& text) { std::ofstream(path.string()) << text; }

std::string Refusal(const std::vector<NamedInput>& outputs, const std::vector<NamedInput>& inputs) {
  const Status st = CheckOutputs(outputs, inputs);
  return st.ok() ? "ok" : st.message();
}

// A checkpoint given as an input is a folder: every file under it, at any
// depth and however named, is refused as an output.
TEST(CheckOutputsTest, EveryFileUnderAFolderInputIsAnInput) {
  const testing::ScopedTempDir tmp;
  const fs::path ck = fs::path(tmp.path()) / "ck";
  const fs::path final_dir = ck / "ckpt-000000000340-final";
  fs::create_directories(final_dir);
  Write(final_dir / "MANIFEST", "m\n");
  Write(final_dir / "shard-0.tables", "t\n");
  Write(fs::path(tmp.path()) / "other.bin", "o\n");
  fs::create_symlink(final_dir / "MANIFEST", fs::path(tmp.path()) / "link");
  const std::vector<NamedInput> inputs = {{"flag --checkpoint", ck.string()}};
  const std::string shard = (final_dir / "shard-0.tables").string();
  EXPECT_EQ(Refusal({{"flag --out", shard}}, inputs),
            "flag --out=" + shard + " is the same file as " + shard + ", under flag --checkpoint=" + ck.string() +
                ": writing it would destroy an input of this run; give another file name");
  const std::string link = (fs::path(tmp.path()) / "link").string();
  EXPECT_EQ(Refusal({{"flag --model_out", link}}, inputs),
            "flag --model_out=" + link + " is the same file as " + (final_dir / "MANIFEST").string() +
                ", under flag --checkpoint=" + ck.string() +
                ": writing it would destroy an input of this run; give another file name");
  EXPECT_EQ(Refusal({{"flag --out", (final_dir / "new.npz").string()}}, inputs), "ok");
  EXPECT_EQ(Refusal({{"flag --out", (fs::path(tmp.path()) / "other.bin").string()}}, inputs), "ok");
}

TEST(CheckOutputsTest, AFileInputIsRefusedByName) {
  const testing::ScopedTempDir tmp;
  const std::string data = (fs::path(tmp.path()) / "train.txt").string();
  Write(data, "1 1:1\n");
  EXPECT_EQ(Refusal({{"flag --out", ""}, {"flag --metrics_out", data}}, {{"data.train_file", data}}),
            "flag --metrics_out=" + data + " is the same file as data.train_file=" + data +
                ": writing it would destroy an input of this run; give another file name");
}

// Two outputs of one run: the same path (existing or not, through a link or
// a hard link) is refused; /dev/null may take both.
TEST(CheckOutputsTest, TwoOutputsMayNotBeOneFile) {
  const testing::ScopedTempDir tmp;
  const fs::path dir = tmp.path();
  const std::string same = (dir / "same.out").string();
  const std::string expected = "flag --output=" + same + " and flag --metrics_out=" + same +
                               " are the same file: one output would overwrite the other; give each its own file name";
  EXPECT_EQ(Refusal({{"flag --output", same}, {"flag --metrics_out", same}}, {}), expected);
  const std::string dotted = (dir / "." / "same.out").string();
  fs::create_symlink(dir / "same.out", dir / "to-same");
  EXPECT_EQ(Refusal({{"flag --output", same}, {"flag --metrics_out", (dir / "to-same").string()}}, {}),
            "flag --output=" + same + " and flag --metrics_out=" + (dir / "to-same").string() +
                " are the same file: one output would overwrite the other; give each its own file name");
  EXPECT_NE(Refusal({{"flag --output", same}, {"flag --metrics_out", dotted}}, {}), "ok");
  Write(same, "p\n");
  fs::create_hard_link(same, dir / "hard");
  EXPECT_NE(Refusal({{"flag --output", same}, {"flag --metrics_out", (dir / "hard").string()}}, {}), "ok");
  EXPECT_EQ(Refusal({{"flag --output", same}, {"flag --metrics_out", (dir / "m.json").string()}}, {}), "ok");
  EXPECT_EQ(Refusal({{"flag --output", "/dev/null"}, {"flag --metrics_out", "/dev/null"}}, {}), "ok");
}

}  // namespace
}  // namespace tether
