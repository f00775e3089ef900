// The backend factory: the only file outside compute/cuda/ that reads
// TETHER_WITH_CUDA (house style: one registry file, as in ggml).
#include <algorithm>
#include <memory>
#include <string>

#include "compute/backend.h"
#include "compute/cpu_backend.h"
#include "tether/build_config.h"

#if TETHER_WITH_CUDA
#include "compute/cuda/cuda_backend.h"
#endif

namespace tether {
namespace {

// Returns the CUDA backend on device 0, or Unavailable saying why there is none.
StatusOr<std::unique_ptr<Backend>> CreateCuda() {
#if TETHER_WITH_CUDA
  return CreateCudaBackend(/*device=*/0);
#else
  return Status::Unavailable(
      "no CUDA device can be used: this build of Tether has no CUDA backend (configured with "
      "TETHER_WITH_CUDA=OFF or nvcc not found; rebuild with -DTETHER_WITH_CUDA=ON)");
#endif
}

}  // namespace

StatusOr<std::unique_ptr<Backend>> CreateBackend(const std::string& device, int cpu_threads) {
  if (device == "cpu") {
    return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(cpu_threads));
  }
  if (device == "cuda") {
    StatusOr<std::unique_ptr<Backend>> cuda = CreateCuda();
    if (!cuda.ok() && cuda.status().code() == Status::Code::kUnavailable) {
      return Status::Unavailable("--device=cuda: " + cuda.status().message() +
                                 "; use --device=cpu or --device=auto");
    }
    return cuda;
  }
  if (device == "auto") {
    StatusOr<std::unique_ptr<Backend>> cuda = CreateCuda();
    if (cuda.ok()) {
      LOG(INFO) << "--device=auto: using the CUDA backend (" << cuda.value()->name() << ")";
      return cuda;
    }
    // A missing device is the expected case on CPU machines (INFO); a device
    // that is present but fails to initialise deserves a WARNING.
    const bool expected = cuda.status().code() == Status::Code::kUnavailable;
    LOG_IF(INFO, expected) << "--device=auto: using the CPU backend with "
                           << std::max(cpu_threads, 1)
                           << " OpenBLAS thread(s); CUDA not used: " << cuda.status().message();
    LOG_IF(WARNING, !expected) << "--device=auto: falling back to the CPU backend; the CUDA "
                                  "backend failed: "
                               << cuda.status().ToString();
    return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(cpu_threads));
  }
  return Status::InvalidArgument("--device='" + device +
                                 "' is not a device; expected one of: auto, cpu, cuda");
}

}  // namespace tether
