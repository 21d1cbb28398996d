#pragma once
// How many host threads the kernels that one thread runs may use.
//
// Two pools run the CPU kernels: oneDNN's OpenMP teams (one team per calling thread) and oneTBB's
// workers (the reference kernels' parallel_for). HostThreads runs work with both held to a count:
// oneTBB's by an arena of that many, OpenMP's by the count the CPU backend reads from
// thread_host_threads() before it makes or runs a primitive. A small host segment of a split
// model runs on a few threads as fast as on all, and steadier from batch to batch and from
// process to process (waking a team of every core costs more than its work): the planner times
// each host segment at several counts and its CPU runner keeps the one chosen (docs/planner.md).

#include <oneapi/tbb/task_arena.h>

#include <memory>
#include <utility>

namespace redwood {

/// The count HostThreads::run set for the calling thread's kernels; 0 outside one (the process's
/// count then applies).
int thread_host_threads();

/// The most host threads the process allows its kernels: oneTBB's limit (a `--threads`), else
/// every core oneTBB sees.
int process_host_threads();

class HostThreads {
 public:
  /// `threads` <= 0: no limit (run() calls straight through).
  explicit HostThreads(int threads = 0);

  int threads() const { return threads_; }

  /// Calls `f` with its kernels on at most threads() host threads, and returns what it returns.
  /// `f` may run on a oneTBB thread of the arena rather than the caller's (when other threads
  /// hold its slots); the count is set on whichever runs it.
  template <class F>
  decltype(auto) run(F&& f) const {
    if (!arena_) return std::forward<F>(f)();
    return arena_->execute([&]() -> decltype(auto) {
      const Scope scope(threads_);
      return std::forward<F>(f)();
    });
  }

 private:
  // Sets the calling thread's count, and restores the one before.
  class Scope {
   public:
    explicit Scope(int threads);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    int before_;
  };

  int threads_ = 0;
  std::shared_ptr<oneapi::tbb::task_arena> arena_;  // shared: a runner's copies share one arena
};

}  // namespace redwood
