#include "input/row_stream.h"

#include <glog/logging.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <memory>
#include <iterator>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/data_files.h"
#include "input/file_input.h"
#include "input/read_budget.h"
#include "input/text_parse.h"

namespace tether {

namespace {

// floor(total * p / n) without overflow: the same cut as ReadOptions::partition.
uint64_t Cut(uint64_t total, int p, int n) {
  const uint64_t un = static_cast<uint64_t>(n), up = static_cast<uint64_t>(p);
  return total / un * up + total % un * up / un;
}

// The worker whose bytes [Cut(w), Cut(w+1)) hold global offset `pos`
// (the last worker for pos >= total).
int OwnerOf(uint64_t pos, uint64_t total, int n) {
  for (int w = 0; w < n; ++w)
    if (pos < Cut(total, w + 1, n)) return w;
  return n - 1;
}

// Hashed features (data.hashed_features): each parsed piece numbers its
// columns in its own dictionary (src.col_keys); appending re-keys both
// matrices into the sorted union of the two, which keeps every row sorted
// (the maps are increasing). O(nnz(dst) + keys) per append.
void AppendHashedCsr(const CsrMatrix& src, CsrMatrix* dst) {
  static const std::vector<uint64_t> kNone;
  const std::vector<uint64_t>& a = dst->col_keys != nullptr ? *dst->col_keys : kNone;
  const std::vector<uint64_t>& b = *src.col_keys;
  auto merged = std::make_shared<std::vector<uint64_t>>();
  merged->reserve(a.size() + b.size());
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(*merged));
  CHECK_LE(merged->size(), static_cast<size_t>(UINT32_MAX)) << "distinct hashed feature ids in one share";
  auto remap = [&merged](const std::vector<uint64_t>& keys) {
    std::vector<uint32_t> to(keys.size());
    size_t j = 0;
    for (size_t i = 0; i < keys.size(); ++i) {
      while ((*merged)[j] < keys[i]) ++j;
      to[i] = static_cast<uint32_t>(j);
    }
    return to;
  };
  if (!a.empty()) {
    const std::vector<uint32_t> map_a = remap(a);
    for (uint32_t& c : dst->col_idx) c = map_a[c];
  }
  const std::vector<uint32_t> map_b = remap(b);
  const int64_t base = dst->nnz();
  for (int64_t r = 1; r <= src.rows; ++r) dst->row_ptr.push_back(base + src.row_ptr[r]);
  dst->col_idx.reserve(dst->col_idx.size() + src.col_idx.size());
  for (uint32_t c : src.col_idx) dst->col_idx.push_back(map_b[c]);
  dst->values.insert(dst->values.end(), src.values.begin(), src.values.end());
  dst->rows += src.rows;
  dst->cols = static_cast<int64_t>(merged->size());
  dst->col_keys = std::move(merged);
}

// The refusal of a pass whose rows, all kept (ReadFileListShare), pass
// the budget while reading `path` after `pieces_before` other pieces.
Status PassTooLarge(const std::string& path, int pieces_before, const MemoryBudget& budget) {
  const std::string before =
      pieces_before == 0 ? ""
                         : " and the " + std::to_string(pieces_before) + " file piece" +
                               (pieces_before == 1 ? "" : "s") + " read before it";
  return DataFileTooLarge(path, "the rows read whole from it" + before + " come to more than", budget,
                          "stream the files (data.streaming: true; docs/DATA.md)");
}

void AppendCsr(const CsrMatrix& src, CsrMatrix* dst) {
  if (src.col_keys != nullptr) return AppendHashedCsr(src, dst);
  const int64_t base = dst->nnz();
  for (int64_t r = 1; r <= src.rows; ++r) dst->row_ptr.push_back(base + src.row_ptr[r]);
  dst->col_idx.insert(dst->col_idx.end(), src.col_idx.begin(), src.col_idx.end());
  dst->values.insert(dst->values.end(), src.values.begin(), src.values.end());
  dst->rows += src.rows;
}

}  // namespace

StatusOr<std::vector<DataFile>> StatDataFiles(const std::vector<std::string>& paths) {
  std::vector<DataFile> out;
  for (const std::string& path : paths) {
    TETHER_ASSIGN_OR_RETURN(FILE* f, OpenDataFile(path));
    std::unique_ptr<FILE, int (*)(FILE*)> closer(f, &std::fclose);
    struct stat st {};
    if (fstat(fileno(f), &st) != 0) return Status::IOError(path + ": cannot stat: " + std::strerror(errno));
    unsigned char magic[2] = {0, 0};
    const size_t n = std::fread(magic, 1, 2, f);
    out.push_back({path, static_cast<uint64_t>(st.st_size), n == 2 && magic[0] == 0x1f && magic[1] == 0x8b});
  }
  return out;
}

std::vector<FilePiece> AssignFilePieces(const std::vector<DataFile>& files, int rank, int num_workers) {
  CHECK(num_workers >= 1 && rank >= 0 && rank < num_workers) << "rank " << rank << " of " << num_workers;
  uint64_t total = 0;
  for (const DataFile& f : files) total += f.bytes;
  const uint64_t lo = Cut(total, rank, num_workers), hi = Cut(total, rank + 1, num_workers);
  std::vector<FilePiece> out;
  uint64_t offset = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const DataFile& f = files[i];
    const int file = static_cast<int>(i);
    if (f.bytes == 0 || f.gzip) {
      // Whole: to the owner of its middle byte (of its offset when empty).
      if (OwnerOf(offset + f.bytes / 2, total, num_workers) == rank) out.push_back({file, 0, f.bytes});
    } else {
      const uint64_t b = std::max(lo, offset), e = std::min(hi, offset + f.bytes);
      if (b < e) out.push_back({file, b - offset, e - offset});
    }
    offset += f.bytes;
  }
  return out;
}

// Decoded bytes of one file: plain (seekable) or gzip (from the start).
class RowStream::Source {
 public:
  ~Source() {
    if (plain_ != nullptr) std::fclose(plain_);
    if (gz_ != nullptr) gzclose(gz_);
  }
  static StatusOr<std::unique_ptr<Source>> Open(const DataFile& f, uint64_t offset) {
    auto s = std::make_unique<Source>();
    s->path_ = f.path;
    errno = 0;
    if (f.gzip) {
      CHECK_EQ(offset, 0u) << "a gzip file is read from its start";
      s->gz_ = gzopen(f.path.c_str(), "rb");
      if (s->gz_ == nullptr) return OpenError(f.path);
      gzbuffer(s->gz_, 1 << 18);
    } else {
      s->plain_ = std::fopen(f.path.c_str(), "rb");
      if (s->plain_ == nullptr) return OpenError(f.path);
      if (offset > 0 && fseeko(s->plain_, static_cast<off_t>(offset), SEEK_SET) != 0)
        return Status::IOError(f.path + ": cannot seek to byte " + std::to_string(offset) + ": " +
                               std::strerror(errno));
    }
    return s;
  }
  // Up to n bytes into dst; *got == 0 at the end.
  Status Read(char* dst, size_t n, size_t* got) {
    if (plain_ != nullptr) {
      *got = std::fread(dst, 1, n, plain_);
      if (*got == 0 && std::ferror(plain_)) return Status::IOError(path_ + ": read failed: " + std::strerror(errno));
      return Status::OK();
    }
    const int k = gzread(gz_, dst, static_cast<unsigned>(std::min<size_t>(n, size_t{1} << 30)));
    int err = Z_OK;
    const char* msg = gzerror(gz_, &err);
    if (k < 0 || (err != Z_OK && err != Z_STREAM_END)) {
      if (err == Z_BUF_ERROR) return Status::DataLoss(path_ + ": truncated gzip stream");
      if (err == Z_ERRNO) return Status::IOError(path_ + ": read failed: " + std::strerror(errno));
      return Status::DataLoss(path_ + ": corrupt gzip stream: " + (msg != nullptr ? msg : "?"));
    }
    *got = static_cast<size_t>(k);
    return Status::OK();
  }

 private:
  static Status OpenError(const std::string& path) {
    const int err = errno;
    if (err == ENOENT) return Status::NotFound(path + ": no such file");
    return Status::IOError(path + ": cannot open: " + std::strerror(err));
  }
  std::string path_;
  FILE* plain_ = nullptr;
  gzFile gz_ = nullptr;
};

RowStream::RowStream(std::vector<DataFile> files, std::vector<FilePiece> pieces, ReadOptions read_options,
                     RowStreamOptions options)
    : files_(std::move(files)), pieces_(std::move(pieces)), read_options_(std::move(read_options)),
      options_(options), start_offset_(pieces_.size(), 0), start_line_(pieces_.size(), -1),
      piece_rows_(pieces_.size(), 0) {
  CHECK_GE(options_.block_rows, 1);
  budget_ = ResolveReadBudget(read_options_.memory_budget);
  read_options_.memory_budget = budget_;
  options_.buffer_bytes = static_cast<size_t>(
      std::min<uint64_t>(ReadLimitBytes(budget_), std::max<size_t>(options_.buffer_bytes, 64)));
  read_options_.num_partitions = 1;
  read_options_.partition = 0;
  read_options_.row_subset = nullptr;
}

RowStream::~RowStream() = default;

Status RowStream::Start(std::vector<int> order) {
  if (order.empty()) {
    order.resize(pieces_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  }
  std::vector<bool> seen(pieces_.size(), false);
  for (int p : order) {
    if (p < 0 || static_cast<size_t>(p) >= pieces_.size() || seen[static_cast<size_t>(p)])
      return Status::InvalidArgument("RowStream::Start: the order must name each of the " +
                                     std::to_string(pieces_.size()) + " pieces once");
    seen[static_cast<size_t>(p)] = true;
  }
  if (order.size() != pieces_.size())
    return Status::InvalidArgument("RowStream::Start: the order names " + std::to_string(order.size()) + " of " +
                                   std::to_string(pieces_.size()) + " pieces");
  order_ = std::move(order);
  next_in_order_ = 0;
  current_ = -1;
  source_.reset();
  rows_read_ = 0;
  pass_bytes_ = 0;
  std::fill(piece_rows_.begin(), piece_rows_.end(), 0);
  return Status::OK();
}

Status RowStream::Fill() {
  if (head_ > 0) {  // keep the unread bytes, at the front
    std::memmove(buf_.data(), buf_.data() + head_, tail_ - head_);
    tail_ -= head_;
    head_ = 0;
  }
  if (buf_.size() < options_.buffer_bytes) buf_.resize(options_.buffer_bytes);
  if (tail_ == buf_.size()) {  // one line fills the buffer
    // Grown, but never past the budget: a gzip bomb of one endless line
    // would otherwise take all memory.
    const uint64_t limit = ReadLimitBytes(budget_);
    if (buf_.size() >= limit) {
      const std::string& path = files_[static_cast<size_t>(pieces_[static_cast<size_t>(current_)].file)].path;
      return DataFileTooLarge(path, "line " + std::to_string(line_no_) + " is longer than", budget_);
    }
    buf_.resize(static_cast<size_t>(std::min<uint64_t>(limit, uint64_t{buf_.size()} * 2)));
  }
  peak_buffer_bytes_ = std::max(peak_buffer_bytes_, buf_.size());
  size_t got = 0;
  TETHER_RETURN_IF_ERROR(source_->Read(buf_.data() + tail_, buf_.size() - tail_, &got));
  tail_ += got;
  if (got == 0) source_eof_ = true;
  return Status::OK();
}

Status RowStream::OpenPiece(int p) {
  const FilePiece& piece = pieces_[static_cast<size_t>(p)];
  const DataFile& f = files_[static_cast<size_t>(piece.file)];
  const bool xmc = read_options_.format == DataFormat::kXmc;
  current_ = p;
  head_ = tail_ = 0;
  source_eof_ = false;
  piece_data_rows_ = 0;
  whole_file_ = piece.begin == 0 && piece.end >= f.bytes;
  header_rows_ = 0;
  if (piece.begin == 0 && xmc) {
    // The reader of a file's first byte checks its header.
    TETHER_ASSIGN_OR_RETURN(auto hdr, ReadXmcHeader(f.path));
    header_rows_ = hdr[0];
    // Hashed features: the header's F is not a width, so only L must agree.
    if ((!read_options_.hashed_features && hdr[1] != static_cast<uint64_t>(read_options_.num_features)) ||
        hdr[2] != static_cast<uint64_t>(read_options_.num_labels))
      return Status::InvalidArgument(text::At(f.path, 1) + "header declares " + std::to_string(hdr[1]) +
                                     " features and " + std::to_string(hdr[2]) + " labels, but the job's widths are " +
                                     std::to_string(read_options_.num_features) + " and " +
                                     std::to_string(read_options_.num_labels) +
                                     " (data.num_features, data.num_labels, or the first file's header): every "
                                     "file of a list must agree");
  }
  if (start_line_[static_cast<size_t>(p)] >= 0) {  // a later pass: straight to the first row
    offset_ = start_offset_[static_cast<size_t>(p)];
    line_no_ = start_line_[static_cast<size_t>(p)];
    TETHER_ASSIGN_OR_RETURN(source_, Source::Open(f, offset_));
    return Status::OK();
  }
  TETHER_ASSIGN_OR_RETURN(source_, Source::Open(f, 0));
  offset_ = 0;
  line_no_ = 1;
  if (piece.begin == 0) {
    TETHER_RETURN_IF_ERROR(Fill());
    // Compressed or binary input is refused before any parsing (the magic
    // bytes only: NUL bytes are found line by line).
    const std::string_view head(buf_.data(), std::min<size_t>(tail_, 8));
    if (head.find('\0') == std::string_view::npos) TETHER_RETURN_IF_ERROR(text::CheckIsText(f.path, head));
  }
  // The first row is the first line starting at or after `begin` (after
  // the XMC header): skip to just past the first '\n' at or after begin - 1.
  uint64_t skip_to_nl_from = piece.begin == 0 ? (xmc ? 0 : UINT64_MAX) : piece.begin - 1;
  while (skip_to_nl_from != UINT64_MAX) {
    if (head_ == tail_) {
      if (source_eof_) break;
      TETHER_RETURN_IF_ERROR(Fill());
      continue;
    }
    const char* b = buf_.data() + head_;
    const size_t n = tail_ - head_;
    // Bytes before skip_to_nl_from are only counted for their newlines.
    const size_t lead = offset_ < skip_to_nl_from ? static_cast<size_t>(std::min<uint64_t>(n, skip_to_nl_from - offset_)) : 0;
    line_no_ += std::count(b, b + lead, '\n');
    const void* nl = std::memchr(b + lead, '\n', n - lead);
    if (nl == nullptr) {
      offset_ += n;
      head_ = tail_;
      continue;
    }
    const size_t used = static_cast<size_t>(static_cast<const char*>(nl) - b) + 1;
    offset_ += used;
    head_ += used;
    ++line_no_;
    break;
  }
  start_offset_[static_cast<size_t>(p)] = offset_;
  start_line_[static_cast<size_t>(p)] = line_no_;
  if (f.gzip && offset_ > 0) {
    // A gzip source cannot seek: later passes re-read the header line.
    start_line_[static_cast<size_t>(p)] = -1;
  }
  return Status::OK();
}

Status RowStream::ReadLines(int64_t max_lines, std::string_view* lines, int64_t* first_line, bool* done) {
  const FilePiece& piece = pieces_[static_cast<size_t>(current_)];
  const DataFile& f = files_[static_cast<size_t>(piece.file)];
  // Range pieces of plain files end at the first line starting at or past
  // `end`; whole files at their end.
  const uint64_t end = (f.gzip || piece.end >= f.bytes) ? UINT64_MAX : piece.end;
  *done = false;
  *lines = {};
  *first_line = line_no_;
  for (;;) {
    const char* b = buf_.data() + head_;
    const size_t n = tail_ - head_;
    size_t pos = 0;
    int64_t count = 0;
    while (count < max_lines && pos < n && offset_ + pos < end) {
      const void* nl = std::memchr(b + pos, '\n', n - pos);
      if (nl == nullptr) break;
      pos = static_cast<size_t>(static_cast<const char*>(nl) - b) + 1;
      ++count;
    }
    const bool past_end = offset_ + pos >= end;
    if (count > 0) {  // a partial last line waits for the next call
      *lines = std::string_view(b, pos);
      head_ += pos;
      offset_ += pos;
      line_no_ += count;
      *done = past_end || (source_eof_ && head_ == tail_);
      return Status::OK();
    }
    if (past_end) {  // the piece's next line starts at or after `end`
      *done = true;
      return Status::OK();
    }
    if (source_eof_) {
      if (n > 0) {  // a last line without '\n'
        *lines = std::string_view(b, n);
        head_ = tail_;
        offset_ += n;
        line_no_ += 1;
      }
      *done = true;
      return Status::OK();
    }
    TETHER_RETURN_IF_ERROR(Fill());
  }
}

Status RowStream::FinishPiece() {
  const FilePiece& piece = pieces_[static_cast<size_t>(current_)];
  const DataFile& f = files_[static_cast<size_t>(piece.file)];
  source_.reset();
  current_ = -1;
  if (read_options_.format == DataFormat::kXmc && whole_file_ && header_rows_ != static_cast<uint64_t>(piece_data_rows_)) {
    const std::string msg = text::At(f.path, 1) + "header declares " + std::to_string(header_rows_) +
                            " examples but the file has " + std::to_string(piece_data_rows_) + " data rows";
    if (read_options_.header_mismatch_is_error) return Status::InvalidArgument(msg);
    LOG(WARNING) << msg << "; continuing because header_mismatch_is_error is false";
  }
  if (whole_file_ && piece_data_rows_ == 0) return Status::InvalidArgument(f.path + ": no examples found");
  return Status::OK();
}

StatusOr<bool> RowStream::Next(Dataset* block) {
  *block = Dataset();
  const bool xmc = read_options_.format == DataFormat::kXmc;
  block->features.cols = read_options_.num_features;
  block->labels.cols = (xmc || read_options_.num_labels > 0) ? read_options_.num_labels : 0;
  bool any = false;
  while (block->rows_read < options_.block_rows) {
    if (current_ < 0) {
      if (next_in_order_ == order_.size()) break;
      TETHER_RETURN_IF_ERROR(OpenPiece(order_[next_in_order_++]));
    }
    const std::string& path = files_[static_cast<size_t>(pieces_[static_cast<size_t>(current_)].file)].path;
    std::string_view lines;
    int64_t first_line = 0;
    bool done = false;
    TETHER_RETURN_IF_ERROR(ReadLines(options_.block_rows - block->rows_read, &lines, &first_line, &done));
    pass_bytes_ += lines.size();
    if (options_.keeps_pass && pass_bytes_ > ReadLimitBytes(budget_))
      return PassTooLarge(path, static_cast<int>(next_in_order_) - 1, budget_);
    if (!lines.empty()) {
      if (const void* nul = std::memchr(lines.data(), '\0', lines.size())) {
        const size_t off = static_cast<size_t>(static_cast<const char*>(nul) - lines.data());
        return Status::InvalidArgument(text::At(path, first_line + std::count(lines.data(), lines.data() + off, '\n')) +
                                       "binary data (NUL byte): not a text data file");
      }
      TETHER_ASSIGN_OR_RETURN(Dataset d, ParseRowsBlock(lines, path, first_line, read_options_));
      AppendCsr(d.features, &block->features);
      AppendCsr(d.labels, &block->labels);
      block->targets.insert(block->targets.end(), d.targets.begin(), d.targets.end());
      block->source_lines.insert(block->source_lines.end(), d.source_lines.begin(), d.source_lines.end());
      block->rows_read += d.rows_read;
      block->unlabeled_rows += d.unlabeled_rows;
      block->dropped_rows += d.dropped_rows;
      block->qid_rows += d.qid_rows;
      rows_read_ += d.rows_read;
      piece_rows_[static_cast<size_t>(current_)] += d.rows_read;
      piece_data_rows_ += d.rows_read;
      any = true;
    }
    if (done) TETHER_RETURN_IF_ERROR(FinishPiece());
    if (between_chunks_) TETHER_RETURN_IF_ERROR(between_chunks_());
  }
  return any;
}

StatusOr<std::vector<DataFile>> OpenDataFileList(const std::string& spec, const std::string& field,
                                                 ReadOptions* opts) {
  if (opts->format == DataFormat::kArff)
    return Status::InvalidArgument("config field " + field + ": ARFF files cannot be listed or streamed");
  TETHER_ASSIGN_OR_RETURN(std::vector<std::string> paths, ExpandFileList(spec, field));
  TETHER_ASSIGN_OR_RETURN(std::vector<DataFile> files, StatDataFiles(paths));
  if (opts->format == DataFormat::kXmc && (opts->num_features == 0 || opts->num_labels == 0)) {
    TETHER_ASSIGN_OR_RETURN(auto hdr, ReadXmcHeader(paths.front()));
    if (opts->num_features == 0 && !opts->hashed_features) opts->num_features = static_cast<int64_t>(hdr[1]);
    if (opts->num_labels == 0) opts->num_labels = static_cast<int64_t>(hdr[2]);
  }
  return files;
}

StatusOr<uint64_t> EstimateBytesPerRow(const DataFile& file, bool xmc, size_t sample_bytes) {
  // zlib reads a plain file as it is, a gzip one decoded.
  errno = 0;
  gzFile gz = gzopen(file.path.c_str(), "rb");
  if (gz == nullptr) {
    if (errno == ENOENT) return Status::NotFound(file.path + ": no such file");
    return Status::IOError(file.path + ": cannot open: " + std::strerror(errno));
  }
  std::unique_ptr<gzFile_s, int (*)(gzFile)> closer(gz, &gzclose);
  std::string buf(std::min<size_t>(std::max<size_t>(sample_bytes, 1), size_t{1} << 30), '\0');
  size_t have = 0;
  while (have < buf.size()) {
    const int k = gzread(gz, buf.data() + have, static_cast<unsigned>(buf.size() - have));
    if (k < 0) {
      int err = Z_OK;
      const char* msg = gzerror(gz, &err);
      if (err == Z_ERRNO) return Status::IOError(file.path + ": read failed: " + std::strerror(errno));
      return Status::DataLoss(file.path + ": corrupt gzip stream: " + (msg != nullptr ? msg : "?"));
    }
    if (k == 0) break;
    have += static_cast<size_t>(k);
  }
  const std::string_view sample(buf.data(), have);
  size_t from = 0;
  if (xmc) {  // the header line is no row
    const size_t nl = sample.find('\n');
    from = nl == std::string_view::npos ? have : nl + 1;
  }
  const size_t last_nl = sample.rfind('\n');
  if (last_nl == std::string_view::npos || last_nl < from) return std::max<uint64_t>(1, have - from);
  const std::string_view rows = sample.substr(from, last_nl + 1 - from);
  const uint64_t lines = static_cast<uint64_t>(std::count(rows.begin(), rows.end(), '\n'));
  const uint64_t bytes = last_nl + 1 - from;
  return std::max<uint64_t>(1, (bytes + lines - 1) / lines);
}

StatusOr<std::unique_ptr<RowStream>> OpenFileListShare(const std::string& spec, const std::string& field,
                                                       ReadOptions opts, int partition, int num_partitions,
                                                       RowStreamOptions options) {
  if (num_partitions < 1 || partition < 0 || partition >= num_partitions)
    return Status::InvalidArgument(spec + ": partition " + std::to_string(partition) + " of " +
                                   std::to_string(num_partitions) + " is invalid");
  TETHER_ASSIGN_OR_RETURN(std::vector<DataFile> files, OpenDataFileList(spec, field, &opts));
  std::vector<FilePiece> pieces = AssignFilePieces(files, partition, num_partitions);
  return std::make_unique<RowStream>(std::move(files), std::move(pieces), std::move(opts), options);
}

StatusOr<Dataset> ReadFileListShare(const std::string& spec, const std::string& field, const ReadOptions& opts,
                                    int partition, int num_partitions) {
  RowStreamOptions keep_all;
  keep_all.keeps_pass = true;  // the share is held whole: bound it
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<RowStream> stream,
                          OpenFileListShare(spec, field, opts, partition, num_partitions, keep_all));
  TETHER_RETURN_IF_ERROR(stream->Start());
  Dataset all, block;
  all.features.cols = -1;
  for (;;) {
    TETHER_ASSIGN_OR_RETURN(bool more, stream->Next(&block));
    if (all.features.cols < 0) {
      all.features.cols = block.features.cols;
      all.labels.cols = block.labels.cols;
    }
    if (!more) break;
    AppendCsr(block.features, &all.features);
    AppendCsr(block.labels, &all.labels);
    all.targets.insert(all.targets.end(), block.targets.begin(), block.targets.end());
    all.source_lines.insert(all.source_lines.end(), block.source_lines.begin(), block.source_lines.end());
    all.rows_read += block.rows_read;
    all.unlabeled_rows += block.unlabeled_rows;
    all.dropped_rows += block.dropped_rows;
    all.qid_rows += block.qid_rows;
  }
  LOG(INFO) << spec << ": partition " << partition << "/" << num_partitions << " of " << stream->files().size()
            << " files (" << stream->pieces().size() << " pieces): read " << all.rows_read << " rows, kept "
            << all.features.rows << ", unlabeled " << all.unlabeled_rows << ", dropped " << all.dropped_rows;
  return all;
}

}  // namespace tether
