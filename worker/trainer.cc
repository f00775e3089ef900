#include "worker/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/data_files.h"
#include "core/env.h"
#include "core/file_util.h"
#include "core/memory_fit.h"
#include "eval/metrics.h"
#include "telemetry/metrics_log.h"
#include "core/net/curve.h"
#include "core/net/eval_frames.h"
#include "compute/backend.h"
#include "input/idx_reader.h"
#include "checkpoint/checkpoint.h"
#include "input/reader.h"
#include "input/row_stream.h"
#include "worker/chunk_feed.h"
#include "worker/client.h"
#include "worker/evaluator.h"
#include "worker/local_replica.h"
#include "worker/metrics_json.h"
#include "worker/model.h"
#include "worker/model_registry.h"
#include "worker/on_demand_resume.h"
#include "worker/pacing.h"
#include "worker/partitioned_eval.h"
#include "worker/sampling.h"

namespace tether {
namespace {

using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

// The wall clock, seconds since the Unix epoch: the one clock workers on
// different hosts share, for the job's span of training (WorkerStats).
double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
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

// Single-label targets → the label CSR of worker/model.h (binary: N × 1 with
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

// Merges every worker's partial (rank order) into report's test metrics.
Status MergeEvalResults(const JobConfig& config, const std::vector<EvalPartial>& all, Model* model, Backend* backend,
                        const std::vector<double>& inv_propensity, TrainReport* report) {
  Evaluator merged(model->label_kind(), model->num_outputs(), backend, inv_propensity);
  TETHER_RETURN_IF_ERROR(MergeEvalPartials(all, &merged));
  if (merged.rows() == 0 && static_cast<int>(all.size()) < config.cluster().num_workers())
    // A P@k of 0 over no rows would read as a score: fail instead.
    return Status::FailedPrecondition(
        "evaluation covered 0 test rows: the " + std::to_string(config.cluster().num_workers()) +
        " initial worker(s) hold the test set's parts and every one of them left the job (joiners evaluate "
        "none); no test metrics to report");
  report->test_metrics = merged.Results();
  report->eval_counts = merged.Counts();
  report->test_rows = merged.rows();
  report->eval_workers = static_cast<int>(all.size());
  report->eval_seconds_slowest = 0;
  for (const EvalPartial& p : all) report->eval_seconds_slowest = std::max(report->eval_seconds_slowest, p.eval_seconds());
  if (static_cast<int>(all.size()) < config.cluster().num_workers())
    LOG(WARNING) << "evaluation: only " << all.size() << " of " << config.cluster().num_workers()
                 << " workers sent their part of the test set (the others left the job): the metrics cover "
                 << merged.rows() << " rows";
  if (merged.tied_rows() > 0) {
    LOG(WARNING) << "evaluation: " << merged.tied_rows() << " of " << merged.rows()
                 << " test rows have tied scores at the top of their ranking; ties are scored by their expected "
                    "value under a random order of the tied labels (a model that cannot tell labels apart never "
                    "looks perfect)";
  }
  return Status::OK();
}

// Partitioned evaluation (worker/partitioned_eval.h): this worker
// evaluates its part of the test set (`test`, partition `rank`; within
// train.eval_max_rows of the whole set by `setup`) and sends its partial
// sums to shard 0 for `round`. `want`: EVAL_ACK on the workers that do not
// report; on rank 0, EVAL_POLL (mid-training: merge only if every worker's
// partial is in) or EVAL_WAIT (the end). Returns whether it merged every
// worker's partial into report->test_metrics / test_rows / eval_counts.
// inv_propensity: the training labels' 1/p_l (multi-label; empty: no PSP@k).
StatusOr<bool> Evaluate(const JobConfig& config, const Dataset& test, const EvalSetup& setup, int rank,
                        int64_t round, MessageHeader::EvalWant want, WorkerClient* client, Model* model,
                        Backend* backend, const std::vector<double>& inv_propensity, TrainReport* report) {
  const auto start = SteadyClock::now();
  Evaluator eval(model->label_kind(), model->num_outputs(), backend, inv_propensity);
  std::vector<float> scores;
  const int64_t bs = config.train().eval_minibatch_size();
  const int64_t rows = RowsToEvaluate(setup.test_offset, test.features.rows, config.train().eval_max_rows());
  // AVERAGE: evaluation reads the servers' merged model, not this worker's
  // replica (restored on every path out).
  struct PauseReplica {
    WorkerClient* c;
    ~PauseReplica() { c->set_replica_paused(false); }
  } pause{client};
  client->set_replica_paused(true);
  TETHER_RETURN_IF_ERROR(model->BeginEvaluation(client));
  const Status st = [&]() -> Status {
    for (int64_t b = 0; b < rows; b += bs) {
      const Minibatch batch{&test.features, &test.labels, b, std::min(rows, b + bs)};
      TETHER_RETURN_IF_ERROR(model->Pull(batch, client));
      TETHER_RETURN_IF_ERROR(model->Predict(batch, &scores));
      TETHER_RETURN_IF_ERROR(eval.Add(scores, test.labels, batch.begin, batch.end));
    }
    return Status::OK();
  }();
  model->EndEvaluation();
  TETHER_RETURN_IF_ERROR(st);
  EvalPartial mine = eval.Partial(rank);
  mine.set_eval_seconds(SecondsSince(start));
  std::vector<EvalPartial> all;
  // A worker that joined beyond the initial ranks holds no test rows and
  // owes no partial (it only gathers, when it is the evaluator).
  const bool owes = rank < config.cluster().num_workers();
  TETHER_ASSIGN_OR_RETURN(bool complete, client->EvalGather(round, owes ? &mine : nullptr, want, &all));
  if (want == MessageHeader::EVAL_ACK || !complete) return false;
  TETHER_RETURN_IF_ERROR(MergeEvalResults(config, all, model, backend, inv_propensity, report));
  report->eval_seconds = SecondsSince(start);
  return true;
}

// A FINISHED entry's loss and divergence into `s` (its final_loss only when
// the entry has one: a checkpoint of an older build does not).
void CopyFinishedLoss(const CheckpointWorker& entry, WorkerState* s) {
  if (entry.has_final_loss()) s->set_final_loss(entry.final_loss());
  if (entry.diverged()) {
    s->set_diverged(true);
    s->set_diverged_at_epoch(entry.diverged_at_epoch());
  }
}

// Where worker `rank` starts in a resumed job (see WorkerState). With the
// checkpoint's number of workers: its own state, exactly. With another: the
// rows no worker had trained yet in its epoch in progress (by global row
// id, sorted) are dealt round-robin to the new workers, who train them
// first (as `dealt_rows`, shuffled per worker) and then their own
// partitions from the next epoch on; rank 0 carries the samples so far.
StatusOr<WorkerState> ResumeState(const CheckpointManifest& m, const std::string& dir, const JobConfig& config,
                                  int rank, const Dataset& train, bool* finished) {
  const int num_workers = config.cluster().num_workers();
  *finished = false;
  if (m.num_workers() == num_workers) {
    const CheckpointWorker* entry = nullptr;
    for (const CheckpointWorker& w : m.workers())
      if (w.rank() == rank) entry = &w;
    if (entry == nullptr) return Status::DataLoss(dir + "/MANIFEST: has no entry for worker " + std::to_string(rank));
    if (entry->kind() != CheckpointWorker::TRAINING && entry->kind() != CheckpointWorker::LEFT) {
      *finished = true;
      WorkerState s;
      s.set_samples(entry->samples());
      CopyFinishedLoss(*entry, &s);
      return s;
    }
    TETHER_ASSIGN_OR_RETURN(WorkerState s, ReadWorkerState(dir, m, rank));
    if (s.partition_rows() != train.features.rows)
      return Status::FailedPrecondition("worker " + std::to_string(rank) + "'s partition of " +
                                        config.data().train_file() + " has " + std::to_string(train.features.rows) +
                                        " rows; at the checkpoint (" + dir + ") it had " +
                                        std::to_string(s.partition_rows()) + ": the training data changed");
    return s;
  }
  std::vector<int64_t> rest;
  int epoch = 0;
  uint64_t samples = 0;
  double train_seconds = 0;
  WorkerState out;
  for (const CheckpointWorker& w : m.workers()) {
    if (w.kind() != CheckpointWorker::TRAINING && w.kind() != CheckpointWorker::LEFT) {
      samples += w.samples();
      if (w.rank() == 0) CopyFinishedLoss(w, &out);
      if (w.diverged() && !out.diverged()) {
        out.set_diverged(true);
        out.set_diverged_at_epoch(w.diverged_at_epoch());
      }
      continue;
    }
    TETHER_ASSIGN_OR_RETURN(WorkerState s, ReadWorkerState(dir, m, w.rank()));
    epoch = std::max(epoch, s.epoch() + (s.remaining_rows_size() == 0 ? 1 : 0));
    rest.insert(rest.end(), s.remaining_rows().begin(), s.remaining_rows().end());
    samples += s.samples();
    train_seconds = std::max(train_seconds, s.train_seconds());
    if (w.rank() == 0) {
      out.set_first_loss(s.first_loss());
      if (s.has_final_loss()) out.set_final_loss(s.final_loss());
    }
    if (s.diverged() && !out.diverged()) {
      out.set_diverged(true);
      out.set_diverged_at_epoch(s.diverged_at_epoch());
    }
  }
  bool any_training = false;
  for (const CheckpointWorker& w : m.workers())
    any_training |= w.kind() == CheckpointWorker::TRAINING || w.kind() == CheckpointWorker::LEFT;
  if (!any_training) {
    // Every worker had finished (a final checkpoint): nothing left to train.
    *finished = true;
    WorkerState done;
    done.set_samples(rank == 0 ? samples : 0);
    if (rank == 0) {
      if (out.has_final_loss()) done.set_final_loss(out.final_loss());
      done.set_diverged(out.diverged());
      done.set_diverged_at_epoch(out.diverged_at_epoch());
    }
    return done;
  }
  std::sort(rest.begin(), rest.end());
  rest.erase(std::unique(rest.begin(), rest.end()), rest.end());
  std::vector<int64_t> mine;
  for (size_t i = static_cast<size_t>(rank); i < rest.size(); i += static_cast<size_t>(num_workers))
    mine.push_back(rest[i]);
  std::vector<int64_t> shuffle;
  EpochOrder(config.train().seed(), rank, epoch, static_cast<int64_t>(mine.size()), &shuffle);
  out.set_rank(rank);
  out.set_num_workers(num_workers);
  out.set_clock(m.clock());
  // No rows dealt to this worker: the epoch in progress is the others' to
  // finish; it starts on its own partition at the next one.
  out.set_epoch(mine.empty() && !rest.empty() ? epoch + 1 : epoch);
  out.set_next_row(0);
  out.set_minibatches(m.clock() * (config.consistency().model() == AVERAGE ? AveragePeriodMinibatches(config)
                                                                           : config.train().minibatches_per_clock()));
  out.set_samples(rank == 0 ? samples : 0);
  out.set_train_seconds(train_seconds);
  for (int64_t i : shuffle) out.add_dealt_rows(mine[static_cast<size_t>(i)]);
  *finished = out.epoch() >= config.train().epochs();
  LOG(INFO) << "[worker " << rank << "] resuming a checkpoint of " << m.num_workers() << " workers with "
            << num_workers << ": " << rest.size() << " rows of the epoch in progress were left, " << mine.size()
            << " dealt to this worker";
  return out;
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

// ---- data.streaming (input/row_stream.h): the worker's share is read again
// every epoch in blocks of data.shuffle_buffer_rows rows.

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
  return opts;
}

// Worker `rank`'s share of data.train_file as a stream; *train stays empty.
StatusOr<Dataset> OpenTrainStream(const JobConfig& config, int rank, std::unique_ptr<RowStream>* stream) {
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
  return Dataset();
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

}  // namespace

bool RowsDealtOnDemand(const JobConfig& config) {
  // The static split (data.train_split by rank over cluster.num_workers)
  // has no share for a rank beyond the initial ones; shard 0's chunks
  // (worker/chunk_feed.h) go to whichever rank asks.
  return config.train().data_on_demand();
}

int AveragePeriodMinibatches(const JobConfig& config) {
  const int64_t bs = std::max<int64_t>(1, config.train().minibatch_size());
  const int64_t rows = std::max<int64_t>(1, config.consistency().period_rows());
  return static_cast<int>(std::min<int64_t>((rows + bs - 1) / bs, std::numeric_limits<int>::max()));
}

bool LossDiverged(double loss, double reference, double factor) {
  return !std::isfinite(loss) || loss > factor * reference;
}

double TrainReport::Metric(const std::string& name) const {
  for (const auto& [k, v] : test_metrics)
    if (k == name) return v;
  return std::numeric_limits<double>::quiet_NaN();
}

StatusOr<Dataset> LoadSplit(const JobConfig& config, const std::string& file, const std::string& label_file,
                            const std::string& split, int partition, int num_partitions) {
  const LabelKind kind = LabelKindOf(config);
  std::vector<int64_t> subset;
  if (!split.empty()) {
    TETHER_ASSIGN_OR_RETURN(subset, ReadSplitFile(split));
  }
  Dataset d;
  if (config.data().format() == IDX) {
    IdxReadOptions opts;
    opts.partition = partition;
    opts.num_partitions = num_partitions;
    opts.row_subset = split.empty() ? nullptr : &subset;
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
    opts.duplicates = config.data().duplicates() == DUPLICATES_SUM         ? DuplicatePolicy::kSum
                      : config.data().duplicates() == DUPLICATES_KEEP_LAST ? DuplicatePolicy::kKeepLast
                                                                           : DuplicatePolicy::kError;
    opts.non_finite = config.data().non_finite() == NON_FINITE_DROP_ROW ? NonFinitePolicy::kDropRow
                                                                        : NonFinitePolicy::kError;
    opts.skip_unlabeled = config.data().skip_unlabeled();
    opts.header_mismatch_is_error = config.data().header_mismatch_is_error();
    opts.hashed_features = config.data().hashed_features();
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
  if (config.data().normalize_rows()) NormalizeRows(&d.features);
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

namespace {

// How long a leaving worker waits for its goodbyes (BYE_REPLY), or for its
// ABORT to be flushed: a stop request is honoured within about a second even
// when a shard is stalled or gone.
constexpr int kLeaveTimeoutMs = 1000;
// With checkpoints on, how long a stopped worker may still wait for the
// others to reach the stop's checkpoint clock and for the shards' writes.
constexpr double kStopCheckpointGraceS = 60;

// RunWorker's body; `*client_out` holds the client once connected, so that
// RunWorker can say goodbye (stop) or ABORT (failure) on any error path.
StatusOr<TrainReport> RunWorkerWith(const JobConfig& config, const TrainerOptions& options,
                                    std::unique_ptr<WorkerClient>* client_out) {
  const int rank = options.rank;
  const int num_workers = config.cluster().num_workers();
  const std::string who = "[worker " + std::to_string(rank) + "] ";
  TrainReport report;
  // Elastic membership: a rank beyond the initial ones joins the running
  // job; it needs rows dealt on demand, and holds no part of the test set.
  if (Status st = CheckWorkerRank(config, rank, RowsDealtOnDemand(config)); !st.ok())
    return st.code() == Status::Code::kInvalidArgument ? Status::InvalidArgument(who + st.message())
                                                        : Status::FailedPrecondition(who + st.message());
  const bool joiner = rank >= num_workers;

  // The model's own checks and its tables (sizes, message limits): refused
  // here, before any data is read or server contacted, not at HELLO.
  TETHER_RETURN_IF_ERROR(ValidateModelConfig(config));

  // Bounded worker memory: the cache's capacity, and whether the cache and
  // the dense tables fit in what this process may count on (before any data
  // is read or server contacted, so a job that cannot run fails at once).
  uint64_t cache_capacity = 0;
  {
    const std::vector<TableSpec> tables = TablesForJob(config);
    StatusOr<uint64_t> capacity = ResolveCacheCapacity(config, tables);
    if (!capacity.ok()) return Status::FailedPrecondition(who + capacity.status().message());
    cache_capacity = *capacity;
    const Status fits = CheckWorkerFits("worker " + std::to_string(rank), tables, cache_capacity,
                                        MemoryBudgetFor(config));
    if (!fits.ok()) return Status::ResourceExhausted(who + fits.message());
    if (cache_capacity > 0) LOG(INFO) << who << "parameter cache capacity " << FormatBytes(cache_capacity);
  }

  // A metrics file that cannot be written would be found only after the
  // whole run: check its directory now (on every worker given one: if rank 0
  // leaves, the lowest rank still there writes the metrics).
  if (!options.metrics_out.empty()) {
    std::string dir = options.metrics_out.substr(0, options.metrics_out.find_last_of('/') + 1);
    if (dir.empty()) dir = ".";
    if (access(dir.c_str(), W_OK) != 0)
      return Status::IOError(options.metrics_out + ": cannot write the metrics file there (directory " + dir +
                             ": " + std::strerror(errno) + ")");
  }

  // The backend first: a missing GPU should fail before any data is read.
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                          CreateBackend(config.train().device(), config.train().threads()));
  LOG(INFO) << who << "compute backend " << backend->name() << " (--device=" << config.train().device() << ")";

  const auto load_start = SteadyClock::now();
  // data.streaming: `train` stays empty; the stream reads the rows every epoch.
  std::unique_ptr<RowStream> stream;
  if (config.data().streaming() && !options.resume_from.empty())
    return Status::InvalidArgument(who + "--resume_from: a streamed job (data.streaming) has no checkpoints to resume");
  // Data on demand (worker/chunk_feed.h): every worker holds the whole
  // training set; shard 0 deals it out in chunks.
  const bool on_demand = config.train().data_on_demand();
  // Data on demand over streamed files: no worker holds a share; shard 0
  // deals byte ranges of the files (StreamedChunkSource), read as dealt.
  std::vector<DataFile> demand_files;
  ReadOptions demand_read_options;
  const bool demand_streamed = on_demand && config.data().streaming();
  if (demand_streamed) {
    demand_read_options = StreamReadOptions(config);
    TETHER_ASSIGN_OR_RETURN(demand_files,
                            OpenDataFileList(config.data().train_file(), "data.train_file", &demand_read_options));
    uint64_t bytes = 0;
    for (const DataFile& f : demand_files) {
      if (f.bytes == 0)
        return Status::InvalidArgument(who + "data.train_file: " + f.path + " is empty (no examples): drop it from "
                                             "the list");
      bytes += f.bytes;
    }
    LOG(INFO) << who << "data on demand over " << demand_files.size() << " streamed file(s), " << bytes
              << " bytes on disk, read in blocks of " << config.data().shuffle_buffer_rows() << " rows";
  }
  TETHER_ASSIGN_OR_RETURN(Dataset train, demand_streamed ? StatusOr<Dataset>(Dataset())
                                         : config.data().streaming()
                                             ? OpenTrainStream(config, rank, &stream)
                                             : LoadSplit(config, config.data().train_file(),
                                                         config.data().train_label_file(),
                                                         config.data().train_split(), on_demand ? 0 : rank,
                                                         on_demand ? 1 : num_workers));
  // Every worker evaluates its own part of the test set (partitioned
  // evaluation), split as the training file is.
  Dataset test;
  if (!joiner) {
    const bool same_file = config.data().test_file().empty();
    const std::string& test_file = same_file ? config.data().train_file() : config.data().test_file();
    const std::string& test_labels = same_file ? config.data().train_label_file() : config.data().test_label_file();
    TETHER_ASSIGN_OR_RETURN(test,
                            LoadSplit(config, test_file, test_labels, config.data().test_split(), rank, num_workers));
  }
  report.train_rows = train.features.rows;
  LOG(INFO) << who << "read " << train.features.rows << " training rows (" << train.features.nnz()
            << " non-zeros) in " << SecondsSince(load_start) << " s"
            << ", " << test.features.rows << " test rows";
  if (train.features.rows == 0 && stream == nullptr && !demand_streamed)
    return Status::InvalidArgument(who + "partition " + std::to_string(rank) + " of " +
                                   config.data().train_file() + " has no rows; use fewer workers");

  const std::vector<TableSpec> tables = TablesForJob(config);
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, CreateModel(config, tables, backend.get(), rank));

  // A new job must not mix its checkpoints with another job's: pruning and
  // "the latest" would pick across both (a fresh run would delete the old
  // job's checkpoints, and a resume could take the old job's).
  if (rank == 0 && options.resume_from.empty() && !config.checkpoint().dir().empty()) {
    StatusOr<std::string> existing = ResolveCheckpoint(config.checkpoint().dir());
    if (existing.ok())
      return Status::InvalidArgument(who + "checkpoint.dir " + config.checkpoint().dir() +
                                     " already holds checkpoints (the latest: " + *existing +
                                     "): resume from them with --resume_from=" + config.checkpoint().dir() +
                                     ", or give the new job its own directory");
  }

  // ---- Resume (options.resume_from): where this worker starts.
  std::string resume_dir;
  CheckpointManifest manifest;
  WorkerState resume;          // this rank's state (same number of workers), or the dealt rows
  bool resume_finished = false;  // nothing left to train: straight to the barrier
  if (!options.resume_from.empty()) {
    TETHER_ASSIGN_OR_RETURN(resume_dir, ResolveCheckpoint(options.resume_from));
    TETHER_ASSIGN_OR_RETURN(manifest, ReadManifest(resume_dir));
    const std::string diff = DiffTableShapes(
        manifest.tables(), google::protobuf::RepeatedPtrField<TableSpec>(tables.begin(), tables.end()));
    if (!diff.empty()) return Status::FailedPrecondition(who + "cannot resume from " + resume_dir + ": " + diff);
    if (manifest.config().train().seed() != config.train().seed() || manifest.config().data().train_file() != config.data().train_file() ||
        manifest.config().data().train_split() != config.data().train_split())
      LOG(WARNING) << who << "resuming with another train.seed, data.train_file or data.train_split than the "
                   << "checkpoint's: the rows left of the epoch are those of the checkpoint's order, the model's "
                   << "state continues, but the run is not the one that was stopped";
    // Data on demand: shard 0 resumes the dealing (checkpoint/chunk_state.h);
    // this worker's state is its counters (worker/on_demand_resume.h).
    if (Status st = CheckDataOnDemandResume(manifest, resume_dir, config, train.features.rows); !st.ok())
      return st.WithPrefix("[worker " + std::to_string(rank) + "]");
    if (on_demand) {
      TETHER_ASSIGN_OR_RETURN(resume, OnDemandResumeState(manifest, resume_dir, config, rank, train.features.rows,
                                                          config.consistency().model() == AVERAGE
                                                              ? AveragePeriodMinibatches(config)
                                                              : config.train().minibatches_per_clock()));
    } else {
      TETHER_ASSIGN_OR_RETURN(resume, ResumeState(manifest, resume_dir, config, rank, train, &resume_finished));
    }
    LOG(INFO) << who << "resuming from " << resume_dir << " at clock " << manifest.clock() << ": "
              << (resume_finished ? std::string("nothing left to train")
                                  : "epoch " + std::to_string(resume.epoch() + 1) + ", row " +
                                        std::to_string(resume.next_row()) +
                                        (resume.dealt_rows_size() > 0
                                             ? " of " + std::to_string(resume.dealt_rows_size()) + " dealt rows"
                                             : ""));
    if (!resume.model_state().empty()) TETHER_RETURN_IF_ERROR(model->RestoreState(resume.model_state()));
    if (!resume_finished && resume.epoch() >= config.train().epochs())
      LOG(WARNING) << who << "the checkpoint is in epoch " << resume.epoch() + 1 << " but train.epochs is "
                   << config.train().epochs() << ": nothing is left to train";
  }
  LOG(INFO) << who << "model " << model->name() << ", tables "
            << DescribeTables(google::protobuf::RepeatedPtrField<TableSpec>(tables.begin(), tables.end()));
  report.model = model->name();

  ClientOptions copts = ClientOptionsFor(config, rank, options.servers);
  copts.servers_source = options.servers_source;
  copts.cache_capacity_bytes = cache_capacity;
  bool networked = false;
  for (const std::string& ep : options.servers) networked = networked || ep.rfind("inproc://", 0) != 0;
  if (config.security().has_curve() && networked) {
    // inproc:// (a one-process job) never leaves the process: no keys needed.
    StatusOr<CurveOptions> curve = CurveClientOptions(config.security().curve());
    if (!curve.ok()) return curve.status();
    copts.curve = *curve;
    LOG(INFO) << who << "CURVE on: public key " << copts.curve.public_key << ", servers' public key "
              << copts.curve.server_public_key;
  }
  copts.context = options.zmq_context;
  copts.abort = options.abort;
  // A stop request cuts the client's waits short (within ~100 ms). With
  // checkpoints on, a worker that is training first trains on to the stop's
  // checkpoint clock: from the start of training its waits go on, for
  // kStopCheckpointGraceS at most, then give up too. Before training starts
  // (HELLO, the resume handshake, waiting for the other workers to join)
  // there is nothing to checkpoint: a stop ends those waits at once. (A
  // second signal a second later exits the process at once.)
  struct StopGrace {
    bool armed = false;  // set when training starts, with checkpoints on
    bool noticed = false;
    SteadyClock::time_point since;
  };
  auto stop_grace = std::make_shared<StopGrace>();
  if (options.stop_requested) {
    copts.stop_requested = [stop = options.stop_requested, state = stop_grace] {
      if (!stop()) return false;
      if (!state->armed) return true;
      if (!state->noticed) {
        state->noticed = true;
        state->since = SteadyClock::now();
      }
      return SecondsSince(state->since) > kStopCheckpointGraceS;
    };
  }
  if (!resume_dir.empty()) {
    copts.resume_from = resume_dir;
    copts.resume_clock = manifest.clock();
  }
  TETHER_ASSIGN_OR_RETURN(*client_out, WorkerClient::Connect(copts));
  std::unique_ptr<WorkerClient>& client = *client_out;
  // Reading a streamed block can take seconds: heartbeat the servers between
  // buffers, or they would take this worker for dead (worker_timeout_ms).
  if (stream != nullptr) stream->set_between_chunks([&client] { return client->Idle(1); });
  LOG(INFO) << who << "connected to " << options.servers.size() << " server(s), model " << model->name()
            << ", staleness " << StalenessName(copts.staleness);
  if (config.consistency().model() == AVERAGE) {
    // Weighted model averaging: the model trains a local replica
    // (worker/local_replica.h); every clock is a round.
    client->AttachReplica(std::make_unique<LocalReplica>(copts.tables, client.get()));
    LOG(INFO) << who << "consistency AVERAGE: local replica, a round every "
              << AveragePeriodMinibatches(config) << " minibatch(es) (period_rows "
              << config.consistency().period_rows() << "), model momentum " << config.consistency().model_momentum();
  }

  // Partitioned evaluation's round 0 (worker/partitioned_eval.h): PSP@k
  // (multi-label) needs the training labels' frequencies over the whole
  // training split, which no single worker holds: every worker sends its
  // partition's counts, and each gets the sum; likewise each worker's
  // offset in the test set.
  // A streamed partition is counted in one extra pass over this worker's
  // share (multi-label only), heartbeating the servers between buffers.
  std::vector<uint64_t> label_counts;
  int64_t counted_rows = train.labels.rows;
  if (stream != nullptr && LabelKindOf(config) == LabelKind::kMultiLabel) {
    const auto count_start = SteadyClock::now();
    TETHER_RETURN_IF_ERROR(CountLabelsStreamed(config, rank, num_workers, [&client] { return client->Idle(1); },
                                               &label_counts, &counted_rows));
    LOG(INFO) << who << "counted the labels of " << counted_rows << " streamed rows for PSP@k in "
              << SecondsSince(count_start) << " s";
  } else if (demand_streamed && LabelKindOf(config) == LabelKind::kMultiLabel) {
    // Rank 0 counts the whole list; the others send zeros of the same width.
    label_counts.assign(static_cast<size_t>(config.data().num_labels()), 0);
    counted_rows = 0;
    if (rank == 0) {
      const auto count_start = SteadyClock::now();
      TETHER_RETURN_IF_ERROR(CountLabelsStreamed(config, 0, 1, [&client] { return client->Idle(1); },
                                                 &label_counts, &counted_rows));
      LOG(INFO) << who << "counted the labels of " << counted_rows << " streamed rows for PSP@k in "
                << SecondsSince(count_start) << " s";
    }
  } else if (LabelKindOf(config) == LabelKind::kMultiLabel) {
    label_counts = CountLabels(train.labels);
  }
  if (on_demand && rank != 0) {
    // Every worker holds the whole set: rank 0's counts are the split's.
    std::fill(label_counts.begin(), label_counts.end(), 0);
    counted_rows = 0;
  }
  TETHER_ASSIGN_OR_RETURN(const EvalSetup eval_setup,
                          joiner ? JoinEvalSetup(rank, num_workers, LabelKindOf(config), config.train().psp_a(),
                                                 config.train().psp_b(), client.get())
                                 : ExchangeEvalSetup(rank, num_workers, LabelKindOf(config), config.train().psp_a(),
                                                     config.train().psp_b(), label_counts, counted_rows,
                                                     test.features.rows, client.get()));
  const std::vector<double>& inv_propensity = eval_setup.inv_propensity;

  // Observability (train.metrics_dir, progress_every_s, eval_every_epochs):
  // evaluations during training are timed apart and left out of train_s.
  std::unique_ptr<MetricsLog> metrics_log;
  if (!config.train().metrics_dir().empty()) {
    TETHER_ASSIGN_OR_RETURN(metrics_log, MetricsLog::Open(config.train().metrics_dir(), "worker", rank));
  }
  ProgressTimer progress(config.train().progress_every_s());
  double eval_seconds = 0, clock_loss = 0;
  int clock_batches = 0;
  auto log_eval = [&](const TrainReport& r, int epoch, double train_s, bool log_line, uint64_t samples,
                      double loss) {
    std::string line;
    for (const auto& [name, value] : r.test_metrics) line += " " + name + " " + FormatNumber(value);
    if (log_line)
      LOG(INFO) << who << "test after epoch " << epoch << " (" << r.test_rows << " rows, " << train_s
                << " s of training):" << line;
    if (metrics_log == nullptr) return;
    nlohmann::json j{{"kind", "eval"}, {"epoch", epoch}, {"train_s", train_s}, {"samples", samples},
                     {"test_rows", r.test_rows}, {"loss", loss}};
    for (const auto& [name, value] : r.test_metrics) j[name] = std::isfinite(value) ? nlohmann::json(value) : nullptr;
    metrics_log->Write(std::move(j));
  };

  // Rank 0: mid-training evaluation rounds whose parts are not all merged
  // yet (partitioned evaluation), oldest first, with rank 0's figures at
  // the time for the metrics log.
  struct PendingEval {
    int epoch = 0;
    double train_s = 0;
    uint64_t samples = 0;
    double loss = 0;
    std::optional<TrainReport> merged;  // merged already (logged when it is the oldest)
  };
  std::deque<PendingEval> pending_evals;
  // Merges the open rounds in order (EVAL_POLL: as far as they are
  // complete; EVAL_WAIT: all, waiting for each), logging each.
  auto collect_pending = [&](MessageHeader::EvalWant want) -> Status {
    while (!pending_evals.empty()) {
      PendingEval& e = pending_evals.front();
      if (!e.merged) {
        std::vector<EvalPartial> all;
        TETHER_ASSIGN_OR_RETURN(bool complete, client->EvalGather(e.epoch, nullptr, want, &all));
        if (!complete) return Status::OK();
        TrainReport r;
        TETHER_RETURN_IF_ERROR(MergeEvalResults(config, all, model.get(), backend.get(), inv_propensity, &r));
        e.merged = std::move(r);
      }
      log_eval(*e.merged, e.epoch, e.train_s, true, e.samples, e.loss);
      pending_evals.pop_front();
    }
    return Status::OK();
  };

  std::vector<int64_t> order(train.features.rows);
  // The minibatch size: train.minibatch_size, or with train.adaptive_batch
  // what shard 0 last answered a CLOCK with (server/coordinator/batch_controller.h).
  int64_t bs = config.train().minibatch_size();
  const AdaptiveBatchConfig adaptive = ResolvedAdaptiveBatch(config.train());
  int64_t clock_rows = 0;  // rows trained in the clock in progress
  int64_t bs_min = bs, bs_max = bs;
  uint64_t run_minibatches = 0;  // this run's (WorkerStats.minibatches)
  if (adaptive.enabled())
    LOG(INFO) << who << "adaptive batch sizes in [" << adaptive.b_min() << ", " << adaptive.b_max() << "], mean "
              << bs << ", step scaling " << AdaptiveBatchConfig::StepScaling_Name(adaptive.step_scaling());
  // AVERAGE: a clock is a round of period_rows rows (whole minibatches).
  const int per_clock = config.consistency().model() == AVERAGE ? AveragePeriodMinibatches(config)
                                                                 : config.train().minibatches_per_clock();
  const int log_every = std::max(1, config.train().log_every_clocks());
  int64_t minibatches = 0;
  const auto train_start = SteadyClock::now();
  const double train_start_unix_s = UnixSeconds();
  double pull_wait = 0;
  // Straggler simulation: this worker idles (slowdown − 1) × its own
  // minibatch time, heartbeating, so it is slow but alive.
  const double slowdown = rank == config.train().slowdown_rank() ? config.train().slowdown() : 1.0;
  if (slowdown > 1.0) LOG(INFO) << who << "simulating a straggler: " << slowdown << "x slower";
  SlowdownIdler slow_idle(slowdown);  // worker/pacing.h: the fraction of a ms carried over
  // Which, and when train.pipeline asks for it but the job cannot, why.
  if (model->Pipelines())
    LOG(INFO) << who << "minibatches pipelined: the next one's input rows are pulled while one computes"
              << " (train.pipeline true)";
  else if (!config.train().pipeline())
    LOG(INFO) << who << "minibatches one after the other (train.pipeline false)";
  else
    LOG(INFO) << who << "minibatches one after the other (train.pipeline true, but " << model->PipelineOffReason()
              << ")";
  // C24: the loss itself tells divergence, not only a NaN. Its reference is
  // the untrained model's loss (the first minibatch's) or a uniform
  // softmax's, whichever is larger, so a first minibatch already blown up
  // is no excuse.
  double first_loss = 0;
  const double uniform_loss = std::log(std::max<double>(2.0, static_cast<double>(model->num_outputs())));

  // Where training starts: a fresh run at epoch 0, row 0; a resumed one
  // where its checkpoint left it.
  int start_epoch = 0;
  int64_t start_row = 0;
  double start_loss_sum = 0, train_s_before = 0;
  int64_t start_loss_batches = 0;
  uint64_t samples_before = 0;  // trained before the checkpoint this run resumed from
  if (!resume_dir.empty()) {
    start_epoch = resume_finished ? config.train().epochs() : resume.epoch();
    start_row = resume.next_row();
    minibatches = resume.minibatches();
    report.samples = resume.samples();
    samples_before = resume.samples();
    start_loss_sum = resume.loss_sum();
    start_loss_batches = resume.loss_batches();
    first_loss = resume.first_loss();
    report.diverged = resume.diverged();
    report.diverged_at_epoch = resume.diverged_at_epoch();
    // The model's loss as the checkpoint recorded it: what this run reports
    // when it trains no minibatch (nothing left to train), never a made-up
    // 0. Unknown (NaN, "none") when the checkpoint has none.
    if (resume.has_final_loss()) {
      report.final_loss = resume.final_loss();
      report.final_loss_from = "checkpoint";
    }
    train_s_before = resume.train_seconds();
  }
  // tether-worker's /metrics (TrainerOptions::on_progress).
  WorkerProgress progress_now;
  auto publish_progress = [&](int epoch_1based) {
    if (!options.on_progress) return;
    progress_now.client = client->stats();
    progress_now.clock = client->clock();
    progress_now.epoch = epoch_1based;
    progress_now.samples = report.samples;
    progress_now.run_samples = report.samples - samples_before;
    progress_now.train_seconds = SecondsSince(train_start) - eval_seconds;
    progress_now.pull_wait_seconds = pull_wait;
    options.on_progress(progress_now);
  };

  // ---- Checkpoints (config.checkpoint): every every_clocks clocks, at the
  // clock shard 0 picks for rank 0's every_seconds or a stop, and at the end.
  const CheckpointConfig& ckpt = config.checkpoint();
  const bool checkpointing = !ckpt.dir().empty();
  // Training starts here: a stop now leads to a checkpoint, which the
  // worker's waits are given the time to reach.
  stop_grace->armed = checkpointing;
  auto last_checkpoint_at = SteadyClock::now();
  bool stop_pending = false, checkpoint_asked = false;
  // The rows of the epoch in progress, in training order (global row ids),
  // and how many of them are done: what a checkpoint records.
  const std::vector<int64_t>* epoch_lines = nullptr;
  std::vector<int64_t> epoch_line_scratch;
  auto write_manifest = [&](const std::string& dir, int64_t clock, bool final, const CheckpointReply& reply) {
    CheckpointManifest m;
    m.set_format_version(kCheckpointFormatVersion);
    m.set_job_id(JobId(config));
    m.set_generation(config.cluster().generation());
    m.set_clock(clock);
    m.set_final(final);
    m.set_num_servers(static_cast<int>(options.servers.size()));
    m.set_num_workers(num_workers);
    for (const TableSpec& t : tables) *m.add_tables() = t;
    *m.mutable_config() = config;
    for (const CheckpointFile& f : reply.shard_files) *m.add_files() = f;
    for (const CheckpointFile& f : reply.extra_files) *m.add_files() = f;  // shard 0's chunks.state
    for (const CheckpointWorker& w : reply.workers) {
      CheckpointWorker* e = m.add_workers();
      *e = w;
      if (w.kind() == CheckpointWorker::LEFT) {
        // A worker that left: its state at its last checkpoint comes along,
        // so a resume trains the rows it had left (docs/OPERATIONS.md).
        if (w.from_dir() != dir)
          TETHER_RETURN_IF_ERROR(CopyCheckpointFile(FileSystem::Default(), w.from_dir(), dir, w.file()));
        e->clear_from_dir();
      }
      if (w.kind() == CheckpointWorker::TRAINING || w.kind() == CheckpointWorker::LEFT) *m.add_files() = w.file();
    }
    m.set_written_unix_s(UnixSeconds());
    TETHER_RETURN_IF_ERROR(WriteManifest(FileSystem::Default(), dir, m));
    return PruneCheckpoints(FileSystem::Default(), ckpt.dir(), ckpt.keep_last());
  };
  // Takes the checkpoint at client->clock(): this worker's state, then the
  // shards' rows once every worker is here; the lowest rank in the cut
  // (worker 0 while it trains) writes the manifest.
  bool checkpoint_abandoned = false;  // the last take_checkpoint's round was abandoned
  auto take_checkpoint = [&](int epoch, int64_t next_row, double loss_sum, int64_t loss_batches,
                             const std::vector<int64_t>* dealt) -> Status {
    const auto t0 = SteadyClock::now();
    const int64_t clock = client->clock();
    // Never into a complete checkpoint of this clock (a resumed job
    // reaching one written before): every worker sees the same directory.
    const std::string dir = FreeCheckpointDir(ckpt.dir(), clock, false);
    WorkerState st;
    st.set_rank(rank);
    st.set_num_workers(num_workers);
    st.set_clock(clock);
    st.set_epoch(epoch);
    st.set_next_row(next_row);
    st.set_minibatches(minibatches);
    st.set_samples(report.samples);
    st.set_loss_sum(loss_sum);
    st.set_loss_batches(loss_batches);
    st.set_first_loss(first_loss);
    st.set_diverged(report.diverged);
    st.set_diverged_at_epoch(report.diverged_at_epoch);
    if (report.final_loss_from != "none") st.set_final_loss(report.final_loss);
    st.set_train_seconds(train_s_before + SecondsSince(train_start) - eval_seconds);
    st.set_partition_rows(train.features.rows);
    if (epoch_lines != nullptr)
      for (size_t i = static_cast<size_t>(std::min<int64_t>(next_row, epoch_lines->size())); i < epoch_lines->size(); ++i)
        st.add_remaining_rows((*epoch_lines)[i]);
    if (dealt != nullptr) *st.mutable_dealt_rows() = {dealt->begin(), dealt->end()};
    st.set_model_state(model->SaveState());
    CheckpointFile mine;
    TETHER_RETURN_IF_ERROR(WriteWorkerState(FileSystem::Default(), dir, st, &mine));
    TETHER_ASSIGN_OR_RETURN(CheckpointReply reply, client->Checkpoint(dir, /*final=*/false, &mine));
    checkpoint_abandoned = reply.abandoned;
    if (reply.abandoned) {
      // A worker was restarted at or past this clock and never sends its
      // state: the folder stays without a MANIFEST (never resumed from), and
      // the next checkpoint (or a stop's new request) is taken as usual.
      report.checkpoint_seconds += SecondsSince(t0);
      checkpoint_asked = false;
      LOG(WARNING) << who << reply.abandoned_why << " (" << dir << " has no MANIFEST); training goes on";
      return Status::OK();
    }
    // Worker 0 while it trains; once it has finished its share (or left),
    // the lowest rank in the cut (ManifestWriterRank).
    const bool writer = ManifestWriterRank(reply.workers) == rank;
    if (writer) TETHER_RETURN_IF_ERROR(write_manifest(dir, clock, false, reply));
    const double pause = SecondsSince(t0);
    report.checkpoint_seconds += pause;
    ++report.checkpoints;
    report.last_checkpoint = dir;
    last_checkpoint_at = SteadyClock::now();
    checkpoint_asked = false;
    LOG(INFO) << who << "checkpoint at clock " << clock << (writer ? " written: " : ": ") << dir << " (" << pause
              << " s of training paused)";
    return Status::OK();
  };
  // A stop request, noticed between minibatches or while waiting for a chunk
  // (data on demand): true once one is requested. Without checkpoints the
  // worker leaves at once; with them it asks shard 0 for a checkpoint clock
  // (stop_pending) and leaves once that checkpoint is taken
  // (stop_checkpointed), whichever state it is in when the clock comes.
  bool stop_checkpointed = false;
  int64_t stop_clock = -1;  // the clock of the stop checkpoint, once taken
  auto notice_stop = [&]() -> bool {
    if (stop_pending) return true;
    // A server told to stop (its stop signal, a preempted node) ends the job
    // as this worker's own stop signal would.
    const bool own = options.stop_requested && options.stop_requested();
    if (!own && client->stopping_shard() < 0) return false;
    stop_pending = true;
    if (!own) report.stopped_by_shard = client->stopping_shard();
    if (!stop_grace->noticed) {  // the grace of the stop checkpoint starts now
      stop_grace->noticed = true;
      stop_grace->since = SteadyClock::now();
    }
    LOG(WARNING) << who
                 << (own ? std::string("stop requested")
                         : "server shard " + std::to_string(client->stopping_shard()) + " was told to stop")
                 << " at clock " << client->clock()
                 << (checkpointing ? ": asking for a stop checkpoint, then leaving the job"
                                   : ": leaving the job without a checkpoint (no checkpoint dir: a rerun starts "
                                     "from the beginning)");
    return true;
  };
  // Whether this worker's next CLOCK asks shard 0 for a checkpoint clock (a
  // stop, or rank 0's every_seconds timer); `take` marks it asked (once per
  // request, until the checkpoint is taken).
  auto checkpoint_wanted = [&](bool take) {
    if (!checkpointing || checkpoint_asked || stop_checkpointed) return false;
    const bool want = stop_pending || (rank == 0 && ckpt.every_seconds() > 0 &&
                                       SecondsSince(last_checkpoint_at) >= ckpt.every_seconds());
    if (want && take) checkpoint_asked = true;
    return want;
  };
  // Leaves the job early (a stop): flushes the metrics log and says BYE,
  // bounded (a stalled or dead shard must not hold up a stop).
  auto leave_job = [&]() -> TrainReport {
    report.left_early = true;
    if (metrics_log != nullptr) (void)metrics_log->Flush();
    if (Status st = client->Leave(kLeaveTimeoutMs); !st.ok())
      LOG(WARNING) << who << "goodbye incomplete: " << st.message();
    return report;
  };
  // Data on demand: the stop ended a wait for a chunk (ChunkFeed::stopped).
  auto leave_stopped_feed = [&]() -> TrainReport {
    if (!checkpointing) {
      LOG(WARNING) << who << "stop requested at clock " << client->clock()
                   << " while waiting for a chunk: leaving the job";
    } else if (stop_checkpointed) {
      LOG(WARNING) << who << "leaving the job after the checkpoint at clock " << stop_clock
                   << " (resume with --resume_from=" << ckpt.dir() << ")";
    } else {
      LOG(WARNING) << who << "stop requested: the stop checkpoint"
                   << (client->due_checkpoint_clock() >= 0
                           ? " at clock " + std::to_string(client->due_checkpoint_clock())
                           : std::string())
                   << " was not reached within " << kStopCheckpointGraceS
                   << " s while waiting for a chunk at clock " << client->clock()
                   << ": leaving the job without a stop checkpoint (a resume starts from the latest complete one in "
                   << ckpt.dir() << ")";
    }
    return leave_job();
  };

  // Rows dealt to this worker by a resume with another number of workers:
  // the rest of that epoch, trained before this worker's own partition.
  Dataset dealt_data;
  if (resume.dealt_rows_size() > 0 && !resume_finished) {
    TETHER_ASSIGN_OR_RETURN(dealt_data, DealtRows(config, resume));
  }
  const std::vector<int64_t> dealt_lines(resume.dealt_rows().begin(), resume.dealt_rows().end());

  // Data on demand: the epoch's rows come in chunks from shard 0; a worker
  // (re)joining mid-job starts at the epoch in progress.
  std::unique_ptr<ChunkFeed> feed;
  int feed_epoch = std::max(0, resume.epoch());  // the epoch in progress, for a checkpoint taken while waiting
  if (on_demand) {
    DataOnDemandChunk shape;
    shape.set_train_rows(static_cast<uint64_t>(train.features.rows));
    shape.set_chunk_rows(static_cast<uint64_t>(EffectiveChunkRows(config.train())));
    shape.set_epochs(config.train().epochs());
    shape.set_seed(config.train().seed());
    shape.set_taper(config.train().chunk_taper());
    ChunkFeedHooks hooks;
    hooks.ask = [&client](const DataOnDemandChunk& r) { return client->ChunkNext(r); };
    hooks.idle = [&client](int ms) { return client->Idle(ms); };
    hooks.clock = [&client] { return client->clock(); };
    // A checkpoint clock reached while waiting for a chunk is taken here:
    // every worker still training takes part in each cut. The empty clock
    // carries this worker's request for one (a stop, rank 0's timer).
    hooks.empty_clock = [&]() -> Status {
      TETHER_RETURN_IF_ERROR(client->Clock(checkpoint_wanted(/*take=*/true)));
      const int64_t c = client->clock();
      if (checkpointing && ((ckpt.every_clocks() > 0 && c % ckpt.every_clocks() == 0) ||
                            c == client->due_checkpoint_clock())) {
        TETHER_RETURN_IF_ERROR(take_checkpoint(feed_epoch, 0, 0, 0, nullptr));
        if (stop_pending && !checkpoint_abandoned) {
          stop_checkpointed = true;
          stop_clock = c;
        }
      }
      return Status::OK();
    };
    // A request waiting in the worker (not yet on a CLOCK) makes the feed
    // complete a clock now, ahead of the others if need be.
    hooks.want_clock = [&] { return checkpoint_wanted(/*take=*/false); };
    hooks.on_wait = [&] {
      LOG(INFO) << who << "waiting for a chunk at clock " << client->clock()
                << ": every chunk of the epoch is dealt and others still train theirs";
    };
    // A stop while waiting for a chunk: without checkpoints it ends the
    // wait at once; with them once its checkpoint is taken (the feed's
    // empty clocks reach the clock shard 0 picked), or when the stop
    // checkpoint's grace is over (the run says so and exits non-zero).
    hooks.stop = [&] {
      if (!notice_stop()) return false;
      if (!checkpointing || stop_checkpointed) return true;
      return SecondsSince(stop_grace->since) > kStopCheckpointGraceS;
    };
    std::string what = std::to_string(train.features.rows) + " training rows in chunks of " +
                       std::to_string(shape.chunk_rows()) + " rows";
    if (demand_streamed) {
      TETHER_ASSIGN_OR_RETURN(const uint64_t chunk_bytes, ChunkBytesFor(config, demand_files));
      SetStreamedShape(demand_files, chunk_bytes, &shape);
      RowStreamOptions so;
      so.block_rows = config.data().shuffle_buffer_rows();
      feed = std::make_unique<ChunkFeed>(
          shape,
          std::make_unique<StreamedChunkSource>(
              demand_files, demand_read_options, so, [&config](Dataset* d) { return PrepareStreamBlock(config, d); },
              [&client] { return client->Idle(1); }),
          std::move(hooks));
      what = std::to_string(demand_files.size()) + " streamed training file(s) in chunks of " +
             std::to_string(chunk_bytes) + " bytes (a gzip file whole)" +
             (config.train().chunk_bytes() > 0 ? " (train.chunk_bytes)" : " (chunk_rows x bytes per row)");
    } else {
      feed = std::make_unique<ChunkFeed>(shape, &train.features, &train.labels, std::move(hooks));
    }
    TETHER_ASSIGN_OR_RETURN(start_epoch, feed->FirstEpoch());
    // Stopped while waiting for its first chunk: the job is not over.
    if (feed->stopped()) return leave_stopped_feed();
    // A resume continues the epoch's loss only when shard 0 deals that epoch.
    if (!resume_dir.empty() && resume.epoch() != start_epoch) start_loss_sum = 0, start_loss_batches = 0;
    LOG(INFO) << who << "data on demand: " << what << " from shard 0"
              << (start_epoch > 0 ? ", joining at epoch " + std::to_string(start_epoch + 1) : std::string());
  }

  // A new process in the place of one that died, timed out or left (a
  // restart by hand or by a launcher, without --resume_from): with the
  // static split its share of the data continues where the previous process
  // stopped, not from epoch 1. The shards tell the clock that process
  // reached; with a fixed minibatch size the clock fixes the position:
  // minibatches M = clock × minibatches_per_clock, run across epochs of
  // ceil(rows ÷ minibatch) each, in the same per-(seed, rank, epoch) order.
  // The minibatch in flight when it died may be trained twice or not at all
  // (its push may or may not have reached every shard).
  bool rejoin_skip = false;
  if (resume_dir.empty() && client->rejoin_clock() > 0) {
    const int64_t prev = client->rejoin_clock();
    if (feed != nullptr) {
      // Data on demand: shard 0 deals what is left (FirstEpoch above).
    } else if (stream != nullptr || adaptive.enabled()) {
      LOG(WARNING) << who << "restarted in the running job (its previous process reached clock " << prev
                   << ") without a checkpoint: its share of the data starts again at epoch 1, because "
                   << (stream != nullptr ? "a streamed share (data.streaming)"
                                         : "adaptive minibatch sizes (train.adaptive_batch)")
                   << " has no position a clock can name; checkpoints (--resume_from) or data on demand "
                      "(--data_on_demand) continue where it stopped";
    } else if (train.features.rows > 0) {  // (an empty share has nothing to continue)
      const int64_t batches_per_epoch = (train.features.rows + bs - 1) / bs;
      const int64_t done = prev * per_clock;
      const int64_t epochs = config.train().epochs();
      start_epoch = static_cast<int>(std::min<int64_t>(epochs, done / batches_per_epoch));
      start_row = start_epoch < epochs ? std::min(train.features.rows, (done % batches_per_epoch) * bs) : 0;
      minibatches = done;
      rejoin_skip = true;
      LOG(WARNING) << who << "restarted in the running job without a checkpoint: its previous process reached clock "
                   << prev << " (" << done << " minibatches of " << bs << " rows), so its share continues at "
                   << (start_epoch < epochs ? "epoch " + std::to_string(start_epoch + 1) + ", row " +
                                                  std::to_string(start_row) + " of " +
                                                  std::to_string(train.features.rows)
                                            : std::string("the end (nothing left to train)"));
    }
  }

  std::vector<int64_t> epoch_rows;  // rows trained per epoch (WorkerStats.epoch_rows)
  for (int epoch = start_epoch; epoch < config.train().epochs(); ++epoch) {
    const bool first = epoch == start_epoch && (!resume_dir.empty() || rejoin_skip);
    const bool dealt_epoch = first && !dealt_lines.empty();
    feed_epoch = epoch;
    const uint64_t epoch_samples_from = report.samples;
    CsrMatrix x, y;
    // data.streaming: x / y hold one block at a time; the minibatch loop
    // below moves on to the next block when it has trained this one.
    Status stream_status;
    int64_t block_no = 0;
    auto next_block = [&](int64_t* b) {
      StatusOr<bool> more = NextStreamBlock(config, rank, epoch, stream.get(), &block_no, &x, &y);
      if (!more.ok()) stream_status = more.status();
      *b = 0;
      return more.ok() && *more;
    };
    // Data on demand: x / y hold one chunk at a time, like a streamed block.
    Status feed_status;
    auto next_chunk = [&](int64_t* b) {
      StatusOr<bool> more = feed->Next(epoch, &x, &y);
      if (!more.ok()) feed_status = more.status();
      *b = 0;
      return more.ok() && *more;
    };
    if (stream != nullptr) {
      TETHER_RETURN_IF_ERROR(StartStreamEpoch(config, rank, epoch, stream.get()));
      epoch_line_scratch.clear();
      epoch_lines = &epoch_line_scratch;
    } else if (feed != nullptr) {
      epoch_line_scratch.clear();
      epoch_lines = &epoch_line_scratch;
    } else if (dealt_epoch) {
      x = dealt_data.features;
      y = dealt_data.labels;
      epoch_lines = &dealt_lines;
    } else {
      // A fixed permutation per (seed, rank, epoch): runs are reproducible.
      EpochOrder(config.train().seed(), rank, epoch, train.features.rows, &order);
      x = GatherRows(train.features, order);
      y = GatherRows(train.labels, order);
      epoch_line_scratch.resize(order.size());
      for (size_t i = 0; i < order.size(); ++i)
        epoch_line_scratch[i] = static_cast<size_t>(order[i]) < train.source_lines.size()
                                    ? train.source_lines[order[i]]
                                    : order[i] + 1;
      epoch_lines = &epoch_line_scratch;
    }
    double loss_sum = first ? start_loss_sum : 0;
    int64_t loss_batches = first ? start_loss_batches : 0;
    // The next minibatch starts where this one ended: its size may change
    // at a clock (adaptive batch sizes).
    int64_t next_b = first ? start_row : 0;
    for (int64_t b = next_b;
         b < x.rows || (stream != nullptr && next_block(&b)) || (feed != nullptr && next_chunk(&b)); b = next_b) {
      // With checkpoints on, leave after a checkpoint, so the job resumes
      // from here; without, at once.
      if (notice_stop() && !checkpointing) return leave_job();
      const Minibatch batch{&x, &y, b, AdaptiveBatchEnd(adaptive, x.rows, b, bs)};
      next_b = batch.end;
      const auto pull_start = SteadyClock::now();
      TETHER_RETURN_IF_ERROR(model->Pull(batch, client.get()));
      pull_wait += SecondsSince(pull_start);
      // train.pipeline (Model::Pipelines): the next minibatch of this block
      // starts arriving while this one computes, read at its own clock.
      const bool pipelined = model->Pipelines();
      if (pipelined && batch.end < x.rows) {
        const int64_t next_clock = client->clock() + ((minibatches + 1) % per_clock == 0 ? 1 : 0);
        TETHER_RETURN_IF_ERROR(
            model->Prefetch(Minibatch{&x, &y, batch.end, std::min(x.rows, batch.end + bs)}, next_clock, client.get()));
      }
      TETHER_ASSIGN_OR_RETURN(float loss,
                              pipelined ? model->ComputeAndPush(batch, client.get()) : model->ComputeGradients(batch));
      if (minibatches == 0) first_loss = loss;
      loss_sum += loss;
      ++loss_batches;
      if (adaptive.enabled()) {
        // The gradients are means over the batch: a push of b rows steps
        // b / B as far as one of the mean size B (AdaptiveBatchConfig).
        const float w = static_cast<float>(batch.rows()) / static_cast<float>(config.train().minibatch_size());
        if (adaptive.step_scaling() == AdaptiveBatchConfig::LINEAR) client->SetPushScaling(w, 1.0f);
        if (adaptive.step_scaling() == AdaptiveBatchConfig::SERVER_WEIGHT) client->SetPushScaling(1.0f, w);
      }
      if (!pipelined) model->Push(client.get());
      if (slowdown > 1.0)
        TETHER_RETURN_IF_ERROR(slow_idle.Idle(SecondsSince(pull_start), [&](int ms) { return client->Idle(ms); }));
      report.samples += static_cast<uint64_t>(batch.rows());
      clock_rows += batch.rows();
      ++run_minibatches;
      bs_min = std::min(bs_min, bs);
      bs_max = std::max(bs_max, bs);
      clock_loss += loss;
      ++clock_batches;
      if (++minibatches % per_clock == 0) {
        // Ask shard 0 for a checkpoint clock (once per request): a stop, or
        // rank 0's timer.
        const bool want = checkpoint_wanted(/*take=*/true);
        const int64_t clock_bs = bs;
        if (adaptive.enabled()) {
          AdaptiveBatchClock r;
          r.set_rows(clock_rows);
          r.set_batch_size(static_cast<int32_t>(bs));
          r.set_minibatch_size(config.train().minibatch_size());
          *r.mutable_config() = adaptive;
          client->SetAdaptiveBatchReport(r);
        }
        clock_rows = 0;
        TETHER_RETURN_IF_ERROR(client->Clock(want));
        if (adaptive.enabled() && client->adaptive_batch_size() > 0) bs = client->adaptive_batch_size();
        if (client->clock() % log_every == 0)
          VLOG(1) << who << "clock " << client->clock() << " loss " << loss << " batch " << clock_bs;
        const double train_s = SecondsSince(train_start) - eval_seconds;
        if (metrics_log != nullptr) {
          metrics_log->Write({{"kind", "clock"}, {"clock", client->clock()}, {"epoch", epoch + 1},
                              {"loss", clock_loss / clock_batches}, {"samples", report.samples},
                              {"train_s", train_s}, {"pull_wait_s", pull_wait}, {"batch_size", clock_bs},
                              {"minibatches", minibatches}});
        }
        progress_now.clock_loss = clock_loss / clock_batches;
        progress_now.minibatches = minibatches;
        publish_progress(epoch + 1);
        clock_loss = 0;
        clock_batches = 0;
        if (progress.Due()) {
          LOG(INFO) << who << "epoch " << epoch + 1 << "/" << config.train().epochs() << " "
                    << static_cast<int>(100.0 * batch.end / x.rows) << "%, clock " << client->clock() << ", loss "
                    << loss << ", " << static_cast<int64_t>(report.samples / std::max(1e-9, train_s))
                    << " samples/s, " << static_cast<int>(100 * pull_wait / std::max(1e-9, train_s))
                    << "% waiting on pulls";
        }
        const int64_t c = client->clock();
        if (checkpointing && ((ckpt.every_clocks() > 0 && c % ckpt.every_clocks() == 0) ||
                              c == client->due_checkpoint_clock())) {
          TETHER_RETURN_IF_ERROR(take_checkpoint(epoch, batch.end, loss_sum, loss_batches,
                                                 dealt_epoch ? &dealt_lines : nullptr));
          if (stop_pending && !checkpoint_abandoned) {
            LOG(WARNING) << who << "leaving the job after the checkpoint at clock " << c
                         << " (resume with --resume_from=" << ckpt.dir() << ")";
            return leave_job();
          }
        }
      }
    }
    TETHER_RETURN_IF_ERROR(stream_status);
    TETHER_RETURN_IF_ERROR(feed_status);
    if (feed != nullptr && feed->stopped()) return leave_stopped_feed();
    epoch_rows.push_back(static_cast<int64_t>(report.samples - epoch_samples_from));
    if (feed != nullptr) {
      LOG(INFO) << who << "epoch " << epoch + 1 << " on demand: " << feed->epoch_rows()[static_cast<size_t>(epoch)]
                << " rows counted (" << epoch_rows.back() << " trained), " << feed->chunks_completed()
                << " chunks completed so far, " << feed->chunks_redealt() << " of them re-dealt, "
                << feed->wait_seconds() << " s waiting for the epoch's last chunks";
    }
    if (stream != nullptr) {
      if (epoch == start_epoch) report.train_rows = static_cast<int64_t>(report.samples - epoch_samples_from);
      std::string per_piece;
      for (size_t i = 0; i < stream->pieces().size(); ++i) {
        const FilePiece& p = stream->pieces()[i];
        per_piece += (i > 0 ? ", " : "") + stream->files()[static_cast<size_t>(p.file)].path +
                     (p.begin > 0 || p.end < stream->files()[static_cast<size_t>(p.file)].bytes
                          ? "[" + std::to_string(p.begin) + "," + std::to_string(p.end) + ")"
                          : "") +
                     ": " + std::to_string(stream->piece_rows_read()[i]);
      }
      LOG(INFO) << who << "epoch " << epoch + 1 << " streamed " << stream->rows_read() << " rows ("
                << epoch_rows.back() << " trained) from " << stream->pieces().size() << " piece(s); rows per piece: "
                << per_piece;
    }
    // An epoch in which this worker trained no minibatch (no rows dealt to
    // it, no chunk left) keeps the loss it had: 0/0 is no loss.
    if (loss_batches > 0) {
      report.final_loss = loss_sum / static_cast<double>(loss_batches);
      report.final_loss_from = "training";
    }
    progress_now.epoch_loss = report.final_loss;
    progress_now.minibatches = minibatches;
    publish_progress(epoch + 1);
    const double t = SecondsSince(train_start);
    LOG(INFO) << who << "epoch " << epoch + 1 << "/" << config.train().epochs() << " clock " << client->clock()
              << " loss " << report.final_loss << ", " << static_cast<int64_t>(report.samples / t)
              << " samples/s, " << static_cast<int>(100 * pull_wait / t) << "% waiting on pulls, " << t << " s"
              << (adaptive.enabled() ? ", batch " + std::to_string(bs) + " (" + std::to_string(epoch_rows.back()) +
                                           " rows this epoch)"
                                     : std::string());
    const double reference = std::isfinite(first_loss) ? std::max(first_loss, uniform_loss) : uniform_loss;
    if (!report.diverged && loss_batches > 0 &&
        LossDiverged(report.final_loss, reference, config.train().divergence_factor())) {
      report.diverged = true;
      report.diverged_at_epoch = epoch + 1;
      LOG(WARNING) << who << "training diverged at epoch " << epoch + 1 << ": mean loss " << report.final_loss
                   << " is above train.divergence_factor " << config.train().divergence_factor() << " x "
                   << reference << " (the larger of the first minibatch's loss " << first_loss << " and log("
                   << model->num_outputs() << ") = " << uniform_loss << "); lower optimizer.learning_rate"
                   << (config.train().fail_on_divergence() ? "; the run will exit 3 (train.fail_on_divergence)"
                                                           : "");
    }
    const int every = config.train().eval_every_epochs();
    if (every > 0 && (epoch + 1) % every == 0 && epoch + 1 < config.train().epochs() && !joiner) {
      // Every worker evaluates its part after the epoch; rank 0 merges the
      // parts once all are in (it does not wait for a slower worker here:
      // a round still open is merged at a later epoch's end or at the end).
      const auto eval_start = SteadyClock::now();
      pending_evals.push_back({epoch + 1, SecondsSince(train_start) - eval_seconds, report.samples,
                               report.final_loss, std::nullopt});
      TrainReport mid;
      TETHER_ASSIGN_OR_RETURN(bool merged, Evaluate(config, test, eval_setup, rank, epoch + 1,
                                                    rank == 0 ? MessageHeader::EVAL_POLL : MessageHeader::EVAL_ACK,
                                                    client.get(), model.get(), backend.get(), inv_propensity, &mid));
      if (rank != 0) {
        pending_evals.clear();  // only rank 0 reports
      } else {
        if (merged) pending_evals.back().merged = std::move(mid);
        // Older open rounds first, so the metrics log stays in epoch order.
        TETHER_RETURN_IF_ERROR(collect_pending(MessageHeader::EVAL_POLL));
      }
      eval_seconds += SecondsSince(eval_start);
    }
  }
  epoch_lines = nullptr;
  if (minibatches % per_clock != 0) TETHER_RETURN_IF_ERROR(client->Clock());
  {
    // This worker's counters travel with its barrier message; rank 0 gets
    // everyone's back from the servers (STATS) for the metrics JSON.
    const ClientStats& cs = client->stats();
    const double my_train_s = std::max(1e-9, SecondsSince(train_start) - eval_seconds);
    WorkerStats mine;
    mine.set_rank(rank);
    // This run's rows, like every other counter here (the job's samples/s
    // comes from them); the barrier's total includes the rows trained
    // before a resume.
    mine.set_samples(report.samples - samples_before);
    mine.set_train_seconds(my_train_s);
    mine.set_pulls(cs.pulls);
    mine.set_rows_pulled(cs.rows_pulled);
    mine.set_rows_read(cs.rows_read);
    mine.set_cache_hits(cs.cache_hits);
    mine.set_pushes(cs.pushes);
    mine.set_rows_pushed(cs.rows_pushed);
    mine.set_bytes_sent(cs.bytes_sent);
    mine.set_bytes_received(cs.bytes_received);
    mine.set_wait_seconds(cs.wait_seconds);
    mine.set_wait_fraction(std::min(1.0, cs.wait_seconds / my_train_s));
    mine.set_train_start_unix_s(train_start_unix_s);
    mine.set_run_samples(report.samples - samples_before);
    mine.set_train_end_unix_s(UnixSeconds() - eval_seconds);
    mine.set_cache_capacity_bytes(cs.cache_capacity_bytes);
    mine.set_cache_peak_bytes(cs.cache_peak_bytes);
    mine.set_cache_evictions(cs.cache_evictions);
    mine.set_cache_hit_rate(cs.rows_read > 0 ? static_cast<double>(cs.cache_hits) / cs.rows_read : 0.0);
    // Data on demand: the rows of the chunks shard 0 counted, by epoch.
    if (feed != nullptr) epoch_rows = feed->epoch_rows();
    for (int64_t r : epoch_rows) mine.add_epoch_rows(r);
    mine.set_minibatches(run_minibatches);
    mine.set_batch_size_final(static_cast<int32_t>(bs));
    mine.set_batch_size_min(static_cast<int32_t>(bs_min));
    mine.set_batch_size_max(static_cast<int32_t>(bs_max));
    if (feed != nullptr) {
      mine.set_chunks_completed(feed->chunks_completed());
      mine.set_chunks_refused(feed->chunks_refused());
    }
    WorkerKeyListStats* kl = mine.mutable_key_lists();
    kl->set_defined(cs.key_lists_defined);
    kl->set_used(cs.key_lists_used);
    kl->set_resent(cs.key_lists_resent);
    kl->set_bytes_saved(cs.key_list_bytes_saved);
    if (const LocalReplica* replica = client->replica()) {  // model AVERAGE
      mine.mutable_average()->set_local_steps(replica->stats().local_updates);
      mine.mutable_average()->set_deltas_pushed(replica->stats().deltas_pushed);
    }
    // This worker's entry in a checkpoint cut after it finished: a resume
    // with nothing left to train reports its loss from there.
    CheckpointWorker finished_entry;
    if (report.final_loss_from != "none") finished_entry.set_final_loss(report.final_loss);
    finished_entry.set_diverged(report.diverged);
    finished_entry.set_diverged_at_epoch(report.diverged_at_epoch);
    TETHER_ASSIGN_OR_RETURN(report.total_samples,
                            client->Barrier(report.samples, mine, feed != nullptr, finished_entry));
  }
  report.train_seconds = SecondsSince(train_start) - eval_seconds;
  report.samples_per_second = report.total_samples / std::max(1e-9, report.train_seconds);
  std::string incomplete;  // set when workers left before the end (checkpoints on)
  if (checkpointing && rank == client->evaluator_rank()) {
    // The end of the job: every worker is at the barrier, so the shards hold
    // the trained model; worker 0 (or, when it left, the evaluator: the
    // lowest rank at the barrier) takes the final checkpoint alone.
    const auto t0 = SteadyClock::now();
    const int64_t clock = client->final_checkpoint_clock();  // the shards write their files at it too
    std::string dir = FreeCheckpointDir(ckpt.dir(), clock, true);
    const std::string same = CheckpointJoinPath(ckpt.dir(), CheckpointDirName(clock, true));
    std::error_code same_ec;
    if (manifest.final() && manifest.clock() == clock &&
        std::filesystem::equivalent(std::filesystem::path(resume_dir).parent_path(), ckpt.dir(), same_ec)) {
      // Resumed from a final checkpoint of this clock in checkpoint.dir:
      // every worker had finished and nothing was trained since, so it
      // already is this job's final one.
      LOG(INFO) << who << "the job resumed from the final checkpoint " << resume_dir
                << " and trained nothing since: it stays the final checkpoint (not written again)";
      report.last_checkpoint = resume_dir;
    } else {
      if (dir != same)
        LOG(WARNING) << who << same << " already holds a complete checkpoint (written before this job resumed): "
                     << "the final checkpoint goes to " << dir << " instead of over it";
      TETHER_ASSIGN_OR_RETURN(CheckpointReply reply, client->Checkpoint(dir, /*final=*/true, nullptr));
      // Workers that left before the end: the job did not finish. The
      // checkpoint keeps their places (LEFT) and is not a final one, so a
      // resume trains what they left; the run then ends in an error.
      std::string left;
      for (const CheckpointWorker& w : reply.workers)
        if (w.kind() == CheckpointWorker::LEFT || w.kind() == CheckpointWorker::GONE)
          left += (left.empty() ? "" : ", ") + std::to_string(w.rank());
      // Data on demand: this worker reached the barrier because shard 0 said
      // DONE, so every chunk of every epoch was completed, whoever left.
      const bool final = left.empty() || feed != nullptr;
      if (!final) {
        const std::string plain = FreeCheckpointDir(ckpt.dir(), clock, false);
        std::error_code ec;
        if (!std::filesystem::exists(plain, ec) && (std::filesystem::rename(dir, plain, ec), !ec)) dir = plain;
      }
      TETHER_RETURN_IF_ERROR(write_manifest(dir, clock, final, reply));
      ++report.checkpoints;
      report.last_checkpoint = dir;
      if (final) {
        LOG(INFO) << who << "final checkpoint written: " << dir << " (" << SecondsSince(t0) << " s)";
      } else {
        incomplete = "the job did not finish: worker(s) " + left +
                     " left before the end of training; their places are in " + dir + ": resume with --resume_from=" +
                     ckpt.dir() + " to train the rows they left";
        LOG(ERROR) << who << incomplete;
      }
    }
  }
  report.pull_wait_fraction = pull_wait / std::max(1e-9, report.train_seconds);
  LOG(INFO) << who << "training done: " << report.total_samples << " samples over all workers in "
            << report.train_seconds << " s (" << static_cast<int64_t>(report.samples_per_second) << " samples/s)";

  // Rank 0 evaluates and reports, or, when it left the job, the lowest rank
  // at the barrier (shard 0 names it in the barrier's reply).
  const int evaluator = client->evaluator_rank();
  if (evaluator != 0 && rank == evaluator)
    LOG(INFO) << who << "rank 0 left the job: this worker evaluates and writes the metrics"
              << (options.metrics_out.empty() ? " (no --metrics_out given to it: the metrics are logged only)" : "");
  if (rank != evaluator && !joiner) {
    // Partitioned evaluation: this worker's part of the test set, for the
    // evaluator to merge (the trained model: every worker is past the
    // barrier).
    TrainReport mine;
    TETHER_RETURN_IF_ERROR(Evaluate(config, test, eval_setup, rank, kFinalEvalRound, MessageHeader::EVAL_ACK,
                                    client.get(), model.get(), backend.get(), inv_propensity, &mine)
                               .status());
  }
  if (rank == evaluator) {
    TETHER_ASSIGN_OR_RETURN(report.servers, client->FetchServerStats());
    // A worker that never reached the barrier left (or was removed) before
    // the end: its rows were not all trained, so the job did not finish.
    // (Rows dealt on demand are dealt again when their worker leaves.)
    if (incomplete.empty() && !report.servers.empty() && !RowsDealtOnDemand(config)) {
      std::string missing;
      const ShardStats& s0 = report.servers[0];
      for (int r = 0; r < s0.workers_size(); ++r)
        if (!s0.workers(r).has_rank()) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      // Data on demand: their chunks were dealt again; shard 0 counted
      // every row of every epoch, so the job did finish.
      bool all_rows = feed != nullptr && s0.chunk_epoch_rows_size() == config.train().epochs();
      for (int e = 0; all_rows && e < s0.chunk_epoch_rows_size(); ++e)
        all_rows = s0.chunk_epoch_rows(e) == train.features.rows;
      if (!missing.empty() && all_rows) {
        LOG(WARNING) << who << "worker(s) " << missing << " left before the end of training; data on demand dealt "
                     << "their chunks again, and every epoch's " << train.features.rows << " rows were trained";
      } else if (!missing.empty()) {
        incomplete = "the job did not finish: worker(s) " + missing +
                     " left before the end of training, so their rows were not all trained" +
                     (checkpointing ? "" : " (with checkpoint.dir set, a resume trains what they left)");
      }
    }
    // With every worker's span in hand, the job's throughput is measured
    // from the first start to the last end, not over rank 0's own span.
    report.samples_per_second = JobSamplesPerSecond(report);
    LOG(INFO) << who << "job: " << static_cast<int64_t>(report.samples_per_second)
              << " samples/s from the first worker's start of training to the last one's end";
    // Mid-training rounds still open: every worker is past them now.
    TETHER_RETURN_IF_ERROR(collect_pending(MessageHeader::EVAL_WAIT));
    TETHER_ASSIGN_OR_RETURN(bool merged, Evaluate(config, test, eval_setup, rank, kFinalEvalRound,
                                                  MessageHeader::EVAL_WAIT, client.get(), model.get(), backend.get(),
                                                  inv_propensity, &report));
    if (!merged) return Status::Internal(who + "shard 0 answered the final evaluation before it was complete");
    LOG(INFO) << who << "evaluation by " << report.eval_workers << " worker(s): " << report.eval_seconds
              << " s (the slowest worker's part: " << report.eval_seconds_slowest << " s)";
    std::string line;
    for (const auto& [name, value] : report.test_metrics) line += " " + name + " " + FormatNumber(value);
    LOG(INFO) << who << "test (" << report.test_rows << " rows):" << line;
    log_eval(report, config.train().epochs(), report.train_seconds, false, report.samples, report.final_loss);
  }
  if (metrics_log != nullptr) TETHER_RETURN_IF_ERROR(metrics_log->Flush());
  const ClientStats& cs = client->stats();
  LOG(INFO) << who << cs.pulls << " pulls (" << cs.rows_pulled << " rows), " << cs.pushes << " pushes ("
            << cs.rows_pushed << " rows), " << cs.bytes_sent / 1e6 << " MB sent, " << cs.bytes_received / 1e6
            << " MB received";
  if (!incomplete.empty()) {
    // The metrics of what was trained are still written, saying why the
    // job failed; the run fails (and RunWorker tells the servers so).
    report.failure = incomplete;
    if (rank == evaluator && !options.metrics_out.empty())
      TETHER_RETURN_IF_ERROR(WriteMetricsJson(report, config, options.metrics_out));
    return Status::FailedPrecondition(who + incomplete);
  }
  if (Status bye = client->Bye(); !bye.ok()) {
    // The servers answered the goodbye with the job's failure (another
    // worker failed after this one's barrier): the metrics of what was
    // trained are still written, saying so, and the run fails.
    report.failure = bye.message();
    if (rank == evaluator && !options.metrics_out.empty()) {
      if (Status st = WriteMetricsJson(report, config, options.metrics_out); !st.ok())
        LOG(ERROR) << who << st.message();
    }
    return bye;
  }
  if (rank == evaluator && !options.metrics_out.empty())
    TETHER_RETURN_IF_ERROR(WriteMetricsJson(report, config, options.metrics_out));
  progress_now.minibatches = minibatches;
  publish_progress(config.train().epochs());
  return report;
}

}  // namespace

StatusOr<TrainReport> RunWorker(const JobConfig& config, const TrainerOptions& options) {
  std::unique_ptr<WorkerClient> client;
  StatusOr<TrainReport> result = RunWorkerWith(config, options, &client);
  if (result.ok() || client == nullptr) return result;
  const std::string who = "[worker " + std::to_string(options.rank) + "] ";
  const std::string& why = result.status().message();
  if (options.stop_requested && options.stop_requested()) {
    // The stop request cut a wait short (or the wait failed meanwhile): the
    // worker leaves as it would between minibatches.
    const bool cut_short = why.size() >= 14 && why.compare(why.size() - 14, 14, "stop requested") == 0;
    // With checkpoints on, a wait gives up on a stop only before training
    // starts or after kStopCheckpointGraceS: no stop checkpoint then.
    LOG(WARNING) << who << "stop requested at clock " << client->clock() << " while waiting"
                 << (cut_short ? "" : " (the wait ended with: " + why + ")") << ": leaving the job"
                 << (config.checkpoint().dir().empty()
                         ? std::string()
                         : " without a stop checkpoint (a resume starts from the latest complete one in " +
                               config.checkpoint().dir() + ")");
    if (Status st = client->Leave(kLeaveTimeoutMs); !st.ok())
      LOG(WARNING) << who << "goodbye incomplete: " << st.message();
    TrainReport report;
    report.left_early = true;
    return report;
  }
  if (client->stopping_shard() >= 0) {
    // A server told to stop went (no checkpoint.dir: at once) before this
    // worker could leave between minibatches.
    LOG(WARNING) << who << "server shard " << client->stopping_shard() << " was told to stop and is gone ("
                 << (why.rfind(who, 0) == 0 ? why.substr(who.size()) : why) << "): leaving the job without a checkpoint"
                 << (config.checkpoint().dir().empty() ? " (no checkpoint dir: a rerun starts from the beginning)"
                                                       : " (a resume starts from the latest complete one in " +
                                                             config.checkpoint().dir() + ")");
    if (Status st = client->Leave(kLeaveTimeoutMs); !st.ok())
      LOG(WARNING) << who << "goodbye incomplete: " << st.message();
    TrainReport report;
    report.left_early = true;
    report.stopped_by_shard = client->stopping_shard();
    return report;
  }
  if (client->bye_sent()) {
    // The goodbye's answer failed: the shards ended the job as failed after
    // this worker finished (another removed during the evaluation), or one
    // is gone. They know: nothing to tell them.
    return result;
  }
  if (client->removed()) {
    // The servers removed this worker (silent past cluster.worker_timeout_ms)
    // and went on without it: with data on demand its chunks were dealt
    // again and the job can still finish; with the static split the servers
    // end the job as failed themselves. An ABORT would only end it early.
    LOG(ERROR) << who << "removed from the job by the servers; leaving without aborting it";
    return result;
  }
  // A job that failed tells its servers so, or they would wait for this
  // worker until cluster.worker_timeout_ms and then end as if all went well.
  client->Abort("worker " + std::to_string(options.rank) + " failed: " +
                    (why.rfind(who, 0) == 0 ? why.substr(who.size()) : why),
                kLeaveTimeoutMs);
  return result;
}

ClientOptions ClientOptionsFor(const JobConfig& config, int rank, std::vector<std::string> servers) {
  ClientOptions o;
  o.rank = rank;
  o.servers = std::move(servers);
  o.staleness = EffectiveStaleness(config.consistency());
  o.data_on_demand = config.train().data_on_demand();
  o.epochs = config.train().epochs();
  o.consistency_model = config.consistency().model();
  o.job_id = JobId(config);
  o.generation = config.cluster().generation();
  o.tables = TablesForJob(config);
  o.heartbeat_interval_ms = config.cluster().heartbeat_interval_ms();
  o.request_timeout_ms = config.cluster().request_timeout_ms();
  o.liveness_timeout_ms = config.cluster().liveness_timeout_ms();
  o.first_connect_timeout_ms = config.cluster().startup_timeout_ms();
  o.send_hwm = config.cluster().send_hwm();
  o.recv_hwm = config.cluster().recv_hwm();
  // A fraction of the model needs the tables' sizes: RunWorker resolves it
  // (ResolveCacheCapacity) and sets the capacity in bytes.
  o.cache_capacity_bytes = config.consistency().cache_capacity_bytes();
  o.key_lists = config.consistency().key_list_cache();
  return o;
}

Status WriteMetricsJson(const TrainReport& r, const JobConfig& config, const std::string& path) {
  const nlohmann::json j = MetricsJson(r, config);
  return WriteFileAtomically(path, j.dump(2) + "\n");
}

}  // namespace tether
