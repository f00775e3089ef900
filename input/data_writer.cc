#include "input/data_writer.h"

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
#include <string>

#include "core/output_target.h"
#include "core/process_limits.h"

namespace tether {
namespace {

bool EndsWith(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// Buffered output to a temporary file beside the target, renamed onto it by
// Commit; destroyed uncommitted, it removes the temporary file.
class AtomicFile {
 public:
  static StatusOr<std::unique_ptr<AtomicFile>> Open(const std::string& named) {
    // A link's target is replaced, never the link; a device or folder is refused.
    TETHER_ASSIGN_OR_RETURN(const OutputTarget target, ResolveOutputTarget(named, "output", StreamOutput::kRefuse));
    const std::string& path = target.path;
    std::unique_ptr<AtomicFile> f(new AtomicFile(path));
    f->tmp_ = path + ".tmp-" + std::to_string(::getpid());
    f->gzip_ = EndsWith(path, ".gz");
    if (f->gzip_) {
      f->gz_ = gzopen(f->tmp_.c_str(), "wb9");
      if (f->gz_ == nullptr) return Status::IOError(path + ": cannot write: " + std::strerror(errno) + (errno == EFBIG ? FileSizeLimitNote() : std::string()));
    } else {
      f->file_ = std::fopen(f->tmp_.c_str(), "wb");
      if (f->file_ == nullptr) return Status::IOError(path + ": cannot write: " + std::strerror(errno) + (errno == EFBIG ? FileSizeLimitNote() : std::string()));
    }
    return f;
  }
  ~AtomicFile() {
    if (gz_ != nullptr) gzclose(gz_);
    if (file_ != nullptr) std::fclose(file_);
    if (!committed_) std::remove(tmp_.c_str());
  }
  std::string& buf() { return buf_; }
  // Writes out the buffer when it is large.
  Status MaybeFlush() { return buf_.size() >= (size_t{1} << 20) ? Flush() : Status::OK(); }
  Status Commit() {
    TETHER_RETURN_IF_ERROR(Flush());
    const int rc = gzip_ ? gzclose(gz_) : std::fclose(file_);
    gz_ = nullptr;
    file_ = nullptr;
    if (rc != 0) return Status::IOError(path_ + ": cannot write: " + std::strerror(errno) + (errno == EFBIG ? FileSizeLimitNote() : std::string()));
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
      return Status::IOError(path_ + ": cannot rename " + tmp_ + " onto it: " + std::strerror(errno));
    committed_ = true;
    return Status::OK();
  }

 private:
  explicit AtomicFile(std::string path) : path_(std::move(path)) {}
  Status Flush() {
    if (buf_.empty()) return Status::OK();
    const bool ok = gzip_ ? gzwrite(gz_, buf_.data(), static_cast<unsigned>(buf_.size())) == static_cast<int>(buf_.size())
                          : std::fwrite(buf_.data(), 1, buf_.size(), file_) == buf_.size();
    if (!ok) return Status::IOError(path_ + ": cannot write: " + std::strerror(errno) + (errno == EFBIG ? FileSizeLimitNote() : std::string()));
    buf_.clear();
    return Status::OK();
  }
  std::string path_, tmp_;
  bool gzip_ = false;
  gzFile gz_ = nullptr;
  FILE* file_ = nullptr;
  std::string buf_;
  bool committed_ = false;
};

void AppendInt(std::string* out, uint64_t v) {
  char b[24];
  const auto r = std::to_chars(b, b + sizeof b, v);
  out->append(b, r.ptr);
}

// Shortest decimal that reads back (through double, as the readers do) to
// the same float.
void AppendFloat(std::string* out, float v) {
  char b[32];
  const auto r = std::to_chars(b, b + sizeof b, v);
  out->append(b, r.ptr);
}

// Hashed features (col_keys): each column is written as its 64-bit id,
// which the reader gave as id + index base.
void AppendFeatures(std::string* out, const CsrMatrix& f, int64_t row, uint64_t base, bool space_first) {
  for (int64_t k = f.row_ptr[row]; k < f.row_ptr[row + 1]; ++k) {
    if (space_first || k > f.row_ptr[row]) *out += ' ';
    AppendInt(out, (f.col_keys ? (*f.col_keys)[f.col_idx[k]] : uint64_t{f.col_idx[k]}) + base);
    *out += ':';
    AppendFloat(out, f.values[k]);
  }
}

void AppendLabels(std::string* out, const CsrMatrix& l, int64_t row, uint64_t base) {
  for (int64_t k = l.row_ptr[row]; k < l.row_ptr[row + 1]; ++k) {
    if (k > l.row_ptr[row]) *out += ',';
    AppendInt(out, l.col_idx[k] + base);
  }
}

Status NeedLabels(const Dataset& ds, const std::string& path, const char* format) {
  if (!ds.targets.empty())
    return Status::InvalidArgument(path + ": the input is single-label (one number per row); " + format +
                                   " holds label sets: convert it to LIBSVM, or give multi-label input");
  return Status::OK();
}

// A row with neither labels nor features would be a blank line, which the
// XMC and LIBSVM readers skip: refused rather than silently lost.
Status CheckNoEmptyRows(const Dataset& ds, const std::string& path, const char* format) {
  if (!ds.targets.empty()) return Status::OK();
  for (int64_t r = 0; r < ds.features.rows; ++r)
    if (ds.features.row_ptr[r + 1] == ds.features.row_ptr[r] && ds.labels.row_ptr[r + 1] == ds.labels.row_ptr[r])
      return Status::InvalidArgument(path + ": input row " + std::to_string(r + 1) +
                                     (r < static_cast<int64_t>(ds.source_lines.size())
                                          ? " (line " + std::to_string(ds.source_lines[static_cast<size_t>(r)]) + ")"
                                          : std::string()) +
                                     " has neither labels nor features, which " + format +
                                     " cannot hold (it would be a blank line); ARFF can ({})");
  return Status::OK();
}

Status CheckBase(int base) {
  if (base != 0 && base != 1) return Status::InvalidArgument("index base must be 0 or 1, got " + std::to_string(base));
  return Status::OK();
}

// ARFF names: quoted when they hold anything the header syntax would split on.
std::string ArffName(const std::string& name) {
  bool plain = !name.empty() && name.find_first_of(" \t,{}%'\"\\") == std::string::npos;
  if (plain) return name;
  std::string out = "'";
  for (char c : name) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

Status WriteXmc(const Dataset& ds, const std::string& path, int index_base) {
  TETHER_RETURN_IF_ERROR(CheckBase(index_base));
  TETHER_RETURN_IF_ERROR(NeedLabels(ds, path, "XMC"));
  TETHER_RETURN_IF_ERROR(CheckNoEmptyRows(ds, path, "XMC"));
  TETHER_ASSIGN_OR_RETURN(auto out, AtomicFile::Open(path));
  std::string& b = out->buf();
  b += std::to_string(ds.features.rows) + " " + std::to_string(ds.features.cols) + " " +
       std::to_string(ds.labels.cols) + "\n";
  const uint64_t base = static_cast<uint64_t>(index_base);
  for (int64_t r = 0; r < ds.features.rows; ++r) {
    AppendLabels(&b, ds.labels, r, base);
    // A row without labels starts with a space (the XMC reader's rule).
    AppendFeatures(&b, ds.features, r, base, true);
    b += '\n';
    TETHER_RETURN_IF_ERROR(out->MaybeFlush());
  }
  return out->Commit();
}

Status WriteLibsvm(const Dataset& ds, const std::string& path, int index_base) {
  TETHER_RETURN_IF_ERROR(CheckBase(index_base));
  TETHER_RETURN_IF_ERROR(CheckNoEmptyRows(ds, path, "LIBSVM"));
  TETHER_ASSIGN_OR_RETURN(auto out, AtomicFile::Open(path));
  std::string& b = out->buf();
  const uint64_t base = static_cast<uint64_t>(index_base);
  const bool single = !ds.targets.empty();
  for (int64_t r = 0; r < ds.features.rows; ++r) {
    bool any;
    if (single) {
      AppendFloat(&b, ds.targets[static_cast<size_t>(r)]);
      any = true;
    } else {
      AppendLabels(&b, ds.labels, r, 0);
      any = ds.labels.row_ptr[r + 1] > ds.labels.row_ptr[r];
    }
    AppendFeatures(&b, ds.features, r, base, any);
    b += '\n';
    TETHER_RETURN_IF_ERROR(out->MaybeFlush());
  }
  return out->Commit();
}

Status WriteArff(const Dataset& ds, const std::string& path, const std::string& xml_path, const std::string& relation) {
  if (ds.features.col_keys)
    return Status::InvalidArgument(path + ": the input has hashed 64-bit feature ids, which ARFF (one attribute "
                                   "per feature) cannot hold: convert it to XMC or LIBSVM");
  TETHER_RETURN_IF_ERROR(NeedLabels(ds, path, "ARFF (MULAN, multi-label)"));
  if (xml_path.empty()) return Status::InvalidArgument(path + ": ARFF output needs a path for its label XML");
  const auto fname = [&ds](int64_t j) {
    return static_cast<size_t>(j) < ds.feature_names.size() && ds.feature_names.size() == static_cast<size_t>(ds.features.cols)
               ? ds.feature_names[static_cast<size_t>(j)]
               : "f" + std::to_string(j);
  };
  const auto lname = [&ds](int64_t j) {
    return ds.label_names.size() == static_cast<size_t>(ds.labels.cols) ? ds.label_names[static_cast<size_t>(j)]
                                                                         : "label" + std::to_string(j);
  };
  TETHER_ASSIGN_OR_RETURN(auto xml, AtomicFile::Open(xml_path));
  xml->buf() += "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<labels xmlns=\"http://mulan.sourceforge.net/labels\">\n";
  for (int64_t j = 0; j < ds.labels.cols; ++j) xml->buf() += "<label name=\"" + XmlEscape(lname(j)) + "\"></label>\n";
  xml->buf() += "</labels>\n";

  TETHER_ASSIGN_OR_RETURN(auto out, AtomicFile::Open(path));
  std::string& b = out->buf();
  b += "@relation " + ArffName(relation.empty() ? "tether" : relation) + "\n\n";
  for (int64_t j = 0; j < ds.features.cols; ++j) {
    b += "@attribute " + ArffName(fname(j)) + " numeric\n";
    TETHER_RETURN_IF_ERROR(out->MaybeFlush());
  }
  for (int64_t j = 0; j < ds.labels.cols; ++j) b += "@attribute " + ArffName(lname(j)) + " {0,1}\n";
  b += "\n@data\n";
  const uint64_t label_offset = static_cast<uint64_t>(ds.features.cols);
  for (int64_t r = 0; r < ds.features.rows; ++r) {
    b += '{';
    bool first = true;
    for (int64_t k = ds.features.row_ptr[r]; k < ds.features.row_ptr[r + 1]; ++k) {
      if (ds.features.values[k] == 0) continue;  // ARFF's omitted value is 0
      if (!first) b += ',';
      first = false;
      AppendInt(&b, ds.features.col_idx[k]);
      b += ' ';
      AppendFloat(&b, ds.features.values[k]);
    }
    for (int64_t k = ds.labels.row_ptr[r]; k < ds.labels.row_ptr[r + 1]; ++k) {
      if (!first) b += ',';
      first = false;
      AppendInt(&b, ds.labels.col_idx[k] + label_offset);
      b += " 1";
    }
    b += "}\n";
    TETHER_RETURN_IF_ERROR(out->MaybeFlush());
  }
  // The data last: a reader that finds the ARFF file finds its XML too.
  TETHER_RETURN_IF_ERROR(xml->Commit());
  return out->Commit();
}

DatasetStats ComputeStats(const Dataset& ds) {
  DatasetStats s;
  s.rows = ds.features.rows;
  s.features = ds.features.cols;
  s.labels = ds.labels.cols;
  s.nnz = ds.features.nnz();
  s.label_nnz = ds.labels.nnz();
  if (s.rows > 0) {
    s.nnz_min = std::numeric_limits<int64_t>::max();
    s.labels_min = std::numeric_limits<int64_t>::max();
    for (int64_t r = 0; r < s.rows; ++r) {
      const int64_t n = ds.features.row_ptr[r + 1] - ds.features.row_ptr[r];
      s.nnz_min = std::min(s.nnz_min, n);
      s.nnz_max = std::max(s.nnz_max, n);
      const int64_t l = ds.labels.rows == s.rows ? ds.labels.row_ptr[r + 1] - ds.labels.row_ptr[r] : 0;
      s.labels_min = std::min(s.labels_min, l);
      s.labels_max = std::max(s.labels_max, l);
    }
    s.nnz_mean = static_cast<double>(s.nnz) / static_cast<double>(s.rows);
    s.labels_mean = static_cast<double>(s.label_nnz) / static_cast<double>(s.rows);
  }
  std::vector<char> used(static_cast<size_t>(s.features), 0);
  for (uint32_t c : ds.features.col_idx) used[c] = 1;
  s.unused_features = static_cast<int64_t>(std::count(used.begin(), used.end(), 0));
  std::vector<int64_t> freq(static_cast<size_t>(s.labels), 0);
  for (uint32_t c : ds.labels.col_idx) ++freq[c];
  s.unused_labels = static_cast<int64_t>(std::count(freq.begin(), freq.end(), 0));
  std::sort(freq.begin(), freq.end());
  for (double q : s.quantiles) {
    if (freq.empty()) {
      s.label_freq_at.push_back(0);
      continue;
    }
    const auto rank = static_cast<int64_t>(std::ceil(q * static_cast<double>(freq.size())));
    s.label_freq_at.push_back(freq[static_cast<size_t>(std::max<int64_t>(rank, 1) - 1)]);
  }
  return s;
}

}  // namespace tether
