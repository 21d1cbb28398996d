#include "core/host_threads.hpp"

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>

#include <algorithm>

namespace redwood {
namespace {
thread_local int current = 0;
}  // namespace

int thread_host_threads() { return current; }

int process_host_threads() {
  const auto allowed = oneapi::tbb::global_control::active_value(oneapi::tbb::global_control::max_allowed_parallelism);
  return std::max(1, std::min(oneapi::tbb::info::default_concurrency(), static_cast<int>(allowed)));
}

HostThreads::HostThreads(int threads) : threads_(std::max(threads, 0)) {
  if (threads_ > 0) arena_ = std::make_shared<oneapi::tbb::task_arena>(threads_);
}

HostThreads::Scope::Scope(int threads) : before_(current) { current = threads; }

HostThreads::Scope::~Scope() { current = before_; }

}  // namespace redwood
