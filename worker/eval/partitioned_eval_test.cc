// Partitioned evaluation: the test set evaluated in parts and merged (rank
// order) gives what one evaluator over the whole set gives: hit counts and
// AUC exactly, sums of doubles to 1e-12; merging is associative on the
// counts; round 0 sums the label and feature counts and gives each worker
// its offset.
#include "worker/eval/partitioned_eval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "eval/metrics.h"
#include "compute/cpu_backend.h"
#include "input/feature_weighting.h"

namespace tether {
namespace {

struct Data {
  CsrMatrix labels;
  std::vector<float> scores;  // rows × outputs
  int64_t outputs = 0;
};

// Multi-label rows with 0-4 labels of `outputs`; scores on a coarse grid so
// that ties at the top happen (C21), scored by expected value.
Data MultiLabel(int64_t rows, int64_t outputs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Data d;
  d.outputs = outputs;
  d.labels.cols = outputs;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<uint32_t> idx;
    const int n = static_cast<int>(rng() % 5);
    for (int i = 0; i < n; ++i) {
      const uint32_t l = static_cast<uint32_t>(rng() % outputs);
      if (std::find(idx.begin(), idx.end(), l) == idx.end()) idx.push_back(l);
    }
    std::sort(idx.begin(), idx.end());
    const std::vector<float> ones(idx.size(), 1.0f);
    d.labels.AppendRow(idx.data(), ones.data(), idx.size());
    for (int64_t j = 0; j < outputs; ++j) d.scores.push_back(static_cast<float>(rng() % 7) * 0.25f);
  }
  return d;
}

// Single-label rows: binary (label column 0 present = positive) or one class.
Data SingleLabel(int64_t rows, int64_t outputs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Data d;
  d.outputs = outputs;
  d.labels.cols = outputs;
  const float one = 1.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const uint32_t c = outputs == 1 ? 0 : static_cast<uint32_t>(rng() % outputs);
    d.labels.AppendRow(&c, &one, outputs == 1 && rng() % 2 == 0 ? 0 : 1);
    for (int64_t j = 0; j < outputs; ++j) d.scores.push_back(static_cast<float>(static_cast<int>(rng() % 9) - 4) * 0.5f);
  }
  return d;
}

// Evaluates rows [b, e) of d in minibatches of 7.
Evaluator Part(LabelKind kind, const Data& d, int64_t b, int64_t e, Backend* backend,
               const std::vector<double>& w) {
  Evaluator ev(kind, d.outputs, backend, w);
  for (int64_t s = b; s < e; s += 7) {
    const int64_t t = std::min(e, s + 7);
    EXPECT_TRUE(ev.Add(d.scores.data() + s * d.outputs, d.labels, s, t).ok());
  }
  return ev;
}

// The parts of `workers` contiguous partitions, merged in rank order.
Evaluator Partitioned(LabelKind kind, const Data& d, int workers, Backend* backend, const std::vector<double>& w) {
  std::vector<EvalPartial> all;
  for (int r = 0; r < workers; ++r) {
    const int64_t b = d.labels.rows * r / workers, e = d.labels.rows * (r + 1) / workers;
    all.push_back(Part(kind, d, b, e, backend, w).Partial(r));
  }
  Evaluator merged(kind, d.outputs, backend, w);
  EXPECT_TRUE(MergeEvalPartials(all, &merged).ok());
  return merged;
}

double Metric(const Evaluator& e, const std::string& name) {
  for (const auto& [k, v] : e.Results())
    if (k == name) return v;
  return std::nan("");
}

TEST(PartitionedEvalTest, MultiLabelPartsMergeToTheWholeSet) {
  CpuBackend backend(1);
  const Data d = MultiLabel(301, 23, 5);
  const std::vector<double> w = InversePropensity(CountLabels(d.labels), d.labels.rows, 0.55, 1.5);
  const Evaluator whole = Part(LabelKind::kMultiLabel, d, 0, d.labels.rows, &backend, w);
  ASSERT_GT(whole.tied_rows(), 0);  // the grid makes ties: their expected values merge too
  for (int workers : {1, 2, 3, 4, 7}) {
    const Evaluator merged = Partitioned(LabelKind::kMultiLabel, d, workers, &backend, w);
    EXPECT_EQ(merged.rows(), 301) << workers;
    EXPECT_EQ(merged.tied_rows(), whole.tied_rows()) << workers;
    EXPECT_EQ(merged.Counts(), whole.Counts()) << workers;  // exact hit counts
    for (const auto& [name, value] : whole.Results()) EXPECT_NEAR(Metric(merged, name), value, 1e-12) << name;
  }
  // The counts are real: P@1 with no ties would be hits / rows.
  EXPECT_GT(whole.Counts()[0].second, 0);
  EXPECT_EQ(whole.Counts()[0].first, "precision_hits_at_1");
}

// Exact values: three rows, no ties. Row 0 {0}: top-1 0 (hit), top-3 0,1,2
// (1 hit); row 1 {1, 2}: ranking 3,2,1,0 → top-1 miss, top-3 2 hits;
// row 2 {}: 0 hits. precision_hits_at_1 = 1, at_3 = 3.
TEST(PartitionedEvalTest, HitCountsAreExactIntegers) {
  CpuBackend backend(1);
  Data d;
  d.outputs = 4;
  d.labels.cols = 4;
  const float one[2] = {1, 1};
  const uint32_t r0[1] = {0}, r1[2] = {1, 2};
  d.labels.AppendRow(r0, one, 1);
  d.labels.AppendRow(r1, one, 2);
  d.labels.AppendRow(r0, one, 0);
  d.scores = {4, 3, 2, 1, /**/ 1, 2, 3, 4, /**/ 1, 2, 3, 4};
  for (int workers : {1, 2, 3}) {
    const Evaluator m = Partitioned(LabelKind::kMultiLabel, d, workers, &backend, {});
    const auto counts = m.Counts();
    ASSERT_EQ(counts.size(), 3u);
    EXPECT_EQ(counts[0].second, 1) << workers;
    EXPECT_EQ(counts[1].second, 3) << workers;
    EXPECT_EQ(counts[2].second, 3) << workers;
    EXPECT_EQ(Metric(m, "precision_at_1"), 1.0 / 3) << workers;
    EXPECT_EQ(Metric(m, "precision_at_3"), 3.0 / 9) << workers;
  }
}

// (a + b) + c and a + (b + c): the counts are equal exactly, and one fixed
// order gives bit-identical doubles every time.
TEST(PartitionedEvalTest, MergeIsAssociativeOnTheCounts) {
  CpuBackend backend(1);
  const Data d = MultiLabel(90, 11, 9);
  const Evaluator a = Part(LabelKind::kMultiLabel, d, 0, 30, &backend, {});
  const Evaluator b = Part(LabelKind::kMultiLabel, d, 30, 61, &backend, {});
  const Evaluator c = Part(LabelKind::kMultiLabel, d, 61, 90, &backend, {});
  Evaluator ab(LabelKind::kMultiLabel, 11, &backend);
  ASSERT_TRUE(ab.Merge(a.Partial(0)).ok());
  ASSERT_TRUE(ab.Merge(b.Partial(1)).ok());
  Evaluator left(LabelKind::kMultiLabel, 11, &backend);
  ASSERT_TRUE(left.Merge(ab.Partial(0)).ok());
  ASSERT_TRUE(left.Merge(c.Partial(2)).ok());
  Evaluator bc(LabelKind::kMultiLabel, 11, &backend);
  ASSERT_TRUE(bc.Merge(b.Partial(1)).ok());
  ASSERT_TRUE(bc.Merge(c.Partial(2)).ok());
  Evaluator right(LabelKind::kMultiLabel, 11, &backend);
  ASSERT_TRUE(right.Merge(a.Partial(0)).ok());
  ASSERT_TRUE(right.Merge(bc.Partial(1)).ok());
  EXPECT_EQ(left.Counts(), right.Counts());
  EXPECT_EQ(left.rows(), 90);
  for (const auto& [name, value] : left.Results()) EXPECT_NEAR(Metric(right, name), value, 1e-12) << name;
  Evaluator again(LabelKind::kMultiLabel, 11, &backend);
  ASSERT_TRUE(again.Merge(ab.Partial(0)).ok());
  ASSERT_TRUE(again.Merge(c.Partial(2)).ok());
  EXPECT_EQ(again.Results(), left.Results());  // bit for bit
}

TEST(PartitionedEvalTest, BinaryAucAndAccuracyMergeExactly) {
  CpuBackend backend(1);
  const Data d = SingleLabel(257, 1, 3);
  const Evaluator whole = Part(LabelKind::kBinary, d, 0, d.labels.rows, &backend, {});
  for (int workers : {1, 2, 4}) {
    const Evaluator m = Partitioned(LabelKind::kBinary, d, workers, &backend, {});
    EXPECT_EQ(m.rows(), 257);
    EXPECT_EQ(m.Counts(), whole.Counts()) << workers;
    EXPECT_EQ(Metric(m, "auc"), Metric(whole, "auc")) << workers;  // from every score: exact
    EXPECT_EQ(Metric(m, "accuracy"), Metric(whole, "accuracy")) << workers;
    EXPECT_NEAR(Metric(m, "log_loss"), Metric(whole, "log_loss"), 1e-12) << workers;
  }
}

TEST(PartitionedEvalTest, MulticlassAccuracyAndLossMerge) {
  CpuBackend backend(1);
  const Data d = SingleLabel(200, 5, 4);
  const Evaluator whole = Part(LabelKind::kMultiClass, d, 0, d.labels.rows, &backend, {});
  ASSERT_GT(whole.tied_rows(), 0);
  for (int workers : {2, 4}) {
    const Evaluator m = Partitioned(LabelKind::kMultiClass, d, workers, &backend, {});
    EXPECT_EQ(m.Counts(), whole.Counts()) << workers;
    EXPECT_EQ(m.tied_rows(), whole.tied_rows());
    EXPECT_NEAR(Metric(m, "accuracy"), Metric(whole, "accuracy"), 1e-12) << workers;
    EXPECT_NEAR(Metric(m, "log_loss"), Metric(whole, "log_loss"), 1e-12) << workers;
  }
}

TEST(PartitionedEvalTest, AMismatchedPartialIsRefusedNamingTheWorker) {
  CpuBackend backend(1);
  Evaluator m(LabelKind::kMultiLabel, 4, &backend);
  EvalPartial p;
  p.set_rank(3);
  p.add_ks(1);
  const Status st = m.Merge(p);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("worker 3"), std::string::npos) << st.message();
  Evaluator b(LabelKind::kBinary, 1, &backend);
  EvalPartial q;
  q.set_rank(1);
  q.set_rows(2);
  q.add_scores(0.5f);
  EXPECT_FALSE(b.Merge(q).ok());
}

// Round 0: label counts summed over the partitions give the propensities
// of the whole training set; offsets are the test rows of lower ranks.
TEST(PartitionedEvalTest, SetupSumsLabelCountsAndGivesOffsets) {
  const Data d = MultiLabel(100, 9, 2);
  std::vector<EvalPartial> all;
  const int64_t test_rows[3] = {5, 0, 7};
  for (int r = 0; r < 3; ++r) {
    const CsrMatrix part = SliceRows(d.labels, 100 * r / 3, 100 * (r + 1) / 3);
    all.push_back(SetupPartial(r, LabelKind::kMultiLabel, part, test_rows[r]));
  }
  StatusOr<EvalSetup> s = EvalSetupFrom(all, 2, 3, LabelKind::kMultiLabel, 0.55, 1.5);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->train_rows, 100);
  EXPECT_EQ(s->test_rows, 12);
  EXPECT_EQ(s->test_offset, 5);
  EXPECT_EQ(s->test_offsets, (std::vector<int64_t>{0, 5, 5}));  // every rank's, for parts scored for others
  EXPECT_EQ(s->inv_propensity, InversePropensity(CountLabels(d.labels), 100, 0.55, 1.5));  // exact
  all.pop_back();
  EXPECT_FALSE(EvalSetupFrom(all, 0, 3, LabelKind::kMultiLabel, 0.55, 1.5).ok());
  // eval_max_rows counts rows of the whole set.
  EXPECT_EQ(RowsToEvaluate(5, 7, 0), 7);
  EXPECT_EQ(RowsToEvaluate(5, 7, 8), 3);
  EXPECT_EQ(RowsToEvaluate(5, 7, 3), 0);
  EXPECT_EQ(RowsToEvaluate(0, 5, 100), 5);
}

// Round 0 with data.tf_idf: the features' document counts of two workers'
// shares sum to those of the whole set, and every worker gets the IDF one
// worker holding it all would compute: rows {0, 1}, {0, 2} and {0} of 4
// features (df = 3, 1, 1, 0 over N = 3) give idf = ln(4 / (1 + df)) + 1.
TEST(PartitionedEvalTest, SetupSumsFeatureCountsIntoTheIdf) {
  CsrMatrix x;
  x.cols = 4;
  const uint32_t r0[] = {0, 1}, r1[] = {0, 2}, r2[] = {0};
  const float ones[] = {1, 1};
  x.AppendRow(r0, ones, 2);
  x.AppendRow(r1, ones, 2);
  x.AppendRow(r2, ones, 1);
  TrainingCounts a, b;
  a.feature_counts.assign(4, 0);
  b.feature_counts.assign(4, 0);
  CountDocumentFrequencies(SliceRows(x, 0, 2), &a.feature_counts);
  CountDocumentFrequencies(SliceRows(x, 2, 3), &b.feature_counts);
  a.rows = 2, b.rows = 1;
  EXPECT_EQ(a.feature_counts, (std::vector<uint64_t>{2, 1, 1, 0}));
  EXPECT_EQ(b.feature_counts, (std::vector<uint64_t>{1, 0, 0, 0}));
  const std::vector<EvalPartial> all = {SetupPartial(0, LabelKind::kBinary, a, 0),
                                        SetupPartial(1, LabelKind::kBinary, b, 0)};
  for (int rank = 0; rank < 2; ++rank) {
    StatusOr<EvalSetup> s = EvalSetupFrom(all, rank, 2, LabelKind::kBinary, 0.55, 1.5);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(s->train_rows, 3);
    const float ln2 = static_cast<float>(std::log(2.0) + 1.0);  // 1.6931472
    EXPECT_EQ(s->feature_idf, (std::vector<float>{1.0f, ln2, ln2, static_cast<float>(std::log(4.0) + 1.0)}));
    std::vector<uint64_t> whole;
    CountDocumentFrequencies(x, &whole);
    EXPECT_EQ(s->feature_idf, InverseDocumentFrequencies(whole, 3));  // one worker with every row
  }
  // Without feature counts there is no IDF; counts of another width are refused.
  EXPECT_TRUE(EvalSetupFrom({SetupPartial(0, LabelKind::kBinary, TrainingCounts{}, 0)}, 0, 1, LabelKind::kBinary,
                            0.55, 1.5)->feature_idf.empty());
  b.feature_counts.pop_back();
  const Status st = EvalSetupFrom({all[0], SetupPartial(1, LabelKind::kBinary, b, 0)}, 0, 2, LabelKind::kBinary,
                                  0.55, 1.5).status();
  EXPECT_EQ(st.message(), "evaluation setup: worker 1 counts 3 features, worker 0 4");
}

}  // namespace
}  // namespace tether
