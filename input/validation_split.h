// The validation split: training rows set aside to choose settings and
// epochs on (TrainConfig.validation_fraction, or the rows a file names:
// DataConfig.validation_split, worker/train/validation_rows.h), never
// trained on, so that the test split is read only for the final evaluation.
//
// A row is a validation row when a hash of (seed, its line in the data
// file) falls below the fraction: the choice depends on the file alone, not
// on how the rows are dealt to workers, so every worker count and layout
// sets aside the same rows, and each worker can carve its own share
// without talking to the others. About `fraction` of the rows are chosen
// (a binomial count, not an exact one).
//
// Pure functions of their arguments; thread-compatible.
#pragma once

#include <cstdint>
#include <vector>

#include "input/reader.h"

namespace tether {

/// Whether the row at 1-based `source_line` of the data file is a
/// validation row for `fraction` in [0, 1) and `seed`. fraction 0: never.
bool IsValidationRow(int64_t source_line, double fraction, uint64_t seed);

/// Moves the validation rows (IsValidationRow on train->source_lines) out
/// of *train into the returned Dataset, keeping their order; features,
/// labels, targets and source_lines move together and the widths stay.
/// fraction 0 moves nothing.
Dataset TakeValidationRows(Dataset* train, double fraction, uint64_t seed);

/// Moves the rows of *train whose source line (Dataset::source_lines) is
/// one of `lines` (sorted ascending) out into the returned Dataset, as
/// TakeValidationRows does: the rows a validation split file
/// (data.validation_split) names, once read, give their lines.
Dataset TakeRowsAtLines(Dataset* train, const std::vector<int64_t>& lines);

/// `rows` (sorted, unique) without those in `remove` (sorted, unique): the
/// training split's rows once a validation split file took its own.
std::vector<int64_t> SubtractRows(const std::vector<int64_t>& rows, const std::vector<int64_t>& remove);

}  // namespace tether
