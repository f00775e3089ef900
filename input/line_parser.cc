#include "input/line_parser.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

#include "input/text_parse.h"

namespace tether {
namespace text_reader {
namespace {

using text::At;
using text::BaseName;
using text::IsSpace;
using text::NumKind;
using text::NumKindText;
using text::ParseFloat;
using text::ParseUint;
using text::Quote;
using text::UintParse;

}  // namespace

LineParser::LineParser(const std::string& path, const ReadOptions& opts, bool multilabel,
                       std::string multilabel_why, uint64_t num_features, bool infer_features, uint64_t num_labels,
                       bool infer_labels)
    : path_(path), opts_(opts), base_(static_cast<uint64_t>(opts.index_base)), multilabel_(multilabel),
      multilabel_why_(std::move(multilabel_why)), feature_limit_(infer_features ? kMaxDim : num_features),
      label_limit_(infer_labels ? kMaxDim : num_labels), infer_features_(infer_features),
      infer_labels_(infer_labels), hashed_(opts.hashed_features) {}

Status LineParser::Parse(const char* b, const char* e, int64_t line_no, std::string* bad) {
  line_no_ = line_no;
  bad->clear();
  feats_.clear();
  hashed_feats_.clear();
  labels_.clear();
  target_ = 0;
  max_col_ = -1;
  const char* p = b;
  if (opts_.format == DataFormat::kLibsvm) {
    if (const void* hash = std::memchr(b, '#', static_cast<size_t>(e - b))) {
      e = static_cast<const char*>(hash);
    }
    while (p < e && IsSpace(*p)) ++p;
  }
  const bool line_starts_with_space = p < e && IsSpace(*p);
  TETHER_RETURN_IF_ERROR(ParseLabelField(&p, e, bad));
  TETHER_RETURN_IF_ERROR(ParseFeatureTokens(p, e, line_starts_with_space, bad));
  if (hashed_) {
    TETHER_RETURN_IF_ERROR(SortFeatures(&hashed_feats_, &hashed_ids_, bad));
  } else {
    TETHER_RETURN_IF_ERROR(SortFeatures(&feats_, &ids_, bad));
  }
  return SortLabels();
}

// The label field: XMC only at the very start of the line (a leading space
// means "no labels"), LIBSVM after any stray leading whitespace. A token
// holding ':' is always a feature, never a label list.
Status LineParser::ParseLabelField(const char** pp, const char* e, std::string* bad) {
  const char* p = *pp;
  if (p >= e || IsSpace(*p)) return Status::OK();
  const char* t = p;
  while (t < e && !IsSpace(*t)) ++t;
  if (std::memchr(p, ':', static_cast<size_t>(t - p)) == nullptr) {
    if (opts_.format == DataFormat::kLibsvm && !multilabel_) {
      const NumKind k = ParseFloat(p, t, &target_);
      if (k == NumKind::kSyntax) {
        return Status::InvalidArgument(At(path_, line_no_) + "invalid label " +
                                       Quote({p, static_cast<size_t>(t - p)}) + ": expected a number");
      }
      // A bad number does not end the line: the rest must still be
      // well-formed, or the row is an error rather than a dropped row.
      if (k != NumKind::kOk) *bad = "label " + Quote({p, static_cast<size_t>(t - p)}) + " " + NumKindText(k);
    } else {
      TETHER_RETURN_IF_ERROR(ParseLabelList(p, t));
    }
    *pp = t;
  } else if (opts_.format == DataFormat::kLibsvm && !multilabel_) {
    return Status::InvalidArgument(At(path_, line_no_) + "missing label: the line starts with the feature token " +
                                   Quote({p, static_cast<size_t>(t - p)}));
  }
  return Status::OK();
}

Status LineParser::ParseFeatureTokens(const char* p, const char* e, bool line_starts_with_space, std::string* bad) {
  has_qid_ = false;
  bool first_feature_token = true;
  while (true) {
    while (p < e && IsSpace(*p)) ++p;
    if (p >= e) break;
    const char* t = p;
    while (t < e && !IsSpace(*t)) ++t;
    // Learning-to-rank files (SVMrank, LightGBM, XGBoost) put "qid:N" right
    // after the label. There is no ranking objective here, so it is read,
    // checked and dropped, never taken for feature "qid".
    if (opts_.format == DataFormat::kLibsvm && t - p >= 4 && std::memcmp(p, "qid:", 4) == 0) {
      const std::string_view tok(p, static_cast<size_t>(t - p));
      if (!first_feature_token) {
        return Status::InvalidArgument(At(path_, line_no_) + Quote(tok) +
                                       " must come right after the label (a query id is not "
                                       "a feature)");
      }
      uint64_t qid = 0;
      if (ParseUint(p + 4, t, &qid) != UintParse::kOk) {
        return Status::InvalidArgument(At(path_, line_no_) + "invalid query id in token " + Quote(tok) +
                                       ": expected a non-negative integer");
      }
      has_qid_ = true;
    } else {
      TETHER_RETURN_IF_ERROR(ParseFeature(p, t, line_starts_with_space, bad));
    }
    first_feature_token = false;
    p = t;
  }
  return Status::OK();
}

Status LineParser::ParseLabelList(const char* b, const char* e) {
  const std::string_view list(b, static_cast<size_t>(e - b));
  // XMC label ids follow the index base like features; LIBSVM multilabel
  // ids are used as written.
  const uint64_t base = opts_.format == DataFormat::kXmc ? base_ : 0;
  const char* s = b;
  while (true) {
    const char* c = static_cast<const char*>(std::memchr(s, ',', static_cast<size_t>(e - s)));
    if (c == nullptr) c = e;
    uint64_t id = 0;
    const UintParse r = ParseUint(s, c, &id);
    if (s == c) {
      return Status::InvalidArgument(At(path_, line_no_) + "empty label id in label list " +
                                     Quote(list));
    }
    if (r != UintParse::kOk) {
      std::string msg = At(path_, line_no_) + "invalid label id " +
                        Quote({s, static_cast<size_t>(c - s)}) + " in label list " +
                        Quote(list) + ": expected a non-negative integer";
      if (!multilabel_why_.empty()) {
        msg += " (the file is read as multilabel LIBSVM because " + multilabel_why_ + ")";
      }
      return Status::InvalidArgument(msg);
    }
    if (id < base) {
      return Status::InvalidArgument(At(path_, line_no_) + "label id " + std::to_string(id) +
                                     " is invalid with " + BaseName(static_cast<int>(base)) +
                                     " indexing (label list " + Quote(list) + ")");
    }
    const uint64_t col = id - base;
    if (col >= label_limit_) {
      std::string msg = At(path_, line_no_) + "label id " + std::to_string(id) +
                        " is out of range (label list " + Quote(list) + "): ";
      if (infer_labels_) {
        msg += "exceeds the 32-bit column limit";
      } else if (label_limit_ == 0) {
        msg += "0 labels declared";
      } else {
        msg += std::to_string(label_limit_) + " labels, valid ids " + std::to_string(base) +
               ".." + std::to_string(label_limit_ - 1 + base);
      }
      return Status::InvalidArgument(msg);
    }
    labels_.push_back(static_cast<uint32_t>(col));
    if (c == e) break;
    s = c + 1;
  }
  return Status::OK();
}

Status LineParser::FeatureColumn(std::string_view tok, const char* b, const char* colon, uint64_t* out_idx,
                                 uint64_t* out_col) {
  uint64_t& idx = *out_idx;
  // std::from_chars into uint64_t: exact for every id up to 2^64 - 1 (a
  // double would merge 2^63 + 1 and 2^63 + 2), kTooLarge past it.
  const UintParse r = ParseUint(b, colon, &idx);
  if (r == UintParse::kTooLarge && hashed_) {
    return Status::InvalidArgument(At(path_, line_no_) + "feature id too large in token " + Quote(tok) +
                                   ": hashed feature ids are at most 18446744073709551615 (2^64 - 1)");
  }
  if (r == UintParse::kTooLarge) {
    return Status::InvalidArgument(At(path_, line_no_) + "feature index too large in token " +
                                   Quote(tok));
  }
  if (r != UintParse::kOk) {
    return Status::InvalidArgument(At(path_, line_no_) + "invalid feature index in token " +
                                   Quote(tok) + ": expected a non-negative integer");
  }
  if (idx < base_) {
    return Status::InvalidArgument(At(path_, line_no_) + "feature index " + std::to_string(idx) +
                                   " is invalid with " + BaseName(opts_.index_base) +
                                   " indexing (token " + Quote(tok) + ")");
  }
  *out_col = idx - base_;
  return Status::OK();
}

Status LineParser::ParseFeature(const char* b, const char* e, bool line_starts_with_space, std::string* bad) {
  const std::string_view tok(b, static_cast<size_t>(e - b));
  const char* colon = static_cast<const char*>(std::memchr(b, ':', tok.size()));
  if (colon == nullptr) {
    std::string msg = At(path_, line_no_) + "expected a feature 'index:value', got " + Quote(tok);
    if (opts_.format == DataFormat::kXmc && line_starts_with_space && feats_.empty()) {
      msg += " (a line that starts with whitespace has an empty label list)";
    }
    return Status::InvalidArgument(msg);
  }
  uint64_t idx = 0, col = 0;
  TETHER_RETURN_IF_ERROR(FeatureColumn(tok, b, colon, &idx, &col));
  if (hashed_) return ParseHashedValue(tok, col, colon, e, bad);
  if (col >= feature_limit_) {
    std::string msg = At(path_, line_no_) + "feature index " + std::to_string(idx) +
                      " is out of range (token " + Quote(tok) + "): ";
    if (infer_features_) {
      msg += "exceeds the 32-bit column limit";
    } else if (feature_limit_ == 0) {
      msg += "0 features declared";
    } else {
      msg += std::to_string(feature_limit_) + " features, valid indices " +
             std::to_string(base_) + ".." + std::to_string(feature_limit_ - 1 + base_) +
             " with " + BaseName(opts_.index_base) + " indexing";
    }
    return Status::InvalidArgument(msg);
  }
  // Counted before the value is judged: a width inferred from the data then
  // covers dropped rows too, so the same width reads every share.
  max_col_ = std::max<int64_t>(max_col_, static_cast<int64_t>(col));
  float v = 0;
  bool kept = false;
  TETHER_RETURN_IF_ERROR(ParseValue(tok, colon, e, &v, &kept, bad));
  if (!kept) return Status::OK();
  feats_.emplace_back(static_cast<uint32_t>(col), v);
  return Status::OK();
}

Status LineParser::ParseValue(std::string_view tok, const char* colon, const char* e, float* v, bool* kept,
                              std::string* bad) const {
  *kept = false;
  if (colon + 1 == e) {
    return Status::InvalidArgument(At(path_, line_no_) + "missing value in token " + Quote(tok));
  }
  const NumKind k = ParseFloat(colon + 1, e, v);
  if (k == NumKind::kSyntax) {
    return Status::InvalidArgument(At(path_, line_no_) + "invalid value in token " + Quote(tok) +
                                   ": expected a number");
  }
  if (k != NumKind::kOk) {  // not finite or out of range: the row is dropped, the first such token named
    if (bad->empty()) *bad = Quote(tok) + " " + NumKindText(k);
    return Status::OK();
  }
  *kept = true;
  return Status::OK();
}

Status LineParser::ParseHashedValue(std::string_view tok, uint64_t id, const char* colon, const char* e,
                                    std::string* bad) {
  float v = 0;
  bool kept = false;
  TETHER_RETURN_IF_ERROR(ParseValue(tok, colon, e, &v, &kept, bad));
  if (!kept) return Status::OK();
  hashed_feats_.emplace_back(id, v);
  return Status::OK();
}

// *feats (the line's (id, value) pairs as written) into sorted unique
// *ids and vals_, applying the duplicate policy.
template <typename Id>
Status LineParser::SortFeatures(std::vector<std::pair<Id, float>>* feats, std::vector<Id>* ids, std::string* bad) {
  const auto by_col = [](const std::pair<Id, float>& a, const std::pair<Id, float>& b) {
    return a.first < b.first;
  };
  bool strictly_increasing = true;
  for (size_t i = 1; i < feats->size() && strictly_increasing; ++i) {
    strictly_increasing = (*feats)[i - 1].first < (*feats)[i].first;
  }
  // Stable, so that kKeepLast keeps the value written last on the line.
  if (!strictly_increasing) std::stable_sort(feats->begin(), feats->end(), by_col);
  std::vector<Id>& ids_ = *ids;
  ids_.clear();
  vals_.clear();
  for (const auto& [col, v] : *feats) {
    if (!ids_.empty() && ids_.back() == col) {
      switch (opts_.duplicates) {
        case DuplicatePolicy::kError:
          return Status::InvalidArgument(
              At(path_, line_no_) + "duplicate feature index " + std::to_string(col + base_) +
              " (to merge repeats, set data.duplicates: DUPLICATES_SUM or DUPLICATES_KEEP_LAST; "
              "tether-data: --duplicates=sum|keep_last)");
        case DuplicatePolicy::kSum:
          vals_.back() += v;
          if (!std::isfinite(vals_.back()) && bad->empty()) {
            *bad = "duplicate feature index " + std::to_string(col + base_) +
                   " sums to a value that overflows float";
            return Status::OK();
          }
          break;
        case DuplicatePolicy::kKeepLast:
          vals_.back() = v;
          break;
      }
      continue;
    }
    ids_.push_back(col);
    vals_.push_back(v);
  }
  return Status::OK();
}

Status LineParser::SortLabels() {
  std::sort(labels_.begin(), labels_.end());
  const auto dup = std::adjacent_find(labels_.begin(), labels_.end());
  if (dup == labels_.end()) return Status::OK();
  if (opts_.duplicates == DuplicatePolicy::kError) {
    const uint64_t base = opts_.format == DataFormat::kXmc ? base_ : 0;
    return Status::InvalidArgument(At(path_, line_no_) + "duplicate label id " +
                                   std::to_string(*dup + base));
  }
  labels_.erase(std::unique(labels_.begin(), labels_.end()), labels_.end());
  return Status::OK();
}

}  // namespace text_reader
}  // namespace tether
