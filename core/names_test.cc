// Job ids and names: the alphabet taken where they enter, and how a peer's
// name is quoted in a log line.
#include "core/names.h"

#include <gtest/gtest.h>

#include "core/config.h"

namespace tether {
namespace {

TEST(NamesTest, OnlyAPlainAlphabetIsTaken) {
  for (const char* ok : {"bibtex", "slurm-77.0", "ompi-prterun-h-12345@1", "run_7+b:x", "A.b"})
    EXPECT_EQ(NameProblem(ok), "") << ok;
  EXPECT_EQ(NameProblem(""), "is empty");
  EXPECT_EQ(NameProblem(std::string(129, 'a')), "is 129 bytes long, above the 128-byte limit");
  EXPECT_EQ(NameProblem("a b"), "byte 2 is ' ' (0x20), which a name may not hold: use letters, digits and . _ @ + : -");
  EXPECT_EQ(NameProblem("job\n"), "byte 4 is 0x0a, which a name may not hold: use letters, digits and . _ @ + : -");
  EXPECT_EQ(NameProblem("../x"), "byte 1 is '.' (0x2e), which a name may not start with");
  EXPECT_EQ(NameProblem("a/b"), "byte 2 is '/' (0x2f), which a name may not hold: use letters, digits and . _ @ + : -");
  EXPECT_EQ(NameProblem("-x"), "byte 1 is '-' (0x2d), which a name may not start with");
  EXPECT_EQ(QuoteForLog("a\"b\nc'd\\"), "'a\"b\\x0ac\\x27d\\x5c'");
  EXPECT_EQ(QuoteForLog(std::string(70, 'x'), 4), "'xxxx...'");
}

TEST(NamesTest, AJobIdOrNameIsCheckedWhereTheConfigIsRead) {
  JobConfig c;
  c.set_name("job\x1b[31mred");
  Status st = ValidateServerConfig(c);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "config field name: byte 4 is 0x1b, which a name may not hold: use letters, digits and "
                          ". _ @ + : -");
  c.set_name("ok");
  c.mutable_cluster()->set_job_id("x y");
  EXPECT_EQ(ValidateServerConfig(c).message(),
            "config field cluster.job_id: byte 2 is ' ' (0x20), which a name may not hold: use letters, digits and . "
            "_ @ + : -");
}

}  // namespace
}  // namespace tether
