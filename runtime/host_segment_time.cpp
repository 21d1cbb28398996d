#include "runtime/host_segment_time.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "runtime/cpu_profile.hpp"
#include "runtime/executor.hpp"
#include "runtime/value_pool.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <vector>

namespace redwood::runtime {
namespace {

// Writes a buffer past the last-level cache (at most 256 MiB), which pushes out what it held.
class CacheEvictor {
 public:
  CacheEvictor() : buffer_(past_last_level_cache(std::size_t{256} << 20)) {}
  void evict() {
    std::memset(buffer_.data(), ++fill_, buffer_.size());
  }

 private:
  std::vector<unsigned char> buffer_;
  unsigned char fill_ = 0;
};

}  // namespace

std::optional<double> time_host_segment(const ModelAnalysis& analysis, const Segment& segment, int runs) {
  RW_EXPECTS(runs > 0, InvalidArgument, "time_host_segment: {} runs", runs);
  try {
    std::map<std::string, Tensor> feeds;
    for (const auto& in : segment.inputs) {
      const TensorDesc& d = analysis.values.at(in);
      feeds[boxed_name(in)] = Tensor::zeros(d.dtype, boxed_shape(d.shape));
    }
    // The outputs come from recycled memory, as the split runner's pool gives them: taken from the
    // heap each run, they would be page-faulted in each time (an 8.5 MB output: 2,000 faults).
    auto pool = std::make_shared<ValuePool>(nullptr);
    const TensorAllocator allocate = pool->allocator();
    Executor executor(segment.graph);
    executor.run(feeds, &allocate);  // plans: oneDNN's primitives, the workspace
    CacheEvictor cache;
    std::vector<double> ms;
    for (int r = 0; r < runs; ++r) {
      cache.evict();
      const auto t0 = std::chrono::steady_clock::now();
      executor.run(feeds, &allocate);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  } catch (const std::exception& e) {  // an Error, or memory for the inputs or the eviction buffer
    log().warn("{}: not timed on the host ({}); its nodes' times stand for it", segment.graph->name, e.what());
    return std::nullopt;
  }
}

}  // namespace redwood::runtime
