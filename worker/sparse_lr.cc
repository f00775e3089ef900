#include "worker/sparse_lr.h"

#include <string>

namespace tether {

SparseLr::SparseLr(int64_t num_features, Backend* backend) : num_features_(num_features), backend_(backend) {
  CHECK(backend_ != nullptr) << "SparseLr needs a backend";
  CHECK_GT(num_features_, 0);
}

Status SparseLr::Forward(const CsrMatrix& x_local, const SparseLrParams& p, float* scores) {
  if (x_local.row_ptr.size() != static_cast<size_t>(x_local.rows) + 1 ||
      static_cast<size_t>(x_local.row_ptr.back()) > x_local.values.size()) {
    return Status::InvalidArgument("SparseLr: x_local's row_ptr does not match its rows / values");
  }
  if (x_local.cols != p.num_rows_w) {
    return Status::InvalidArgument("SparseLr: x_local has " + std::to_string(x_local.cols) + " columns but " +
                                   std::to_string(p.num_rows_w) + " weights were given");
  }
  if (p.num_rows_w > num_features_) {
    return Status::InvalidArgument("SparseLr: " + std::to_string(p.num_rows_w) + " weights exceed num_features " +
                                   std::to_string(num_features_));
  }
  if ((p.w == nullptr && p.num_rows_w > 0) || p.b == nullptr) {
    return Status::InvalidArgument("SparseLr: null parameter buffer");
  }
  const int64_t batch = x_local.rows;
  TETHER_RETURN_IF_ERROR(backend_->SpMM(ViewOf(x_local), p.w, /*n=*/1, 1.0f, 0.0f, scores));
  return backend_->AddBias(batch, 1, p.b, scores);
}

StatusOr<float> SparseLr::ComputeGradients(const CsrMatrix& x_local, const CsrView& y, const SparseLrParams& p,
                                           SparseLrGrads* grads) {
  if (grads == nullptr) return Status::InvalidArgument("SparseLr: null grads");
  const int64_t batch = x_local.rows;
  if (batch == 0) return Status::InvalidArgument("SparseLr: empty minibatch (0 rows)");
  if (y.rows != batch || y.cols != 1) {
    return Status::InvalidArgument("SparseLr: labels are " + std::to_string(y.rows) + "x" + std::to_string(y.cols) +
                                   ", expected " + std::to_string(batch) + "x1");
  }
  scores_.resize(batch);
  TETHER_RETURN_IF_ERROR(Forward(x_local, p, scores_.data()));
  // dL/ds = (sigmoid(s) − y) / B in place: every gradient below is a mean.
  double loss_sum = 0.0;
  TETHER_RETURN_IF_ERROR(backend_->SigmoidCrossEntropy(batch, 1, scores_.data(), y, 1.0f / static_cast<float>(batch),
                                                       scores_.data(), &loss_sum));
  grads->w.resize(p.num_rows_w);
  grads->b.resize(1);
  // dw = x_localᵀ · ds (U × 1), db = Σ ds.
  TETHER_RETURN_IF_ERROR(backend_->SpMMTransposed(ViewOf(x_local), scores_.data(), 1, 1.0f, 0.0f, grads->w.data()));
  TETHER_RETURN_IF_ERROR(backend_->ColumnSum(batch, 1, scores_.data(), 0.0f, grads->b.data()));
  return static_cast<float>(loss_sum / static_cast<double>(batch));
}

Status SparseLr::Predict(const CsrMatrix& x_local, const SparseLrParams& p, std::vector<float>* scores) {
  if (scores == nullptr) return Status::InvalidArgument("SparseLr: null scores");
  scores->resize(x_local.rows);
  return Forward(x_local, p, scores->data());
}

}  // namespace tether
