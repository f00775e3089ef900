#include "worker/eval/evaluator.h"

#include <algorithm>
#include <cmath>

#include "core/top_k.h"

namespace tether {

Evaluator::Evaluator(LabelKind kind, int64_t num_outputs, Backend* backend, std::vector<double> inv_propensity)
    : kind_(kind), outputs_(num_outputs), backend_(backend), ranking_({1, 3, 5}) {
  if (kind_ == LabelKind::kMultiLabel && !inv_propensity.empty())
    ranking_.SetInversePropensity(std::move(inv_propensity));
}

Status Evaluator::Add(const std::vector<float>& scores, const CsrMatrix& labels, int64_t begin, int64_t end) {
  return Add(scores.data(), labels, begin, end);
}

Status Evaluator::Add(const float* scores, const CsrMatrix& labels, int64_t begin, int64_t end) {
  const int64_t rows = end - begin;
  rows_ += rows;
  switch (kind_) {
    case LabelKind::kMultiLabel:
      ranking_.Add(scores, rows, outputs_, labels.row_ptr.data() + begin, labels.col_idx.data());
      return Status::OK();
    case LabelKind::kBinary:
      for (int64_t r = 0; r < rows; ++r)
        binary_.Add(scores[r], labels.row_ptr[begin + r + 1] > labels.row_ptr[begin + r] ? 1.0f : 0.0f);
      return Status::OK();
    case LabelKind::kMultiClass: {
      top_.resize(rows);
      TETHER_RETURN_IF_ERROR(backend_->TopK(rows, outputs_, scores, 1, top_.data()));
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t p = labels.row_ptr[begin + r];
        if (labels.row_ptr[begin + r + 1] == p) continue;
        // A tie at the top (C21) is not broken by class number: the true
        // class among G tied ones is right with probability 1/G.
        const float* s = scores + r * outputs_;
        const float v = s[top_[r]];
        int64_t g = 0;
        for (int64_t j = 0; j < outputs_; ++j) g += SameScore(s[j], v) ? 1 : 0;
        if (g > 1) ++tied_rows_;
        if (labels.col_idx[p] < outputs_ && SameScore(s[labels.col_idx[p]], v)) {
          if (g == 1) {
            ++correct_;
          } else {
            tied_correct_ += 1.0 / static_cast<double>(g);
          }
        }
      }
      double loss = 0;
      TETHER_RETURN_IF_ERROR(backend_->SoftmaxCrossEntropy(rows, outputs_, scores, RowSliceOf(labels, begin, end),
                                                           1.0f, nullptr, &loss));
      loss_sum_ += loss;
      return Status::OK();
    }
  }
  return Status::OK();
}

std::vector<std::pair<std::string, double>> Evaluator::Results() const {
  switch (kind_) {
    case LabelKind::kMultiLabel: {
      std::vector<std::pair<std::string, double>> out = {
          {"precision_at_1", ranking_.PrecisionAt(1)}, {"precision_at_3", ranking_.PrecisionAt(3)},
          {"precision_at_5", ranking_.PrecisionAt(5)}, {"ndcg_at_1", ranking_.NdcgAt(1)},
          {"ndcg_at_3", ranking_.NdcgAt(3)},           {"ndcg_at_5", ranking_.NdcgAt(5)}};
      if (ranking_.has_propensity()) {
        for (int k : {1, 3, 5}) out.emplace_back("psp_at_" + std::to_string(k), ranking_.PsPrecisionAt(k));
        for (int k : {1, 3, 5}) out.emplace_back("psndcg_at_" + std::to_string(k), ranking_.PsNdcgAt(k));
      }
      return out;
    }
    case LabelKind::kBinary:
      return {{"accuracy", binary_.Accuracy()}, {"auc", binary_.Auc()}, {"log_loss", binary_.LogLoss()}};
    case LabelKind::kMultiClass: {
      const double n = static_cast<double>(std::max<int64_t>(rows_, 1));
      return {{"accuracy", (static_cast<double>(correct_) + tied_correct_) / n}, {"log_loss", loss_sum_ / n}};
    }
  }
  return {};
}

int64_t Evaluator::tied_rows() const { return kind_ == LabelKind::kMultiLabel ? ranking_.tied_rows() : tied_rows_; }

EvalPartial Evaluator::Partial(int rank) const {
  EvalPartial p;
  p.set_rank(rank);
  p.set_rows(rows_);
  p.set_tied_rows(tied_rows());
  switch (kind_) {
    case LabelKind::kMultiLabel: {
      const RankingMetrics::Sums s = ranking_.sums();
      for (int k : ranking_.ks()) p.add_ks(k);
      *p.mutable_hits() = {s.hits.begin(), s.hits.end()};
      *p.mutable_tied_hits() = {s.tied_hits.begin(), s.tied_hits.end()};
      *p.mutable_ndcg() = {s.ndcg.begin(), s.ndcg.end()};
      *p.mutable_psp_num() = {s.psp_num.begin(), s.psp_num.end()};
      *p.mutable_psp_den() = {s.psp_den.begin(), s.psp_den.end()};
      *p.mutable_psndcg_num() = {s.psndcg_num.begin(), s.psndcg_num.end()};
      *p.mutable_psndcg_den() = {s.psndcg_den.begin(), s.psndcg_den.end()};
      break;
    }
    case LabelKind::kBinary: {
      const BinaryMetrics::Sums s = binary_.sums();
      p.set_correct(s.correct);
      p.set_loss_sum(s.log_loss_sum);
      *p.mutable_scores() = {s.scores.begin(), s.scores.end()};
      for (uint8_t v : s.positive) p.add_positive(v != 0);
      break;
    }
    case LabelKind::kMultiClass:
      p.set_correct(correct_);
      p.set_tied_correct(tied_correct_);
      p.set_loss_sum(loss_sum_);
      break;
  }
  return p;
}

Status Evaluator::Merge(const EvalPartial& p) {
  const std::string from = "evaluation partial of worker " + std::to_string(p.rank()) + ": ";
  std::string why;
  switch (kind_) {
    case LabelKind::kMultiLabel: {
      if (!std::equal(p.ks().begin(), p.ks().end(), ranking_.ks().begin(), ranking_.ks().end()))
        return Status::InvalidArgument(from + "its cut-offs k differ from this worker's");
      RankingMetrics::Sums s;
      s.count = p.rows();
      s.tied_rows = p.tied_rows();
      s.hits.assign(p.hits().begin(), p.hits().end());
      s.tied_hits.assign(p.tied_hits().begin(), p.tied_hits().end());
      s.ndcg.assign(p.ndcg().begin(), p.ndcg().end());
      s.psp_num.assign(p.psp_num().begin(), p.psp_num().end());
      s.psp_den.assign(p.psp_den().begin(), p.psp_den().end());
      s.psndcg_num.assign(p.psndcg_num().begin(), p.psndcg_num().end());
      s.psndcg_den.assign(p.psndcg_den().begin(), p.psndcg_den().end());
      if (!ranking_.MergeSums(s, &why)) return Status::InvalidArgument(from + why);
      break;
    }
    case LabelKind::kBinary: {
      BinaryMetrics::Sums s;
      s.correct = p.correct();
      s.log_loss_sum = p.loss_sum();
      s.scores.assign(p.scores().begin(), p.scores().end());
      s.positive.assign(p.positive().begin(), p.positive().end());
      if (static_cast<int64_t>(s.scores.size()) != p.rows())
        return Status::InvalidArgument(from + std::to_string(s.scores.size()) + " scores for " +
                                       std::to_string(p.rows()) + " rows");
      if (!binary_.MergeSums(s, &why)) return Status::InvalidArgument(from + why);
      break;
    }
    case LabelKind::kMultiClass:
      correct_ += p.correct();
      tied_correct_ += p.tied_correct();
      loss_sum_ += p.loss_sum();
      tied_rows_ += p.tied_rows();
      break;
  }
  rows_ += p.rows();
  return Status::OK();
}

std::vector<std::pair<std::string, int64_t>> Evaluator::Counts() const {
  switch (kind_) {
    case LabelKind::kMultiLabel: {
      std::vector<std::pair<std::string, int64_t>> out;
      for (int k : ranking_.ks()) out.emplace_back("precision_hits_at_" + std::to_string(k), ranking_.HitsAt(k));
      return out;
    }
    case LabelKind::kBinary:
      return {{"correct", binary_.correct()}};
    case LabelKind::kMultiClass:
      return {{"correct", correct_}};
  }
  return {};
}

std::vector<uint64_t> CountLabels(const CsrMatrix& labels) {
  std::vector<uint64_t> counts(static_cast<size_t>(labels.cols), 0);
  for (int64_t r = 0; r < labels.rows; ++r)
    for (int64_t p = labels.row_ptr[r]; p < labels.row_ptr[r + 1]; ++p)
      if (labels.col_idx[p] < counts.size()) ++counts[labels.col_idx[p]];
  return counts;
}

}  // namespace tether
