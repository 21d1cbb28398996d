// The partitioner on a model (runtime/partition.hpp) and the split runner that runs its segments
// (runtime/split_runner.hpp); its cost model and profile are in partition_profile_test.cpp. The
// accelerator here is a stand-in registered as a device runner (split_fixture.hpp): the CPU
// runner under another name, with a supports() that refuses Softmax and a profile that makes it
// fast, so placement, cutting and split execution run on a machine without a GPU.

#include "core/error.hpp"
#include "core/host_threads.hpp"
#include "core/model_runner.hpp"
#include "core/onnx/onnx_import.hpp"
#include "core/op_registry.hpp"
#include "memory/resource.hpp"
#include "runtime/cpu_runner.hpp"
#include "runtime/device_segment_time.hpp"
#include "runtime/host_segment_time.hpp"
#include "runtime/partition.hpp"
#include "runtime/partition_profile.hpp"
#include "runtime/placed_runner.hpp"
#include "runtime/split_runner.hpp"
#include "runtime/stand_in_accelerator.hpp"
#include "split_fixture.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <sys/resource.h>

namespace redwood::runtime {
namespace {

using namespace split_fixture;

TEST(Partition, PutsWhatTheAcceleratorLacksOnTheHostAndCutsAroundIt) {
  const Partition p = partition_model(model(), {{2, 4, 8, 8}}, options());
  EXPECT_EQ(device_of(p, "Softmax"), "cpu");
  EXPECT_EQ(device_of(p, "Conv"), kAccel);
  // Accelerator, host, accelerator at least (the reshape, whose result returns to the host anyway,
  // may run there beside the Add).
  ASSERT_GE(p.segments.size(), 3u);
  EXPECT_EQ(p.segments[0].device, 1);
  // Shape arithmetic is not placed: Shape, Gather, Unsqueeze and Concat run where Reshape does.
  EXPECT_EQ(p.analysis.placeable.size(), 5u);  // conv1, softmax, conv2, reshape, add
  EXPECT_FALSE(p.why_not[1][1].empty());
  EXPECT_EQ(p.costs[1][1].ms, kUnsupported);
  // The host's segment with the softmax reads conv1's output and gives back the softmax; the
  // first segment also sends c1 on to the Add (z = c1 + c2).
  const Segment& host = p.segments[1];
  EXPECT_EQ(p.devices[static_cast<std::size_t>(host.device)], "cpu");
  EXPECT_EQ(host.inputs, std::vector<std::string>{"c1"});
  EXPECT_EQ(host.outputs, std::vector<std::string>{"p"});
  EXPECT_EQ(p.segments[0].outputs, std::vector<std::string>{"c1"});
  ASSERT_TRUE(p.optimum.has_value());  // five nodes: every placement was tried
  EXPECT_LE(p.placer.makespan_ms, p.optimum->makespan_ms * 1.05);
  EXPECT_LE(p.placer.makespan_ms, p.heft.makespan_ms + 1e-9);
  // The cut chosen runs at least as fast, as the split runner runs it, as every candidate's.
  EXPECT_LE(p.run_latency_ms(p.placement.device), p.run_latency_ms(p.heft.device) + 1e-9);
  EXPECT_LE(p.run_latency_ms(p.placement.device), p.run_latency_ms(p.naive->device) + 1e-9);
}

// A segment's hand-over before any batch of a split measured one: the mean of the devices' runner
// round trips (their profiles); once the history holds a measured one, that.
TEST(Partition, ASegmentsHandOverIsTheDevicesRunnerRoundTripUntilBatchesMeasureIt) {
  PartitionOptions none = options();
  const Partition without = partition_model(model(), {{2, 4, 8, 8}}, none);
  EXPECT_EQ(without.handover_ms, 0.0);
  PartitionOptions o = options();
  // Microseconds: the model's nodes take a few each, and a larger hand-over would keep it whole.
  o.profiles[0].runner_roundtrip_ms = 0.0005;
  o.profiles[1].runner_roundtrip_ms = 0.0015;
  const Partition p = partition_model(model(), {{2, 4, 8, 8}}, o);
  EXPECT_NEAR(p.handover_ms, 0.001, 1e-12);
  EXPECT_FALSE(p.handover_learned);
  // Each segment of the chain waits its hand-over: the same cut, three segments later.
  ASSERT_EQ(without.segments.size(), 3u);
  ASSERT_EQ(p.placement.device, without.placement.device);
  EXPECT_NEAR(p.run_latency_ms(p.placement.device) - without.run_latency_ms(without.placement.device), 3 * 0.001, 1e-9);
  // A hand-over larger than what the split saves keeps the model whole.
  o.profiles[0].runner_roundtrip_ms = o.profiles[1].runner_roundtrip_ms = 0.3;
  EXPECT_TRUE(partition_model(model(), {{2, 4, 8, 8}}, o).single_device());
  CostHistory history;
  history.record(CostHistory::handover_key(o.profiles[0]), 0.05);
  o.history = &history;
  const Partition learned = partition_model(model(), {{2, 4, 8, 8}}, o);
  EXPECT_NEAR(learned.handover_ms, 0.05, 1e-12);
  EXPECT_TRUE(learned.handover_learned);
}

TEST(Partition, NaiveSplitRunsEverythingFromTheFirstUnsupportedNodeOnTheHost) {
  const Partition p = partition_model(model(), {{1, 4, 8, 8}}, options());
  ASSERT_TRUE(p.naive.has_value());
  EXPECT_EQ(p.naive->device[0], 1);
  for (std::size_t i = 1; i < p.naive->device.size(); ++i) EXPECT_EQ(p.naive->device[i], 0) << i;
  EXPECT_LT(p.placement.makespan_ms, p.naive->makespan_ms);
}

TEST(Partition, ASlowAcceleratorGetsNothing) {
  const Partition p = partition_model(model(), {{1, 4, 8, 8}}, options(0.001));
  EXPECT_TRUE(p.single_device());
  for (int d : p.placement.device) EXPECT_EQ(d, 0);
}

// `prefer` (a pipeline's `device: cuda` for a model with ops the GPU lacks): every node the
// preferred device runs goes there whatever it costs; a device not given is refused by name.
TEST(Partition, APreferredDeviceGetsEveryNodeItRunsEvenWhenSlow) {
  PartitionOptions o = options(0.001);
  o.prefer = kAccel;
  const Partition p = partition_model(model(), {{1, 4, 8, 8}}, o);
  ASSERT_EQ(p.placement.device.size(), p.analysis.placeable.size());
  for (std::size_t i = 0; i < p.placement.device.size(); ++i) {
    const std::string& op = p.analysis.graph->nodes[p.analysis.placeable[i]].op_type;
    EXPECT_EQ(p.devices[static_cast<std::size_t>(p.placement.device[i])], op == "Softmax" ? "cpu" : kAccel) << op;
  }
  o.prefer = "tpu";
  try {
    partition_model(model(), {{1, 4, 8, 8}}, o);
    ADD_FAILURE() << "a preferred device not given was taken";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("partition: preferred device 'tpu', which is not one of the devices (cpu, {})",
                                                     kAccel)),
              std::string::npos)
        << e.what();
  }
}

TEST(Partition, NoNaiveSplitWhenANodeAfterTheCutIsPinnedToTheAccelerator) {
  PartitionOptions o = options();
  o.pinned = {{"conv2", kAccel}};  // after the softmax, which only the host runs
  const Partition p = partition_model(model(), {{1, 4, 8, 8}}, o);
  EXPECT_FALSE(p.naive.has_value());
  EXPECT_EQ(device_of(p, "Softmax"), "cpu");
  EXPECT_FALSE(p.single_device());
}

TEST(Partition, PinnedNodesStayWhereTheyArePinned) {
  PartitionOptions o = options();
  o.pinned["conv1"] = "cpu";
  const Partition p = partition_model(model(), {{1, 4, 8, 8}}, o);
  EXPECT_EQ(p.placement.device[0], 0);
  o.pinned["conv1"] = "tpu";
  EXPECT_THROW(partition_model(model(), {{1, 4, 8, 8}}, o), InvalidArgument);
  o.pinned.clear();
  o.pinned["softmax"] = kAccel;  // which cannot run it
  EXPECT_THROW(partition_model(model(), {{1, 4, 8, 8}}, o), Unsupported);
  o.pinned.clear();
  o.pinned["no such node"] = "cpu";
  EXPECT_THROW(partition_model(model(), {{1, 4, 8, 8}}, o), InvalidArgument);
}

TEST(Partition, ThroughputObjectiveIsTheIlpsProvenOptimum) {
  PartitionOptions o = options();
  o.objective = PartitionOptions::Objective::kThroughput;
  const Partition p = partition_model(model(), {{4, 4, 8, 8}}, o);
  EXPECT_TRUE(p.placement.proven_optimal);
  ASSERT_TRUE(p.optimum.has_value());
  EXPECT_NEAR(p.placement.bottleneck_ms, bottleneck(p.problem, p.optimum->device), 1e-9);
  EXPECT_EQ(device_of(p, "Softmax"), "cpu");
}

TEST(Partition, DotNamesTheDevicesAndMarksTransfers) {
  const Partition p = partition_model(model(), {{1, 4, 8, 8}}, options());
  const std::string dot = p.dot();
  EXPECT_NE(dot.find("digraph"), std::string::npos);
  EXPECT_NE(dot.find(kAccel), std::string::npos);
  EXPECT_NE(dot.find("color=red"), std::string::npos);
}

// Two frames of 1 and 2 rows (random, from seeds a and b) run as a batch of 4 rows (a padding
// row) through `split` and through `whole`: what each gave.
std::pair<InferResult, InferResult> two_frames(ModelRunner& split, ModelRunner& whole, int seed_a, int seed_b) {
  InferBatch a, b;
  a.inputs = {{testing::random_tensor(DType::kF32, {1, 4, 8, 8}, -1, 1, seed_a),
               testing::random_tensor(DType::kF32, {2, 4, 8, 8}, -1, 1, seed_b)}};
  a.run_rows = 4;
  b.inputs = a.inputs;
  InferResult got = run_batch(split, std::move(a));
  return {std::move(got), run_batch(whole, std::move(b))};
}

TEST(SplitRunner, GivesTheWholeModelsOutputsPartByPart) {
  const auto graph = model();
  const Partition p = partition_model(graph, {{3, 4, 8, 8}}, options());
  ASSERT_GE(p.segments.size(), 3u);
  RunnerConfig config;
  config.slots = 2;
  auto split = make_split_runner(p, config);
  auto whole = make_cpu_runner(graph, config);
  EXPECT_NE(split->description().find(fmt::format("{} segments", p.segments.size())), std::string::npos)
      << split->description();
  // One batch of zeros through every segment, counted neither by the split nor by its segments'
  // runners: their stats are the batches submitted.
  split->prepare({{3, 4, 8, 8}});
  EXPECT_EQ(split->stats().batches, 0);
  for (const auto& s : split->segment_stats()) EXPECT_EQ(s.batches, 0) << s.description;
  for (int round = 0; round < 3; ++round) {
    const auto [got, want] = two_frames(*split, *whole, 10 + round, 20 + round);
    ASSERT_FALSE(got.error);
    ASSERT_FALSE(want.error);
    ASSERT_EQ(got.outputs.size(), 2u);
    for (std::size_t o = 0; o < 2; ++o) {
      ASSERT_EQ(got.outputs[o].size(), 2u);
      for (std::size_t k = 0; k < 2; ++k) expect_near(got.outputs[o][k], want.outputs[o][k]);
    }
  }
  split->drain();
  EXPECT_EQ(split->in_flight(), 0);
  EXPECT_EQ(split->stats().batches, 3);
  EXPECT_EQ(split->stats().rows, 9);
  const auto segments = split->segment_stats();
  ASSERT_EQ(segments.size(), p.segments.size());
  for (const auto& s : segments) {
    // Each segment runs the batch as one boxed row and counts the split batch's rows: 3 a
    // batch, run as 4, its times kept by those 4 rows (as the cost history takes them).
    EXPECT_EQ(s.batches, 3) << s.description;
    EXPECT_EQ(s.rows, 9) << s.description;
    EXPECT_EQ(s.run_rows, 12) << s.description;
    EXPECT_EQ(s.batch_rows.at(3), 3) << s.description;
    ASSERT_EQ(s.run_rows_ms.size(), 1u) << s.description;
    EXPECT_EQ(s.run_rows_ms.at(4).batches, 3) << s.description;
    EXPECT_NEAR(s.run_rows_ms.at(4).compute_ms, s.compute_ms, 1e-9) << s.description;
  }
}

// Where a split's batch went, on the host's clock: its own stats are the inputs staged (copy in),
// the segments (compute) and the outputs split (copy out); each segment's, the time from the
// batch being ready for it to its completion, of which its runner's copies and compute are a part.
TEST(SplitRunner, ItsStatsSayWhereABatchWentBetweenItsSegments) {
  const Partition p = partition_model(model(), {{2, 4, 8, 8}}, options());
  ASSERT_GE(p.segments.size(), 3u);
  RunnerConfig config;
  config.slots = 2;
  auto split = make_split_runner(p, config);
  split->prepare({{2, 4, 8, 8}});
  for (const auto& s : split->segment_stats()) {
    EXPECT_EQ(s.handover_submit_ms + s.handover_after_ms, 0.0) << "a prepare is not counted: " << s.description;
  }
  for (int i = 0; i < 4; ++i) {
    InferBatch batch;
    batch.inputs = {{testing::random_tensor(DType::kF32, {2, 4, 8, 8}, -1, 1, 30 + i)}};
    ASSERT_FALSE(run_batch(*split, std::move(batch)).error);
  }
  split->drain();
  const RunnerStats whole = split->stats();
  ASSERT_EQ(whole.batches, 4);
  EXPECT_GT(whole.copy_in_ms, 0.0);  // a batch's 2 rows into one whole input
  EXPECT_GE(whole.copy_out_ms, 0.0);
  EXPECT_NEAR(whole.run_rows_ms.at(2).ms, whole.copy_in_ms + whole.compute_ms + whole.copy_out_ms, 1e-6);
  // Each segment begins once every segment it waits for is done, so a segment that reads its
  // predecessor's outputs starts after it ended: where each does, their times lie one after
  // another inside the split's, between its inputs staged and its last segment done.
  bool chain = true;
  for (std::size_t k = 1; k < p.segments.size(); ++k) {
    const auto& before = p.segments[k - 1].outputs;
    chain = chain && std::any_of(p.segments[k].inputs.begin(), p.segments[k].inputs.end(), [&](const std::string& in) {
              return std::find(before.begin(), before.end(), in) != before.end();
            });
  }
  ASSERT_TRUE(chain) << "the fixture's model cuts into segments that each wait for the one before";
  double windows = 0;
  for (const RunnerStats& s : split->segment_stats()) {
    ASSERT_EQ(s.batches, 4) << s.description;
    EXPECT_GT(s.handover_submit_ms, 0.0) << s.description;
    EXPECT_GE(s.handover_after_ms, 0.0) << s.description;
    // The runner's own batch (the CPU runner's worker, from its first copy to its last) lies
    // within its submit and its completion.
    EXPECT_GE(s.handover_submit_ms + s.handover_after_ms, s.copy_in_ms + s.compute_ms + s.copy_out_ms - 1e-6) << s.description;
    windows += s.handover_submit_ms + s.handover_after_ms;
  }
  EXPECT_LE(windows, whole.compute_ms + 1e-6);
}

TEST(SplitRunner, ManyBatchesInFlightCompleteInSubmitOrder) {
  const Partition p = partition_model(model(), {{1, 4, 8, 8}}, options());
  RunnerConfig config;
  config.slots = 2;
  auto split = make_split_runner(p, config);
  std::mutex mutex;
  std::vector<int> order;
  for (int i = 0; i < 12; ++i) {
    InferBatch batch;
    batch.inputs = {{testing::random_tensor(DType::kF32, {1, 4, 8, 8}, -1, 1, 100 + i)}};
    split->submit(std::move(batch), [&, i](InferResult& r) {
      EXPECT_FALSE(r.error);
      std::lock_guard lock(mutex);
      order.push_back(i);
    });
  }
  split->drain();
  ASSERT_EQ(order.size(), 12u);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
}

// The "pinned memory" of a test accelerator: heap blocks whose ranges it remembers, so that a
// test can tell whether a tensor lives in it.
class RememberingResource final : public memory::MemoryResource {
 public:
  RememberingResource() : MemoryResource("test pinned") {}
  std::string_view kind() const override { return "test resource"; }
  bool holds(const void* p) const {
    std::lock_guard lock(mutex_);
    const auto* b = static_cast<const std::byte*>(p);
    auto it = blocks_.upper_bound(b);
    if (it == blocks_.begin()) return false;
    --it;
    return b < it->first + it->second;
  }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, memory::Stream) override {
    void* p = ::operator new(bytes, std::align_val_t{alignment});
    std::lock_guard lock(mutex_);
    blocks_[static_cast<const std::byte*>(p)] = bytes;
    return p;
  }
  void do_deallocate(void* p, std::size_t, std::size_t alignment, memory::Stream) override {
    {
      std::lock_guard lock(mutex_);
      blocks_.erase(static_cast<const std::byte*>(p));
    }
    ::operator delete(p, std::align_val_t{alignment});
  }
  memory::PoolStats do_stats() const override { return {}; }
  mutable std::mutex mutex_;
  std::map<const std::byte*, std::size_t> blocks_;
};

RememberingResource& remembering_pinned() {
  static auto* resource = new RememberingResource();  // outlives every runner of the test binary
  return *resource;
}

// The stand-in accelerator's runner, remembering where the first input of each batch lives.
class RemembersItsInputRunner final : public testing::WrappedCpuRunner {
 public:
  using WrappedCpuRunner::WrappedCpuRunner;
  void submit(InferBatch batch, InferDone done) override {
    {
      std::lock_guard lock(mutex());
      inputs().push_back(batch.inputs.at(0).at(0).raw_data());
    }
    inner_->submit(std::move(batch), std::move(done));
  }
  std::string description() const override { return "test-remembers"; }
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::vector<const void*>& inputs() {
    static std::vector<const void*> v;
    return v;
  }
};

// A split's values live in its pool over the accelerator's pinned memory: the batch's parts are
// gathered there (a GPU segment then copies them in straight from it), and the model's outputs
// reach the parts as views of the rows of those values, not copies.
TEST(SplitRunner, ItsValuesLiveInTheAcceleratorsPinnedMemoryAndItsOutputsAreViewsOfThem) {
  static const char* const device = [] {
    DeviceRunnerFactory f;
    f.unavailable = [] { return std::string(); };
    f.make = [](std::shared_ptr<const Graph> graph, const RunnerConfig& config) -> std::unique_ptr<ModelRunner> {
      return std::make_unique<RemembersItsInputRunner>(std::move(graph), config);
    };
    f.device_count = [] { return 1; };
    f.supports = testing::all_but_softmax;
    f.pinned_memory = []() -> memory::MemoryResource& { return remembering_pinned(); };
    register_device_runner("test-remembers", std::move(f));
    return "test-remembers";
  }();
  PartitionOptions o = options();
  o.devices = {"cpu", device};
  o.profiles[1] = testing::stand_in_profile(device, 10000, 1000);
  const Partition p = partition_model(model(), {{3, 4, 8, 8}}, o);
  ASSERT_GE(p.segments.size(), 3u);
  ASSERT_EQ(p.devices[static_cast<std::size_t>(p.segments[0].device)], device);
  auto split = make_split_runner(p, {});
  auto whole = make_cpu_runner(model(), {});
  // The segments' plans first: a CPU runner's first batch of a shape takes its outputs from the heap.
  split->prepare({{4, 4, 8, 8}});
  RemembersItsInputRunner::inputs().clear();
  const auto [got, want] = two_frames(*split, *whole, 40, 41);  // from the heap
  ASSERT_FALSE(got.error);
  ASSERT_FALSE(want.error);
  {
    std::lock_guard lock(RemembersItsInputRunner::mutex());
    ASSERT_FALSE(RemembersItsInputRunner::inputs().empty());
    // The first segment's input: the two frames gathered into one value of the pool.
    EXPECT_TRUE(remembering_pinned().holds(RemembersItsInputRunner::inputs().front()));
  }
  ASSERT_EQ(got.outputs.size(), 2u);
  for (std::size_t o2 = 0; o2 < got.outputs.size(); ++o2) {
    const auto& parts = got.outputs[o2];
    ASSERT_EQ(parts.size(), 2u);
    for (std::size_t k = 0; k < 2; ++k) expect_near(parts[k], want.outputs[o2][k]);
    EXPECT_EQ(parts[0].dim(0), 1);
    EXPECT_EQ(parts[1].dim(0), 2);
    // Rows of one value of the pool: the second part starts where the first ends.
    EXPECT_TRUE(remembering_pinned().holds(parts[0].raw_data())) << "output " << o2;
    EXPECT_EQ(static_cast<const std::byte*>(parts[1].raw_data()),
              static_cast<const std::byte*>(parts[0].raw_data()) + parts[0].nbytes())
        << "output " << o2;
  }
  // Nothing was copied out.
  EXPECT_EQ(split->stats().bytes_out, 0u);
}

// The stand-in accelerator's runner, remembering the shapes each prepare() asks for.
class RemembersItsPreparesRunner final : public testing::WrappedCpuRunner {
 public:
  using WrappedCpuRunner::WrappedCpuRunner;
  void prepare(const std::vector<Shape>& shapes) override {
    {
      std::lock_guard lock(mutex());
      prepared().push_back(shapes);
    }
    inner_->prepare(shapes);
  }
  std::string description() const override { return "test-prepares"; }
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::vector<std::vector<Shape>>& prepared() {
    static std::vector<std::vector<Shape>> v;
    return v;
  }
};

// A split's prepare() runs one batch of zeros through its segments, then has each segment's
// runner prepare the shapes that batch brought it: a runner with slots (the CUDA runner) plans
// every slot then, not only the one the batch went through.
TEST(SplitRunner, PrepareHasEachSegmentsRunnerPrepareTheShapesItsInputsTake) {
  static const char* const device = testing::register_wrapped_accelerator<RemembersItsPreparesRunner>("test-prepares");
  PartitionOptions o = options();
  o.devices = {"cpu", device};
  o.profiles[1] = testing::stand_in_profile(device, 10000, 1000);
  const Partition p = partition_model(model(), {{2, 4, 8, 8}}, o);
  ASSERT_GE(p.segments.size(), 3u);
  ASSERT_EQ(p.segments[0].device, 1);
  const auto on_accelerator = std::count_if(p.segments.begin(), p.segments.end(), [](const Segment& s) { return s.device == 1; });
  auto split = make_split_runner(p, {});
  {
    std::lock_guard lock(RemembersItsPreparesRunner::mutex());
    RemembersItsPreparesRunner::prepared().clear();
  }
  split->prepare({{2, 4, 8, 8}});
  std::lock_guard lock(RemembersItsPreparesRunner::mutex());
  const auto& prepared = RemembersItsPreparesRunner::prepared();
  ASSERT_EQ(static_cast<long>(prepared.size()), static_cast<long>(on_accelerator));
  // The first segment reads the model's input x, boxed: one row of the whole batch.
  EXPECT_EQ(prepared.front(), (std::vector<Shape>{{1, 2, 4, 8, 8}}));
  for (const auto& shapes : prepared) {
    ASSERT_FALSE(shapes.empty());
    for (const Shape& s : shapes) EXPECT_EQ(s.at(0), 1) << shape_str(s);
  }
  EXPECT_EQ(split->stats().batches, 0);  // the batch of zeros is not counted
}

TEST(SplitRunner, ABadBatchIsRefusedAtSubmit) {
  const Partition p = partition_model(model(), {{1, 4, 8, 8}}, options());
  auto split = make_split_runner(p, {});
  InferBatch batch;
  batch.inputs = {{Tensor::zeros(DType::kI64, {1, 4, 8, 8})}};
  EXPECT_THROW(split->submit(std::move(batch), [](InferResult&) {}), InvalidArgument);
  EXPECT_EQ(split->in_flight(), 0);
}

// The stand-in accelerator's runner, failing every split batch of 2 rows in the segments after
// the first (those whose graph does not take the model's input "x").
class FailsTwoRowsLaterRunner final : public testing::WrappedCpuRunner {
 public:
  FailsTwoRowsLaterRunner(std::shared_ptr<const Graph> graph, const RunnerConfig& config)
      : WrappedCpuRunner(graph, config),
        later_(std::none_of(graph->inputs.begin(), graph->inputs.end(), [](const auto& vi) { return vi.name == "x"; })) {}
  void submit(InferBatch batch, InferDone done) override {
    const bool fail = later_ && batch.counted_rows == 2;
    inner_->submit(std::move(batch), [fail, done = std::move(done)](InferResult& r) {
      if (fail) {
        r.outputs.clear();
        r.error = std::make_exception_ptr(Error("test: a later segment fails a batch of 2 rows"));
      }
      done(r);
    });
  }
  std::string description() const override { return "test-fails-later"; }

 private:
  bool later_;
};

TEST(SplitRunner, TheModelsBatchSizesAreCountedOnceLeavingOutBatchesALaterSegmentFailed) {
  static const char* const failing = testing::register_wrapped_accelerator<FailsTwoRowsLaterRunner>("test-fails-later");
  PartitionOptions o = options();
  o.devices = {"cpu", failing};
  o.profiles[1].device = o.profiles[1].name = failing;
  const Partition p = partition_model(model(), {{2, 4, 8, 8}}, o);
  ASSERT_GE(p.segments.size(), 3u);
  ASSERT_EQ(p.segments.front().device, 1) << "the first segment is the accelerator's (the convolution before Softmax)";
  auto split = make_split_runner(p, RunnerConfig{});
  for (std::int64_t rows : {1, 2, 1, 2, 1}) {
    InferBatch batch;
    batch.inputs = {{testing::random_tensor(DType::kF32, {rows, 4, 8, 8}, -1, 1, 50 + static_cast<int>(rows))}};
    const InferResult r = run_batch(*split, std::move(batch));
    EXPECT_EQ(static_cast<bool>(r.error), rows == 2) << rows << " rows";
  }
  const RunnerStats whole = split->stats();
  EXPECT_EQ(whole.batches, 3);
  EXPECT_EQ(whole.failed, 2);
  // The first segment ran every batch (it fails none) and counts them all.
  const std::vector<RunnerStats> segments = split->segment_stats();
  ASSERT_EQ(segments.size(), p.segments.size());
  EXPECT_EQ(segments.front().batch_rows, (std::map<std::int64_t, std::int64_t>{{1, 3}, {2, 2}}));
  // Reported a device at a time: the model's batch sizes once, on the first segment, as the
  // split counted them (the batches that completed); the later segments leave them out.
  const std::vector<RunnerStats> parts = split->stats_by_segment();
  ASSERT_EQ(parts.size(), segments.size());
  EXPECT_EQ(parts.front().batch_rows, (std::map<std::int64_t, std::int64_t>{{1, 3}}));
  for (std::size_t k = 1; k < parts.size(); ++k) EXPECT_TRUE(parts[k].batch_rows.empty()) << "segment " << k;
  for (std::size_t k = 0; k < parts.size(); ++k) EXPECT_EQ(parts[k].description, segments[k].description);
  // A runner on one device reports its own stats, batch sizes included.
  auto whole_runner = make_cpu_runner(model(), RunnerConfig{});
  InferBatch batch;
  batch.inputs = {{testing::random_tensor(DType::kF32, {2, 4, 8, 8}, -1, 1, 60)}};
  ASSERT_FALSE(run_batch(*whole_runner, std::move(batch)).error);
  const std::vector<RunnerStats> one = whole_runner->stats_by_segment();
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one.front().batch_rows, (std::map<std::int64_t, std::int64_t>{{2, 1}}));
}

TEST(PlacedRunner, OpsWithoutAKernelLeaveShapeArithmeticOut) {
  const auto g = model();
  for (Device device : {Device::kCpu, Device::kCuda}) {
    const std::vector<std::string> missing = ops_without_kernel(*g, device);
    // Shape, Gather, Unsqueeze and Concat only build the Reshape's target: evaluated on the host.
    for (const char* op : {"Shape", "Gather", "Unsqueeze", "Concat"}) {
      EXPECT_EQ(std::find(missing.begin(), missing.end(), op), missing.end()) << op;
    }
    for (const auto& op : missing) EXPECT_TRUE(OpRegistry::instance().candidates(op, device).empty()) << op;
  }
  EXPECT_TRUE(ops_without_kernel(*g, Device::kCpu).empty());
}

}  // namespace
}  // namespace redwood::runtime
