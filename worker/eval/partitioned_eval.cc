#include "worker/eval/partitioned_eval.h"

#include <algorithm>
#include <string>

#include "eval/metrics.h"
#include "core/net/eval_frames.h"
#include "input/feature_weighting.h"

namespace tether {

EvalPartial SetupPartial(int rank, LabelKind kind, const TrainingCounts& counts, int64_t test_rows) {
  EvalPartial p;
  p.set_rank(rank);
  p.set_train_rows(counts.rows);
  p.set_test_rows(test_rows);
  if (kind == LabelKind::kMultiLabel)
    *p.mutable_label_counts() = {counts.label_counts.begin(), counts.label_counts.end()};
  *p.mutable_feature_counts() = {counts.feature_counts.begin(), counts.feature_counts.end()};
  return p;
}

EvalPartial SetupPartial(int rank, LabelKind kind, const CsrMatrix& train_labels, int64_t test_rows) {
  TrainingCounts counts;
  if (kind == LabelKind::kMultiLabel) counts.label_counts = CountLabels(train_labels);
  counts.rows = train_labels.rows;
  return SetupPartial(rank, kind, counts, test_rows);
}

namespace {

// Adds `from` (worker `rank`'s) into *sum, the first partial setting its
// width. Errors: InvalidArgument when the widths differ.
Status AddCounts(const google::protobuf::RepeatedField<uint64_t>& from, bool first, int rank, const char* what,
                 std::vector<uint64_t>* sum) {
  if (first) sum->assign(static_cast<size_t>(from.size()), 0);
  if (static_cast<size_t>(from.size()) != sum->size())
    return Status::InvalidArgument("evaluation setup: worker " + std::to_string(rank) + " counts " +
                                   std::to_string(from.size()) + " " + what + ", worker 0 " +
                                   std::to_string(sum->size()));
  for (int i = 0; i < from.size(); ++i) (*sum)[static_cast<size_t>(i)] += from.Get(i);
  return Status::OK();
}

}  // namespace

StatusOr<EvalSetup> EvalSetupFrom(const std::vector<EvalPartial>& all, int rank, int num_workers, LabelKind kind,
                                  double psp_a, double psp_b) {
  if (static_cast<int>(all.size()) != num_workers)
    return Status::InvalidArgument("evaluation setup: " + std::to_string(all.size()) + " of " +
                                   std::to_string(num_workers) +
                                   " workers sent their label and test-row counts (a worker left before training)");
  EvalSetup s;
  std::vector<uint64_t> counts, feature_counts;
  for (size_t i = 0; i < all.size(); ++i) {
    const EvalPartial& p = all[i];
    if (p.rank() != static_cast<int>(i))
      return Status::InvalidArgument("evaluation setup: partial " + std::to_string(i) + " is rank " +
                                     std::to_string(p.rank()) + "'s");
    s.test_offsets.push_back(s.test_rows);
    if (p.rank() < rank) s.test_offset += p.test_rows();
    s.test_rows += p.test_rows();
    s.train_rows += p.train_rows();
    TETHER_RETURN_IF_ERROR(AddCounts(p.feature_counts(), i == 0, p.rank(), "features", &feature_counts));
    if (kind == LabelKind::kMultiLabel)
      TETHER_RETURN_IF_ERROR(AddCounts(p.label_counts(), i == 0, p.rank(), "labels", &counts));
  }
  if (kind == LabelKind::kMultiLabel) s.inv_propensity = InversePropensity(counts, s.train_rows, psp_a, psp_b);
  if (!feature_counts.empty()) s.feature_idf = InverseDocumentFrequencies(feature_counts, s.train_rows);
  return s;
}

StatusOr<EvalSetup> ExchangeEvalSetup(int rank, int num_workers, LabelKind kind, double psp_a, double psp_b,
                                      const CsrMatrix& train_labels, int64_t test_rows, JobSession* session) {
  TrainingCounts counts;
  if (kind == LabelKind::kMultiLabel) counts.label_counts = CountLabels(train_labels);
  counts.rows = train_labels.rows;
  return ExchangeEvalSetup(rank, num_workers, kind, psp_a, psp_b, counts, test_rows, session);
}

StatusOr<EvalSetup> ExchangeEvalSetup(int rank, int num_workers, LabelKind kind, double psp_a, double psp_b,
                                      const TrainingCounts& counts, int64_t test_rows, JobSession* session) {
  const EvalPartial mine = SetupPartial(rank, kind, counts, test_rows);
  std::vector<EvalPartial> all;
  TETHER_ASSIGN_OR_RETURN(bool complete, session->EvalGather(kSetupEvalRound, &mine, EvalGatherBody::EVAL_WAIT, &all));
  if (!complete) return Status::Internal("evaluation setup: shard 0 answered before every worker's counts were in");
  return EvalSetupFrom(all, rank, num_workers, kind, psp_a, psp_b);
}

StatusOr<EvalSetup> JoinEvalSetup(int rank, int num_workers, LabelKind kind, double psp_a, double psp_b,
                                  JobSession* session) {
  std::vector<EvalPartial> all;
  TETHER_ASSIGN_OR_RETURN(bool complete, session->EvalGather(kSetupEvalRound, nullptr, EvalGatherBody::EVAL_WAIT, &all));
  if (!complete) return Status::Internal("evaluation setup: shard 0 answered before every worker's counts were in");
  // A joiner's empty partial sent by mistake would be rank-ordered last:
  // only the initial ranks' counts make the setup.
  all.erase(std::remove_if(all.begin(), all.end(), [&](const EvalPartial& p) { return p.rank() >= num_workers; }),
            all.end());
  return EvalSetupFrom(all, rank, num_workers, kind, psp_a, psp_b);
}

int64_t RowsToEvaluate(int64_t offset, int64_t local_rows, int64_t max_rows) {
  if (max_rows <= 0) return local_rows;
  return std::clamp<int64_t>(max_rows - offset, 0, local_rows);
}

Status MergeEvalPartials(const std::vector<EvalPartial>& all, Evaluator* into) {
  for (const EvalPartial& p : all) TETHER_RETURN_IF_ERROR(into->Merge(p));
  return Status::OK();
}

}  // namespace tether
