// Evaluation metrics, accumulated over minibatches and mergeable across
// workers:
//  - RankingMetrics: P@k and nDCG@k for extreme multi-label classification
//    (XMC), the standard definitions of the Extreme Classification
//    Repository (Bhatia et al., http://manikvarma.org/downloads/XC/
//    XMLRepository.html) as used by Jain, Prabhu and Varma, KDD 2016, and,
//    given the training labels' inverse propensities (InversePropensity),
//    the propensity-scored PSP@k and PSnDCG@k of that paper as pyxclib
//    (xclib.evaluation.xc_metrics) computes them;
//  - BinaryMetrics: accuracy, exact ROC AUC and log-loss for binary tasks.
//
// eval/ does not depend on input/ (the readers' library), so label
// matrices are taken as raw CSR arrays (row_ptr, col_idx), the same layout
// as tether::CsrMatrix: pass `m.row_ptr.data(), m.col_idx.data()`.
//
// Ownership: each accumulator owns its partial sums (and BinaryMetrics its
// (score, label) pairs, O(n) memory, needed for an exact AUC); inputs are
// borrowed for the duration of a call.
// Thread-safety: none; use one accumulator per thread and Merge() them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tether {

/// P@k and nDCG@k for multi-label ranking. For a row with true label set Y
/// and labels ranked by decreasing score (NaN scores rank last), with
/// rel_i = 1 if the i-th ranked label is in Y:
///   P@k    = (Σ_{i<k} rel_i) / k                       (always divided by k)
///   DCG@k  = Σ_{i<k} rel_i / log2(i + 2)
///   nDCG@k = DCG@k / IDCG@k,  IDCG@k = Σ_{i<min(k,|Y|)} 1 / log2(i + 2)
/// Ties (case C21): labels of equal score (NaNs among themselves too) are in
/// no order, so each metric is its expected value under a uniformly random
/// order of the tied labels: a position held by a group of G tied labels, R
/// of them in Y, has rel_i = R / G. A model that scores every label alike
/// thus gets P@1 = |Y| / num_labels, never 1 because its true label has the
/// smallest index. Rows with labels and a tie of two or more labels
/// reaching into the top max(ks) are counted (tied_rows()), for a warning.
/// Rows with empty Y score 0 for both metrics and ARE counted in the mean
/// (so a dataset with unlabeled test rows reports lower numbers than tools
/// that skip such rows). Labels in Y are assumed unique; indices >= the
/// number of score columns can never be ranked but do count in |Y|.
///
/// Propensity-scored metrics (Jain, Prabhu & Varma, KDD 2016), kept when
/// SetInversePropensity gave w_l = 1/p_l per label, exactly as pyxclib's
/// psprecision / psndcg: with g_i = w of the i-th ranked label if it is in Y
/// (else 0) and g*_i the i-th largest w over the row's own labels (0 past
/// |Y|: the best ranking any model could make),
///   PSP@k     = Σ_rows (Σ_{i<k} g_i / k)        / Σ_rows (Σ_{i<k} g*_i / k)
///   PSnDCG@k  = Σ_rows (Σ_{i<k} g_i d_i / IDCG@k) / Σ_rows (Σ_{i<k} g*_i d_i / IDCG@k)
/// with d_i = 1 / log2(i + 2): a ratio of means over the rows, not a mean of
/// per-row ratios. Ties count as above: a position of a tie group has g_i =
/// (Σ w over the group's labels in Y) / G. Labels >= w.size() weigh 0.
class RankingMetrics {
 public:
  /// ks: the cut-offs to report, each >= 1 (CHECK-fails otherwise);
  /// duplicates are removed, order does not matter.
  explicit RankingMetrics(std::vector<int> ks = {1, 3, 5});

  /// Adds a batch. scores: rows × num_labels row-major. labels: the
  /// rows × num_labels CSR label matrix as raw arrays: row r's labels are
  /// col_idx[row_ptr[r] .. row_ptr[r+1]) (row_ptr has rows + 1 entries;
  /// row_ptr[0] need not be 0, so a row slice of a larger matrix works).
  /// Cost O(rows · (num_labels · log k + k · |Y|)); no allocation after the
  /// first call.
  void Add(const float* scores, int64_t rows, int64_t num_labels, const int64_t* row_ptr,
           const uint32_t* col_idx);

  /// Mean P@k / nDCG@k over all rows added so far, in [0, 1]; 0 when no rows
  /// were added. k must be one of the constructor's ks (CHECK-fails
  /// otherwise).
  double PrecisionAt(int k) const;
  double NdcgAt(int k) const;

  /// Turns on PSP@k and PSnDCG@k: inv_propensity[l] = 1/p_l of label l
  /// (InversePropensity). Call before the first Add (CHECK-fails after).
  void SetInversePropensity(std::vector<double> inv_propensity);
  bool has_propensity() const { return !inv_propensity_.empty(); }
  /// PSP@k and PSnDCG@k as defined above; 0 when no row had a label. k must
  /// be one of the ks, and SetInversePropensity must have been called
  /// (CHECK-fails otherwise).
  double PsPrecisionAt(int k) const;
  double PsNdcgAt(int k) const;
  /// Number of rows added (including rows with no labels).
  int64_t count() const { return count_; }
  /// Rows (with labels) whose top max(ks) positions hold a tie, scored by
  /// expected value.
  int64_t tied_rows() const { return tied_rows_; }
  const std::vector<int>& ks() const { return ks_; }

  /// Adds another accumulator's partial sums (e.g. from another worker);
  /// the result equals accumulating both inputs in one object up to float
  /// summation order (the hit counts exactly). Both must have the same ks
  /// and both or neither a propensity (CHECK-fails otherwise).
  void Merge(const RankingMetrics& other);
  void Reset();

  /// The partial sums, per k in ks() order, as they travel between workers
  /// (partitioned evaluation, worker/eval/evaluator.h). P@k = (hits + tied_hits)
  /// / (k · count): `hits` counts the relevant labels ranked at untied
  /// positions of the top k, an exact integer whatever the partition;
  /// `tied_hits` sums the expected R/G of positions held by tie groups
  /// (C21), 0 when no row had a tie. The doubles are sums over rows in the
  /// order they were added, so merging partitions in a fixed order (rank
  /// order) gives the same result on every run; against one accumulation
  /// over all rows they differ only by summation order (~1e-16 relative).
  struct Sums {
    int64_t count = 0;
    int64_t tied_rows = 0;
    std::vector<int64_t> hits;
    std::vector<double> tied_hits, ndcg, psp_num, psp_den, psndcg_num, psndcg_den;
  };
  Sums sums() const;
  /// Adds partial sums taken with sums() from an accumulator with the same
  /// ks and propensity setting. Errors: InvalidArgument (returned as false
  /// with *why set) when the vectors do not have ks().size() entries.
  bool MergeSums(const Sums& s, std::string* why);
  /// The exact integer hit count of P@k (see Sums); k must be one of ks.
  int64_t HitsAt(int k) const { return hits_[IndexOf(k)]; }
  double TiedHitsAt(int k) const { return tied_hits_[IndexOf(k)]; }

 private:
  struct RowSums;  // one row's sums over its ranked positions (metrics.cc)

  int IndexOf(int k) const;
  // Adds one row with labels: s its num_labels scores, labels[0, num_true)
  // its Y; the top `depth` = min(max k, num_labels) positions are ranked.
  void AddRow(const float* s, int64_t num_labels, int64_t depth, const uint32_t* labels, int64_t num_true);
  // Adds a row's sums at cut-off ks_[k_index] to the per-k totals.
  void AddAtK(size_t k_index, const RowSums& sums, bool ps);

  std::vector<int> ks_;                // sorted, unique
  std::vector<double> discount_;       // discount_[i] = 1 / log2(i + 2), i < max k
  std::vector<int64_t> hits_;          // per k: relevant labels at untied positions < k
  std::vector<double> tied_hits_;      // per k: Σ R/G over tied positions < k
  std::vector<double> ndcg_sum_;       // per k: Σ_rows nDCG@k
  std::vector<double> inv_propensity_;  // w_l; empty: no propensity-scored metrics
  // per k: the numerators and denominators of PSP@k and PSnDCG@k (see above)
  std::vector<double> psp_num_, psp_den_, psndcg_num_, psndcg_den_;
  std::vector<double> ideal_;           // scratch: one row's w over its labels, sorted down
  int64_t count_ = 0;
  int64_t tied_rows_ = 0;
  std::vector<uint32_t> top_;  // scratch: one row's ranking
};

/// Inverse propensities w_l = 1/p_l of Jain, Prabhu & Varma (KDD 2016), as
/// pyxclib's compute_inv_propesity: p_l = 1 / (1 + C · exp(−A · ln(N_l + B))),
/// i.e. w_l = 1 + C · (N_l + B)^(−A), with C = (ln N − 1) · (B + 1)^A,
/// N = num_rows (training rows) and N_l = label_counts[l] (training rows
/// carrying label l). The repository's constants: A = 0.55, B = 1.5 (most
/// datasets), 0.6 / 2.6 (Amazon-670K, Amazon-3M), 0.5 / 0.4 (Wikipedia-500K).
std::vector<double> InversePropensity(const std::vector<uint64_t>& label_counts, int64_t num_rows, double a,
                                      double b);

/// Binary classification metrics from (score, label) pairs. score is a real
/// margin / logit s, with predicted probability p = sigmoid(s); label > 0
/// means positive, anything else negative (so ±1 and 1/0 both work).
///   accuracy = fraction with (s > 0) == positive  (s == 0 predicts negative)
///   log-loss = mean of −log p (positives) / −log(1 − p) (negatives), natural
///              log, computed stably from s as softplus(∓s)
///   AUC      = P(score of a random positive > score of a random negative),
///              ties counting 1/2 (Mann–Whitney U / (n_pos · n_neg); Hanley &
///              McNeil 1982), computed exactly by sorting all stored pairs.
/// A NaN score ranks below every number for AUC and predicts negative; its
/// log-loss term is NaN (a diverged model should show).
class BinaryMetrics {
 public:
  void Add(float score, float label);
  /// n pairs: scores[i], labels[i].
  void Add(const float* scores, const float* labels, int64_t n);

  int64_t count() const { return static_cast<int64_t>(pairs_.size()); }
  /// 0 when empty.
  double Accuracy() const;
  /// 0 when empty.
  double LogLoss() const;
  /// NaN when there are no positives or no negatives (AUC undefined).
  /// O(n log n) per call (sorts a copy).
  double Auc() const;

  /// Appends the other accumulator's pairs and sums.
  void Merge(const BinaryMetrics& other);
  void Reset();

  /// The partial sums as they travel between workers (partitioned
  /// evaluation): the exact count of correct predictions, the log-loss sum
  /// (added in a fixed order by the caller), and every stored pair, since an
  /// exact AUC needs all scores (scores[i] as stored: a NaN is −∞;
  /// positive[i] 0 or 1). O(n) floats: the gathered partitions hold every
  /// test score, as one accumulator would.
  struct Sums {
    int64_t correct = 0;
    double log_loss_sum = 0.0;
    std::vector<float> scores;
    std::vector<uint8_t> positive;
  };
  Sums sums() const;
  /// Appends partial sums from sums(). Returns false with *why set when
  /// scores and positive differ in length.
  bool MergeSums(const Sums& s, std::string* why);
  /// Predictions (s > 0) == positive, an exact count.
  int64_t correct() const { return correct_; }

 private:
  struct Pair {
    float score;
    bool positive;
  };
  std::vector<Pair> pairs_;
  int64_t correct_ = 0;
  double log_loss_sum_ = 0.0;
};

}  // namespace tether
