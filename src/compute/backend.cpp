// compute/backend.cpp: choosing a backend. CUDA only when built in and a device is present.
#include <cstdio>

#include "gossip/backend.hpp"
#include "gossip/core.hpp"
#include "gossip_config.h"
#if GOSSIP_HAVE_CUDA
#include "src/compute/cuda/cuda_backend.hpp"
#endif

namespace gossip {

BackendChoice parse_backend_choice(const std::string& name) {
  if (name == "auto") return BackendChoice::kAuto;
  if (name == "cpu") return BackendChoice::kCpu;
  if (name == "cuda") return BackendChoice::kCuda;
  throw InputError(cat("backend: unknown value '", name, "' (expected auto, cpu or cuda)"));
}

int cuda_device_count() {
#if GOSSIP_HAVE_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

std::unique_ptr<Backend> make_backend(BackendChoice choice, int threads, bool log_choice) {
  if (choice == BackendChoice::kCpu) return make_cpu_backend(threads);
#if GOSSIP_HAVE_CUDA
  const int devices = cuda::device_count();
  if (devices > 0) return cuda::make_backend();
  if (choice == BackendChoice::kCuda)
    throw InputError("backend: cuda was asked for but no CUDA device is present");
  if (log_choice)
    std::fprintf(stderr, "gossip: backend auto: no CUDA device found, using the CPU\n");
#else
  if (choice == BackendChoice::kCuda)
    throw InputError("backend: this build has no CUDA backend (rebuild with -Dcuda=enabled)");
  if (log_choice)
    std::fprintf(stderr, "gossip: backend auto: this build has no CUDA backend, using the CPU\n");
#endif
  return make_cpu_backend(threads);
}

}  // namespace gossip
