#include "input/line_scan.h"

#include <cstring>

#include "input/text_parse.h"

namespace tether {
namespace text_reader {
namespace {

using text::At;
using text::IsSpace;
using text::Quote;

// Share boundaries: floor(total * p / n) without overflow, for bytes and
// for row-subset entries alike.
size_t Cut(const ReadOptions& opts, uint64_t total, int p) {
  const uint64_t n = static_cast<uint64_t>(opts.num_partitions);
  const uint64_t up = static_cast<uint64_t>(p);
  return static_cast<size_t>(total / n * up + total % n * up / n);
}

// "N F L" (three integers, no idx:val pair) is an XMC header, never a
// LIBSVM row: [first, end) of line 1, from its first non-blank byte.
bool LooksLikeXmcHeader(const char* data, size_t first, size_t end) {
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
  return only_digits && ints == 3;
}

// The rows of this reader's share: a byte range of the text, or the
// entries of a row subset.
class Share {
 public:
  Share(const ReadOptions& opts, size_t size)
      : range_lo_(Cut(opts, size, opts.partition)), range_hi_(Cut(opts, size, opts.partition + 1)) {
    if (opts.row_subset != nullptr) {
      const uint64_t k = opts.row_subset->size();
      sub_next_ = opts.row_subset->data() + Cut(opts, k, opts.partition);
      sub_end_ = opts.row_subset->data() + Cut(opts, k, opts.partition + 1);
    }
  }

  // Whether data row `row` (0-based), whose line begins at byte `begin`,
  // is this reader's. Rows are asked in order.
  bool Takes(int64_t row, size_t begin) {
    if (sub_next_ == nullptr) return begin >= range_lo_ && begin < range_hi_;
    const bool take = sub_next_ < sub_end_ && *sub_next_ == row;
    if (take) ++sub_next_;
    return take;
  }

 private:
  const size_t range_lo_, range_hi_;
  const int64_t* sub_next_ = nullptr;
  const int64_t* sub_end_ = nullptr;
};

}  // namespace

StatusOr<LineScan> ScanLines(const std::string& path, std::string_view content, const ReadOptions& opts,
                             int64_t first_line_no, bool block) {
  const bool xmc = opts.format == DataFormat::kXmc;
  const char* const data = content.data();
  const size_t size = content.size();
  size_t pos = 0;
  if (first_line_no == 1 && size >= 3 && std::memcmp(data, "\xef\xbb\xbf", 3) == 0) pos = 3;  // UTF-8 BOM
  Share share(opts, size);
  LineScan scan;
  scan.multilabel = !xmc && opts.num_labels > 0;
  scan.multilabel_why = scan.multilabel ? "num_labels is set" : "";
  int64_t line_no = first_line_no - 1;
  while (pos < size) {
    const void* nl = std::memchr(data + pos, '\n', size - pos);
    const size_t end = nl != nullptr ? static_cast<size_t>(static_cast<const char*>(nl) - data) : size;
    const size_t begin = pos;
    pos = end + 1;
    ++line_no;
    size_t first = begin;
    while (first < end && IsSpace(data[first])) ++first;
    const bool blank = first == end || (!xmc && data[first] == '#');
    if (!blank) scan.have_content = true;
    if (xmc && line_no == 1 && !block) {
      scan.header_line = std::string_view(data + begin, end - begin);
      continue;
    }
    // Refused also when a row subset would skip line 1 and so shift every
    // row id by one.
    if (!xmc && line_no == 1 && !blank && LooksLikeXmcHeader(data, first, end))
      return Status::InvalidArgument(At(path, 1) + "line 1 " + Quote(std::string_view(data + first, end - first)) +
                                     " looks like an XMC header (examples, features, labels), not a LIBSVM row: "
                                     "read the file as XMC (format XMC, --format=xmc)");
    // An XMC line is a row even when blank: a row with neither labels nor
    // features (EURLex and Mediamill have them) counts, as the header does.
    // LIBSVM has no such row: a blank line there is no row.
    if (blank && !xmc) continue;
    scan.trailing_blank_rows = blank ? scan.trailing_blank_rows + 1 : 0;
    const int64_t row = scan.data_rows++;
    if (!xmc && !scan.multilabel) {
      for (size_t i = first; i < end && !IsSpace(data[i]) && data[i] != ':' && data[i] != '#'; ++i) {
        if (data[i] == ',') {
          scan.multilabel = true;
          scan.multilabel_why = "line " + std::to_string(line_no) + " has a comma-separated label list";
          break;
        }
      }
    }
    if (share.Takes(row, begin)) scan.mine.push_back({begin, end, line_no});
  }
  return scan;
}

}  // namespace text_reader
}  // namespace tether
