#pragma once
// BackgroundLoad: `threads` busy threads for as long as it lives, the controlled load of
// `redwood bench --load N`: the way to see how inference holds up when other work wants the cores
// (a pipeline's own stages, or another process), for Redwood and its peer under the same load.

#include <atomic>
#include <thread>
#include <vector>

namespace redwood::app {

class BackgroundLoad {
 public:
  explicit BackgroundLoad(int threads) {
    for (int i = 0; i < threads; ++i) {
      workers_.emplace_back([this, i] {
        // Arithmetic the compiler cannot drop, never a sleep: each thread wants a whole core.
        volatile std::uint64_t x = 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(i);
        while (!stop_.load(std::memory_order_relaxed)) {
          for (int k = 0; k < 4096; ++k) x = x * 6364136223846793005ull + 1442695040888963407ull;
        }
      });
    }
  }
  ~BackgroundLoad() {
    stop_ = true;
    for (auto& t : workers_) t.join();
  }
  BackgroundLoad(const BackgroundLoad&) = delete;
  BackgroundLoad& operator=(const BackgroundLoad&) = delete;
  int threads() const { return static_cast<int>(workers_.size()); }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> workers_;
};

}  // namespace redwood::app
