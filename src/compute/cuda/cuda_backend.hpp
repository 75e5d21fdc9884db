// compute/cuda/cuda_backend.hpp: the CUDA backend's factory, declared without CUDA types. Defined
// in cuda_backend.cu, built (when GOSSIP_HAVE_CUDA) as the plugin libgossip-cuda.so, which
// compute/backend.cpp loads only when a CUDA driver is present.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "src/compute/cuda/cuda_backend.hpp belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <memory>

#include "gossip/backend.hpp"

namespace gossip::cuda {

/// Devices visible to the CUDA runtime (0 when the runtime finds none or no driver).
int device_count();

/// A backend on visible device `device` modulo their count. Throws RuntimeError when no device
/// is usable.
std::unique_ptr<Backend> make_backend(int device);

}  // namespace gossip::cuda

// The plugin's C entry points (for dlsym).
extern "C" int gossip_cuda_device_count();
extern "C" gossip::Backend* gossip_cuda_make_backend(int device);
extern "C" int gossip_cuda_cudnn(char* out, int size);
extern "C" int gossip_cuda_capability();
