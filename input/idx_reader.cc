#include "input/idx_reader.h"

#include <algorithm>
#include <cstdio>
#include <string_view>

#include "input/file_input.h"
#include "input/read_budget.h"
#include "input/reader.h"

namespace tether {
namespace {

// MNIST's largest file (60k training images) is 47 MB; 4 GiB bounds what a
// hostile or broken stream can make us allocate.
constexpr uint64_t kMaxInflatedBytes = uint64_t{1} << 32;

uint32_t BigEndian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

StatusOr<IdxArray> ParseIdx(const std::string& bytes, const std::string& name, const MemoryBudget& budget) {
  std::string inflated;
  std::string_view s = bytes;
  if (IsGzip(bytes)) {
    const MemoryBudget bound = ResolveReadBudget(budget);
    if (bound.bytes > 0 && bound.bytes <= kMaxInflatedBytes) {
      TETHER_ASSIGN_OR_RETURN(s, DecodeInput(name, bytes, &inflated, bound));
    } else {  // the format's own bound is the lower
      TETHER_RETURN_IF_ERROR(Gunzip(name, bytes, &inflated, kMaxInflatedBytes));
      s = inflated;
    }
  }
  const auto* u = reinterpret_cast<const unsigned char*>(s.data());
  if (s.size() < 4 || u[0] != 0 || u[1] != 0)
    return Status::InvalidArgument(name + ": not an IDX file (the magic number must start with two zero bytes)");
  if (u[2] != 0x08) {
    char hex[8];
    std::snprintf(hex, sizeof(hex), "0x%02x", u[2]);
    return Status::InvalidArgument(name + ": IDX element type " + hex +
                                   " is not supported (only 0x08, unsigned byte)");
  }
  const int ndims = u[3];
  if (ndims == 0) return Status::InvalidArgument(name + ": IDX header declares 0 dimensions");
  const size_t header = 4 + 4 * static_cast<size_t>(ndims);
  if (s.size() < header)
    return Status::InvalidArgument(name + ": truncated IDX header (" + std::to_string(s.size()) + " bytes for " +
                                   std::to_string(ndims) + " dimensions)");
  IdxArray a;
  uint64_t count = 1;
  for (int d = 0; d < ndims; ++d) {
    const uint32_t size = BigEndian32(u + 4 + 4 * d);
    if (size == 0) return Status::InvalidArgument(name + ": IDX dimension " + std::to_string(d) + " has size 0");
    a.dims.push_back(size);
    count *= size;  // each factor < 2^32 and we stop past 2^32, so no overflow
    if (count > kMaxInflatedBytes)
      return Status::InvalidArgument(name + ": IDX header declares more than 2^32 elements");
  }
  if (s.size() - header != count)
    return Status::InvalidArgument(name + ": IDX header declares " + std::to_string(count) +
                                   " bytes of data but the file holds " + std::to_string(s.size() - header) +
                                   (s.size() - header < count ? " (truncated)" : " (trailing bytes)"));
  a.data.assign(u + header, u + s.size());
  return a;
}

StatusOr<IdxArray> ReadIdxFile(const std::string& path, const MemoryBudget& budget) {
  const MemoryBudget bound = ResolveReadBudget(budget);
  std::string bytes;
  TETHER_RETURN_IF_ERROR(ReadFileBytes(path, &bytes, bound));
  return ParseIdx(bytes, path, bound);
}

StatusOr<Dataset> ReadIdxDataset(const std::string& images_path, const std::string& labels_path,
                                 const IdxReadOptions& opts) {
  if (opts.num_partitions < 1 || opts.partition < 0 || opts.partition >= opts.num_partitions)
    return Status::InvalidArgument("ReadIdxDataset: partition " + std::to_string(opts.partition) + " outside [0, " +
                                   std::to_string(opts.num_partitions) + ")");
  TETHER_ASSIGN_OR_RETURN(IdxArray images, ReadIdxFile(images_path, opts.memory_budget));
  TETHER_ASSIGN_OR_RETURN(IdxArray labels, ReadIdxFile(labels_path, opts.memory_budget));
  if (images.dims.size() < 2)
    return Status::InvalidArgument(images_path + ": an image file needs at least 2 dimensions (items × pixels), has " +
                                   std::to_string(images.dims.size()));
  if (labels.dims.size() != 1)
    return Status::InvalidArgument(labels_path + ": a label file has 1 dimension, this one has " +
                                   std::to_string(labels.dims.size()));
  const int64_t n = images.dims[0];
  if (labels.dims[0] != images.dims[0])
    return Status::InvalidArgument(labels_path + ": " + std::to_string(labels.dims[0]) + " labels but " + images_path +
                                   " holds " + std::to_string(n) + " images");
  const int64_t width = static_cast<int64_t>(images.data.size() / static_cast<uint64_t>(n));

  // The items of this share, in increasing order.
  std::vector<int64_t> items;
  if (opts.row_subset != nullptr) {
    const std::vector<int64_t>& sub = *opts.row_subset;
    for (size_t i = 0; i < sub.size(); ++i) {
      if (sub[i] < 0)
        return Status::InvalidArgument("ReadIdxDataset: row_subset index " + std::to_string(sub[i]) + " is negative");
      if (i > 0 && sub[i] <= sub[i - 1])
        return Status::InvalidArgument("ReadIdxDataset: row_subset is not strictly increasing at entry " +
                                       std::to_string(i));
    }
    if (!sub.empty() && sub.back() >= n)
      return RowSubsetPastEnd(images_path, sub, opts.row_subset_file, opts.row_subset_lines, n);
    const int64_t k = static_cast<int64_t>(sub.size());
    const int64_t b = k * opts.partition / opts.num_partitions, e = k * (opts.partition + 1) / opts.num_partitions;
    items.assign(sub.begin() + b, sub.begin() + e);
  } else {
    const int64_t b = n * opts.partition / opts.num_partitions, e = n * (opts.partition + 1) / opts.num_partitions;
    for (int64_t i = b; i < e; ++i) items.push_back(i);
  }

  Dataset d;
  d.features.cols = width;
  d.labels.cols = 0;
  std::vector<uint32_t> idx;
  std::vector<float> val;
  for (int64_t item : items) {
    const uint8_t label = labels.data[item];
    if (opts.num_classes > 0 && label >= opts.num_classes)
      return Status::InvalidArgument(labels_path + ": item " + std::to_string(item + 1) + ": label " +
                                     std::to_string(label) + " >= " + std::to_string(opts.num_classes) + " classes");
    idx.clear();
    val.clear();
    const uint8_t* px = images.data.data() + item * width;
    for (int64_t j = 0; j < width; ++j) {
      if (px[j] == 0) continue;
      idx.push_back(static_cast<uint32_t>(j));
      val.push_back(static_cast<float>(px[j]));
    }
    d.features.AppendRow(idx.data(), val.data(), idx.size());
    d.labels.row_ptr.push_back(0);
    d.targets.push_back(static_cast<float>(label));
    d.source_lines.push_back(item + 1);
  }
  d.labels.rows = d.features.rows;  // AppendRow counted the feature rows
  d.rows_read = d.features.rows;
  if (d.features.rows == 0 && opts.num_partitions == 1)
    return Status::InvalidArgument(images_path + ": no examples selected");
  return d;
}

}  // namespace tether
