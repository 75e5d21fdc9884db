/// host_memory: where the transport receives a neighbour's parameters. A backend on a GPU hands
/// out page-locked memory (Device::pinned_memory), so the copy of each message to the device
/// for mixing goes by DMA straight from where it arrived; elsewhere it is plain memory.
#pragma once
#if !defined(GOSSIP_ROOM_CORE)
#error "gossip/host_memory.hpp belongs to room core, which this room does not use (see the room table in meson.build)"
#endif

#include <cstddef>
#include <new>
#include <type_traits>
#include <vector>

namespace gossip {

/// A source of host memory. allocate() never fails quietly: where it cannot give page-locked
/// memory it gives plain memory (and release() tells the two apart), and it throws
/// std::bad_alloc when there is none at all. Both may be called from any thread.
class HostMemory {
 public:
  virtual ~HostMemory() = default;
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* p) noexcept = 0;
};

/// A standard allocator over a HostMemory; without one (nullptr), plain operator new. Two are
/// equal when they draw on the same HostMemory, and the allocator moves with its memory.
template <typename T>
class HostAllocator {
 public:
  using value_type = T;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using is_always_equal = std::false_type;

  HostAllocator() noexcept = default;
  explicit HostAllocator(HostMemory* memory) noexcept : memory_(memory) {}
  template <typename U>
  HostAllocator(const HostAllocator<U>& other) noexcept : memory_(other.memory()) {}  // NOLINT

  T* allocate(std::size_t n) {
    if (memory_ == nullptr) return static_cast<T*>(::operator new(n * sizeof(T)));
    return static_cast<T*>(memory_->allocate(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t /*n*/) noexcept {
    if (memory_ == nullptr) ::operator delete(p);
    else memory_->release(p);
  }
  HostMemory* memory() const noexcept { return memory_; }
  template <typename U>
  bool operator==(const HostAllocator<U>& other) const noexcept {
    return memory_ == other.memory();
  }

 private:
  HostMemory* memory_ = nullptr;
};

/// A buffer of received parameter values.
using HostFloats = std::vector<float, HostAllocator<float>>;

}  // namespace gossip
