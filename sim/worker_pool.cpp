// sim/worker_pool.cpp: a fixed set of threads running parallel loops for the simulator. Each
// loop hands out task indices from a shared counter; which thread runs a task never matters
// because tasks (one virtual peer each) touch only their own peer's state.
#include <algorithm>

#include "sim/worker_pool.hpp"

namespace gossip {

WorkerPool::WorkerPool(int threads)
    : threads_(threads > 0 ? threads
                           : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))) {
  for (int t = 1; t < threads_; ++t) workers_.emplace_back([this] { work(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void WorkerPool::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (next_ < count_) {
    // Take a chunk of tasks at a time: small tasks (a thousand peers of a tiny model) would
    // otherwise spend their time on this lock.
    const int begin = next_;
    const int end = std::min(count_, begin + chunk_);
    next_ = end;
    const auto* fn = fn_;
    ++running_;
    lock.unlock();
    std::exception_ptr error;
    int failed = -1;
    for (int i = begin; i < end; ++i) {
      try {
        (*fn)(i);
      } catch (...) {
        if (!error) {
          error = std::current_exception();
          failed = i;
        }
      }
    }
    lock.lock();
    if (error) errors_[failed] = error;
    if (--running_ == 0 && next_ >= count_) done_.notify_all();
  }
}

void WorkerPool::work() {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    drain();
  }
}

void WorkerPool::run(int count, const std::function<void(int)>& fn) {
  if (count <= 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    count_ = count;
    chunk_ = std::max(1, count / (threads_ * 8));
    next_ = 0;
    running_ = 0;
    errors_.assign(count, nullptr);
    ++generation_;
  }
  wake_.notify_all();
  drain();  // the caller works too
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return next_ >= count_ && running_ == 0; });
  fn_ = nullptr;
  for (auto& e : errors_)
    if (e) std::rethrow_exception(e);
}

}  // namespace gossip
