#include "worker/train/training_data.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>
#include <unordered_map>

#include <glog/logging.h>

#include "core/config.h"
#include "core/data_files.h"
#include "core/memory_fit.h"
#include "input/feature_weighting.h"
#include "input/idx_reader.h"
#include "worker/eval/evaluator.h"
#include "worker/models/model_registry.h"
#include "worker/models/model.h"
#include "worker/sampling.h"

namespace tether {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void NormalizeRows(CsrMatrix* m) {
  for (int64_t r = 0; r < m->rows; ++r) {
    double sq = 0;
    for (int64_t p = m->row_ptr[r]; p < m->row_ptr[r + 1]; ++p) sq += double{m->values[p]} * m->values[p];
    if (sq <= 0) continue;
    const float inv = static_cast<float>(1.0 / std::sqrt(sq));
    for (int64_t p = m->row_ptr[r]; p < m->row_ptr[r + 1]; ++p) m->values[p] *= inv;
  }
}

std::string FormatNumber(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Single-label targets → the label CSR of worker/models/model.h (binary: N × 1 with
// the entry 0 on positives; multiclass: one-hot N × classes).
Status TargetsToLabels(const JobConfig& config, LabelKind kind, const std::string& file, Dataset* d) {
  if (d->targets.size() != static_cast<size_t>(d->features.rows)) {
    return Status::InvalidArgument(file + ": expected one label per row (" +
                                   std::string(kind == LabelKind::kBinary ? "binary" : "multiclass") +
                                   " data), found a multi-label file");
  }
  const int64_t classes = kind == LabelKind::kBinary ? 1 : config.data().num_labels();
  const int base = config.data().label_base();
  CsrMatrix labels;
  labels.cols = classes;
  const float one = 1.0f;
  for (size_t r = 0; r < d->targets.size(); ++r) {
    const float t = d->targets[r];
    const std::string where =
        file + ":" + std::to_string(r < d->source_lines.size() ? d->source_lines[r] : static_cast<int64_t>(r + 1));
    if (kind == LabelKind::kBinary) {
      if (t != 1.0f && t != -1.0f && t != 0.0f)
        return Status::InvalidArgument(where + ": label " + FormatNumber(t) +
                                       " is not binary (expected -1 or +1, or 0 or 1)");
      const uint32_t positive = 0;
      labels.AppendRow(&positive, &one, t > 0 ? 1 : 0);
    } else {
      const double c = static_cast<double>(t) - base;
      if (c != std::floor(c) || c < 0 || c >= static_cast<double>(classes))
        return Status::InvalidArgument(where + ": label " + FormatNumber(t) + " is not a class in [" +
                                       std::to_string(base) + ", " + std::to_string(base + classes) +
                                       ") (data.label_base " + std::to_string(base) + ", data.num_labels " +
                                       std::to_string(classes) + ")");
      const auto cls = static_cast<uint32_t>(c);
      labels.AppendRow(&cls, &one, 1);
    }
  }
  d->labels = std::move(labels);
  return Status::OK();
}

// Worker `rank`'s share of data.train_file as a stream.
Status OpenTrainStream(const JobConfig& config, int rank, std::unique_ptr<RowStream>* stream) {
  RowStreamOptions so;
  so.block_rows = config.data().shuffle_buffer_rows();
  TETHER_ASSIGN_OR_RETURN(*stream, OpenFileListShare(config.data().train_file(), "data.train_file",
                                                     StreamReadOptions(config), rank,
                                                     config.cluster().num_workers(), so));
  if ((*stream)->pieces().empty())
    return Status::InvalidArgument("[worker " + std::to_string(rank) + "] no part of the " +
                                   std::to_string((*stream)->files().size()) + " file(s) of data.train_file falls to worker " +
                                   std::to_string(rank) + " of " + std::to_string(config.cluster().num_workers()) +
                                   " (gzip files go whole to one worker each): use fewer workers or more files");
  uint64_t bytes = 0;
  for (const FilePiece& p : (*stream)->pieces()) bytes += p.end - p.begin;
  LOG(INFO) << "[worker " << rank << "] streaming " << (*stream)->pieces().size() << " piece(s) of "
            << (*stream)->files().size() << " file(s), " << bytes << " bytes on disk, in blocks of "
            << so.block_rows << " rows";
  return Status::OK();
}

// PSP@k's label counts of worker `rank`'s streamed share (no worker holds
// it whole): one extra pass over the share, block by block, before training;
// `between_chunks` keeps the connections alive meanwhile (RowStream).
Status CountLabelsStreamed(const JobConfig& config, int rank, int num_workers,
                           const std::function<Status()>& between_chunks, std::vector<uint64_t>* counts,
                           int64_t* rows) {
  RowStreamOptions so;
  so.block_rows = config.data().shuffle_buffer_rows();
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<RowStream> stream,
                          OpenFileListShare(config.data().train_file(), "data.train_file", StreamReadOptions(config),
                                            rank, num_workers, so));
  stream->set_between_chunks(between_chunks);
  TETHER_RETURN_IF_ERROR(stream->Start());
  counts->assign(static_cast<size_t>(config.data().num_labels()), 0);
  *rows = 0;
  Dataset d;
  for (;;) {
    TETHER_ASSIGN_OR_RETURN(bool more, stream->Next(&d));
    if (!more) break;
    for (uint32_t c : d.labels.col_idx)
      if (c < counts->size()) ++(*counts)[c];
    *rows += d.labels.rows;
  }
  return Status::OK();
}

// data.streaming with data on demand: the files themselves (shard 0 deals
// byte ranges of them, read as dealt).
Status OpenDemandFiles(const JobConfig& config, const std::string& who, TrainingData* data) {
  data->read_options = StreamReadOptions(config);
  TETHER_ASSIGN_OR_RETURN(data->files,
                          OpenDataFileList(config.data().train_file(), "data.train_file", &data->read_options));
  uint64_t bytes = 0;
  for (const DataFile& f : data->files) {
    if (f.bytes == 0)
      return Status::InvalidArgument(who + "data.train_file: " + f.path + " is empty (no examples): drop it from "
                                           "the list");
    bytes += f.bytes;
  }
  LOG(INFO) << who << "data on demand over " << data->files.size() << " streamed file(s), " << bytes
            << " bytes on disk, read in blocks of " << config.data().shuffle_buffer_rows() << " rows";
  return Status::OK();
}

}  // namespace

ReadOptions StreamReadOptions(const JobConfig& config) {
  ReadOptions opts;
  opts.format = config.data().format() == XMC ? DataFormat::kXmc : DataFormat::kLibsvm;
  opts.index_base = config.data().index_base();
  opts.num_features = config.data().num_features();
  opts.num_labels = LabelKindOf(config) == LabelKind::kMultiLabel ? config.data().num_labels() : 0;
  opts.duplicates = config.data().duplicates() == DUPLICATES_SUM         ? DuplicatePolicy::kSum
                    : config.data().duplicates() == DUPLICATES_KEEP_LAST ? DuplicatePolicy::kKeepLast
                                                                         : DuplicatePolicy::kError;
  opts.non_finite =
      config.data().non_finite() == NON_FINITE_DROP_ROW ? NonFinitePolicy::kDropRow : NonFinitePolicy::kError;
  opts.skip_unlabeled = config.data().skip_unlabeled();
  opts.header_mismatch_is_error = config.data().header_mismatch_is_error();
  opts.hashed_features = config.data().hashed_features();
  opts.memory_budget = MemoryBudgetFor(config);  // the budget of the start-up memory check
  return opts;
}

// Starts an epoch of the stream: its pieces in an order shuffled by
// (train.seed, rank, epoch).
Status StartStreamEpoch(const JobConfig& config, int rank, int epoch, RowStream* stream) {
  std::vector<int64_t> order;
  EpochOrder(config.train().seed(), rank, epoch, static_cast<int64_t>(stream->pieces().size()), &order);
  return stream->Start(std::vector<int>(order.begin(), order.end()));
}

// What LoadSplit does to the rows it read, for one streamed block.
Status PrepareStreamBlock(const JobConfig& config, Dataset* d) {
  const float scale = config.data().feature_scale();
  if (scale != 1.0f)
    for (float& v : d->features.values) v *= scale;
  if (config.data().normalize_rows()) NormalizeRows(&d->features);
  const LabelKind kind = LabelKindOf(config);
  if (kind != LabelKind::kMultiLabel)
    TETHER_RETURN_IF_ERROR(TargetsToLabels(config, kind, config.data().train_file(), d));
  return Status::OK();
}

// The next non-empty block of the epoch, its rows shuffled (train.seed,
// rank, epoch, block), into *x / *y; false at the epoch's end. The first
// block is shuffled exactly as the in-memory mode shuffles a share, so one
// file read in one block trains exactly as in memory.
StatusOr<bool> NextStreamBlock(const JobConfig& config, int rank, int epoch, RowStream* stream, int64_t* block_no,
                               CsrMatrix* x, CsrMatrix* y) {
  Dataset d;
  for (;;) {
    TETHER_ASSIGN_OR_RETURN(bool more, stream->Next(&d));
    if (!more) return false;
    if (d.features.rows > 0) break;
  }
  TETHER_RETURN_IF_ERROR(PrepareStreamBlock(config, &d));
  std::vector<int64_t> order;
  const uint64_t seed = config.train().seed();
  EpochOrder(++*block_no == 1 ? seed : seed * 1000003ull + static_cast<uint64_t>(*block_no), rank, epoch,
             d.features.rows, &order);
  *x = GatherRows(d.features, order);
  *y = GatherRows(d.labels, order);
  return true;
}

// Data on demand over streamed files: bytes per chunk, train.chunk_bytes or
// chunk_rows x the mean bytes per row of the first plain file's first
// 64 KiB (the first file when all are gzip, which go whole anyway). Every
// worker reads the same bytes, so every worker finds the same size.
StatusOr<uint64_t> ChunkBytesFor(const JobConfig& config, const std::vector<DataFile>& files) {
  if (config.train().chunk_bytes() > 0) return static_cast<uint64_t>(config.train().chunk_bytes());
  const DataFile* sample = &files.front();
  for (const DataFile& f : files)
    if (!f.gzip) {
      sample = &f;
      break;
    }
  TETHER_ASSIGN_OR_RETURN(const uint64_t per_row, EstimateBytesPerRow(*sample, config.data().format() == XMC));
  return per_row * static_cast<uint64_t>(EffectiveChunkRows(config.train()));
}


StatusOr<Dataset> LoadSplit(const JobConfig& config, const std::string& file, const std::string& label_file,
                            const std::string& split, int partition, int num_partitions) {
  const LabelKind kind = LabelKindOf(config);
  // Every read holds at most the memory the start-up check counts on.
  const MemoryBudget budget = MemoryBudgetFor(config);
  std::vector<int64_t> subset, subset_lines;
  if (!split.empty()) {
    TETHER_ASSIGN_OR_RETURN(subset, ReadSplitFile(split, &subset_lines, budget));
  }
  Dataset d;
  if (config.data().format() == IDX) {
    IdxReadOptions opts;
    opts.partition = partition;
    opts.num_partitions = num_partitions;
    opts.row_subset = split.empty() ? nullptr : &subset;
    opts.row_subset_file = split;
    opts.row_subset_lines = split.empty() ? nullptr : &subset_lines;
    opts.memory_budget = budget;
    TETHER_ASSIGN_OR_RETURN(d, ReadIdxDataset(file, label_file, opts));
  } else {
    ReadOptions opts;
    opts.format = config.data().format() == XMC    ? DataFormat::kXmc
                  : config.data().format() == ARFF ? DataFormat::kArff
                                                   : DataFormat::kLibsvm;
    opts.index_base = config.data().index_base();
    opts.partition = partition;
    opts.num_partitions = num_partitions;
    opts.row_subset = split.empty() ? nullptr : &subset;
    opts.row_subset_file = split;
    opts.row_subset_lines = split.empty() ? nullptr : &subset_lines;
    opts.duplicates = config.data().duplicates() == DUPLICATES_SUM         ? DuplicatePolicy::kSum
                      : config.data().duplicates() == DUPLICATES_KEEP_LAST ? DuplicatePolicy::kKeepLast
                                                                           : DuplicatePolicy::kError;
    opts.non_finite = config.data().non_finite() == NON_FINITE_DROP_ROW ? NonFinitePolicy::kDropRow
                                                                        : NonFinitePolicy::kError;
    opts.skip_unlabeled = config.data().skip_unlabeled();
    opts.header_mismatch_is_error = config.data().header_mismatch_is_error();
    opts.hashed_features = config.data().hashed_features();
    opts.memory_budget = budget;
    if (opts.format == DataFormat::kArff) {
      // Widths must equal the header's (they were taken from it when left at 0).
      opts.index_base = -1;
      opts.label_xml = config.data().label_xml();
      opts.num_features = config.data().num_features();
      opts.num_labels = config.data().num_labels();
    }
    if (opts.format == DataFormat::kLibsvm) {
      opts.num_features = config.data().num_features();
      // A label count selects the LIBSVM reader's multi-label mode; binary
      // and multiclass files have one number per row (Dataset::targets).
      opts.num_labels = kind == LabelKind::kMultiLabel ? config.data().num_labels() : 0;
    }
    if (IsFileList(file)) {  // several files (core/data_files.h): this partition's pieces
      const char* field = file == config.data().train_file() ? "data.train_file" : "data.test_file";
      TETHER_ASSIGN_OR_RETURN(d, ReadFileListShare(file, field, opts, partition, num_partitions));
    } else {
      TETHER_ASSIGN_OR_RETURN(d, ReadDataset(file, opts));
    }
  }
  const float scale = config.data().feature_scale();
  if (scale != 1.0f)
    for (float& v : d.features.values) v *= scale;
  // TF-IDF weighs before the normalisation, with weights not known yet.
  if (config.data().normalize_rows() && !config.data().tf_idf()) NormalizeRows(&d.features);
  // Hashed features: cols counts this share's distinct ids, not a width.
  if (!config.data().hashed_features() && d.features.cols != config.data().num_features())
    return Status::InvalidArgument(file + ": has " + std::to_string(d.features.cols) +
                                   " features but config field data.num_features is " +
                                   std::to_string(config.data().num_features()));
  if (kind == LabelKind::kMultiLabel) {
    if (d.labels.cols != config.data().num_labels())
      return Status::InvalidArgument(file + ": has " + std::to_string(d.labels.cols) +
                                     " labels but config field data.num_labels is " +
                                     std::to_string(config.data().num_labels()));
  } else {
    TETHER_RETURN_IF_ERROR(TargetsToLabels(config, kind, label_file.empty() ? file : label_file, &d));
  }
  return d;
}

// The rows `state.dealt_rows()` (global row ids, in training order) of the
// whole training split.
StatusOr<Dataset> DealtRows(const JobConfig& config, const WorkerState& state) {
  TETHER_ASSIGN_OR_RETURN(Dataset all, LoadSplit(config, config.data().train_file(), config.data().train_label_file(),
                                                 config.data().train_split(), 0, 1));
  std::unordered_map<int64_t, int64_t> index;
  index.reserve(all.source_lines.size());
  for (size_t i = 0; i < all.source_lines.size(); ++i) index[all.source_lines[i]] = static_cast<int64_t>(i);
  std::vector<int64_t> rows;
  for (int64_t line : state.dealt_rows()) {
    auto it = index.find(line);
    if (it == index.end())
      return Status::FailedPrecondition(config.data().train_file() + ": has no row at line " + std::to_string(line) +
                                        ", which the checkpoint left to train: the training data changed");
    rows.push_back(it->second);
  }
  Dataset d;
  d.features = GatherRows(all.features, rows);
  d.labels = GatherRows(all.labels, rows);
  return d;
}

void TrainingData::HeartbeatWith(std::function<Status()> idle) {
  if (stream != nullptr) stream->set_between_chunks(std::move(idle));
}

StatusOr<TrainingData> LoadTrainingData(const JobConfig& config, int rank, bool resuming) {
  const std::string who = "[worker " + std::to_string(rank) + "] ";
  const bool streaming = config.data().streaming();
  if (streaming && resuming)
    return Status::InvalidArgument(who + "--resume_from: a streamed job (data.streaming) has no checkpoints to resume");
  // Data on demand (worker/train/chunk_feed.h): every worker holds the whole
  // training set, or over streamed files none does; shard 0 deals it out
  // in chunks.
  const bool on_demand = config.train().data_on_demand();
  TrainingData data;
  if (on_demand && streaming) {
    data.mode = TrainingData::Mode::kOnDemandStreamed;
    TETHER_RETURN_IF_ERROR(OpenDemandFiles(config, who, &data));
  } else if (streaming) {
    data.mode = TrainingData::Mode::kStreamed;
    TETHER_RETURN_IF_ERROR(OpenTrainStream(config, rank, &data.stream));
  } else {
    data.mode = on_demand ? TrainingData::Mode::kOnDemand : TrainingData::Mode::kStaticSplit;
    TETHER_ASSIGN_OR_RETURN(data.rows, LoadSplit(config, config.data().train_file(), config.data().train_label_file(),
                                                 config.data().train_split(), on_demand ? 0 : rank,
                                                 on_demand ? 1 : config.cluster().num_workers()));
  }
  return data;
}

Status FinishFeatures(const JobConfig& config, const std::vector<float>& feature_idf, CsrMatrix* features) {
  if (!config.data().tf_idf()) return Status::OK();
  if (static_cast<int64_t>(feature_idf.size()) != config.data().num_features())
    return Status::InvalidArgument("data.tf_idf: " + std::to_string(feature_idf.size()) +
                                   " feature weights for data.num_features " +
                                   std::to_string(config.data().num_features()));
  TETHER_RETURN_IF_ERROR(ApplyFeatureWeights(feature_idf, features));
  if (config.data().normalize_rows()) NormalizeRows(features);
  return Status::OK();
}

namespace {

// data.tf_idf: the document frequencies of the rows `data` holds, or zeros
// of the same width from a worker whose rows another counts.
Status CountFeatures(const JobConfig& config, const TrainingData& data, bool zeros, std::vector<uint64_t>* counts) {
  counts->clear();
  if (!config.data().tf_idf()) return Status::OK();
  const bool in_memory =
      data.mode == TrainingData::Mode::kStaticSplit || data.mode == TrainingData::Mode::kOnDemand;
  if (!in_memory)
    return Status::FailedPrecondition("config field data.tf_idf: counts rows held in memory, not data.streaming");
  counts->assign(static_cast<size_t>(config.data().num_features()), 0);
  if (!zeros) CountDocumentFrequencies(data.rows.features, counts);
  return Status::OK();
}

// PSP@k's label counts (multi-label only) and the rows counted
// (CountTrainingRows).
Status CountTrainingLabels(const JobConfig& config, int rank, const TrainingData& data,
                           const std::function<Status()>& idle, std::vector<uint64_t>* counts, int64_t* rows) {
  const std::string who = "[worker " + std::to_string(rank) + "] ";
  const int num_workers = config.cluster().num_workers();
  counts->clear();
  *rows = data.rows.labels.rows;
  if (LabelKindOf(config) != LabelKind::kMultiLabel) {
    if (data.mode == TrainingData::Mode::kOnDemand && rank != 0) *rows = 0;
    return Status::OK();
  }
  switch (data.mode) {
    case TrainingData::Mode::kStreamed: {
      // No worker holds its share whole: one extra pass over it, block by
      // block, heartbeating the servers between buffers.
      const auto count_start = std::chrono::steady_clock::now();
      TETHER_RETURN_IF_ERROR(CountLabelsStreamed(config, rank, num_workers, idle, counts, rows));
      LOG(INFO) << who << "counted the labels of " << *rows << " streamed rows for PSP@k in "
                << SecondsSince(count_start) << " s";
      return Status::OK();
    }
    case TrainingData::Mode::kOnDemandStreamed:
      // Rank 0 counts the whole list; the others send zeros of the same width.
      counts->assign(static_cast<size_t>(config.data().num_labels()), 0);
      *rows = 0;
      if (rank == 0) {
        const auto count_start = std::chrono::steady_clock::now();
        TETHER_RETURN_IF_ERROR(CountLabelsStreamed(config, 0, 1, idle, counts, rows));
        LOG(INFO) << who << "counted the labels of " << *rows << " streamed rows for PSP@k in "
                  << SecondsSince(count_start) << " s";
      }
      return Status::OK();
    case TrainingData::Mode::kOnDemand:
      *counts = CountLabels(data.rows.labels);
      if (rank != 0) {
        // Every worker holds the whole set: rank 0's counts are the split's.
        std::fill(counts->begin(), counts->end(), 0);
        *rows = 0;
      }
      return Status::OK();
    case TrainingData::Mode::kStaticSplit:
      *counts = CountLabels(data.rows.labels);
      return Status::OK();
  }
  return Status::OK();
}

}  // namespace

Status CountTrainingRows(const JobConfig& config, int rank, const TrainingData& data,
                         const std::function<Status()>& idle, TrainingCounts* out) {
  // Every worker holding the whole set on demand: rank 0's counts are the split's.
  const bool zeros = data.mode == TrainingData::Mode::kOnDemand && rank != 0;
  TETHER_RETURN_IF_ERROR(CountFeatures(config, data, zeros, &out->feature_counts));
  return CountTrainingLabels(config, rank, data, idle, &out->label_counts, &out->rows);
}

}  // namespace tether
