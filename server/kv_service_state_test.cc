// KvService's shard state: a service with a budgeted row table (admission,
// LRU eviction, delay compensation, Adam), a row table whose index went
// hashed (key lists, AdaGrad), a delay-compensated dense slice, parked
// pulls (one served from a key list) and bound waits is saved and restored
// into a fresh service; both then save the same state and answer further
// pulls and pushes with the same replies, bit for bit. An AVERAGE job's
// pending deltas and open rounds likewise. Each kind of malformed state is
// a DataLoss naming the table and the part.
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "server/kv_service.h"
#include "server/testing/recording_outbox.h"

namespace tether {
namespace {

using google::protobuf::util::MessageDifferencer;
using testing::RecordingOutbox;
using Tables = google::protobuf::RepeatedPtrField<TableSpec>;

constexpr uint32_t kBudgeted = 0, kHashed = 1, kDense = 2;
constexpr uint64_t kFar = uint64_t{1} << 50;  // a second cluster of keys: the index gives up its order

Tables Specs(ConsistencyModel model = SSP) {
  Tables specs;
  TableSpec* w = specs.Add();
  w->set_id(kBudgeted);
  w->set_name("w");
  w->set_kind(TableSpec::ROW);
  w->set_dim(2);
  w->mutable_init()->set_kind(TableInitializer::UNIFORM);
  w->mutable_init()->set_bound(0.5f);
  w->mutable_init()->set_seed(3);
  w->mutable_optimizer()->set_type(ADAM);
  w->mutable_optimizer()->set_learning_rate(0.1f);
  w->mutable_consistency()->set_model(model);
  w->mutable_consistency()->set_staleness(0);
  TableSpec* e = specs.Add();
  *e = *w;
  if (model != AVERAGE) {
    w->mutable_optimizer()->set_delay_compensation(0.5f);
    w->set_backup_workers(2);
    w->mutable_budget()->set_max_rows(6);
    w->mutable_budget()->set_evict(LRU);
    w->mutable_budget()->set_admit_after(2);
  }
  e->set_id(kHashed);
  e->set_name("e");
  e->set_dim(3);
  e->mutable_optimizer()->set_type(ADAGRAD);
  TableSpec* b = specs.Add();
  *b = *w;
  b->clear_budget();
  b->set_id(kDense);
  b->set_name("b");
  b->set_kind(TableSpec::DENSE);
  b->set_size(5);
  b->clear_dim();
  b->mutable_optimizer()->set_type(SGD);
  return specs;
}

uint32_t Dim(uint32_t table) { return table == kBudgeted ? 2 : table == kHashed ? 3 : 0; }

Message Request(MessageType type, int rank, uint32_t table, const std::vector<uint64_t>& keys,
                const std::vector<float>& values, int64_t clock, uint64_t key_list = 0) {
  Message m;
  m.header.set_type(type);
  m.header.set_sender_rank(rank);
  m.header.set_request_id(1000 + clock);
  m.header.set_table_id(table);
  m.header.set_clock(clock);
  m.header.set_num_keys(keys.size());
  m.header.set_num_values(values.size());
  m.header.set_key_list(key_list);
  if (Dim(table) > 0) m.header.set_value_dim(Dim(table));
  if (!keys.empty()) m.keys.rebuild(keys.data(), keys.size() * sizeof(uint64_t));
  if (!values.empty()) m.values.rebuild(values.data(), values.size() * sizeof(float));
  return m;
}

// A key list's use: no keys, n rows.
Message UseList(MessageType type, int rank, uint32_t table, uint64_t n, const std::vector<float>& values,
                int64_t clock, uint64_t key_list) {
  Message m = Request(type, rank, table, {}, values, clock, key_list);
  m.header.set_num_keys(n);
  return m;
}

std::vector<float> Grad(size_t n, float base) {
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = base + 0.25f * static_cast<float>(i % 7);
  return g;
}

struct Shard {
  explicit Shard(int workers) : clocks(workers, 0), kv(0, 1, &clocks, &stats, &out) {}
  ClockTracker clocks;
  ServerStats stats;
  RecordingOutbox out;
  KvService kv;
};

struct Saved {
  KvServiceState state;
  std::vector<std::string> rows;
};

const auto kNow = std::chrono::steady_clock::time_point(std::chrono::hours(5));

Saved Save(const KvService& kv) {
  Saved s;
  kv.SaveState(&s.state, &s.rows, kNow);
  return s;
}

// `times`: compare the bound waits too (seconds waited are counted on the
// process's clock as pulls are released, so only until then).
void ExpectSameState(const KvService& a, const KvService& b, bool times = true) {
  const Saved sa = Save(a), sb = Save(b);
  std::string diff;
  MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  if (!times) {
    d.IgnoreField(BoundWaitState::descriptor()->FindFieldByName("seconds"));
    d.IgnoreField(BoundWaitState::descriptor()->FindFieldByName("counted_until_age_ns"));
  }
  EXPECT_TRUE(d.Compare(sa.state, sb.state)) << diff;
  EXPECT_EQ(sa.rows, sb.rows);
  // The counters, rows held and bytes resident (the room each vector
  // reserved) too.
  ShardStats fa, fb;
  a.FillStats(&fa);
  b.FillStats(&fb);
  EXPECT_TRUE(MessageDifferencer::Equals(fa, fb)) << fa.ShortDebugString() << " vs " << fb.ShortDebugString();
  EXPECT_GT(fa.resident_bytes(kDense), 0u);
}

// Replies sent from `from_a` on by a and `from_b` on by b: the same, bit for bit.
void ExpectSameReplies(const RecordingOutbox& a, size_t from_a, const RecordingOutbox& b, size_t from_b) {
  ASSERT_EQ(a.sent.size() - from_a, b.sent.size() - from_b);
  for (size_t i = 0; i < b.sent.size() - from_b; ++i) {
    const auto& x = a.sent[from_a + i];
    const auto& y = b.sent[from_b + i];
    EXPECT_EQ(x.identity, y.identity) << i;
    EXPECT_TRUE(MessageDifferencer::Equals(x.header, y.header)) << i << ": " << x.header.ShortDebugString() << " vs "
                                                                 << y.header.ShortDebugString();
    EXPECT_EQ(x.values, y.values) << i;
  }
}

// Puts `s` in a state with every part filled: admissions, evictions,
// backups, a hashed index, key lists, a dense slice, a bound wait and two
// parked pulls (one of a key list).
void Fill(Shard* s) {
  KvService& kv = s->kv;
  kv.DefineTables(Specs());
  kv.WorkerJoined(0, false, 1 << 20);
  kv.WorkerJoined(1, false, 1 << 20);
  for (int round = 0; round < 3; ++round)  // admitted at the second push; 8 keys into 6 rows: evictions
    for (uint64_t k = 1; k <= 8; ++k)
      kv.Push("w0", Request(PUSH, 0, kBudgeted, {k, k + 10}, Grad(4, 0.5f * k), 0));
  Message pull = Request(PULL, 1, kBudgeted, {5, 6, 7}, {}, 0);
  kv.Pull("w1", &pull);
  std::vector<uint64_t> clustered;
  for (uint64_t k = 0; k < 150; ++k) clustered.push_back(k);
  for (uint64_t k = 0; k < 150; ++k) clustered.push_back(kFar + k);
  Message many = Request(PULL, 0, kHashed, clustered, {}, 0);
  kv.Pull("w0", &many);
  Message define = Request(PULL, 0, kHashed, {3, 9, kFar + 4}, {}, 0, 77);
  kv.Pull("w0", &define);
  kv.Push("w0", UseList(PUSH, 0, kHashed, 3, Grad(9, -1), 0, 77));
  Message other = Request(PULL, 0, kHashed, {kFar + 1, kFar + 2}, {}, 0, 78);
  kv.Pull("w0", &other);  // a second list; the parked use of 77 below makes 78 the least recently used
  Message dense = Request(PULL, 1, kDense, {}, {}, 0);
  kv.Pull("w1", &dense);
  kv.Push("w1", Request(PUSH, 1, kDense, {}, Grad(5, 2), 0));
  // A pull past the bound, released: a bound wait. Then two parked.
  s->clocks.Advance(0, 1);
  Message early = Request(PULL, 0, kBudgeted, {2}, {}, 1);
  kv.Pull("w0", &early);
  s->clocks.Advance(1, 1);
  kv.ServeReadyPulls();
  s->clocks.Advance(0, 2);
  Message parked = Request(PULL, 0, kBudgeted, {1, 3, 5}, {}, 2);
  kv.Pull("w0", &parked);
  Message parked_list = UseList(PULL, 0, kHashed, 3, {}, 2, 77);
  kv.Pull("w0", &parked_list);
}

TEST(KvServiceStateTest, ARestoredServiceSavesTheSameStateAndAnswersTheSame) {
  Shard a(2), b(2);
  Fill(&a);
  const ServerTable& w = *a.kv.tables()[kBudgeted];
  ASSERT_GT(w.rows_evicted(), 0u);
  ASSERT_GT(w.rows_not_admitted(), 0u);
  ASSERT_TRUE(a.kv.tables()[kHashed]->index_hashed());
  const size_t from_a = a.out.sent.size();
  b.clocks.Advance(0, 2);
  b.clocks.Advance(1, 1);
  Saved saved = Save(a.kv);
  ASSERT_EQ(saved.state.parked_size(), 2);
  ASSERT_TRUE(saved.state.parked(1).has_rows());
  ASSERT_EQ(saved.state.key_lists_size(), 2);
  ASSERT_EQ(saved.state.key_lists(0).lists_size(), 2);
  EXPECT_EQ(saved.state.key_lists(0).lists(0).id(), 78u);  // least recently used first
  ASSERT_TRUE(b.kv.RestoreState(saved.state, saved.rows, kNow).ok());
  ExpectSameState(a.kv, b.kv);
  EXPECT_EQ(b.kv.tables()[kBudgeted]->rows_evicted(), w.rows_evicted());
  EXPECT_TRUE(b.kv.tables()[kHashed]->index_hashed());
  EXPECT_EQ(b.kv.bound_wait_s(0), a.kv.bound_wait_s(0));
  // Further work on both: the parked pulls are released, pushes admit and
  // evict, key lists are used, the dense slice moves.
  for (Shard* s : {&a, &b}) {
    s->clocks.Advance(1, 2);
    s->kv.ServeReadyPulls();
    for (uint64_t k = 4; k <= 12; ++k)
      s->kv.Push("w1", Request(PUSH, 1, kBudgeted, {k, k + 20}, Grad(4, -0.5f * k), 2));
    Message read = Request(PULL, 1, kBudgeted, {4, 5, 6, 7, 8}, {}, 2);
    s->kv.Pull("w1", &read);
    s->kv.Push("w0", UseList(PUSH, 0, kHashed, 3, Grad(9, 3), 2, 77));
    Message list = UseList(PULL, 0, kHashed, 3, {}, 2, 77);
    s->kv.Pull("w0", &list);
    Message grow = Request(PULL, 1, kHashed, {500, 501, kFar + 900}, {}, 2);
    s->kv.Pull("w1", &grow);
    s->kv.Push("w0", Request(PUSH, 0, kDense, {}, Grad(5, -1), 2));
    Message dense = Request(PULL, 0, kDense, {}, {}, 2);
    s->kv.Pull("w0", &dense);
  }
  ExpectSameReplies(a.out, from_a, b.out, 0);
  EXPECT_EQ(b.out.sent.size(), 17u);  // 2 released pulls, 9 + 2 pushes, 4 pulls
  ExpectSameState(a.kv, b.kv, /*times=*/false);
}

TEST(KvServiceStateTest, AnAveragingServiceKeepsItsPendingDeltasAndRounds) {
  Shard a(2), b(2);
  a.kv.DefineTables(Specs(AVERAGE));
  for (int r = 0; r < 2; ++r) a.kv.WorkerJoined(r, false, 0);
  a.kv.PushDelta("w0", Request(PUSH_DELTA, 0, kHashed, {4, 9}, Grad(6, 1), 0));
  a.kv.PushDelta("w0", Request(PUSH_DELTA, 0, kDense, {}, Grad(5, 1), 0));
  a.kv.RoundEnded(0, 1, 3);  // round 0 ended by worker 0 only: open
  a.kv.PushDelta("w1", Request(PUSH_DELTA, 1, kHashed, {9, 11}, Grad(6, -2), 0));  // pending
  Saved saved = Save(a.kv);
  ASSERT_EQ(saved.state.average().rounds_size(), 1);
  ASSERT_EQ(saved.state.average().pending_size(), 1);
  ASSERT_TRUE(b.kv.RestoreState(saved.state, saved.rows, kNow).ok());
  ExpectSameState(a.kv, b.kv);
  const size_t from_a = a.out.sent.size();
  for (Shard* s : {&a, &b}) {
    s->kv.RoundEnded(1, 1, 5);
    s->clocks.Advance(0, 1);
    s->clocks.Advance(1, 1);
    s->kv.ServeReadyPulls();  // merges round 0
    Message pull = Request(PULL, 0, kHashed, {4, 9, 11}, {}, 1);
    s->kv.Pull("w0", &pull);
    Message dense = Request(PULL, 1, kDense, {}, {}, 1);
    s->kv.Pull("w1", &dense);
  }
  ExpectSameReplies(a.out, from_a, b.out, 0);
  EXPECT_EQ(b.out.sent.size(), 2u);
  ExpectSameState(a.kv, b.kv);
}

// ---- Malformed states: each a DataLoss naming where.

class KvServiceBadStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Fill(&a_);
    saved_ = Save(a_.kv);
  }
  // Restores saved_ into a fresh service; expects DataLoss whose message has `part`.
  void ExpectDataLoss(const std::string& part) {
    Shard b(2);
    const Status st = b.kv.RestoreState(saved_.state, saved_.rows, kNow);
    EXPECT_EQ(st.code(), Status::Code::kDataLoss) << st.message();
    EXPECT_NE(st.message().find(part), std::string::npos) << st.message();
  }
  Shard a_{2};
  Saved saved_;
};

TEST_F(KvServiceBadStateTest, ATableStringOfTheWrongLength) {
  saved_.rows[kHashed].push_back('x');
  ExpectDataLoss("kv.tables[1] (e): raw_bytes");
}

TEST_F(KvServiceBadStateTest, AStringCutShort) {
  saved_.rows[kBudgeted].resize(saved_.rows[kBudgeted].size() - 6);
  saved_.state.mutable_tables(kBudgeted)->set_raw_bytes(saved_.rows[kBudgeted].size());
  ExpectDataLoss("kv.tables[0] (w): admission sketch");
}

TEST_F(KvServiceBadStateTest, BytesLeftOver) {
  saved_.rows[kDense].append(4, '\0');
  saved_.state.mutable_tables(kDense)->set_raw_bytes(saved_.rows[kDense].size());
  ExpectDataLoss("kv.tables[2] (b): 4 byte(s) left over");
}

TEST_F(KvServiceBadStateTest, RowsPastMaxRows) {
  TableState* t = saved_.state.mutable_tables(kBudgeted);
  t->set_rows(100);
  t->set_data_floats(100 * t->stride());
  ExpectDataLoss("kv.tables[0] (w): rows 100 past max_rows 6");
}

TEST_F(KvServiceBadStateTest, AnIndexLayoutTheTableCannotHaveMade) {
  // Row 0 and row 1 swap slots: their keys are not found at their rows.
  std::string& s = saved_.rows[kHashed];
  const uint64_t rows = saved_.state.tables(kHashed).rows();
  std::string slot0 = s.substr(rows * 8, 8), slot1 = s.substr(rows * 8 + 8, 8);
  s.replace(rows * 8, 8, slot1);
  s.replace(rows * 8 + 8, 8, slot0);
  ExpectDataLoss("kv.tables[1] (e): index: the key of row");
}

TEST_F(KvServiceBadStateTest, ASlotCountPastItsRows) {
  saved_.state.mutable_tables(kHashed)->mutable_index()->set_slots(uint64_t{1} << 40);
  ExpectDataLoss("kv.tables[1] (e): index.slots");
}

TEST_F(KvServiceBadStateTest, AKeyListOfATableWhoseRowsMove) {
  saved_.state.mutable_key_lists(0)->mutable_lists(0)->set_table_id(kBudgeted);
  ExpectDataLoss("keeps no key lists");
}

TEST_F(KvServiceBadStateTest, ARankPastTheLimit) {
  saved_.state.mutable_key_lists(1)->set_rank(KvService::kMaxRanks);
  ExpectDataLoss("kv.key_lists[1].rank");
}

TEST_F(KvServiceBadStateTest, AParkedPullThatDoesNotDecode) {
  saved_.state.mutable_parked(0)->set_input("garbage");
  ExpectDataLoss("kv.parked[0]");
}

TEST_F(KvServiceBadStateTest, AnEvictionOrderThatIsNotAPermutation) {
  // The recency order follows keys, slots, rows and backups.
  const TableState& t = saved_.state.tables(kBudgeted);
  const uint64_t at = t.rows() * 16 + t.data_floats() * 4 + t.backup_spans() * 2 * 2 * 4;
  std::string& s = saved_.rows[kBudgeted];
  s.replace(at + 8, 8, s.substr(at, 8));  // the first row number twice
  ExpectDataLoss("kv.tables[0] (w): the recency order is not a permutation");
}

TEST_F(KvServiceBadStateTest, JobTablesThatDoNotValidate) {
  saved_.state.mutable_job_tables(kHashed)->set_dim(0);
  ExpectDataLoss("kv.job_tables");
}

}  // namespace
}  // namespace tether
