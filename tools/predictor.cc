#include "tools/predictor.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "core/metrics.h"
#include "core/table_spec.h"
#include "sparse/backend.h"
#include "worker/dense_mlp.h"
#include "worker/evaluator.h"
#include "worker/model_registry.h"
#include "worker/sparse_lr.h"
#include "worker/xmc_mlp.h"

namespace tether {
namespace {

const TrainedTable* FindTrained(const TrainedModel& m, const std::string& name) {
  for (const TrainedTable& t : m.tables)
    if (t.spec.name() == name) return &t;
  return nullptr;
}

StatusOr<const TrainedTable*> Table(const TrainedModel& m, const std::string& name, TableSpec::Kind kind,
                                    uint64_t width) {
  const TrainedTable* t = FindTrained(m, name);
  if (t == nullptr) return Status::InvalidArgument("the model has no table '" + name + "'");
  const uint64_t have = IsRowTable(t->spec) ? t->spec.dim() : t->spec.size();
  if (t->spec.kind() != kind || have != width)
    return Status::InvalidArgument("table '" + name + "' is a " + (IsRowTable(t->spec) ? "row" : "dense") +
                                   " table of width " + std::to_string(have) + "; the model needs a " +
                                   (kind == TableSpec::ROW ? "row" : "dense") + " table of width " +
                                   std::to_string(width));
  return t;
}

// Row `key` of a trained row table into out (dim floats): the trained row,
// or the initializer's value for a key never trained.
void RowOf(const TrainedTable& t, uint64_t key, float* out) {
  const uint32_t dim = t.spec.dim();
  const auto it = std::lower_bound(t.keys.begin(), t.keys.end(), key);
  if (it != t.keys.end() && *it == key) {
    std::copy_n(t.values.data() + (it - t.keys.begin()) * dim, dim, out);
    return;
  }
  const bool zeros = t.spec.init().kind() == TableInitializer::ZEROS;
  for (uint32_t j = 0; j < dim; ++j)
    out[j] = zeros ? 0.0f : InitialWeight(t.spec.init().seed(), t.spec.id(), key, j, t.spec.init().bound());
}

// One thread's scorer: its backend, its compute object and scratch.
class Scorer {
 public:
  virtual ~Scorer() = default;
  // *scores = (end − begin) × outputs logits of rows [begin, end) of x.
  virtual Status Score(const CsrMatrix& x, int64_t begin, int64_t end, std::vector<float>* scores) = 0;
};

// XMC MLP (and its sampled-softmax variant, which has the same tables):
// w2 (L × (H + 1), bias last) is gathered once and shared; each block
// gathers the w1 rows of its features.
struct XmcShared {
  XmcMlpShape shape;
  const TrainedTable* w1 = nullptr;
  std::vector<float> b1, w2, b2;
};

class XmcScorer final : public Scorer {
 public:
  XmcScorer(const XmcShared* shared, std::unique_ptr<Backend> backend)
      : shared_(shared), backend_(std::move(backend)), model_(shared->shape, backend_.get()) {}
  Status Score(const CsrMatrix& x, int64_t begin, int64_t end, std::vector<float>* scores) override {
    TETHER_RETURN_IF_ERROR(LocalizeBatch(x, begin, end, &keys_, &x_local_));
    const int64_t h = shared_->shape.hidden;
    w1_.resize(keys_.size() * h);
    for (size_t i = 0; i < keys_.size(); ++i) RowOf(*shared_->w1, keys_[i], w1_.data() + i * h);
    const XmcParams p{w1_.data(), static_cast<int64_t>(keys_.size()), shared_->b1.data(), shared_->w2.data(),
                      shared_->b2.data(), /*w2_stride=*/h + 1};
    return model_.Predict(x_local_, p, scores);
  }

 private:
  const XmcShared* shared_;
  std::unique_ptr<Backend> backend_;
  XmcMlp model_;
  std::vector<uint64_t> keys_;
  CsrMatrix x_local_;
  std::vector<float> w1_;
};

struct LrShared {
  int64_t num_features = 0;
  const TrainedTable* w = nullptr;
  float b = 0;
};

class LrScorer final : public Scorer {
 public:
  LrScorer(const LrShared* shared, std::unique_ptr<Backend> backend)
      : shared_(shared), backend_(std::move(backend)), model_(shared->num_features, backend_.get()) {}
  Status Score(const CsrMatrix& x, int64_t begin, int64_t end, std::vector<float>* scores) override {
    TETHER_RETURN_IF_ERROR(LocalizeBatch(x, begin, end, &keys_, &x_local_));
    w_.resize(keys_.size());
    for (size_t i = 0; i < keys_.size(); ++i) RowOf(*shared_->w, keys_[i], &w_[i]);
    const SparseLrParams p{w_.data(), static_cast<int64_t>(keys_.size()), &shared_->b};
    return model_.Predict(x_local_, p, scores);
  }

 private:
  const LrShared* shared_;
  std::unique_ptr<Backend> backend_;
  SparseLr model_;
  std::vector<uint64_t> keys_;
  CsrMatrix x_local_;
  std::vector<float> w_;
};

struct DenseShared {
  std::vector<int64_t> widths;
  DenseMlpParams params;  // points into the TrainedModel's dense tables
  float offset = 0;       // data.feature_offset
};

class DenseScorer final : public Scorer {
 public:
  DenseScorer(const DenseShared* shared, std::unique_ptr<Backend> backend)
      : shared_(shared), backend_(std::move(backend)), model_(shared->widths, backend_.get()) {}
  Status Score(const CsrMatrix& x, int64_t begin, int64_t end, std::vector<float>* scores) override {
    DensifyRows(x, begin, end, &x_);
    if (shared_->offset != 0.0f)
      for (float& v : x_) v += shared_->offset;
    return model_.Predict(x_.data(), end - begin, shared_->params, scores);
  }

 private:
  const DenseShared* shared_;
  std::unique_ptr<Backend> backend_;
  DenseMlp model_;
  std::vector<float> x_;
};

std::string ModelKindName(const JobConfig& c) {
  if (!c.model().name().empty()) return c.model().name();
  switch (c.model().type()) {
    case XMC_MLP: return "xmc_mlp";
    case SPARSE_LR: return "sparse_lr";
    case DENSE_MLP: return "dense_mlp";
  }
  return "?";
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
  const JobConfig& c = model.config;
  if (options.threads < 1)
    return Status::InvalidArgument("threads must be >= 1, got " + std::to_string(options.threads));
  if (options.top_k < 1) return Status::InvalidArgument("top_k must be >= 1, got " + std::to_string(options.top_k));
  const LabelKind kind = LabelKindOf(c);
  const std::string name = ModelKindName(c);
  if (c.data().hashed_features())
    return Status::InvalidArgument(
        "the model was trained with data.hashed_features (64-bit feature ids); tether-predict scores models with "
        "a declared input width only: evaluate a hashed model with data.test_file in the training job");

  // The tables every thread shares, and a factory of per-thread scorers.
  XmcShared xmc;
  LrShared lr;
  DenseShared dense;
  int64_t outputs = 0;
  std::function<std::unique_ptr<Scorer>(std::unique_ptr<Backend>)> make;
  if (name == "xmc_mlp") {
    xmc.shape.num_features = c.data().num_features();
    xmc.shape.hidden = c.model().hidden();
    xmc.shape.num_labels = c.data().num_labels();
    xmc.shape.loss = c.model().loss() == BCE ? XmcLoss::kBce : XmcLoss::kSoftmax;
    const auto h = static_cast<uint64_t>(xmc.shape.hidden);
    TETHER_ASSIGN_OR_RETURN(xmc.w1, Table(model, "w1", TableSpec::ROW, h));
    TETHER_ASSIGN_OR_RETURN(const TrainedTable* b1, Table(model, "b1", TableSpec::DENSE, h));
    TETHER_ASSIGN_OR_RETURN(const TrainedTable* w2, Table(model, "w2", TableSpec::ROW, h + 1));
    xmc.b1 = b1->values;
    const int64_t l = xmc.shape.num_labels;
    xmc.w2.resize(l * (h + 1));
    xmc.b2.resize(l);
    for (int64_t i = 0; i < l; ++i) {
      RowOf(*w2, static_cast<uint64_t>(i), xmc.w2.data() + i * (h + 1));
      xmc.b2[i] = xmc.w2[i * (h + 1) + h];
    }
    outputs = l;
    make = [&xmc](std::unique_ptr<Backend> b) { return std::make_unique<XmcScorer>(&xmc, std::move(b)); };
  } else if (name == "sparse_lr") {
    lr.num_features = c.data().num_features();
    TETHER_ASSIGN_OR_RETURN(lr.w, Table(model, "w", TableSpec::ROW, 1));
    TETHER_ASSIGN_OR_RETURN(const TrainedTable* b, Table(model, "b", TableSpec::DENSE, 1));
    lr.b = b->values[0];
    outputs = 1;
    make = [&lr](std::unique_ptr<Backend> b) { return std::make_unique<LrScorer>(&lr, std::move(b)); };
  } else if (name == "dense_mlp") {
    dense.widths = DenseMlpLayerWidths(c);
    dense.offset = c.data().feature_offset();
    for (size_t i = 0; i + 1 < dense.widths.size(); ++i) {
      const std::string layer = std::to_string(i + 1);
      TETHER_ASSIGN_OR_RETURN(const TrainedTable* w,
                              Table(model, "w" + layer, TableSpec::DENSE,
                                    static_cast<uint64_t>(dense.widths[i] * dense.widths[i + 1])));
      TETHER_ASSIGN_OR_RETURN(const TrainedTable* b, Table(model, "b" + layer, TableSpec::DENSE,
                                                           static_cast<uint64_t>(dense.widths[i + 1])));
      dense.params.w.push_back(w->values.data());
      dense.params.b.push_back(b->values.data());
    }
    outputs = dense.widths.back();
    make = [&dense](std::unique_ptr<Backend> b) { return std::make_unique<DenseScorer>(&dense, std::move(b)); };
  } else {
    return Status::InvalidArgument("model '" + name +
                                   "' cannot be scored here: tether-predict knows xmc_mlp, sparse_lr and dense_mlp");
  }
  if (data.features.cols != c.data().num_features())
    return Status::InvalidArgument("the input has " + std::to_string(data.features.cols) +
                                   " features; the model was trained on " + std::to_string(c.data().num_features()));

  Predictions out;
  out.rows = data.features.rows;
  out.outputs = outputs;
  out.k = kind == LabelKind::kBinary ? 1 : static_cast<int>(std::min<int64_t>(options.top_k, outputs));
  out.labels.assign(out.rows * out.k, 0);
  out.scores.assign(out.rows * out.k, 0.0f);
  // Binary and multiclass rows always carry their label (LoadSplit refuses
  // a row without one); multi-label input may carry none (new documents).
  const bool has_labels = kind != LabelKind::kMultiLabel || data.labels.nnz() > 0;
  std::vector<double> inv_propensity;
  if (kind == LabelKind::kMultiLabel && !counts.empty())
    inv_propensity = InversePropensity(counts.counts, counts.num_rows, options.psp_a, options.psp_b);

  int64_t block = options.block_rows > 0 ? options.block_rows : c.train().eval_minibatch_size();
  const int64_t cap = std::max<int64_t>(1, (int64_t{256} << 20) / static_cast<int64_t>(sizeof(float)) /
                                               std::max<int64_t>(1, outputs));
  if (options.block_rows <= 0) block = std::min(block, cap);
  block = std::max<int64_t>(1, block);
  const int64_t num_blocks = (out.rows + block - 1) / block;

  // Metrics go into one Evaluator in block order (see the header); the
  // Evaluator's backend does the multiclass top-1, on the thread holding
  // the turn, so it gets a backend of its own.
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<Backend> eval_backend, CreateBackend("cpu", 1));
  Evaluator eval(kind, outputs, eval_backend.get(), inv_propensity);
  std::mutex mu;
  std::condition_variable turn;
  int64_t next_commit = 0;
  bool failed = false;
  Status first_error;
  std::atomic<int64_t> next_block{0};
  const int threads = static_cast<int>(std::min<int64_t>(options.threads, std::max<int64_t>(1, num_blocks)));

  auto fail = [&](const Status& st) {
    std::lock_guard<std::mutex> lock(mu);
    if (!failed) first_error = st;
    failed = true;
    turn.notify_all();
  };
  auto work = [&](std::unique_ptr<Backend> backend) {
    Backend* raw = backend.get();
    std::unique_ptr<Scorer> scorer = make(std::move(backend));
    std::vector<float> scores;
    std::vector<uint32_t> top;
    for (int64_t b = next_block++; b < num_blocks; b = next_block++) {
      const int64_t begin = b * block, end = std::min(out.rows, begin + block);
      Status st = scorer->Score(data.features, begin, end, &scores);
      if (st.ok() && kind != LabelKind::kBinary) {
        top.resize((end - begin) * out.k);
        st = raw->TopK(end - begin, outputs, scores.data(), out.k, top.data());
      }
      if (!st.ok()) return fail(st);
      for (int64_t r = 0; r < end - begin; ++r) {
        for (int j = 0; j < out.k; ++j) {
          const uint32_t idx = kind == LabelKind::kBinary ? 0 : top[r * out.k + j];
          out.labels[(begin + r) * out.k + j] = idx;
          out.scores[(begin + r) * out.k + j] = scores[r * outputs + idx];
        }
      }
      if (!has_labels) continue;
      std::unique_lock<std::mutex> lock(mu);
      turn.wait(lock, [&] { return failed || next_commit == b; });
      if (failed) return;
      st = eval.Add(scores, data.labels, begin, end);
      if (!st.ok()) {
        if (!failed) first_error = st;
        failed = true;
      }
      ++next_commit;
      turn.notify_all();
    }
  };
  // Backends are made here, on the calling thread, so a missing GPU fails
  // before any work starts.
  std::vector<std::unique_ptr<Backend>> backends;
  for (int t = 0; t < threads; ++t) {
    TETHER_ASSIGN_OR_RETURN(std::unique_ptr<Backend> b, CreateBackend(options.device, 1));
    backends.push_back(std::move(b));
  }
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work, std::move(backends[t]));
  work(std::move(backends[0]));
  for (std::thread& t : pool) t.join();
  if (failed) return first_error;
  if (has_labels) {
    out.metrics = eval.Results();
    out.tied_rows = eval.tied_rows();
  }
  return out;
}

}  // namespace tether
