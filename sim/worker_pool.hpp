// sim/worker_pool.hpp: the simulator's worker threads. Private to sim/ (the sim benchmark
// includes it by this path).
#pragma once
#if !defined(GOSSIP_ROOM_SIM)
#error "sim/worker_pool.hpp belongs to room sim, which this room does not use (see the room table in meson.build)"
#endif

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gossip {

/// A fixed pool of worker threads running parallel loops. Tasks of one loop must be independent;
/// results then do not depend on the thread count. Exceptions are rethrown by run() (the one of
/// the lowest task index).
class WorkerPool {
 public:
  /// `threads` <= 0: the number of cores. With 1 thread, run() works on the caller's thread.
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int threads() const { return threads_; }
  /// Calls fn(i) for i in [0, count) on the pool and waits for all of them.
  void run(int count, const std::function<void(int)>& fn);

 private:
  void work();
  void drain();

  int threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* fn_ = nullptr;
  int count_ = 0;
  int chunk_ = 1;
  int next_ = 0;
  int running_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  std::vector<std::exception_ptr> errors_;
};

}  // namespace gossip
