// Hashed 64-bit feature ids, below the process level:
// the server's create-nothing pull (evaluation), a minibatch's 64-bit keys
// from a hashed matrix, the tables a hashed job declares, and the config
// checks. tests/integration/hashed_test.sh runs the whole job.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/config.h"
#include "core/partition.h"
#include "server/table.h"
#include "input/reader.h"
#include "worker/models/model_registry.h"
#include "worker/models/xmc_mlp.h"

namespace tether {
namespace {

constexpr uint64_t kTwo63 = uint64_t{1} << 63;
constexpr uint64_t kMax = ~uint64_t{0};

TableSpec RowSpec(uint32_t dim) {
  TableSpec spec;
  spec.set_id(0);
  spec.set_name("w1");
  spec.set_kind(TableSpec::ROW);
  spec.set_dim(dim);
  spec.mutable_init()->set_kind(TableInitializer::UNIFORM);
  spec.mutable_init()->set_bound(0.5f);
  spec.mutable_init()->set_seed(3);
  spec.mutable_optimizer()->set_type(SGD);
  spec.mutable_optimizer()->set_learning_rate(1.0f);
  return spec;
}

TEST(HashedFeaturesTest, PullIfPresentReadsZerosAndCreatesNothing) {
  constexpr uint32_t kDim = 3;
  ServerTable t(RowSpec(kDim), 0, 0);
  const std::vector<uint64_t> trained = {kTwo63 + 1, kMax};
  std::vector<float> out(trained.size() * kDim);
  ASSERT_TRUE(t.PullRows(trained.data(), trained.size(), out.data()).ok());  // training creates them
  ASSERT_EQ(t.num_rows(), 2u);
  const std::vector<float> g(trained.size() * kDim, 0.25f);
  ASSERT_TRUE(t.PushRows(trained.data(), trained.size(), g.data()).ok());
  // Evaluation asks for 2^63+1 (held), 2^63+2 (never trained: a double would
  // merge it with 2^63+1) and 2^64-1 (held).
  const std::vector<uint64_t> keys = {kTwo63 + 1, kTwo63 + 2, kMax};
  std::vector<float> eval(keys.size() * kDim, -7.0f);
  t.PullRowsIfPresent(keys.data(), keys.size(), eval.data());
  EXPECT_EQ(t.num_rows(), 2u);  // nothing created
  for (uint32_t j = 0; j < kDim; ++j) {
    EXPECT_EQ(eval[0 * kDim + j], InitialWeight(3, 0, kTwo63 + 1, j, 0.5f) - 0.25f);
    EXPECT_EQ(eval[1 * kDim + j], 0.0f);
    EXPECT_EQ(eval[2 * kDim + j], InitialWeight(3, 0, kMax, j, 0.5f) - 0.25f);
  }
  // The two neighbours are distinct rows with their own initial values.
  EXPECT_NE(InitialWeight(3, 0, kTwo63 + 1, 0, 0.5f), InitialWeight(3, 0, kTwo63 + 2, 0, 0.5f));
  // An empty table reads zeros too.
  ServerTable empty(RowSpec(kDim), 0, 0);
  empty.PullRowsIfPresent(keys.data(), keys.size(), eval.data());
  EXPECT_EQ(empty.num_rows(), 0u);
  EXPECT_EQ(eval, std::vector<float>(keys.size() * kDim, 0.0f));
}

TEST(HashedFeaturesTest, MinibatchKeysAreTheExact64BitIds) {
  ReadOptions o;
  o.format = DataFormat::kXmc;
  o.index_base = 0;
  o.hashed_features = true;
  auto ds = ParseDataset(
      "3 0 1\n0 9223372036854775809:1 9223372036854775810:2\n0 18446744073709551615:3 4:1\n0 4:2\n", "mem", o);
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  std::vector<uint64_t> keys;
  CsrMatrix local;
  ASSERT_TRUE(LocalizeBatch(ds->features, 0, 3, &keys, &local).ok());
  EXPECT_EQ(keys, (std::vector<uint64_t>{4, kTwo63 + 1, kTwo63 + 2, kMax}));
  EXPECT_EQ(local.cols, 4);
  EXPECT_EQ(local.col_keys, nullptr);
  EXPECT_EQ(local.col_idx, (std::vector<uint32_t>{1, 2, 0, 3, 0}));
  ASSERT_TRUE(LocalizeBatch(ds->features, 0, 1, &keys, &local).ok());
  EXPECT_EQ(keys, (std::vector<uint64_t>{kTwo63 + 1, kTwo63 + 2}));
  EXPECT_EQ(local.col_idx, (std::vector<uint32_t>{0, 1}));
  // Each key routes to the shard that owns exactly that key.
  std::vector<std::vector<uint64_t>> per_shard;
  std::vector<std::vector<uint32_t>> positions;
  ASSERT_TRUE(LocalizeBatch(ds->features, 0, 3, &keys, &local).ok());
  SplitKeysByShard(keys, 2, &per_shard, &positions);
  for (int s = 0; s < 2; ++s)
    for (uint64_t k : per_shard[s]) EXPECT_EQ(ShardForKey(k, 2), s) << k;
  EXPECT_EQ(per_shard[0].size() + per_shard[1].size(), 4u);
}

JobConfig HashedJob() {
  JobConfig c;
  c.mutable_cluster()->set_num_servers(2);
  c.mutable_cluster()->set_num_workers(2);
  c.mutable_data()->set_format(XMC);
  c.mutable_data()->set_train_file("train.txt");
  c.mutable_data()->set_index_base(0);
  c.mutable_data()->set_num_labels(10);
  c.mutable_data()->set_hashed_features(true);
  c.mutable_model()->set_hidden(16);
  return c;
}

TEST(HashedFeaturesTest, TablesTakeAnyKeyAndAGlorotBoundOverH) {
  const JobConfig c = HashedJob();
  const std::vector<TableSpec> t = TablesForJob(c);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].name(), "w1");
  EXPECT_EQ(t[0].num_keys(), 0u);  // any uint64 key
  EXPECT_EQ(t[0].init().kind(), TableInitializer::UNIFORM);
  // Fan-in = fan-out = H = 16: sqrt(6 / 32) times init_scale (1).
  EXPECT_FLOAT_EQ(t[0].init().bound(), c.model().init_scale() * std::sqrt(6.0f / 32.0f));
  EXPECT_EQ(t[2].num_keys(), 10u);  // labels keep their width
  JobConfig lr = HashedJob();
  lr.mutable_model()->set_type(SPARSE_LR);
  lr.mutable_data()->set_format(LIBSVM);
  lr.mutable_data()->set_num_labels(0);
  EXPECT_EQ(TablesForJob(lr)[0].num_keys(), 0u);
}

TEST(HashedFeaturesTest, ConfigChecks) {
  EXPECT_TRUE(ValidateJobConfig(HashedJob()).ok()) << ValidateJobConfig(HashedJob()).message();
  JobConfig width = HashedJob();
  width.mutable_data()->set_num_features(1000);
  EXPECT_EQ(ValidateJobConfig(width).message(),
            "config field data.num_features: must be 0 (unset) with data.hashed_features: true: feature ids are any "
            "64-bit integer and the model has no input width; got 1000");
  JobConfig idx = HashedJob();
  idx.mutable_data()->set_format(IDX);
  idx.mutable_data()->set_train_label_file("labels");
  EXPECT_EQ(ValidateJobConfig(idx).message(),
            "config field data.hashed_features: applies to XMC and LIBSVM text; data.format IDX is dense pixels, not "
            "64-bit feature ids");
  JobConfig dense = HashedJob();
  dense.mutable_model()->set_type(DENSE_MLP);
  dense.mutable_data()->set_format(LIBSVM);
  const Status st = ValidateModelConfig(dense);
  EXPECT_EQ(st.message().rfind("config field data.hashed_features: model.type DENSE_MLP", 0), 0u) << st.message();
  // Without the setting, a width is still required.
  JobConfig plain = HashedJob();
  plain.mutable_data()->set_hashed_features(false);
  EXPECT_EQ(ValidateJobConfig(plain).message(), "config field data.num_features: must be > 0 (the model's input width)");
}

}  // namespace
}  // namespace tether
