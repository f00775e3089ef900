// The key-value service without sockets: pulls now or parked on the bound
// (and answered in order once the min clock admits them), pushes with the
// staleness τ, key lists (define, use, unknown), a leaving worker's parked
// pulls, and refusals, with exact values and counts.
#include "server/kv_service.h"

#include <gtest/gtest.h>

#include "server/testing/recording_outbox.h"

namespace tether {
namespace {

using testing::RecordingOutbox;

constexpr uint32_t kRows = 0, kDense = 1;

google::protobuf::RepeatedPtrField<TableSpec> Tables(StalenessPolicy policy = NONE) {
  google::protobuf::RepeatedPtrField<TableSpec> specs;
  TableSpec* rows = specs.Add();
  rows->set_id(kRows);
  rows->set_name("w");
  rows->set_kind(TableSpec::ROW);
  rows->set_dim(2);
  rows->mutable_init()->set_kind(TableInitializer::ZEROS);
  rows->mutable_optimizer()->set_type(SGD);
  rows->mutable_optimizer()->set_learning_rate(1.0f);
  rows->mutable_consistency()->set_staleness(0);
  rows->mutable_consistency()->set_staleness_policy(policy);
  TableSpec* dense = specs.Add();
  *dense = *rows;
  dense->set_id(kDense);
  dense->set_name("b");
  dense->set_kind(TableSpec::DENSE);
  dense->set_size(3);
  return specs;
}

Message Request(MessageType type, int rank, uint32_t table, const std::vector<uint64_t>& keys,
                const std::vector<float>& values, int64_t clock = 0) {
  Message m;
  m.header.set_type(type);
  m.header.set_sender_rank(rank);
  m.header.set_request_id(1000);
  m.header.set_table_id(table);
  m.header.set_clock(clock);
  m.header.set_num_keys(keys.size());
  m.header.set_num_values(values.size());
  if (table == kRows) m.header.set_value_dim(2);
  if (!keys.empty()) m.keys.rebuild(keys.data(), keys.size() * sizeof(uint64_t));
  if (!values.empty()) m.values.rebuild(values.data(), values.size() * sizeof(float));
  return m;
}

class KvServiceTest : public ::testing::Test {
 protected:
  KvServiceTest() : clocks_(2, 0), kv_(0, 1, &clocks_, &stats_, &out_) {}
  void SetUp() override {
    kv_.DefineTables(Tables());
    kv_.WorkerJoined(0, false, 1 << 20);
    kv_.WorkerJoined(1, false, 1 << 20);
  }
  ClockTracker clocks_;
  ServerStats stats_;
  RecordingOutbox out_;
  KvService kv_;
};

TEST_F(KvServiceTest, APushIsAppliedAndAPullReadsIt) {
  kv_.Push("w0", Request(PUSH, 0, kRows, {3, 7}, {-1, -2, -3, -4}));
  ASSERT_EQ(out_.sent.size(), 1u);
  EXPECT_EQ(out_.last().header.type(), PUSH_REPLY);
  EXPECT_EQ(out_.last().header.push_reply().table_version(), 1u);  // one version per push applied
  Message pull = Request(PULL, 1, kRows, {3, 7, 9}, {});
  kv_.Pull("w1", &pull);
  ASSERT_EQ(out_.last().header.type(), PULL_REPLY);
  EXPECT_EQ(out_.floats(1), (std::vector<float>{1, 2, 3, 4, 0, 0}));
  kv_.Push("w0", Request(PUSH, 0, kDense, {}, {1, 1, 1}));
  Message dense = Request(PULL, 0, kDense, {}, {});
  kv_.Pull("w0", &dense);
  EXPECT_EQ(out_.floats(3), (std::vector<float>{-1, -1, -1}));
  EXPECT_EQ(stats_.pulls, 2u);
  EXPECT_EQ(stats_.pushes, 2u);
  EXPECT_EQ(stats_.rows_pushed, 2u);
  EXPECT_EQ(stats_.rows_pulled, 3u);
  EXPECT_EQ(stats_.updates_applied, 3u);  // 2 rows + 1 dense push
  ShardStats s;
  kv_.FillStats(&s);
  ASSERT_EQ(s.table_rows_size(), 2);
  EXPECT_EQ(s.table_rows(0), 3u);  // rows 3, 7 and 9 (a pull creates rows)
  EXPECT_EQ(s.table_rows(1), 0u);
}

TEST_F(KvServiceTest, APullPastTheBoundWaitsAndIsAnsweredOnceItHolds) {
  // BSP: worker 0 at clock 1 reads what every worker did before clock 1.
  clocks_.Advance(0, 1);
  Message early = Request(PULL, 0, kRows, {1}, {}, /*clock=*/1);
  kv_.Pull("w0", &early);
  EXPECT_TRUE(out_.sent.empty());
  EXPECT_EQ(stats_.deferred_pulls, 1u);
  kv_.Push("w1", Request(PUSH, 1, kRows, {1}, {-5, -5}));
  kv_.ServeReadyPulls();  // the min clock did not move: still parked
  ASSERT_EQ(out_.sent.size(), 1u);
  ASSERT_TRUE(clocks_.Advance(1, 1));
  kv_.ServeReadyPulls();
  ASSERT_EQ(out_.sent.size(), 2u);
  EXPECT_EQ(out_.last().identity, "w0");
  EXPECT_EQ(out_.floats(1), (std::vector<float>{5, 5}));  // worker 1's clock-0 push is in
  EXPECT_EQ(stats_.bound_violations, 0u);
  EXPECT_GE(kv_.bound_wait_s(0), 0.0);
}

TEST_F(KvServiceTest, ALeavingWorkersParkedPullsGoAndTheRestFailWithTheJob) {
  clocks_.Advance(0, 1);
  clocks_.Advance(1, 2);
  Message a = Request(PULL, 0, kRows, {1}, {}, 1), b = Request(PULL, 1, kRows, {2}, {}, 2);
  kv_.Pull("w0", &a);  // min clock 1: answered
  kv_.Pull("w1", &b);  // clock 2 > min 1: parked
  ASSERT_EQ(out_.sent.size(), 1u);
  kv_.WorkerLeft(1, "w1");
  EXPECT_EQ(kv_.FailWaiting("the job ends"), 0);
  Message c = Request(PULL, 1, kRows, {2}, {}, 2);
  kv_.Pull("w1-new", &c);
  EXPECT_EQ(kv_.FailWaiting("the job ends"), 1);
  EXPECT_EQ(out_.last().header.type(), ERROR_REPLY);
  EXPECT_EQ(out_.last().header.error_reply().error(), "the job ends");
  EXPECT_EQ(out_.last().identity, "w1-new");
}

TEST_F(KvServiceTest, AKeyListIsDefinedOnceThenUsedWithoutItsKeys) {
  Message define = Request(PULL, 0, kRows, {2, 4, 6}, {});
  define.header.set_key_list(5);
  kv_.Pull("w0", &define);
  EXPECT_EQ(kv_.key_list_stats().defined, 1u);
  // A push naming the list: no keys sent.
  Message use = Request(PUSH, 0, kRows, {}, {-1, -1, -2, -2, -3, -3});
  use.header.set_num_keys(3);
  use.header.set_key_list(5);
  kv_.Push("w0", use);
  ASSERT_EQ(out_.last().header.type(), PUSH_REPLY);
  EXPECT_EQ(kv_.key_list_stats().used, 1u);
  EXPECT_EQ(kv_.key_list_stats().bytes_saved, 3 * sizeof(uint64_t));
  Message read = Request(PULL, 1, kRows, {2, 4, 6}, {});
  kv_.Pull("w1", &read);
  EXPECT_EQ(out_.floats(out_.sent.size() - 1), (std::vector<float>{1, 1, 2, 2, 3, 3}));
  // Another worker naming a list it never defined here: told to send the keys.
  Message unknown = Request(PULL, 1, kRows, {}, {});
  unknown.header.set_num_keys(3);
  unknown.header.set_key_list(5);
  kv_.Pull("w1", &unknown);
  EXPECT_EQ(out_.last().header.type(), ERROR_REPLY);
  EXPECT_TRUE(out_.last().header.error_reply().key_list_unknown());
  EXPECT_EQ(kv_.key_list_stats().unknown, 1u);
  EXPECT_EQ(stats_.bad_messages, 0u);  // not a bad message
  // A rejoining worker starts with no lists.
  kv_.WorkerJoined(0, true, 1 << 20);
  EXPECT_EQ(kv_.key_lists(0)->size(), 0u);
}

TEST_F(KvServiceTest, StalenessScalesTheStepUnderInverse) {
  KvService kv(0, 1, &clocks_, &stats_, &out_);
  kv.DefineTables(Tables(INVERSE));
  kv.WorkerJoined(0, false, 0);
  // Two pushes computed from version 0: the second is 1 update stale (τ = 1: full step);
  // a third from version 0 is 2 stale: half a step.
  Message p = Request(PUSH, 0, kDense, {}, {-1, -1, -1});
  kv.Push("w0", p);
  kv.Push("w0", Request(PUSH, 0, kDense, {}, {-1, -1, -1}));
  kv.Push("w0", Request(PUSH, 0, kDense, {}, {-2, -2, -2}));
  Message pull = Request(PULL, 0, kDense, {}, {});
  kv.Pull("w0", &pull);
  EXPECT_EQ(out_.floats(out_.sent.size() - 1), (std::vector<float>{3, 3, 3}));
  EXPECT_EQ(stats_.staleness.pushes, 3u);
  EXPECT_EQ(stats_.staleness.sum, 3u);  // τ = 0, 1, 2
  EXPECT_EQ(stats_.staleness.max, 2u);
}

// Delay compensation (DC-ASGD, Zheng et al., ICML 2017), λ = 1/2, SGD at
// rate 1, ASP: the straggler's gradient is corrected by what the others
// moved its rows since it read them; what a push's reply carries counts as
// read; an absent-as-zeros evaluation read does not.
TEST_F(KvServiceTest, AStaleWorkersGradientIsCompensatedByWhatItMissed) {
  KvService kv(0, 1, &clocks_, &stats_, &out_);
  auto specs = Tables();
  for (TableSpec& t : specs) {
    t.mutable_consistency()->set_model(ASP);
    t.mutable_optimizer()->set_delay_compensation(0.5f);
    t.set_backup_workers(2);
  }
  kv.DefineTables(specs);
  kv.WorkerJoined(0, false, 1 << 20);
  kv.WorkerJoined(1, false, 1 << 20);
  const auto pull = [&](int rank, uint32_t table, const std::vector<uint64_t>& keys, bool zeros = false) {
    Message m = Request(PULL, rank, table, keys, {});
    if (zeros) m.header.mutable_pull()->set_absent_as_zeros(true);
    kv.Pull("w" + std::to_string(rank), &m);
    EXPECT_EQ(out_.last().header.type(), PULL_REPLY);
    return out_.floats(out_.sent.size() - 1);
  };
  const auto push = [&](int rank, uint32_t table, const std::vector<uint64_t>& keys, const std::vector<float>& g,
                        bool want_values = false) {
    Message m = Request(PUSH, rank, table, keys, g);
    if (want_values) m.header.mutable_push()->set_want_values(true);
    kv.Push("w" + std::to_string(rank), m);
    EXPECT_EQ(out_.last().header.type(), PUSH_REPLY);
    return want_values ? out_.floats(out_.sent.size() - 1) : std::vector<float>{};
  };
  EXPECT_EQ(pull(0, kRows, {3}), (std::vector<float>{0, 0}));
  EXPECT_EQ(pull(1, kRows, {3}), (std::vector<float>{0, 0}));
  push(0, kRows, {3}, {1, 2});  // current: w = (−1, −2)
  // Worker 1 computed (2, −1) on (0, 0); the row moved by (−1, −2):
  // g' = (2 + ½·4·(−1), −1 + ½·1·(−2)) = (0, −2), so w = (−1, 0) (without
  // compensation it would be (−3, −1)).
  push(1, kRows, {3}, {2, -1});
  EXPECT_EQ(pull(1, kRows, {3}), (std::vector<float>{-1, 0}));
  // Read-my-writes: the reply's rows are worker 1's new read.
  EXPECT_EQ(push(1, kRows, {3}, {1, 1}, /*want_values=*/true), (std::vector<float>{-2, -1}));
  // Worker 0 still read (0, 0): drift (−2, −1), g' = (2 − 4, 2 − 2) = (−2, 0).
  push(0, kRows, {3}, {2, 2});
  // Worker 1 read (−2, −1) in the reply: drift (2, 0), g' = (1 + 1, 2).
  push(1, kRows, {3}, {1, 2});
  // An absent-as-zeros read (evaluation) is not a backup: worker 0's stays (0, 0).
  EXPECT_EQ(pull(0, kRows, {3}, /*zeros=*/true), (std::vector<float>{-2, -3}));
  push(0, kRows, {3}, {1, 1});  // drift (−2, −3): g' = (1 − 1, 1 − 1.5) = (0, −0.5)
  EXPECT_EQ(pull(0, kRows, {3}), (std::vector<float>{-2, -2.5f}));
  // A dense slice: both read (0, 0, 0); worker 0 moves it by (−1, −2, 0).
  pull(0, kDense, {});
  pull(1, kDense, {});
  push(0, kDense, {}, {1, 2, 0});
  push(1, kDense, {}, {2, 1, 4});  // g' = (2 − 2, 1 − 1, 4)
  EXPECT_EQ(pull(0, kDense, {}), (std::vector<float>{-1, -2, -4}));
  EXPECT_EQ(stats_.bad_messages, 0u);
}

TEST_F(KvServiceTest, ADeltaOutsideAveragingIsRefused) {
  kv_.PushDelta("w0", Request(PUSH_DELTA, 0, kRows, {1}, {1, 1}));
  EXPECT_EQ(out_.last().header.type(), ERROR_REPLY);
  EXPECT_NE(out_.last().header.error_reply().error().find("is not trained with consistency.model AVERAGE"), std::string::npos);
  EXPECT_EQ(stats_.bad_messages, 1u);
  EXPECT_EQ(stats_.pushes, 0u);
}

// A 16-bit pull_wire: every reply says how many of its values the shard
// saturated narrowing them, by each of the three ways a reply is narrowed
// (rows gathered first, wide rows straight from the table, a dense slice).
TEST(KvServiceWireTest, RepliesSayHowManyValuesFp16Saturated) {
  ClockTracker clocks(1, 0);
  ServerStats stats;
  RecordingOutbox out;
  KvService kv(0, 1, &clocks, &stats, &out);
  google::protobuf::RepeatedPtrField<TableSpec> specs = Tables();
  TableSpec* wide = specs.Add();
  *wide = specs[0];
  wide->set_id(2);
  wide->set_name("wide");
  wide->set_dim(16);  // kMinNarrowedRowFloats: narrowed from the table
  for (TableSpec& t : specs) t.set_pull_wire(FP16);
  kv.DefineTables(specs);
  kv.WorkerJoined(0, false, 1 << 20);
  // SGD at rate 1: a weight is minus its gradient. 70000 is past FP16's
  // 65504; -1 and 65000 fit (as does 65504 itself below).
  kv.Push("w0", Request(PUSH, 0, kRows, {1, 2}, {-70000, 1, -65000, 80000}));
  std::vector<float> grad(32, 0.0f);
  grad[0] = -1e6f;
  grad[17] = 1e5f;
  grad[18] = 65504;
  Message wide_push = Request(PUSH, 0, 2, {4, 5}, grad);
  wide_push.header.set_value_dim(16);
  kv.Push("w0", wide_push);
  kv.Push("w0", Request(PUSH, 0, kDense, {}, {-1e9f, 2, 3}));
  const auto pulled = [&](uint32_t table, const std::vector<uint64_t>& keys) {
    Message pull = Request(PULL, 0, table, keys, {});
    if (table == 2) pull.header.set_value_dim(16);
    kv.Pull("w0", &pull);
    EXPECT_EQ(out.last().header.type(), PULL_REPLY);
    EXPECT_EQ(out.last().header.value_encoding(), FP16);
    return out.last().header.has_values_saturated() ? out.last().header.values_saturated() : 0;
  };
  EXPECT_EQ(pulled(kRows, {1, 2, 3}), 2u);  // 70000 and -80000
  EXPECT_EQ(pulled(kRows, {3}), 0u);        // absent: the field too
  EXPECT_EQ(pulled(2, {4, 5}), 2u);         // 1e6 and -1e5
  EXPECT_EQ(pulled(kDense, {}), 1u);        // 1e9
}

}  // namespace
}  // namespace tether
