// Building a Pipeline from its file: every section read through Params (unknown keys, wrong
// types and missing files fail at their place), models loaded once, stages made in order and
// their contracts checked against what earlier stages write.

#include "pipelines/pipeline.hpp"

#include "pipelines/source_list.hpp"
#include "core/log.hpp"
#include "runtime/placed_runner.hpp"
#include "core/onnx/onnx_import.hpp"
#include "runtime/cpu_runner.hpp"

#include <fmt/format.h>
#include <oneapi/tbb/global_control.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <thread>

namespace redwood {
namespace {

template <typename Registry>
std::string known_types(const Registry& registry) {
  std::vector<std::string> names;
  for (const auto& [n, _] : registry) names.push_back(n);
  return fmt::format("{}", fmt::join(names, ", "));
}

/// A list section: every element a map with a unique name and a registered type.
template <typename Registry>
std::vector<std::pair<YAML::Node, std::string>> list_section(const Params& root, Params& top, const std::string& key,
                                                             const Registry& registry, const std::string& kind,
                                                             bool required) {
  const YAML::Node list = top.node(key);
  std::vector<std::pair<YAML::Node, std::string>> out;
  if (!list || list.IsNull()) {
    if (required) top.fail(key, fmt::format("missing required key '{}' (a list of {}s)", key, kind));
    return out;
  }
  if (!list.IsSequence()) root.origin().fail(list, fmt::format("{}: expected a list of {}s", key, kind));
  std::set<std::string> names;
  for (const auto& element : list) {
    if (!element.IsMap()) root.origin().fail(element, fmt::format("{}: each {} is a map with name and type", key, kind));
    Params p(element, std::make_shared<ConfigOrigin>(root.origin()), kind);
    const auto name = p.require<std::string>("name");
    if (!names.insert(name).second) p.fail("name", fmt::format("a second {} named '{}'", kind, name));
    const auto type = p.require<std::string>("type");
    if (!registry.count(type)) p.fail("type", fmt::format("unknown {} type '{}' (known: {})", kind, type, known_types(registry)));
    out.emplace_back(element, name);
  }
  return out;
}

}  // namespace

namespace {

// Starts making each GPU's context on a thread of its own (DeviceRunnerFactory::warm_up), once
// per GPU; the threads join when `warming` goes, after the runners are made.
void warm_up_gpus(const std::vector<int>& devices, std::map<int, std::jthread>& warming) {
  for (int d : devices) {
    if (!warming.count(d)) warming.emplace(d, warm_up_device("cuda", d));
  }
}

}  // namespace

Pipeline::Pipeline(const PipelineFile& file, const PipelineOptions& options) : options_(options) {
  std::map<int, std::jthread> warming;
  RW_EXPECTS(options.streams >= 1 && options.streams <= 4096, InvalidArgument, "--streams must be from 1 to 4096, not {}",
             options.streams);
  RW_EXPECTS(options.fps >= 0, InvalidArgument, "--fps must be >= 0, not {}", options.fps);
  const auto origin = std::shared_ptr<const ConfigOrigin>(file.origin);
  Params root(file.root, origin, "pipeline");
  const int version = root.require<int>("version");
  if (version != 1) root.fail("version", fmt::format("unsupported version {} (this Redwood reads 1)", version));
  name_ = root.get<std::string>("name", file.origin->file.stem().string());
  // Unknown top-level keys fail before anything slow (model loading) runs.
  for (const char* key : {"service", "sources", "models", "stages", "sinks"}) root.has(key);
  root.finish();

  if (root.has("service")) {
    Params s(root.node("service"), origin, "service");
    service_.max_in_flight = s.get<int>("max_in_flight", service_.max_in_flight);
    service_.queue = s.get<int>("queue", service_.queue);
    service_.threads = s.get<int>("threads", service_.threads);
    service_.status_interval_s = s.get<double>("status_interval_s", service_.status_interval_s);
    service_.placement.latency_limit_ms = s.get<double>("latency_limit_ms", 0);
    service_.placement.cpu_stage_ms = s.get<double>("cpu_stage_ms", 0);
    if (!(service_.placement.latency_limit_ms >= 0)) s.fail("latency_limit_ms", "must be >= 0 (0: no limit)");
    if (!(service_.placement.cpu_stage_ms >= 0)) s.fail("cpu_stage_ms", "must be >= 0 (core-milliseconds a frame)");
    s.node("metrics");  // read (and checked) by read_metrics_settings
    service_.metrics = read_metrics_settings(file);
    const auto pool_mb = s.get<std::int64_t>("frame_pool_mb", static_cast<std::int64_t>(service_.memory.limit_bytes >> 20));
    const auto chunk_mb = s.get<std::int64_t>("frame_chunk_mb", static_cast<std::int64_t>(service_.memory.chunk_bytes >> 20));
    // The buddy pool's chunk is its largest block: a power of two.
    if (chunk_mb < 1 || chunk_mb > 4096 || (chunk_mb & (chunk_mb - 1)) != 0) {
      s.fail("frame_chunk_mb", "must be a power of two from 1 to 4096");
    }
    if (pool_mb < chunk_mb) s.fail("frame_pool_mb", fmt::format("must be at least frame_chunk_mb ({})", chunk_mb));
    const auto reserve_mb = s.get<std::int64_t>("frame_pool_reserve_mb", 0);
    if (reserve_mb < 0 || reserve_mb > pool_mb) {
      s.fail("frame_pool_reserve_mb", fmt::format("must be from 0 to frame_pool_mb ({})", pool_mb));
    }
    service_.memory.reserve_bytes = static_cast<std::size_t>(reserve_mb) << 20;
    service_.memory.chunk_bytes = static_cast<std::size_t>(chunk_mb) << 20;
    service_.memory.limit_bytes = static_cast<std::size_t>(pool_mb) << 20;
    if (service_.max_in_flight < 1) s.fail("max_in_flight", "must be at least 1");
    if (service_.queue < 1) s.fail("queue", "must be at least 1");
    if (!(service_.status_interval_s > 0 && service_.status_interval_s <= 3600)) {
      s.fail("status_interval_s", "must be above 0 and at most 3600 (seconds between status lines and metrics updates)");
    }
    if (service_.threads < 0 || service_.threads > kMaxThreads) {
      s.fail("threads", fmt::format("must be from 0 (all cores) to {}", kMaxThreads));
    }
    s.finish();
  }

  // Sources: an entry with `list:` stands for one source per line of its file (source_list.hpp),
  // and --streams makes copies of each. With --shard, only the streams this worker owns are built
  // (a worker of 1,000 cameras opens its own, not all); the others are only counted and named.
  if (options.shard) {
    shard_ = ShardStats{};
    shard_->index = options.shard->index;
    shard_->count = options.shard->count;
  }
  std::map<std::string, std::string> declared;  // source name -> where, for names a list repeats
  for (const auto& [entry, entry_name] : list_section(root, root, "sources", source_registry(), "source", true)) {
    const auto entry_type = entry["type"].Scalar();
    for (const SourceEntry& listed : expand_source_entry(entry, origin, entry_name, entry_type)) {
      if (const auto [it, fresh] = declared.emplace(listed.name, listed.where); !fresh) {
        throw ConfigError(fmt::format("{}: a second source named '{}' (the first: {})", listed.where, listed.name, it->second));
      }
      const std::string& name = listed.name;
      Params p(listed.node, listed.origin, fmt::format("source '{}'", name));
      p.get<std::string>("name", "");
      const auto type = p.get<std::string>("type", "");
      const int priority = p.get<int>("priority", 0);
      bool built = false;
      for (int k = 0; k < options.streams; ++k) {
        const std::string stream = options.streams > 1 ? fmt::format("{}-{}", name, k + 1) : name;
        if (shard_) {
          ++shard_->streams_total;
          if (!owns(*options.shard, stream)) continue;
          shard_->owned.push_back(stream);
        }
        std::unique_ptr<Source> source = source_registry().at(type)(p);
        built = true;
        if ((options.realtime || options.fps > 0) && source->live()) {
          p.fail("type", "--realtime paces files; this source is live already (drop --realtime, or use a file)");
        }
        // Copy k of a file begins k/N of the way into it: N copies show N different moments of the
        // content, as N cameras would, not the same busy scene all at once.
        if (options.streams > 1) source->begin_at(static_cast<double>(k) / options.streams);
        streams_.push_back({stream, std::move(source), priority, 0.0});
        // Copies start spread over one frame period (the pacing is Run::read_loop's).
        streams_.back().start_phase = static_cast<double>(k) / options.streams;
      }
      // The keys are checked by the source that reads them: a source no copy of which this worker
      // owns was not built, and its owner checks them.
      if (built) p.finish();
    }
  }
  // A worker owning no stream is not an error: it runs idle (Pipeline::run).
  if (streams_.empty() && (!shard_ || shard_->streams_total == 0)) root.fail("sources", "needs at least one source");

  if (root.has("models")) {
    const YAML::Node models = root.node("models");
    if (!models.IsMap()) origin->fail(models, "models: expected a map from model name to its settings");
    for (const auto& kv : models) {
      const auto name = kv.first.as<std::string>();
      Params p(kv.second, origin, fmt::format("model '{}'", name));
      ModelEntry entry;
      entry.path = p.existing_file("path");
      entry.device = p.choice("device", "cpu", {"cpu", "cuda", "auto"});
      entry.precision = p.choice("precision", "fp32", {"fp32", "tf32", "fp16", "bf16"});
      if (entry.device == "cpu" && entry.precision != "fp32") {
        p.fail("precision", fmt::format("'{}' needs device cuda or auto (the CPU runs fp32)", entry.precision));
      }
      entry.slots = p.get<int>("slots", entry.slots);
      if (entry.slots < 1 || entry.slots > 4) p.fail("slots", "must be from 1 to 4 (batches in flight per runner)");
      entry.instances = p.get<int>("instances", entry.instances);
      if (entry.instances < 1 || entry.instances > 16) p.fail("instances", "must be from 1 to 16 (runners per device)");
      // `device: auto` models are placed together once every stage is checked (place_auto_models).
      if (entry.device == "auto") entry.joint = std::make_shared<runtime::JointPlacement>();
      if (p.has("rows_per_frame")) {
        if (entry.device != "auto") p.fail("rows_per_frame", "is for the pipeline placement of device: auto models");
        entry.rows_per_frame = p.get<double>("rows_per_frame", 0);
        if (!(entry.rows_per_frame > 0 && entry.rows_per_frame <= 4096)) {
          p.fail("rows_per_frame", "must be above 0 and at most 4096 (rows a frame the model is fed: crops a frame)");
        }
      }
      if (p.has("devices")) {
        entry.devices = p.get<std::vector<int>>("devices", {});
        if (entry.device == "cpu") p.fail("devices", "lists GPUs; this model runs on the CPU (device: cuda or auto)");
        if (entry.devices.empty()) p.fail("devices", "expected a list of GPU indices, e.g. [0, 1]");
        std::set<int> seen;
        for (int d : entry.devices) {
          if (d < 0 || !seen.insert(d).second) p.fail("devices", "expected distinct GPU indices >= 0");
        }
      }
      entry.device_where = origin->where(p.has("device") ? p.node("device") : kv.second);
      // A model that may run on a GPU: the GPU's context is made while the models are read.
      if (entry.device != "cpu") warm_up_gpus(entry.devices, warming);
      try {
        entry.graph = load_onnx(entry.path, OnnxImportOptions{.cache = true});
      } catch (const Error& e) {
        p.fail("path", e.what());
      }
      if (p.has("nodes")) {
        if (entry.device == "cpu") p.fail("nodes", "pins nodes to devices; this model runs on the CPU alone (device: cuda or auto)");
        entry.pinned = p.get<std::map<std::string, std::string>>("nodes", {});
        for (const auto& [node, device] : entry.pinned) {
          if (device != "cpu" && device != "cuda") p.fail("nodes", fmt::format("node '{}': device '{}': expected cpu or cuda", node, device));
          const bool known = std::any_of(entry.graph->nodes.begin(), entry.graph->nodes.end(),
                                         [&](const Node& n) { return n.name == node; });
          if (!known) p.fail("nodes", fmt::format("the model has no node '{}' (`redwood plan {} -v` lists them)", node, entry.path.string()));
        }
      }
      if (p.has("cuda")) {
        if (entry.device == "cpu") p.fail("cuda", "sets CUDA options; this model runs on the CPU (device: cuda or auto)");
        entry.cuda_options = p.get<std::map<std::string, std::string>>("cuda", {});
        // Checked here, where the file and line are known, by the CUDA backend where it is built
        // (the names and values it takes: docs/cuda.md, "Options").
        const auto cuda = device_runner_registry().find("cuda");
        if (cuda != device_runner_registry().end() && cuda->second.check_options) {
          try {
            cuda->second.check_options(entry.cuda_options);
          } catch (const InvalidArgument& e) {
            p.fail("cuda", e.what());
          }
        }
      }
      p.finish();
      models_[name] = std::move(entry);
    }
  }

  TensorSpecs available;
  for (const auto& [node, name] : list_section(root, root, "stages", stage_registry(), "stage", false)) {
    Params p(node, origin, fmt::format("stage '{}'", name));
    p.get<std::string>("name", "");
    const auto type = p.get<std::string>("type", "");
    StageArgs args{name, p, models_};
    auto stage = stage_registry().at(type)(args);
    p.finish();
    stage->check(available);
    for (const auto& [key, spec] : stage->produces()) available[key] = spec;
    stages_.push_back(std::move(stage));
  }

  place_models();

  // The frames' pool: page-locked memory when a model runs on a GPU (its runners then copy the
  // frames' tensors in and the outputs back with no staging), else plain host memory.
  for (const auto& stage : stages_) {
    const std::string device = stage->runner_device();
    if (device == "cpu" || service_.memory.upstream != nullptr) continue;
    const auto it = device_runner_registry().find(device);
    if (it != device_runner_registry().end() && it->second.pinned_memory) service_.memory.upstream = &it->second.pinned_memory();
  }
  memory_ = std::make_unique<FrameMemory>(service_.memory);

  const auto names = stream_names();
  std::vector<bool> live;
  for (const auto& s : streams_) live.push_back(s.source->live());
  for (const auto& [node, name] : list_section(root, root, "sinks", sink_registry(), "sink", false)) {
    Params p(node, origin, fmt::format("sink '{}'", name));
    p.get<std::string>("name", "");
    const auto type = p.get<std::string>("type", "");
    SinkArgs args{name, p, name_, names, live};
    sinks_.push_back({name, sink_registry().at(type)(args)});
    p.finish();
  }
}

Pipeline::~Pipeline() = default;

double Pipeline::frames_per_s() const {
  const bool paced = options_.realtime || options_.fps > 0 ||
                     std::all_of(streams_.begin(), streams_.end(), [](const Stream& s) { return s.source->live(); });
  if (!paced) return 0;
  double total = 0;
  for (const Stream& s : streams_) {
    const double fps = options_.fps > 0 ? options_.fps : s.source->frame_rate();
    if (fps <= 0) return 0;  // a stream of unknown rate: throughput alone
    total += fps;
  }
  return total;
}

void Pipeline::place_models() {
  const bool waiting = std::any_of(models_.begin(), models_.end(),
                                   [](const auto& m) { return m.second.joint && !m.second.joint->feeds().empty(); });
  if (!waiting) return;  // no device: auto model runs where CUDA is usable: nothing changes
  // The host segments the partitioner times run on what the run will allow them.
  std::optional<oneapi::tbb::global_control> threads;
  if (thread_limit() > 0) threads.emplace(oneapi::tbb::global_control::max_allowed_parallelism, thread_limit());
  runtime::PartitionOptions base;
  base.devices = {"cpu", "cuda"};
  runtime::CostHistory history;
  history.load(runtime::CostHistory::default_path());
  base.history = &history;
  try {
    placement_ = place_auto_models(models_, frames_per_s(), service_.placement, base);
  } catch (const Error& e) {
    // The runners waiting for a decision then place alone at their first batch.
    log().warn("pipeline '{}': the pipeline placement failed, each device: auto model is placed alone: {}", name_, e.what());
    return;
  }
  if (placement_) {
    for (const std::string& line : placement_->lines()) log().info("{}", line);
  }
}

void Pipeline::record_batch_times() noexcept {
  if (!placement_) return;
  try {
    runtime::CostHistory history;
    const std::string path = runtime::CostHistory::default_path();
    history.load(path);
    const std::size_t recorded = redwood::record_batch_times(models_, history);
    if (recorded == 0) return;
    history.save(path);
    log().info("pipeline '{}': {} measured batch time(s) of its device: auto models recorded in {}", name_, recorded, path);
  } catch (const std::exception& e) {
    log().warn("pipeline '{}': the measured batch times were not recorded in the cost history: {}", name_, e.what());
  }
}

std::vector<std::string> Pipeline::stream_names() const {
  std::vector<std::string> names;
  for (const auto& s : streams_) names.push_back(s.name);
  return names;
}

}  // namespace redwood
