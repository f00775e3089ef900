#include "core/config.h"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

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
  // The settings chosen on the validation split (docs/search_bibtex.md).
  EXPECT_TRUE(c->data().tf_idf());
  EXPECT_TRUE(c->data().normalize_rows());
  EXPECT_FLOAT_EQ(c->model().dropout(), 0.6f);
  EXPECT_FLOAT_EQ(c->model().label_smoothing(), 0.2f);
  EXPECT_EQ(c->optimizer().type(), ADAM);
  EXPECT_FLOAT_EQ(c->optimizer().learning_rate(), 0.00204f);
  EXPECT_FLOAT_EQ(c->optimizer().weight_decay(), 0.05f);
  EXPECT_EQ(c->train().epochs(), 17);
  EXPECT_EQ(c->train().minibatch_size(), 128);
  EXPECT_TRUE(ValidateJobConfig(*c).ok());
}

TEST(ConfigTest, ByteOrderMarkIsNamedWithTheFix) {
  auto c = ParseJobConfig("\xEF\xBB\xBFname: \"x\"\n", "job.pbtxt");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "job.pbtxt:1: the file starts with a UTF-8 byte-order mark (bytes EF BB BF), which Protobuf's text "
            "format does not read: save it without one (UTF-8 without BOM), e.g. sed -i '1s/^\\xEF\\xBB\\xBF//' "
            "job.pbtxt");
}

TEST(ConfigTest, BoolOverridesAreBooleanFlags) {
  int bools = 0;
  for (const ConfigOverride& o : ConfigOverrides()) {
    const std::string flag = o.flag;
    if (OverrideIsBool(o)) ++bools;
    if (flag == "data_on_demand" || flag == "adaptive_batch" || flag == "pipeline" || flag == "tf_idf") {
      EXPECT_TRUE(OverrideIsBool(o)) << flag;
    }
    if (flag == "staleness" || flag == "optimizer" || flag == "train_file") {
      EXPECT_FALSE(OverrideIsBool(o)) << flag;
    }
  }
  // normalize_rows, tf_idf, adaptive_batch, data_on_demand, chunk_taper,
  // pipeline, error_feedback, fail_on_divergence, accept_partial_eval,
  // key_list_cache.
  EXPECT_EQ(bools, 10);
}

TEST(ConfigTest, TableBudgetsAreCheckedWithTheField) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  TableConfig* w1 = c->mutable_table(0);
  ASSERT_EQ(w1->name(), "w1");
  w1->set_admit_after(2);
  EXPECT_TRUE(ValidateJobConfig(*c).ok()) << ValidateJobConfig(*c).message();
  EXPECT_EQ(BudgetForTable(*c, "w1").admit_after(), 2u);
  EXPECT_FALSE(BudgetForTable(*c, "w2").has_admit_after());
  w1->set_admit_probability(0.5f);
  EXPECT_EQ(ValidateJobConfig(*c).message(),
            "config field table[w1].admit_probability: admit_after and admit_probability exclude each other; set one");
  w1->clear_admit_probability();
  w1->set_admit_after(0);
  EXPECT_EQ(ValidateJobConfig(*c).message(),
            "config field table[w1].admit_after: must be ≥ 1 (a key gets a row at its K-th push), got 0");
  w1->clear_admit_after();
  w1->set_admit_probability(0.0f);
  EXPECT_EQ(ValidateJobConfig(*c).message(), "config field table[w1].admit_probability: must be in (0, 1], got 0.000000");
  w1->set_admit_probability(1.5f);
  EXPECT_EQ(ValidateJobConfig(*c).message(), "config field table[w1].admit_probability: must be in (0, 1], got 1.500000");
  w1->clear_admit_probability();
  w1->set_evict(LRU);
  EXPECT_EQ(ValidateJobConfig(*c).message(),
            "config field table[w1].max_rows: evict LRU needs max_rows ≥ 1 (the rows to keep)");
  w1->set_max_rows(0);
  EXPECT_EQ(ValidateJobConfig(*c).message(), "config field table[w1].max_rows: must be ≥ 1, got 0");
  w1->set_max_rows(100);
  EXPECT_TRUE(ValidateJobConfig(*c).ok()) << ValidateJobConfig(*c).message();
  w1->set_evict(TTL);
  EXPECT_EQ(ValidateJobConfig(*c).message(), "config field table[w1].ttl_clocks: evict TTL needs ttl_clocks ≥ 1");
  w1->set_ttl_clocks(5);
  EXPECT_TRUE(ValidateJobConfig(*c).ok()) << ValidateJobConfig(*c).message();
  w1->set_evict(LFU);
  EXPECT_EQ(ValidateJobConfig(*c).message(), "config field table[w1].ttl_clocks: is read only with evict: TTL");
  w1->clear_ttl_clocks();
  c->mutable_train()->set_validation_fraction(0.1);
  EXPECT_EQ(ValidateJobConfig(*c).message(),
            "config field train.keep_best_model: cannot keep the best epoch's copy of table 'w1', which evicts rows; "
            "set train.keep_best_model: false");
  // A shard budget makes every row table evict.
  c->clear_table();
  EXPECT_TRUE(ValidateJobConfig(*c).ok()) << ValidateJobConfig(*c).message();
  c->mutable_cluster()->set_server_memory_bytes(1 << 30);
  EXPECT_EQ(ValidateJobConfig(*c).message(),
            "config field train.keep_best_model: cannot keep the best epoch's copy with cluster.server_memory_bytes "
            "(--server_memory), whose row tables evict rows; set train.keep_best_model: false");
}

TEST(ConfigTest, NegativeProgressAndEvalCountsAreRefused) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  c->mutable_train()->set_progress_every_s(-1);
  EXPECT_EQ(ValidateJobConfig(*c).message(),
            "config field train.progress_every_s: must be ≥ 0 seconds (0: no progress lines), got -1");
  c->mutable_train()->set_progress_every_s(0);
  c->mutable_train()->set_eval_max_rows(-2);
  EXPECT_EQ(ValidateJobConfig(*c).message(), "config field train.eval_max_rows: must be ≥ 0 (0: every test row), got -2");
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
                                  "valid: SGD, ADAGRAD, ADAM, SUM, NOOP, FTRL)");
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

// A block left open, or a field without its value, at the end of the file
// is named as such: Protobuf names the token it found, and there is none.
TEST(ConfigTest, AFileThatEndsInsideABlockSaysSo) {
  auto open = ParseJobConfig("name: \"x\"\ncluster {\n  num_servers: 1\n", "j.pbtxt");
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.status().message(),
            "j.pbtxt:4: Expected identifier, got: (the end of the file: a value or a closing '}' is missing)");
  auto value = ParseJobConfig("name: \"x\"\ntrain { epochs:", "j.pbtxt");
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.status().message(),
            "j.pbtxt:2: Expected integer, got: (the end of the file: a value or a closing '}' is missing)");
}

TEST(ConfigTest, MissingFileIsNotFound) {
  auto c = LoadJobConfig("/nonexistent/job.pbtxt");
  EXPECT_EQ(c.status().code(), Status::Code::kNotFound);
}

TEST(ConfigTest, ADirectoryIsRefusedAsSuch) {
  auto c = LoadJobConfig("examples");
  EXPECT_EQ(c.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(c.status().message(), "examples: is a directory, not a config file (a .pbtxt job config)");
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

// The text-format wrapper: each field type through protobuf's own parser,
// plus what flags add (bare strings, enum names in any case, inf/asp/bsp).
TEST(ConfigTest, OverridesGoThroughTextFormatWithFlagConveniences) {
  JobConfig c;
  ASSERT_TRUE(ApplyOverride(&c, "data.train_file", "data/a b.txt", "flag --train_file").ok());
  EXPECT_EQ(c.data().train_file(), "data/a b.txt");  // no quotes needed, spaces kept
  ASSERT_TRUE(ApplyOverride(&c, "data.normalize_rows", "true", "flag --normalize_rows").ok());
  EXPECT_TRUE(c.data().normalize_rows());
  ASSERT_TRUE(ApplyOverride(&c, "data.normalize_rows", "0", "flag --normalize_rows").ok());
  EXPECT_FALSE(c.data().normalize_rows());
  ASSERT_TRUE(ApplyOverride(&c, "optimizer.type", "AdAm", "flag --optimizer").ok());
  EXPECT_EQ(c.optimizer().type(), ADAM);
  ASSERT_TRUE(ApplyOverride(&c, "train.slowdown", "2.5", "flag --slowdown").ok());
  EXPECT_FLOAT_EQ(c.train().slowdown(), 2.5f);
  // A bad value leaves the field as it was and names flag, value and field.
  Status st = ApplyOverride(&c, "train.slowdown", "fast", "flag --slowdown");
  EXPECT_EQ(st.message(), "flag --slowdown=fast: expected a number (field train.slowdown)");
  EXPECT_FLOAT_EQ(c.train().slowdown(), 2.5f);
  EXPECT_EQ(ApplyOverride(&c, "train.epochs", "99999999999", "flag --epochs").message(),
            "flag --epochs=99999999999: expected a 32-bit integer (field train.epochs)");
  EXPECT_EQ(ApplyOverride(&c, "train.seed", "-1", "flag --seed").message(),
            "flag --seed=-1: expected a non-negative integer (field train.seed)");
  EXPECT_EQ(ApplyOverride(&c, "data.normalize_rows", "yes", "flag --normalize_rows").message(),
            "flag --normalize_rows=yes: expected true or false (field data.normalize_rows)");
  EXPECT_EQ(ApplyOverride(&c, "consistency.staleness", "often", "flag --staleness").message(),
            "flag --staleness=often: expected an integer, inf or asp (field consistency.staleness)");
  EXPECT_EQ(ApplyOverride(&c, "no.such", "1", "flag --x").code(), Status::Code::kInternal);
}

// A staleness flag is one bound for the whole run: the model follows the
// number, and tables' own bounds give way.
TEST(ConfigTest, StalenessOverrideAppliesToEveryTable) {
  auto c = ParseJobConfig(
      "consistency { model: BSP }\n"
      "table { name: \"w1\" consistency { model: SSP staleness: 5 } }\n",
      "t.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  JobConfig j = *c;
  ASSERT_TRUE(ApplyOverride(&j, "consistency.staleness", "ASP", "flag --staleness").ok());
  EXPECT_EQ(j.consistency().model(), ASP);
  EXPECT_EQ(j.consistency().staleness(), -1);
  EXPECT_FALSE(j.table(0).consistency().has_staleness());
  EXPECT_EQ(EffectiveStaleness(ConsistencyForTable(j, "w1")), -1);
  ASSERT_TRUE(ApplyOverride(&j, "consistency.staleness", "bsp", "flag --staleness").ok());
  EXPECT_EQ(j.consistency().model(), SSP);
  EXPECT_EQ(EffectiveStaleness(ConsistencyForTable(j, "w1")), 0);
  ASSERT_TRUE(ApplyOverride(&j, "consistency.staleness", "3", "flag --staleness").ok());
  EXPECT_EQ(EffectiveStaleness(ConsistencyForTable(j, "w1")), 3);
}

// --cache_capacity and --memory_limit take byte sizes with units; the cache
// capacity also a percentage of the model, each form clearing the other.
TEST(ConfigTest, CacheCapacityAndMemoryLimitFlagsTakeUnitsAndPercentages) {
  JobConfig j;
  ASSERT_TRUE(ApplyOverride(&j, "consistency.cache_capacity_bytes", "64MiB", "flag --cache_capacity").ok());
  EXPECT_EQ(j.consistency().cache_capacity_bytes(), 64u << 20);
  ASSERT_TRUE(ApplyOverride(&j, "consistency.cache_capacity_bytes", "10%", "flag --cache_capacity").ok());
  EXPECT_EQ(j.consistency().cache_capacity_fraction(), 0.1);
  EXPECT_FALSE(j.consistency().has_cache_capacity_bytes());
  EXPECT_TRUE(ValidateServerConfig(j).ok());
  ASSERT_TRUE(ApplyOverride(&j, "consistency.cache_capacity_bytes", "1.5GB", "flag --cache_capacity").ok());
  EXPECT_EQ(j.consistency().cache_capacity_bytes(), 1500000000u);
  EXPECT_FALSE(j.consistency().has_cache_capacity_fraction());
  ASSERT_TRUE(ApplyOverride(&j, "consistency.memory_limit_bytes", "8GiB", "flag --memory_limit").ok());
  EXPECT_EQ(j.consistency().memory_limit_bytes(), 8ull << 30);
  Status st = ApplyOverride(&j, "consistency.cache_capacity_bytes", "64M", "flag --cache_capacity");
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("flag --cache_capacity=64M: '64M' is not a byte size"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("or a percentage such as 10%"), std::string::npos) << st.message();
  st = ApplyOverride(&j, "consistency.cache_capacity_bytes", "150%", "flag --cache_capacity");
  EXPECT_NE(st.message().find("expected a percentage in (0, 100]"), std::string::npos) << st.message();
  EXPECT_EQ(j.consistency().cache_capacity_bytes(), 1500000000u) << "a bad value leaves the config as it was";
  ASSERT_TRUE(ApplyOverride(&j, "cluster.server_memory_bytes", "2GiB", "flag --server_memory").ok());
  EXPECT_EQ(j.cluster().server_memory_bytes(), 2ull << 30);
  ASSERT_TRUE(ApplyOverride(&j, "cluster.server_memory_bytes", "512MB", "flag --server_memory").ok());
  EXPECT_EQ(j.cluster().server_memory_bytes(), 512000000u);
  ASSERT_TRUE(ApplyOverride(&j, "cluster.server_memory_bytes", "4096", "flag --server_memory").ok());
  EXPECT_EQ(j.cluster().server_memory_bytes(), 4096u);
  st = ApplyOverride(&j, "cluster.server_memory_bytes", "2G", "flag --server_memory");
  EXPECT_NE(st.message().find("flag --server_memory=2G: '2G' is not a byte size"), std::string::npos) << st.message();
  EXPECT_EQ(j.cluster().server_memory_bytes(), 4096u);
  // Every row of the override table names a field.
  bool found = false;
  for (const ConfigOverride& o : ConfigOverrides()) found |= std::string(o.flag) == "cache_capacity";
  EXPECT_TRUE(found);
}

TEST(ConfigTest, CacheCapacityIsJobWideAndOneFormAtATime) {
  auto c = ParseJobConfig("consistency { cache_capacity_bytes: 1000 cache_capacity_fraction: 0.5 }\n", "t.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_NE(ValidateServerConfig(*c).message().find(
                "config field consistency.cache_capacity_fraction: and consistency.cache_capacity_bytes are both set"),
            std::string::npos)
      << ValidateServerConfig(*c).message();
  c = ParseJobConfig("consistency { cache_capacity_fraction: 1.5 }\n", "t.pbtxt");
  EXPECT_EQ(ValidateServerConfig(*c).message(),
            "config field consistency.cache_capacity_fraction: must be in (0, 1], or 0 (not set)");
  c = ParseJobConfig("table { name: \"w2\" consistency { cache_capacity_bytes: 5 } }\n", "t.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_NE(ValidateServerConfig(*c).message().find(
                "config field table[w2].consistency.cache_capacity_bytes: is job-wide"),
            std::string::npos)
      << ValidateServerConfig(*c).message();
}

// Key lists off on the workers (consistency.key_list_cache): on by default,
// the flag sets it, a table may not.
TEST(ConfigTest, KeyListCacheIsAJobWideSwitch) {
  JobConfig j;
  EXPECT_TRUE(j.consistency().key_list_cache());
  ASSERT_TRUE(ApplyOverride(&j, "consistency.key_list_cache", "false", "flag --key_list_cache").ok());
  EXPECT_FALSE(j.consistency().key_list_cache());
  EXPECT_EQ(ApplyOverride(&j, "consistency.key_list_cache", "off", "flag --key_list_cache").message(),
            "flag --key_list_cache=off: expected true or false (field consistency.key_list_cache)");
  auto c = ParseJobConfig("table { name: \"w2\" consistency { key_list_cache: false } }\n", "t.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_NE(ValidateServerConfig(*c).message().find("config field table[w2].consistency.key_list_cache: is job-wide"),
            std::string::npos)
      << ValidateServerConfig(*c).message();
}

// A flag only one mode reads is refused without that mode, naming the flag,
// the setting and the flag that turns it on; with the mode on it passes.
TEST(ConfigTest, FlagsTheJobWouldIgnoreAreRefused) {
  JobConfig j;
  EXPECT_EQ(CheckOverridesApply(j, {{"chunk_rows", "64"}}).message(),
            "flag --chunk_rows=64 is only read with train.data_on_demand true, which this job does not set: add "
            "--data_on_demand=true, or drop --chunk_rows");
  EXPECT_EQ(CheckOverridesApply(j, {{"epochs", "2"}, {"adaptive_batch_step", "linear"}}).message(),
            "flag --adaptive_batch_step=linear is only read with train.adaptive_batch.enabled true, which this job "
            "does not set: add --adaptive_batch=true, or drop --adaptive_batch_step");
  EXPECT_NE(CheckOverridesApply(j, {{"period_rows", "64"}}).message().find("consistency.model AVERAGE"),
            std::string::npos);
  EXPECT_NE(CheckOverridesApply(j, {{"slowdown_rank", "1"}}).message().find("train.slowdown > 1"),
            std::string::npos);
  EXPECT_EQ(CheckOverridesApply(j, {{"chunk_taper", "true"}}).message(),
            "flag --chunk_taper=true is only read with train.data_on_demand true, which this job does not set: add "
            "--data_on_demand=true, or drop --chunk_taper");
  // Float32 pushes (no --wire, or --wire=fp32) have no residual to feed back.
  EXPECT_EQ(CheckOverridesApply(j, {{"error_feedback", "false"}}).message(),
            "flag --error_feedback=false is only read with 16-bit pushes (train.wire, or a table's wire or push_wire, "
            "BF16 or FP16), which this job does not set: add --wire=bf16, or drop --error_feedback");
  {
    JobConfig half = j;
    half.mutable_train()->set_wire(BF16);
    EXPECT_TRUE(CheckOverridesApply(half, {{"error_feedback", "false"}}).ok());
    half.mutable_train()->set_wire(FP32);
    half.add_table()->set_push_wire(FP16);
    EXPECT_TRUE(CheckOverridesApply(half, {{"error_feedback", "false"}}).ok()) << "a table pushes fp16";
    half.mutable_table(0)->clear_push_wire();
    half.mutable_table(0)->set_wire(BF16);
    EXPECT_TRUE(CheckOverridesApply(half, {{"error_feedback", "true"}}).ok()) << "a table's wire is bf16";
  }
  EXPECT_TRUE(CheckOverridesApply(j, {{"epochs", "2"}, {"staleness", "3"}}).ok());
  EXPECT_TRUE(CheckOverridesApply(j, {{"minibatches_per_clock", "4"}}).ok()) << "SSP reads it";
  {
    JobConfig avg;
    avg.mutable_consistency()->set_model(AVERAGE);
    EXPECT_EQ(CheckOverridesApply(avg, {{"minibatches_per_clock", "4"}}).message(),
              "flag --minibatches_per_clock=4 is only read with consistency.model SSP, BSP or ASP (AVERAGE clocks "
              "once per round of period_rows), which this job does not set: add --consistency_model=ssp, or drop "
              "--minibatches_per_clock");
  }
  j.mutable_train()->set_data_on_demand(true);
  j.mutable_train()->mutable_adaptive_batch()->set_enabled(true);
  j.mutable_train()->set_slowdown(2);
  j.mutable_consistency()->set_model(AVERAGE);
  EXPECT_TRUE(CheckOverridesApply(j, {{"chunk_rows", "64"}, {"adaptive_batch_min", "8"}, {"adaptive_batch_max", "80"},
                                      {"period_rows", "64"}, {"model_momentum", "0.5"}, {"slowdown_rank", "1"}})
                  .ok());
}

// --learning_rate with FTRL (which steps by optimizer.alpha) or NOOP is
// refused; a table of another type reads it. The config field stays
// accepted: a search space draws it for every optimizer type.
TEST(ConfigTest, LearningRateFlagNeedsAnOptimizerThatReadsIt) {
  JobConfig j;
  j.mutable_optimizer()->set_type(FTRL);
  EXPECT_EQ(CheckOverridesApply(j, {{"learning_rate", "50"}}).message(),
            "flag --learning_rate=50 is only read with an optimizer that steps by it (optimizer.type SGD, ADAGRAD, "
            "ADAM or SUM; FTRL steps by optimizer.alpha), which this job does not set: add --optimizer=adagrad, or "
            "drop --learning_rate");
  j.add_table()->mutable_optimizer()->set_type(ADAGRAD);
  EXPECT_TRUE(CheckOverridesApply(j, {{"learning_rate", "50"}}).ok()) << "a table of type ADAGRAD reads it";
  j.mutable_optimizer()->set_type(SGD);
  j.clear_table();
  EXPECT_TRUE(CheckOverridesApply(j, {{"learning_rate", "50"}}).ok());
}

// train.psp_a/psp_b weigh PSP@k, a multi-label metric; checkpoint.keep_last
// keeps checkpoints of checkpoint.dir. Set where nothing reads them, they
// are refused naming the field.
TEST(ConfigTest, PspConstantsAndKeepLastWhereNothingReadsThem) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  c->mutable_train()->set_psp_a(0.6f);
  EXPECT_TRUE(ValidateJobConfig(*c).ok()) << "XMC_MLP reports PSP@k: " << ValidateJobConfig(*c).message();
  JobConfig lr = *c;
  lr.mutable_model()->set_type(SPARSE_LR);
  lr.mutable_model()->clear_hidden();
  lr.mutable_train()->clear_psp_a();
  lr.mutable_train()->set_psp_b(2.0f);
  EXPECT_EQ(ValidateJobConfig(lr).message(),
            "config field train.psp_b: weighs the PSP@k metrics of multi-label models (XMC_MLP) only, not SPARSE_LR, "
            "whose metrics are accuracy and log_loss");
  JobConfig keep = *c;
  keep.mutable_checkpoint()->set_keep_last(2);
  EXPECT_EQ(ValidateJobConfig(keep).message(),
            "config field checkpoint.keep_last: is set but checkpoint.dir is empty, so no checkpoint is written to "
            "keep: set checkpoint.dir (--checkpoint_dir), or drop keep_last");
  keep.mutable_checkpoint()->set_dir(::testing::TempDir() + "/ckpt");
  EXPECT_TRUE(ValidateJobConfig(keep).ok()) << ValidateJobConfig(keep).message();
}

// cluster.server_addresses names each shard's endpoint once: servers,
// workers and the launcher read it through ValidateServerConfig.
TEST(ConfigTest, RepeatedServerAddressIsRefused) {
  JobConfig c;
  c.mutable_cluster()->set_num_servers(2);
  c.mutable_cluster()->add_server_addresses("tcp://127.0.0.1:5550");
  c.mutable_cluster()->add_server_addresses("tcp://127.0.0.1:5550");
  EXPECT_EQ(ValidateServerConfig(c).message(),
            "config field cluster.server_addresses: names tcp://127.0.0.1:5550 twice (entries 1 and 2 of "
            "'tcp://127.0.0.1:5550,tcp://127.0.0.1:5550'): each server shard needs an endpoint of its own");
  c.mutable_cluster()->set_server_addresses(1, "tcp://127.0.0.1:5551");
  EXPECT_EQ(ValidateServerConfig(c).message().find("cluster.server_addresses"), std::string::npos)
      << ValidateServerConfig(c).message();
}

// One rule for the propensity constants, read by the trainer's config
// checks and tether-predict's flags alike.
TEST(ConfigTest, PspConstantRule) {
  EXPECT_TRUE(CheckPspConstant(0.55, "flag --psp_a").ok());
  EXPECT_EQ(CheckPspConstant(std::nan(""), "flag --psp_a").message(),
            "flag --psp_a: must be a finite number > 0, got nan");
  EXPECT_EQ(CheckPspConstant(-1, "flag --psp_b").message(), "flag --psp_b: must be a finite number > 0, got -1");
  EXPECT_EQ(CheckPspConstant(0, "flag --psp_b").code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(CheckPspConstant(std::numeric_limits<double>::infinity(), "flag --psp_b").code(),
            Status::Code::kInvalidArgument);
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  c->mutable_train()->set_psp_b(-1);
  EXPECT_EQ(ValidateJobConfig(*c).message(), "config field train.psp_b: must be a finite number > 0, got -1");
}

// Finiteness is validation's job: "nan" and "inf" parse as floats (as in a
// config file) and are refused there, naming the field.
TEST(ConfigTest, NonFiniteValuesAreRefusedByValidation) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok());
  struct Case {
    const char* field;
    const char* value;
    const char* message;
  };
  for (const Case& k : {Case{"optimizer.learning_rate", "nan", "config field optimizer.learning_rate: must be a finite number > 0"},
                        Case{"optimizer.learning_rate", "inf", "config field optimizer.learning_rate: must be a finite number > 0"},
                        Case{"optimizer.l2", "nan", "config field optimizer.l2: must be a finite number ≥ 0"},
                        Case{"optimizer.momentum", "nan", "config field optimizer.momentum: must be in [0, 1)"},
                        Case{"train.slowdown", "inf", "config field train.slowdown: must be a finite factor ≥ 1"},
                        Case{"data.feature_scale", "-inf", "config field data.feature_scale: must be a finite number > 0"}}) {
    JobConfig j = *c;
    ASSERT_TRUE(ApplyOverride(&j, k.field, k.value, "flag").ok()) << k.field << "=" << k.value;
    EXPECT_EQ(ValidateJobConfig(j).message(), k.message) << k.field << "=" << k.value;
  }
}

// Consistency model AVERAGE: job-wide, validated with the field named.
TEST(ConfigTest, AverageIsJobWideAndValidated) {
  auto c = ParseJobConfig("cluster { num_servers: 2 num_workers: 2 }\n"
                          "consistency { model: AVERAGE period_rows: 64 model_momentum: 0.5 }\n",
                          "a.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(ValidateServerConfig(*c).ok()) << ValidateServerConfig(*c).ToString();
  EXPECT_EQ(EffectiveStaleness(c->consistency()), 0);
  JobConfig j = *c;
  j.mutable_consistency()->clear_period_rows();
  EXPECT_NE(ValidateServerConfig(j).message().find("consistency.period_rows: must be ≥ 1"), std::string::npos)
      << ValidateServerConfig(j).message();
  j = *c;
  j.mutable_consistency()->set_model_momentum(1.0);
  EXPECT_EQ(ValidateServerConfig(j).message(), "config field consistency.model_momentum: must be in [0, 1), got 1.000000");
  j = *c;
  j.mutable_consistency()->set_staleness(2);
  EXPECT_NE(ValidateServerConfig(j).message().find("config field consistency.staleness: must be 0"), std::string::npos);
  j = *c;
  j.mutable_optimizer()->set_type(FTRL);
  EXPECT_NE(ValidateServerConfig(j).message().find("config field optimizer.type: FTRL cannot train a local replica"),
            std::string::npos);
  j = *c;
  j.add_table()->set_name("w1");
  j.mutable_table(0)->mutable_consistency()->set_model(AVERAGE);
  EXPECT_NE(ValidateServerConfig(j).message().find("config field table[w1].consistency.model: AVERAGE is job-wide"),
            std::string::npos);
  j.mutable_table(0)->mutable_consistency()->set_model(SSP);
  EXPECT_NE(ValidateServerConfig(j).message().find("table[w1].consistency.model: consistency.model is AVERAGE"),
            std::string::npos);
  j = *c;
  j.add_table()->set_name("w2");
  j.mutable_table(0)->mutable_consistency()->set_period_rows(5);
  EXPECT_EQ(ValidateServerConfig(j).message(),
            "config field table[w2].consistency.period_rows: is job-wide: set it in the job's consistency section");
  // The flag --consistency_model=average takes the place of the config's
  // bound (which AVERAGE would refuse).
  j = *c;
  j.mutable_consistency()->set_model(SSP);
  j.mutable_consistency()->set_staleness(2);
  ASSERT_TRUE(ApplyOverride(&j, "consistency.model", "average", "flag --consistency_model").ok());
  EXPECT_EQ(j.consistency().model(), AVERAGE);
  EXPECT_FALSE(j.consistency().has_staleness());
  EXPECT_TRUE(ValidateServerConfig(j).ok()) << ValidateServerConfig(j).ToString();
  // Not AVERAGE: its fields are refused rather than ignored.
  j = *c;
  j.mutable_consistency()->set_model(SSP);
  EXPECT_EQ(ValidateServerConfig(j).message(),
            "config field consistency.period_rows: is only read with consistency.model AVERAGE");
}

// A server checks the sections it reads, cluster and consistency, and
// nothing about data or the model.
TEST(ConfigTest, ServerValidationReadsOnlyClusterAndConsistency) {
  auto c = ParseJobConfig("cluster { num_servers: 2 num_workers: 3 }\nconsistency { staleness: 1 }\n", "s.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(ValidateServerConfig(*c).ok());
  EXPECT_NE(ValidateJobConfig(*c).message().find("data."), std::string::npos);  // a worker needs data
  JobConfig j = *c;
  j.mutable_cluster()->set_num_workers(0);
  EXPECT_EQ(ValidateServerConfig(j).message(), "config field cluster.num_workers: must be ≥ 1");
  j = *c;
  j.add_table()->set_name("w1");
  j.mutable_table(0)->mutable_consistency()->set_staleness(-2);
  EXPECT_EQ(ValidateServerConfig(j).message(), "config field table[w1].consistency.staleness: must be ≥ 0, or -1 (inf) for ASP");
  j = *c;
  j.mutable_cluster()->set_worker_timeout_ms(j.cluster().heartbeat_interval_ms());
  EXPECT_NE(ValidateServerConfig(j).message().find("cluster.worker_timeout_ms"), std::string::npos);
  j = *c;
  j.mutable_cluster()->set_liveness_timeout_ms(50);
  EXPECT_EQ(ValidateServerConfig(j).message(), "config field cluster.liveness_timeout_ms: must be ≥ 100, or 0 (off)");
  j.mutable_cluster()->set_liveness_timeout_ms(0);
  EXPECT_TRUE(ValidateServerConfig(j).ok());
  EXPECT_EQ(JobConfig().cluster().liveness_timeout_ms(), 5000);
  j.mutable_cluster()->set_idle_timeout_ms(j.cluster().heartbeat_interval_ms());
  EXPECT_EQ(ValidateServerConfig(j).message(),
            "config field cluster.idle_timeout_ms: must exceed cluster.heartbeat_interval_ms (1000)");
  j.mutable_cluster()->set_idle_timeout_ms(1001);
  EXPECT_TRUE(ValidateServerConfig(j).ok());
  EXPECT_EQ(JobConfig().cluster().idle_timeout_ms(), 300000);
}

// --idle_timeout_ms is an override flag like the other cluster timeouts.
TEST(ConfigTest, IdleTimeoutHasAFlag) {
  const ConfigOverride* idle = nullptr;
  for (const ConfigOverride& o : ConfigOverrides())
    if (std::string(o.flag) == "idle_timeout_ms") idle = &o;
  ASSERT_NE(idle, nullptr);
  EXPECT_EQ(std::string(idle->field_path), "cluster.idle_timeout_ms");
  EXPECT_FALSE(OverrideIsBool(*idle));
  JobConfig c;
  ASSERT_TRUE(ApplyOverride(&c, idle->field_path, "45000", "flag --idle_timeout_ms").ok());
  EXPECT_EQ(c.cluster().idle_timeout_ms(), 45000);
  const Status bad = ApplyOverride(&c, idle->field_path, "45s", "flag --idle_timeout_ms");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("flag --idle_timeout_ms=45s"), std::string::npos) << bad.message();
}

// --heartbeat_interval_ms is an override flag like the other cluster timeouts,
// with their bound (at least 1 ms).
TEST(ConfigTest, HeartbeatIntervalHasAFlag) {
  const ConfigOverride* beat = nullptr;
  for (const ConfigOverride& o : ConfigOverrides())
    if (std::string(o.flag) == "heartbeat_interval_ms") beat = &o;
  ASSERT_NE(beat, nullptr);
  EXPECT_EQ(std::string(beat->field_path), "cluster.heartbeat_interval_ms");
  EXPECT_FALSE(OverrideIsBool(*beat));
  JobConfig c;
  ASSERT_TRUE(ApplyOverride(&c, beat->field_path, "250", "flag --heartbeat_interval_ms").ok());
  EXPECT_EQ(c.cluster().heartbeat_interval_ms(), 250);
}

// The values in force: one line per set section, each short.
TEST(ConfigTest, SummaryIsOneShortLinePerSection) {
  // Parsed as text: the paths stay as written (LoadJobConfig would make them
  // absolute, and their length would depend on where the checkout is).
  std::ifstream in("examples/bibtex.pbtxt");
  std::stringstream text;
  text << in.rdbuf();
  auto c = ParseJobConfig(text.str(), "examples/bibtex.pbtxt");
  ASSERT_TRUE(c.ok());
  const std::string s = ConfigSummary(*c);
  std::vector<std::string> lines;
  for (size_t b = 0, e; b < s.size(); b = e + 1) {
    e = s.find('\n', b);
    if (e == std::string::npos) e = s.size();
    lines.push_back(s.substr(b, e - b));
  }
  ASSERT_GE(lines.size(), 5u) << s;
  for (const auto& l : lines) {
    EXPECT_EQ(l.rfind("  ", 0), 0u) << l;
    EXPECT_LE(l.size(), 110u) << l;
  }
  EXPECT_NE(s.find("\n  data { format: XMC train_file: \"../data/bibtex/Bibtex_data.txt.gz\""), std::string::npos) << s;
  EXPECT_NE(s.find("\n      test_split: \"../data/bibtex/bibtex_tstSplit.txt\" index_base: 0 num_features: 1836\n      num_labels: 159 normalize_rows: true tf_idf: true }\n"), std::string::npos) << s;
  EXPECT_EQ(lines.back(), "  staleness in force: 2 (SSP), table w1: 2 (SSP)");
}

TEST(ConfigTest, OneLineNamesWhatAPersonChecksFirst) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(ConfigOneLine(*c),
            "bibtex: XMC_MLP hidden 256 SOFTMAX, ADAM lr 0.001, staleness 2 (SSP), 2 server(s), 2 worker(s), "
            "7 epochs of minibatch 64, data Bibtex_data.txt.gz (XMC, index_base 0, 1836 features, 159 labels)");
  JobConfig j = *c;
  j.mutable_consistency()->set_staleness(-1);
  j.mutable_data()->clear_num_labels();
  EXPECT_NE(ConfigOneLine(j).find("staleness inf (ASP)"), std::string::npos) << ConfigOneLine(j);
  EXPECT_NE(ConfigOneLine(j).find("(XMC, index_base 0, 1836 features)"), std::string::npos) << ConfigOneLine(j);
}

TEST(ConfigTest, ValidationNamesTheField) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
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

// train.adaptive_batch: flags set it, b_min / b_max resolve from the
// minibatch size, and bounds that cannot hold the mean batch are refused.
TEST(ConfigTest, MissingDataFileNamesTheFieldAndTheFullPath) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(CheckDataFilesExist(*c).ok());  // run from the repository root
  JobConfig j = *c;
  j.mutable_data()->set_test_split("data/bibtex/no_such_split.txt");
  const Status st = CheckDataFilesExist(j);
  EXPECT_EQ(st.code(), Status::Code::kNotFound);
  const std::string cwd = std::filesystem::current_path().string();
  EXPECT_EQ(st.message(), "config field data.test_split: 'data/bibtex/no_such_split.txt' does not exist (tried " +
                              cwd + "/data/bibtex/no_such_split.txt, relative to the current directory " + cwd + ")");
  j = *c;
  j.mutable_data()->set_train_file("/no/such/dir/../train.txt");
  EXPECT_EQ(CheckDataFilesExist(j).message(), "config field data.train_file: '/no/such/dir/../train.txt' does not exist");
  j = *c;
  j.mutable_data()->set_train_file("data");  // a folder
  EXPECT_EQ(CheckDataFilesExist(j).message().rfind("config field data.train_file: 'data' is not a file (tried ", 0), 0u);
}

// Relative data paths in a config file are taken against
// the file's folder, so a config works from any current directory; flags
// and configs built in memory stay relative to the current directory.
TEST(ConfigTest, RelativeDataPathsFollowTheConfigFilesFolder) {
  const std::string root = std::filesystem::current_path().string();  // the repository
  auto c = LoadJobConfig("examples/bibtex.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->data().train_file(), root + "/data/bibtex/Bibtex_data.txt.gz");
  EXPECT_EQ(c->data().test_split(), root + "/data/bibtex/bibtex_tstSplit.txt");
  EXPECT_FALSE(c->data().has_train_label_file());  // unset fields stay unset
  // The same file through another spelling of its path, and from another
  // current directory: the same absolute paths.
  auto again = LoadJobConfig(root + "/tests/../examples/bibtex.pbtxt");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->data().train_file(), c->data().train_file());
  const std::filesystem::path tmp = std::filesystem::temp_directory_path();
  std::filesystem::current_path(tmp);
  auto elsewhere = LoadJobConfig(root + "/examples/mnist.pbtxt");
  std::filesystem::current_path(root);
  ASSERT_TRUE(elsewhere.ok());
  EXPECT_EQ(elsewhere->data().train_label_file(), root + "/data/mnist/t10k-labels-idx1-ubyte.gz");
  EXPECT_TRUE(CheckDataFilesExist(*elsewhere).ok());
  // Absolute paths are left alone; text parsed in memory is not resolved.
  JobConfig j;
  j.mutable_data()->set_train_file("/abs/x.txt");
  j.mutable_data()->set_test_file("y.txt");
  ResolveDataPaths(&j, "/base/dir");
  EXPECT_EQ(j.data().train_file(), "/abs/x.txt");
  EXPECT_EQ(j.data().test_file(), "/base/dir/y.txt");
  auto text = ParseJobConfig("data { train_file: \"x.txt\" }", "mem");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->data().train_file(), "x.txt");
}

// Lists and globs of data files resolve entry by entry,
// every file is checked, and what cannot be listed or streamed is refused.
TEST(ConfigTest, DataFileListsResolveCheckAndValidate) {
  const std::string root = std::filesystem::current_path().string();  // the repository
  JobConfig j;
  j.mutable_data()->set_train_file("a.txt, parts/p-*.gz,/abs/b.txt");
  j.mutable_data()->set_train_split("x*.txt");  // not a list field: one path
  ResolveDataPaths(&j, "/base/dir");
  EXPECT_EQ(j.data().train_file(), "/base/dir/a.txt,/base/dir/parts/p-*.gz,/abs/b.txt");
  EXPECT_EQ(j.data().train_split(), "/base/dir/x*.txt");

  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok());
  j = *c;
  j.mutable_data()->clear_train_split();
  j.mutable_data()->clear_test_split();
  j.mutable_data()->set_train_file(root + "/data/bibtex/Bibtex_data.txt.gz," + root + "/data/bibtex/*Split.txt");
  EXPECT_TRUE(CheckDataFilesExist(j).ok());
  j.mutable_data()->set_train_file(root + "/data/bibtex/Bibtex_data.txt.gz," + root + "/data/bibtex/nothing-*.gz");
  EXPECT_EQ(CheckDataFilesExist(j).message(), "config field data.train_file: the pattern '" + root +
                                                  "/data/bibtex/nothing-*.gz' matches no file (looked in " + root +
                                                  "/data/bibtex)");
  j.mutable_data()->set_train_file(root + "/data/bibtex/Bibtex_data.txt.gz, " + root + "/data/bibtex/no.txt");
  EXPECT_EQ(CheckDataFilesExist(j).message(),
            "config field data.train_file: '" + root + "/data/bibtex/no.txt' does not exist");

  j = *c;
  j.mutable_data()->set_train_file("a.txt,b.txt");
  EXPECT_EQ(ValidateJobConfig(j).message(),
            "config field data.train_file: names several files, so its rows have no single numbering for a split file "
            "(data.train_file with data.train_split): list the split's rows as files instead");
  j.mutable_data()->clear_train_split();
  j.mutable_data()->set_format(ARFF);
  j.mutable_data()->set_label_xml("x.xml");
  j.mutable_data()->set_index_base(-1);
  EXPECT_EQ(ValidateJobConfig(j).message(),
            "config field data.train_file: names several files, which XMC and LIBSVM files support, not data.format ARFF");
  j = *c;
  j.mutable_data()->clear_train_split();
  j.mutable_data()->set_streaming(true);
  j.mutable_checkpoint()->set_dir("/tmp/ck");
  EXPECT_EQ(ValidateJobConfig(j).message().rfind("config field checkpoint.dir: is set but data.streaming is true", 0), 0u)
      << ValidateJobConfig(j).message();
  j.mutable_checkpoint()->clear_dir();
  EXPECT_TRUE(ValidateJobConfig(j).ok()) << ValidateJobConfig(j).message();
  j.mutable_data()->set_shuffle_buffer_rows(0);
  EXPECT_EQ(ValidateJobConfig(j).message(), "config field data.shuffle_buffer_rows: must be ≥ 1");
}

}  // namespace
}  // namespace tether

namespace tether {
namespace {

TEST(ConfigTest, ValidationSplitRefusesWhatWouldReadTheTestSplitEarly) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok());
  const auto message = [](const JobConfig& j) { return ValidateJobConfig(j).message(); };
  JobConfig j = *c;
  j.mutable_train()->set_validation_fraction(0.2);
  EXPECT_TRUE(ValidateJobConfig(j).ok()) << message(j);
  j.mutable_train()->mutable_early_stopping()->set_patience(2);
  EXPECT_TRUE(ValidateJobConfig(j).ok()) << message(j);
  j.mutable_train()->set_validation_fraction(1.0);
  EXPECT_EQ(message(j), "config field train.validation_fraction: must be in [0, 1)");
  j.mutable_train()->set_validation_fraction(0);
  EXPECT_EQ(message(j), "config field train.early_stopping: needs a validation split: set train.validation_fraction "
                        "or data.validation_split");
  j.mutable_train()->clear_early_stopping();
  j.mutable_train()->set_keep_best_model(true);
  EXPECT_EQ(message(j), "config field train.keep_best_model: needs a validation split: set train.validation_fraction "
                        "or data.validation_split");
  j.mutable_train()->set_keep_best_model(false);
  EXPECT_TRUE(ValidateJobConfig(j).ok()) << message(j);
  j = *c;
  j.mutable_train()->set_validation_fraction(0.2);
  j.mutable_train()->set_eval_every_epochs(1);
  EXPECT_NE(message(j).find("drop train.eval_every_epochs"), std::string::npos) << message(j);
  j.mutable_train()->set_eval_every_epochs(0);
  j.mutable_train()->set_eval_max_rows(100);
  EXPECT_NE(message(j).find("drop train.eval_max_rows"), std::string::npos) << message(j);
  j.mutable_train()->set_eval_max_rows(0);
  j.mutable_cluster()->set_max_workers(3);
  EXPECT_NE(message(j).find("not with cluster.max_workers"), std::string::npos) << message(j);
  j.mutable_cluster()->set_max_workers(0);
  j.mutable_train()->mutable_early_stopping()->set_patience(-1);
  EXPECT_EQ(message(j), "config field train.early_stopping.patience: must be ≥ 0 (0: never stops early)");
}

}  // namespace
}  // namespace tether
