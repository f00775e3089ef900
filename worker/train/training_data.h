// A worker's training and test data as the job's model wants it: the readers
// applied with the job's options (feature scaling, row normalisation, labels
// turned into the model's CSR form), and the training rows held in the form
// the job's data mode needs (TrainingData): this rank's partition, the
// whole set (data on demand), a stream over this rank's share of the files
// (data.streaming), or the files themselves (data on demand over streamed
// files). worker/train/row_source.h turns a TrainingData into the rows of
// each epoch.
//
// Ownership: TrainingData owns what it holds. Thread-safety: re-entrant;
// a TrainingData belongs to one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "proto/config.pb.h"
#include "input/reader.h"
#include "input/row_stream.h"
#include "worker/eval/partitioned_eval.h"

namespace tether {

/// Reads one split the way the job's model wants it (the trainer's reader;
/// exposed for tests and tools). Selects rows like the data readers (`split`:
/// optional split file; `partition` of `num_partitions`), reads
/// `file` (XMC, LIBSVM, or IDX images with `label_file`), applies
/// data.feature_scale and data.normalize_rows (with data.tf_idf neither the
/// weights nor the normalisation: the IDF is known only once the training
/// rows are counted, and FinishFeatures applies both), and turns the labels into the
/// CSR form of worker/models/model.h: multi-label as read; binary N × 1 (entry 0 on
/// rows labelled > 0; labels must be -1, 0 or 1); multiclass one-hot N ×
/// data.num_labels (class = label − data.label_base, an integer in range).
/// Errors: the readers'; InvalidArgument "file:line: ..." for a label that
/// does not fit, or a feature / label width different from the config's.
StatusOr<Dataset> LoadSplit(const JobConfig& config, const std::string& file, const std::string& label_file,
                            const std::string& split, int partition, int num_partitions);

/// The reader options of a streamed data.train_file (data.streaming).
ReadOptions StreamReadOptions(const JobConfig& config);

/// What LoadSplit does to the rows it read, for one streamed block.
/// Errors: TargetsToLabels' (a label that does not fit).
Status PrepareStreamBlock(const JobConfig& config, Dataset* d);

/// With data.tf_idf, finishes rows LoadSplit read: every value of feature f
/// times feature_idf[f] (input/feature_weighting.h), then, with
/// data.normalize_rows, each row scaled to unit L2 norm. `features`: N ×
/// data.num_features CSR, changed in place; `feature_idf`: the IDF of round
/// 0 (EvalSetup) or of a model file, data.num_features entries. A no-op
/// without data.tf_idf (LoadSplit normalised the rows). Errors:
/// InvalidArgument when feature_idf has another width than data.num_features
/// (naming both), or a column has no weight.
Status FinishFeatures(const JobConfig& config, const std::vector<float>& feature_idf, CsrMatrix* features);

/// The training rows of worker `rank`, in the form of the job's data mode.
struct TrainingData {
  enum class Mode {
    kStaticSplit,       // `rows`: this rank's partition of data.train_file
    kStreamed,          // `stream`: this rank's share, read again every epoch
    kOnDemand,          // `rows`: the whole training set; shard 0 deals chunks of it
    kOnDemandStreamed,  // `files`: shard 0 deals byte ranges of them
  };
  Mode mode = Mode::kStaticSplit;
  Dataset rows;
  std::unique_ptr<RowStream> stream;
  std::vector<DataFile> files;
  ReadOptions read_options;  // kOnDemandStreamed: how `files` are read

  /// Rows held in memory (0 for the streamed modes).
  int64_t held_rows() const { return rows.features.rows; }
  /// Reading a streamed block can take seconds: `idle` (the client's
  /// heartbeat) is called between buffers. No-op for rows in memory.
  void HeartbeatWith(std::function<Status()> idle);
};

/// Reads (or opens) worker `rank`'s training data for the job's mode and
/// logs what it holds. Errors: the readers'; InvalidArgument for a share
/// with no rows (use fewer workers), an empty file in a streamed list, or a
/// streamed job given --resume_from (`resuming`).
StatusOr<TrainingData> LoadTrainingData(const JobConfig& config, int rank, bool resuming);

/// What round 0 of the partitioned evaluation (worker/eval/partitioned_eval.h)
/// needs of the training rows worker `rank` trains on (validation rows
/// already carved out): their number, PSP@k's label counts (multi-label
/// only) and with data.tf_idf the document frequency of every feature
/// (data.num_features of them). Its partition's; a streamed share's in one
/// extra pass over it (labels only: data.tf_idf is not streamed); with data
/// on demand rank 0 counts the whole set and the others send zeros of the
/// same widths, so the sums over the workers are the whole split's. `idle`
/// keeps the connections alive during a pass over files. Errors: the
/// readers'.
Status CountTrainingRows(const JobConfig& config, int rank, const TrainingData& data,
                         const std::function<Status()>& idle, TrainingCounts* counts);

/// The rows `state.dealt_rows()` (global row ids, in training order) of the
/// whole training split: those a resume with another number of workers
/// dealt to this worker. Errors: LoadSplit's; FailedPrecondition naming a
/// row the data no longer has.
StatusOr<Dataset> DealtRows(const JobConfig& config, const WorkerState& state);

/// Data on demand over streamed files: bytes per chunk, train.chunk_bytes
/// or chunk_rows × the mean bytes per row of the first plain file's first
/// 64 KiB (the first file when all are gzip, which go whole anyway). Every
/// worker reads the same bytes, so every worker finds the same size.
StatusOr<uint64_t> ChunkBytesFor(const JobConfig& config, const std::vector<DataFile>& files);

/// The next non-empty block of a streamed epoch, its rows shuffled
/// (train.seed, rank, epoch, block), into *x / *y; false at the epoch's
/// end. The first block is shuffled exactly as the in-memory mode shuffles
/// a share, so one file read in one block trains exactly as in memory.
/// `*block_no` counts the blocks of the epoch (0 at its start).
StatusOr<bool> NextStreamBlock(const JobConfig& config, int rank, int epoch, RowStream* stream, int64_t* block_no,
                               CsrMatrix* x, CsrMatrix* y);

/// Starts an epoch of the stream: its pieces in an order shuffled by
/// (train.seed, rank, epoch).
Status StartStreamEpoch(const JobConfig& config, int rank, int epoch, RowStream* stream);

}  // namespace tether
