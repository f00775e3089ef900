// One data line of an XMC or LIBSVM text file into a row: the label field
// (a label list, or a LIBSVM target), the idx:value features (or 64-bit
// hashed ids), a LIBSVM "qid:N", sorted with the duplicate policy applied.
// Used by the text reader (input/reader.cc) for each line of its share;
// not part of input/'s interface.
//
// Ownership: borrows the path and options given to it (they must outlive
// the parser); its results are scratch, valid until the next Parse.
// Thread-safety: one parser per thread.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "input/reader.h"

namespace tether {
namespace text_reader {

// col_idx is uint32; one id is kept free so that cols = max id + 1 still fits.
constexpr uint64_t kMaxDim = std::numeric_limits<uint32_t>::max();

class LineParser {
 public:
  // num_features / num_labels of 0 with infer_* set: no upper bound but the
  // 32-bit column limit; the caller derives the width afterwards.
  // multilabel_why: for LIBSVM multilabel files, why they are read that way.
  LineParser(const std::string& path, const ReadOptions& opts, bool multilabel, std::string multilabel_why,
             uint64_t num_features, bool infer_features, uint64_t num_labels, bool infer_labels);

  // Parses [b, e) (one non-blank line, no '\n') into the scratch row.
  // Returns a non-OK Status for a malformed line, naming path:line; sets
  // *bad (and returns OK) when the line is well-formed but holds a
  // non-finite value.
  Status Parse(const char* b, const char* e, int64_t line_no, std::string* bad);

  // Results of the last successful Parse.
  const std::vector<uint32_t>& feature_ids() const { return ids_; }
  /// ReadOptions::hashed_features: the line's 64-bit feature ids (after the
  /// index base), sorted and unique; feature_ids() is then empty.
  const std::vector<uint64_t>& hashed_feature_ids() const { return hashed_ids_; }
  const std::vector<float>& feature_values() const { return vals_; }
  const std::vector<uint32_t>& labels() const { return labels_; }
  float target() const { return target_; }
  /// Whether the line had a "qid:N" field (LIBSVM ranking files).
  bool has_qid() const { return has_qid_; }
  /// Largest feature column named on the line (valid or not), -1 if none.
  int64_t max_feature_col() const { return max_col_; }

 private:
  // The label field at *p (moved past it).
  Status ParseLabelField(const char** p, const char* e, std::string* bad);
  // The feature tokens from p to e (and a LIBSVM qid right after the label).
  Status ParseFeatureTokens(const char* p, const char* e, bool line_starts_with_space, std::string* bad);
  Status ParseLabelList(const char* b, const char* e);
  // The index of a feature token [b, colon) as a column (after the base).
  Status FeatureColumn(std::string_view tok, const char* b, const char* colon, uint64_t* idx, uint64_t* col);
  Status ParseFeature(const char* b, const char* e, bool line_starts_with_space, std::string* bad);
  // The value part of a hashed feature token (the id is checked already).
  // The value after `colon` of feature token `tok` (ending at `e`): a syntax
  // error is an error; a value that is not finite or out of range leaves
  // `*kept` false and names the token in `*bad` (the first one per row).
  Status ParseValue(std::string_view tok, const char* colon, const char* e, float* v, bool* kept,
                    std::string* bad) const;
  Status ParseHashedValue(std::string_view tok, uint64_t id, const char* colon, const char* e, std::string* bad);
  template <typename Id>
  Status SortFeatures(std::vector<std::pair<Id, float>>* feats, std::vector<Id>* ids, std::string* bad);
  Status SortLabels();

  const std::string& path_;
  const ReadOptions& opts_;
  const uint64_t base_;
  const bool multilabel_;
  const std::string multilabel_why_;
  const uint64_t feature_limit_;  // columns must be < this
  const uint64_t label_limit_;
  const bool infer_features_;
  const bool infer_labels_;
  const bool hashed_;  // ReadOptions::hashed_features
  int64_t line_no_ = 0;
  std::vector<std::pair<uint32_t, float>> feats_;
  std::vector<uint32_t> ids_;
  std::vector<std::pair<uint64_t, float>> hashed_feats_;  // hashed_ only
  std::vector<uint64_t> hashed_ids_;
  std::vector<float> vals_;
  std::vector<uint32_t> labels_;
  float target_ = 0;
  int64_t max_col_ = -1;
  bool has_qid_ = false;
};

}  // namespace text_reader
}  // namespace tether
