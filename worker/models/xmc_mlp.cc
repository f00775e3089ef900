#include "worker/models/xmc_mlp.h"

#include <algorithm>
#include <string>

namespace tether {
namespace {

// The CsrMatrix invariants the backend cannot see through a view (the
// vector sizes); the backend checks ordering and column ranges itself.
Status CheckCsrMatrix(const CsrMatrix& m, const char* name, bool need_values) {
  const auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(std::string("XmcMlp: ") + name + " " + why);
  };
  if (m.rows < 0 || m.row_ptr.size() != static_cast<size_t>(m.rows) + 1) {
    return bad("has row_ptr of size " + std::to_string(m.row_ptr.size()) + " for " +
               std::to_string(m.rows) + " rows");
  }
  const int64_t end = m.row_ptr.back();
  if (end < 0 || static_cast<size_t>(end) > m.col_idx.size()) {
    return bad("has row_ptr beyond col_idx");
  }
  if (need_values && static_cast<size_t>(end) > m.values.size()) {
    return bad("has fewer values than column indices");
  }
  return Status::OK();
}

}  // namespace

int64_t XmcMlp::W2Stride(const XmcParams& p) const {
  return p.w2_stride == 0 ? shape_.hidden : p.w2_stride;
}

XmcMlp::XmcMlp(XmcMlpShape shape, Backend* backend)
    : shape_(shape), backend_(backend), a1_(backend), scores_(backend), da1_(backend) {
  CHECK(backend_ != nullptr) << "XmcMlp needs a backend";
  CHECK_GT(shape_.num_features, 0);
  CHECK_GT(shape_.hidden, 0);
  CHECK_GT(shape_.num_labels, 0);
}

Status XmcMlp::Forward(const BackendCsr& x, const XmcParams& p, float* scores, bool train) {
  if (x.cols != p.num_rows_w1) {
    return Status::InvalidArgument("XmcMlp: x_local has " + std::to_string(x.cols) + " columns but " +
                                   std::to_string(p.num_rows_w1) + " rows of w1 were given");
  }
  if (p.num_rows_w1 > shape_.num_features) {
    return Status::InvalidArgument("XmcMlp: " + std::to_string(p.num_rows_w1) + " rows of w1 exceed num_features " +
                                   std::to_string(shape_.num_features));
  }
  if ((p.w1 == nullptr && p.num_rows_w1 > 0) || p.b1 == nullptr || p.w2 == nullptr || p.b2 == nullptr) {
    return Status::InvalidArgument("XmcMlp: null parameter buffer");
  }
  if (p.w2_stride != 0 && p.w2_stride < shape_.hidden) {
    return Status::InvalidArgument("XmcMlp: w2_stride " + std::to_string(p.w2_stride) +
                                   " is smaller than hidden " + std::to_string(shape_.hidden));
  }
  const int64_t batch = x.rows, hidden = shape_.hidden, labels = shape_.num_labels;
  const int64_t w2_stride = W2Stride(p);
  TETHER_RETURN_IF_ERROR(a1_.Resize(batch * hidden));  // no reallocation once grown
  Backend& be = *backend_;
  TETHER_RETURN_IF_ERROR(be.SpMM(x, p.w1, hidden, 1.0f, 0.0f, a1_.data()));
  TETHER_RETURN_IF_ERROR(be.AddBias(batch, hidden, p.b1, a1_.data()));
  TETHER_RETURN_IF_ERROR(be.Relu(batch * hidden, a1_.data(), a1_.data()));
  if (train && shape_.dropout > 0.0f)
    TETHER_RETURN_IF_ERROR(be.Dropout(batch * hidden, shape_.dropout, dropout_seed_, a1_.data()));
  TETHER_RETURN_IF_ERROR(be.Gemm(Transpose::kNo, Transpose::kYes, batch, labels, hidden, 1.0f, a1_.data(), hidden,
                                 p.w2, w2_stride, 0.0f, scores, labels));
  return be.AddBias(batch, labels, p.b2, scores);
}

StatusOr<float> XmcMlp::ComputeGradients(const CsrMatrix& x_local, const CsrMatrix& y, const XmcParams& p,
                                         XmcGrads* grads) {
  if (grads == nullptr) return Status::InvalidArgument("XmcMlp: null grads");
  TETHER_RETURN_IF_ERROR(CheckCsrMatrix(x_local, "x_local", /*need_values=*/true));
  TETHER_RETURN_IF_ERROR(CheckCsrMatrix(y, "y", /*need_values=*/false));
  TETHER_RETURN_IF_ERROR(backend_->UploadCsr(ViewOf(x_local), CsrUse::kSpMMAndTransposed, &x_up_));
  TETHER_RETURN_IF_ERROR(backend_->UploadCsr(ViewOf(y), CsrUse::kLabels, &y_up_));
  grads->w2.resize(shape_.num_labels * W2Stride(p));
  grads->b2.resize(shape_.num_labels);
  grads->w1.resize(std::max<int64_t>(p.num_rows_w1, 0) * shape_.hidden);
  grads->b1.resize(shape_.hidden);
  return ComputeGradients(x_up_, y_up_, p,
                          XmcGradPtrs{grads->w1.data(), grads->b1.data(), grads->w2.data(), grads->b2.data()});
}

StatusOr<float> XmcMlp::ComputeGradients(const BackendCsr& x, const BackendCsr& y, const XmcParams& p,
                                         const XmcGradPtrs& g, const std::function<Status()>& output_done) {
  const int64_t batch = x.rows, hidden = shape_.hidden, labels = shape_.num_labels;
  if (batch == 0) return Status::InvalidArgument("XmcMlp: empty minibatch (0 rows)");
  if (y.rows != batch || y.cols > labels) {
    return Status::InvalidArgument("XmcMlp: y is " + std::to_string(y.rows) + "x" + std::to_string(y.cols) +
                                   ", expected " + std::to_string(batch) + " rows and at most " +
                                   std::to_string(labels) + " label columns");
  }
  TETHER_RETURN_IF_ERROR(scores_.Resize(batch * labels));
  TETHER_RETURN_IF_ERROR(Forward(x, p, scores_.data(), /*train=*/true));

  // Loss gradient in place: scores_ becomes dL/dscores, already divided by B
  // so every gradient below is a minibatch mean. y may name fewer label
  // columns than the model has (the loss allows labels.cols <= cols).
  Backend& be = *backend_;
  const float inv_batch = 1.0f / static_cast<float>(batch);
  double loss_sum = 0.0;
  if (shape_.loss == XmcLoss::kSoftmax) {
    TETHER_RETURN_IF_ERROR(
        be.SoftmaxCrossEntropy(batch, labels, scores_.data(), y, inv_batch, scores_.data(), &loss_sum,
                               shape_.label_smoothing));
  } else {
    TETHER_RETURN_IF_ERROR(be.SigmoidCrossEntropy(batch, labels, scores_.data(), y, inv_batch, scores_.data(),
                                                  &loss_sum, shape_.label_smoothing));
  }
  const float* dscores = scores_.data();

  const int64_t w2_stride = W2Stride(p);
  TETHER_RETURN_IF_ERROR(da1_.Resize(batch * hidden));
  // dW2 = dSᵀ·a1 (L × H), db2 = Σ_rows dS, da1 = dS·W2 (B × H).
  TETHER_RETURN_IF_ERROR(be.Gemm(Transpose::kYes, Transpose::kNo, labels, hidden, batch, 1.0f, dscores, labels,
                                 a1_.data(), hidden, 0.0f, g.w2, w2_stride));
  TETHER_RETURN_IF_ERROR(be.ColumnSum(batch, labels, dscores, 0.0f, g.b2));
  TETHER_RETURN_IF_ERROR(be.Gemm(Transpose::kNo, Transpose::kNo, batch, hidden, labels, 1.0f, dscores, labels, p.w2,
                                 w2_stride, 0.0f, da1_.data(), hidden));
  // dz1 = da1 ⊙ [a1 > 0]; db1 = Σ dz1; dW1 = x_localᵀ·dz1 (U × H, pulled
  // rows only). db1 and dW1 both only read dz1: their order changes no bit.
  TETHER_RETURN_IF_ERROR(be.ReluBackward(batch * hidden, a1_.data(), da1_.data()));
  // Dropout's backward: the forward mask and scale again (the same seed).
  if (shape_.dropout > 0.0f)
    TETHER_RETURN_IF_ERROR(be.Dropout(batch * hidden, shape_.dropout, dropout_seed_, da1_.data()));
  TETHER_RETURN_IF_ERROR(be.ColumnSum(batch, hidden, da1_.data(), 0.0f, g.b1));
  if (output_done) TETHER_RETURN_IF_ERROR(output_done());
  TETHER_RETURN_IF_ERROR(be.SpMMTransposed(x, da1_.data(), hidden, 1.0f, 0.0f, g.w1));
  return static_cast<float>(loss_sum / static_cast<double>(batch));
}

Status XmcMlp::Predict(const CsrMatrix& x_local, const XmcParams& p, std::vector<float>* scores) {
  if (scores == nullptr) return Status::InvalidArgument("XmcMlp: null scores");
  TETHER_RETURN_IF_ERROR(CheckCsrMatrix(x_local, "x_local", /*need_values=*/true));
  TETHER_RETURN_IF_ERROR(backend_->UploadCsr(ViewOf(x_local), CsrUse::kSpMM, &x_up_));
  return Predict(x_up_, p, scores);
}

Status XmcMlp::Predict(const BackendCsr& x, const XmcParams& p, std::vector<float>* scores) {
  if (scores == nullptr) return Status::InvalidArgument("XmcMlp: null scores");
  const int64_t count = x.rows * shape_.num_labels;
  scores->resize(count);
  if (backend_->buffers_host_visible()) return Forward(x, p, scores->data());
  TETHER_RETURN_IF_ERROR(scores_.Resize(count));
  TETHER_RETURN_IF_ERROR(Forward(x, p, scores_.data()));
  if (count == 0) return Status::OK();
  return backend_->Download(*scores_.buffer(), 0, scores->data(), count * sizeof(float));
}

Status LocalizeBatch(const CsrMatrix& x, int64_t row_begin, int64_t row_end,
                     std::vector<uint64_t>* keys, CsrMatrix* x_local) {
  CHECK(keys != nullptr && x_local != nullptr);
  CHECK(0 <= row_begin && row_begin <= row_end && row_end <= x.rows)
      << "LocalizeBatch: rows [" << row_begin << ", " << row_end << ") of " << x.rows;
  const int64_t begin = x.row_ptr[row_begin], end = x.row_ptr[row_end];
  const int64_t nnz = end - begin, rows = row_end - row_begin;
  // The sort below packs a position into 32 bits, and local column indices
  // are uint32: a batch this large is input (a huge minibatch_size over dense
  // rows), not a bug, so it is refused, not asserted.
  if (nnz >= (int64_t{1} << 32))
    return Status::InvalidArgument("minibatch rows [" + std::to_string(row_begin) + ", " + std::to_string(row_end) +
                                   ") hold " + std::to_string(nnz) +
                                   " non-zeros; one minibatch holds at most 2^32 - 1 (lower train.minibatch_size)");
  x_local->rows = rows;
  x_local->row_ptr.resize(rows + 1);
  for (int64_t r = 0; r <= rows; ++r) x_local->row_ptr[r] = x.row_ptr[row_begin + r] - begin;
  x_local->col_idx.resize(nnz);
  if (x.values.empty()) {
    x_local->values.clear();
  } else {
    x_local->values.assign(x.values.begin() + begin, x.values.begin() + end);
  }
  keys->clear();
  const uint32_t* ids = x.col_idx.data() + begin;
  uint32_t max_id = 0;
  for (int64_t p = 0; p < nnz; ++p) max_id = std::max(max_id, ids[p]);

  if (nnz > 0 && max_id < std::max<int64_t>(int64_t{1} << 16, 16 * nnz)) {
    // Small id range (Bibtex: 1836 features): mark ids in a dense table and
    // scan it, O(nnz + max_id), no sort. The table is per thread, grows to
    // the largest range seen and is left all-zero after each call.
    thread_local std::vector<uint32_t> slot;  // id → local index + 1; 0 = absent
    if (slot.size() <= max_id) slot.resize(static_cast<size_t>(max_id) + 1, 0);
    for (int64_t p = 0; p < nnz; ++p) slot[ids[p]] = 1;
    for (uint32_t id = 0; id <= max_id; ++id) {
      if (slot[id] != 0) {
        keys->push_back(id);
        slot[id] = static_cast<uint32_t>(keys->size());
      }
    }
    for (int64_t p = 0; p < nnz; ++p) x_local->col_idx[p] = slot[ids[p]] - 1;
    for (uint64_t id : *keys) slot[id] = 0;
  } else {
    // Large id range: sort (id, position) pairs packed in one uint64 (in
    // keys' own storage), then one pass assigns local indices in id order
    // and compacts the unique ids to the front.
    keys->resize(nnz);
    for (int64_t p = 0; p < nnz; ++p) {
      (*keys)[p] = (static_cast<uint64_t>(ids[p]) << 32) | static_cast<uint64_t>(p);
    }
    std::sort(keys->begin(), keys->end());
    size_t unique = 0;
    for (int64_t q = 0; q < nnz; ++q) {
      const uint64_t packed = (*keys)[q];  // read before the slot may be overwritten
      const uint64_t id = packed >> 32;
      if (unique == 0 || (*keys)[unique - 1] != id) (*keys)[unique++] = id;
      x_local->col_idx[packed & 0xffffffffu] = static_cast<uint32_t>(unique - 1);
    }
    keys->resize(unique);
  }
  x_local->cols = static_cast<int64_t>(keys->size());
  x_local->col_keys.reset();  // local columns are positions in *keys
  if (x.col_keys != nullptr) {
    // Hashed features: columns are the reader's dictionary ranks, in id
    // order, so the ids come out sorted and unique as ranks do.
    const uint64_t* id_of = x.col_keys->data();
    for (uint64_t& k : *keys) k = id_of[k];
  }
  return Status::OK();
}

}  // namespace tether
