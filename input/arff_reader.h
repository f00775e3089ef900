// MULAN's multi-label ARFF (Tsoumakas et al., JMLR 2011), read into the same
// Dataset as the XMC and LIBSVM readers (reader.h), so that training cannot
// tell the formats apart.
//
// Format: a header of "@relation NAME" and "@attribute NAME TYPE" lines, then
// "@data" and one row per line. Keywords are case-insensitive; '%' starts a
// comment line; names and values may be quoted with ' or " (backslash
// escapes). TYPE is numeric / real / integer, or a nominal list {v1,v2,...}.
// Rows are dense ("v0,v1,...", one value per attribute) or sparse
// ("{i v,j v,...}", 0-based attribute indices, omitted values are 0).
// string, date and relational attributes, missing values '?' and instance
// weights ("{...},{w}") are refused with path:line, never guessed at.
//
// Labels: the attributes named by MULAN's label XML (<label name="..."/>
// elements, nested or not; ReadOptions::label_xml), or, without one, the last
// ReadOptions::num_labels attributes. A label attribute must be nominal {0,1},
// and its value in a row 0 or 1. Features are the other attributes: numeric,
// or nominal whose values are all numbers (MULAN's binary {0,1} features).
// Columns follow attribute order: feature j is the j-th non-label attribute,
// label k the k-th label attribute (so a file whose labels are the last
// attributes keeps its feature indices, as Bibtex does). Zero feature values
// are not stored, exactly as an XMC or LIBSVM file leaves them out.
//
// Streaming: the file (plain or gzip, by magic bytes) is read through zlib in
// 256 KiB pieces, a line at a time; memory holds the rows kept, never the
// file. Partitioning: with row_subset, blocks of the subset as in reader.h;
// without it, partition p of n takes data rows [p*R/n, (p+1)*R/n) of the R
// rows (a first pass counts them).
//
// ReadOptions: index_base must be -1 (unset) or 0: ARFF indices are 0-based
// by definition. num_features / num_labels, when non-zero, must equal the
// header's. duplicates, non_finite and skip_unlabeled apply as in reader.h;
// header_mismatch_is_error does not apply (ARFF has no row count).
//
// Errors: InvalidArgument "path:line: ..." quoting the token (first error
// stops the read): unknown or unsupported attribute type, attribute index out
// of range, value not 0/1 for a label, a value not in a nominal list, a dense
// row with the wrong number of values, no @data section, no rows; label XML
// errors name "xml:line: ..." (a label that is not an attribute of the ARFF
// file, a duplicate label, no labels). NotFound / IOError / DataLoss as in
// file_input.h.
//
// Thread-safety: no shared state; concurrent calls are safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "input/reader.h"

namespace tether {

/// What an ARFF header declares, as the reader maps it to columns.
struct ArffHeader {
  std::string relation;
  std::vector<std::string> feature_names;  // column order
  std::vector<std::string> label_names;    // column order
};

/// Reads the ARFF file's header only (up to @data) and resolves its labels
/// from opts.label_xml or opts.num_labels. Errors as ReadArffDataset.
[[nodiscard]] StatusOr<ArffHeader> ReadArffHeader(const std::string& path, const ReadOptions& opts);

/// Reads this reader's share of the ARFF file at `path`; see the comment at
/// the top. Dataset::feature_names / label_names hold the attribute names.
[[nodiscard]] StatusOr<Dataset> ReadArffDataset(const std::string& path, const ReadOptions& opts);

/// ReadArffDataset on the file's bytes in memory (plain or gzip); `name`
/// stands for the path in messages. The label XML is still read from
/// opts.label_xml.
[[nodiscard]] StatusOr<Dataset> ParseArffDataset(const std::string& bytes, const std::string& name,
                                                 const ReadOptions& opts);

/// The label names of MULAN's label XML file, in document order (a nested
/// label follows its parent). Errors: InvalidArgument "path:line: ..." for a
/// <label> without a name, a repeated name, an unterminated tag or comment;
/// "path: no <label> elements found"; NotFound / IOError / DataLoss.
[[nodiscard]] StatusOr<std::vector<std::string>> ReadMulanLabelXml(const std::string& path);

}  // namespace tether
