#include "core/config.h"

#include <gtest/gtest.h>

namespace tether {
namespace {

TEST(ConfigTest, ExampleBibtexConfigLoadsAndValidates) {
  auto c = LoadJobConfig("examples/bibtex.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->cluster().num_servers(), 2);
  EXPECT_EQ(c->cluster().num_workers(), 2);
  EXPECT_EQ(c->consistency().staleness(), 2);
  EXPECT_EQ(c->data().index_base(), 0);
  EXPECT_EQ(c->model().hidden(), 256);
  EXPECT_TRUE(ValidateJobConfig(*c).ok());
}

TEST(ConfigTest, UnknownFieldNamesFileLineAndSuggestion) {
  const std::string text = "name: \"x\"\nconsistency { staleness_bond: 3 }\n";
  auto c = ParseJobConfig(text, "job.pbtxt");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("job.pbtxt:2:"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("'staleness_bond'"), std::string::npos);
  EXPECT_NE(c.status().message().find("did you mean 'staleness'?"), std::string::npos);
}

// C20, with the case's own file adapted to Tether's schema (the typo stays
// on line 2): the start is refused naming file:line, the unknown name and
// the closest valid one.
TEST(ConfigTest, C20TypoFileNamesFileLineNameAndSuggestion) {
  const std::string path = "tests/data/cases/C20_config_typo.pbtxt";
  auto c = LoadJobConfig(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(c.status().message(), path + ":2: unknown field 'staleness_bond' (did you mean 'staleness'?)");
}

// The case's file verbatim writes the typo at the top level, where Tether
// has no staleness field: the suggestion says where the field belongs.
TEST(ConfigTest, C20TypoAtTheWrongLevelSaysWhereTheFieldBelongs) {
  auto c = ParseJobConfig("# job config with a typo on line 2\nstaleness_bond: 3\nlearning_rate: 0.1\n",
                          "C20_config_typo.pbtxt");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "C20_config_typo.pbtxt:2: unknown field 'staleness_bond' (did you mean 'staleness'? "
            "it belongs in consistency { staleness: ... })");
  // A right name at the wrong level is still refused, never silently dropped.
  auto level = ParseJobConfig("learning_rate: 0.1\n", "j.pbtxt");
  ASSERT_FALSE(level.ok());
  EXPECT_EQ(level.status().message(), "j.pbtxt:1: unknown field 'learning_rate' (did you mean 'learning_rate'? "
                                      "it belongs in optimizer { learning_rate: ... })");
}

TEST(ConfigTest, UnknownEnumValueSuggestsTheClosest) {
  auto c = ParseJobConfig("optimizer {\n  type: ADAMW\n}\n", "j.pbtxt");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "j.pbtxt:2: unknown value 'ADAMW' for field 'type' (did you mean 'ADAM'? "
                                  "valid: SGD, ADAGRAD, ADAM, SUM)");
  // The reported line is the culprit's, not the next token's.
  auto split = ParseJobConfig("name: \"x\"\nconsistensy\n{\n  staleness: 1\n}\n", "j.pbtxt");
  ASSERT_FALSE(split.ok());
  EXPECT_EQ(split.status().message(), "j.pbtxt:2: unknown field 'consistensy' (did you mean 'consistency'?)");
  auto lower = ParseJobConfig("optimizer { type: adam }\n", "j.pbtxt");
  ASSERT_FALSE(lower.ok());
  EXPECT_EQ(lower.status().message(), "j.pbtxt:1: unknown value 'adam' for field 'type' (did you mean 'ADAM'? "
                                      "enum values are upper case)");
}

TEST(ConfigTest, SyntaxErrorNamesLine) {
  auto c = ParseJobConfig("name: \"x\"\n\ntrain { epochs: ten }\n", "j.pbtxt");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message().rfind("j.pbtxt:3:", 0), 0u) << c.status().message();
}

TEST(ConfigTest, MissingFileIsNotFound) {
  auto c = LoadJobConfig("/nonexistent/job.pbtxt");
  EXPECT_EQ(c.status().code(), Status::Code::kNotFound);
}

TEST(ConfigTest, OverridesParseByFieldType) {
  JobConfig c;
  ASSERT_TRUE(ApplyOverride(&c, "consistency.staleness", "inf", "flag --staleness").ok());
  EXPECT_EQ(c.consistency().staleness(), -1);
  ASSERT_TRUE(ApplyOverride(&c, "consistency.staleness", "4", "flag --staleness").ok());
  EXPECT_EQ(c.consistency().staleness(), 4);
  ASSERT_TRUE(ApplyOverride(&c, "optimizer.learning_rate", "0.05", "flag --learning_rate").ok());
  EXPECT_FLOAT_EQ(c.optimizer().learning_rate(), 0.05f);
  ASSERT_TRUE(ApplyOverride(&c, "optimizer.type", "sgd", "flag --optimizer").ok());
  EXPECT_EQ(c.optimizer().type(), SGD);
  ASSERT_TRUE(ApplyOverride(&c, "train.seed", "42", "flag --seed").ok());
  EXPECT_EQ(c.train().seed(), 42u);
  Status bad = ApplyOverride(&c, "train.epochs", "3x", "flag --epochs");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("flag --epochs=3x"), std::string::npos) << bad.message();
  Status bad_enum = ApplyOverride(&c, "model.loss", "hinge", "flag --loss");
  EXPECT_NE(bad_enum.message().find("softmax, bce"), std::string::npos) << bad_enum.message();
}

TEST(ConfigTest, ValidationNamesTheField) {
  auto c = LoadJobConfig("examples/bibtex.pbtxt");
  ASSERT_TRUE(c.ok());
  JobConfig j = *c;
  j.mutable_data()->clear_index_base();
  Status st = ValidateJobConfig(j);
  EXPECT_NE(st.message().find("data.index_base"), std::string::npos) << st.message();
  j = *c;
  j.mutable_optimizer()->set_learning_rate(-1);
  EXPECT_NE(ValidateJobConfig(j).message().find("optimizer.learning_rate"), std::string::npos);
  // A straggler rank outside the job would silently simulate nothing.
  j = *c;
  j.mutable_train()->set_slowdown(2.0f);
  j.mutable_train()->set_slowdown_rank(2);  // bibtex has 2 workers
  EXPECT_NE(ValidateJobConfig(j).message().find("train.slowdown_rank"), std::string::npos);
  j.mutable_train()->set_slowdown_rank(1);
  EXPECT_TRUE(ValidateJobConfig(j).ok());
}

TEST(ConfigTest, ClosestName) {
  EXPECT_EQ(ClosestName("stalenes", {"staleness", "seed", "epochs"}), "staleness");
  EXPECT_EQ(ClosestName("zzzzzzzz", {"staleness", "seed"}), "");
}

}  // namespace
}  // namespace tether
