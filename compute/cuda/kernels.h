// Launchers of the CUDA backend's own kernels (compute/cuda/kernels.cu).
//
// Every pointer is device memory of the stated length; every launcher
// queues one kernel on `stream` and returns without waiting, so a caller
// checks cudaGetLastError after it and synchronises before reading a result
// on the host. Shapes are row-major: `rows` × `cols` floats. Thread-safety:
// as the stream's (one CudaBackend, one thread).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tether {
namespace cuda_kernels {

/// x[i] = beta · x[i] for i < n; beta 0 writes 0 (NaN in x does not survive).
void Scale(cudaStream_t stream, int64_t n, float beta, float* x);
/// x[r, j] += bias[j].
void AddBias(cudaStream_t stream, int64_t rows, int64_t cols, const float* bias, float* x);
/// out[j] = beta · out[j] + Σ_r x[r, j], rows in increasing order (the CPU backend's order).
void ColumnSum(cudaStream_t stream, int64_t rows, int64_t cols, const float* x, float beta, float* out);
/// y = max(x, 0), n elements; y may alias x.
void Relu(cudaStream_t stream, int64_t n, const float* x, float* y);
/// dy[i] = 0 where y[i] ≤ 0 (y: ReLU's output).
void ReluBackward(cudaStream_t stream, int64_t n, const float* y, float* dy);
/// Inverted dropout in place: element i kept (times `scale`) when the mask
/// of compute/backend.h's DropoutKeeps(seed, i, threshold) keeps it, else 0.
/// (Srivastava et al., JMLR 2014.)
void Dropout(cudaStream_t stream, int64_t n, uint64_t seed, uint32_t threshold, float scale, float* x);
/// Softmax (softmax true) or sigmoid cross-entropy per row against the CSR
/// label rows (`row_ptr` rebased to 0, `rows` + 1 entries; `col_idx` <
/// cols), with label smoothing `eps` (0: none). row_loss[r] gets row r's
/// loss; dscores (may be null, may alias scores) the gradient times
/// `grad_scale`. I: int64_t or int32_t.
template <typename I>
void CrossEntropy(cudaStream_t stream, bool softmax, int64_t rows, int64_t cols, const float* scores,
                  const I* row_ptr, const uint32_t* col_idx, float grad_scale, float* dscores, double* row_loss,
                  double eps);
/// indices[r, 0..k) = the k best columns of row r: larger score first, NaN
/// last, the smaller index on ties (core/top_k.h's order). O(cols · k) per row.
void TopK(cudaStream_t stream, int64_t rows, int64_t cols, const float* scores, int k, uint32_t* indices);

}  // namespace cuda_kernels
}  // namespace tether
