/// backend_device: the device part of a Backend (gossip/backend.hpp): where tensors live and how
/// bytes move: memory, copies to, from and within the device, page-locked host memory, and the
/// recorded steps of CUDA graphs. Pointers a device returns are device pointers: only that
/// device's operations (its backend's operation groups, and upload/download) may touch them,
/// unless host_memory() is true. Code that only moves memory takes a Device (DeviceArray does).
/// Keep this header free of anything nvcc's C++17 mode cannot compile.
#pragma once
#if !defined(GOSSIP_ROOM_COMPUTE)
#error "gossip/backend_device.hpp belongs to room compute, which this room does not use (see the room table in meson.build)"
#endif

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "gossip/host_memory.hpp"

namespace gossip {

/// A recorded step (Device::capture_end), valid while its backend lives.
class StepGraph {
 public:
  virtual ~StepGraph() = default;
  /// Runs the recorded work once more, queued like any other call: "" or why not.
  virtual std::string replay() = 0;
  /// The mean loss and correct predictions of the last softmax_xent recorded, from the last
  /// replay (waits for it).
  virtual std::pair<double, std::int64_t> softmax_result() = 0;
};

/// Memory, copies, streams and graphs of one backend. The operation groups (gossip/gemm_ops.hpp,
/// gossip/layer_kernels.hpp, gossip/gossip_kernels.hpp) each run on a Device (a virtual base of
/// each, so a Backend is one device with all three groups).
class Device {
 public:
  virtual ~Device() = default;

  /// True when device pointers are ordinary host memory (the CPU backend).
  virtual bool host_memory() const = 0;

  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* p) noexcept = 0;
  virtual void upload(void* dst, const void* src, std::size_t bytes) = 0;
  virtual void download(void* dst, const void* src, std::size_t bytes) = 0;
  /// Waits for queued work (a no-op on the CPU).
  virtual void synchronize() = 0;
  /// Queues a copy of `bytes` from host memory `src` (page-locked where the backend has it) to
  /// this backend's `dst`, after the work queued before it, and returns without waiting: `src`
  /// must stay unchanged until the backend next waits for its work (synchronize(), a download,
  /// a loss read). A step's batch goes up so, while the last step's update still runs. Default
  /// (the CPU): upload(), done at once.
  virtual void upload_async(void* dst, const void* src, std::size_t bytes) {
    upload(dst, src, bytes);
  }
  /// Copies `bytes` between two of this backend's buffers after the work queued before it (a
  /// GPU: on the device, in stream order, without waiting; the CPU: at once).
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  /// Starts copying `bytes` of `src` (this backend's) to `dst` (host memory, page-locked where
  /// the backend has it) once the work queued so far is done, beside the work queued after it
  /// (the CUDA backend: on a side stream, so the copy overlaps the next step's kernels). `dst`
  /// holds the bytes once wait_downloads() returns; until then neither buffer may be touched,
  /// and no later work may write `src`. Default (the CPU): download(), done at once.
  virtual void download_async(void* dst, const void* src, std::size_t bytes) {
    download(dst, src, bytes);
  }
  /// Waits for every download_async() started so far (a no-op where they are done at once).
  virtual void wait_downloads() = 0;
  /// Makes a host buffer that upload() and download() use every round faster to copy (the CUDA
  /// backend page-locks it for the backend's lifetime); a no-op on the CPU.
  virtual void pin_host(void* p, std::size_t bytes) = 0;
  /// Page-locked host memory for buffers that are filled elsewhere and then uploaded (the
  /// transport's receive buffers: NetConfig::host_memory), valid for the backend's lifetime;
  /// null where uploads need none (the CPU).
  virtual HostMemory* pinned_memory() = 0;
  /// CUDA graphs, for a step whose shapes and buffers are fixed (train.graphs: step; `gossip
  /// bench step` measures whether one pays): the work queued between capture_begin() and
  /// capture_end() is recorded into a graph instead of run, and the graph's replay() runs it
  /// again, reading and writing the buffers it was recorded with. While capturing,
  /// softmax_xent reads nothing back (it returns loss 0 and 0 correct); after a replay, the
  /// graph's softmax_result() reads what the last softmax_xent it recorded would have returned.
  /// capture_begin returns "" when it worked, else why not (a backend without graphs says so:
  /// the CPU's "cpu backend: no CUDA graphs here"); capture_end returns the graph, or null with
  /// `why` set, and the backend works as before. Buffers a backend owns and a graph may have
  /// recorded (scratch, workspaces) live as long as the backend, so a graph stays valid however
  /// the backend's later calls grow them.
  virtual std::string capture_begin() = 0;
  virtual std::unique_ptr<StepGraph> capture_end(std::string& why) = 0;
};

/// A typed device array owned by RAII; move-only.
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  DeviceArray(Device& device, std::size_t n)
      : device_(&device), size_(n),
        data_(static_cast<T*>(n ? device.allocate(n * sizeof(T)) : nullptr)) {}
  ~DeviceArray() { reset(); }
  DeviceArray(DeviceArray&& o) noexcept { *this = std::move(o); }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      reset();
      device_ = std::exchange(o.device_, nullptr);
      size_ = std::exchange(o.size_, 0);
      data_ = std::exchange(o.data_, nullptr);
    }
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return size_; }
  std::size_t bytes() const { return size_ * sizeof(T); }
  void upload(const T* host, std::size_t n) { device_->upload(data_, host, n * sizeof(T)); }
  void download(T* host, std::size_t n) const { device_->download(host, data_, n * sizeof(T)); }

 private:
  void reset() noexcept {
    if (data_ != nullptr) device_->release(data_);
    data_ = nullptr;
    size_ = 0;
  }

  Device* device_ = nullptr;
  std::size_t size_ = 0;
  T* data_ = nullptr;
};

}  // namespace gossip
