#include "worker/models/sparse_lr.h"

#include <algorithm>
#include <string>

namespace tether {

SparseLr::SparseLr(int64_t num_features, Backend* backend)
    : num_features_(num_features), backend_(backend), scores_(backend) {
  CHECK(backend_ != nullptr) << "SparseLr needs a backend";
  CHECK_GT(num_features_, 0);
}

namespace {

Status CheckInput(const CsrMatrix& x_local) {
  if (x_local.row_ptr.size() != static_cast<size_t>(x_local.rows) + 1 ||
      static_cast<size_t>(x_local.row_ptr.back()) > x_local.values.size() ||
      static_cast<size_t>(x_local.row_ptr.back()) > x_local.col_idx.size()) {
    return Status::InvalidArgument("SparseLr: x_local's row_ptr does not match its rows / values");
  }
  return Status::OK();
}

}  // namespace

Status SparseLr::Forward(const BackendCsr& x, const SparseLrParams& p, float* scores) {
  if (x.cols != p.num_rows_w) {
    return Status::InvalidArgument("SparseLr: x_local has " + std::to_string(x.cols) + " columns but " +
                                   std::to_string(p.num_rows_w) + " weights were given");
  }
  if (p.num_rows_w > num_features_) {
    return Status::InvalidArgument("SparseLr: " + std::to_string(p.num_rows_w) + " weights exceed num_features " +
                                   std::to_string(num_features_));
  }
  if ((p.w == nullptr && p.num_rows_w > 0) || p.b == nullptr) {
    return Status::InvalidArgument("SparseLr: null parameter buffer");
  }
  TETHER_RETURN_IF_ERROR(backend_->SpMM(x, p.w, /*n=*/1, 1.0f, 0.0f, scores));
  return backend_->AddBias(x.rows, 1, p.b, scores);
}

StatusOr<float> SparseLr::ComputeGradients(const CsrMatrix& x_local, const CsrView& y, const SparseLrParams& p,
                                           SparseLrGrads* grads) {
  if (grads == nullptr) return Status::InvalidArgument("SparseLr: null grads");
  TETHER_RETURN_IF_ERROR(CheckInput(x_local));
  TETHER_RETURN_IF_ERROR(backend_->UploadCsr(ViewOf(x_local), CsrUse::kSpMMAndTransposed, &x_up_));
  TETHER_RETURN_IF_ERROR(backend_->UploadCsr(y, CsrUse::kLabels, &y_up_));
  grads->w.resize(std::max<int64_t>(p.num_rows_w, 0));
  grads->b.resize(1);
  return ComputeGradients(x_up_, y_up_, p, SparseLrGradPtrs{grads->w.data(), grads->b.data()});
}

StatusOr<float> SparseLr::ComputeGradients(const BackendCsr& x, const BackendCsr& y, const SparseLrParams& p,
                                           const SparseLrGradPtrs& g) {
  const int64_t batch = x.rows;
  if (batch == 0) return Status::InvalidArgument("SparseLr: empty minibatch (0 rows)");
  if (y.rows != batch || y.cols != 1) {
    return Status::InvalidArgument("SparseLr: labels are " + std::to_string(y.rows) + "x" + std::to_string(y.cols) +
                                   ", expected " + std::to_string(batch) + "x1");
  }
  TETHER_RETURN_IF_ERROR(scores_.Resize(batch));
  TETHER_RETURN_IF_ERROR(Forward(x, p, scores_.data()));
  // dL/ds = (sigmoid(s) − y) / B in place: every gradient below is a mean.
  double loss_sum = 0.0;
  TETHER_RETURN_IF_ERROR(backend_->SigmoidCrossEntropy(batch, 1, scores_.data(), y, 1.0f / static_cast<float>(batch),
                                                       scores_.data(), &loss_sum));
  // dw = x_localᵀ · ds (U × 1), db = Σ ds.
  TETHER_RETURN_IF_ERROR(backend_->SpMMTransposed(x, scores_.data(), 1, 1.0f, 0.0f, g.w));
  TETHER_RETURN_IF_ERROR(backend_->ColumnSum(batch, 1, scores_.data(), 0.0f, g.b));
  return static_cast<float>(loss_sum / static_cast<double>(batch));
}

Status SparseLr::Predict(const CsrMatrix& x_local, const SparseLrParams& p, std::vector<float>* scores) {
  if (scores == nullptr) return Status::InvalidArgument("SparseLr: null scores");
  TETHER_RETURN_IF_ERROR(CheckInput(x_local));
  TETHER_RETURN_IF_ERROR(backend_->UploadCsr(ViewOf(x_local), CsrUse::kSpMM, &x_up_));
  return Predict(x_up_, p, scores);
}

Status SparseLr::Predict(const BackendCsr& x, const SparseLrParams& p, std::vector<float>* scores) {
  if (scores == nullptr) return Status::InvalidArgument("SparseLr: null scores");
  scores->resize(x.rows);
  if (backend_->buffers_host_visible()) return Forward(x, p, scores->data());
  TETHER_RETURN_IF_ERROR(scores_.Resize(x.rows));
  TETHER_RETURN_IF_ERROR(Forward(x, p, scores_.data()));
  if (x.rows == 0) return Status::OK();
  return backend_->Download(*scores_.buffer(), 0, scores->data(), x.rows * sizeof(float));
}

}  // namespace tether
