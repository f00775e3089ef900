// Delay compensation on a shard's table (DC-ASGD, Zheng et al., ICML 2017):
// the per-worker backups (added with a row, recorded at a read, moved with
// an evicted row's replacement, reset by a restore) and the compensated
// step, with exact values: SGD at learning rate 1 and λ = 1/2.
#include "server/delay_backups.h"

#include <gtest/gtest.h>

#include <vector>

#include "server/table.h"

namespace tether {
namespace {

constexpr uint32_t kDim = 2;

std::vector<float> BackupOf(const ServerTable& t, int rank, uint64_t row) {
  const DelayBackups* b = t.delay_backups();
  return std::vector<float>(b->Backup(rank, row), b->Backup(rank, row) + b->width());
}

TableSpec RowSpec(float lambda, uint32_t workers) {
  TableSpec spec;
  spec.set_id(0);
  spec.set_name("w");
  spec.set_kind(TableSpec::ROW);
  spec.set_dim(kDim);
  spec.mutable_init()->set_kind(TableInitializer::ZEROS);
  spec.mutable_optimizer()->set_type(SGD);
  spec.mutable_optimizer()->set_learning_rate(1.0f);
  spec.mutable_optimizer()->set_delay_compensation(lambda);
  spec.set_backup_workers(workers);
  return spec;
}

std::vector<float> Pull(ServerTable& t, const std::vector<uint64_t>& keys, int rank) {
  std::vector<float> out(keys.size() * kDim);
  EXPECT_TRUE(t.PullRows(keys.data(), keys.size(), out.data()).ok());
  t.NoteRead(rank, keys.data(), keys.size());
  return out;
}

TEST(DelayBackupsTest, SpansAddRecordMovePopAndReset) {
  DelayBackups b(2, 3);
  const float a[3] = {1, 2, 3}, c[3] = {4, 5, 6}, d[3] = {7, 8, 9};
  b.Add(a);
  b.Add(c);
  EXPECT_EQ(b.spans(), 2u);
  EXPECT_TRUE(b.Covers(1));
  EXPECT_FALSE(b.Covers(2));
  EXPECT_FALSE(b.Covers(-1));
  b.Record(1, 1, d);
  EXPECT_EQ(std::vector<float>(b.Backup(0, 1), b.Backup(0, 1) + 3), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(std::vector<float>(b.Backup(1, 1), b.Backup(1, 1) + 3), (std::vector<float>{7, 8, 9}));
  b.Move(1, 0);  // the last span takes span 0's place, both workers' backups
  b.PopBack();
  EXPECT_EQ(b.spans(), 1u);
  EXPECT_EQ(std::vector<float>(b.Backup(0, 0), b.Backup(0, 0) + 3), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(std::vector<float>(b.Backup(1, 0), b.Backup(1, 0) + 3), (std::vector<float>{7, 8, 9}));
  b.Reset(0, a);
  EXPECT_EQ(std::vector<float>(b.Backup(1, 0), b.Backup(1, 0) + 3), (std::vector<float>{1, 2, 3}));
  EXPECT_GE(b.bytes(), 2u * 3u * sizeof(float));
}

TEST(DelayBackupsTest, AStaleWorkersRowGradientIsCompensatedExactly) {
  ServerTable t(RowSpec(0.5f, 2), 0, 0);
  ASSERT_TRUE(t.delay_compensated());
  const std::vector<uint64_t> key = {3};
  EXPECT_EQ(Pull(t, key, 0), (std::vector<float>{0, 0}));
  EXPECT_EQ(Pull(t, key, 1), (std::vector<float>{0, 0}));
  // Worker 0 pushes on what it read, still current: no compensation.
  const std::vector<float> g0 = {1, 2}, g1 = {2, -1};
  ASSERT_TRUE(t.PushRows(key.data(), 1, g0.data(), 1.0f, 0).ok());
  EXPECT_EQ(Pull(t, key, -1), (std::vector<float>{-1, -2}));
  // Worker 1 read (0, 0); the row moved by (−1, −2) since: g' = g +
  // ½·g²·(−1, −2) = (2 − 2, −1 − 1) = (0, −2), and w −= g'.
  ASSERT_TRUE(t.PushRows(key.data(), 1, g1.data(), 1.0f, 1).ok());
  EXPECT_EQ(Pull(t, key, 1), (std::vector<float>{-1, 0}));
  // Worker 0's backup is still (0, 0): a push of (2, 2) becomes 2 + ½·4·(−1,
  // 0) = (0, 2).
  const std::vector<float> g2 = {2, 2};
  ASSERT_TRUE(t.PushRows(key.data(), 1, g2.data(), 1.0f, 0).ok());
  EXPECT_EQ(Pull(t, key, -1), (std::vector<float>{-1, -2}));
  // No rank (−1) and a rank past backup_workers push as they are.
  ASSERT_TRUE(t.PushRows(key.data(), 1, g0.data(), 1.0f, -1).ok());
  ASSERT_TRUE(t.PushRows(key.data(), 1, g0.data(), 1.0f, 2).ok());
  EXPECT_EQ(Pull(t, key, -1), (std::vector<float>{-3, -6}));
}

TEST(DelayBackupsTest, ResolvedRowsAndADenseSliceAreCompensatedToo) {
  ServerTable rows(RowSpec(0.5f, 2), 0, 0);
  const std::vector<uint64_t> keys = {4, 9};
  std::vector<uint64_t> offsets;
  ASSERT_TRUE(rows.ResolveRows(keys.data(), 2, &offsets).ok());
  rows.NoteReadAt(1, offsets.data(), 2);  // worker 1 read (0, 0) twice
  const std::vector<float> g = {1, 1, 2, 2};
  ASSERT_TRUE(rows.PushRowsAt(offsets.data(), 2, g.data(), 1.0f, keys.data(), 0).ok());  // w = (−1, −1, −2, −2)
  ASSERT_TRUE(rows.PushRowsAt(offsets.data(), 2, g.data(), 1.0f, keys.data(), 1).ok());
  // g' = 1 + ½·1·(−1) = 0.5; 2 + ½·4·(−2) = −2.
  std::vector<float> out(4);
  rows.PullRowsAt(offsets.data(), 2, out.data());
  EXPECT_EQ(out, (std::vector<float>{-1.5f, -1.5f, 0, 0}));

  TableSpec spec = RowSpec(0.5f, 2);
  spec.set_kind(TableSpec::DENSE);
  spec.set_size(3);
  ServerTable dense(spec, 0, 3);
  dense.NoteDenseRead(0);
  dense.NoteDenseRead(1);
  const std::vector<float> a = {1, 2, 0}, b = {2, 1, 4};
  ASSERT_TRUE(dense.PushDense(a.data(), 1.0f, 0).ok());  // w = (−1, −2, 0)
  ASSERT_TRUE(dense.PushDense(b.data(), 1.0f, 1).ok());  // g' = (2 − 2, 1 − 1, 4) = (0, 0, 4)
  std::vector<float> w(3);
  dense.PullDense(w.data());
  EXPECT_EQ(w, (std::vector<float>{-1, -2, -4}));
}

TEST(DelayBackupsTest, AnEvictedRowsBackupsGoAndTheMovedRowKeepsItsOwn) {
  TableSpec spec = RowSpec(0.5f, 2);
  spec.mutable_budget()->set_max_rows(2);
  spec.mutable_budget()->set_evict(LRU);
  ServerTable t(spec, 0, 0);
  Pull(t, {1, 2}, -1);  // rows 0 (key 1) and 1 (key 2), read by nobody
  const std::vector<uint64_t> both = {1, 2};
  const std::vector<float> g = {-1, -1, -2, -2};
  ASSERT_TRUE(t.PushRows(both.data(), 2, g.data(), 1.0f, -1).ok());  // key 1 (1, 1), key 2 (2, 2)
  Pull(t, {1}, 1);  // worker 1's backup of key 1: (1, 1)
  Pull(t, {2}, 0);  // worker 0's backup of key 2: (2, 2); key 1 is now the least recent
  Pull(t, {3}, -1);  // evicts key 1; key 2 takes row 0, key 3 is row 1
  ASSERT_FALSE(t.Contains(1));
  ASSERT_EQ(t.KeysByRow(), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(t.delay_backups()->spans(), 2u);
  EXPECT_EQ(BackupOf(t, 0, 0), (std::vector<float>{2, 2}));
  EXPECT_EQ(BackupOf(t, 1, 0), (std::vector<float>{0, 0}));  // key 2 as created, not key 1's (1, 1)
  EXPECT_EQ(BackupOf(t, 1, 1), (std::vector<float>{0, 0}));
  // Worker 1 pushes key 2 on its (0, 0): drift (2, 2), g' = (1 + 1, 2 + 4).
  const std::vector<uint64_t> key2 = {2};
  const std::vector<float> g1 = {1, 2};
  ASSERT_TRUE(t.PushRows(key2.data(), 1, g1.data(), 1.0f, 1).ok());
  EXPECT_EQ(Pull(t, {2}, -1), (std::vector<float>{0, -4}));
}

TEST(DelayBackupsTest, ARestoreStartsEveryBackupAtTheRestoredWeights) {
  ServerTable t(RowSpec(0.5f, 3), 0, 0);
  const float row[kDim] = {5, -6};
  ASSERT_TRUE(t.RestoreRow(8, row).ok());
  t.ResetDelayBackups();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(BackupOf(t, r, 0), (std::vector<float>{5, -6}));
  // So the first push after a resume, from a worker that has not read yet,
  // is not compensated.
  const std::vector<uint64_t> key = {8};
  const std::vector<float> g = {1, 1};
  ASSERT_TRUE(t.PushRows(key.data(), 1, g.data(), 1.0f, 2).ok());
  EXPECT_EQ(Pull(t, {8}, -1), (std::vector<float>{4, -7}));
}

TEST(DelayBackupsTest, ResidentBytesCountTheBackups) {
  ServerTable with(RowSpec(0.5f, 4), 0, 0), without(RowSpec(0.0f, 0), 0, 0);
  EXPECT_FALSE(without.delay_compensated());
  Pull(with, {1, 2, 3}, 0);
  Pull(without, {1, 2, 3}, 0);
  EXPECT_EQ(with.resident_bytes() - without.resident_bytes(), with.delay_backups()->bytes());
  EXPECT_GE(with.delay_backups()->bytes(), 3u * 4u * kDim * sizeof(float));
}

}  // namespace
}  // namespace tether
