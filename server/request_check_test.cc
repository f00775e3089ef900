// The checks every request passes before a room acts on it, each refusal
// with its words: rank bounds, HELLO first and from the rank's own
// connection, known tables and sizes, keys sorted, unique, this shard's and
// in range, finite values and push weights.
#include "server/request_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/partition.h"
#include "server/testing/recording_outbox.h"

namespace tether {
namespace {

using testing::RecordingOutbox;

Message Request(MessageType type, int rank, uint32_t table, const std::vector<uint64_t>& keys,
                const std::vector<float>& values, uint32_t dim = 2) {
  Message m;
  m.header.set_type(type);
  m.header.set_sender_rank(rank);
  m.header.set_table_id(table);
  m.header.set_num_keys(keys.size());
  m.header.set_num_values(values.size());
  m.header.set_value_dim(dim);
  if (!keys.empty()) m.keys.rebuild(keys.data(), keys.size() * sizeof(uint64_t));
  if (!values.empty()) m.values.rebuild(values.data(), values.size() * sizeof(float));
  return m;
}

class RequestCheckTest : public ::testing::Test {
 protected:
  RequestCheckTest()
      : clocks_(2, 0),
        members_(Options(), &clocks_, &stats_, &out_),
        check_(/*shard=*/1, /*num_shards=*/2, /*max_workers=*/3, /*max_workers_set=*/false, &tables_, &members_) {
    TableSpec rows;
    rows.set_id(0);
    rows.set_name("w");
    rows.set_dim(2);
    rows.set_num_keys(1000);
    tables_.push_back(std::make_unique<ServerTable>(rows, 0, 0));
    TableSpec dense;
    dense.set_id(1);
    dense.set_name("b");
    dense.set_kind(TableSpec::DENSE);
    dense.set_size(10);
    tables_.push_back(std::make_unique<ServerTable>(dense, 5, 10));  // shard 1 of 2 holds [5, 10)
    TableSpec any = rows;  // any key
    any.set_id(2);
    any.set_name("v");
    any.clear_num_keys();
    tables_.push_back(std::make_unique<ServerTable>(any, 0, 0));
    members_.Admit(0, "w0", -1);
    // This shard's keys, in order.
    for (uint64_t k = 0; mine_.size() < 4; ++k)
      if (ShardForKey(k, 2) == 1) mine_.push_back(k);
  }
  static MembershipOptions Options() {
    MembershipOptions o;
    o.shard = 1;
    o.num_shards = 2;
    o.initial_workers = 2;
    o.max_workers = 3;
    return o;
  }
  std::string Refusal(const Message& m, const std::string& identity = "w0") {
    const Status st = check_.Check(identity, m);
    EXPECT_FALSE(st.ok());
    return st.message();
  }

  ClockTracker clocks_;
  ServerStats stats_;
  RecordingOutbox out_;
  Membership members_;
  std::vector<std::unique_ptr<ServerTable>> tables_;
  RequestCheck check_;
  std::vector<uint64_t> mine_;
};

TEST_F(RequestCheckTest, AWellFormedRequestPasses) {
  EXPECT_TRUE(check_.Check("w0", Request(PULL, 0, 0, {mine_[0], mine_[2]}, {})).ok());
  EXPECT_TRUE(check_.Check("w0", Request(PUSH, 0, 0, {mine_[1]}, {0.5f, -1})).ok());
  EXPECT_TRUE(check_.Check("w0", Request(PUSH, 0, 1, {}, {1, 2, 3, 4, 5}, 1)).ok());
  EXPECT_TRUE(check_.Check("w0", Request(CLOCK, 0, 0, {}, {})).ok());
  EXPECT_TRUE(check_.Check("anyone", Request(HELLO, 2, 0, {}, {})).ok());  // a joiner within max_workers
}

TEST_F(RequestCheckTest, RanksAndConnectionsAreChecked) {
  EXPECT_EQ(Refusal(Request(HELLO, 3, 0, {}, {})),
            "sender rank 3 outside [0, 3) (cluster.max_workers = 3, i.e. cluster.num_workers; raise it to let more "
            "workers join)");
  // A HELLO past the ranks from a worker started for a larger job: that
  // count is named, not the rank.
  Message larger = Request(HELLO, 3, 0, {}, {});
  larger.header.mutable_hello()->set_num_workers(4);
  EXPECT_EQ(Refusal(larger), "cluster.num_workers differs: worker 3 has 4, server 1 has 3 (--num_workers must be the "
                             "same on every server and worker)");
  EXPECT_EQ(Refusal(Request(CLOCK, 2, 0, {}, {})), "CLOCK from worker 2 before its HELLO");
  EXPECT_EQ(Refusal(Request(CLOCK, 1, 0, {}, {})), "CLOCK from worker 1 before its HELLO");
  EXPECT_EQ(Refusal(Request(CLOCK, 0, 0, {}, {}), "stranger"),
            "CLOCK claims to come from worker 0, which joined from another connection");
}

TEST_F(RequestCheckTest, TablesAndSizesAreChecked) {
  EXPECT_EQ(Refusal(Request(PULL, 0, 3, {}, {})), "PULL from worker 0: unknown table id 3");
  EXPECT_EQ(Refusal(Request(PULL, 0, 1, {mine_[0]}, {})), "dense table b takes no keys");
  EXPECT_EQ(Refusal(Request(PUSH, 0, 1, {}, {1, 2}, 1)),
            "PUSH from worker 0 to dense table b has 2 values; this shard holds 5");
  EXPECT_EQ(Refusal(Request(PULL, 0, 0, {mine_[0]}, {}, 3)),
            "PULL from worker 0 for table w: value_dim 3 but the table has dim 2");
  EXPECT_EQ(Refusal(Request(PUSH, 0, 0, {mine_[0]}, {1, 2, 3})),
            "PUSH from worker 0 for table w: 3 values for 1 keys of dim 2");
}

TEST_F(RequestCheckTest, KeysMustBeSortedUniqueThisShardsAndInRange) {
  EXPECT_EQ(Refusal(Request(PULL, 0, 0, {mine_[0], mine_[2], mine_[1]}, {})),
            "PULL from worker 0 for table w: keys not sorted and unique at position 2");
  EXPECT_EQ(Refusal(Request(PULL, 0, 0, {mine_[0], mine_[0]}, {})),
            "PULL from worker 0 for table w: keys not sorted and unique at position 1");
  uint64_t other = 0;
  while (ShardForKey(other, 2) != 0) ++other;
  EXPECT_EQ(Refusal(Request(PULL, 0, 0, {other}, {})),
            "PULL from worker 0: key " + std::to_string(other) + " of table w belongs to shard 0");
  uint64_t big = 1000;
  while (ShardForKey(big, 2) != 1) ++big;
  EXPECT_EQ(Refusal(Request(PULL, 0, 0, {big}, {})),
            "PULL from worker 0: key " + std::to_string(big) + " of table w is outside its key range [0, 1000)");
  // A request naming a kept key list carries no keys: nothing to scan.
  Message listed = Request(PULL, 0, 0, {}, {});
  listed.header.set_num_keys(2);
  listed.header.set_key_list(9);
  EXPECT_TRUE(check_.Check("w0", listed).ok());
}

TEST_F(RequestCheckTest, ValuesMustBeFiniteAndWeightsPositive) {
  EXPECT_EQ(Refusal(Request(PUSH, 0, 0, {mine_[0], mine_[1]}, {1, 2, 3, std::nanf("")})),
            "PUSH from worker 0 to table w: value 3 (key " + std::to_string(mine_[1]) +
                ", column 1) is NaN; nothing applied");
  EXPECT_EQ(Refusal(Request(PUSH_DELTA, 0, 1, {}, {0, 0, std::numeric_limits<float>::infinity(), 0, 0}, 1)),
            "PUSH_DELTA from worker 0 to table b: value 2 is infinite; nothing applied");
  Message weighted = Request(PUSH, 0, 0, {mine_[0]}, {1, 2});
  weighted.header.mutable_push()->set_push_weight(-1);
  EXPECT_EQ(Refusal(weighted), "PUSH from worker 0: push_weight -1.000000 must be a finite number > 0; nothing applied");
  // A long push with one NaN deep inside: found at its exact place.
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; keys.size() < 5000; ++k)
    if (ShardForKey(k, 2) == 1) keys.push_back(k);
  std::vector<float> values(keys.size() * 2, 0.25f);
  EXPECT_TRUE(check_.Check("w0", Request(PUSH, 0, 2, keys, values)).ok());
  values[7001] = std::nanf("");
  EXPECT_EQ(Refusal(Request(PUSH, 0, 2, keys, values)),
            "PUSH from worker 0 to table v: value 7001 (key " + std::to_string(keys[3500]) +
                ", column 1) is NaN; nothing applied");
  // A push the inbox joined from chunks was scanned as it came: its finding
  // is taken as it is (Message::first_non_finite), the same refusal.
  Message joined = Request(PUSH, 0, 2, keys, values);
  joined.first_non_finite = 7001;
  EXPECT_EQ(Refusal(joined), "PUSH from worker 0 to table v: value 7001 (key " + std::to_string(keys[3500]) +
                                 ", column 1) is NaN; nothing applied");
  values[7001] = 0.25f;
  Message clean = Request(PUSH, 0, 2, keys, values);
  clean.first_non_finite = values.size();
  EXPECT_TRUE(check_.Check("w0", clean).ok());
}

}  // namespace
}  // namespace tether
