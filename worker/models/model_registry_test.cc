// The model registry: each built-in model's tables, the C15 message-size
// check over them, lookups by name and type, and the field-by-field table
// comparison servers run at HELLO.
#include "worker/models/model_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/config.h"
#include "core/table_spec.h"
#include "core/validation_metric.h"
#include "optim/shard_budget.h"

namespace tether {
namespace {

// C15: 20,000,000 floats (80 MB, above Protobuf's 64 MB default) travel in
// one message; 700,000,000 (2.8 GB, above 2 GB) are refused at set-up,
// naming each block, its size and the limit, and what to change.
TEST(ModelRegistryTest, C15BlocksTooLargeForOneMessageAreRefusedAtSetUp) {
  JobConfig c;
  c.mutable_data()->set_index_base(0);
  c.mutable_cluster()->set_num_servers(1);
  c.mutable_data()->set_num_features(10);
  c.mutable_data()->set_num_labels(3);
  c.mutable_model()->set_hidden(20000000);
  EXPECT_TRUE(CheckMessageSizes(TablesForJob(c), c.cluster().num_servers()).ok()) << CheckMessageSizes(TablesForJob(c), c.cluster().num_servers()).ToString();
  c.mutable_model()->set_hidden(700000000);
  const Status st = CheckMessageSizes(TablesForJob(c), c.cluster().num_servers());
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "config: one row of table 'w1' is 2800000000 bytes (dim 700000000), above the 1073741824-byte "
            "message limit, and a row is never split: make the model narrower; dense table 'b1' is 2800000000 "
            "bytes (700000000 floats); split over cluster.num_servers=1 its largest slice is 2800000000 bytes, "
            "above the 1073741824-byte message limit: set cluster.num_servers to at least 3; one row of table "
            "'w2' is 2800000004 bytes (dim 700000001), above the 1073741824-byte message limit, and a row is "
            "never split: make the model narrower");
  // Three shards carry the dense block; its rows still cannot be split.
  c.mutable_cluster()->set_num_servers(3);
  EXPECT_EQ(CheckMessageSizes(TablesForJob(c), c.cluster().num_servers()).message().find("dense table"), std::string::npos);
}

TEST(ModelRegistryTest, TablesForXmcMlp) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok());
  auto t = TablesForJob(*c);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].name(), "w1");
  EXPECT_EQ(t[0].dim(), 256u);
  EXPECT_EQ(t[0].num_keys(), 1836u);  // feature ids
  EXPECT_EQ(t[0].key_base(), c->data().index_base());
  EXPECT_EQ(t[1].kind(), TableSpec::DENSE);
  EXPECT_EQ(t[1].size(), 256u);
  EXPECT_EQ(t[2].dim(), 257u);
  EXPECT_EQ(t[2].num_keys(), 159u);  // label ids
  // Glorot bound sqrt(6 / (1836 + 256)) = sqrt(0.00286807) = 0.0535544
  EXPECT_NEAR(t[0].init().bound(), 0.0535544, 1e-6);
  EXPECT_EQ(t[0].init().seed(), c->train().seed());
  // Every process of the job derives the same tables, field by field.
  const auto again = TablesForJob(*c);
  const google::protobuf::RepeatedPtrField<TableSpec> a(t.begin(), t.end()), b(again.begin(), again.end());
  EXPECT_EQ(DiffTableSpecs(a, "one", b, "two"), "");
}

// cluster.server_memory_bytes: the row tables get the split's max_rows and
// LRU in their specs (the same in every process); a budget below one row of
// each is refused by the config check, naming the least.
TEST(ModelRegistryTest, ServerMemoryBudgetSetsRowLimitsOrIsRefused) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok());
  c->mutable_cluster()->set_num_servers(2);
  c->mutable_cluster()->set_server_memory_bytes(1000000);
  ASSERT_TRUE(ValidateModelConfig(*c).ok()) << ValidateModelConfig(*c).ToString();
  const auto t = TablesForJob(*c);
  ASSERT_EQ(t.size(), 3u);
  const uint64_t rows = t[0].budget().max_rows();
  EXPECT_GT(rows, 0u);
  // w2 (159 labels) takes only the keys of its fullest shard.
  EXPECT_EQ(t[2].budget().max_rows(), std::min(rows, MostKeysOnAShard(t[2].num_keys(), 2)));
  EXPECT_EQ(t[0].budget().evict(), LRU);
  EXPECT_FALSE(t[1].has_budget()) << "dense";
  const auto again = TablesForJob(*c);
  const google::protobuf::RepeatedPtrField<TableSpec> a(t.begin(), t.end()), b(again.begin(), again.end());
  EXPECT_EQ(DiffTableSpecs(a, "one", b, "two"), "");
  c->mutable_cluster()->set_server_memory_bytes(1024);
  const Status st = ValidateModelConfig(*c);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("cluster.server_memory_bytes: cluster.server_memory_bytes (--server_memory) is 1.0 KiB "
                              "(1024 bytes), but each shard needs at least "),
            std::string::npos)
      << st.message();
  EXPECT_FALSE(TablesForJob(*c)[0].has_budget()) << "a refused budget leaves the tables as they were";
}

TEST(ModelRegistryTest, FindsBuiltInsByTypeAndByName) {
  JobConfig c;
  c.mutable_model()->set_type(SPARSE_LR);
  StatusOr<const ModelInfo*> m = FindModel(c);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ((*m)->name, "sparse_lr");
  EXPECT_EQ((*m)->label_kind, LabelKind::kBinary);
  c.mutable_model()->set_name("dense_mlp");  // the name wins over the type
  EXPECT_EQ((*FindModel(c))->name, "dense_mlp");
  c.mutable_model()->set_name("dense_mlpp");
  const Status st = FindModel(c).status();
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "config field model.name: no registered model 'dense_mlpp' (registered: dense_mlp, "
                          "sparse_lr, xmc_mlp)");
  EXPECT_TRUE(TablesForJob(c).empty());
}

// The config's check of train.early_stopping.metric knows the built-ins'
// label kinds without the registry (core/validation_metric.h): they agree.
TEST(ModelRegistryTest, BuiltInLabelKindsAgreeWithTheConfigCheck) {
  const auto kind_name = [](LabelKind k) {
    return k == LabelKind::kMultiLabel ? "multi-label" : k == LabelKind::kBinary ? "binary" : "multiclass";
  };
  for (const ModelType type : {XMC_MLP, SPARSE_LR, DENSE_MLP}) {
    JobConfig c;
    c.mutable_model()->set_type(type);
    EXPECT_EQ(BuiltinLabelKindName(c), kind_name(LabelKindOf(c))) << ModelType_Name(type);
    c.mutable_model()->set_name((*FindModel(c))->name);
    EXPECT_EQ(BuiltinLabelKindName(c), kind_name(LabelKindOf(c))) << c.model().name();
  }
  JobConfig c;
  c.mutable_model()->set_name("registered_elsewhere");
  EXPECT_EQ(BuiltinLabelKindName(c), "");
}

TEST(ModelRegistryTest, PerTableOverridesAreMergedIntoTheSpecs) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok());
  TableConfig* t = c->add_table();
  t->set_name("w2");
  t->mutable_optimizer()->set_learning_rate(0.5f);
  t->mutable_consistency()->set_model(ASP);
  t->set_init(INIT_ZEROS);
  const auto tables = TablesForJob(*c);
  ASSERT_EQ(tables.size(), 3u);
  EXPECT_EQ(tables[2].optimizer().learning_rate(), 0.5f);
  EXPECT_EQ(tables[2].optimizer().type(), c->optimizer().type());  // the rest is the job's
  EXPECT_EQ(TableStaleness(tables[2]), -1);                       // the table's own bound wins
  EXPECT_EQ(TableStaleness(tables[0]), EffectiveStaleness(c->consistency()));
  EXPECT_EQ(tables[2].init().kind(), TableInitializer::ZEROS);
  EXPECT_EQ(tables[2].init().bound(), 0.0f);
  t->set_name("w3");
  EXPECT_EQ(ValidateModelConfig(*c).message(), "config field table.name: unknown table 'w3' (model xmc_mlp has w1, "
                                               "b1, w2)");
}

// Delay compensation: a table with λ > 0 carries the worker ranks a shard
// backs up (cluster.max_workers), and the specs are checked for it.
TEST(ModelRegistryTest, DelayCompensationSetsTheBackedUpWorkers) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok());
  c->mutable_optimizer()->set_delay_compensation(0.5f);
  c->mutable_cluster()->set_max_workers(3);
  TableConfig* t = c->add_table();
  t->set_name("b1");
  t->mutable_optimizer()->set_delay_compensation(0.0f);  // this table without
  auto tables = TablesForJob(*c);
  ASSERT_EQ(tables.size(), 3u);
  EXPECT_EQ(tables[0].backup_workers(), 3u);
  EXPECT_EQ(tables[0].optimizer().delay_compensation(), 0.5f);
  EXPECT_EQ(tables[1].backup_workers(), 0u);
  EXPECT_EQ(tables[2].backup_workers(), 3u);
  EXPECT_EQ(DelayBackupFloats(tables[2], tables[2].dim()), 3u * 257u);
  EXPECT_EQ(DelayBackupFloats(tables[1], 128), 0u);
  ASSERT_TRUE(ValidateTableSpecs(tables, 2).ok());
  tables[0].set_backup_workers(0);
  EXPECT_EQ(ValidateTableSpecs(tables, 2).message(),
            "table 'w1': field backup_workers: must be in [1, 65536] (the worker ranks whose reads a shard backs up) "
            "with optimizer.delay_compensation > 0, got 0");
  tables = TablesForJob(*c);
  tables[1].set_backup_workers(2);
  EXPECT_EQ(ValidateTableSpecs(tables, 2).message(),
            "table 'b1': field backup_workers: is read only with optimizer.delay_compensation > 0, got 2");
  tables = TablesForJob(*c);
  tables[2].mutable_optimizer()->set_delay_compensation(-1.0f);
  EXPECT_EQ(ValidateTableSpecs(tables, 2).message(),
            "table 'w2': field optimizer.delay_compensation: must be a finite number ≥ 0 (λ of delay compensation; "
            "0: off)");
}

TEST(ModelRegistryTest, WireEncodingsFromTheJobAndTheTables) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(TablesForJob(*c)[0].has_pull_wire());  // fp32: unset, a HELLO as before
  c->mutable_train()->set_wire(BF16);
  TableConfig* w2 = c->add_table();
  w2->set_name("w2");
  w2->set_wire(FP32);
  TableConfig* b1 = c->add_table();
  b1->set_name("b1");
  b1->set_wire(FP16);
  b1->set_push_wire(BF16);  // one direction wins over `wire`
  const auto tables = TablesForJob(*c);
  ASSERT_EQ(tables.size(), 3u);
  EXPECT_EQ(tables[0].pull_wire(), BF16);
  EXPECT_EQ(tables[0].push_wire(), BF16);
  EXPECT_EQ(tables[1].pull_wire(), FP16);
  EXPECT_EQ(tables[1].push_wire(), BF16);
  EXPECT_EQ(tables[2].pull_wire(), FP32);
  EXPECT_EQ(tables[2].push_wire(), FP32);
  // --wire is job-wide: the tables' own encodings give way to it.
  ASSERT_TRUE(ApplyOverride(&*c, "train.wire", "fp16", "flag --wire").ok());
  for (const TableSpec& t : TablesForJob(*c)) {
    EXPECT_EQ(t.pull_wire(), FP16) << t.name();
    EXPECT_EQ(t.push_wire(), FP16) << t.name();
  }
  EXPECT_NE(ApplyOverride(&*c, "train.wire", "fp8", "flag --wire").message().find("expected one of fp32, bf16, fp16"),
            std::string::npos);
}

TEST(ModelRegistryTest, SampledLabelsWithinTheLabelCount) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok());
  c->mutable_model()->set_sampled_labels(159);
  EXPECT_TRUE(ValidateModelConfig(*c).ok());
  c->mutable_model()->set_sampled_labels(500);
  EXPECT_EQ(ValidateModelConfig(*c).message(),
            "config field model.sampled_labels: 500 is above data.num_labels (159), the rows a minibatch can sample "
            "from: use at most 159, or 0 for the full softmax");
  c->mutable_model()->set_sampled_labels(-1);
  EXPECT_EQ(ValidateModelConfig(*c).message(),
            "config field model.sampled_labels: must be ≥ 0 (0: the full softmax), got -1");
}

TEST(TableSpecTest, DiffNamesTheTableTheFieldAndBothValues) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok());
  const auto job = TablesForJob(*c);
  google::protobuf::RepeatedPtrField<TableSpec> a(job.begin(), job.end());
  google::protobuf::RepeatedPtrField<TableSpec> b = a;
  b[2].set_dim(300);
  EXPECT_EQ(DiffTableSpecs(b, "worker 1", a, "the job"),
            "table 'w2', field dim: worker 1 has 300, the job has 257");
  b = a;
  b[0].mutable_optimizer()->set_learning_rate(0.25f);
  EXPECT_EQ(DiffTableSpecs(b, "worker 1", a, "the job"),
            "table 'w1', field optimizer.learning_rate: worker 1 has 0.25, the job has 0.001");
  b = a;
  b[1].mutable_consistency()->set_staleness(7);
  EXPECT_EQ(DiffTableSpecs(b, "worker 1", a, "the job"),
            "table 'b1', field consistency.staleness: worker 1 has 7, the job has 2");
  // Worker memory settings stay with the process: two workers with
  // different cache capacities declare the same tables.
  {
    JobConfig other = *c;
    other.mutable_consistency()->set_cache_capacity_fraction(0.1);
    other.mutable_consistency()->set_memory_limit_bytes(1 << 30);
    const auto theirs = TablesForJob(other);
    EXPECT_EQ(DiffTableSpecs(google::protobuf::RepeatedPtrField<TableSpec>(theirs.begin(), theirs.end()), "worker 1",
                             a, "the job"),
              "");
    EXPECT_FALSE(theirs[2].consistency().has_cache_capacity_fraction());
  }
  b = a;
  b.RemoveLast();
  EXPECT_EQ(DiffTableSpecs(b, "worker 1", a, "the job"),
            "tables: worker 1 has 2 (w1, b1), the job has 3 (w1, b1, w2)");
  // A field left unset equals one set to its default: presence is no difference.
  b = a;
  b[0].clear_key_base();
  a.Mutable(0)->set_key_base(-1);
  EXPECT_EQ(DiffTableSpecs(b, "worker 1", a, "the job"), "");
}

TEST(TableSpecTest, ValidationNamesTheTableAndTheField) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok());
  auto t = TablesForJob(*c);
  ASSERT_TRUE(ValidateTableSpecs(t, 2).ok());
  t[0].set_dim(0);
  EXPECT_EQ(ValidateTableSpecs(t, 2).message(), "table 'w1': field dim: must be ≥ 1, got 0");
  t = TablesForJob(*c);
  t[1].set_size(uint64_t{1} << 32);
  EXPECT_EQ(ValidateTableSpecs(t, 2).message(),
            "table 'b1': field size: 4294967296 floats; the limit is 2^32 - 1 (narrow the layers)");
  t = TablesForJob(*c);
  t[2].mutable_init()->set_bound(std::numeric_limits<float>::infinity());
  EXPECT_EQ(ValidateTableSpecs(t, 2).message(), "table 'w2': field init.bound: must be a finite number ≥ 0, got inf");
  t = TablesForJob(*c);
  t[2].set_name("w1");
  EXPECT_EQ(ValidateTableSpecs(t, 2).message(), "table 'w1': field name: is used by two tables");
  t = TablesForJob(*c);
  t[1].set_id(5);
  EXPECT_EQ(ValidateTableSpecs(t, 2).message(),
            "table 'b1': field id: is 5 but the table is number 1 (ids are 0, 1, ... in order)");
  t = TablesForJob(*c);
  t[0].mutable_optimizer()->set_learning_rate(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(ValidateTableSpecs(t, 2).message(),
            "table 'w1': field optimizer.learning_rate: must be a finite number > 0");
  // C22: every optimizer field, as a server checks a HELLO's specs (a peer
  // that skipped the config checks must not get 0/0 into a table).
  t = TablesForJob(*c);
  t[2].mutable_optimizer()->set_epsilon(-1.0f);
  EXPECT_EQ(ValidateTableSpecs(t, 2).message(), "table 'w2': field optimizer.epsilon: must be a finite number > 0");
  t = TablesForJob(*c);
  t[0].mutable_optimizer()->set_initial_accumulator(0.0f);
  t[0].mutable_optimizer()->set_epsilon(0.0f);
  EXPECT_EQ(ValidateTableSpecs(t, 2).message(), "table 'w1': field optimizer.epsilon: must be a finite number > 0");
  t = TablesForJob(*c);
  t[1].mutable_optimizer()->set_l2(std::numeric_limits<float>::infinity());
  EXPECT_EQ(ValidateTableSpecs(t, 2).message(), "table 'b1': field optimizer.l2: must be a finite number ≥ 0");
  t = TablesForJob(*c);
  t[1].mutable_optimizer()->set_beta2(1.0f);
  EXPECT_EQ(ValidateTableSpecs(t, 2).message(), "table 'b1': field optimizer.beta2: must be in [0, 1)");
}

}  // namespace
}  // namespace tether
