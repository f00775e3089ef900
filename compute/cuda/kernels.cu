// The CUDA backend's own kernels (the rest is cuBLAS and cuSPARSE): grid-
// stride loops, one thread per element, or per row where a row is a unit.
// Each launcher below queues its kernel on `stream` and returns at once;
// the caller checks cudaGetLastError. Results match the CPU backend's
// (compute/cpu_backend.cc) operation for operation where the order is the
// same (column sums, the losses), bit for bit where it is elementwise.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "compute/cuda/kernels.h"

namespace tether {
namespace cuda_kernels {
namespace {

constexpr int kThreads = 256;

inline unsigned Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(b, 65535)));
}



__global__ void ScaleKernel(int64_t n, float beta, float* x) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    x[i] = beta == 0.0f ? 0.0f : beta * x[i];
  }
}

__global__ void AddBiasKernel(int64_t rows, int64_t cols, const float* bias, float* x) {
  const int64_t n = rows * cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    x[i] += bias[i % cols];
  }
}

// One thread per column, rows in increasing order: the CPU backend's order.
__global__ void ColumnSumKernel(int64_t rows, int64_t cols, const float* x, float beta,
                                float* out) {
  for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < cols;
       j += int64_t{blockDim.x} * gridDim.x) {
    float acc = beta == 0.0f ? 0.0f : beta * out[j];
    for (int64_t r = 0; r < rows; ++r) acc += x[r * cols + j];
    out[j] = acc;
  }
}

__global__ void ReluKernel(int64_t n, const float* x, float* y) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
  }
}

__global__ void ReluBackwardKernel(int64_t n, const float* y, float* dy) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
  }
}

// Dropout's mask: DropoutHash / DropoutKeeps of compute/backend.h, the same
// bits on the device (that header's functions are host code); the mask is
// drawn here from (seed, i), so it never crosses the bus.
__device__ bool KeepsOnDevice(uint64_t seed, uint64_t i, uint32_t threshold) {
  uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<uint32_t>(z >> 40) >= threshold;
}

__global__ void DropoutKernel(int64_t n, uint64_t seed, uint32_t threshold, float scale, float* x) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{blockDim.x} * gridDim.x) {
    x[i] = KeepsOnDevice(seed, static_cast<uint64_t>(i), threshold) ? x[i] * scale : 0.0f;
  }
}

// labels: row_ptr (int64 or int32) rebased to start at 0. d may alias s or
// be null. eps: label smoothing, as the CPU backend (eps 0: its loss and
// gradient without the smoothing terms, the same operations).
template <typename I>
__global__ void SoftmaxCeKernel(int64_t rows, int64_t cols, const float* scores,
                                const I* row_ptr, const uint32_t* col_idx, float grad_scale,
                                float* dscores, double* row_loss, double eps) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows;
       r += int64_t{blockDim.x} * gridDim.x) {
    const float* s = scores + r * cols;
    float* d = dscores == nullptr ? nullptr : dscores + r * cols;
    const int64_t lb = row_ptr[r], le = row_ptr[r + 1];
    if (lb == le) {
      if (d != nullptr) {
        for (int64_t j = 0; j < cols; ++j) d[j] = 0.0f;
      }
      row_loss[r] = 0.0;
      continue;
    }
    double label_sum = 0.0;
    for (int64_t p = lb; p < le; ++p) label_sum += s[col_idx[p]];
    double all_sum = 0.0;
    if (eps != 0.0)
      for (int64_t j = 0; j < cols; ++j) all_sum += s[j];
    float mx = s[0];
    for (int64_t j = 1; j < cols; ++j) mx = fmaxf(mx, s[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      const float e = expf(s[j] - mx);
      if (d != nullptr) d[j] = e;
      sum += e;
    }
    const double num_labels = static_cast<double>(le - lb);
    if (eps == 0.0) {
      row_loss[r] = static_cast<double>(mx) + log(sum) - label_sum / num_labels;
    } else {
      row_loss[r] = static_cast<double>(mx) + log(sum) - (1.0 - eps) * label_sum / num_labels -
                    eps * all_sum / static_cast<double>(cols);
    }
    if (d != nullptr) {
      const float f = static_cast<float>(grad_scale / sum);
      for (int64_t j = 0; j < cols; ++j) d[j] *= f;
      if (eps != 0.0) {
        const float u = static_cast<float>(grad_scale * eps / static_cast<double>(cols));
        for (int64_t j = 0; j < cols; ++j) d[j] -= u;
      }
      const float t = static_cast<float>(grad_scale * (1.0 - eps) / num_labels);
      for (int64_t p = lb; p < le; ++p) d[col_idx[p]] -= t;
    }
  }
}

template <typename I>
__global__ void SigmoidCeKernel(int64_t rows, int64_t cols, const float* scores,
                                const I* row_ptr, const uint32_t* col_idx, float grad_scale,
                                float* dscores, double* row_loss, double eps) {
  const float half_eps = static_cast<float>(grad_scale * eps / 2.0);
  const float label_target = static_cast<float>(grad_scale * (1.0 - eps));
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows;
       r += int64_t{blockDim.x} * gridDim.x) {
    const float* s = scores + r * cols;
    float* d = dscores == nullptr ? nullptr : dscores + r * cols;
    const int64_t lb = row_ptr[r], le = row_ptr[r + 1];
    double label_sum = 0.0;
    for (int64_t p = lb; p < le; ++p) label_sum += s[col_idx[p]];
    double all_sum = 0.0;
    if (eps != 0.0)
      for (int64_t j = 0; j < cols; ++j) all_sum += s[j];
    double loss = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      const float x = s[j];
      const float e = expf(-fabsf(x));
      loss += static_cast<double>(x > 0.0f ? x : 0.0f) + log1pf(e);
      if (d != nullptr) d[j] = grad_scale * (x >= 0.0f ? 1.0f / (1.0f + e) : e / (1.0f + e));
    }
    if (eps == 0.0) {
      row_loss[r] = loss - label_sum;
      if (d != nullptr) {
        for (int64_t p = lb; p < le; ++p) d[col_idx[p]] -= grad_scale;
      }
    } else {
      row_loss[r] = loss - (1.0 - eps) * label_sum - eps / 2.0 * all_sum;
      if (d != nullptr) {
        for (int64_t j = 0; j < cols; ++j) d[j] -= half_eps;
        for (int64_t p = lb; p < le; ++p) d[col_idx[p]] -= label_target;
      }
    }
  }
}

// a ranks before b: larger score, NaN last, smaller index on ties.
__device__ bool Better(const float* s, uint32_t a, uint32_t b) {
  const float x = s[a], y = s[b];
  const bool xn = isnan(x), yn = isnan(y);
  if (xn != yn) return yn;
  if (!xn && x != y) return x > y;
  return a < b;
}

// Insertion into the sorted output row: O(cols · k), fine for the small k
// of evaluation (P@1/3/5).
__global__ void TopKKernel(int64_t rows, int64_t cols, const float* scores, int k,
                           uint32_t* indices) {
  for (int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; r < rows;
       r += int64_t{blockDim.x} * gridDim.x) {
    const float* s = scores + r * cols;
    uint32_t* out = indices + r * k;
    int count = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const uint32_t cand = static_cast<uint32_t>(j);
      if (count == k && !Better(s, cand, out[k - 1])) continue;
      int pos = count < k ? count++ : k - 1;
      while (pos > 0 && Better(s, cand, out[pos - 1])) {
        out[pos] = out[pos - 1];
        --pos;
      }
      out[pos] = cand;
    }
  }
}

}  // namespace

void Scale(cudaStream_t stream, int64_t n, float beta, float* x) {
  ScaleKernel<<<Blocks(n), kThreads, 0, stream>>>(n, beta, x);
}

void AddBias(cudaStream_t stream, int64_t rows, int64_t cols, const float* bias, float* x) {
  AddBiasKernel<<<Blocks(rows * cols), kThreads, 0, stream>>>(rows, cols, bias, x);
}

void ColumnSum(cudaStream_t stream, int64_t rows, int64_t cols, const float* x, float beta, float* out) {
  ColumnSumKernel<<<Blocks(cols), kThreads, 0, stream>>>(rows, cols, x, beta, out);
}

void Relu(cudaStream_t stream, int64_t n, const float* x, float* y) {
  ReluKernel<<<Blocks(n), kThreads, 0, stream>>>(n, x, y);
}

void ReluBackward(cudaStream_t stream, int64_t n, const float* y, float* dy) {
  ReluBackwardKernel<<<Blocks(n), kThreads, 0, stream>>>(n, y, dy);
}

void Dropout(cudaStream_t stream, int64_t n, uint64_t seed, uint32_t threshold, float scale, float* x) {
  DropoutKernel<<<Blocks(n), kThreads, 0, stream>>>(n, seed, threshold, scale, x);
}

template <typename I>
void CrossEntropy(cudaStream_t stream, bool softmax, int64_t rows, int64_t cols, const float* scores,
                  const I* row_ptr, const uint32_t* col_idx, float grad_scale, float* dscores, double* row_loss,
                  double eps) {
  auto kernel = softmax ? SoftmaxCeKernel<I> : SigmoidCeKernel<I>;
  kernel<<<Blocks(rows), kThreads, 0, stream>>>(rows, cols, scores, row_ptr, col_idx, grad_scale, dscores,
                                                row_loss, eps);
}

template void CrossEntropy<int64_t>(cudaStream_t, bool, int64_t, int64_t, const float*, const int64_t*,
                                    const uint32_t*, float, float*, double*, double);
template void CrossEntropy<int32_t>(cudaStream_t, bool, int64_t, int64_t, const float*, const int32_t*,
                                    const uint32_t*, float, float*, double*, double);

void TopK(cudaStream_t stream, int64_t rows, int64_t cols, const float* scores, int k, uint32_t* indices) {
  TopKKernel<<<Blocks(rows), kThreads, 0, stream>>>(rows, cols, scores, k, indices);
}

}  // namespace cuda_kernels
}  // namespace tether
