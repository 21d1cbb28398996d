// The placement cache behind PlacedRunner (runtime/placement_cache.hpp), with a stand-in
// accelerator (tests/runtime/stand_in_accelerator.hpp): a model placed whole is kept,
// and a second runner makes that device's runner without placing (no analysis, no partition) and
// computes the same; a split is kept as each node's device and cut again from an untimed analysis;
// other shapes or options are other keys; measured costs or a device without a profile key are not
// kept; a damaged entry, or a kept split that does not fit the model, is placed again and replaced.

#include "core/cache_dir.hpp"
#include "runtime/executor.hpp"
#include "core/model_runner.hpp"
#include "core/onnx/onnx_import.hpp"
#include "runtime/partition_profile.hpp"
#include "runtime/partition_rows.hpp"
#include "runtime/placed_runner.hpp"
#include "runtime/placement_cache.hpp"
#include "runtime/stand_in_accelerator.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>

namespace redwood::runtime {
namespace {

const char* const kAccel = testing::stand_in_accelerator();

PartitionOptions accelerator_options() {
  PartitionOptions o;
  o.devices = {"cpu", kAccel};
  o.profiles = {testing::stand_in_profile("cpu", 10, 10), testing::stand_in_profile(kAccel, 10000, 10000)};
  o.use_analysis_times = false;
  return o;
}

// The options as make_placed_runner(graph, accelerator_options(), RunnerConfig{}) places with:
// the runner's precision set. The key it keeps its placement under is placement_key of these.
PartitionOptions runner_options() {
  PartitionOptions o = accelerator_options();
  o.precision = RunnerConfig{}.precision;
  return o;
}

// x [N,4,8,8] -> Conv -> (Softmax when `softmax`) -> Conv -> y
std::shared_ptr<const Graph> model(bool softmax) {
  const auto dir = testing::temp_dir("placement-cache-model");
  testing::OnnxBuilder b(13);
  b.input("x", onnx::TensorProto::FLOAT, {-1, 4, 8, 8}, {"N"});
  b.initializer("w1", testing::random_tensor(DType::kF32, {8, 4, 3, 3}, -0.5, 0.5, 1));
  b.initializer("w2", testing::random_tensor(DType::kF32, {8, 8, 3, 3}, -0.5, 0.5, 3));
  auto& c1 = b.node("Conv", {"x", "w1"}, {"c1"}, "conv1");
  testing::OnnxBuilder::set_attr(c1, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  std::string mid = "c1";
  if (softmax) {
    auto& sm = b.node("Softmax", {"c1"}, {"p"}, "softmax");
    testing::OnnxBuilder::set_attr(sm, "axis", std::int64_t{1});
    mid = "p";
  }
  auto& c2 = b.node("Conv", {mid, "w2"}, {"y"}, "conv2");
  testing::OnnxBuilder::set_attr(c2, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  b.output("y", onnx::TensorProto::FLOAT, {-1, 8, 8, 8}, {"N"});
  b.save(dir / "m.onnx");
  return load_onnx(dir / "m.onnx");
}

Tensor run(ModelRunner& runner, const Tensor& x) { return redwood::testing::run_one(runner, x); }

// A segment's prediction against rows that is `ms` at any rows.
RowsCurve flat(double ms) {
  RowsCurve c;
  c.add(1, ms);
  return c;
}

std::size_t entries(const std::filesystem::path& dir) {
  std::error_code ec;
  std::size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) n += e.path().extension() == ".json" ? 1 : 0;
  return n;
}

class PlacementCache : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = std::make_unique<testing::ScopedEnv>("REDWOOD_CACHE_DIR", testing::temp_dir("placement-cache").c_str());
  }
  std::unique_ptr<testing::ScopedEnv> cache_;
};

TEST_F(PlacementCache, AWholeDevicePlacementIsKeptAndTheNextRunnerSkipsPlacing) {
  const auto graph = model(false);
  const Tensor x = testing::random_tensor(DType::kF32, {2, 4, 8, 8}, -1, 1, 5);
  auto first = make_placed_runner(graph, accelerator_options(), RunnerConfig{}, "m");
  const Tensor y1 = run(*first, x);
  const Partition* placed = placed_partition(*first);
  ASSERT_NE(placed, nullptr) << "the first runner places the model";
  ASSERT_TRUE(placed->single_device());
  EXPECT_EQ(placed->whole_device(), kAccel);
  EXPECT_EQ(entries(placement_cache_dir()), 1u);

  const std::string key = placement_key(*graph, {x.shape()}, runner_options());
  const auto kept = read_placement(placement_cache_dir(), key);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->device, kAccel);
  EXPECT_GT(kept->predicted_ms, 0);

  auto second = make_placed_runner(graph, accelerator_options(), RunnerConfig{}, "m");
  const Tensor y2 = run(*second, x);
  EXPECT_EQ(placed_partition(*second), nullptr) << "placed from the cache: no analysis, no partition";
  EXPECT_EQ(y1.to_float_vector(), y2.to_float_vector());
}

TEST_F(PlacementCache, OtherShapesAndOptionsAreOtherKeys) {
  const auto graph = model(false);
  const PartitionOptions o = accelerator_options();
  const std::string base = placement_key(*graph, {{2, 4, 8, 8}}, o);
  ASSERT_FALSE(base.empty());
  EXPECT_EQ(base, placement_key(*graph, {{2, 4, 8, 8}}, o));
  EXPECT_NE(base, placement_key(*graph, {{3, 4, 8, 8}}, o));
  PartitionOptions fp16 = o;
  fp16.precision = "fp16";
  EXPECT_NE(base, placement_key(*graph, {{2, 4, 8, 8}}, fp16));
  PartitionOptions pinned = o;
  pinned.pinned = {{"conv2", "cpu"}};
  EXPECT_NE(base, placement_key(*graph, {{2, 4, 8, 8}}, pinned));
  PartitionOptions slower = o;
  slower.profiles[1].peak_gflops["fp32"] = 20;
  EXPECT_NE(base, placement_key(*graph, {{2, 4, 8, 8}}, slower));
  PartitionOptions switched = o;  // the accelerator's own options (CUDA's `wgmma: off`)
  switched.device_options = {{"wgmma", "off"}};
  EXPECT_NE(base, placement_key(*graph, {{2, 4, 8, 8}}, switched));
  EXPECT_NE(base, placement_key(*model(true), {{2, 4, 8, 8}}, o));
  EXPECT_NE(base.find(build_stamp()), std::string::npos);
  // Measured costs or supports() answers of the caller's own: placed anew every time.
  CostHistory history;
  PartitionOptions measured = o;
  measured.history = &history;
  EXPECT_EQ(placement_key(*graph, {{2, 4, 8, 8}}, measured), "");
}

TEST_F(PlacementCache, ASplitPlacementIsKeptAndTheNextRunnerCutsItAgainWithoutPlacing) {
  const auto graph = model(true);
  const Tensor x = testing::random_tensor(DType::kF32, {2, 4, 8, 8}, -1, 1, 6);
  auto first = make_placed_runner(graph, accelerator_options(), RunnerConfig{}, "split");
  const Tensor y1 = run(*first, x);
  const Partition* p = placed_partition(*first);
  ASSERT_NE(p, nullptr);
  ASSERT_FALSE(p->single_device());
  EXPECT_EQ(entries(placement_cache_dir()), 1u);
  const PartitionOptions o = runner_options();
  const std::string key = placement_key(*graph, {x.shape()}, o);
  const auto kept = read_placement(placement_cache_dir(), key);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->device, "");
  ASSERT_EQ(kept->nodes.size(), p->placement.device.size());
  for (std::size_t i = 0; i < kept->nodes.size(); ++i) {
    EXPECT_EQ(kept->nodes[i], p->devices[static_cast<std::size_t>(p->placement.device[i])]) << "node " << i;
  }

  // Each segment's prediction, and its curve against rows, is kept for the run's summary.
  ASSERT_EQ(kept->segment_ms, predicted_segment_ms(*p));
  ASSERT_EQ(kept->segment_at.size(), p->segments.size());
  const std::vector<RowsCurve> curves = segment_curves(*p, nullptr);
  for (std::size_t k = 0; k < curves.size(); ++k) EXPECT_EQ(kept->segment_at[k].points, curves[k].points) << "segment " << k;
  const auto placed_now = placed_segment_predictions(*first);
  ASSERT_TRUE(placed_now.has_value());
  EXPECT_EQ(placed_now->ms, kept->segment_ms);
  EXPECT_EQ(placed_now->at, "[2, 4, 8, 8]");
  ASSERT_EQ(placed_now->at_rows.size(), curves.size());
  for (std::size_t k = 0; k < curves.size(); ++k) EXPECT_EQ(placed_now->at_rows[k].points, curves[k].points);

  auto second = make_placed_runner(graph, accelerator_options(), RunnerConfig{}, "split");
  const Tensor y2 = run(*second, x);
  EXPECT_EQ(placed_partition(*second), nullptr) << "placed from the cache: no costs, no placer";
  EXPECT_EQ(y1.to_float_vector(), y2.to_float_vector());
  // The summary's segment lines predict from what was kept: each segment's measured compute a
  // batch beside its prediction at the shapes it was placed at and at the rows its batches had.
  const auto read_back = placed_segment_predictions(*second);
  ASSERT_TRUE(read_back.has_value());
  EXPECT_EQ(read_back->ms, kept->segment_ms);
  EXPECT_EQ(read_back->at, "[2, 4, 8, 8]");
  ASSERT_EQ(read_back->at_rows.size(), curves.size());
  const std::vector<RunnerStats> segments = second->segment_stats();
  ASSERT_EQ(segments.size(), p->segments.size()) << second->description();
  for (std::size_t k = 0; k < segments.size(); ++k) {
    ASSERT_EQ(segments[k].batches, 1) << "segment " << k;
    EXPECT_EQ(read_back->at_rows[k].points, curves[k].points) << "segment " << k;
    const std::string line =
        fmt::format("; {:.3f} ms a batch, predicted {:.3f} at [2, 4, 8, 8] and {:.3f} at the batches' 2.0 rows",
                    segments[k].compute_ms, kept->segment_ms[k], curves[k].at(2));
    EXPECT_NE(segments[k].description.find(line), std::string::npos) << segments[k].description;
  }

  // The same cut, made from the kept devices on an analysis that timed nothing.
  const Partition again = partition_as_placed(analyze_model(graph, {x.shape()}, true, AnalysisDepth::kShapesOnly), o,
                                              kept->nodes);
  EXPECT_EQ(again.placement.device, p->placement.device);
  ASSERT_EQ(again.segments.size(), p->segments.size());
  for (std::size_t k = 0; k < again.segments.size(); ++k) EXPECT_EQ(again.segments[k].nodes, p->segments[k].nodes);
}

// The stand-in accelerator's runner on a GPU that another model shares: its stats say that while
// it computed, every batch there ran beside one other (the GPU's summed compute twice its busy time).
class SharedGpuRunner final : public testing::WrappedCpuRunner {
 public:
  using WrappedCpuRunner::WrappedCpuRunner;
  std::string description() const override { return "test-shared-gpu"; }
  RunnerStats stats() const override {
    RunnerStats s = inner_->stats();
    s.device = 0;
    s.device_compute_busy_ms = s.compute_ms;
    s.device_compute_sum_ms = 2 * s.compute_ms;
    return s;
  }
};

TEST_F(PlacementCache, ASplitsSegmentOnASharedGpuSaysWhatABatchCostOfTheGpusTime) {
  static const char* const shared = testing::register_wrapped_accelerator<SharedGpuRunner>("test-shared-gpu");
  PartitionOptions o = accelerator_options();
  o.devices[1] = shared;
  o.profiles[1].device = o.profiles[1].name = shared;
  auto placed = make_placed_runner(model(true), o, RunnerConfig{}, "split");
  run(*placed, testing::random_tensor(DType::kF32, {2, 4, 8, 8}, -1, 1, 12));
  const Partition* p = placed_partition(*placed);
  ASSERT_NE(p, nullptr);
  ASSERT_FALSE(p->single_device());
  const std::vector<RunnerStats> segments = placed->segment_stats();
  ASSERT_EQ(segments.size(), p->segments.size());
  bool on_gpu = false;
  for (std::size_t k = 0; k < segments.size(); ++k) {
    ASSERT_EQ(segments[k].batches, 1) << "segment " << k;
    const double ms = segments[k].compute_ms;
    // On the shared GPU: half its time was the GPU's; on the host: its time alone, nothing added.
    const std::string line = p->segments[k].device == 1
                                 ? fmt::format("; {:.3f} ms a batch ({:.3f} of the GPU's time: batches ran 2.00 at once there), "
                                               "predicted ",
                                               ms, ms / 2)
                                 : fmt::format("; {:.3f} ms a batch, predicted ", ms);
    EXPECT_NE(segments[k].description.find(line), std::string::npos) << "segment " << k << ": " << segments[k].description;
    on_gpu = on_gpu || p->segments[k].device == 1;
  }
  EXPECT_TRUE(on_gpu) << "no segment on the shared GPU";
}

TEST_F(PlacementCache, AKeptSplitsHostSegmentsRunOnTheirKeptThreads) {
  const auto graph = model(true);
  const Tensor x = testing::random_tensor(DType::kF32, {2, 4, 8, 8}, -1, 1, 7);
  auto first = make_placed_runner(graph, accelerator_options(), RunnerConfig{}, "split");
  const Tensor y1 = run(*first, x);
  const Partition* p = placed_partition(*first);
  ASSERT_NE(p, nullptr);
  ASSERT_FALSE(p->single_device());
  const PartitionOptions o = runner_options();
  const std::string key = placement_key(*graph, {x.shape()}, o);
  const std::size_t host = p->host_segment_threads().size();
  ASSERT_GE(host, 1u);

  // One thread per host segment, as a plan that timed them would keep: the next runner's host
  // segments run on one thread.
  write_placement(placement_cache_dir(), key,
                  {"", 1.0, p->node_devices(), std::vector<int>(host, 1), predicted_segment_ms(*p), segment_curves(*p, nullptr)});
  const auto kept = read_placement(placement_cache_dir(), key);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->threads, std::vector<int>(host, 1));
  auto second = make_placed_runner(graph, accelerator_options(), RunnerConfig{}, "split");
  const Tensor y2 = run(*second, x);
  EXPECT_EQ(placed_partition(*second), nullptr) << "placed from the cache";
  EXPECT_NE(second->description().find("cpu (1 thread(s))"), std::string::npos) << second->description();
  EXPECT_EQ(y1.to_float_vector(), y2.to_float_vector());

  // A thread count per host segment that does not match the cut: placed again.
  write_placement(placement_cache_dir(), key,
                  {"", 1.0, p->node_devices(), std::vector<int>(host + 1, 1), predicted_segment_ms(*p), segment_curves(*p, nullptr)});
  auto third = make_placed_runner(graph, accelerator_options(), RunnerConfig{}, "split");
  run(*third, x);
  EXPECT_NE(placed_partition(*third), nullptr) << "placed again";
}

TEST_F(PlacementCache, AKeptSplitThatDoesNotFitTheModelIsPlacedAgain) {
  const auto graph = model(true);
  const Tensor x = testing::random_tensor(DType::kF32, {2, 4, 8, 8}, -1, 1, 8);
  const PartitionOptions o = runner_options();
  const std::string key = placement_key(*graph, {x.shape()}, o);
  const ModelAnalysis a = analyze_model(graph, {x.shape()}, true, AnalysisDepth::kShapesOnly);
  const std::size_t nodes = a.placeable.size();
  // A node count of another model, a device not given, the accelerator running the Softmax it lacks.
  const std::vector<std::vector<std::string>> wrong{
      std::vector<std::string>(nodes + 1, "cpu"), std::vector<std::string>(nodes, "tpu"),
      std::vector<std::string>(nodes, kAccel)};
  for (const auto& bad : wrong) {
    EXPECT_THROW(partition_as_placed(a, o, bad), InvalidArgument);
    write_placement(placement_cache_dir(), key, {"", 1.0, bad, {}, {0.5}, {flat(0.5)}});
    auto placed = make_placed_runner(graph, accelerator_options(), RunnerConfig{}, "split");
    const Tensor y = run(*placed, x);
    EXPECT_NE(placed_partition(*placed), nullptr) << "placed again";
    EXPECT_EQ(y.shape(), (Shape{2, 8, 8, 8}));
    const auto kept = read_placement(placement_cache_dir(), key);
    ASSERT_TRUE(kept.has_value());
    EXPECT_EQ(kept->nodes.size(), nodes) << "replaced by the placement made";
    EXPECT_NE(kept->nodes, bad);
  }
}

// A kept split must carry a prediction, and a curve of them against rows, for each of its segments:
// one written without them is not read; one with a count that does not match the cut is placed
// again (and replaced).
TEST_F(PlacementCache, AKeptSplitWithoutAPredictionForEachSegmentIsPlacedAgain) {
  const auto graph = model(true);
  const Tensor x = testing::random_tensor(DType::kF32, {2, 4, 8, 8}, -1, 1, 10);
  auto first = make_placed_runner(graph, accelerator_options(), RunnerConfig{}, "split");
  run(*first, x);
  const Partition* p = placed_partition(*first);
  ASSERT_NE(p, nullptr);
  ASSERT_FALSE(p->single_device());
  const std::string key = placement_key(*graph, {x.shape()}, runner_options());

  write_placement(placement_cache_dir(), key, {"", 1.0, p->node_devices(), p->host_segment_threads(), {}, {}});
  {
    const testing::LogCapture log;
    EXPECT_FALSE(read_placement(placement_cache_dir(), key).has_value());
    EXPECT_NE(log.text().find("a split without its segments' predictions"), std::string::npos) << log.text();
  }
  const std::vector<double> each(p->segments.size(), 0.5);
  write_placement(placement_cache_dir(), key, {"", 1.0, p->node_devices(), p->host_segment_threads(), each, {}});
  {
    const testing::LogCapture log;
    EXPECT_FALSE(read_placement(placement_cache_dir(), key).has_value());
    EXPECT_NE(log.text().find(fmt::format("a split of {} segment prediction(s) without a curve against rows for each", each.size())),
              std::string::npos)
        << log.text();
  }
  const std::vector<double> one_more(p->segments.size() + 1, 0.5);
  write_placement(placement_cache_dir(), key, {"", 1.0, p->node_devices(), p->host_segment_threads(), one_more,
                                               std::vector<RowsCurve>(one_more.size(), flat(0.5))});
  const testing::LogCapture log;
  auto again = make_placed_runner(graph, accelerator_options(), RunnerConfig{}, "split");
  run(*again, x);
  EXPECT_NE(placed_partition(*again), nullptr) << "placed again";
  EXPECT_NE(log.text().find(fmt::format("{} segment prediction(s) and {} curve(s) kept for {} segment(s)", one_more.size(),
                                        one_more.size(), p->segments.size())),
            std::string::npos)
      << log.text();
  const auto kept = read_placement(placement_cache_dir(), key);
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(kept->segment_ms.size(), p->segments.size()) << "replaced by the placement made";
  EXPECT_EQ(kept->segment_at.size(), p->segments.size());
}

// PP-OCRv4 rec, whose Softmax the stand-in accelerator lacks, placed as a pipeline's `device: auto`
// model alone (the analysis timing the CPU, the host segments timed): the time to its first result
// placed, then in a new runner reading the kept split. The times are printed, not checked.
TEST_F(PlacementCache, RecSplitPlacedThenCutAgainFromTheCache) {
  const auto file = testing::assets_dir() / "models" / "ch_PP-OCRv4_rec_infer.onnx";
  if (!std::filesystem::exists(file)) GTEST_SKIP() << "assets missing: run scripts/setup.sh";
  const auto graph = load_onnx(file);
  PartitionOptions o = accelerator_options();
  o.use_analysis_times = true;
  const Tensor x = testing::random_tensor(DType::kF32, {1, 3, 48, 320}, 0, 1, 9);
  auto first_result = [&](Tensor* y) {
    const auto start = std::chrono::steady_clock::now();
    auto runner = make_placed_runner(graph, o, RunnerConfig{}, "rec");
    *y = run(*runner, x);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return std::pair{ms, placed_partition(*runner) != nullptr};
  };
  Tensor placed_y, kept_y;
  const auto [placed_ms, placed] = first_result(&placed_y);
  const auto [kept_ms, placed_again] = first_result(&kept_y);
  EXPECT_TRUE(placed);
  EXPECT_FALSE(placed_again) << "the second runner read the kept split";
  EXPECT_EQ(placed_y.to_float_vector(), kept_y.to_float_vector());
  std::printf("[ measured ] rec split (Softmax on the host), first result: %.1f ms placed, %.1f ms from the placement "
              "cache\n", placed_ms, kept_ms);
}

TEST_F(PlacementCache, ADamagedEntryIsPlacedAgainAndReplaced) {
  const auto graph = model(false);
  const Tensor x = testing::random_tensor(DType::kF32, {1, 4, 8, 8}, -1, 1, 7);
  { auto r = make_placed_runner(graph, accelerator_options(), RunnerConfig{}, "m"); run(*r, x); }
  ASSERT_EQ(entries(placement_cache_dir()), 1u);
  const auto file = std::filesystem::directory_iterator(placement_cache_dir())->path();
  std::ofstream(file, std::ios::trunc) << "{\"key\": ";
  auto again = make_placed_runner(graph, accelerator_options(), RunnerConfig{}, "m");
  run(*again, x);
  EXPECT_NE(placed_partition(*again), nullptr) << "placed again";
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(text.find("\"device\""), std::string::npos) << text;
}

}  // namespace
}  // namespace redwood::runtime
