#include "serving/predictor.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "eval/metrics.h"
#include "serving/scorer.h"
#include "compute/backend.h"
#include "worker/eval/evaluator.h"
#include "worker/models/model_registry.h"

namespace tether {
namespace {

// Rows per block: PredictOptions::block_rows, else the config's
// eval_minibatch_size lowered so a block's scores stay within 256 MiB.
int64_t BlockRows(const PredictOptions& options, const JobConfig& c, int64_t outputs) {
  int64_t block = options.block_rows > 0 ? options.block_rows : c.train().eval_minibatch_size();
  const int64_t cap = std::max<int64_t>(1, (int64_t{256} << 20) / static_cast<int64_t>(sizeof(float)) /
                                               std::max<int64_t>(1, outputs));
  if (options.block_rows <= 0) block = std::min(block, cap);
  return std::max<int64_t>(1, block);
}

// Blocks of rows dealt to threads, each thread with its own scorer; the
// top-k of each block go straight into *out (blocks do not overlap), the
// metrics into one Evaluator in block order (see predictor.h), on the
// thread whose block is next.
class BlockRun {
 public:
  BlockRun(const ScorerSet& scorers, const Dataset& data, LabelKind kind, int64_t block, bool has_labels,
           Evaluator* eval, Predictions* out)
      : scorers_(scorers), data_(data), kind_(kind), block_(block), has_labels_(has_labels), eval_(eval),
        out_(out), num_blocks_((out->rows + block - 1) / block) {}

  int64_t num_blocks() const { return num_blocks_; }

  // Runs one thread per backend (this thread takes the first); returns the
  // first error any of them met.
  Status Run(std::vector<std::unique_ptr<Backend>> backends) {
    std::vector<std::thread> pool;
    for (size_t t = 1; t < backends.size(); ++t) pool.emplace_back([this, &backends, t] { Work(std::move(backends[t])); });
    Work(std::move(backends[0]));
    for (std::thread& t : pool) t.join();
    return failed_ ? first_error_ : Status::OK();
  }

 private:
  void Work(std::unique_ptr<Backend> backend) {
    Backend* raw = backend.get();
    std::unique_ptr<Scorer> scorer = scorers_.make(std::move(backend));
    std::vector<float> scores;
    std::vector<uint32_t> top;
    for (int64_t b = next_block_++; b < num_blocks_; b = next_block_++) {
      const int64_t begin = b * block_, end = std::min(out_->rows, begin + block_);
      Status st = scorer->Score(data_.features, begin, end, &scores);
      if (st.ok() && kind_ != LabelKind::kBinary) {
        top.resize((end - begin) * out_->k);
        st = raw->TopK(end - begin, scorers_.outputs, scores.data(), out_->k, top.data());
      }
      if (!st.ok()) return Fail(st);
      Keep(begin, end, scores, top);
      if (has_labels_ && !Commit(b, scores, begin, end)) return;
    }
  }

  // Rows [begin, end)'s top-k labels and their scores into *out_.
  void Keep(int64_t begin, int64_t end, const std::vector<float>& scores, const std::vector<uint32_t>& top) {
    const int k = out_->k;
    for (int64_t r = 0; r < end - begin; ++r) {
      for (int j = 0; j < k; ++j) {
        const uint32_t idx = kind_ == LabelKind::kBinary ? 0 : top[r * k + j];
        out_->labels[(begin + r) * k + j] = idx;
        out_->scores[(begin + r) * k + j] = scores[r * scorers_.outputs + idx];
      }
    }
  }

  // Waits for block b's turn and adds its metrics; false once any thread failed.
  bool Commit(int64_t b, const std::vector<float>& scores, int64_t begin, int64_t end) {
    std::unique_lock<std::mutex> lock(mu_);
    turn_.wait(lock, [&] { return failed_ || next_commit_ == b; });
    if (failed_) return false;
    const Status st = eval_->Add(scores, data_.labels, begin, end);
    if (!st.ok()) {
      if (!failed_) first_error_ = st;
      failed_ = true;
    }
    ++next_commit_;
    turn_.notify_all();
    return true;
  }

  void Fail(const Status& st) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_) first_error_ = st;
    failed_ = true;
    turn_.notify_all();
  }

  const ScorerSet& scorers_;
  const Dataset& data_;
  const LabelKind kind_;
  const int64_t block_;
  const bool has_labels_;
  Evaluator* const eval_;
  Predictions* const out_;
  const int64_t num_blocks_;
  std::atomic<int64_t> next_block_{0};
  std::mutex mu_;
  std::condition_variable turn_;
  int64_t next_commit_ = 0;  // guarded by mu_
  bool failed_ = false;      // guarded by mu_ (read unlocked only after the threads joined)
  Status first_error_;       // guarded by mu_
};

// Scores `data` with `scorers` (one model's or an ensemble's), the model
// settings from `c`.
StatusOr<Predictions> PredictWith(const JobConfig& c, const ScorerSet& scorers, const LabelCounts& counts,
                                  const Dataset& data, const PredictOptions& options);

Status CheckPredictInput(const TrainedModel& model, const PredictOptions& options) {
  if (options.threads < 1)
    return Status::InvalidArgument("threads must be >= 1, got " + std::to_string(options.threads));
  if (options.top_k < 1) return Status::InvalidArgument("top_k must be >= 1, got " + std::to_string(options.top_k));
  if (model.config.data().hashed_features())
    return Status::InvalidArgument(
        "the model was trained with data.hashed_features (64-bit feature ids); tether-predict scores models with "
        "a declared input width only: evaluate a hashed model with data.test_file in the training job");
  return Status::OK();
}

}  // namespace

int64_t OutputLabelId(const JobConfig& config, uint32_t index) {
  switch (LabelKindOf(config)) {
    case LabelKind::kMultiLabel: return static_cast<int64_t>(index) + config.data().index_base();
    case LabelKind::kMultiClass: return static_cast<int64_t>(index) + config.data().label_base();
    case LabelKind::kBinary: return 1;
  }
  return index;
}

StatusOr<Predictions> PredictRows(const TrainedModel& model, const LabelCounts& counts, const Dataset& data,
                                  const PredictOptions& options) {
  TETHER_RETURN_IF_ERROR(CheckPredictInput(model, options));
  TETHER_ASSIGN_OR_RETURN(const ScorerSet scorers, MakeScorerSet(model));
  return PredictWith(model.config, scorers, counts, data, options);
}

StatusOr<Predictions> PredictEnsemble(const std::vector<const TrainedModel*>& models, const LabelCounts& counts,
                                      const Dataset& data, const PredictOptions& options) {
  for (const TrainedModel* m : models) TETHER_RETURN_IF_ERROR(CheckPredictInput(*m, options));
  TETHER_ASSIGN_OR_RETURN(const ScorerSet scorers, MakeEnsembleScorerSet(models, options.device));
  return PredictWith(models[0]->config, scorers, counts, data, options);
}

namespace {

StatusOr<Predictions> PredictWith(const JobConfig& c, const ScorerSet& scorers, const LabelCounts& counts,
                                  const Dataset& data, const PredictOptions& options) {
  const LabelKind kind = LabelKindOf(c);
  if (data.features.cols != c.data().num_features())
    return Status::InvalidArgument("the input has " + std::to_string(data.features.cols) +
                                   " features; the model was trained on " + std::to_string(c.data().num_features()));

  Predictions out;
  out.rows = data.features.rows;
  out.outputs = scorers.outputs;
  out.k = kind == LabelKind::kBinary ? 1 : static_cast<int>(std::min<int64_t>(options.top_k, scorers.outputs));
  out.labels.assign(out.rows * out.k, 0);
  out.scores.assign(out.rows * out.k, 0.0f);
  // Binary and multiclass rows always carry their label (LoadSplit refuses
  // a row without one); multi-label input may carry none (new documents).
  const bool has_labels = kind != LabelKind::kMultiLabel || data.labels.nnz() > 0;
  std::vector<double> inv_propensity;
  if (kind == LabelKind::kMultiLabel && !counts.empty())
    inv_propensity = InversePropensity(counts.counts, counts.num_rows, options.psp_a, options.psp_b);

  // The Evaluator's backend does the multiclass top-1, on the thread holding
  // the turn, so it gets a backend of its own.
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<Backend> eval_backend, CreateBackend("cpu", 1));
  Evaluator eval(kind, scorers.outputs, eval_backend.get(), inv_propensity);
  BlockRun run(scorers, data, kind, BlockRows(options, c, scorers.outputs), has_labels, &eval, &out);
  const int threads = static_cast<int>(std::min<int64_t>(options.threads, std::max<int64_t>(1, run.num_blocks())));
  // Backends are made here, on the calling thread, so a missing GPU fails
  // before any work starts.
  std::vector<std::unique_ptr<Backend>> backends;
  for (int t = 0; t < threads; ++t) {
    TETHER_ASSIGN_OR_RETURN(std::unique_ptr<Backend> b, CreateBackend(options.device, 1));
    backends.push_back(std::move(b));
  }
  TETHER_RETURN_IF_ERROR(run.Run(std::move(backends)));
  if (has_labels) {
    out.metrics = eval.Results();
    out.tied_rows = eval.tied_rows();
  }
  return out;
}

}  // namespace

}  // namespace tether
