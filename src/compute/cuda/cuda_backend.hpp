// compute/cuda/cuda_backend.hpp: the CUDA backend's factory, declared without CUDA types so the
// rest of compute can call it. Defined in cuda_backend.cu, built only when GOSSIP_HAVE_CUDA.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "src/compute/cuda/cuda_backend.hpp belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <memory>

#include "gossip/backend.hpp"

namespace gossip::cuda {

/// Devices visible to the CUDA runtime (0 when the runtime finds none or no driver).
int device_count();

/// A backend on device 0. Throws RuntimeError when no device is usable.
std::unique_ptr<Backend> make_backend();

}  // namespace gossip::cuda
