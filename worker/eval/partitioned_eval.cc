#include "worker/eval/partitioned_eval.h"

#include <algorithm>
#include <string>

#include "eval/metrics.h"
#include "core/net/eval_frames.h"

namespace tether {

EvalPartial SetupPartial(int rank, LabelKind kind, const std::vector<uint64_t>& label_counts, int64_t train_rows,
                         int64_t test_rows) {
  EvalPartial p;
  p.set_rank(rank);
  p.set_train_rows(train_rows);
  p.set_test_rows(test_rows);
  if (kind == LabelKind::kMultiLabel) *p.mutable_label_counts() = {label_counts.begin(), label_counts.end()};
  return p;
}

EvalPartial SetupPartial(int rank, LabelKind kind, const CsrMatrix& train_labels, int64_t test_rows) {
  return SetupPartial(rank, kind, kind == LabelKind::kMultiLabel ? CountLabels(train_labels) : std::vector<uint64_t>{},
                      train_labels.rows, test_rows);
}

StatusOr<EvalSetup> EvalSetupFrom(const std::vector<EvalPartial>& all, int rank, int num_workers, LabelKind kind,
                                  double psp_a, double psp_b) {
  if (static_cast<int>(all.size()) != num_workers)
    return Status::InvalidArgument("evaluation setup: " + std::to_string(all.size()) + " of " +
                                   std::to_string(num_workers) +
                                   " workers sent their label and test-row counts (a worker left before training)");
  EvalSetup s;
  std::vector<uint64_t> counts;
  for (size_t i = 0; i < all.size(); ++i) {
    const EvalPartial& p = all[i];
    if (p.rank() != static_cast<int>(i))
      return Status::InvalidArgument("evaluation setup: partial " + std::to_string(i) + " is rank " +
                                     std::to_string(p.rank()) + "'s");
    s.test_offsets.push_back(s.test_rows);
    if (p.rank() < rank) s.test_offset += p.test_rows();
    s.test_rows += p.test_rows();
    s.train_rows += p.train_rows();
    if (kind != LabelKind::kMultiLabel) continue;
    if (i == 0) counts.assign(static_cast<size_t>(p.label_counts_size()), 0);
    if (static_cast<size_t>(p.label_counts_size()) != counts.size())
      return Status::InvalidArgument("evaluation setup: worker " + std::to_string(p.rank()) + " counts " +
                                     std::to_string(p.label_counts_size()) + " labels, worker 0 " +
                                     std::to_string(counts.size()));
    for (int l = 0; l < p.label_counts_size(); ++l) counts[l] += p.label_counts(l);
  }
  if (kind == LabelKind::kMultiLabel) s.inv_propensity = InversePropensity(counts, s.train_rows, psp_a, psp_b);
  return s;
}

StatusOr<EvalSetup> ExchangeEvalSetup(int rank, int num_workers, LabelKind kind, double psp_a, double psp_b,
                                      const CsrMatrix& train_labels, int64_t test_rows, JobSession* session) {
  return ExchangeEvalSetup(rank, num_workers, kind, psp_a, psp_b,
                           kind == LabelKind::kMultiLabel ? CountLabels(train_labels) : std::vector<uint64_t>{},
                           train_labels.rows, test_rows, session);
}

StatusOr<EvalSetup> ExchangeEvalSetup(int rank, int num_workers, LabelKind kind, double psp_a, double psp_b,
                                      const std::vector<uint64_t>& label_counts, int64_t train_rows,
                                      int64_t test_rows, JobSession* session) {
  const EvalPartial mine = SetupPartial(rank, kind, label_counts, train_rows, test_rows);
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
