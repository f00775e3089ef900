// tether-spmm-bench: device-resident cuSPARSE SpMM (CSR × dense, row-major,
// the call the CUDA backend makes) timed with CUDA events, against the
// device's memory bandwidth. Used by tools/gpu_check.sh; results go to
// docs/SCALE_AND_GPU.md.
//
// For each shape it reports time per product, GFLOP/s (2 · nnz · n) and an
// effective bandwidth: the bytes a kernel without any cache reuse must move
//   8 · nnz (col_idx + values) + 4 · (m + 1) (row_ptr)
//   + 4 · nnz · n (one row of B per non-zero) + 4 · m · n (C written),
// as a share of (a) the theoretical peak, 2 · memory clock · bus width, and
// (b) a measured device-to-device cudaMemcpy. Shapes: a Bibtex minibatch
// (B = 64 rows of ~68 features, H = 256), a large XMC minibatch and a large
// sparse layer; each also in its transposed form (Aᵀ built as CSR, as the
// backend does for the input-layer gradient).
//
// Usage: tether-spmm-bench [--quick]   (--quick: fewer repetitions)
// Exit status 0 on success, 1 on any CUDA / cuSPARSE error (printed with
// file:line). No gflags here (house style: none in .cu files).
#include <cuda_runtime.h>
#include <cusparse.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

#define CHECK_CUDA(expr)                                                                              \
  do {                                                                                                \
    const cudaError_t e_ = (expr);                                                                    \
    if (e_ != cudaSuccess) {                                                                          \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_));    \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)
#define CHECK_CUSPARSE(expr)                                                                          \
  do {                                                                                                \
    const cusparseStatus_t s_ = (expr);                                                               \
    if (s_ != CUSPARSE_STATUS_SUCCESS) {                                                              \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cusparseGetErrorString(s_)); \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)

struct HostCsr {
  int m = 0, k = 0;
  std::vector<int32_t> row_ptr{0}, col;
  std::vector<float> val;
  int64_t nnz() const { return static_cast<int64_t>(col.size()); }
};

// m × k with `per_row` distinct columns per row; `skew` > 0 draws columns
// from a power law (XMC feature frequencies), 0 uniformly.
HostCsr RandomCsr(int m, int k, int per_row, double skew, std::mt19937_64* rng) {
  HostCsr a;
  a.m = m;
  a.k = k;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<int32_t> cols;
  for (int r = 0; r < m; ++r) {
    cols.clear();
    const int want = std::min(per_row, k);
    while (static_cast<int>(cols.size()) < want) {  // draw, dedupe, top up
      for (int i = static_cast<int>(cols.size()); i < want; ++i) {
        const double x = u(*rng);
        cols.push_back(skew > 0 ? static_cast<int>(std::min<double>(k - 1, k * std::pow(x, 1.0 + skew)))
                                : static_cast<int>(x * k) % k);
      }
      std::sort(cols.begin(), cols.end());
      cols.erase(std::unique(cols.begin(), cols.end()), cols.end());
    }
    for (int c : cols) {
      a.col.push_back(c);
      a.val.push_back(static_cast<float>(u(*rng)));
    }
    a.row_ptr.push_back(static_cast<int32_t>(a.col.size()));
  }
  return a;
}

HostCsr Transposed(const HostCsr& a) {
  HostCsr t;
  t.m = a.k;
  t.k = a.m;
  t.row_ptr.assign(a.k + 1, 0);
  for (int32_t c : a.col) ++t.row_ptr[c + 1];
  for (int j = 0; j < a.k; ++j) t.row_ptr[j + 1] += t.row_ptr[j];
  t.col.resize(a.col.size());
  t.val.resize(a.val.size());
  std::vector<int32_t> fill(t.row_ptr.begin(), t.row_ptr.end() - 1);
  for (int r = 0; r < a.m; ++r)
    for (int32_t p = a.row_ptr[r]; p < a.row_ptr[r + 1]; ++p) {
      const int32_t dst = fill[a.col[p]]++;
      t.col[dst] = r;
      t.val[dst] = a.val[p];
    }
  return t;
}

struct Result {
  double ms = 0, gflops = 0, gbps = 0;
};

Result TimeSpMM(cusparseHandle_t handle, cudaStream_t stream, const HostCsr& a, int n, int reps) {
  int32_t *d_rp = nullptr, *d_col = nullptr;
  float *d_val = nullptr, *d_b = nullptr, *d_c = nullptr;
  void* d_work = nullptr;
  const int64_t nnz = a.nnz();
  CHECK_CUDA(cudaMalloc(&d_rp, sizeof(int32_t) * (a.m + 1)));
  CHECK_CUDA(cudaMalloc(&d_col, sizeof(int32_t) * std::max<int64_t>(nnz, 1)));
  CHECK_CUDA(cudaMalloc(&d_val, sizeof(float) * std::max<int64_t>(nnz, 1)));
  CHECK_CUDA(cudaMalloc(&d_b, sizeof(float) * static_cast<size_t>(a.k) * n));
  CHECK_CUDA(cudaMalloc(&d_c, sizeof(float) * static_cast<size_t>(a.m) * n));
  CHECK_CUDA(cudaMemcpy(d_rp, a.row_ptr.data(), sizeof(int32_t) * (a.m + 1), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_col, a.col.data(), sizeof(int32_t) * nnz, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_val, a.val.data(), sizeof(float) * nnz, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(d_b, 0, sizeof(float) * static_cast<size_t>(a.k) * n));
  cusparseSpMatDescr_t ma;
  cusparseDnMatDescr_t mb, mc;
  CHECK_CUSPARSE(cusparseCreateCsr(&ma, a.m, a.k, nnz, d_rp, d_col, d_val, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                   CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
  CHECK_CUSPARSE(cusparseCreateDnMat(&mb, a.k, n, n, d_b, CUDA_R_32F, CUSPARSE_ORDER_ROW));
  CHECK_CUSPARSE(cusparseCreateDnMat(&mc, a.m, n, n, d_c, CUDA_R_32F, CUSPARSE_ORDER_ROW));
  const float alpha = 1.0f, beta = 0.0f;
  cusparseSpMMAlg_t alg = CUSPARSE_SPMM_CSR_ALG2;  // the backend's choice
  size_t work = 0;
  cusparseStatus_t s = cusparseSpMM_bufferSize(handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                               CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, ma, mb, &beta, mc,
                                               CUDA_R_32F, alg, &work);
  if (s == CUSPARSE_STATUS_NOT_SUPPORTED) {
    alg = CUSPARSE_SPMM_ALG_DEFAULT;
    s = cusparseSpMM_bufferSize(handle, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha,
                                ma, mb, &beta, mc, CUDA_R_32F, alg, &work);
  }
  CHECK_CUSPARSE(s);
  CHECK_CUDA(cudaMalloc(&d_work, std::max<size_t>(work, 1)));
  auto run = [&] {
    CHECK_CUSPARSE(cusparseSpMM(handle, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha,
                                ma, mb, &beta, mc, CUDA_R_32F, alg, d_work));
  };
  for (int i = 0; i < 3; ++i) run();  // warm-up
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < reps; ++i) run();
  CHECK_CUDA(cudaEventRecord(stop, stream));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float total_ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&total_ms, start, stop));
  Result r;
  r.ms = total_ms / reps;
  const double bytes = 8.0 * nnz + 4.0 * (a.m + 1) + 4.0 * nnz * n + 4.0 * a.m * n;
  r.gflops = 2.0 * nnz * n / (r.ms * 1e6);
  r.gbps = bytes / (r.ms * 1e6);
  cusparseDestroySpMat(ma);
  cusparseDestroyDnMat(mb);
  cusparseDestroyDnMat(mc);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(d_rp);
  cudaFree(d_col);
  cudaFree(d_val);
  cudaFree(d_b);
  cudaFree(d_c);
  cudaFree(d_work);
  return r;
}

// Device-to-device copy bandwidth (read + write bytes / s) of `bytes`.
double CopyGBps(size_t bytes, int reps) {
  void *a = nullptr, *b = nullptr;
  CHECK_CUDA(cudaMalloc(&a, bytes));
  CHECK_CUDA(cudaMalloc(&b, bytes));
  CHECK_CUDA(cudaMemset(a, 1, bytes));
  CHECK_CUDA(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaEventRecord(start));
  for (int i = 0; i < reps; ++i) CHECK_CUDA(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));
  CHECK_CUDA(cudaEventRecord(stop));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * bytes * reps / (ms * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int reps = quick ? 5 : 20;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "tether-spmm-bench: no CUDA device visible\n");
    return 1;
  }
  CHECK_CUDA(cudaSetDevice(0));
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  int mem_clock_khz = 0, bus_bits = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, 0));
  CHECK_CUDA(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0));
  const double peak_gbps = 2.0 * mem_clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
  const double copy_gbps = CopyGBps(size_t{1} << 30, quick ? 3 : 10);
  std::printf("device: %s, %.1f GiB, memory clock %d MHz, bus %d bit\n", prop.name,
              prop.totalGlobalMem / 1073741824.0, mem_clock_khz / 1000, bus_bits);
  std::printf("theoretical peak bandwidth %.0f GB/s; device-to-device copy %.0f GB/s\n", peak_gbps, copy_gbps);

  cusparseHandle_t handle;
  CHECK_CUSPARSE(cusparseCreate(&handle));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  CHECK_CUSPARSE(cusparseSetStream(handle, stream));

  struct Shape {
    const char* name;
    int m, k, per_row, n;
    double skew;
  };
  const Shape shapes[] = {
      {"bibtex_minibatch", 64, 800, 68, 256, 0.0},           // B = 64, U ≈ 800 pulled rows, H = 256
      {"xmc_large_minibatch", 1024, 60000, 100, 256, 1.0},   // B = 1024 rows, 60k pulled rows, H = 256
      {"sparse_layer_large", 65536, 500000, 64, 128, 1.0},   // a whole large sparse layer
  };
  std::mt19937_64 rng(7);
  std::printf("%-22s %8s %9s %8s %6s %10s %9s %9s %8s %8s\n", "shape", "m", "k", "nnz", "n", "op", "ms", "GFLOP/s",
              "GB/s", "%peak");
  for (const Shape& sh : shapes) {
    const HostCsr a = RandomCsr(sh.m, sh.k, sh.per_row, sh.skew, &rng);
    const HostCsr at = Transposed(a);
    for (int t = 0; t < 2; ++t) {
      const HostCsr& op = t == 0 ? a : at;
      const Result r = TimeSpMM(handle, stream, op, sh.n, reps);
      std::printf("%-22s %8d %9d %8lld %6d %10s %9.4f %9.1f %8.1f %7.1f%%\n", sh.name, op.m, op.k,
                  static_cast<long long>(op.nnz()), sh.n, t == 0 ? "A·B" : "Aᵀ·D", r.ms, r.gflops, r.gbps,
                  100.0 * r.gbps / peak_gbps);
      std::printf("JSON {\"shape\":\"%s\",\"op\":\"%s\",\"m\":%d,\"k\":%d,\"nnz\":%lld,\"n\":%d,\"ms\":%.5f,"
                  "\"gflops\":%.2f,\"gbps\":%.2f,\"peak_gbps\":%.1f,\"copy_gbps\":%.1f}\n",
                  sh.name, t == 0 ? "spmm" : "spmm_transposed", op.m, op.k, static_cast<long long>(op.nnz()), sh.n,
                  r.ms, r.gflops, r.gbps, peak_gbps, copy_gbps);
    }
  }
  cusparseDestroy(handle);
  cudaStreamDestroy(stream);
  return 0;
}
