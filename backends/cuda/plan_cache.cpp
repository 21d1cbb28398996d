#include "backends/cuda/plan_cache.hpp"

#include "backends/cuda/device.hpp"
#include "backends/cuda/device_probe.hpp"
#include "backends/cuda/kernels/variant_tuner.hpp"
#include "core/cache_dir.hpp"
#include "core/error.hpp"
#include "core/graph/graph_file.hpp"
#include "core/graph/graph_hash.hpp"
#include "core/log.hpp"

#include <fmt/format.h>

#include <atomic>
#include <fstream>
#include <regex>

namespace redwood::cuda {
namespace {

// The kernel module's version, which CUDA's API does not give: the CUDA version a driver supports
// stays the same across its bug-fix releases, whose code generation may not.
std::string kernel_module_version() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  std::getline(in, line);
  return driver_version_from(line);
}

std::string cuda_version(int v) { return fmt::format("{}.{}", v / 1000, v % 1000 / 10); }

std::string on_off(bool v) { return v ? "on" : "off"; }

}  // namespace

std::string driver_version_from(const std::string& line) {
  // The first dotted number after "Kernel Module": the open modules name the platform first
  // ("... Open Kernel Module for x86_64  580.159.04  Release Build ...").
  std::smatch m;
  if (std::regex_search(line, m, std::regex(R"(Kernel Module\b.*?\s([0-9]+\.[0-9]+(\.[0-9]+)?)(\s|$))"))) return m[1];
  return "unknown";
}

std::map<std::string, std::string> plan_cache_options(const RunnerOptions& options) {
  // The CUDA options that change the passes' graph or what the tuners pick from.
  std::map<std::string, std::string> out = cuda_plan_option_values(options.cuda);
  out["precision"] = std::string(precision_name(options.precision));
  out["optimize"] = on_off(options.optimize);
  out["nhwc"] = on_off(options.nhwc);
  // With the NHWC groups only (space_to_depth_stem(options)), so that the key says what was done.
  out["space_to_depth_stem"] = on_off(space_to_depth_stem(options));
  // A budget spent mid-plan leaves defaults that the entry keeps, so another budget is another entry.
  out["tune_budget_ms"] = fmt::format("{}", options.tune_budget_ms);
  return out;
}

runtime::PlanCacheKey plan_cache_key(const std::string& model_hash, const RunnerOptions& options, int device) {
  const ProbeResult& probe = cuda_devices();
  RW_EXPECTS(device >= 0 && static_cast<std::size_t>(device) < probe.devices.size(), InvalidArgument,
             "this process sees no GPU {} ({})", device,
             probe.error.empty() ? fmt::format("{} GPUs", probe.devices.size()) : probe.error);
  const DeviceInfo& d = probe.devices[static_cast<std::size_t>(device)];
  runtime::PlanCacheKey key;
  key.model_hash = model_hash;
  key.device = fmt::format("{}, sm_{}{}, {} SMs", d.name, d.compute_major, d.compute_minor, d.multiprocessors);
  key.driver = fmt::format("{}, CUDA {}", kernel_module_version(), cuda_version(probe.driver_version));
  key.runtime = fmt::format("CUDA runtime {}", cuda_version(probe.runtime_version));
  key.redwood = redwood_version();
  key.options = plan_cache_options(options);
  return key;
}

void check_tuned_pick(const std::string& tuner, const nlohmann::json& pick, int device) {
  const auto& tuners = stored_picks();
  auto it = tuners.find(tuner);
  RW_EXPECTS(it != tuners.end(), InvalidArgument, "this build has no tuner \"{}\"", tuner);
  it->second->check(pick, device);
}

std::size_t seed_tuned_picks(const runtime::PickSet& picks, int device) {
  std::size_t n = 0;
  for (const auto& [tuner, by_key] : picks.tuners()) {
    StoredPicks* cache = stored_picks().at(tuner);
    for (const auto& [key, pick] : by_key) {
      cache->seed(pick, device);
      ++n;
    }
  }
  return n;
}

void forget_tuned_picks() {
  for (const auto& [name, cache] : stored_picks()) cache->clear();
}

namespace {

std::string model_name(const Graph& graph) {
  return graph.source.empty() ? graph.name : std::filesystem::path(graph.source).filename().string();
}

}  // namespace

std::unique_ptr<RunnerPlanCache> make_runner_plan_cache(const Graph& graph, const RunnerOptions& options, int device) {
  try {
    return std::make_unique<RunnerPlanCache>(graph, options, device);
  } catch (const Error& e) {
    log().warn("plan cache: not used for {}: {}", model_name(graph), e.what());
    return nullptr;
  }
}

RunnerPlanCache::RunnerPlanCache(const Graph& graph, const RunnerOptions& options, int device)
    : device_(device),
      cache_(options.plan_cache_dir.empty() ? runtime::plan_cache_dir() : options.plan_cache_dir,
             plan_cache_key(hash_hex(graph_hash(graph)), options, device), model_name(graph),
             [device](const std::string& tuner, const nlohmann::json& pick) { check_tuned_pick(tuner, pick, device); }) {}

void RunnerPlanCache::before_tuning() {
  std::call_once(seeded_once_, [&] {
    seeded_ = seed_tuned_picks(cache_.load(), device_);
    if (seeded_ > 0) log().debug("plan cache: {}: {} tuned picks seeded", cache_.file().string(), seeded_);
  });
}

void RunnerPlanCache::after_tuning(const runtime::PickRecorder& recorder) { cache_.add(recorder.picks()); }

std::filesystem::path RunnerPlanCache::optimized_file() const {
  std::filesystem::path file = cache_.file();
  return file.replace_extension(".rwgraph");
}

namespace {

// What an optimized graph's file keeps beside the graph: the build and the key it was made for,
// and what the passes did (GraphRunner::pass_records, which `redwood plan` and the benchmarks show).
nlohmann::json optimized_stamp(const runtime::PlanCacheKey& key, const std::vector<PassRecord>& records) {
  nlohmann::json passes = nlohmann::json::array();
  for (const PassRecord& r : records) passes.push_back({{"pass", r.pass}, {"changes", r.changes}});
  return {{"build", build_stamp()}, {"key", key.to_json()}, {"passes", passes}};
}

}  // namespace

std::shared_ptr<Graph> RunnerPlanCache::load_optimized(std::vector<PassRecord>& records) const {
  const std::filesystem::path file = optimized_file();
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return nullptr;
  try {
    std::string stamp_text;
    std::shared_ptr<Graph> graph = read_graph_file(file, &stamp_text);
    const nlohmann::json stamp = nlohmann::json::parse(stamp_text);
    if (stamp.at("build").get<std::string>() != build_stamp()) {
      log().info("plan cache: {} was made by another build; optimizing again", file.string());
      return nullptr;
    }
    const std::string differs = cache_.key().difference(runtime::PlanCacheKey::from_json(stamp.at("key")));
    RW_EXPECTS(differs.empty(), InvalidArgument, "made for another key: {}", differs);
    std::vector<PassRecord> read;
    for (const auto& p : stamp.at("passes")) {
      read.push_back({p.at("pass").get<std::string>(), p.at("changes").get<std::vector<std::string>>()});
    }
    records = std::move(read);
    return graph;
  } catch (const std::exception& e) {
    log().warn("plan cache: {} not used: {}; optimizing again", file.string(), e.what());
    return nullptr;
  }
}

void RunnerPlanCache::save_optimized(const Graph& graph, const std::vector<PassRecord>& records) const {
  try {
    write_graph_file(optimized_file(), graph, optimized_stamp(cache_.key(), records).dump());
  } catch (const Error& e) {
    warn_once("plan cache: optimized graph not written",
              fmt::format("plan cache: the optimized graph is not kept: {}", e.what()));
  }
}

}  // namespace redwood::cuda
