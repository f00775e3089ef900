#include "worker/models/sampled_xmc_model.h"

#include <sstream>

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <string>

#include "worker/sampling.h"
#include "worker/models/xmc_mlp.h"

namespace tether {
namespace {

class SampledXmcMlpModel final : public Model {
 public:
  SampledXmcMlpModel(const XmcMlpShape& shape, int64_t k, uint64_t seed, Backend* backend, uint32_t w1, uint32_t b1,
                     uint32_t w2, bool hashed)
      : shape_(shape), k_(k), backend_(backend), rng_(seed), w1_id_(w1), b1_id_(b1),
        w2_id_(w2), hashed_(hashed), b1_(shape.hidden) {}

  std::string name() const override { return "sampled_xmc_mlp"; }
  // The negatives' generator: a resumed run draws what the uninterrupted
  // one would have.
  std::string SaveState() const override {
    std::ostringstream os;
    os << rng_;
    return os.str();
  }
  Status RestoreState(const std::string& state) override {
    if (state.empty()) return Status::OK();
    std::istringstream is(state);
    is >> rng_;
    if (!is) return Status::InvalidArgument("sampled softmax: the checkpoint's generator state is unreadable");
    return Status::OK();
  }
  LabelKind label_kind() const override { return LabelKind::kMultiLabel; }
  int64_t num_outputs() const override { return shape_.num_labels; }

  Status Pull(const Minibatch& batch, WorkerClient* client) override {
    const int64_t h = shape_.hidden;
    TETHER_RETURN_IF_ERROR(LocalizeBatch(*batch.features, batch.begin, batch.end, &keys_, &x_local_));
    w1_.resize(keys_.size() * h);
    pulls_.clear();
    // Evaluating a hashed model: ids never trained read as zeros, uncreated.
    pulls_.push_back(hashed_ && evaluating_ ? client->PullRowsIfPresent(w1_id_, keys_, w1_.data())
                                            : client->PullRows(w1_id_, keys_, w1_.data()));
    pulls_.push_back(client->PullDense(b1_id_, b1_.data()));
    if (!evaluating_) {
      y_ = SliceRows(*batch.labels, batch.begin, batch.end);
      TETHER_RETURN_IF_ERROR(SampleOutputLabels(y_, shape_.num_labels, k_, &rng_, &label_keys_, &y_local_));
      w2_rows_.resize(label_keys_.size() * (h + 1));
      pulls_.push_back(client->PullRows(w2_id_, label_keys_, w2_rows_.data()));
    }
    const Status pulled = WaitAllOf(pulls_);
    pulls_.clear();  // hands the request states back to the client for reuse
    TETHER_RETURN_IF_ERROR(pulled);
    if (!evaluating_) GatherBiases(w2_rows_, static_cast<int64_t>(label_keys_.size()), &b2_);
    return Status::OK();
  }

  StatusOr<float> ComputeGradients(const Minibatch& /*batch*/) override {
    if (evaluating_) return Status::FailedPrecondition("sampled softmax: ComputeGradients during an evaluation");
    const int64_t k = static_cast<int64_t>(label_keys_.size());
    if (train_model_ == nullptr || train_model_->shape().num_labels != k) {
      // K rows per minibatch, more only when the batch has more positives.
      XmcMlpShape s = shape_;
      s.num_labels = k;
      train_model_ = std::make_unique<XmcMlp>(s, backend_);
    }
    return train_model_->ComputeGradients(x_local_, y_local_, Params(w2_rows_, b2_), &grads_);
  }

  void Push(WorkerClient* client) override {
    // grads_.w2 has the table's row layout (stride H + 1, see Params()); each
    // row's last float takes the bias gradient.
    const int64_t h = shape_.hidden, k = static_cast<int64_t>(label_keys_.size());
    for (int64_t l = 0; l < k; ++l) grads_.w2[l * (h + 1) + h] = grads_.b2[l];
    client->PushRows(w1_id_, keys_, grads_.w1.data());
    client->PushDense(b1_id_, grads_.b1.data());
    client->PushRows(w2_id_, label_keys_, grads_.w2.data());
  }

  Status Predict(const Minibatch& /*batch*/, std::vector<float>* scores) override {
    if (!evaluating_) return Status::FailedPrecondition("sampled softmax: Predict outside BeginEvaluation/EndEvaluation");
    return eval_model_->Predict(x_local_, Params(eval_rows_, eval_b2_), scores);
  }

  Status BeginEvaluation(WorkerClient* client) override {
    const int64_t h = shape_.hidden, l = shape_.num_labels;
    std::vector<uint64_t> all(static_cast<size_t>(l));
    std::iota(all.begin(), all.end(), 0);
    eval_rows_.resize(static_cast<size_t>(l * (h + 1)));
    TETHER_RETURN_IF_ERROR(client->PullRows(w2_id_, all, eval_rows_.data()).Wait());
    GatherBiases(eval_rows_, l, &eval_b2_);
    if (eval_model_ == nullptr) eval_model_ = std::make_unique<XmcMlp>(shape_, backend_);
    evaluating_ = true;
    return Status::OK();
  }

  void EndEvaluation() override {
    evaluating_ = false;
    // Hand the full output layer back: at Amazon-670K scale it is 690 MB.
    std::vector<float>().swap(eval_rows_);
    std::vector<float>().swap(eval_b2_);
    eval_model_.reset();
  }

 private:
  // w2 rows are [weights(H), bias]: the model reads the weights in place
  // (row stride H + 1, see Params()); the n biases are gathered into *b.
  void GatherBiases(const std::vector<float>& rows, int64_t n, std::vector<float>* b) const {
    const int64_t h = shape_.hidden;
    b->resize(n);
    for (int64_t l = 0; l < n; ++l) (*b)[l] = rows[l * (h + 1) + h];
  }

  // w2_rows: w2 table rows as pulled, [weights(H), bias] each.
  XmcParams Params(const std::vector<float>& w2_rows, const std::vector<float>& b2) const {
    return XmcParams{w1_.data(), static_cast<int64_t>(keys_.size()), b1_.data(), w2_rows.data(), b2.data(),
                     /*w2_stride=*/shape_.hidden + 1};
  }

  XmcMlpShape shape_;
  int64_t k_;
  Backend* backend_;
  std::mt19937_64 rng_;
  uint32_t w1_id_, b1_id_, w2_id_;
  bool hashed_;  // data.hashed_features
  bool evaluating_ = false;
  std::unique_ptr<XmcMlp> train_model_, eval_model_;
  std::vector<uint64_t> keys_, label_keys_;
  CsrMatrix x_local_, y_, y_local_;
  std::vector<float> w1_, b1_, w2_rows_, b2_, eval_rows_, eval_b2_;
  std::vector<RequestHandle> pulls_;  // of one Pull, kept for its capacity
  XmcGrads grads_;  // grads_.w2 in the w2 table's row layout (K × (H + 1))
};

}  // namespace

StatusOr<std::unique_ptr<Model>> CreateSampledXmcMlpModel(const JobConfig& config, const std::vector<TableSpec>& tables,
                                                          Backend* backend, int rank) {
  if (config.model().loss() != SOFTMAX)
    return Status::InvalidArgument("config field model.sampled_labels: a sampled softmax needs model.loss SOFTMAX");
  XmcMlpShape shape;
  shape.num_features = config.data().hashed_features() ? std::numeric_limits<int64_t>::max()
                                                       : config.data().num_features();
  shape.hidden = config.model().hidden();
  shape.num_labels = config.data().num_labels();
  shape.loss = XmcLoss::kSoftmax;
  const auto h = static_cast<uint64_t>(shape.hidden);
  TETHER_ASSIGN_OR_RETURN(uint32_t w1, FindTable(tables, "w1", TableSpec::ROW, h));
  TETHER_ASSIGN_OR_RETURN(uint32_t b1, FindTable(tables, "b1", TableSpec::DENSE, h));
  TETHER_ASSIGN_OR_RETURN(uint32_t w2, FindTable(tables, "w2", TableSpec::ROW, h + 1));
  return std::unique_ptr<Model>(std::make_unique<SampledXmcMlpModel>(shape, config.model().sampled_labels(),
                                                                     NegativeSamplingSeed(config.train().seed(), rank),
                                                                     backend, w1, b1, w2,
                                                                     config.data().hashed_features()));
}

}  // namespace tether
