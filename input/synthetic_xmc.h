// Synthetic extreme multi-label (XMC) data with power-law label frequencies,
// for running Tether at the scale of XMC sets that cannot ship with it
// (EURLex-4K, Wiki10-31K, Amazon-670K; `tether-gen-xmc --shape=...`).
//
// Generative model, per row:
//  - k labels, k = 1 + Poisson(labels_per_row − 1), capped at L, drawn
//    without replacement from a power law: the label of frequency rank r
//    (0-based) has weight (r + 1)^−label_exponent (Zipf); ranks are mapped
//    to label ids by a seeded permutation, so id order says nothing;
//  - m feature draws, m = 1 + Poisson(features_per_row − 1): a share
//    signal_fraction comes from the signatures of the row's labels (each
//    label owns features_per_label feature ids, a hash of (seed, label, j)),
//    which makes labels learnable from features; the rest is background
//    noise from a power law over features (feature_exponent, permuted ids);
//  - the unique features, sorted, with values = draw count, scaled to unit
//    L2 norm (tf, normalised, as in bag-of-words XMC inputs).
// Repeated draws collapse, so the mean non-zeros per row end a little below
// features_per_row when signatures are short.
//
// Output: the Extreme Classification Repository text format ("N F L"
// header; "l1,l2 f:v f:v" rows; 0-based ids) that input/reader.h reads.
// With feature_id_bits 64, each feature f in [0, F) is written as the id
// FeatureId(f), spread over the whole 64-bit range (a seeded bijection, so
// the F features stay F distinct ids), for data.hashed_features; the header
// still says F (the number of distinct ids the file can hold).
//
// Deterministic for a given seed and options (std::mt19937_64 and
// std::*_distribution of libstdc++). Thread-compatible: one generator per
// thread.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "input/csr.h"

namespace tether {

struct SyntheticXmcOptions {
  int64_t num_features = 5000;     // F
  int64_t num_labels = 4000;       // L
  double features_per_row = 75;    // mean feature draws per row (>= 1)
  double labels_per_row = 5;       // mean labels per row (>= 1)
  double label_exponent = 1.0;     // power-law exponent of label frequencies (>= 0; 0 = uniform)
  double feature_exponent = 1.0;   // same for background features
  int64_t features_per_label = 20; // signature length of a label (>= 1)
  double signal_fraction = 0.6;    // share of feature draws taken from label signatures, [0, 1]
  uint64_t seed = 1;
  /// 32: feature ids are 0..F-1 as drawn; 64: WriteXmcFile writes feature f
  /// as FeatureId(f), anywhere in [0, 2^64) (hashed features).
  int feature_id_bits = 32;
};

/// Sets F, L, mean non-zeros and labels per row, and train/test row counts
/// to the published shape of a real XMC set: "eurlex4k", "wiki10-31k",
/// "amazon670k" (Bhatia et al., The Extreme Classification Repository).
/// Errors: InvalidArgument naming the known shapes.
Status ApplySyntheticShape(const std::string& shape, SyntheticXmcOptions* options, int64_t* train_rows,
                           int64_t* test_rows);

/// Errors: InvalidArgument naming the first option out of range.
Status ValidateSyntheticXmcOptions(const SyntheticXmcOptions& options);

class SyntheticXmcGenerator {
 public:
  /// `options` must have passed ValidateSyntheticXmcOptions (CHECK).
  /// Memory: O(L + F) for the two cumulative distributions and permutations.
  explicit SyntheticXmcGenerator(const SyntheticXmcOptions& options);

  /// The next row: sorted unique label ids, sorted unique feature ids and
  /// their values (same length as features). Outputs are overwritten.
  void NextRow(std::vector<uint32_t>* labels, std::vector<uint32_t>* features, std::vector<float>* values);

  /// The id WriteXmcFile writes for feature f < F: f itself with
  /// feature_id_bits 32; with 64, MixKey(f + MixKey(seed ^ constant)), a
  /// bijection of the 64-bit integers (distinct f give distinct ids).
  uint64_t FeatureId(uint32_t f) const;

  /// Feature j (0 ≤ j < features_per_label) of label `label`'s signature:
  /// a hash of (seed, label, j), in [0, F).
  uint32_t SignatureFeature(uint64_t label, int64_t j) const;

  /// Appends one row in XMC text ("l1,l2 f:v f:v\n"), features written as
  /// FeatureId(f) in ascending id order, values with six significant digits.
  void AppendXmcRow(const std::vector<uint32_t>& labels, const std::vector<uint32_t>& features,
                    const std::vector<float>& values, std::string* text) const;

  /// The next `rows` rows as CSR features (rows × F, columns 0..F-1 as
  /// drawn, whatever feature_id_bits) and labels (rows × L, values 1).
  void Generate(int64_t rows, CsrMatrix* features, CsrMatrix* labels);

  /// Writes the next `rows` rows to `path` in XMC text format, header first,
  /// replacing the file atomically (core/file_util.h: readers never see a
  /// partial file). Errors: IOError naming the path.
  Status WriteXmcFile(int64_t rows, const std::string& path);

 private:
  uint32_t DrawPowerLaw(const std::vector<double>& cdf, const std::vector<uint32_t>& ids);

  SyntheticXmcOptions o_;
  std::mt19937_64 rng_;
  std::vector<double> label_cdf_, feature_cdf_;     // cumulative weights by rank, normalised to 1
  std::vector<uint32_t> label_ids_, feature_ids_;   // rank → id
  std::vector<uint32_t> draws_;                     // scratch
};

}  // namespace tether
