// IDX reader: loads MNIST-style IDX files (LeCun et al., Proc. IEEE 1998;
// format at http://yann.lecun.com/exdb/mnist/) into the same Dataset the
// XMC/LIBSVM readers produce, so that the trainer treats all formats alike.
//
// Format: a 4-byte magic 00 00 TT DD (TT = element type, DD = number of
// dimensions), DD big-endian uint32 sizes, then the elements in row-major
// order. Only unsigned bytes (TT = 0x08) are accepted: MNIST images are
// 0x00000803 (N × rows × cols) and labels 0x00000801 (N). The file may be
// gzip-compressed (recognised by its magic bytes 1f 8b, never by its name).
//
// Output: one example per item of the first dimension. Features are the
// remaining dimensions flattened row-major (784 columns for 28 × 28), stored
// as CSR with the zero pixels left out and the raw values 0..255 as floats
// (scale them with the job's data.feature_scale); targets are the labels as
// floats; labels is rows × 0 (single-label data, as for LIBSVM).
//
// Validation: a wrong magic, a type other than uint8, a dimension of size 0,
// a file shorter or longer than its header says, a truncated gzip stream,
// image and label files with different item counts, and a label >= the
// declared number of classes are all errors naming the file (and the item,
// 1-based, for a bad label).
//
// Ownership: the returned Dataset owns its memory; IdxReadOptions::row_subset
// is borrowed for the call. Thread-safety: no shared state; concurrent calls
// are safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "input/reader.h"

namespace tether {

/// One IDX array of uint8 elements.
struct IdxArray {
  std::vector<uint32_t> dims;  // sizes, outermost first (e.g. 10000, 28, 28)
  std::vector<uint8_t> data;   // product(dims) bytes, row-major
};

/// Reads a whole IDX file (plain or gzip) of uint8 elements. Errors:
/// those of input/file_input.h (NotFound, IOError, DataLoss for a corrupt or
/// truncated gzip stream or bytes after it, InvalidArgument for more than
/// 4 GiB inflated), shared with the text readers; InvalidArgument
/// "path: ..." for a bad magic,
/// another element type, zero dimensions or sizes, more than 2^32 elements,
/// or a size that disagrees with the header (naming both byte counts).
/// A file larger, plain or inflated, than `budget` (as
/// ReadOptions::memory_budget; bytes 0: the process's own) is refused first:
/// InvalidArgument "data file PATH: inflates to more than ..."
/// (input/read_budget.h).
[[nodiscard]] StatusOr<IdxArray> ReadIdxFile(const std::string& path, const MemoryBudget& budget = {});

/// Same on bytes in memory (the file's contents, plain or gzip); `name`
/// stands for the path in messages. Errors as ReadIdxFile, less NotFound/IOError.
[[nodiscard]] StatusOr<IdxArray> ParseIdx(const std::string& bytes, const std::string& name,
                                          const MemoryBudget& budget = {});

struct IdxReadOptions {
  /// This reader's share, as ReadOptions: without row_subset, partition p of
  /// n owns items [p·N/n, (p+1)·N/n); with it, entries [p·K/n, (p+1)·K/n) of
  /// its K entries.
  int partition = 0;
  int num_partitions = 1;
  /// Optional, borrowed: 0-based item indices to keep, strictly increasing,
  /// all < N (e.g. from ReadSplitFile).
  const std::vector<int64_t>* row_subset = nullptr;
  /// Optional, for messages, as ReadOptions: the split file row_subset came
  /// from and (borrowed, parallel to it) each entry's 1-based line there; an
  /// entry past the last item is then "SPLIT:LINE: row N is past the end of
  /// IMAGES, which has K data rows (split files are 1-based)".
  std::string row_subset_file;
  const std::vector<int64_t>* row_subset_lines = nullptr;
  /// When > 0, every label must be < num_classes (InvalidArgument otherwise).
  int64_t num_classes = 0;
  /// The memory the read may hold, as ReadOptions::memory_budget (bytes 0:
  /// the process's own).
  MemoryBudget memory_budget;
};

/// Reads this reader's share of the examples in `images_path` (uint8,
/// N × d1 × ... , at least 2 dimensions) and `labels_path` (uint8, N) into a
/// Dataset: features rows × (d1·d2·…) CSR without zeros, values 0..255;
/// targets = labels; labels = rows × 0; source_lines = 1-based item numbers.
/// Errors: those of ReadIdxFile for either file; InvalidArgument for bad
/// options (partition outside [0, num_partitions), unsorted row_subset, or
/// an index >= N as RowSubsetPastEnd words it: input/reader.h), different item counts in the two files, a 1-dimensional
/// image file, a label >= num_classes ("labels_path: item 17: label 11 >=
/// 10 classes"), or an empty result with a single partition.
[[nodiscard]] StatusOr<Dataset> ReadIdxDataset(const std::string& images_path, const std::string& labels_path,
                                               const IdxReadOptions& opts);

}  // namespace tether
