// Many data files, streamed: which worker reads which bytes of
// which file, and a reader that hands the rows over in blocks of bounded
// size, so a worker's memory does not grow with the dataset.
//
// Assignment (AssignFilePieces): the files are laid end to end, their sizes
// (on disk) summed to T, and worker w of W owns the bytes [w*T/W,
// (w+1)*T/W) of that concatenation. A plain file is cut at those points into
// byte ranges; a row belongs to the range holding its first byte (as in
// ReadOptions::partition), so every row is read by exactly one worker. A
// gzip file cannot be entered in the middle: it goes whole to the worker
// whose bytes hold its middle byte. Deterministic in (files, rank,
// num_workers); a worker may get nothing when there are more workers than
// pieces.
//
// RowStream reads a worker's pieces, one after another, through a buffer of
// RowStreamOptions::buffer_bytes (grown only for a longer line) and returns
// up to block_rows parsed rows per Next(); it holds one block and one buffer,
// whatever the files' sizes. XMC headers: the reader of a file's first byte
// checks its header against the widths in ReadOptions and, when it reads the
// whole file, the header's row count (ReadOptions::header_mismatch_is_error).
//
// Ownership: a RowStream owns its open file and buffers. Thread-safety: none
// (one stream per worker thread); the free functions are pure.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "input/reader.h"

namespace tether {

/// One data file as the assignment sees it.
struct DataFile {
  std::string path;
  uint64_t bytes = 0;  // size on disk (compressed size for gzip)
  bool gzip = false;   // starts with the gzip magic bytes 1f 8b
};

/// Sizes and gzip flags of `paths`, in order. Errors: NotFound "PATH: no
/// such file", IOError (a directory, unreadable).
[[nodiscard]] StatusOr<std::vector<DataFile>> StatDataFiles(const std::vector<std::string>& paths);

/// Part of one file: the rows whose first byte lies in [begin, end) of
/// file `file` (an index into the DataFile list). A gzip file's piece is
/// always [0, bytes).
struct FilePiece {
  int file = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
  bool operator==(const FilePiece& o) const { return file == o.file && begin == o.begin && end == o.end; }
};

/// Worker `rank`'s pieces of `files` among `num_workers` (see the top of
/// this file), in file order. Requires 0 <= rank < num_workers (CHECK).
/// An empty file goes whole to the worker owning its offset (the last
/// worker at the very end), so that its reader reports it.
std::vector<FilePiece> AssignFilePieces(const std::vector<DataFile>& files, int rank, int num_workers);

struct RowStreamOptions {
  /// Rows per block returned by Next(): the bound on parsed rows held. >= 1.
  int64_t block_rows = 65536;
  /// Bytes read from the file (after gunzip) at a time. A line longer than
  /// this grows the buffer to hold it, up to ReadOptions::memory_budget
  /// (input/read_budget.h): a longer line is refused, "data file PATH: line
  /// N is longer than ...". A budget below buffer_bytes lowers it.
  size_t buffer_bytes = size_t{4} << 20;
  /// The caller keeps every block of a pass (ReadFileListShare): the decoded
  /// bytes of the lines of one pass must then stay within the budget too,
  /// else Next() refuses naming the file it passed it in.
  bool keeps_pass = false;
};

/// Reads pieces of files, block by block. ReadOptions: format XMC or LIBSVM,
/// index_base, num_features (required) and num_labels (required for XMC and
/// multilabel LIBSVM), policies; partition/row_subset are not used.
class RowStream {
 public:
  RowStream(std::vector<DataFile> files, std::vector<FilePiece> pieces, ReadOptions read_options,
            RowStreamOptions options);
  ~RowStream();
  RowStream(const RowStream&) = delete;
  RowStream& operator=(const RowStream&) = delete;

  /// Starts a pass over the pieces in `order` (indices into the pieces,
  /// each once; empty: in the pieces' order), closing any file still open
  /// and zeroing the pass counters. Errors: InvalidArgument for a bad order.
  Status Start(std::vector<int> order = {});

  /// The next block of up to block_rows rows into *block (replaced; cols
  /// are the configured widths; source_lines are lines of the block's files,
  /// which the block may mix when a piece ends inside it). Returns false,
  /// with an empty block, when the pass is over. Errors: those of
  /// ReadDataset ("path:line: ..."; NotFound/IOError/DataLoss), a line or
  /// (keeps_pass) a pass past the memory budget (RowStreamOptions), and
  /// InvalidArgument for an XMC header that disagrees with the widths or
  /// (when this stream reads the whole file) with its row count.
  [[nodiscard]] StatusOr<bool> Next(Dataset* block);

  /// Called after every buffer of lines parsed inside Next() (every few MB),
  /// so a caller can keep its connections alive (a worker heartbeats its
  /// servers) while a block is read; an error it returns ends Next() with
  /// it. Empty (default): nothing is called.
  void set_between_chunks(std::function<Status()> fn) { between_chunks_ = std::move(fn); }

  /// This pass: rows parsed (kept, dropped and skipped), and per piece.
  int64_t rows_read() const { return rows_read_; }
  const std::vector<int64_t>& piece_rows_read() const { return piece_rows_; }
  const std::vector<FilePiece>& pieces() const { return pieces_; }
  const std::vector<DataFile>& files() const { return files_; }
  /// The largest read buffer held so far, in bytes (tests check the bound).
  size_t peak_buffer_bytes() const { return peak_buffer_bytes_; }

 private:
  class Source;
  Status OpenPiece(int piece);
  // Reads more bytes after [head_, tail_) (moving them to the front, growing
  // the buffer only when it is full of one line); sets source_eof_.
  Status Fill();
  // The next run of whole lines (at most `max_lines`) of the open piece, as
  // a view into buf_ valid until the next call; *first_line is the file
  // line of its first line; sets *done at the piece's end.
  Status ReadLines(int64_t max_lines, std::string_view* lines, int64_t* first_line, bool* done);
  Status FinishPiece();

  std::vector<DataFile> files_;
  std::vector<FilePiece> pieces_;
  ReadOptions read_options_;
  RowStreamOptions options_;
  std::vector<int> order_;
  size_t next_in_order_ = 0;
  int current_ = -1;  // piece index being read, -1: none
  std::unique_ptr<Source> source_;
  std::string buf_;     // bytes read, [head_, tail_) not yet consumed
  size_t head_ = 0, tail_ = 0;
  bool source_eof_ = false;
  uint64_t offset_ = 0;      // file offset (decoded) of buf_[head_]
  int64_t line_no_ = 0;      // 1-based file line of buf_[head_]
  int64_t piece_data_rows_ = 0;
  uint64_t header_rows_ = 0;
  bool whole_file_ = false;
  // Per piece, once its first pass found them: the decoded offset of its
  // first row and that row's file line (a later pass seeks straight there).
  std::vector<uint64_t> start_offset_;
  std::vector<int64_t> start_line_;  // -1: not known yet
  int64_t rows_read_ = 0;
  std::vector<int64_t> piece_rows_;
  size_t peak_buffer_bytes_ = 0;
  std::function<Status()> between_chunks_;
  MemoryBudget budget_;      // read_options_.memory_budget, resolved
  uint64_t pass_bytes_ = 0;  // decoded bytes of the lines handed out this pass
};

/// The files `spec` names (one file, or a list or globs: core/data_files.h;
/// `field` names it in messages, e.g. "data.train_file"), stat'ed in order;
/// XMC widths left at 0 in `*opts` are set from the first file's header.
/// Errors: those of ExpandFileList, StatDataFiles and ReadXmcHeader, and
/// InvalidArgument for ARFF.
[[nodiscard]] StatusOr<std::vector<DataFile>> OpenDataFileList(const std::string& spec, const std::string& field,
                                                               ReadOptions* opts);

/// The mean bytes per data row of `file` over its first `sample_bytes`
/// bytes (decoded for gzip), rounded up: the complete lines read, less an
/// XMC header line when `xmc`; at least 1. A sample without a complete data
/// line gives the bytes read (at least 1). Errors: IOError/NotFound naming
/// the file, DataLoss for a corrupt gzip stream.
[[nodiscard]] StatusOr<uint64_t> EstimateBytesPerRow(const DataFile& file, bool xmc, size_t sample_bytes = 65536);

/// A RowStream over partition `partition` of `num_partitions` (a worker's
/// share, AssignFilePieces) of the files `spec` names (one file, or a list
/// or globs: core/data_files.h; `field` names it in messages, e.g.
/// "data.train_file"). XMC widths left at 0 in `opts` are taken from the
/// first file's header (every file's header is then checked against them).
/// The stream is not started. Errors: those of ExpandFileList,
/// StatDataFiles and ReadXmcHeader.
[[nodiscard]] StatusOr<std::unique_ptr<RowStream>> OpenFileListShare(const std::string& spec, const std::string& field,
                                                                     ReadOptions opts, int partition,
                                                                     int num_partitions, RowStreamOptions options = {});

/// OpenFileListShare's share read whole into memory (the blocks
/// concatenated, in file order): the in-memory mode for several files.
/// Dataset::source_lines are lines of their own files. The decoded bytes of
/// the share are bounded by opts.memory_budget (RowStreamOptions::keeps_pass).
/// Errors: those of OpenFileListShare and RowStream::Next.
[[nodiscard]] StatusOr<Dataset> ReadFileListShare(const std::string& spec, const std::string& field,
                                                  const ReadOptions& opts, int partition, int num_partitions);

}  // namespace tether
