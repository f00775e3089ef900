#include "worker/models/dense_mlp.h"

#include <algorithm>
#include <string>
#include <utility>

namespace tether {

DenseMlp::DenseMlp(std::vector<int64_t> widths, Backend* backend)
    : widths_(std::move(widths)), backend_(backend), scores_(backend), delta_(backend), delta_prev_(backend) {
  CHECK(backend_ != nullptr) << "DenseMlp needs a backend";
  CHECK_GE(widths_.size(), 2u) << "DenseMlp needs an input and an output width";
  for (int64_t w : widths_) CHECK_GT(w, 0) << "DenseMlp: every layer width must be > 0";
  for (size_t i = 0; i + 2 < widths_.size(); ++i) act_.emplace_back(backend);
}

Status DenseMlp::Forward(const float* x, int64_t batch, const DenseMlpParams& p, float* scores, bool train) {
  const int n = num_layers();
  if (batch < 0) return Status::InvalidArgument("DenseMlp: negative batch size");
  if (static_cast<int>(p.w.size()) != n || static_cast<int>(p.b.size()) != n) {
    return Status::InvalidArgument("DenseMlp: " + std::to_string(p.w.size()) + " weight and " +
                                   std::to_string(p.b.size()) + " bias buffers for " + std::to_string(n) + " layers");
  }
  for (int i = 0; i < n; ++i) {
    if (p.w[i] == nullptr || p.b[i] == nullptr) {
      return Status::InvalidArgument("DenseMlp: null parameter buffer for layer " + std::to_string(i + 1));
    }
  }
  if (batch == 0) return Status::OK();
  if (x == nullptr) return Status::InvalidArgument("DenseMlp: null input");
  Backend& be = *backend_;
  const float* in = x;
  for (int i = 0; i < n; ++i) {
    const int64_t fan_in = widths_[i], fan_out = widths_[i + 1];
    float* out = scores;
    if (i + 1 < n) {
      TETHER_RETURN_IF_ERROR(act_[i].Resize(batch * fan_out));  // no reallocation once grown
      out = act_[i].data();
    }
    TETHER_RETURN_IF_ERROR(be.Gemm(Transpose::kNo, Transpose::kNo, batch, fan_out, fan_in, 1.0f, in, fan_in,
                                   p.w[i], fan_out, 0.0f, out, fan_out));
    TETHER_RETURN_IF_ERROR(be.AddBias(batch, fan_out, p.b[i], out));
    if (i + 1 < n) TETHER_RETURN_IF_ERROR(be.Relu(batch * fan_out, out, out));
    if (i + 1 < n && train && dropout_ > 0.0f)
      TETHER_RETURN_IF_ERROR(be.Dropout(batch * fan_out, dropout_, LayerSeed(i), out));
    in = out;
  }
  return Status::OK();
}

StatusOr<float> DenseMlp::ComputeGradients(const float* x, int64_t batch, const CsrView& y, const DenseMlpParams& p,
                                           DenseMlpGrads* grads) {
  if (grads == nullptr) return Status::InvalidArgument("DenseMlp: null grads");
  if (batch <= 0) return Status::InvalidArgument("DenseMlp: empty minibatch (0 rows)");
  if (y.rows != batch || y.cols > widths_.back()) {
    return Status::InvalidArgument("DenseMlp: labels are " + std::to_string(y.rows) + "x" + std::to_string(y.cols) +
                                   ", expected " + std::to_string(batch) + " rows and at most " +
                                   std::to_string(widths_.back()) + " classes");
  }
  TETHER_RETURN_IF_ERROR(backend_->UploadCsr(y, CsrUse::kLabels, &y_up_));
  const int n = num_layers();
  grads->w.resize(n);
  grads->b.resize(n);
  DenseMlpGradPtrs g;
  for (int i = 0; i < n; ++i) {
    grads->w[i].resize(widths_[i] * widths_[i + 1]);
    grads->b[i].resize(widths_[i + 1]);
    g.w.push_back(grads->w[i].data());
    g.b.push_back(grads->b[i].data());
  }
  return ComputeGradients(x, y_up_, p, g);
}

StatusOr<float> DenseMlp::ComputeGradients(const float* x, const BackendCsr& y, const DenseMlpParams& p,
                                           const DenseMlpGradPtrs& g) {
  const int64_t batch = y.rows;
  if (batch <= 0) return Status::InvalidArgument("DenseMlp: empty minibatch (0 rows)");
  const int n = num_layers();
  const int64_t classes = widths_.back();
  if (y.cols > classes) {
    return Status::InvalidArgument("DenseMlp: labels are " + std::to_string(y.rows) + "x" + std::to_string(y.cols) +
                                   ", expected " + std::to_string(batch) + " rows and at most " +
                                   std::to_string(classes) + " classes");
  }
  if (static_cast<int>(g.w.size()) != n || static_cast<int>(g.b.size()) != n) {
    return Status::InvalidArgument("DenseMlp: gradient pointers for " + std::to_string(g.w.size()) + " layers, not " +
                                   std::to_string(n));
  }
  TETHER_RETURN_IF_ERROR(scores_.Resize(batch * classes));
  TETHER_RETURN_IF_ERROR(Forward(x, batch, p, scores_.data(), /*train=*/true));
  Backend& be = *backend_;
  double loss_sum = 0.0;
  // dL/ds in place, divided by B so every gradient below is a mean (labels
  // may name fewer classes than the model has: labels.cols <= cols).
  TETHER_RETURN_IF_ERROR(be.SoftmaxCrossEntropy(batch, classes, scores_.data(), y, 1.0f / static_cast<float>(batch),
                                                scores_.data(), &loss_sum, label_smoothing_));
  // delta = dL/dz_i, walking down from the output layer; two buffers below
  // the top take turns holding it.
  float* delta = scores_.data();
  BackendArray<float>* spare = &delta_;
  for (int i = n - 1; i >= 0; --i) {
    const int64_t fan_in = widths_[i], fan_out = widths_[i + 1];
    const float* in = i == 0 ? x : act_[i - 1].data();
    // dW_i = a_(i-1)ᵀ · delta, db_i = Σ_rows delta.
    TETHER_RETURN_IF_ERROR(be.Gemm(Transpose::kYes, Transpose::kNo, fan_in, fan_out, batch, 1.0f, in, fan_in, delta,
                                   fan_out, 0.0f, g.w[i], fan_out));
    TETHER_RETURN_IF_ERROR(be.ColumnSum(batch, fan_out, delta, 0.0f, g.b[i]));
    if (i == 0) break;
    // dL/da_(i-1) = delta · W_iᵀ, then through the ReLU of layer i − 1.
    TETHER_RETURN_IF_ERROR(spare->Resize(batch * fan_in));
    TETHER_RETURN_IF_ERROR(be.Gemm(Transpose::kNo, Transpose::kYes, batch, fan_in, fan_out, 1.0f, delta, fan_out,
                                   p.w[i], fan_out, 0.0f, spare->data(), fan_in));
    TETHER_RETURN_IF_ERROR(be.ReluBackward(batch * fan_in, act_[i - 1].data(), spare->data()));
    // Dropout's backward: the forward mask and scale again (the same seed).
    if (dropout_ > 0.0f) TETHER_RETURN_IF_ERROR(be.Dropout(batch * fan_in, dropout_, LayerSeed(i - 1), spare->data()));
    delta = spare->data();
    spare = spare == &delta_ ? &delta_prev_ : &delta_;
  }
  return static_cast<float>(loss_sum / static_cast<double>(batch));
}

Status DenseMlp::Predict(const float* x, int64_t batch, const DenseMlpParams& p, std::vector<float>* scores) {
  if (scores == nullptr) return Status::InvalidArgument("DenseMlp: null scores");
  const int64_t count = std::max<int64_t>(batch, 0) * widths_.back();
  scores->resize(count);
  if (backend_->buffers_host_visible()) return Forward(x, batch, p, scores->data());
  TETHER_RETURN_IF_ERROR(scores_.Resize(count));
  TETHER_RETURN_IF_ERROR(Forward(x, batch, p, scores_.data()));
  if (count == 0) return Status::OK();
  return backend_->Download(*scores_.buffer(), 0, scores->data(), count * sizeof(float));
}

void DensifyRows(const CsrMatrix& x, int64_t begin, int64_t end, float* out) {
  CHECK(0 <= begin && begin <= end && end <= x.rows) << "DensifyRows [" << begin << ", " << end << ") of " << x.rows;
  const int64_t cols = x.cols;
  if (end == begin) return;
  CHECK(out != nullptr);
  std::fill_n(out, (end - begin) * cols, 0.0f);
  for (int64_t r = begin; r < end; ++r) {
    float* row = out + (r - begin) * cols;
    for (int64_t q = x.row_ptr[r]; q < x.row_ptr[r + 1]; ++q) row[x.col_idx[q]] = x.values[q];
  }
}

void DensifyRows(const CsrMatrix& x, int64_t begin, int64_t end, std::vector<float>* out) {
  CHECK(out != nullptr);
  out->resize(std::max<int64_t>(0, end - begin) * x.cols);
  DensifyRows(x, begin, end, out->data());
}

}  // namespace tether
