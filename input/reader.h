// Data readers: load XMC and LIBSVM text files (plain or gzip) into CSR
// feature and label matrices, the way training and evaluation see them.
//
// Formats (one example per line; whitespace is any run of spaces, tabs, CR,
// VT or FF, so CRLF files and stray or trailing whitespace read exactly like
// their clean twins; lines holding only whitespace are not examples):
//   XMC     line 1 is the header "N F L" (examples, features, labels); each
//           further line is "l1,l2,... f:v f:v ...". The label list may be
//           empty: the line then starts with whitespace, or directly with a
//           f:v token (a token containing ':' is never a label list).
//   LIBSVM  "label [qid:N] f:v f:v ... [# comment]". Everything from '#' to
//           the end of the line is a comment, with or without a space before
//           it. "qid:N" (learning-to-rank files) is checked and ignored, with
//           one warning giving the number of lines that had it. The label is either one number
//           (binary ±1, multiclass, regression: Dataset::targets) or a comma
//           list of label ids (multilabel: Dataset::labels). A file is read as
//           multilabel when ReadOptions::num_labels > 0 or when any line's
//           label field holds a comma; multilabel lines may omit the label.
// Gzip input is recognised by its magic bytes (1f 8b), never by its name, and
// decompressed with zlib. Input holding NUL bytes, or compressed with another
// tool (bzip2, xz, zstd), is rejected, never parsed as text.
//
// Nothing is guessed: the index base is required, the XMC width comes from
// the header, and every data error is an InvalidArgument whose message starts
// with "path:line: " (1-based lines, the XMC header is line 1) and quotes the
// offending token.
//
// Ownership: ReadDataset returns a Dataset that owns all its memory; the
// ReadOptions::row_subset vector is borrowed for the duration of the call.
// Thread-safety: the functions keep no shared state; concurrent calls (e.g.
// one per worker thread, each reading its own partition) are safe.
#pragma once

#include <array>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/memory_fit.h"
#include "core/status.h"
#include "input/csr.h"

namespace tether {

/// kArff: MULAN's ARFF (sparse or dense rows; labels named by its label XML
/// or taken as the last num_labels attributes), see input/arff_reader.h.
enum class DataFormat { kXmc, kLibsvm, kArff };

/// What to do when one row names the same feature index twice.
enum class DuplicatePolicy {
  kError,     // default: reject the file ("path:line: duplicate feature index i")
  kSum,       // add the values (an overflow to ±inf is then a non-finite value)
  kKeepLast,  // keep the value written last on the line
};
// Repeated label ids in one label list follow the same policy, except that
// kSum and kKeepLast both just keep the label once (label values are 1.0).

/// What to do with NaN, ±inf, and numbers that overflow float. Either way
/// the rest of such a row must be well-formed (a syntax or range error on it
/// is an error under both policies), and its indices count towards widths
/// inferred from the data.
enum class NonFinitePolicy {
  kError,    // default: reject, listing the first 5 bad lines and the total
  kDropRow,  // drop the whole row, count it in Dataset::dropped_rows, LOG(WARNING)
};

struct ReadOptions {
  DataFormat format = DataFormat::kXmc;

  /// 0 or 1. Required: the default -1 makes ReadDataset return
  /// InvalidArgument, because guessing the base silently shifts columns.
  /// Applies to feature indices and to XMC label ids alike; LIBSVM multilabel
  /// label ids are column numbers used as written (0-based). Index i under
  /// base b lands in column i - b.
  int index_base = -1;

  /// Feature dimension (CSR cols). 0 (default): XMC takes it from the header;
  /// LIBSVM takes max index seen - base + 1 with a LOG(WARNING) (two files read
  /// that way can differ in width), and then requires a whole-file read:
  /// with num_partitions > 1 or a row_subset it is InvalidArgument, since each
  /// share would infer a different width. Non-zero: every index must fit; for
  /// XMC it must equal the header's F (InvalidArgument otherwise).
  int64_t num_features = 0;

  /// Label dimension. 0 (default): XMC header's L; LIBSVM multilabel: max id
  /// seen + 1 (same whole-file rule as num_features). Non-zero: for XMC it
  /// must equal the header's L; for LIBSVM it also selects multilabel mode.
  int64_t num_labels = 0;

  /// This reader's share of the rows: partition in [0, num_partitions).
  /// Without row_subset, byte-range partitioning: partition p of n owns the
  /// rows whose first byte lies in [p*size/n, (p+1)*size/n) of the
  /// (decompressed) content, so the shares of all n partitions hold every row
  /// exactly once for any n. The XMC header belongs to no share; every reader
  /// reads it. Lines outside the share are only scanned for newlines.
  int partition = 0;
  int num_partitions = 1;

  /// Optional, borrowed: 0-based data-row indices to keep (strictly
  /// increasing, all < the number of data rows), e.g. from ReadSplitFile.
  /// Data rows are counted after the XMC header, skipping whitespace-only
  /// lines. Partitioning then splits this list: partition p gets entries
  /// [p*K/n, (p+1)*K/n) of its K entries.
  const std::vector<int64_t>* row_subset = nullptr;
  /// Optional, for messages: where row_subset came from (a split file) and,
  /// borrowed and parallel to *row_subset, the 1-based line of each entry
  /// there (ReadSplitFile's `lines`). An entry past the data's last row is
  /// then reported as "SPLIT:LINE: row N is past the end of ...".
  std::string row_subset_file;
  const std::vector<int64_t>* row_subset_lines = nullptr;

  DuplicatePolicy duplicates = DuplicatePolicy::kError;
  NonFinitePolicy non_finite = NonFinitePolicy::kError;

  /// XMC: the header's example count disagrees with the data rows found.
  /// true (default): InvalidArgument naming path:1; false: LOG(WARNING).
  bool header_mismatch_is_error = true;

  /// Rows with zero labels (XMC, LIBSVM multilabel): false (default) keeps
  /// them as all-negative rows, true leaves them out. Either way they are
  /// counted in Dataset::unlabeled_rows and logged.
  bool skip_unlabeled = false;

  /// Hashed 64-bit feature ids (XMC and LIBSVM; ARFF refuses it): every
  /// feature id is any integer up to 2^64 - 1, parsed exactly with
  /// std::from_chars into uint64_t (never through a double); a larger one
  /// is InvalidArgument "path:line: feature id too large in token '...'".
  /// num_features must be 0 and the XMC header's F is not used. The result's
  /// features carry the ids in CsrMatrix::col_keys (input/csr.h): cols is
  /// the number of distinct ids in this share, at most 2^32 - 1.
  bool hashed_features = false;

  /// ARFF only: MULAN's label XML file (plain or gzip), whose <label name=..>
  /// elements name the label attributes. Empty: the last num_labels
  /// attributes are the labels (num_labels is then required).
  std::string label_xml;

  /// The memory a read may hold (input/read_budget.h): a file whose decoded
  /// bytes pass it is refused with InvalidArgument "data file PATH: inflates
  /// to more than ..." before they are all inflated; a streaming reader
  /// (RowStream, ARFF) refuses a line longer than it. bytes 0 (default): the
  /// process's own budget, MemAvailable or the cgroup limit at the call; a
  /// worker passes MemoryBudgetFor(config) (--memory_limit when given).
  MemoryBudget memory_budget;
};

struct Dataset {
  CsrMatrix features;  // rows × num_features, values as written
  CsrMatrix labels;    // rows × num_labels, values 1.0; rows × 0 for LIBSVM
                       // single-label files
  std::vector<float> targets;  // LIBSVM single label per row; empty otherwise

  // Counts for this reader's share, also written with LOG(INFO):
  int64_t rows_read = 0;       // rows parsed (kept + dropped + skipped unlabeled)
  int64_t unlabeled_rows = 0;  // rows with no labels, kept or skipped
  int64_t dropped_rows = 0;    // rows dropped for non-finite values (kDropRow)
  int64_t qid_rows = 0;        // LIBSVM rows with a "qid:N" field (ignored; one
                               // LOG(WARNING) gives the count)

  std::vector<int64_t> source_lines;  // 1-based file line of each kept row

  // ARFF only: the attribute names of the feature and label columns, in
  // column order (features.cols and labels.cols entries); empty otherwise.
  std::vector<std::string> feature_names;
  std::vector<std::string> label_names;
};

/// With ReadOptions::format kArff, ReadDataset and ParseDataset are
/// ReadArffDataset and ParseArffDataset (input/arff_reader.h), whose rules
/// for index_base and partitioning differ; the rest of this comment is about
/// XMC and LIBSVM.
/// Reads this reader's share (see ReadOptions) of the XMC or LIBSVM file at
/// `path`, plain or gzip, into a Dataset with features.rows == labels.rows ==
/// source_lines.size() (== targets.size() for LIBSVM single-label files).
/// Errors:
///   InvalidArgument  bad options (index_base unset, bad partition, unsorted
///                    row_subset or one past the last row), or bad data:
///                    "path:line: ..." naming the token; when several lines
///                    are malformed, the first in full, the next four and
///                    the count; non-finite values list up to 5 lines and
///                    the total; the XMC header count
///                    mismatch names path:1 with both counts; a file with no
///                    examples gives "path: no examples found".
///   NotFound         `path` does not exist.
///   IOError          it cannot be opened or read.
///   DataLoss         corrupt or truncated gzip stream.
///   InvalidArgument  also a file larger, plain or inflated, than
///                    opts.memory_budget ("data file PATH: inflates to more
///                    than ...", input/read_budget.h), or whose share's text
///                    and the least its rows parse into (48 bytes a row, 8
///                    a value or label) pass it, checked before parsing.
/// A share that ends up with zero rows is fine when num_partitions > 1 (it is
/// logged); with a single partition zero kept rows is an InvalidArgument.
[[nodiscard]] StatusOr<Dataset> ReadDataset(const std::string& path, const ReadOptions& opts);

/// ReadDataset on bytes already in memory: the file's contents, plain text
/// or gzip (recognised by its magic bytes and inflated here). `name` stands
/// for the path in every message ("name:line: ..."). Same options, results
/// and errors as ReadDataset, less NotFound/IOError. ReadDataset is this
/// function after reading the file, so the two never disagree; the fuzz
/// target tests/fuzz/reader_fuzz.cc drives it with arbitrary bytes.
[[nodiscard]] StatusOr<Dataset> ParseDataset(const std::string& bytes, const std::string& name,
                                             const ReadOptions& opts);

/// Parses a block of whole data lines of an XMC or LIBSVM file, the way a
/// streaming reader sees them (input/row_stream.h): `text` is decoded text
/// (no gzip) holding complete lines only, whose first line is line
/// `first_line_no` (1-based) of the file `path`; it holds no XMC header.
/// Widths come from opts.num_features (required) and, for XMC and
/// multilabel LIBSVM, opts.num_labels (required), never from the data, so
/// every block of a file agrees. opts.partition/num_partitions must be 0/1
/// and row_subset null. Unlike ParseDataset a block may hold no rows, and
/// the file-level checks (binary content, the header's count) are the
/// caller's. Messages and Dataset::source_lines use file lines.
/// Errors: InvalidArgument for bad options or data ("path:line: ...", as
/// ReadDataset).
[[nodiscard]] StatusOr<Dataset> ParseRowsBlock(std::string_view text, const std::string& path,
                                               int64_t first_line_no, const ReadOptions& opts);

/// Reads a split file: one 1-based row index per line (whitespace and CRLF
/// tolerated, blank lines ignored; plain or gzip) and returns the indices
/// 0-based, sorted ascending. Errors (InvalidArgument, "path:line: ..."):
/// a token that is not a positive integer, one past int64 ("is too large"),
/// a UTF-8 byte-order mark ("the file starts with a UTF-8 byte-order mark
/// (bytes EF BB BF)"), more than one token on a line, a repeated index, or
/// a file with no indices; NotFound/IOError/DataLoss as
/// for ReadDataset. Indices past the data file's end are caught by
/// ReadDataset, which knows the row count.
/// `lines`, when given, receives the 1-based line of each returned index,
/// for ReadOptions::row_subset_lines. A file larger than `budget` (as
/// ReadOptions::memory_budget; bytes 0: the process's own) is refused as
/// ReadDataset refuses one.
[[nodiscard]] StatusOr<std::vector<int64_t>> ReadSplitFile(const std::string& path,
                                                           std::vector<int64_t>* lines = nullptr,
                                                           const MemoryBudget& budget = {});

/// The error for a row subset whose last entry lies past the `data_rows`
/// rows of the data file at `path`: "SPLIT:LINE: row N is past the end of
/// PATH, which has R data rows (split files are 1-based)" when
/// opts.row_subset_file names the split file, else naming the 0-based entry.
Status RowSubsetPastEnd(const std::string& path, const ReadOptions& opts, int64_t data_rows);
/// The same for any reader's row subset (`rows`: sorted 0-based indices;
/// `subset_file` and `subset_lines` as ReadOptions::row_subset_file and
/// row_subset_lines, lines optional).
Status RowSubsetPastEnd(const std::string& path, const std::vector<int64_t>& rows, const std::string& subset_file,
                        const std::vector<int64_t>* subset_lines, int64_t data_rows);

/// The header "N F L" of the XMC file at `path` (plain or gzip), reading
/// only its first line. Errors: NotFound, IOError, and InvalidArgument
/// "path:1: malformed XMC header ..." as ReadDataset.
[[nodiscard]] StatusOr<std::array<uint64_t, 3>> ReadXmcHeader(const std::string& path);

/// The error for an XMC file at `path` whose header `header_line` ("N 0 L",
/// N > 0) declares no features: InvalidArgument "path:1: the XMC header
/// '...' declares 0 features, ..." with the fix.
Status XmcZeroFeatures(const std::string& path, std::string_view header_line);

}  // namespace tether
