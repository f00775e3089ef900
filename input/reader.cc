#include "input/reader.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string_view>
#include <system_error>
#include <utility>

#include <glog/logging.h>

#include "input/arff_reader.h"
#include "input/file_input.h"
#include "input/text_parse.h"

namespace tether {
namespace {

using text::At;
using text::BaseName;
using text::CheckIsText;
using text::IsSpace;
using text::NumKind;
using text::NumKindText;
using text::ParseFloat;
using text::ParseUint;
using text::Quote;
using text::UintParse;

constexpr int kMaxListedBadLines = 5;
// col_idx is uint32; one id is kept free so that cols = max id + 1 still fits.
constexpr uint64_t kMaxDim = std::numeric_limits<uint32_t>::max();

// One data line of this reader's share, found by the newline scan.
struct LineRef {
  size_t begin;  // offset of the first byte of the line
  size_t end;    // offset of its '\n' (or of the end of the content)
  int64_t line_no;
};

// A non-finite value found on one line: the row is dropped or reported.
struct BadValue {
  int64_t line_no;
  std::string what;  // "'2:nan' is NaN"
};

class LineParser {
 public:
  // num_features / num_labels of 0 with infer_* set: no upper bound but the
  // 32-bit column limit; the caller derives the width afterwards.
  // multilabel_why: for LIBSVM multilabel files, why they are read that way.
  LineParser(const std::string& path, const ReadOptions& opts, bool multilabel,
             std::string multilabel_why, uint64_t num_features, bool infer_features,
             uint64_t num_labels, bool infer_labels)
      : path_(path), opts_(opts), base_(static_cast<uint64_t>(opts.index_base)),
        multilabel_(multilabel), multilabel_why_(std::move(multilabel_why)),
        feature_limit_(infer_features ? kMaxDim : num_features),
        label_limit_(infer_labels ? kMaxDim : num_labels),
        infer_features_(infer_features), infer_labels_(infer_labels), hashed_(opts.hashed_features) {}

  // Parses [b, e) (one non-blank line, no '\n') into the scratch row.
  // Returns a non-OK Status for a malformed line; sets *bad (and returns OK)
  // when the line is well-formed but holds a non-finite value.
  Status Parse(const char* b, const char* e, int64_t line_no, std::string* bad) {
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
    // The label field: XMC only at the very start of the line (a leading
    // space means "no labels"), LIBSVM after any stray leading whitespace.
    // A token holding ':' is always a feature, never a label list.
    bool line_starts_with_space = p < e && IsSpace(*p);
    if (p < e && !IsSpace(*p)) {
      const char* t = p;
      while (t < e && !IsSpace(*t)) ++t;
      if (std::memchr(p, ':', static_cast<size_t>(t - p)) == nullptr) {
        if (opts_.format == DataFormat::kLibsvm && !multilabel_) {
          const NumKind k = ParseFloat(p, t, &target_);
          if (k == NumKind::kSyntax) {
            return Status::InvalidArgument(At(path_, line_no_) + "invalid label " +
                                           Quote({p, static_cast<size_t>(t - p)}) +
                                           ": expected a number");
          }
          // A bad number does not end the line: the rest must still be
          // well-formed, or the row is an error rather than a dropped row.
          if (k != NumKind::kOk) *bad = "label " + Quote({p, static_cast<size_t>(t - p)}) + " " + NumKindText(k);
        } else {
          TETHER_RETURN_IF_ERROR(ParseLabelList(p, t));
        }
        p = t;
      } else if (opts_.format == DataFormat::kLibsvm && !multilabel_) {
        return Status::InvalidArgument(
            At(path_, line_no_) + "missing label: the line starts with the feature token " +
            Quote({p, static_cast<size_t>(t - p)}));
      }
    }
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
          return Status::InvalidArgument(At(path_, line_no_) + "invalid query id in token " +
                                         Quote(tok) + ": expected a non-negative integer");
        }
        has_qid_ = true;
      } else {
        TETHER_RETURN_IF_ERROR(ParseFeature(p, t, line_starts_with_space, bad));
      }
      first_feature_token = false;
      p = t;
    }
    if (hashed_) {
      TETHER_RETURN_IF_ERROR(SortFeatures(&hashed_feats_, &hashed_ids_, bad));
    } else {
      TETHER_RETURN_IF_ERROR(SortFeatures(&feats_, &ids_, bad));
    }
    return SortLabels();
  }

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
  Status ParseLabelList(const char* b, const char* e) {
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

  Status ParseFeature(const char* b, const char* e, bool line_starts_with_space,
                      std::string* bad) {
    const std::string_view tok(b, static_cast<size_t>(e - b));
    const char* colon = static_cast<const char*>(std::memchr(b, ':', tok.size()));
    if (colon == nullptr) {
      std::string msg = At(path_, line_no_) + "expected a feature 'index:value', got " + Quote(tok);
      if (opts_.format == DataFormat::kXmc && line_starts_with_space && feats_.empty()) {
        msg += " (a line that starts with whitespace has an empty label list)";
      }
      return Status::InvalidArgument(msg);
    }
    uint64_t idx = 0;
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
    const uint64_t col = idx - base_;
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
    if (colon + 1 == e) {
      return Status::InvalidArgument(At(path_, line_no_) + "missing value in token " + Quote(tok));
    }
    float v = 0;
    const NumKind k = ParseFloat(colon + 1, e, &v);
    if (k == NumKind::kSyntax) {
      return Status::InvalidArgument(At(path_, line_no_) + "invalid value in token " + Quote(tok) +
                                     ": expected a number");
    }
    if (k != NumKind::kOk) {
      if (bad->empty()) *bad = Quote(tok) + " " + NumKindText(k);
      return Status::OK();
    }
    feats_.emplace_back(static_cast<uint32_t>(col), v);
    return Status::OK();
  }

  // The value part of a hashed feature token (the id is checked already).
  Status ParseHashedValue(std::string_view tok, uint64_t id, const char* colon, const char* e, std::string* bad) {
    if (colon + 1 == e) {
      return Status::InvalidArgument(At(path_, line_no_) + "missing value in token " + Quote(tok));
    }
    float v = 0;
    const NumKind k = ParseFloat(colon + 1, e, &v);
    if (k == NumKind::kSyntax) {
      return Status::InvalidArgument(At(path_, line_no_) + "invalid value in token " + Quote(tok) +
                                     ": expected a number");
    }
    if (k != NumKind::kOk) {
      if (bad->empty()) *bad = Quote(tok) + " " + NumKindText(k);
      return Status::OK();
    }
    hashed_feats_.emplace_back(id, v);
    return Status::OK();
  }

  // *feats (the line's (id, value) pairs as written) into sorted unique
  // *ids and vals_, applying the duplicate policy.
  template <typename Id>
  Status SortFeatures(std::vector<std::pair<Id, float>>* feats, std::vector<Id>* ids, std::string* bad) {
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

  Status SortLabels() {
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

Status NonFiniteError(const std::string& path, const std::vector<BadValue>& listed,
                      int64_t bad_lines) {
  std::string msg = At(path, listed.front().line_no) + "non-finite value: " +
                    listed.front().what + "; " + std::to_string(bad_lines) +
                    (bad_lines == 1 ? " line has" : " lines have") +
                    " non-finite or overflowing values (";
  if (static_cast<int64_t>(listed.size()) < bad_lines) {
    msg += "first " + std::to_string(listed.size()) + ": ";
  }
  for (size_t i = 0; i < listed.size(); ++i) {
    if (i > 0) msg += ", ";
    msg += "line " + std::to_string(listed[i].line_no) + " " + listed[i].what;
  }
  msg += "); to drop such rows instead, set data.non_finite: NON_FINITE_DROP_ROW (tether-data: "
         "--non_finite=drop_row)";
  return Status::InvalidArgument(msg);
}

// Parses line 1 of an XMC file: "N F L".
Status ParseXmcHeader(const std::string& path, std::string_view line, uint64_t out[3]) {
  int n = 0;
  size_t i = 0;
  bool ok = true;
  while (ok) {
    while (i < line.size() && IsSpace(line[i])) ++i;
    if (i >= line.size()) break;
    size_t j = i;
    while (j < line.size() && !IsSpace(line[j])) ++j;
    if (n >= 3 || ParseUint(line.data() + i, line.data() + j, &out[n]) != UintParse::kOk) ok = false;
    ++n;
    i = j;
  }
  if (ok && n == 3) return Status::OK();
  std::string msg = At(path, 1) + "malformed XMC header " + Quote(line) +
                    ": expected 'num_examples num_features num_labels' (three non-negative integers)";
  if (line.find(':') != std::string_view::npos) {
    msg += "; line 1 looks like a data row, but an XMC file starts with a header line";
  }
  return Status::InvalidArgument(msg);
}

Status ValidateOptions(const std::string& path, const ReadOptions& opts) {
  if (opts.index_base != 0 && opts.index_base != 1) {
    return Status::InvalidArgument(
        path + ": ReadOptions.index_base must be 0 or 1, got " + std::to_string(opts.index_base) +
        (opts.index_base == -1 ? " (unset)" : "") + "; the base is never guessed from the data");
  }
  if (opts.num_partitions < 1 || opts.partition < 0 || opts.partition >= opts.num_partitions) {
    return Status::InvalidArgument(path + ": partition " + std::to_string(opts.partition) +
                                   " of " + std::to_string(opts.num_partitions) +
                                   " is invalid: need 0 <= partition < num_partitions");
  }
  if (opts.hashed_features && opts.num_features != 0) {
    return Status::InvalidArgument(path + ": num_features must be 0 with hashed_features (feature ids are any "
                                   "64-bit integer; the model has no input width), got " +
                                   std::to_string(opts.num_features));
  }
  if (opts.num_features < 0 || static_cast<uint64_t>(opts.num_features) > kMaxDim) {
    return Status::InvalidArgument(path + ": num_features " + std::to_string(opts.num_features) +
                                   " is outside 0.." + std::to_string(kMaxDim));
  }
  if (opts.num_labels < 0 || static_cast<uint64_t>(opts.num_labels) > kMaxDim) {
    return Status::InvalidArgument(path + ": num_labels " + std::to_string(opts.num_labels) +
                                   " is outside 0.." + std::to_string(kMaxDim));
  }
  if (opts.row_subset != nullptr) {
    const std::vector<int64_t>& s = *opts.row_subset;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] < 0 || (i > 0 && s[i] <= s[i - 1])) {
        return Status::InvalidArgument(path + ": row_subset must hold strictly increasing "
                                       "non-negative row indices; entry " + std::to_string(i) +
                                       " is " + std::to_string(s[i]));
      }
    }
  }
  return Status::OK();
}

// Checks that do not need the data; every entry point runs them first.
Status CheckOptions(const std::string& path, const ReadOptions& opts) {
  TETHER_RETURN_IF_ERROR(ValidateOptions(path, opts));
  const bool sharded = opts.num_partitions > 1 || opts.row_subset != nullptr;
  if (opts.format == DataFormat::kLibsvm && sharded && opts.num_features == 0 && !opts.hashed_features) {
    return Status::InvalidArgument(
        path + ": num_features must be set when reading a share of a LIBSVM file "
               "(num_partitions > 1 or row_subset): each share would infer its own width");
  }
  return Status::OK();
}

// Where a block of whole lines sits in its file (ParseRowsBlock); the
// default is a whole file.
struct TextPos {
  int64_t first_line_no = 1;  // 1-based file line of the text's first line
  bool block = false;         // data lines only: no XMC header, no file-level checks
};
// Hashed features: `ids` holds every entry's 64-bit id in CSR order (rows
// sorted and unique); gives each distinct id a column in increasing id
// order, fills m->col_idx, col_keys and cols. Rows stay sorted, as the
// column order is the id order. Consumes *ids (its memory is reused for the
// dictionary's sort). Error: InvalidArgument past 2^32 - 1 distinct ids.
Status AssignHashedColumns(const std::string& path, std::vector<uint64_t>* ids, CsrMatrix* m) {
  auto dict = std::make_shared<std::vector<uint64_t>>(*ids);
  std::sort(dict->begin(), dict->end());
  dict->erase(std::unique(dict->begin(), dict->end()), dict->end());
  dict->shrink_to_fit();
  if (dict->size() > kMaxDim) {
    return Status::InvalidArgument(path + ": " + std::to_string(dict->size()) +
                                   " distinct hashed feature ids in this reader's share; a share holds at most " +
                                   std::to_string(kMaxDim) + " (read it in more partitions: more workers)");
  }
  m->col_idx.resize(ids->size());
  const uint64_t* begin = dict->data();
  const uint64_t* end = begin + dict->size();
  for (size_t i = 0; i < ids->size(); ++i) {
    m->col_idx[i] = static_cast<uint32_t>(std::lower_bound(begin, end, (*ids)[i]) - begin);
  }
  std::vector<uint64_t>().swap(*ids);
  m->cols = static_cast<int64_t>(dict->size());
  m->col_keys = std::move(dict);
  return Status::OK();
}

// Parses decoded text (options already checked). `path` names it in messages.
StatusOr<Dataset> ParseText(const std::string& path, std::string_view content,
                            const ReadOptions& opts, TextPos text_pos = {}) {
  // A block's reader (input/row_stream.cc) checks its file for binary input.
  if (!text_pos.block) TETHER_RETURN_IF_ERROR(CheckIsText(path, content));
  const bool xmc = opts.format == DataFormat::kXmc;
  const bool sharded = opts.num_partitions > 1 || opts.row_subset != nullptr;

  const char* const data = content.data();
  const size_t size = content.size();
  size_t pos = 0;
  if (text_pos.first_line_no == 1 && size >= 3 && std::memcmp(data, "\xef\xbb\xbf", 3) == 0) pos = 3;  // UTF-8 BOM

  // Share boundaries: floor(total * p / n) without overflow, for bytes and
  // for row-subset entries alike.
  const auto cut = [&opts](uint64_t total, int p) {
    const uint64_t n = static_cast<uint64_t>(opts.num_partitions);
    const uint64_t up = static_cast<uint64_t>(p);
    return static_cast<size_t>(total / n * up + total % n * up / n);
  };
  const size_t range_lo = cut(size, opts.partition);
  const size_t range_hi = cut(size, opts.partition + 1);
  const int64_t* sub_next = nullptr;
  const int64_t* sub_end = nullptr;
  if (opts.row_subset != nullptr) {
    const uint64_t k = opts.row_subset->size();
    sub_next = opts.row_subset->data() + cut(k, opts.partition);
    sub_end = opts.row_subset->data() + cut(k, opts.partition + 1);
  }

  // Pass 1: find the lines. Lines outside the share are only scanned for their
  // newline and first non-blank byte (LIBSVM also peeks at the label field for
  // a comma, so that every share agrees on the multilabel mode).
  std::string_view header_line;
  bool have_content = false;
  bool multilabel = !xmc && opts.num_labels > 0;
  std::string multilabel_why = multilabel ? "num_labels is set" : "";
  int64_t data_rows = 0;
  int64_t line_no = text_pos.first_line_no - 1;
  std::vector<LineRef> mine;
  while (pos < size) {
    const void* nl = std::memchr(data + pos, '\n', size - pos);
    const size_t end = nl != nullptr ? static_cast<size_t>(static_cast<const char*>(nl) - data) : size;
    const size_t begin = pos;
    pos = end + 1;
    ++line_no;
    size_t first = begin;
    while (first < end && IsSpace(data[first])) ++first;
    const bool blank = first == end || (!xmc && data[first] == '#');
    if (!blank) have_content = true;
    if (xmc && line_no == 1 && !text_pos.block) {
      header_line = std::string_view(data + begin, end - begin);
      continue;
    }
    if (!xmc && line_no == 1 && !blank) {
      // "N F L" (three integers, no idx:val pair) is an XMC header, never a
      // LIBSVM row. Refused here, also when a row subset would skip line 1
      // and so shift every row id by one.
      int ints = 0;
      bool only_digits = true;
      for (size_t i = first; i < end && only_digits;) {
        while (i < end && IsSpace(data[i])) ++i;
        if (i == end) break;
        size_t j = i;
        while (j < end && data[j] >= '0' && data[j] <= '9') ++j;
        if (j == i || (j < end && !IsSpace(data[j]))) only_digits = false;
        ++ints;
        i = j;
      }
      if (only_digits && ints == 3)
        return Status::InvalidArgument(At(path, 1) + "line 1 " +
                                       Quote(std::string_view(data + first, end - first)) +
                                       " looks like an XMC header (examples, features, labels), not a LIBSVM row: "
                                       "read the file as XMC (format XMC, --format=xmc)");
    }
    if (blank) continue;
    const int64_t row = data_rows++;
    if (!xmc && !multilabel) {
      for (size_t i = first; i < end && !IsSpace(data[i]) && data[i] != ':' && data[i] != '#'; ++i) {
        if (data[i] == ',') {
          multilabel = true;
          multilabel_why = "line " + std::to_string(line_no) + " has a comma-separated label list";
          break;
        }
      }
    }
    bool take;
    if (sub_next != nullptr) {
      take = sub_next < sub_end && *sub_next == row;
      if (take) ++sub_next;
    } else {
      take = begin >= range_lo && begin < range_hi;
    }
    if (take) mine.push_back({begin, end, line_no});
  }

  if (!have_content && !text_pos.block) {
    return Status::InvalidArgument(path + ": no examples found (the file is " +
                                   (size == 0 ? "empty)" : "blank)"));
  }
  uint64_t num_features = static_cast<uint64_t>(opts.num_features);
  uint64_t num_labels = static_cast<uint64_t>(opts.num_labels);
  if (xmc && !text_pos.block) {
    uint64_t hdr[3] = {0, 0, 0};
    TETHER_RETURN_IF_ERROR(ParseXmcHeader(path, header_line, hdr));
    // Hashed features: the header's F is not used (ids are any uint64).
    if (opts.hashed_features) hdr[1] = 0;
    if (hdr[1] > kMaxDim || hdr[2] > kMaxDim) {
      return Status::InvalidArgument(At(path, 1) + "header dimensions " + std::to_string(hdr[1]) +
                                     " x " + std::to_string(hdr[2]) +
                                     " exceed the 32-bit column limit");
    }
    if (opts.num_features > 0 && num_features != hdr[1]) {
      return Status::InvalidArgument(At(path, 1) + "header declares " + std::to_string(hdr[1]) +
                                     " features but num_features is " + std::to_string(num_features));
    }
    if (opts.num_labels > 0 && num_labels != hdr[2]) {
      return Status::InvalidArgument(At(path, 1) + "header declares " + std::to_string(hdr[2]) +
                                     " labels but num_labels is " + std::to_string(num_labels));
    }
    num_features = hdr[1];
    num_labels = hdr[2];
    if (data_rows == 0) {
      return Status::InvalidArgument(path + ": no examples found (the header declares " +
                                     std::to_string(hdr[0]) + ")");
    }
    if (hdr[0] != static_cast<uint64_t>(data_rows)) {
      const std::string msg = At(path, 1) + "header declares " + std::to_string(hdr[0]) +
                              " examples but the file has " + std::to_string(data_rows) +
                              " data rows (declared " + std::to_string(hdr[0]) + ", found " +
                              std::to_string(data_rows) + ")";
      if (opts.header_mismatch_is_error) return Status::InvalidArgument(msg);
      LOG(WARNING) << msg << "; continuing because header_mismatch_is_error is false";
    }
  }
  if (data_rows == 0 && !text_pos.block) return Status::InvalidArgument(path + ": no examples found");
  if (!xmc && multilabel && text_pos.block && opts.num_labels == 0) {
    return Status::InvalidArgument(path + ": " + multilabel_why +
                                   ", so the file is multilabel, but num_labels is not set: a block of rows "
                                   "cannot infer the label width");
  }
  if (!xmc && multilabel && sharded && opts.num_labels == 0) {
    return Status::InvalidArgument(
        path + ": num_labels must be set when reading a share of a multilabel LIBSVM file "
               "(num_partitions > 1 or row_subset): each share would infer its own width");
  }
  if (opts.row_subset != nullptr && !opts.row_subset->empty() &&
      opts.row_subset->back() >= data_rows) {
    return Status::InvalidArgument(path + ": row_subset entry " +
                                   std::to_string(opts.row_subset->back()) +
                                   " (0-based) is past the last of the file's " +
                                   std::to_string(data_rows) + " data rows");
  }

  // Pass 2: parse this share.
  Dataset ds;
  const bool infer_features = !xmc && num_features == 0 && !opts.hashed_features;
  const bool infer_labels = !xmc && multilabel && num_labels == 0;
  LineParser parser(path, opts, multilabel, multilabel_why, num_features, infer_features,
                    num_labels, infer_labels);
  std::vector<BadValue> listed_bad;
  int64_t bad_lines = 0;
  // Malformed lines: reading goes on to count them and list the first few,
  // since a file with one bad line rarely has only one.
  std::vector<BadValue> listed_errors;
  int64_t error_lines = 0;
  Status first_error;
  uint32_t max_feature = 0, max_label = 0;
  bool any_feature = false, any_label = false;
  std::string bad;
  std::vector<float> ones;  // label values
  std::vector<uint64_t> hashed_ids;  // hashed_features: every kept row's ids, in CSR order
  ds.source_lines.reserve(mine.size());
  for (const LineRef& ln : mine) {
    const Status st = parser.Parse(data + ln.begin, data + ln.end, ln.line_no, &bad);
    if (!st.ok()) {
      if (error_lines++ == 0) first_error = st;
      if (static_cast<int>(listed_errors.size()) < kMaxListedBadLines) {
        const std::string at = At(path, ln.line_no);
        const std::string& m = st.message();
        listed_errors.push_back({ln.line_no, m.compare(0, at.size(), at) == 0 ? m.substr(at.size()) : m});
      }
      continue;
    }
    if (error_lines > 0) {  // only counting: the read has failed
      if (!bad.empty() && bad_lines++ < kMaxListedBadLines) listed_bad.push_back({ln.line_no, bad});
      continue;
    }
    ++ds.rows_read;
    if (parser.has_qid()) ++ds.qid_rows;
    // Inferred widths cover every parsed row, kept or not, so that reading
    // the file again with those widths (e.g. by shares) accepts every row.
    if (parser.max_feature_col() >= 0) {
      any_feature = true;
      max_feature = std::max(max_feature, static_cast<uint32_t>(parser.max_feature_col()));
    }
    if (!parser.labels().empty()) {
      any_label = true;
      max_label = std::max(max_label, parser.labels().back());
    }
    if (!bad.empty()) {
      ++bad_lines;
      if (static_cast<int>(listed_bad.size()) < kMaxListedBadLines) {
        listed_bad.push_back({ln.line_no, bad});
        if (opts.non_finite == NonFinitePolicy::kDropRow) {
          LOG(WARNING) << At(path, ln.line_no) << "dropping row: " << bad;
        }
      }
      ++ds.dropped_rows;
      continue;
    }
    if (bad_lines > 0 && opts.non_finite == NonFinitePolicy::kError) continue;  // only hunting
    const bool unlabeled = (xmc || multilabel) && parser.labels().empty();
    if (unlabeled) {
      ++ds.unlabeled_rows;
      if (opts.skip_unlabeled) continue;
    }
    if (opts.hashed_features) {
      // Columns are assigned once the share's distinct ids are known (below).
      const auto& ids = parser.hashed_feature_ids();
      hashed_ids.insert(hashed_ids.end(), ids.begin(), ids.end());
      ds.features.values.insert(ds.features.values.end(), parser.feature_values().begin(),
                                parser.feature_values().end());
      ds.features.row_ptr.push_back(static_cast<int64_t>(hashed_ids.size()));
      ++ds.features.rows;
    } else {
      const auto& ids = parser.feature_ids();
      ds.features.AppendRow(ids.data(), parser.feature_values().data(), ids.size());
    }
    const auto& labels = parser.labels();
    if (labels.size() > ones.size()) ones.resize(labels.size(), 1.0f);
    ds.labels.AppendRow(labels.data(), ones.data(), labels.size());
    if (!xmc && !multilabel) ds.targets.push_back(parser.target());
    ds.source_lines.push_back(ln.line_no);
  }
  if (error_lines > 0) {
    std::string msg = first_error.message();
    if (error_lines > 1) {
      // The first is stated in full above; then the next few, then a count.
      msg += "; " + std::to_string(error_lines) + " lines are malformed, also";
      for (size_t i = 1; i < listed_errors.size(); ++i) {
        msg += (i > 1 ? "; line " : " line ") + std::to_string(listed_errors[i].line_no) + ": " +
               listed_errors[i].what;
      }
      const int64_t unlisted = error_lines - static_cast<int64_t>(listed_errors.size());
      if (unlisted > 0) msg += " (and " + std::to_string(unlisted) + " more)";
    }
    if (bad_lines > 0 && opts.non_finite == NonFinitePolicy::kError) {
      msg += "; besides, " + std::to_string(bad_lines) +
             (bad_lines == 1 ? " line has" : " lines have") + " non-finite or overflowing values (first: line " +
             std::to_string(listed_bad.front().line_no) + " " + listed_bad.front().what + ")";
    }
    return Status::InvalidArgument(msg);
  }
  if (bad_lines > 0 && opts.non_finite == NonFinitePolicy::kError) {
    return NonFiniteError(path, listed_bad, bad_lines);
  }
  if (bad_lines > 0) {
    LOG(WARNING) << path << ": dropped " << bad_lines
                 << " rows with non-finite or overflowing values (NonFinitePolicy::kDropRow)";
  }

  if (ds.qid_rows > 0) {
    LOG(WARNING) << path << ": " << ds.qid_rows << " of " << ds.rows_read
                 << " lines have a 'qid:' field (query id); ignored, since Tether has no "
                    "ranking objective";
  }
  if (infer_features) {
    num_features = any_feature ? uint64_t{max_feature} + 1 : 0;
    LOG(WARNING) << path << ": num_features not given; using " << num_features
                 << " from the largest index seen. Files read this way can differ in width; "
                    "set num_features to fix it";
  }
  if (infer_labels) {
    num_labels = any_label ? uint64_t{max_label} + 1 : 0;
    LOG(WARNING) << path << ": num_labels not given; using " << num_labels
                 << " from the largest label id seen";
  }
  ds.features.cols = static_cast<int64_t>(num_features);
  if (opts.hashed_features) TETHER_RETURN_IF_ERROR(AssignHashedColumns(path, &hashed_ids, &ds.features));
  ds.labels.cols = (xmc || multilabel) ? static_cast<int64_t>(num_labels) : 0;

  const int64_t kept = ds.features.rows;
  LOG_IF(INFO, !text_pos.block) << path << ": " << (xmc ? "XMC" : multilabel ? "LIBSVM multilabel" : "LIBSVM")
            << ", index_base " << opts.index_base << ", partition " << opts.partition << "/"
            << opts.num_partitions << (opts.row_subset ? " of a row subset" : "") << ": read "
            << ds.rows_read << " of " << data_rows << " rows, kept " << kept << ", unlabeled "
            << ds.unlabeled_rows << (opts.skip_unlabeled ? " (skipped)" : " (kept as all-negative)")
            << ", dropped " << ds.dropped_rows << "; " << ds.features.cols << " features, "
            << ds.labels.cols << " labels, nnz " << ds.features.nnz();
  if (kept == 0 && !text_pos.block) {
    if (opts.num_partitions == 1) {
      return Status::InvalidArgument(
          path + ": no examples found after filtering: " + std::to_string(ds.rows_read) +
          " rows read, " + std::to_string(ds.dropped_rows) + " dropped as non-finite, " +
          std::to_string(opts.skip_unlabeled ? ds.unlabeled_rows : 0) + " skipped as unlabeled");
    }
    LOG(WARNING) << path << ": partition " << opts.partition << "/" << opts.num_partitions
                 << " holds no rows";
  }
  return ds;
}

}  // namespace

StatusOr<Dataset> ParseRowsBlock(std::string_view text, const std::string& path, int64_t first_line_no,
                                 const ReadOptions& opts) {
  if (opts.format == DataFormat::kArff)
    return Status::InvalidArgument(path + ": ARFF files are read whole, not in blocks");
  TETHER_RETURN_IF_ERROR(ValidateOptions(path, opts));
  // Hashed features have no width (ids are any uint64).
  if ((opts.num_features == 0 && !opts.hashed_features) || (opts.format == DataFormat::kXmc && opts.num_labels == 0))
    return Status::InvalidArgument(path + ": a block of rows needs num_features" +
                                   (opts.format == DataFormat::kXmc ? std::string(" and num_labels") : std::string()) +
                                   " set: it has no header to take them from, and blocks must agree");
  if (opts.num_partitions != 1 || opts.row_subset != nullptr)
    return Status::InvalidArgument(path + ": a block of rows is read whole (no partition or row_subset)");
  if (first_line_no < 1) return Status::InvalidArgument(path + ": first_line_no must be >= 1");
  return ParseText(path, text, opts, TextPos{first_line_no, true});
}

StatusOr<Dataset> ParseDataset(const std::string& bytes, const std::string& name,
                               const ReadOptions& opts) {
  if (opts.format == DataFormat::kArff) return ParseArffDataset(bytes, name, opts);
  TETHER_RETURN_IF_ERROR(CheckOptions(name, opts));
  std::string inflated;
  TETHER_ASSIGN_OR_RETURN(std::string_view text, DecodeInput(name, bytes, &inflated));
  return ParseText(name, text, opts);
}

StatusOr<Dataset> ReadDataset(const std::string& path, const ReadOptions& opts) {
  if (opts.format == DataFormat::kArff) return ReadArffDataset(path, opts);
  TETHER_RETURN_IF_ERROR(CheckOptions(path, opts));
  std::string raw;
  TETHER_RETURN_IF_ERROR(ReadFileBytes(path, &raw));
  std::string inflated;
  TETHER_ASSIGN_OR_RETURN(std::string_view text, DecodeInput(path, raw, &inflated));
  if (text.data() == inflated.data()) std::string().swap(raw);  // keep one copy in memory
  return ParseText(path, text, opts);
}

StatusOr<std::array<uint64_t, 3>> ReadXmcHeader(const std::string& path) {
  // gzread reads plain files as they are, so one path serves both, and only
  // the first line is inflated however large the file.
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    return errno == ENOENT ? Status::NotFound(path + ": no such file")
                           : Status::IOError(path + ": cannot open: " + std::strerror(errno));
  }
  std::string line;
  char buf[4096];
  while (gzgets(f, buf, sizeof(buf)) != nullptr) {
    line += buf;
    if (!line.empty() && line.back() == '\n') break;
    if (line.size() > (1u << 20)) break;  // no header is this long
  }
  gzclose(f);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  std::string_view text(line);
  if (text.size() >= 3 && text.compare(0, 3, "\xef\xbb\xbf") == 0) text.remove_prefix(3);
  uint64_t hdr[3] = {0, 0, 0};
  TETHER_RETURN_IF_ERROR(ParseXmcHeader(path, text, hdr));
  return std::array<uint64_t, 3>{hdr[0], hdr[1], hdr[2]};
}

StatusOr<std::vector<int64_t>> ReadSplitFile(const std::string& path) {
  std::string raw;
  TETHER_RETURN_IF_ERROR(ReadFileBytes(path, &raw));
  std::string inflated;
  TETHER_ASSIGN_OR_RETURN(std::string_view content, DecodeInput(path, raw, &inflated));
  TETHER_RETURN_IF_ERROR(CheckIsText(path, content));
  std::vector<std::pair<int64_t, int64_t>> rows;  // (0-based row, line)
  const char* const data = content.data();
  const size_t size = content.size();
  size_t pos = 0;
  int64_t line_no = 0;
  bool sorted = true;
  while (pos < size) {
    const void* nl = std::memchr(data + pos, '\n', size - pos);
    const size_t end = nl != nullptr ? static_cast<size_t>(static_cast<const char*>(nl) - data) : size;
    size_t i = pos;
    pos = end + 1;
    ++line_no;
    while (i < end && IsSpace(data[i])) ++i;
    if (i == end) continue;
    size_t j = i;
    while (j < end && !IsSpace(data[j])) ++j;
    const std::string_view tok(data + i, j - i);
    size_t k = j;
    while (k < end && IsSpace(data[k])) ++k;
    if (k != end) {
      return Status::InvalidArgument(At(path, line_no) + "expected one row index per line, got " +
                                     Quote({data + i, end - i}));
    }
    uint64_t v = 0;
    if (ParseUint(data + i, data + j, &v) != UintParse::kOk ||
        v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Status::InvalidArgument(At(path, line_no) + "invalid row index " + Quote(tok) +
                                     ": expected a positive integer");
    }
    if (v == 0) {
      return Status::InvalidArgument(At(path, line_no) +
                                     "row index 0 is invalid: split files are 1-based");
    }
    const auto row = static_cast<int64_t>(v - 1);
    if (!rows.empty() && row <= rows.back().first) sorted = false;
    rows.emplace_back(row, line_no);
  }
  if (rows.empty()) return Status::InvalidArgument(path + ": no row indices found");
  if (!sorted) std::stable_sort(rows.begin(), rows.end(),
                                [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<int64_t> out;
  out.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i > 0 && rows[i].first == rows[i - 1].first) {
      const int64_t later = std::max(rows[i].second, rows[i - 1].second);
      const int64_t earlier = std::min(rows[i].second, rows[i - 1].second);
      return Status::InvalidArgument(At(path, later) + "duplicate row index " +
                                     std::to_string(rows[i].first + 1) + " (also on line " +
                                     std::to_string(earlier) + ")");
    }
    out.push_back(rows[i].first);
  }
  return out;
}

}  // namespace tether
