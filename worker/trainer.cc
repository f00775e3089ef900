#include "worker/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/file_util.h"
#include "core/metrics.h"
#include "core/metrics_log.h"
#include "sparse/backend.h"
#include "sparse/idx_reader.h"
#include "sparse/reader.h"
#include "worker/client.h"
#include "worker/metrics_json.h"
#include "worker/model.h"
#include "worker/model_registry.h"
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

// Test-set metrics by label kind (see TrainReport::test_metrics).
class Evaluator {
 public:
  Evaluator(LabelKind kind, int64_t num_outputs, Backend* backend)
      : kind_(kind), outputs_(num_outputs), backend_(backend), ranking_({1, 3, 5}) {}

  // scores: rows × num_outputs of minibatch rows [begin, end) of `labels`.
  Status Add(const std::vector<float>& scores, const CsrMatrix& labels, int64_t begin, int64_t end) {
    const int64_t rows = end - begin;
    rows_ += rows;
    switch (kind_) {
      case LabelKind::kMultiLabel:
        ranking_.Add(scores.data(), rows, outputs_, labels.row_ptr.data() + begin, labels.col_idx.data());
        return Status::OK();
      case LabelKind::kBinary:
        for (int64_t r = 0; r < rows; ++r)
          binary_.Add(scores[r], labels.row_ptr[begin + r + 1] > labels.row_ptr[begin + r] ? 1.0f : 0.0f);
        return Status::OK();
      case LabelKind::kMultiClass: {
        top_.resize(rows);
        TETHER_RETURN_IF_ERROR(backend_->TopK(rows, outputs_, scores.data(), 1, top_.data()));
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t p = labels.row_ptr[begin + r];
          if (labels.row_ptr[begin + r + 1] == p) continue;
          // A tie at the top (C21) is not broken by class number: the true
          // class among G tied ones is right with probability 1/G.
          const float* s = scores.data() + r * outputs_;
          const float v = s[top_[r]];
          const auto same = [v](float x) { return x == v || (std::isnan(x) && std::isnan(v)); };
          int64_t g = 0;
          for (int64_t j = 0; j < outputs_; ++j) g += same(s[j]) ? 1 : 0;
          if (g > 1) ++tied_rows_;
          if (labels.col_idx[p] < outputs_ && same(s[labels.col_idx[p]])) correct_ += 1.0 / static_cast<double>(g);
        }
        double loss = 0;
        TETHER_RETURN_IF_ERROR(backend_->SoftmaxCrossEntropy(rows, outputs_, scores.data(),
                                                             RowSliceOf(labels, begin, end), 1.0f, nullptr, &loss));
        loss_sum_ += loss;
        return Status::OK();
      }
    }
    return Status::OK();
  }

  std::vector<std::pair<std::string, double>> Results() const {
    switch (kind_) {
      case LabelKind::kMultiLabel:
        return {{"precision_at_1", ranking_.PrecisionAt(1)}, {"precision_at_3", ranking_.PrecisionAt(3)},
                {"precision_at_5", ranking_.PrecisionAt(5)}, {"ndcg_at_1", ranking_.NdcgAt(1)},
                {"ndcg_at_3", ranking_.NdcgAt(3)},           {"ndcg_at_5", ranking_.NdcgAt(5)}};
      case LabelKind::kBinary:
        return {{"accuracy", binary_.Accuracy()}, {"auc", binary_.Auc()}, {"log_loss", binary_.LogLoss()}};
      case LabelKind::kMultiClass: {
        const double n = static_cast<double>(std::max<int64_t>(rows_, 1));
        return {{"accuracy", correct_ / n}, {"log_loss", loss_sum_ / n}};
      }
    }
    return {};
  }

  int64_t rows() const { return rows_; }
  // Rows whose top-ranked scores hold a tie (scored by expected value).
  int64_t tied_rows() const { return kind_ == LabelKind::kMultiLabel ? ranking_.tied_rows() : tied_rows_; }

 private:
  LabelKind kind_;
  int64_t outputs_;
  Backend* backend_;
  int64_t rows_ = 0;
  RankingMetrics ranking_;
  BinaryMetrics binary_;
  double correct_ = 0;
  int64_t tied_rows_ = 0;
  double loss_sum_ = 0;
  std::vector<uint32_t> top_;
};

Status Evaluate(const JobConfig& config, const Dataset& test, WorkerClient* client, Model* model, Backend* backend,
                TrainReport* report) {
  Evaluator eval(model->label_kind(), model->num_outputs(), backend);
  std::vector<float> scores;
  const int64_t bs = config.train().eval_minibatch_size();
  const int64_t max_rows = config.train().eval_max_rows();
  const int64_t rows = max_rows > 0 ? std::min(test.features.rows, max_rows) : test.features.rows;
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
  report->test_metrics = eval.Results();
  report->test_rows = eval.rows();
  if (eval.tied_rows() > 0) {
    LOG(WARNING) << "evaluation: " << eval.tied_rows() << " of " << eval.rows()
                 << " test rows have tied scores at the top of their ranking; ties are scored by their expected "
                    "value under a random order of the tied labels (a model that cannot tell labels apart never "
                    "looks perfect)";
  }
  return Status::OK();
}

}  // namespace

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
    opts.format = config.data().format() == XMC ? DataFormat::kXmc : DataFormat::kLibsvm;
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
    if (opts.format == DataFormat::kLibsvm) {
      opts.num_features = config.data().num_features();
      // A label count selects the LIBSVM reader's multi-label mode; binary
      // and multiclass files have one number per row (Dataset::targets).
      opts.num_labels = kind == LabelKind::kMultiLabel ? config.data().num_labels() : 0;
    }
    TETHER_ASSIGN_OR_RETURN(d, ReadDataset(file, opts));
  }
  const float scale = config.data().feature_scale();
  if (scale != 1.0f)
    for (float& v : d.features.values) v *= scale;
  if (config.data().normalize_rows()) NormalizeRows(&d.features);
  if (d.features.cols != config.data().num_features())
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

// RunWorker's body; `*client_out` holds the client once connected, so that
// RunWorker can say goodbye (stop) or ABORT (failure) on any error path.
StatusOr<TrainReport> RunWorkerWith(const JobConfig& config, const TrainerOptions& options,
                                    std::unique_ptr<WorkerClient>* client_out) {
  const int rank = options.rank;
  const int num_workers = config.cluster().num_workers();
  const std::string who = "[worker " + std::to_string(rank) + "] ";
  TrainReport report;

  // The model's own checks and its tables (sizes, message limits): refused
  // here, before any data is read or server contacted, not at HELLO.
  TETHER_RETURN_IF_ERROR(ValidateModelConfig(config));

  // A metrics file that cannot be written would be found only after the
  // whole run: check its directory now.
  if (rank == 0 && !options.metrics_out.empty()) {
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
  TETHER_ASSIGN_OR_RETURN(Dataset train, LoadSplit(config, config.data().train_file(), config.data().train_label_file(),
                                                   config.data().train_split(), rank, num_workers));
  Dataset test;
  if (rank == 0) {
    const bool same_file = config.data().test_file().empty();
    const std::string& test_file = same_file ? config.data().train_file() : config.data().test_file();
    const std::string& test_labels = same_file ? config.data().train_label_file() : config.data().test_label_file();
    TETHER_ASSIGN_OR_RETURN(test, LoadSplit(config, test_file, test_labels, config.data().test_split(), 0, 1));
  }
  report.train_rows = train.features.rows;
  LOG(INFO) << who << "read " << train.features.rows << " training rows (" << train.features.nnz()
            << " non-zeros) in " << SecondsSince(load_start) << " s"
            << (rank == 0 ? ", " + std::to_string(test.features.rows) + " test rows" : "");
  if (train.features.rows == 0)
    return Status::InvalidArgument(who + "partition " + std::to_string(rank) + " of " +
                                   config.data().train_file() + " has no rows; use fewer workers");

  const std::vector<TableSpec> tables = TablesForJob(config);
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, CreateModel(config, tables, backend.get(), rank));
  LOG(INFO) << who << "model " << model->name() << ", tables "
            << DescribeTables(google::protobuf::RepeatedPtrField<TableSpec>(tables.begin(), tables.end()));
  report.model = model->name();

  ClientOptions copts = ClientOptionsFor(config, rank, options.servers);
  copts.context = options.zmq_context;
  copts.abort = options.abort;
  copts.stop_requested = options.stop_requested;
  TETHER_ASSIGN_OR_RETURN(*client_out, WorkerClient::Connect(copts));
  std::unique_ptr<WorkerClient>& client = *client_out;
  LOG(INFO) << who << "connected to " << options.servers.size() << " server(s), model " << model->name()
            << ", staleness " << StalenessName(copts.staleness);

  // Observability (train.metrics_dir, progress_every_s, eval_every_epochs):
  // evaluations during training are timed apart and left out of train_s.
  std::unique_ptr<MetricsLog> metrics_log;
  if (!config.train().metrics_dir().empty()) {
    TETHER_ASSIGN_OR_RETURN(metrics_log, MetricsLog::Open(config.train().metrics_dir(), "worker", rank));
  }
  ProgressTimer progress(config.train().progress_every_s());
  double eval_seconds = 0, clock_loss = 0;
  int clock_batches = 0;
  auto log_eval = [&](const TrainReport& r, int epoch, double train_s, bool log_line) {
    std::string line;
    for (const auto& [name, value] : r.test_metrics) line += " " + name + " " + FormatNumber(value);
    if (log_line)
      LOG(INFO) << who << "test after epoch " << epoch << " (" << r.test_rows << " rows, " << train_s
                << " s of training):" << line;
    if (metrics_log == nullptr) return;
    nlohmann::json j{{"kind", "eval"}, {"epoch", epoch}, {"train_s", train_s}, {"samples", report.samples},
                     {"test_rows", r.test_rows}, {"loss", report.final_loss}};
    for (const auto& [name, value] : r.test_metrics) j[name] = std::isfinite(value) ? nlohmann::json(value) : nullptr;
    metrics_log->Write(std::move(j));
  };

  std::vector<int64_t> order(train.features.rows);
  const int64_t bs = config.train().minibatch_size();
  const int per_clock = config.train().minibatches_per_clock();
  const int log_every = std::max(1, config.train().log_every_clocks());
  int64_t minibatches = 0;
  const auto train_start = SteadyClock::now();
  const double train_start_unix_s = UnixSeconds();
  double pull_wait = 0;
  // Straggler simulation: this worker idles (slowdown − 1) × its own
  // minibatch time, heartbeating, so it is slow but alive.
  const double slowdown = rank == config.train().slowdown_rank() ? config.train().slowdown() : 1.0;
  if (slowdown > 1.0) LOG(INFO) << who << "simulating a straggler: " << slowdown << "x slower";
  // C24: the loss itself tells divergence, not only a NaN. Its reference is
  // the untrained model's loss (the first minibatch's) or a uniform
  // softmax's, whichever is larger, so a first minibatch already blown up
  // is no excuse.
  double first_loss = 0;
  const double uniform_loss = std::log(std::max<double>(2.0, static_cast<double>(model->num_outputs())));
  for (int epoch = 0; epoch < config.train().epochs(); ++epoch) {
    // A fixed permutation per (seed, rank, epoch): runs are reproducible.
    EpochOrder(config.train().seed(), rank, epoch, train.features.rows, &order);
    const CsrMatrix x = GatherRows(train.features, order);
    const CsrMatrix y = GatherRows(train.labels, order);
    double loss_sum = 0;
    int64_t loss_batches = 0;
    for (int64_t b = 0; b < x.rows; b += bs) {
      if (options.stop_requested && options.stop_requested()) {
        LOG(WARNING) << who << "stop requested at clock " << client->clock() << ": leaving the job";
        report.left_early = true;
        if (metrics_log != nullptr) (void)metrics_log->Flush();
        // Bounded: a stalled or dead shard must not hold up a stop.
        if (Status st = client->Leave(kLeaveTimeoutMs); !st.ok())
          LOG(WARNING) << who << "goodbye incomplete: " << st.message();
        return report;
      }
      const Minibatch batch{&x, &y, b, std::min(x.rows, b + bs)};
      const auto pull_start = SteadyClock::now();
      TETHER_RETURN_IF_ERROR(model->Pull(batch, client.get()));
      pull_wait += SecondsSince(pull_start);
      TETHER_ASSIGN_OR_RETURN(float loss, model->ComputeGradients(batch));
      if (minibatches == 0) first_loss = loss;
      loss_sum += loss;
      ++loss_batches;
      model->Push(client.get());
      if (slowdown > 1.0)
        TETHER_RETURN_IF_ERROR(client->Idle(static_cast<int>(1000.0 * (slowdown - 1.0) * SecondsSince(pull_start))));
      report.samples += static_cast<uint64_t>(batch.rows());
      clock_loss += loss;
      ++clock_batches;
      if (++minibatches % per_clock == 0) {
        TETHER_RETURN_IF_ERROR(client->Clock());
        if (client->clock() % log_every == 0) VLOG(1) << who << "clock " << client->clock() << " loss " << loss;
        const double train_s = SecondsSince(train_start) - eval_seconds;
        if (metrics_log != nullptr) {
          metrics_log->Write({{"kind", "clock"}, {"clock", client->clock()}, {"epoch", epoch + 1},
                              {"loss", clock_loss / clock_batches}, {"samples", report.samples},
                              {"train_s", train_s}, {"pull_wait_s", pull_wait}});
        }
        clock_loss = 0;
        clock_batches = 0;
        if (progress.Due()) {
          LOG(INFO) << who << "epoch " << epoch + 1 << "/" << config.train().epochs() << " "
                    << static_cast<int>(100.0 * batch.end / x.rows) << "%, clock " << client->clock() << ", loss "
                    << loss << ", " << static_cast<int64_t>(report.samples / std::max(1e-9, train_s))
                    << " samples/s, " << static_cast<int>(100 * pull_wait / std::max(1e-9, train_s))
                    << "% waiting on pulls";
        }
      }
    }
    report.final_loss = loss_sum / std::max<int64_t>(1, loss_batches);
    const double t = SecondsSince(train_start);
    LOG(INFO) << who << "epoch " << epoch + 1 << "/" << config.train().epochs() << " clock " << client->clock()
              << " loss " << report.final_loss << ", " << static_cast<int64_t>(report.samples / t)
              << " samples/s, " << static_cast<int>(100 * pull_wait / t) << "% waiting on pulls, " << t << " s";
    const double reference = std::isfinite(first_loss) ? std::max(first_loss, uniform_loss) : uniform_loss;
    if (!report.diverged && LossDiverged(report.final_loss, reference, config.train().divergence_factor())) {
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
    if (rank == 0 && every > 0 && (epoch + 1) % every == 0 && epoch + 1 < config.train().epochs()) {
      const auto eval_start = SteadyClock::now();
      const double train_s = SecondsSince(train_start) - eval_seconds;
      TrainReport mid;
      TETHER_RETURN_IF_ERROR(Evaluate(config, test, client.get(), model.get(), backend.get(), &mid));
      eval_seconds += SecondsSince(eval_start);
      log_eval(mid, epoch + 1, train_s, true);
    }
  }
  if (minibatches % per_clock != 0) TETHER_RETURN_IF_ERROR(client->Clock());
  {
    // This worker's counters travel with its barrier message; rank 0 gets
    // everyone's back from the servers (STATS) for the metrics JSON.
    const ClientStats& cs = client->stats();
    const double my_train_s = std::max(1e-9, SecondsSince(train_start) - eval_seconds);
    WorkerStats mine;
    mine.set_rank(rank);
    mine.set_samples(report.samples);
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
    mine.set_train_end_unix_s(UnixSeconds() - eval_seconds);
    TETHER_ASSIGN_OR_RETURN(report.total_samples, client->Barrier(report.samples, mine));
  }
  report.train_seconds = SecondsSince(train_start) - eval_seconds;
  report.samples_per_second = report.total_samples / std::max(1e-9, report.train_seconds);
  report.pull_wait_fraction = pull_wait / std::max(1e-9, report.train_seconds);
  LOG(INFO) << who << "training done: " << report.total_samples << " samples over all workers in "
            << report.train_seconds << " s (" << static_cast<int64_t>(report.samples_per_second) << " samples/s)";

  if (rank == 0) {
    TETHER_ASSIGN_OR_RETURN(report.servers, client->FetchServerStats());
    // With every worker's span in hand, the job's throughput is measured
    // from the first start to the last end, not over rank 0's own span.
    report.samples_per_second = JobSamplesPerSecond(report);
    LOG(INFO) << who << "job: " << static_cast<int64_t>(report.samples_per_second)
              << " samples/s from the first worker's start of training to the last one's end";
    TETHER_RETURN_IF_ERROR(Evaluate(config, test, client.get(), model.get(), backend.get(), &report));
    std::string line;
    for (const auto& [name, value] : report.test_metrics) line += " " + name + " " + FormatNumber(value);
    LOG(INFO) << who << "test (" << report.test_rows << " rows):" << line;
    log_eval(report, config.train().epochs(), report.train_seconds, false);
  }
  if (metrics_log != nullptr) TETHER_RETURN_IF_ERROR(metrics_log->Flush());
  const ClientStats& cs = client->stats();
  LOG(INFO) << who << cs.pulls << " pulls (" << cs.rows_pulled << " rows), " << cs.pushes << " pushes ("
            << cs.rows_pushed << " rows), " << cs.bytes_sent / 1e6 << " MB sent, " << cs.bytes_received / 1e6
            << " MB received";
  TETHER_RETURN_IF_ERROR(client->Bye());
  if (rank == 0 && !options.metrics_out.empty())
    TETHER_RETURN_IF_ERROR(WriteMetricsJson(report, config, options.metrics_out));
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
    LOG(WARNING) << who << "stop requested at clock " << client->clock() << " while waiting"
                 << (cut_short ? "" : " (the wait ended with: " + why + ")") << ": leaving the job";
    if (Status st = client->Leave(kLeaveTimeoutMs); !st.ok())
      LOG(WARNING) << who << "goodbye incomplete: " << st.message();
    TrainReport report;
    report.left_early = true;
    return report;
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
  o.job_id = JobId(config);
  o.generation = config.cluster().generation();
  o.tables = TablesForJob(config);
  o.heartbeat_interval_ms = config.cluster().heartbeat_interval_ms();
  o.request_timeout_ms = config.cluster().request_timeout_ms();
  o.liveness_timeout_ms = config.cluster().liveness_timeout_ms();
  o.send_hwm = config.cluster().send_hwm();
  o.recv_hwm = config.cluster().recv_hwm();
  return o;
}

Status WriteMetricsJson(const TrainReport& r, const JobConfig& config, const std::string& path) {
  const nlohmann::json j = MetricsJson(r, config);
  return WriteFileAtomically(path, j.dump(2) + "\n");
}

}  // namespace tether
