// The three workloads bound to their parameter-server tables. Each adapter
// keeps its pulled parameters and gradients in members reused across
// minibatches, so a warm worker allocates nothing per minibatch beyond what
// the client does.
#include "worker/model.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "worker/builtin_models.h"
#include "worker/dense_mlp.h"
#include "worker/sampled_xmc_model.h"
#include "worker/sparse_lr.h"
#include "worker/model_registry.h"
#include "worker/xmc_mlp.h"

namespace tether {
namespace {

// Hashed features (data.hashed_features): the input width is unknown, so a
// model's F is "any": a minibatch's distinct ids are its only bound.
int64_t InputWidth(const JobConfig& config) {
  return config.data().hashed_features() ? std::numeric_limits<int64_t>::max() : config.data().num_features();
}

// Pulls the input-layer rows of `keys`: during the evaluation of a hashed
// model without creating rows for ids never trained (they read as zeros:
// an untrained feature contributes nothing); otherwise a normal pull, which
// creates untouched rows with the table's initializer.
RequestHandle PullInputRows(WorkerClient* client, uint32_t table, const std::vector<uint64_t>& keys, float* out,
                            bool hashed, bool evaluating) {
  return hashed && evaluating ? client->PullRowsIfPresent(table, keys, out) : client->PullRows(table, keys, out);
}

// Rows [begin, end) of m into *out, reusing its capacity (XmcMlp takes its
// labels as a CsrMatrix, not a view).
void CopyRows(const CsrMatrix& m, int64_t begin, int64_t end, CsrMatrix* out) {
  const int64_t base = m.row_ptr[begin];
  out->rows = end - begin;
  out->cols = m.cols;
  out->row_ptr.resize(out->rows + 1);
  for (int64_t r = 0; r <= out->rows; ++r) out->row_ptr[r] = m.row_ptr[begin + r] - base;
  out->col_idx.assign(m.col_idx.begin() + base, m.col_idx.begin() + m.row_ptr[end]);
  out->values.assign(m.values.begin() + base, m.values.begin() + m.row_ptr[end]);
}

// ---------------------------------------------------------------- XMC MLP

// Tables: w1 (row, key = feature id, H), b1 (dense, H), w2 (row, key =
// label id, H + 1: the label's weights then its bias). Every minibatch
// pulls the w1 rows of its features, b1, and all of w2.
class XmcMlpModel final : public Model {
 public:
  XmcMlpModel(const XmcMlpShape& shape, Backend* backend, uint32_t w1, uint32_t b1, uint32_t w2, bool hashed)
      : shape_(shape), model_(shape, backend), w1_id_(w1), b1_id_(b1), w2_id_(w2), hashed_(hashed), w1_(backend),
        b1_(backend), w2_full_(backend), b2_(backend) {
    const int64_t l = shape.num_labels;
    label_keys_.resize(l);
    std::iota(label_keys_.begin(), label_keys_.end(), 0);
  }

  std::string name() const override { return "xmc_mlp"; }
  LabelKind label_kind() const override { return LabelKind::kMultiLabel; }
  int64_t num_outputs() const override { return shape_.num_labels; }

  Status Pull(const Minibatch& batch, WorkerClient* client) override {
    TETHER_RETURN_IF_ERROR(LocalizeBatch(*batch.features, batch.begin, batch.end, &keys_, &x_local_));
    const int64_t h = shape_.hidden, l = shape_.num_labels;
    TETHER_RETURN_IF_ERROR(w1_.Resize(keys_.size() * h));
    TETHER_RETURN_IF_ERROR(b1_.Resize(h));
    TETHER_RETURN_IF_ERROR(w2_full_.Resize(l * (h + 1)));
    TETHER_RETURN_IF_ERROR(b2_.Resize(l));
    TETHER_RETURN_IF_ERROR(WaitAllOf({PullInputRows(client, w1_id_, keys_, w1_.data(), hashed_, evaluating_),
                                      client->PullDense(b1_id_, b1_.data()),
                                      client->PullRows(w2_id_, label_keys_, w2_full_.data())}));
    // w2 rows are [weights(H), bias]: the model reads the weights in place
    // (row stride H + 1); only the L biases are gathered.
    for (int64_t l = 0; l < shape_.num_labels; ++l) b2_[l] = w2_full_[l * (h + 1) + h];
    return Status::OK();
  }

  StatusOr<float> ComputeGradients(const Minibatch& batch) override {
    CopyRows(*batch.labels, batch.begin, batch.end, &y_);
    return model_.ComputeGradients(x_local_, y_, Params(), &grads_);
  }

  void Push(WorkerClient* client) override {
    // grads_.w2 already has the table's row layout (stride H + 1, see
    // Params()); each row's last float takes the bias gradient.
    const int64_t h = shape_.hidden;
    for (int64_t l = 0; l < shape_.num_labels; ++l) grads_.w2[l * (h + 1) + h] = grads_.b2[l];
    client->PushRows(w1_id_, keys_, grads_.w1.data());
    client->PushDense(b1_id_, grads_.b1.data());
    client->PushRows(w2_id_, label_keys_, grads_.w2.data());
  }

  Status Predict(const Minibatch& /*batch*/, std::vector<float>* scores) override {
    return model_.Predict(x_local_, Params(), scores);
  }

  Status BeginEvaluation(WorkerClient* /*client*/) override {
    evaluating_ = true;
    return Status::OK();
  }
  void EndEvaluation() override { evaluating_ = false; }

 private:
  XmcParams Params() const {
    return XmcParams{w1_.data(), static_cast<int64_t>(keys_.size()), b1_.data(), w2_full_.data(), b2_.data(),
                     /*w2_stride=*/shape_.hidden + 1};
  }

  XmcMlpShape shape_;
  XmcMlp model_;
  uint32_t w1_id_, b1_id_, w2_id_;
  bool hashed_;             // data.hashed_features
  bool evaluating_ = false;  // between BeginEvaluation and EndEvaluation
  std::vector<uint64_t> keys_, label_keys_;
  CsrMatrix x_local_, y_;
  // Pulled parameters in the backend's host memory (pinned on CUDA);
  // w2_full_ holds the L table rows [weights(H), bias] as pulled.
  HostArray<float> w1_, b1_, w2_full_, b2_;
  XmcGrads grads_;  // grads_.w2 in the w2 table's row layout (L × (H + 1))
};

// ---------------------------------------------------------- sparse LR

// Tables: w (row, key = feature id, 1 float), b (dense, 1). Every minibatch
// pulls the weights of its features and the bias.
class SparseLrModel final : public Model {
 public:
  SparseLrModel(int64_t num_features, Backend* backend, uint32_t w, uint32_t b, bool hashed)
      : model_(num_features, backend), w_id_(w), b_id_(b), hashed_(hashed), w_(backend), b_(backend) {}

  std::string name() const override { return "sparse_lr"; }
  LabelKind label_kind() const override { return LabelKind::kBinary; }
  int64_t num_outputs() const override { return 1; }

  Status Pull(const Minibatch& batch, WorkerClient* client) override {
    TETHER_RETURN_IF_ERROR(LocalizeBatch(*batch.features, batch.begin, batch.end, &keys_, &x_local_));
    TETHER_RETURN_IF_ERROR(w_.Resize(keys_.size()));
    TETHER_RETURN_IF_ERROR(b_.Resize(1));
    return WaitAllOf({PullInputRows(client, w_id_, keys_, w_.data(), hashed_, evaluating_),
                      client->PullDense(b_id_, b_.data())});
  }

  Status BeginEvaluation(WorkerClient* /*client*/) override {
    evaluating_ = true;
    return Status::OK();
  }
  void EndEvaluation() override { evaluating_ = false; }

  StatusOr<float> ComputeGradients(const Minibatch& batch) override {
    return model_.ComputeGradients(x_local_, RowSliceOf(*batch.labels, batch.begin, batch.end), Params(), &grads_);
  }

  void Push(WorkerClient* client) override {
    client->PushRows(w_id_, keys_, grads_.w.data());
    client->PushDense(b_id_, grads_.b.data());
  }

  Status Predict(const Minibatch& /*batch*/, std::vector<float>* scores) override {
    return model_.Predict(x_local_, Params(), scores);
  }

 private:
  SparseLrParams Params() const { return SparseLrParams{w_.data(), static_cast<int64_t>(keys_.size()), b_.data()}; }

  SparseLr model_;
  uint32_t w_id_, b_id_;
  bool hashed_;             // data.hashed_features
  bool evaluating_ = false;  // between BeginEvaluation and EndEvaluation
  std::vector<uint64_t> keys_;
  CsrMatrix x_local_;
  HostArray<float> w_, b_;  // pulled, in the backend's host memory
  SparseLrGrads grads_;
};

// ---------------------------------------------------------- dense MLP

// Tables: w1, b1, …, wn, bn, all dense (range-partitioned over the shards).
// Every minibatch pulls all of them: the whole model.
class DenseMlpModel final : public Model {
 public:
  // offset: data.feature_offset, added to every input after densifying.
  DenseMlpModel(std::vector<int64_t> widths, Backend* backend, std::vector<uint32_t> w_ids,
                std::vector<uint32_t> b_ids, float offset)
      : model_(widths, backend), w_ids_(std::move(w_ids)), b_ids_(std::move(b_ids)), offset_(offset), x_(backend) {
    const int n = model_.num_layers();
    for (int i = 0; i < n; ++i) {
      w_.emplace_back(backend);
      b_.emplace_back(backend);
    }
    pulls_.reserve(2 * n);
  }

  std::string name() const override { return "dense_mlp"; }
  LabelKind label_kind() const override { return LabelKind::kMultiClass; }
  int64_t num_outputs() const override { return model_.widths().back(); }

  Status Pull(const Minibatch& batch, WorkerClient* client) override {
    if (params_.w.empty()) {  // first call: the whole model's buffers, once
      const std::vector<int64_t>& widths = model_.widths();
      for (size_t i = 0; i < w_.size(); ++i) {
        TETHER_RETURN_IF_ERROR(w_[i].Resize(widths[i] * widths[i + 1]));
        TETHER_RETURN_IF_ERROR(b_[i].Resize(widths[i + 1]));
        params_.w.push_back(w_[i].data());
        params_.b.push_back(b_[i].data());
      }
    }
    const int64_t cols = batch.features->cols;
    TETHER_RETURN_IF_ERROR(x_.Resize(batch.rows() * cols));
    DensifyRows(*batch.features, batch.begin, batch.end, x_.data());
    if (offset_ != 0.0f)
      for (size_t i = 0; i < x_.size(); ++i) x_[i] += offset_;
    pulls_.clear();
    for (size_t i = 0; i < w_.size(); ++i) {
      pulls_.push_back(client->PullDense(w_ids_[i], w_[i].data()));
      pulls_.push_back(client->PullDense(b_ids_[i], b_[i].data()));
    }
    const Status st = WaitAllOf(pulls_);
    pulls_.clear();  // hands the request states back to the client for reuse
    return st;
  }

  StatusOr<float> ComputeGradients(const Minibatch& batch) override {
    return model_.ComputeGradients(x_.data(), batch.rows(), RowSliceOf(*batch.labels, batch.begin, batch.end),
                                   params_, &grads_);
  }

  void Push(WorkerClient* client) override {
    for (size_t i = 0; i < w_.size(); ++i) {
      client->PushDense(w_ids_[i], grads_.w[i].data());
      client->PushDense(b_ids_[i], grads_.b[i].data());
    }
  }

  Status Predict(const Minibatch& batch, std::vector<float>* scores) override {
    return model_.Predict(x_.data(), batch.rows(), params_, scores);
  }

 private:
  DenseMlp model_;
  std::vector<uint32_t> w_ids_, b_ids_;
  float offset_;
  // Pulled parameters and the densified input, in the backend's host memory
  // (pinned on CUDA); w_, b_ are sized on the first Pull and never again.
  std::vector<HostArray<float>> w_, b_;
  DenseMlpParams params_;  // points into w_, b_
  DenseMlpGrads grads_;
  HostArray<float> x_;
  std::vector<RequestHandle> pulls_;
};

}  // namespace

StatusOr<uint32_t> FindTable(const std::vector<TableSpec>& tables, const std::string& name, TableSpec::Kind kind,
                             uint64_t width) {
  for (const TableSpec& t : tables) {
    if (t.name() != name) continue;
    const uint64_t have = IsRowTable(t) ? t.dim() : t.size();
    if (t.kind() != kind || have != width) {
      return Status::InvalidArgument("table " + name + " is a " + (IsRowTable(t) ? "row" : "dense") +
                                     " table of width " + std::to_string(have) + "; the model needs a " +
                                     (kind == TableSpec::ROW ? "row" : "dense") + " table of width " +
                                     std::to_string(width));
    }
    return t.id();
  }
  return Status::InvalidArgument("the model needs a table named " + name + " and the job has none");
}

StatusOr<std::unique_ptr<Model>> CreateSparseLrModel(const JobConfig& config, const std::vector<TableSpec>& tables,
                                                     Backend* backend, int /*rank*/) {
  TETHER_ASSIGN_OR_RETURN(uint32_t w, FindTable(tables, "w", TableSpec::ROW, 1));
  TETHER_ASSIGN_OR_RETURN(uint32_t b, FindTable(tables, "b", TableSpec::DENSE, 1));
  return std::unique_ptr<Model>(
      std::make_unique<SparseLrModel>(InputWidth(config), backend, w, b, config.data().hashed_features()));
}

StatusOr<std::unique_ptr<Model>> CreateDenseMlpModel(const JobConfig& config, const std::vector<TableSpec>& tables,
                                                     Backend* backend, int /*rank*/) {
  const std::vector<int64_t> widths = DenseMlpLayerWidths(config);
  std::vector<uint32_t> w_ids, b_ids;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const std::string layer = std::to_string(i + 1);
    TETHER_ASSIGN_OR_RETURN(
        uint32_t w, FindTable(tables, "w" + layer, TableSpec::DENSE,
                              static_cast<uint64_t>(widths[i]) * static_cast<uint64_t>(widths[i + 1])));
    TETHER_ASSIGN_OR_RETURN(uint32_t b,
                            FindTable(tables, "b" + layer, TableSpec::DENSE, static_cast<uint64_t>(widths[i + 1])));
    w_ids.push_back(w);
    b_ids.push_back(b);
  }
  return std::unique_ptr<Model>(std::make_unique<DenseMlpModel>(widths, backend, std::move(w_ids), std::move(b_ids),
                                                                config.data().feature_offset()));
}

StatusOr<std::unique_ptr<Model>> CreateXmcMlpModel(const JobConfig& config, const std::vector<TableSpec>& tables,
                                                   Backend* backend, int rank) {
  if (config.model().sampled_labels() > 0) return CreateSampledXmcMlpModel(config, tables, backend, rank);
  XmcMlpShape shape;
  shape.num_features = InputWidth(config);
  shape.hidden = config.model().hidden();
  shape.num_labels = config.data().num_labels();
  shape.loss = config.model().loss() == BCE ? XmcLoss::kBce : XmcLoss::kSoftmax;
  const auto h = static_cast<uint64_t>(shape.hidden);
  TETHER_ASSIGN_OR_RETURN(uint32_t w1, FindTable(tables, "w1", TableSpec::ROW, h));
  TETHER_ASSIGN_OR_RETURN(uint32_t b1, FindTable(tables, "b1", TableSpec::DENSE, h));
  TETHER_ASSIGN_OR_RETURN(uint32_t w2, FindTable(tables, "w2", TableSpec::ROW, h + 1));
  return std::unique_ptr<Model>(
      std::make_unique<XmcMlpModel>(shape, backend, w1, b1, w2, config.data().hashed_features()));
}

}  // namespace tether
