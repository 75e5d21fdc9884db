// tests/device_like_backend.hpp: the CPU backend posing as a GPU's, for tests
// of what a device backend changes (uploads and downloads, one thread at a time
// in a backend, CUDA graphs) without a GPU.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "gossip/backend.hpp"

namespace gossip::test {

/// The CPU backend posing as a GPU's: its tensors are its own (host_memory() false), so the trainer
/// gathers batches on the host and uploads them, and the simulator downloads every model it reads,
/// as they do for the CUDA backend; the math is the CPU's, call for call. Its graphs record the
/// calls made while capturing and replay them (reading the buffers at the replay, as a GPU's do); a
/// read-back while capturing breaks the capture, as on a GPU.
class DeviceLikeBackend final : public Backend {
 public:
  std::string name() const override { return "device-like"; }
  std::string describe() const override { return "device-like (the CPU's math)"; }
  bool host_memory() const override { return false; }
  void* allocate(std::size_t bytes) override {
    ++allocations;
    return cpu_->allocate(bytes);
  }
  void release(void* p) noexcept override { cpu_->release(p); }
  void upload(void* dst, const void* src, std::size_t bytes) override {
    const Use use(*this);
    if (breaks_capture("upload")) return;
    ++uploads;
    if (pinned_.holds(src, bytes)) ++pinned_uploads;
    std::memcpy(dst, src, bytes);
  }
  void download(void* dst, const void* src, std::size_t bytes) override {
    const Use use(*this);
    if (breaks_capture("download")) return;
    ++downloads;
    if (pinned_.holds(dst, bytes)) ++pinned_downloads;
    std::memcpy(dst, src, bytes);
  }
  void synchronize() override {}
  /// As a copy queued on a stream: it runs at the next call into the backend, after whatever
  /// the host did in between (a caller that rewrites `src` before then uploads other bytes).
  void upload_async(void* dst, const void* src, std::size_t bytes) override {
    const Use use(*this);
    if (breaks_capture("upload_async")) return;
    ++async_uploads;
    if (pinned_.holds(src, bytes)) ++pinned_uploads;
    queued_uploads_.push_back({dst, src, bytes, 0});
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    run([=] { std::memcpy(dst, src, bytes); });
  }
  /// As a side stream that runs late: the bytes are read from `src` only at wait_downloads(),
  /// after whatever was queued in between (a caller that lets later work write `src`, or reads
  /// `dst` before waiting, gets other bytes than a GPU would give it at best).
  void download_async(void* dst, const void* src, std::size_t bytes) override {
    const Use use(*this);
    if (breaks_capture("download_async")) return;
    ++async_downloads;
    if (pinned_.holds(dst, bytes)) ++pinned_downloads;
    pending_.push_back({dst, src, bytes, calls_});
  }
  void wait_downloads() override {
    const Use use(*this);
    for (const Pending& p : pending_) {
      if (calls_ > p.calls) ++overlapped_downloads;
      std::memcpy(p.dst, p.src, p.bytes);
    }
    pending_.clear();
  }
  /// Nothing to pin: its copies are memcpy's, whatever memory they read.
  void pin_host(void* /*p*/, std::size_t /*bytes*/) override {}
  /// Plain memory standing for a GPU's page-locked memory: it counts what it hands out, and
  /// the copies to and from it (pinned_uploads, pinned_downloads).
  HostMemory* pinned_memory() override { return &pinned_; }
  void gemm(const RowMajorGemm& g, const float* a, const float* b, float* c) override {
    run([=, this] { cpu_->gemm(g, a, b, c); });
  }
  std::string gemm_name() const override { return cpu_->gemm_name(); }
  void use_gemm(const std::string& name) override { cpu_->use_gemm(name); }
  void bias_act(float* y, const float* bias, int rows, int cols, bool relu) override {
    run([=, this] { cpu_->bias_act(y, bias, rows, cols, relu); });
  }
  void relu_backward(float* dy, const float* y, std::int64_t n) override {
    run([=, this] { cpu_->relu_backward(dy, y, n); });
  }
  void column_sums(const float* dy, int rows, int cols, float* db) override {
    run([=, this] { cpu_->column_sums(dy, rows, cols, db); });
  }
  std::pair<double, std::int64_t> softmax_xent(const float* logits, const std::int32_t* labels,
                                               int rows, int cols, float* grad) override {
    const Use use(*this);
    if (recording_) {  // as on a GPU: nothing read back while capturing
      recording_->calls.push_back([=, this, rec = recording_.get()] {
        rec->result = cpu_->softmax_xent(logits, labels, rows, cols, grad);
      });
      return {0.0, 0};
    }
    return cpu_->softmax_xent(logits, labels, rows, cols, grad);
  }
  void sgd_update(float* params, float* velocity, const float* grads, std::int64_t n, float lr,
                  float momentum, float weight_decay, bool nesterov) override {
    run([=, this] {
      cpu_->sgd_update(params, velocity, grads, n, lr, momentum, weight_decay, nesterov);
    });
  }
  void mix(float* out, const float* const* in, const float* w, int k, std::int64_t n) override {
    // The inputs and weights are the call's (a kernel's arguments), not read at
    // a replay.
    std::vector<const float*> ins(in, in + k);
    std::vector<float> ws(w, w + k);
    run([=, this] { cpu_->mix(out, ins.data(), ws.data(), k, n); });
  }
  void fill(float* p, float value, std::int64_t n) override {
    run([=, this] { cpu_->fill(p, value, n); });
  }
  void relu(const float* x, float* y, std::int64_t n) override {
    run([=, this] { cpu_->relu(x, y, n); });
  }
  void row_sums(const float* a, int rows, int cols, bool accumulate, float* out) override {
    run([=, this] { cpu_->row_sums(a, rows, cols, accumulate, out); });
  }
  void im2col(const float* x, const ConvGeom& g, int count, float* col) override {
    run([=, this] { cpu_->im2col(x, g, count, col); });
  }
  void col2im(const float* col, const ConvGeom& g, int count, float* dx) override {
    run([=, this] { cpu_->col2im(col, g, count, dx); });
  }
  void conv_output(const float* t, const float* bias, const ConvGeom& g, int count, bool relu,
                   float* y) override {
    run([=, this] { cpu_->conv_output(t, bias, g, count, relu, y); });
  }
  void conv_grad_layout(const float* dy, const ConvGeom& g, int count, float* t) override {
    run([=, this] { cpu_->conv_grad_layout(dy, g, count, t); });
  }
  /// The CPU's convolutions: im2col + GEMM, no library (cudnn refused as the CPU refuses it).
  std::string conv_library() const override { return cpu_->conv_library(); }
  std::string conv_line() const override { return cpu_->conv_line(); }
  std::string use_conv(ConvEngine engine) override { return cpu_->use_conv(engine); }
  void pool_forward(const float* x, const PoolGeom& g, int rows, float* y,
                    std::int32_t* arg) override {
    run([=, this] { cpu_->pool_forward(x, g, rows, y, arg); });
  }
  void pool_backward(const float* dy, const std::int32_t* arg, const PoolGeom& g, int rows,
                     float* dx) override {
    run([=, this] { cpu_->pool_backward(dy, arg, g, rows, dx); });
  }
  void group_norm_forward(const float* x, const float* gamma, const float* beta,
                          const GroupNormGeom& g, int rows, float* y, float* mean,
                          float* rstd) override {
    run([=, this] { cpu_->group_norm_forward(x, gamma, beta, g, rows, y, mean, rstd); });
  }
  void group_norm_backward(const float* x, const float* dy, const float* gamma, const float* mean,
                           const float* rstd, const GroupNormGeom& g, int rows, float* dx,
                           float* dgamma, float* dbeta) override {
    run([=, this] {
      cpu_->group_norm_backward(x, dy, gamma, mean, rstd, g, rows, dx, dgamma, dbeta);
    });
  }
  void batch_norm_forward(const float* x, const float* gamma, const float* beta,
                          const BatchNormGeom& g, int rows, bool training, float* y, float* mean,
                          float* rstd, float* running_mean, float* running_var) override {
    run([=, this] {
      cpu_->batch_norm_forward(x, gamma, beta, g, rows, training, y, mean, rstd, running_mean,
                               running_var);
    });
  }
  void batch_norm_backward(const float* x, const float* dy, const float* gamma, const float* mean,
                           const float* rstd, const BatchNormGeom& g, int rows, float* dx,
                           float* dgamma, float* dbeta) override {
    run([=, this] {
      cpu_->batch_norm_backward(x, dy, gamma, mean, rstd, g, rows, dx, dgamma, dbeta);
    });
  }
  void dropout(const float* x, float* y, std::int64_t n, float p, std::uint64_t key) override {
    run([=, this] { cpu_->dropout(x, y, n, p, key); });
  }
  void choco_difference(const float* x, const float* xhat, float* d, std::int64_t n) override {
    run([=, this] { cpu_->choco_difference(x, xhat, d, n); });
  }
  void choco_step(float* x, const float* s, const float* xhat, float gamma,
                  std::int64_t n) override {
    run([=, this] { cpu_->choco_step(x, s, xhat, gamma, n); });
  }
  void quantize(const float* v, std::int64_t n, int bits, std::int64_t block, std::uint64_t key,
                float* scales, std::int8_t* codes) override {
    run([=, this] { cpu_->quantize(v, n, bits, block, key, scales, codes); });
  }
  void dequantize_add(float* target, float weight, const float* scales, const std::int8_t* codes,
                      std::int64_t n, std::int64_t block, int bits) override {
    run([=, this] { cpu_->dequantize_add(target, weight, scales, codes, n, block, bits); });
  }
  void scatter_add(float* target, float weight, const std::uint32_t* index, const float* values,
                   std::int64_t k) override {
    run([=, this] { cpu_->scatter_add(target, weight, index, values, k); });
  }
  void add_weighted(float* target, float weight, const float* values, std::int64_t n) override {
    run([=, this] { cpu_->add_weighted(target, weight, values, n); });
  }
  void squared_distances(const float* r, const float* const* m, int k, std::int64_t n,
                         double* out) override {
    const Use use(*this);
    if (breaks_capture("squared_distances")) return;
    cpu_->squared_distances(r, m, k, n, out);
  }

  // ---- graphs: what a capture records is replayed call for call, as a CUDA
  // graph's kernels --
  std::string capture_begin() override {
    if (!refuse_capture.empty()) return refuse_capture;
    if (recording_) return "a capture is under way already";
    recording_ = std::make_shared<Recording>();
    return "";
  }
  std::unique_ptr<StepGraph> capture_end(std::string& why) override {
    if (!recording_) {
      why = "capture_end without capture_begin";
      return nullptr;
    }
    std::shared_ptr<Recording> done = std::move(recording_);
    recording_.reset();
    why = done->broken.empty() ? break_capture : done->broken;
    if (!why.empty()) return nullptr;
    ++captures;
    return std::make_unique<Graph>(std::move(done), this);
  }

  inline static std::atomic<std::int64_t> allocations{0}, uploads{0}, downloads{0};
  inline static std::atomic<std::int64_t> captures{0}, replays{0};
  /// download_async() calls, and those that had device work queued after them before they were
  /// waited for (the copies that overlapped the computation).
  inline static std::atomic<std::int64_t> async_downloads{0}, overlapped_downloads{0};
  /// upload_async() calls.
  inline static std::atomic<std::int64_t> async_uploads{0};
  /// Calls that came while another thread's call was in the same backend.
  inline static std::atomic<std::int64_t> overlapping_uses{0};
  /// Buffers pinned_memory() handed out, those not given back yet, and the copies whose host
  /// side lay in one of them.
  inline static std::atomic<std::int64_t> pinned_allocations{0}, pinned_live{0};
  inline static std::atomic<std::int64_t> pinned_uploads{0}, pinned_downloads{0};
  /// When set, capture_begin refuses with it (a device whose graphs do not
  /// start).
  inline static std::string refuse_capture;
  /// When set, capture_end fails with it (a capture the device invalidates).
  inline static std::string break_capture;

 private:
  struct Recording {
    std::vector<std::function<void()>> calls;
    std::pair<double, std::int64_t> result{0.0, 0};
    std::string broken;  // a call a graph cannot hold (reading back), as CUDA's
                         // capture fails
  };
  class Graph final : public StepGraph {
   public:
    Graph(std::shared_ptr<Recording> r, DeviceLikeBackend* b) : r_(std::move(r)), b_(b) {}
    std::string replay() override {
      const Use use(*b_);  // after the copies queued before it
      ++replays;
      ++b_->calls_;
      for (auto& call : r_->calls) call();
      return "";
    }
    std::pair<double, std::int64_t> softmax_result() override { return r_->result; }

   private:
    std::shared_ptr<Recording> r_;
    DeviceLikeBackend* b_;  // the backend that recorded it
  };
  /// Counts, in `overlapping_uses`, a call that finds another thread's call still in this
  /// backend (a GPU backend's stream and scratch serve one thread at a time).
  class Use {
   public:
    explicit Use(DeviceLikeBackend& b) : b_(b) {
      if (b_.busy_.exchange(true)) ++overlapping_uses;
      for (const Pending& p : b_.queued_uploads_) std::memcpy(p.dst, p.src, p.bytes);
      b_.queued_uploads_.clear();
    }
    ~Use() { b_.busy_ = false; }
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;

   private:
    DeviceLikeBackend& b_;
  };

  /// Runs a call, or records it while capturing.
  void run(std::function<void()> call) {
    const Use use(*this);
    ++calls_;
    if (recording_)
      recording_->calls.push_back(std::move(call));
    else
      call();
  }
  /// True (and the capture broken) when `what` comes while capturing.
  bool breaks_capture(const char* what) {
    if (!recording_) return false;
    if (recording_->broken.empty())
      recording_->broken = std::string("capturing the step: ") + what + " is not allowed";
    return true;
  }

  /// The page-locked memory of this pretend device: plain memory, counted and remembered.
  class PinnedMemory final : public HostMemory {
   public:
    void* allocate(std::size_t bytes) override {
      void* p = ::operator new(bytes);
      std::lock_guard lk(mu_);
      blocks_[reinterpret_cast<std::uintptr_t>(p)] = bytes;
      ++pinned_allocations;
      ++pinned_live;
      return p;
    }
    void release(void* p) noexcept override {
      if (p == nullptr) return;
      {
        std::lock_guard lk(mu_);
        blocks_.erase(reinterpret_cast<std::uintptr_t>(p));
      }
      --pinned_live;
      ::operator delete(p);
    }
    /// Whether [p, p + bytes) lies in one block handed out.
    bool holds(const void* p, std::size_t bytes) {
      const auto at = reinterpret_cast<std::uintptr_t>(p);
      std::lock_guard lk(mu_);
      auto it = blocks_.upper_bound(at);
      if (it == blocks_.begin()) return false;
      --it;
      return at + bytes <= it->first + it->second;
    }

   private:
    std::mutex mu_;
    std::map<std::uintptr_t, std::size_t> blocks_;
  };

  std::unique_ptr<Backend> cpu_ = make_cpu_backend(1);
  std::shared_ptr<Recording> recording_;
  PinnedMemory pinned_;
  /// download_async's copies not done yet, and the device calls run or replayed so far.
  struct Pending {
    void* dst;
    const void* src;
    std::size_t bytes;
    std::int64_t calls;  // calls_ when it started
  };
  std::vector<Pending> pending_;
  std::vector<Pending> queued_uploads_;  // upload_async's, run at the next call
  std::int64_t calls_ = 0;
  std::atomic<bool> busy_{false};
};

}  // namespace gossip::test
