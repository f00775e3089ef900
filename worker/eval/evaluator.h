// Evaluator: the test-set metrics of a model's label kind, accumulated over
// minibatches of scores. The one implementation shared by training's
// evaluation (worker/trainer.cc) and tether-predict (serving/predictor.h), so
// both print the same figures for the same scores:
//   multi-label (XMC): precision_at_{1,3,5}, ndcg_at_{1,3,5}, and, when the
//                      training labels' inverse propensities are given,
//                      psp_at_{1,3,5} and psndcg_at_{1,3,5} (Jain, Prabhu &
//                      Varma, KDD 2016, as pyxclib; eval/metrics.h);
//   binary:            accuracy, auc, log_loss (BinaryMetrics);
//   multiclass:        accuracy (arg max; a tie of G classes at the top
//                      counts 1/G when the true class is among them, C21),
//                      log_loss (mean softmax cross-entropy).
//
// Ownership: borrows the Backend (multiclass top-1 and loss), which must
// outlive it. Thread-safety: none; one per thread.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "eval/metrics.h"
#include "core/status.h"
#include "proto/wire.pb.h"
#include "compute/backend.h"
#include "input/csr.h"
#include "worker/models/model.h"

namespace tether {

class Evaluator {
 public:
  /// inv_propensity: per label, 1/p_l (InversePropensity, eval/metrics.h);
  /// empty: no propensity-scored metrics. Used for multi-label only.
  Evaluator(LabelKind kind, int64_t num_outputs, Backend* backend, std::vector<double> inv_propensity = {});

  /// scores: (end − begin) × num_outputs logits of rows [begin, end) of
  /// `labels` (the label CSR of worker/models/model.h). Errors: the backend's.
  Status Add(const std::vector<float>& scores, const CsrMatrix& labels, int64_t begin, int64_t end);
  Status Add(const float* scores, const CsrMatrix& labels, int64_t begin, int64_t end);

  /// The metrics, in the order they are logged (see above).
  std::vector<std::pair<std::string, double>> Results() const;

  int64_t rows() const { return rows_; }
  /// Rows whose top-ranked scores hold a tie (scored by expected value).
  int64_t tied_rows() const;

  /// Partitioned evaluation (every worker evaluates its part of the test
  /// set): this evaluator's partial sums, to send to the reporting worker,
  /// tagged with `rank`.
  EvalPartial Partial(int rank) const;
  /// Adds a partial (from Partial() of an evaluator of the same kind, ks and
  /// propensity setting). Integer counts add exactly; the doubles are added
  /// in the order Merge is called, so merging the partials in rank order
  /// gives one result whatever order they arrived in. Errors:
  /// InvalidArgument naming the rank when the partial's shape differs.
  Status Merge(const EvalPartial& p);
  /// The exact integer counts behind the metrics, for the metrics JSON:
  ///   multi-label: precision_hits_at_{1,3,5} (relevant labels ranked at
  ///                untied positions of the top k; with no tied rows,
  ///                P@k = hits / (k · rows) exactly);
  ///   binary:      correct (predictions (s > 0) == label);
  ///   multiclass:  correct (rows whose arg max is the true class, untied).
  std::vector<std::pair<std::string, int64_t>> Counts() const;

 private:
  LabelKind kind_;
  int64_t outputs_;
  Backend* backend_;
  int64_t rows_ = 0;
  RankingMetrics ranking_;
  BinaryMetrics binary_;
  int64_t correct_ = 0;        // multiclass: untied top-1 hits
  double tied_correct_ = 0;    // multiclass: Σ 1/G over tied tops holding the class
  int64_t tied_rows_ = 0;
  double loss_sum_ = 0;
  std::vector<uint32_t> top_;
};

/// Training label frequencies of multi-label `labels` (N × L CSR): counts[l]
/// = rows carrying label l (labels >= L ignored), for InversePropensity.
std::vector<uint64_t> CountLabels(const CsrMatrix& labels);

}  // namespace tether
