// The validation rows of a worker: the rows of the validation split
// (train.validation_fraction, or the rows a file names: data.validation_split)
// that this worker evaluates after every epoch, taken out of the training
// rows it read, so that no worker ever trains on a validation row.
//
// train.validation_fraction: the rows a hash of each row's line chooses
// (input/validation_split.h), carved from this worker's own partition.
//
// data.validation_split: a split file as data.train_split (1-based row
// indices of data.train_file, one per line, read by ReadSplitFile: an
// unparsable line, index 0, a duplicate, or an index past the data's end is
// an InvalidArgument naming the file and line). The rows it names are
// validation rows whether or not data.train_split lists them; the training
// rows are data.train_split's (or all rows) less the validation rows.
// Every worker reads the whole validation split once (to know which of its
// rows to leave out) and keeps rows [rank*K/n, (rank+1)*K/n) of its K rows:
// the same rows whatever the number of workers, each evaluated by one
// worker. (Every worker parsing the whole validation split costs its read
// time and, for a moment, its memory, n times over: fine for the usual
// tenth or fifth of the rows.)
//
// Pure functions of their arguments and the files; thread-compatible.
#pragma once

#include "core/status.h"
#include "input/reader.h"
#include "proto/config.pb.h"

namespace tether {

/// Takes worker `rank`'s validation rows (of `num_workers` workers) out of
/// *train, this worker's training rows as LoadSplit read them (before any
/// TF-IDF weights: FinishFeatures applies to both), and returns them, read
/// as LoadSplit reads. Without a validation split nothing moves and the
/// result is empty. Rows named by data.validation_split that *train does
/// not hold (another worker's, or rows outside data.train_split) leave
/// *train as it is. Errors: ReadSplitFile's and the reader's for the
/// validation split file ("FILE:LINE: ...").
StatusOr<Dataset> TakeValidationShare(const JobConfig& config, int rank, int num_workers, Dataset* train);

/// How many of the rows data.validation_split names data.test_split names
/// too, where both index the same data (data.test_file is
/// data.train_file): rows the settings are chosen on and then scored as
/// test rows. 0 when either split is unset or the files differ. Reads the
/// two split files (indices only, no data). Errors: ReadSplitFile's.
StatusOr<int64_t> ValidationRowsInTestSplit(const JobConfig& config);

/// The rows the whole job trains on: the training split read whole
/// (partition 0 of 1, as LoadSplit reads it) less every validation row,
/// the rows tether-export counts (label counts, TF-IDF document
/// frequencies), the same the workers counted in round 0. Errors: the
/// readers'.
StatusOr<Dataset> JobTrainingRows(const JobConfig& config);

}  // namespace tether
