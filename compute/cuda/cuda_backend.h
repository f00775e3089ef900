// The CUDA Backend: cuSPARSE generic SpMM for sparse × dense products,
// cuBLAS SGEMM for dense ones, small custom kernels for the element-wise
// ops, the losses and top-k (house style: one folder and one target per
// backend, as in ggml; CUDA types stay out of this header).
//
// Buffers (compute/backend.h): AllocBuffer gives device memory (cudaMalloc,
// registered so ops recognise it); an op whose operands all lie in such
// buffers (and whose sparse operand was uploaded with UploadCsr) is only
// queued on the backend's stream: no copy, no host wait. A host operand is
// copied in through device staging buffers (grown to the largest call,
// reused) and a host output copied back with a wait, as before buffers
// existed. Upload is an asynchronous copy on the stream (a DMA transfer from
// AllocHost's page-locked memory); Download and ops with host results (the
// losses' loss_sum) wait. UploadCsr packs the matrix, and for
// kSpMMAndTransposed its transpose, into page-locked staging and sends it
// in one copy.
//
// Determinism: SpMMTransposed builds Aᵀ on the host (counting sort, fixed
// order; at UploadCsr for an uploaded matrix) and runs the non-transposed
// SpMM, because cuSPARSE documents that SpMM with a transposed sparse
// operand may differ from run to run. cuBLAS
// GEMM is bit-reproducible on the same GPU model and toolkit. Results are
// not bit-identical to the CPU backend (different summation orders).
//
// Errors: Unavailable when no device is visible; Internal (with file:line
// and the CUDA / cuBLAS / cuSPARSE error string) for runtime failures;
// InvalidArgument as documented in compute/backend.h, plus sizes beyond the
// 32-bit indices this backend hands to cuSPARSE / cuBLAS.
//
// Errors from queued work (a failed kernel) surface at the next call that
// waits (Download, Synchronize, an op with a host output).
//
// Thread-safety: one object per thread (it owns a stream, library handles,
// staging buffers and the registry of its buffers, which must not outlive
// it); distinct objects may run concurrently.
#pragma once

#include <memory>

#include "core/status.h"
#include "compute/backend.h"

namespace tether {

/// Number of visible CUDA devices; 0 when there are none or the driver /
/// runtime cannot be initialised.
int CudaDeviceCount();

/// Creates the CUDA backend on device `device` (0-based ordinal). Errors:
/// Unavailable (no such device, no driver), Internal (stream or library
/// handle creation failed).
StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(int device = 0);

}  // namespace tether
