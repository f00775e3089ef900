// The CUDA Backend: cuSPARSE generic SpMM for sparse × dense products,
// cuBLAS SGEMM for dense ones, small custom kernels for the element-wise
// ops, the losses and top-k (house style: one folder and one target per
// backend, as in ggml; CUDA types stay out of this header).
//
// Buffers: the Backend interface works on HOST buffers, so every op copies
// its inputs to the device, runs on the backend's own stream and copies the
// outputs back before returning (synchronous). Device staging buffers grow
// to the largest call seen and are reused: no cudaMalloc per call after
// warm-up. AllocHost hands out page-locked host memory (cudaHostAlloc); the
// models keep their pulled parameters and dense inputs there (HostArray), so
// the rows a worker pulls are written by the client straight into pinned
// memory and reach the device by DMA on the backend's stream. A device-resident interface (parameters kept on the GPU across
// minibatches) is the step that makes this backend faster than the CPU one.
//
// Determinism: SpMMTransposed builds Aᵀ on the host (counting sort, fixed
// order) and runs the non-transposed SpMM, because cuSPARSE documents that
// SpMM with a transposed sparse operand may differ from run to run. cuBLAS
// GEMM is bit-reproducible on the same GPU model and toolkit. Results are
// not bit-identical to the CPU backend (different summation orders).
//
// Errors: Unavailable when no device is visible; Internal (with file:line
// and the CUDA / cuBLAS / cuSPARSE error string) for runtime failures;
// InvalidArgument as documented in sparse/backend.h, plus sizes beyond the
// 32-bit indices this backend hands to cuSPARSE / cuBLAS.
//
// Thread-safety: one object per thread (it owns a stream, library handles
// and staging buffers); distinct objects may run concurrently.
#pragma once

#include <memory>

#include "core/status.h"
#include "sparse/backend.h"

namespace tether {

/// Number of visible CUDA devices; 0 when there are none or the driver /
/// runtime cannot be initialised.
int CudaDeviceCount();

/// Creates the CUDA backend on device `device` (0-based ordinal). Errors:
/// Unavailable (no such device, no driver), Internal (stream or library
/// handle creation failed).
StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int device = 0);

}  // namespace tether
