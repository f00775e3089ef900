// The three workloads bound to their parameter-server tables. Each adapter
// keeps its pulled parameters and gradients in members reused across
// minibatches, so a warm worker allocates nothing per minibatch beyond what
// the client does.
#include "worker/models/model.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <cstdlib>
#include <string>

#include "worker/models/builtin_models.h"
#include "worker/models/dense_mlp.h"
#include "worker/models/input_dropout.h"
#include "worker/models/sampled_xmc_model.h"
#include "worker/models/sparse_lr.h"
#include "worker/models/model_registry.h"
#include "worker/models/xmc_mlp.h"

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

// The dropout masks' seeds (model.dropout, and model.input_dropout's
// through InputDropout::SeedFor): minibatch t of worker `rank`
// draws its masks from Hash(Hash(train.seed, rank), t), t counting this
// worker's training minibatches, so every minibatch of every worker has a
// mask of its own and a run repeats exactly. The count is the model's
// state in a checkpoint: a resumed run draws the masks the uninterrupted
// one would have.
class DropoutSeeds {
 public:
  DropoutSeeds(uint64_t seed, int rank) : base_(DropoutHash(seed, static_cast<uint64_t>(rank))) {}
  uint64_t Next() { return DropoutHash(base_, count_++); }
  std::string Save() const { return std::to_string(count_); }
  Status Restore(const std::string& state) {
    if (state.empty()) return Status::OK();
    char* end = nullptr;
    const unsigned long long v = std::strtoull(state.c_str(), &end, 10);
    if (end == state.c_str() || *end != '\0')
      return Status::InvalidArgument("dropout: the checkpoint's minibatch count '" + state + "' is unreadable");
    count_ = v;
    return Status::OK();
  }

 private:
  uint64_t base_;
  uint64_t count_ = 0;
};

// ---------------------------------------------------------------- XMC MLP

// Tables: w1 (row, key = feature id, H), b1 (dense, H), w2 (row, key =
// label id, H + 1: the label's weights then its bias). Every minibatch
// pulls the w1 rows of its features, b1, and all of w2.
//
// Residency (compute/backend.h): the pulled parameters are packed in one
// MirroredArray [w1 (U × H) | b1 (H) | w2 rows (L × (H + 1)) | b2 (L)], so
// they go up in one transfer right after the pull; x and y go up once each
// (UploadCsr); the gradients, packed the same way, come down in one
// transfer. On the CPU backend none of these copies happen.
class XmcMlpModel final : public Model {
 public:
  // pipeline_off: why it does not pipeline, empty when it does:
  // train.pipeline where it is exact (CreateXmcMlpModel).
  XmcMlpModel(const XmcMlpShape& shape, Backend* backend, uint32_t w1, uint32_t b1, uint32_t w2, bool hashed,
              std::string pipeline_off, DropoutSeeds seeds, float input_dropout)
      : shape_(shape), model_(shape, backend), backend_(backend), seeds_(seeds), input_dropout_(input_dropout),
        w1_id_(w1), b1_id_(b1), w2_id_(w2),
        hashed_(hashed),
        pipeline_(pipeline_off.empty()), pipeline_off_(std::move(pipeline_off)), params_a_(backend),
        params_b_(backend), grads_(backend) {
    const int64_t l = shape.num_labels;
    label_keys_.resize(l);
    std::iota(label_keys_.begin(), label_keys_.end(), 0);
  }

  std::string name() const override { return "xmc_mlp"; }
  // With dropout or input dropout, its minibatch count (DropoutSeeds); else
  // nothing.
  std::string SaveState() const override { return DropsOut() ? seeds_.Save() : ""; }
  Status RestoreState(const std::string& state) override { return seeds_.Restore(state); }
  LabelKind label_kind() const override { return LabelKind::kMultiLabel; }
  int64_t num_outputs() const override { return shape_.num_labels; }
  bool Pipelines() const override { return pipeline_; }
  std::string PipelineOffReason() const override { return pipeline_off_; }

  Status Pull(const Minibatch& batch, WorkerClient* client) override {
    const int64_t h = shape_.hidden, l = shape_.num_labels;
    pulls_.clear();
    const bool read_ahead = TakePrefetch(batch);  // this batch's w1 was read ahead
    if (read_ahead) {
      // Prefetch localized the batch and pulled the rows the last push did
      // not touch into the other buffer; the rows it pushed come now, after
      // that push (read-my-writes).
      std::swap(params_, next_params_);
      keys_.swap(next_keys_);
      std::swap(x_local_, next_x_local_);
      SetLayout();
      if (!prefetch_.empty()) pulls_.push_back(prefetch_);
      if (!rest_pull_.empty()) pulls_.push_back(rest_pull_);  // sent by ComputeAndPush
      prefetch_ = RequestHandle();
      rest_pull_ = RequestHandle();
      if (!rest_sent_ && !rest_keys_.empty())
        pulls_.push_back(
            client->PullRowsAt(w1_id_, rest_keys_, rest_rows_.data(), params_->host(), next_read_clock_));
      rest_sent_ = false;
    } else {
      TETHER_RETURN_IF_ERROR(LocalizeBatch(*batch.features, batch.begin, batch.end, &keys_, &x_local_));
      SetLayout();
      TETHER_RETURN_IF_ERROR(params_->Resize(total_));
      pulls_.push_back(PullInputRows(client, w1_id_, keys_, params_->host(), hashed_, evaluating_));
    }
    float* host = params_->host();
    pulls_.push_back(client->PullDense(b1_id_, host + off_b1_));
    pulls_.push_back(client->PullRows(w2_id_, label_keys_, host + off_w2_));
    const Status st = WaitAllOf(pulls_);
    pulls_.clear();  // hands the request states back to the client for reuse
    TETHER_RETURN_IF_ERROR(st);
    if (read_ahead) client->UseReadAhead(w1_id_);  // w1's pushes now carry this batch's read versions
    // w2 rows are [weights(H), bias]: the model reads the weights in place
    // (row stride H + 1); only the L biases are gathered.
    for (int64_t j = 0; j < l; ++j) host[off_b2_ + j] = host[off_w2_ + j * (h + 1) + h];
    return params_->Upload();
  }

  // The rows of `next` the last Pull's batch does not push (it pushes
  // exactly keys_) are read now, for next's clock; the others (rest_keys_)
  // at Pull(next). With one worker nothing else changes a row, so the rows
  // read now are the rows Pull(next) would read.
  Status Prefetch(const Minibatch& next, int64_t read_clock, WorkerClient* client) override {
    if (!pipeline_ || evaluating_) return Status::OK();
    DropPrefetch();
    TETHER_RETURN_IF_ERROR(LocalizeBatch(*next.features, next.begin, next.end, &next_keys_, &next_x_local_));
    early_keys_.clear();
    early_rows_.clear();
    rest_keys_.clear();
    rest_rows_.clear();
    rest_grad_rows_.clear();
    other_keys_.clear();
    other_grad_rows_.clear();
    // One merge of the two sorted, unique key lists: next's keys that this
    // batch pushes (rest_*, with their rows in both batches), next's others
    // (early_*), and this batch's keys that next does not read (other_*).
    size_t i = 0, j = 0;
    while (i < next_keys_.size() || j < keys_.size()) {
      if (j == keys_.size() || (i < next_keys_.size() && next_keys_[i] < keys_[j])) {
        early_keys_.push_back(next_keys_[i]);
        early_rows_.push_back(static_cast<uint32_t>(i++));
      } else if (i == next_keys_.size() || keys_[j] < next_keys_[i]) {
        other_keys_.push_back(keys_[j]);
        other_grad_rows_.push_back(static_cast<uint32_t>(j++));
      } else {
        rest_keys_.push_back(keys_[j]);
        rest_rows_.push_back(static_cast<uint32_t>(i++));
        rest_grad_rows_.push_back(static_cast<uint32_t>(j++));
      }
    }
    TETHER_RETURN_IF_ERROR(next_params_->Resize(TotalFor(next_keys_.size())));
    client->StartReadAhead(w1_id_);  // this batch's pushes still carry its own read's versions
    if (!early_keys_.empty())
      prefetch_ = client->PullRowsAt(w1_id_, early_keys_, early_rows_.data(), next_params_->host(), read_clock);
    next_batch_ = next;
    next_read_clock_ = read_clock;
    prefetch_pending_ = true;
    rest_sent_ = false;
    return Status::OK();
  }

  StatusOr<float> ComputeGradients(const Minibatch& batch) override { return Compute(batch, nullptr); }

  // The output layer (b1, w2 with b2) goes as soon as its gradients are
  // final, so the shard applies it while dW1 is computed; then w1. On a
  // device backend everything goes after the pass (one download), as Push.
  StatusOr<float> ComputeAndPush(const Minibatch& batch, WorkerClient* client) override {
    if (!pipeline_ || !backend_->buffers_host_visible()) {
      TETHER_ASSIGN_OR_RETURN(const float loss, Compute(batch, nullptr));
      Push(client);
      return loss;
    }
    TETHER_ASSIGN_OR_RETURN(const float loss, Compute(batch, [&] {
      PushOutputLayer(client);
      return Status::OK();
    }));
    const float* g = grads_.host();
    if (!prefetch_pending_ || rest_keys_.empty()) {
      client->PushRows(w1_id_, keys_, g);
      return loss;
    }
    // The rows the next batch reads go first, then their pull for the next
    // clock (it sees that push: one worker's requests to a shard stay in
    // order), then the other rows, whose transfer and update no longer
    // hold up the next batch.
    client->PushRowsAt(w1_id_, rest_keys_, rest_grad_rows_.data(), g);
    rest_pull_ = client->PullRowsAt(w1_id_, rest_keys_, rest_rows_.data(), next_params_->host(), next_read_clock_);
    rest_sent_ = true;
    if (!other_keys_.empty()) client->PushRowsAt(w1_id_, other_keys_, other_grad_rows_.data(), g);
    return loss;
  }

  void Push(WorkerClient* client) override {
    client->PushRows(w1_id_, keys_, grads_.host());
    PushOutputLayer(client);
  }

  Status Predict(const Minibatch& batch, std::vector<float>* scores) override {
    (void)batch;
    TETHER_RETURN_IF_ERROR(backend_->UploadCsr(ViewOf(x_local_), CsrUse::kSpMM, &x_dev_));
    return model_.Predict(x_dev_, Params(), scores);
  }

  Status BeginEvaluation(WorkerClient* /*client*/) override {
    DropPrefetch();
    evaluating_ = true;
    return Status::OK();
  }
  void EndEvaluation() override { evaluating_ = false; }

 private:
  bool DropsOut() const { return shape_.dropout > 0 || input_dropout_.rate() > 0; }

  StatusOr<float> Compute(const Minibatch& batch, const std::function<Status()>& output_done) {
    // One seed per training minibatch for both masks, drawn before the
    // upload: the input mask changes the uploaded values, not x_local_.
    const uint64_t seed = DropsOut() ? seeds_.Next() : 0;
    TETHER_RETURN_IF_ERROR(backend_->UploadCsr(input_dropout_.Apply(ViewOf(x_local_), InputDropout::SeedFor(seed)),
                                               CsrUse::kSpMMAndTransposed, &x_dev_));
    TETHER_RETURN_IF_ERROR(
        backend_->UploadCsr(RowSliceOf(*batch.labels, batch.begin, batch.end), CsrUse::kLabels, &y_dev_));
    TETHER_RETURN_IF_ERROR(grads_.Resize(total_));
    if (shape_.dropout > 0) model_.set_dropout_seed(seed);
    float* g = grads_.device();
    TETHER_ASSIGN_OR_RETURN(const float loss,
                            model_.ComputeGradients(x_dev_, y_dev_, Params(),
                                                    XmcGradPtrs{g, g + off_b1_, g + off_w2_, g + off_b2_},
                                                    output_done));
    TETHER_RETURN_IF_ERROR(grads_.Download());
    return loss;
  }

  // b1 and w2 (each row [weights, bias]: the w2 gradient has the table's
  // row layout, stride H + 1, see Params(); each row's last float takes the
  // bias gradient).
  void PushOutputLayer(WorkerClient* client) {
    const int64_t h = shape_.hidden;
    float* g = grads_.host();
    for (int64_t j = 0; j < shape_.num_labels; ++j) g[off_w2_ + j * (h + 1) + h] = g[off_b2_ + j];
    client->PushDense(b1_id_, g + off_b1_);
    client->PushRows(w2_id_, label_keys_, g + off_w2_);
  }

  // Whether a prefetch of `batch` is pending (consumed: false afterwards).
  // A prefetch of another batch is waited for and dropped.
  bool TakePrefetch(const Minibatch& batch) {
    if (!prefetch_pending_) return false;
    if (batch.features == next_batch_.features && batch.labels == next_batch_.labels &&
        batch.begin == next_batch_.begin && batch.end == next_batch_.end && !evaluating_) {
      prefetch_pending_ = false;
      return true;
    }
    DropPrefetch();
    return false;
  }

  // Waits for a pending prefetch (its reply writes next_params_) and forgets
  // it: its error, if any, is also the next pull's (the same shard).
  void DropPrefetch() {
    if (!prefetch_.empty()) (void)prefetch_.Wait();
    if (!rest_pull_.empty()) (void)rest_pull_.Wait();
    prefetch_ = RequestHandle();
    rest_pull_ = RequestHandle();
    prefetch_pending_ = false;
    rest_sent_ = false;
  }

  // Offsets (floats) of the packed parameter / gradient arrays for U = keys_.size().
  void SetLayout() {
    const int64_t h = shape_.hidden, l = shape_.num_labels;
    off_b1_ = static_cast<int64_t>(keys_.size()) * h;
    off_w2_ = off_b1_ + h;
    off_b2_ = off_w2_ + l * (h + 1);
    total_ = off_b2_ + l;
  }
  int64_t TotalFor(size_t u) const {
    const int64_t h = shape_.hidden, l = shape_.num_labels;
    return static_cast<int64_t>(u) * h + h + l * (h + 1) + l;
  }

  XmcParams Params() const {
    const float* p = params_->device();
    return XmcParams{p, static_cast<int64_t>(keys_.size()), p + off_b1_, p + off_w2_, p + off_b2_,
                     /*w2_stride=*/shape_.hidden + 1};
  }

  XmcMlpShape shape_;
  XmcMlp model_;
  Backend* backend_;
  DropoutSeeds seeds_;
  InputDropout input_dropout_;  // model.input_dropout
  uint32_t w1_id_, b1_id_, w2_id_;
  bool hashed_;             // data.hashed_features
  bool pipeline_;           // train.pipeline, where exact
  std::string pipeline_off_;  // why not, empty when pipeline_
  bool evaluating_ = false;  // between BeginEvaluation and EndEvaluation
  std::vector<uint64_t> keys_, label_keys_;
  CsrMatrix x_local_;
  BackendCsr x_dev_, y_dev_;
  int64_t off_b1_ = 0, off_w2_ = 0, off_b2_ = 0, total_ = 0;
  // Pulled parameters, packed as described above: the current minibatch's
  // (params_) and, while a prefetch is pending, the next one's.
  MirroredArray<float> params_a_, params_b_;
  MirroredArray<float>* params_ = &params_a_;
  MirroredArray<float>* next_params_ = &params_b_;
  MirroredArray<float> grads_;  // packed as the parameters
  std::vector<RequestHandle> pulls_;
  // Pipelining: the prefetched batch, read at next_read_clock_, its keys and
  // local rows; its keys read early (early_*) and those the current batch
  // pushes (rest_*: read after that push), with their rows in next's packed
  // w1 (and rest_grad_rows_ in the current gradient); the current batch's
  // keys that next does not read (other_*). rest_sent_: ComputeAndPush sent
  // the rest's pull (rest_pull_).
  bool prefetch_pending_ = false;
  bool rest_sent_ = false;
  Minibatch next_batch_;
  int64_t next_read_clock_ = 0;
  RequestHandle prefetch_, rest_pull_;
  std::vector<uint64_t> next_keys_, early_keys_, rest_keys_, other_keys_;
  std::vector<uint32_t> early_rows_, rest_rows_, rest_grad_rows_, other_grad_rows_;
  CsrMatrix next_x_local_;
};

// ---------------------------------------------------------- sparse LR

// Tables: w (row, key = feature id, 1 float), b (dense, 1). Every minibatch
// pulls the weights of its features and the bias, packed [w (U) | b] so they
// go up in one transfer; the gradients come down in one (as XmcMlpModel).
class SparseLrModel final : public Model {
 public:
  SparseLrModel(int64_t num_features, Backend* backend, uint32_t w, uint32_t b, bool hashed)
      : model_(num_features, backend), backend_(backend), w_id_(w), b_id_(b), hashed_(hashed), params_(backend),
        grads_(backend) {}

  std::string name() const override { return "sparse_lr"; }
  LabelKind label_kind() const override { return LabelKind::kBinary; }
  int64_t num_outputs() const override { return 1; }

  Status Pull(const Minibatch& batch, WorkerClient* client) override {
    TETHER_RETURN_IF_ERROR(LocalizeBatch(*batch.features, batch.begin, batch.end, &keys_, &x_local_));
    const size_t u = keys_.size();
    TETHER_RETURN_IF_ERROR(params_.Resize(u + 1));
    float* host = params_.host();
    TETHER_RETURN_IF_ERROR(WaitAllOf(
        {PullInputRows(client, w_id_, keys_, host, hashed_, evaluating_), client->PullDense(b_id_, host + u)}));
    return params_.Upload();
  }

  Status BeginEvaluation(WorkerClient* /*client*/) override {
    evaluating_ = true;
    return Status::OK();
  }
  void EndEvaluation() override { evaluating_ = false; }

  StatusOr<float> ComputeGradients(const Minibatch& batch) override {
    TETHER_RETURN_IF_ERROR(backend_->UploadCsr(ViewOf(x_local_), CsrUse::kSpMMAndTransposed, &x_dev_));
    TETHER_RETURN_IF_ERROR(
        backend_->UploadCsr(RowSliceOf(*batch.labels, batch.begin, batch.end), CsrUse::kLabels, &y_dev_));
    TETHER_RETURN_IF_ERROR(grads_.Resize(keys_.size() + 1));
    float* g = grads_.device();
    TETHER_ASSIGN_OR_RETURN(const float loss,
                            model_.ComputeGradients(x_dev_, y_dev_, Params(), SparseLrGradPtrs{g, g + keys_.size()}));
    TETHER_RETURN_IF_ERROR(grads_.Download());
    return loss;
  }

  void Push(WorkerClient* client) override {
    const float* g = grads_.host();
    client->PushRows(w_id_, keys_, g);
    client->PushDense(b_id_, g + keys_.size());
  }

  Status Predict(const Minibatch& /*batch*/, std::vector<float>* scores) override {
    TETHER_RETURN_IF_ERROR(backend_->UploadCsr(ViewOf(x_local_), CsrUse::kSpMM, &x_dev_));
    return model_.Predict(x_dev_, Params(), scores);
  }

 private:
  SparseLrParams Params() const {
    return SparseLrParams{params_.device(), static_cast<int64_t>(keys_.size()), params_.device() + keys_.size()};
  }

  SparseLr model_;
  Backend* backend_;
  uint32_t w_id_, b_id_;
  bool hashed_;             // data.hashed_features
  bool evaluating_ = false;  // between BeginEvaluation and EndEvaluation
  std::vector<uint64_t> keys_;
  CsrMatrix x_local_;
  BackendCsr x_dev_, y_dev_;
  MirroredArray<float> params_, grads_;  // [w (U) | b]
};

// ---------------------------------------------------------- dense MLP

// Tables: w1, b1, …, wn, bn, all dense (range-partitioned over the shards).
// Every minibatch pulls all of them: the whole model, packed [w1 | b1 | … |
// wn | bn] so it goes up in one transfer (and the densified input in one
// more); the gradients, packed the same way, come down in one.
class DenseMlpModel final : public Model {
 public:
  // offset: data.feature_offset, added to every input after densifying.
  DenseMlpModel(std::vector<int64_t> widths, Backend* backend, std::vector<uint32_t> w_ids,
                std::vector<uint32_t> b_ids, float offset, float dropout, float label_smoothing, DropoutSeeds seeds)
      : model_(widths, backend), backend_(backend), w_ids_(std::move(w_ids)), b_ids_(std::move(b_ids)),
        offset_(offset), dropout_(dropout), seeds_(seeds), params_(backend), grads_(backend), x_(backend) {
    model_.set_regularization(dropout, label_smoothing);
    const int n = model_.num_layers();
    int64_t at = 0;
    for (int i = 0; i < n; ++i) {
      w_off_.push_back(at);
      at += widths[i] * widths[i + 1];
      b_off_.push_back(at);
      at += widths[i + 1];
    }
    total_ = at;
    pulls_.reserve(2 * n);
  }

  std::string name() const override { return "dense_mlp"; }
  // With dropout, its minibatch count (DropoutSeeds); else nothing.
  std::string SaveState() const override { return dropout_ > 0 ? seeds_.Save() : ""; }
  Status RestoreState(const std::string& state) override { return seeds_.Restore(state); }
  LabelKind label_kind() const override { return LabelKind::kMultiClass; }
  int64_t num_outputs() const override { return model_.widths().back(); }

  Status Pull(const Minibatch& batch, WorkerClient* client) override {
    if (params_.size() == 0) {  // first call: the whole model's buffers, once
      TETHER_RETURN_IF_ERROR(params_.Resize(total_));
      TETHER_RETURN_IF_ERROR(grads_.Resize(total_));
      for (size_t i = 0; i < w_off_.size(); ++i) {
        params_ptrs_.w.push_back(params_.device() + w_off_[i]);
        params_ptrs_.b.push_back(params_.device() + b_off_[i]);
        grad_ptrs_.w.push_back(grads_.device() + w_off_[i]);
        grad_ptrs_.b.push_back(grads_.device() + b_off_[i]);
      }
    }
    const int64_t cols = batch.features->cols;
    TETHER_RETURN_IF_ERROR(x_.Resize(batch.rows() * cols));
    float* x = x_.host();
    DensifyRows(*batch.features, batch.begin, batch.end, x);
    if (offset_ != 0.0f)
      for (size_t i = 0; i < x_.size(); ++i) x[i] += offset_;
    float* host = params_.host();
    pulls_.clear();
    for (size_t i = 0; i < w_off_.size(); ++i) {
      pulls_.push_back(client->PullDense(w_ids_[i], host + w_off_[i]));
      pulls_.push_back(client->PullDense(b_ids_[i], host + b_off_[i]));
    }
    const Status st = WaitAllOf(pulls_);
    pulls_.clear();  // hands the request states back to the client for reuse
    TETHER_RETURN_IF_ERROR(st);
    TETHER_RETURN_IF_ERROR(params_.Upload());
    return x_.Upload();
  }

  StatusOr<float> ComputeGradients(const Minibatch& batch) override {
    TETHER_RETURN_IF_ERROR(
        backend_->UploadCsr(RowSliceOf(*batch.labels, batch.begin, batch.end), CsrUse::kLabels, &y_dev_));
    if (dropout_ > 0) model_.set_dropout_seed(seeds_.Next());
    TETHER_ASSIGN_OR_RETURN(const float loss, model_.ComputeGradients(x_.device(), y_dev_, params_ptrs_, grad_ptrs_));
    TETHER_RETURN_IF_ERROR(grads_.Download());
    return loss;
  }

  void Push(WorkerClient* client) override {
    const float* g = grads_.host();
    for (size_t i = 0; i < w_off_.size(); ++i) {
      client->PushDense(w_ids_[i], g + w_off_[i]);
      client->PushDense(b_ids_[i], g + b_off_[i]);
    }
  }

  Status Predict(const Minibatch& batch, std::vector<float>* scores) override {
    return model_.Predict(x_.device(), batch.rows(), params_ptrs_, scores);
  }

 private:
  DenseMlp model_;
  Backend* backend_;
  std::vector<uint32_t> w_ids_, b_ids_;
  float offset_;
  float dropout_;
  DropoutSeeds seeds_;
  std::vector<int64_t> w_off_, b_off_;  // layer i's w / b in the packed arrays (floats)
  int64_t total_ = 0;
  // Pulled parameters and their gradients, packed; sized on the first Pull.
  MirroredArray<float> params_, grads_;
  DenseMlpParams params_ptrs_;     // backend addresses into params_
  DenseMlpGradPtrs grad_ptrs_;     // backend addresses into grads_
  MirroredArray<float> x_;         // the densified input
  BackendCsr y_dev_;
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
                                                     Backend* backend, int rank) {
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
  return std::unique_ptr<Model>(std::make_unique<DenseMlpModel>(
      widths, backend, std::move(w_ids), std::move(b_ids), config.data().feature_offset(), config.model().dropout(),
      config.model().label_smoothing(), DropoutSeeds(config.train().seed(), rank)));
}

StatusOr<std::unique_ptr<Model>> CreateXmcMlpModel(const JobConfig& config, const std::vector<TableSpec>& tables,
                                                   Backend* backend, int rank) {
  if (config.model().sampled_labels() > 0) return CreateSampledXmcMlpModel(config, tables, backend, rank);
  XmcMlpShape shape;
  shape.num_features = InputWidth(config);
  shape.hidden = config.model().hidden();
  shape.num_labels = config.data().num_labels();
  shape.loss = config.model().loss() == BCE ? XmcLoss::kBce : XmcLoss::kSoftmax;
  shape.dropout = config.model().dropout();
  shape.label_smoothing = config.model().label_smoothing();
  const auto h = static_cast<uint64_t>(shape.hidden);
  TETHER_ASSIGN_OR_RETURN(uint32_t w1, FindTable(tables, "w1", TableSpec::ROW, h));
  TETHER_ASSIGN_OR_RETURN(uint32_t b1, FindTable(tables, "b1", TableSpec::DENSE, h));
  TETHER_ASSIGN_OR_RETURN(uint32_t w2, FindTable(tables, "w2", TableSpec::ROW, h + 1));
  // Pipelining keeps every bit where nothing but the worker's own pushes
  // changes the step: not with a staleness-scaled step (a prefetched row's
  // read version is older), adaptive batch sizes (the next batch's size is
  // known only at the clock) or a local replica (AVERAGE).
  std::string pipeline_off;
  if (!config.train().pipeline()) {
    pipeline_off = "train.pipeline false";
  } else if (config.train().adaptive_batch().enabled()) {
    pipeline_off = "train.adaptive_batch is on: the next minibatch's size is known only at its clock";
  } else if (config.consistency().model() == AVERAGE) {
    pipeline_off = "consistency AVERAGE keeps a local replica";
  } else {
    for (const TableSpec& t : tables) {
      if (t.id() == w1 && t.consistency().staleness_policy() != NONE)
        pipeline_off = "table w1's staleness_policy is " +
                       StalenessPolicy_Name(t.consistency().staleness_policy()) +
                       ": a row read ahead has an older version";
    }
  }
  return std::unique_ptr<Model>(std::make_unique<XmcMlpModel>(shape, backend, w1, b1, w2,
                                                              config.data().hashed_features(), std::move(pipeline_off),
                                                              DropoutSeeds(config.train().seed(), rank),
                                                              config.model().input_dropout()));
}

}  // namespace tether
