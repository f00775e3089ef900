#include "input/reader.h"

#include <sys/stat.h>
#include <unistd.h>
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
#include "input/read_budget.h"
#include "input/line_parser.h"
#include "input/line_scan.h"
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

using text_reader::kMaxDim;
using text_reader::LineParser;
using text_reader::LineRef;
using text_reader::LineScan;
using text_reader::ScanLines;

constexpr int kMaxListedBadLines = 5;

// A non-finite value found on one line: the row is dropped or reported.
struct BadValue {
  int64_t line_no;
  std::string what;  // "'2:nan' is NaN"
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

}  // namespace

Status XmcZeroFeatures(const std::string& path, std::string_view header_line) {
  return Status::InvalidArgument(At(path, 1) + "the XMC header " + Quote(header_line) +
                                 " declares 0 features, but the file has rows: the header is 'num_examples "
                                 "num_features num_labels'; write the feature count there (or, for 64-bit "
                                 "feature ids, read it with data.hashed_features: true, tether-data "
                                 "--hashed_features)");
}

namespace {

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

// The widths from line 1 of a whole XMC file, checked against the options
// and against the data rows the scan found.
Status ApplyXmcHeader(const std::string& path, const ReadOptions& opts, LineScan& scan,
                      uint64_t* num_features, uint64_t* num_labels) {
  uint64_t hdr[3] = {0, 0, 0};
  TETHER_RETURN_IF_ERROR(ParseXmcHeader(path, scan.header_line, hdr));
  // Hashed features: the header's F is not used (ids are any uint64).
  if (opts.hashed_features) hdr[1] = 0;
  if (!opts.hashed_features && hdr[1] == 0 && hdr[0] > 0) return XmcZeroFeatures(path, scan.header_line);
  if (hdr[1] > kMaxDim || hdr[2] > kMaxDim) {
    return Status::InvalidArgument(At(path, 1) + "header dimensions " + std::to_string(hdr[1]) + " x " +
                                   std::to_string(hdr[2]) + " exceed the 32-bit column limit");
  }
  if (opts.num_features > 0 && *num_features != hdr[1]) {
    return Status::InvalidArgument(At(path, 1) + "header declares " + std::to_string(hdr[1]) +
                                   " features but num_features is " + std::to_string(*num_features));
  }
  if (opts.num_labels > 0 && *num_labels != hdr[2]) {
    return Status::InvalidArgument(At(path, 1) + "header declares " + std::to_string(hdr[2]) +
                                   " labels but num_labels is " + std::to_string(*num_labels));
  }
  *num_features = hdr[1];
  *num_labels = hdr[2];
  // Blank lines after the last declared row are an editor's, not rows.
  if (hdr[0] < static_cast<uint64_t>(scan.data_rows) &&
      static_cast<uint64_t>(scan.data_rows - scan.trailing_blank_rows) <= hdr[0]) {
    scan.data_rows = static_cast<int64_t>(hdr[0]);
    // Line 1 is the header: row r is line r + 2.
    while (!scan.mine.empty() && scan.mine.back().line_no - 2 >= scan.data_rows) scan.mine.pop_back();
  }
  if (scan.data_rows == 0) {
    return Status::InvalidArgument(path + ": no examples found (the header declares " + std::to_string(hdr[0]) +
                                   ")");
  }
  if (hdr[0] != static_cast<uint64_t>(scan.data_rows)) {
    const std::string msg = At(path, 1) + "header declares " + std::to_string(hdr[0]) +
                            " examples but the file has " + std::to_string(scan.data_rows) +
                            " data rows (declared " + std::to_string(hdr[0]) + ", found " +
                            std::to_string(scan.data_rows) + ")";
    if (opts.header_mismatch_is_error) return Status::InvalidArgument(msg);
    LOG(WARNING) << msg << "; continuing because header_mismatch_is_error is false";
  }
  return Status::OK();
}

// What the scan found that a read of this share cannot go on with.
Status CheckScan(const std::string& path, const ReadOptions& opts, const LineScan& scan, bool block) {
  const bool xmc = opts.format == DataFormat::kXmc;
  const bool sharded = opts.num_partitions > 1 || opts.row_subset != nullptr;
  if (scan.data_rows == 0 && !block) return Status::InvalidArgument(path + ": no examples found");
  if (!xmc && scan.multilabel && block && opts.num_labels == 0) {
    return Status::InvalidArgument(path + ": " + scan.multilabel_why +
                                   ", so the file is multilabel, but num_labels is not set: a block of rows "
                                   "cannot infer the label width");
  }
  if (!xmc && scan.multilabel && sharded && opts.num_labels == 0) {
    return Status::InvalidArgument(
        path + ": num_labels must be set when reading a share of a multilabel LIBSVM file "
               "(num_partitions > 1 or row_subset): each share would infer its own width");
  }
  if (opts.row_subset != nullptr && !opts.row_subset->empty() && opts.row_subset->back() >= scan.data_rows) {
    return RowSubsetPastEnd(path, opts, scan.data_rows);
  }
  return Status::OK();
}

// The second pass: the share's lines parsed into *ds. Malformed lines do not
// stop the pass: it goes on to count them and list the first few, since a
// file with one bad line rarely has only one; rows with non-finite values
// are dropped or reported per NonFinitePolicy.
class ShareRows {
 public:
  ShareRows(const std::string& path, const ReadOptions& opts, bool multilabel, LineParser* parser, Dataset* ds)
      : path_(path), opts_(opts), xmc_(opts.format == DataFormat::kXmc), multilabel_(multilabel), parser_(*parser),
        ds_(*ds) {}

  void Add(const char* data, const LineRef& ln) {
    const Status st = parser_.Parse(data + ln.begin, data + ln.end, ln.line_no, &bad_);
    if (!st.ok()) {
      if (error_lines_++ == 0) first_error_ = st;
      if (static_cast<int>(listed_errors_.size()) < kMaxListedBadLines) {
        const std::string at = At(path_, ln.line_no);
        const std::string& m = st.message();
        listed_errors_.push_back({ln.line_no, m.compare(0, at.size(), at) == 0 ? m.substr(at.size()) : m});
      }
      return;
    }
    if (error_lines_ > 0) {  // only counting: the read has failed
      if (!bad_.empty() && bad_lines_++ < kMaxListedBadLines) listed_bad_.push_back({ln.line_no, bad_});
      return;
    }
    ++ds_.rows_read;
    if (parser_.has_qid()) ++ds_.qid_rows;
    // Inferred widths cover every parsed row, kept or not, so that reading
    // the file again with those widths (e.g. by shares) accepts every row.
    if (parser_.max_feature_col() >= 0) {
      any_feature_ = true;
      max_feature_ = std::max(max_feature_, static_cast<uint32_t>(parser_.max_feature_col()));
    }
    if (!parser_.labels().empty()) {
      any_label_ = true;
      max_label_ = std::max(max_label_, parser_.labels().back());
    }
    if (!bad_.empty()) return DropRow(ln.line_no);
    if (bad_lines_ > 0 && opts_.non_finite == NonFinitePolicy::kError) return;  // only hunting
    const bool unlabeled = (xmc_ || multilabel_) && parser_.labels().empty();
    if (unlabeled) {
      ++ds_.unlabeled_rows;
      if (opts_.skip_unlabeled) return;
    }
    Keep(ln.line_no);
  }

  // After the last line: the read's error, if any (malformed lines first,
  // then non-finite values under kError); warns of dropped rows.
  Status Finish() const {
    if (error_lines_ > 0) return MalformedError();
    if (bad_lines_ > 0 && opts_.non_finite == NonFinitePolicy::kError) {
      return NonFiniteError(path_, listed_bad_, bad_lines_);
    }
    if (bad_lines_ > 0) {
      LOG(WARNING) << path_ << ": dropped " << bad_lines_
                   << " rows with non-finite or overflowing values (NonFinitePolicy::kDropRow)";
    }
    return Status::OK();
  }

  // The widths seen: the largest column + 1 (0 when none).
  uint64_t features_seen() const { return any_feature_ ? uint64_t{max_feature_} + 1 : 0; }
  uint64_t labels_seen() const { return any_label_ ? uint64_t{max_label_} + 1 : 0; }
  // Hashed features: every kept row's ids, in CSR order.
  std::vector<uint64_t>* hashed_ids() { return &hashed_ids_; }

 private:
  void DropRow(int64_t line_no) {
    ++bad_lines_;
    if (static_cast<int>(listed_bad_.size()) < kMaxListedBadLines) {
      listed_bad_.push_back({line_no, bad_});
      if (opts_.non_finite == NonFinitePolicy::kDropRow) {
        LOG(WARNING) << At(path_, line_no) << "dropping row: " << bad_;
      }
    }
    ++ds_.dropped_rows;
  }

  void Keep(int64_t line_no) {
    if (opts_.hashed_features) {
      // Columns are assigned once the share's distinct ids are known.
      const auto& ids = parser_.hashed_feature_ids();
      hashed_ids_.insert(hashed_ids_.end(), ids.begin(), ids.end());
      ds_.features.values.insert(ds_.features.values.end(), parser_.feature_values().begin(),
                                 parser_.feature_values().end());
      ds_.features.row_ptr.push_back(static_cast<int64_t>(hashed_ids_.size()));
      ++ds_.features.rows;
    } else {
      const auto& ids = parser_.feature_ids();
      ds_.features.AppendRow(ids.data(), parser_.feature_values().data(), ids.size());
    }
    const auto& labels = parser_.labels();
    if (labels.size() > ones_.size()) ones_.resize(labels.size(), 1.0f);
    ds_.labels.AppendRow(labels.data(), ones_.data(), labels.size());
    if (!xmc_ && !multilabel_) ds_.targets.push_back(parser_.target());
    ds_.source_lines.push_back(line_no);
  }

  Status MalformedError() const {
    std::string msg = first_error_.message();
    if (error_lines_ > 1) {
      // The first is stated in full above; then the next few, then a count.
      msg += "; " + std::to_string(error_lines_) + " lines are malformed, also";
      for (size_t i = 1; i < listed_errors_.size(); ++i) {
        msg += (i > 1 ? "; line " : " line ") + std::to_string(listed_errors_[i].line_no) + ": " +
               listed_errors_[i].what;
      }
      const int64_t unlisted = error_lines_ - static_cast<int64_t>(listed_errors_.size());
      if (unlisted > 0) msg += " (and " + std::to_string(unlisted) + " more)";
    }
    if (bad_lines_ > 0 && opts_.non_finite == NonFinitePolicy::kError) {
      msg += "; besides, " + std::to_string(bad_lines_) + (bad_lines_ == 1 ? " line has" : " lines have") +
             " non-finite or overflowing values (first: line " + std::to_string(listed_bad_.front().line_no) + " " +
             listed_bad_.front().what + ")";
    }
    return Status::InvalidArgument(msg);
  }

  const std::string& path_;
  const ReadOptions& opts_;
  const bool xmc_;
  const bool multilabel_;
  LineParser& parser_;
  Dataset& ds_;
  std::string bad_;  // the current line's non-finite value, if any
  std::vector<BadValue> listed_bad_;
  int64_t bad_lines_ = 0;
  std::vector<BadValue> listed_errors_;
  int64_t error_lines_ = 0;
  Status first_error_;
  uint32_t max_feature_ = 0, max_label_ = 0;
  bool any_feature_ = false, any_label_ = false;
  std::vector<float> ones_;  // label values
  std::vector<uint64_t> hashed_ids_;
};

// The share's columns: widths inferred where they were not given (warned),
// hashed ids given their columns. Warns of "qid:" fields.
Status SetWidths(const std::string& path, const ReadOptions& opts, bool multilabel, bool infer_features,
                 bool infer_labels, ShareRows* rows, uint64_t num_features, uint64_t num_labels, Dataset* ds) {
  if (ds->qid_rows > 0) {
    LOG(WARNING) << path << ": " << ds->qid_rows << " of " << ds->rows_read
                 << " lines have a 'qid:' field (query id); ignored, since Tether has no "
                    "ranking objective";
  }
  if (infer_features) {
    num_features = rows->features_seen();
    LOG(WARNING) << path << ": num_features not given; using " << num_features
                 << " from the largest index seen. Files read this way can differ in width; "
                    "set num_features to fix it";
  }
  if (infer_labels) {
    num_labels = rows->labels_seen();
    LOG(WARNING) << path << ": num_labels not given; using " << num_labels << " from the largest label id seen";
  }
  ds->features.cols = static_cast<int64_t>(num_features);
  if (opts.hashed_features) TETHER_RETURN_IF_ERROR(AssignHashedColumns(path, rows->hashed_ids(), &ds->features));
  ds->labels.cols = (opts.format == DataFormat::kXmc || multilabel) ? static_cast<int64_t>(num_labels) : 0;
  return Status::OK();
}

// Logs what the read of a whole file found; a whole single-share read that
// kept no row is an error.
Status ReportShare(const std::string& path, const ReadOptions& opts, bool multilabel, int64_t data_rows,
                   bool block, const Dataset& ds) {
  const bool xmc = opts.format == DataFormat::kXmc;
  const int64_t kept = ds.features.rows;
  LOG_IF(INFO, !block) << path << ": " << (xmc ? "XMC" : multilabel ? "LIBSVM multilabel" : "LIBSVM")
            << ", index_base " << opts.index_base << ", partition " << opts.partition << "/"
            << opts.num_partitions << (opts.row_subset ? " of a row subset" : "") << ": read "
            << ds.rows_read << " of " << data_rows << " rows, kept " << kept << ", unlabeled "
            << ds.unlabeled_rows << (opts.skip_unlabeled ? " (skipped)" : " (kept as all-negative)")
            << ", dropped " << ds.dropped_rows << "; " << ds.features.cols << " features, "
            << ds.labels.cols << " labels, nnz " << ds.features.nnz();
  if (kept != 0 || block) return Status::OK();
  if (opts.num_partitions == 1) {
    return Status::InvalidArgument(
        path + ": no examples found after filtering: " + std::to_string(ds.rows_read) +
        " rows read, " + std::to_string(ds.dropped_rows) + " dropped as non-finite, " +
        std::to_string(opts.skip_unlabeled ? ds.unlabeled_rows : 0) + " skipped as unlabeled");
  }
  LOG(WARNING) << path << ": partition " << opts.partition << "/" << opts.num_partitions << " holds no rows";
  return Status::OK();
}

// Text whose decoded bytes fit can still parse into more than memory holds
// (short rows, many values): the least this share's parse holds on top of
// the text, per row its LineRef, source line and two row_ptr entries, per
// value (a ':' in its lines) a column and a value, per label list comma a
// label, is checked against `budget` before any of it is allocated.
Status CheckParseFits(const std::string& path, std::string_view content, const std::vector<LineRef>& mine,
                      const MemoryBudget& budget) {
  if (budget.bytes == 0) return Status::OK();
  uint64_t values = 0, commas = 0;
  for (const LineRef& ln : mine) {
    const char* b = content.data() + ln.begin;
    const char* e = content.data() + ln.end;
    values += static_cast<uint64_t>(std::count(b, e, ':'));
    commas += static_cast<uint64_t>(std::count(b, e, ','));
  }
  constexpr uint64_t kRowBytes = sizeof(LineRef) + 3 * sizeof(int64_t);
  constexpr uint64_t kValueBytes = sizeof(uint32_t) + sizeof(float);
  const uint64_t rows = mine.size();
  const uint64_t parsed = rows * kRowBytes + (values + commas) * kValueBytes;
  if (content.size() + parsed <= budget.bytes) return Status::OK();
  return DataFileTooLarge(path,
                          "its " + FormatBytes(content.size()) + " of text parse into at least " + FormatBytes(parsed) +
                              " more (" + std::to_string(rows) + " rows, " + std::to_string(values + commas) +
                              " values and labels): together more than",
                          budget);
}

// Parses decoded text (options already checked). `path` names it in
// messages. Pass 1 finds the lines (input/line_scan.h); pass 2 parses this
// share's, once CheckParseFits under `budget` (bytes 0: no check).
StatusOr<Dataset> ParseText(const std::string& path, std::string_view content, const ReadOptions& opts,
                            const MemoryBudget& budget, TextPos text_pos = {}) {
  // A block's reader (input/row_stream.cc) checks its file for binary input.
  if (!text_pos.block) TETHER_RETURN_IF_ERROR(CheckIsText(path, content));
  const bool xmc = opts.format == DataFormat::kXmc;
  TETHER_ASSIGN_OR_RETURN(LineScan scan, ScanLines(path, content, opts, text_pos.first_line_no, text_pos.block));
  if (!scan.have_content && !text_pos.block) {
    return Status::InvalidArgument(path + ": no examples found (the file is " +
                                   (content.empty() ? "empty)" : "blank)"));
  }
  uint64_t num_features = static_cast<uint64_t>(opts.num_features);
  uint64_t num_labels = static_cast<uint64_t>(opts.num_labels);
  if (xmc && !text_pos.block) TETHER_RETURN_IF_ERROR(ApplyXmcHeader(path, opts, scan, &num_features, &num_labels));
  TETHER_RETURN_IF_ERROR(CheckScan(path, opts, scan, text_pos.block));
  TETHER_RETURN_IF_ERROR(CheckParseFits(path, content, scan.mine, budget));

  Dataset ds;
  const bool infer_features = !xmc && num_features == 0 && !opts.hashed_features;
  const bool infer_labels = !xmc && scan.multilabel && num_labels == 0;
  LineParser parser(path, opts, scan.multilabel, scan.multilabel_why, num_features, infer_features, num_labels,
                    infer_labels);
  ShareRows rows(path, opts, scan.multilabel, &parser, &ds);
  ds.source_lines.reserve(scan.mine.size());
  for (const LineRef& ln : scan.mine) rows.Add(content.data(), ln);
  TETHER_RETURN_IF_ERROR(rows.Finish());
  TETHER_RETURN_IF_ERROR(
      SetWidths(path, opts, scan.multilabel, infer_features, infer_labels, &rows, num_features, num_labels, &ds));
  TETHER_RETURN_IF_ERROR(ReportShare(path, opts, scan.multilabel, scan.data_rows, text_pos.block, ds));
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
  // A block is a stream's bounded share of lines (RowStream).
  return ParseText(path, text, opts, MemoryBudget{}, TextPos{first_line_no, true});
}

StatusOr<Dataset> ParseDataset(const std::string& bytes, const std::string& name,
                               const ReadOptions& opts) {
  if (opts.format == DataFormat::kArff) return ParseArffDataset(bytes, name, opts);
  TETHER_RETURN_IF_ERROR(CheckOptions(name, opts));
  const MemoryBudget budget = ResolveReadBudget(opts.memory_budget);
  std::string inflated;
  TETHER_ASSIGN_OR_RETURN(std::string_view text, DecodeInput(name, bytes, &inflated, budget));
  return ParseText(name, text, opts, budget);
}

StatusOr<Dataset> ReadDataset(const std::string& path, const ReadOptions& opts) {
  if (opts.format == DataFormat::kArff) return ReadArffDataset(path, opts);
  TETHER_RETURN_IF_ERROR(CheckOptions(path, opts));
  const MemoryBudget budget = ResolveReadBudget(opts.memory_budget);
  std::string raw;
  TETHER_RETURN_IF_ERROR(ReadFileBytes(path, &raw, budget));
  std::string inflated;
  TETHER_ASSIGN_OR_RETURN(std::string_view text, DecodeInput(path, raw, &inflated, budget));
  if (text.data() == inflated.data()) std::string().swap(raw);  // keep one copy in memory
  return ParseText(path, text, opts, budget);
}

StatusOr<std::array<uint64_t, 3>> ReadXmcHeader(const std::string& path) {
  // gzread reads plain files as they are, so one path serves both, and only
  // the first line is inflated however large the file.
  // The descriptor checked to be a regular file is the one inflated: a FIFO
  // is refused, not waited on, and cannot be swapped in after the check.
  TETHER_ASSIGN_OR_RETURN(FILE* checked, OpenDataFile(path));
  struct stat st {};
  const int fd = ::fstat(fileno(checked), &st) == 0 ? ::dup(fileno(checked)) : -1;
  std::fclose(checked);
  gzFile f = fd < 0 ? nullptr : gzdopen(fd, "rb");
  if (f == nullptr) {
    const Status failed = Status::IOError(path + ": cannot open: " + std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return failed;
  }
  std::string line;
  char buf[4096];
  while (gzgets(f, buf, sizeof(buf)) != nullptr) {
    line += buf;
    if (!line.empty() && line.back() == '\n') break;
    if (line.size() > (1u << 20)) break;  // no header is this long
  }
  // A line cut short by a damaged stream is no header: say what is wrong
  // with the file, as reading it whole would (file_input.h).
  int code = Z_OK;
  const char* why = gzerror(f, &code);
  const std::string zlib_message = why == nullptr ? "" : why;
  gzclose(f);
  if (code == Z_BUF_ERROR)
    return Status::DataLoss(path + ": truncated gzip stream (it ends after " + std::to_string(st.st_size) +
                            " bytes)");
  if (code != Z_OK) return Status::DataLoss(path + ": corrupt gzip stream: " + zlib_message);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  std::string_view text(line);
  if (text.size() >= 3 && text.compare(0, 3, "\xef\xbb\xbf") == 0) text.remove_prefix(3);
  uint64_t hdr[3] = {0, 0, 0};
  TETHER_RETURN_IF_ERROR(ParseXmcHeader(path, text, hdr));
  return std::array<uint64_t, 3>{hdr[0], hdr[1], hdr[2]};
}

Status RowSubsetPastEnd(const std::string& path, const ReadOptions& opts, int64_t data_rows) {
  return RowSubsetPastEnd(path, *opts.row_subset, opts.row_subset_file, opts.row_subset_lines, data_rows);
}

Status RowSubsetPastEnd(const std::string& path, const std::vector<int64_t>& rows, const std::string& subset_file,
                        const std::vector<int64_t>* subset_lines, int64_t data_rows) {
  // The first entry past the end: the split file's line that is wrong.
  const auto past = std::lower_bound(rows.begin(), rows.end(), data_rows);
  const auto i = static_cast<size_t>(past - rows.begin());
  if (!subset_file.empty() && subset_lines != nullptr && i < subset_lines->size())
    return Status::InvalidArgument(At(subset_file, (*subset_lines)[i]) + "row " +
                                   std::to_string(rows[i] + 1) + " is past the end of " + path + ", which has " +
                                   std::to_string(data_rows) + " data rows (split files are 1-based)");
  return Status::InvalidArgument(path + ": row_subset entry " + std::to_string(rows.back()) +
                                 " (0-based) is past the last of the file's " + std::to_string(data_rows) +
                                 " data rows");
}

StatusOr<std::vector<int64_t>> ReadSplitFile(const std::string& path, std::vector<int64_t>* lines,
                                             const MemoryBudget& budget) {
  const MemoryBudget bound = ResolveReadBudget(budget);
  std::string raw;
  TETHER_RETURN_IF_ERROR(ReadFileBytes(path, &raw, bound));
  std::string inflated;
  TETHER_ASSIGN_OR_RETURN(std::string_view content, DecodeInput(path, raw, &inflated, bound));
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
    // Editors on some systems save UTF-8 with a byte-order mark.
    if (tok.rfind("\xEF\xBB\xBF", 0) == 0)
      return Status::InvalidArgument(At(path, line_no) + (line_no == 1 ? "the file" : "the line") +
                                     " starts with a UTF-8 byte-order mark (bytes EF BB BF), which a split file "
                                     "may not hold: save it without one (UTF-8 without BOM)");
    uint64_t v = 0;
    const UintParse parsed = ParseUint(data + i, data + j, &v);
    constexpr auto kMaxIndex = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    const bool digits = std::all_of(tok.begin(), tok.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    if ((parsed == UintParse::kTooLarge && digits) || (parsed == UintParse::kOk && v > kMaxIndex))
      return Status::InvalidArgument(At(path, line_no) + "row index " + Quote(tok) + " is too large: at most " +
                                     std::to_string(kMaxIndex));
    if (parsed != UintParse::kOk) {
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
    if (lines != nullptr) lines->push_back(rows[i].second);
  }
  return out;
}

}  // namespace tether
