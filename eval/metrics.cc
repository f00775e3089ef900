#include "eval/metrics.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "core/top_k.h"

namespace tether {

RankingMetrics::RankingMetrics(std::vector<int> ks) : ks_(std::move(ks)) {
  CHECK(!ks_.empty()) << "RankingMetrics needs at least one k";
  std::sort(ks_.begin(), ks_.end());
  ks_.erase(std::unique(ks_.begin(), ks_.end()), ks_.end());
  CHECK_GE(ks_.front(), 1) << "RankingMetrics: every k must be >= 1";
  discount_.resize(ks_.back());
  for (int i = 0; i < ks_.back(); ++i) discount_[i] = 1.0 / std::log2(i + 2.0);
  hits_.assign(ks_.size(), 0);
  tied_hits_.assign(ks_.size(), 0.0);
  ndcg_sum_.assign(ks_.size(), 0.0);
  psp_num_.assign(ks_.size(), 0.0);
  psp_den_.assign(ks_.size(), 0.0);
  psndcg_num_.assign(ks_.size(), 0.0);
  psndcg_den_.assign(ks_.size(), 0.0);
}

void RankingMetrics::SetInversePropensity(std::vector<double> inv_propensity) {
  CHECK_EQ(count_, 0) << "RankingMetrics::SetInversePropensity after Add";
  inv_propensity_ = std::move(inv_propensity);
}

std::vector<double> InversePropensity(const std::vector<uint64_t>& label_counts, int64_t num_rows, double a,
                                      double b) {
  const double c = (std::log(static_cast<double>(num_rows)) - 1.0) * std::pow(b + 1.0, a);
  std::vector<double> w(label_counts.size());
  for (size_t l = 0; l < w.size(); ++l) w[l] = 1.0 + c * std::pow(static_cast<double>(label_counts[l]) + b, -a);
  return w;
}

namespace {

// One tie group of a row's ranking: top[begin, end) are the group's
// positions, labels of one score; `g` labels of that score, `rel` of them in
// the row's Y, `rel_w` their summed propensity weights.
struct TieGroup {
  int64_t end = 0;
  int64_t g = 0;
  int64_t rel = 0;
  double rel_w = 0.0;
};

// The group that starts at ranked position `begin` (< depth). Groups that
// end inside the top `depth` are whole in top; only the last one may go on
// past it, so its G and R are counted over the whole row. `w`: the labels'
// inverse propensities (nullptr: no propensity-scored metrics).
TieGroup GroupAt(const float* s, int64_t num_labels, const uint32_t* top, int64_t depth, int64_t begin,
                 const uint32_t* labels, int64_t num_true, const std::vector<double>* w) {
  const auto weight = [w](uint32_t l) { return l < w->size() ? (*w)[l] : 0.0; };
  const float v = s[top[begin]];
  TieGroup t;
  t.end = begin + 1;
  while (t.end < depth && SameScore(s[top[t.end]], v)) ++t.end;
  t.g = t.end - begin;
  if (t.end == depth) {
    t.g = 0;
    for (int64_t j = 0; j < num_labels; ++j) t.g += SameScore(s[j], v) ? 1 : 0;
    for (int64_t y = 0; y < num_true; ++y) {
      if (labels[y] < num_labels && SameScore(s[labels[y]], v)) {
        ++t.rel;
        if (w != nullptr) t.rel_w += weight(labels[y]);
      }
    }
  } else {
    for (int64_t j = begin; j < t.end; ++j) {
      if (std::find(labels, labels + num_true, top[j]) != labels + num_true) {
        ++t.rel;
        if (w != nullptr) t.rel_w += weight(top[j]);
      }
    }
  }
  return t;
}

}  // namespace

// One row's sums over its ranked positions so far (AddRow).
struct RankingMetrics::RowSums {
  // hits: relevant labels at untied positions (an integer); tied_hits: the
  // R/G of positions held by tie groups.
  int64_t hits = 0;
  double tied_hits = 0.0, dcg = 0.0, idcg = 0.0;
  // Propensity-scored: gains g_i of the ranking and g*_i of the best one
  // (ideal_: the row's weights, largest first).
  double ps_hits = 0.0, ps_dcg = 0.0, ideal_hits = 0.0, ideal_dcg = 0.0;
};

void RankingMetrics::Add(const float* scores, int64_t rows, int64_t num_labels,
                         const int64_t* row_ptr, const uint32_t* col_idx) {
  CHECK_GE(rows, 0);
  CHECK_GE(num_labels, 0);
  if (rows == 0) return;
  CHECK(scores != nullptr || num_labels == 0);
  CHECK(row_ptr != nullptr);
  const int64_t depth = std::min<int64_t>(ks_.back(), num_labels);
  top_.resize(depth);
  for (int64_t r = 0; r < rows; ++r) {
    ++count_;
    const int64_t lb = row_ptr[r], le = row_ptr[r + 1];
    if (le == lb) continue;  // 0 for every metric, still counted
    AddRow(scores + r * num_labels, num_labels, depth, col_idx + lb, le - lb);
  }
}

void RankingMetrics::AddRow(const float* s, int64_t num_labels, int64_t depth, const uint32_t* labels,
                            int64_t num_true) {
  const bool ps = !inv_propensity_.empty();
  // Rank the top `depth` labels in the Backend::TopK order (core/top_k.h);
  // the index order only groups the ties, which are then scored by their
  // expected value below.
  SelectTopK(s, num_labels, depth, top_.data());
  if (ps) {
    ideal_.clear();
    for (int64_t y = 0; y < num_true; ++y)
      ideal_.push_back(labels[y] < inv_propensity_.size() ? inv_propensity_[labels[y]] : 0.0);
    std::sort(ideal_.begin(), ideal_.end(), std::greater<double>());
  }
  // Ties (C21): labels of equal score have no order of their own, so each
  // position of a tie group holds a relevant label with probability R / G
  // (G labels in the group, R of them relevant): the expected value under a
  // uniformly random order of the tied labels. P@k and DCG@k are sums over
  // positions, hence linear in those probabilities.
  bool tied = false;
  RowSums sums;
  size_t next_k = 0;
  int64_t group_end = 0;  // positions [i, group_end) share the group's p
  double p = 0.0, pw = 0.0;
  bool in_tie = false;  // the current group has more than one label
  for (int64_t i = 0; i < ks_.back(); ++i) {
    if (i < depth && i == group_end) {
      const TieGroup t =
          GroupAt(s, num_labels, top_.data(), depth, i, labels, num_true, ps ? &inv_propensity_ : nullptr);
      group_end = t.end;
      tied = tied || t.g > 1;
      in_tie = t.g > 1;
      p = static_cast<double>(t.rel) / static_cast<double>(t.g);
      pw = t.rel_w / static_cast<double>(t.g);
    }
    if (i < depth) {
      if (in_tie) {
        sums.tied_hits += p;
      } else {
        sums.hits += p > 0.0 ? 1 : 0;  // an untied group of one: rel is 0 or 1
      }
      sums.dcg += p * discount_[i];
      if (ps) {
        sums.ps_hits += pw;
        sums.ps_dcg += pw * discount_[i];
      }
    }
    if (i < num_true) {
      sums.idcg += discount_[i];
      if (ps) {
        sums.ideal_hits += ideal_[i];
        sums.ideal_dcg += ideal_[i] * discount_[i];
      }
    }
    if (i + 1 == ks_[next_k]) AddAtK(next_k++, sums, ps);
  }
  if (tied) ++tied_rows_;
}

void RankingMetrics::AddAtK(size_t k_index, const RowSums& sums, bool ps) {
  hits_[k_index] += sums.hits;
  tied_hits_[k_index] += sums.tied_hits;
  ndcg_sum_[k_index] += sums.dcg / sums.idcg;
  if (ps) {
    psp_num_[k_index] += sums.ps_hits / ks_[k_index];
    psp_den_[k_index] += sums.ideal_hits / ks_[k_index];
    psndcg_num_[k_index] += sums.ps_dcg / sums.idcg;
    psndcg_den_[k_index] += sums.ideal_dcg / sums.idcg;
  }
}

int RankingMetrics::IndexOf(int k) const {
  const auto it = std::lower_bound(ks_.begin(), ks_.end(), k);
  CHECK(it != ks_.end() && *it == k) << "RankingMetrics: k = " << k << " was not configured";
  return static_cast<int>(it - ks_.begin());
}

double RankingMetrics::PrecisionAt(int k) const {
  const int i = IndexOf(k);
  return count_ == 0 ? 0.0
                     : (static_cast<double>(hits_[i]) + tied_hits_[i]) /
                           (static_cast<double>(ks_[i]) * static_cast<double>(count_));
}

double RankingMetrics::NdcgAt(int k) const {
  const int i = IndexOf(k);
  return count_ == 0 ? 0.0 : ndcg_sum_[i] / static_cast<double>(count_);
}

double RankingMetrics::PsPrecisionAt(int k) const {
  CHECK(has_propensity()) << "RankingMetrics::PsPrecisionAt without SetInversePropensity";
  const int i = IndexOf(k);
  return psp_den_[i] > 0 ? psp_num_[i] / psp_den_[i] : 0.0;
}

double RankingMetrics::PsNdcgAt(int k) const {
  CHECK(has_propensity()) << "RankingMetrics::PsNdcgAt without SetInversePropensity";
  const int i = IndexOf(k);
  return psndcg_den_[i] > 0 ? psndcg_num_[i] / psndcg_den_[i] : 0.0;
}

void RankingMetrics::Merge(const RankingMetrics& other) {
  CHECK(ks_ == other.ks_) << "RankingMetrics::Merge: different ks";
  CHECK_EQ(has_propensity(), other.has_propensity()) << "RankingMetrics::Merge: propensity on one side only";
  for (size_t i = 0; i < ks_.size(); ++i) {
    hits_[i] += other.hits_[i];
    tied_hits_[i] += other.tied_hits_[i];
    ndcg_sum_[i] += other.ndcg_sum_[i];
    psp_num_[i] += other.psp_num_[i];
    psp_den_[i] += other.psp_den_[i];
    psndcg_num_[i] += other.psndcg_num_[i];
    psndcg_den_[i] += other.psndcg_den_[i];
  }
  count_ += other.count_;
  tied_rows_ += other.tied_rows_;
}

RankingMetrics::Sums RankingMetrics::sums() const {
  Sums s;
  s.count = count_;
  s.tied_rows = tied_rows_;
  s.hits = hits_;
  s.tied_hits = tied_hits_;
  s.ndcg = ndcg_sum_;
  s.psp_num = psp_num_;
  s.psp_den = psp_den_;
  s.psndcg_num = psndcg_num_;
  s.psndcg_den = psndcg_den_;
  return s;
}

bool RankingMetrics::MergeSums(const Sums& s, std::string* why) {
  const size_t n = ks_.size();
  for (const size_t got : {s.hits.size(), s.tied_hits.size(), s.ndcg.size(), s.psp_num.size(), s.psp_den.size(),
                           s.psndcg_num.size(), s.psndcg_den.size()}) {
    if (got != n) {
      *why = "ranking sums have " + std::to_string(got) + " entries per metric, expected " + std::to_string(n) +
             " (one per k)";
      return false;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    hits_[i] += s.hits[i];
    tied_hits_[i] += s.tied_hits[i];
    ndcg_sum_[i] += s.ndcg[i];
    psp_num_[i] += s.psp_num[i];
    psp_den_[i] += s.psp_den[i];
    psndcg_num_[i] += s.psndcg_num[i];
    psndcg_den_[i] += s.psndcg_den[i];
  }
  count_ += s.count;
  tied_rows_ += s.tied_rows;
  return true;
}

void RankingMetrics::Reset() {
  std::fill(hits_.begin(), hits_.end(), 0);
  std::fill(tied_hits_.begin(), tied_hits_.end(), 0.0);
  std::fill(ndcg_sum_.begin(), ndcg_sum_.end(), 0.0);
  for (auto* v : {&psp_num_, &psp_den_, &psndcg_num_, &psndcg_den_}) std::fill(v->begin(), v->end(), 0.0);
  count_ = 0;
  tied_rows_ = 0;
}

void BinaryMetrics::Add(float score, float label) {
  const bool positive = label > 0.0f;
  // NaN predicts negative ((NaN > 0) is false) and ranks lowest for AUC.
  if ((score > 0.0f) == positive) ++correct_;
  // −log sigmoid(±s) = softplus(∓s) = max(z, 0) + log1p(exp(−|z|)), z = ∓s.
  const double z = positive ? -static_cast<double>(score) : static_cast<double>(score);
  log_loss_sum_ += std::max(z, 0.0) + std::log1p(std::exp(-std::fabs(z)));
  pairs_.push_back({std::isnan(score) ? -std::numeric_limits<float>::infinity() : score, positive});
}

void BinaryMetrics::Add(const float* scores, const float* labels, int64_t n) {
  CHECK_GE(n, 0);
  pairs_.reserve(pairs_.size() + n);
  for (int64_t i = 0; i < n; ++i) Add(scores[i], labels[i]);
}

double BinaryMetrics::Accuracy() const {
  return pairs_.empty() ? 0.0 : static_cast<double>(correct_) / static_cast<double>(count());
}

double BinaryMetrics::LogLoss() const {
  return pairs_.empty() ? 0.0 : log_loss_sum_ / static_cast<double>(count());
}

double BinaryMetrics::Auc() const {
  std::vector<Pair> sorted = pairs_;
  std::sort(sorted.begin(), sorted.end(),
            [](const Pair& a, const Pair& b) { return a.score < b.score; });
  // Walk groups of equal score in increasing order: each positive beats the
  // negatives strictly below its group and ties half of those in it.
  double wins = 0.0;
  int64_t neg_below = 0, num_pos = 0;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    int64_t group_pos = 0, group_neg = 0;
    for (; j < sorted.size() && sorted[j].score == sorted[i].score; ++j) {
      (sorted[j].positive ? group_pos : group_neg) += 1;
    }
    wins += static_cast<double>(group_pos) * (static_cast<double>(neg_below) + 0.5 * group_neg);
    neg_below += group_neg;
    num_pos += group_pos;
    i = j;
  }
  const int64_t num_neg = neg_below;
  if (num_pos == 0 || num_neg == 0) return std::numeric_limits<double>::quiet_NaN();
  return wins / (static_cast<double>(num_pos) * static_cast<double>(num_neg));
}

void BinaryMetrics::Merge(const BinaryMetrics& other) {
  pairs_.insert(pairs_.end(), other.pairs_.begin(), other.pairs_.end());
  correct_ += other.correct_;
  log_loss_sum_ += other.log_loss_sum_;
}

void BinaryMetrics::Reset() {
  pairs_.clear();
  correct_ = 0;
  log_loss_sum_ = 0.0;
}

BinaryMetrics::Sums BinaryMetrics::sums() const {
  Sums s;
  s.correct = correct_;
  s.log_loss_sum = log_loss_sum_;
  s.scores.reserve(pairs_.size());
  s.positive.reserve(pairs_.size());
  for (const Pair& p : pairs_) {
    s.scores.push_back(p.score);
    s.positive.push_back(p.positive ? 1 : 0);
  }
  return s;
}

bool BinaryMetrics::MergeSums(const Sums& s, std::string* why) {
  if (s.scores.size() != s.positive.size()) {
    *why = "binary sums have " + std::to_string(s.scores.size()) + " scores but " + std::to_string(s.positive.size()) +
           " labels";
    return false;
  }
  pairs_.reserve(pairs_.size() + s.scores.size());
  for (size_t i = 0; i < s.scores.size(); ++i) pairs_.push_back({s.scores[i], s.positive[i] != 0});
  correct_ += s.correct;
  log_loss_sum_ += s.log_loss_sum;
  return true;
}

}  // namespace tether
