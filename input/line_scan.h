// The first pass of the text reader (input/reader.cc) over a decoded XMC or
// LIBSVM text: where each line is, which data lines fall in this reader's
// share (a byte range of the file, or the entries of a row subset), how many
// data rows the whole file has, its XMC header line, and whether a LIBSVM
// file is multilabel (every share must agree, so every line's label field
// is looked at). Lines outside the share are only scanned for their newline
// and first non-blank byte. Not part of input/'s interface.
//
// Ownership: the result points into the text it was given.
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "input/reader.h"

namespace tether {
namespace text_reader {

// One data line of this reader's share, found by the newline scan.
struct LineRef {
  size_t begin;  // offset of the first byte of the line
  size_t end;    // offset of its '\n' (or of the end of the content)
  int64_t line_no;
};

struct LineScan {
  std::string_view header_line;  // XMC: line 1 (whole files only)
  bool have_content = false;     // a non-blank line anywhere
  bool multilabel = false;       // LIBSVM: label lists (num_labels set, or a comma seen)
  std::string multilabel_why;    // why: "num_labels is set", "line N has ..."
  int64_t data_rows = 0;         // data lines in the whole text
  int64_t trailing_blank_rows = 0;  // XMC: blank rows that end the text
  std::vector<LineRef> mine;     // this reader's share, in order
};

/// Scans `content` (a whole file from line 1, or with `block` a block of
/// data lines whose first is line `first_line_no`). Errors: InvalidArgument
/// naming path:1 when a LIBSVM file's line 1 is an XMC header.
StatusOr<LineScan> ScanLines(const std::string& path, std::string_view content, const ReadOptions& opts,
                             int64_t first_line_no, bool block);

}  // namespace text_reader
}  // namespace tether
