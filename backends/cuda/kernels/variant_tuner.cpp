#include "backends/cuda/kernels/variant_tuner.hpp"

#include "backends/cuda/cuda_check.hpp"
#include "backends/cuda/kernels/nhwc/nhwc_storage.hpp"
#include "backends/cuda/stream.hpp"
#include "core/error.hpp"

#include <fmt/ranges.h>

namespace redwood::cuda {
namespace {

std::map<std::string, StoredPicks*>& registry() {
  static std::map<std::string, StoredPicks*> caches;
  return caches;
}

}  // namespace

// Filled by static initializers, before main, and only read after: no lock.
const std::map<std::string, StoredPicks*>& stored_picks() { return registry(); }

void register_stored_picks(const std::string& name, StoredPicks* picks) {
  RW_EXPECTS(registry().emplace(name, picks).second, Error, "two tuner caches are named \"{}\"", name);
}

const std::vector<std::string>& nhwc_storage_names() {
  static_assert(static_cast<int>(kernels::NhwcStorage::kF16) == 0 && static_cast<int>(kernels::NhwcStorage::kBF16) == 1 &&
                static_cast<int>(kernels::NhwcStorage::kF32) == 2);
  static const std::vector<std::string> names = {"fp16", "bf16", "fp32"};
  return names;
}

int pick_int(const nlohmann::json& object, const char* name, int lo, int hi) {
  auto it = object.find(name);
  RW_EXPECTS(it != object.end() && it->is_number_integer(), InvalidArgument, "\"{}\" is missing or not an integer",
             name);
  const auto v = it->get<std::int64_t>();
  RW_EXPECTS(v >= lo && v <= hi, InvalidArgument, "\"{}\" is {}, outside [{}, {}]", name, v, lo, hi);
  return static_cast<int>(v);
}

int pick_name(const nlohmann::json& object, const char* name, const std::vector<std::string>& names) {
  auto it = object.find(name);
  RW_EXPECTS(it != object.end() && it->is_string(), InvalidArgument, "\"{}\" is missing or not a string", name);
  const std::string value = it->get<std::string>();
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == value) return static_cast<int>(i);
  }
  throw InvalidArgument(fmt::format("\"{}\" is \"{}\", none of {}", name, value, fmt::join(names, ", ")));
}

VariantTimes time_variants(cudaStream_t stream, std::size_t count, const std::function<void()>& launch_default,
                           const std::function<void(std::size_t)>& launch_variant, int repeats) {
  Event start(true), mid(true), end(true);
  // Every variant once, untimed: a kernel's first launch may load its code (CUDA's lazy module
  // loading), and the host time that takes would be charged to it below (and past 3x the best,
  // it would not even be repeated).
  for (std::size_t i = 0; i < count; ++i) launch_variant(i);
  for (int round = 0; round < 10; ++round) {
    start.record(stream);
    for (int r = 0; r < 5; ++r) launch_default();
    mid.record(stream);
    mid.synchronize();
    if (mid.elapsed_ms_since(start) >= 1.0) break;
  }
  VariantTimes t;
  t.ms.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    start.record(stream);
    launch_variant(i);
    mid.record(stream);
    mid.synchronize();
    float ms = static_cast<float>(mid.elapsed_ms_since(start));
    if (i == 0 || ms <= 3 * t.best_ms) {  // else: slow from the first launch, not worth the repeats
      for (int r = 0; r < repeats; ++r) launch_variant(i);
      end.record(stream);
      end.synchronize();
      ms = static_cast<float>(end.elapsed_ms_since(mid)) / static_cast<float>(repeats);
      if (i == 0 || ms < t.best_ms) {
        t.best_ms = ms;
        t.best = i;
      }
    }
    t.ms[i] = ms;
  }
  return t;
}

}  // namespace redwood::cuda
