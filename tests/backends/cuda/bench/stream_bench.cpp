// redwood_stream_bench: the streaming CUDA runner (core/model_runner.hpp, the "cuda" runner)
// against the one serial call it replaces, on one model, in one process:
//
//   redwood_stream_bench MODEL.onnx --shape 3,320,416 --batch 8 --precision fp16 [--batches 200]
//                        [--slots 1,2,3,4] [--warmup 20] [--repeats 3]
//
// Each batch is --batch parts of one row (frames), as the infer stage hands them over. The
// parts sit in page-locked memory (as the frames' pool is when a model runs on a GPU: copied
// straight in) or in pageable memory (staged through the slot's pinned buffer); outputs go to the
// same kind. For every slot count and memory kind, --batches batches are submitted as fast as
// one thread can after --warmup, and the wall time gives batches per second; each case runs
// --repeats times and the table gives the run of median batches per second. The peer is the
// serial path: the parts concatenated into one pageable tensor, then GraphRunner::run (copy in
// through one staging buffer, replay, copy out, synchronize), one batch at a time. Prints a
// markdown table: batches/s, frames/s, the ratio to one slot and to the serial path, the copy
// bandwidth against the measured pinned peak, the share of copy time hidden under compute and
// the compute engine's busy share.

#include "backends/cuda/device_memory.hpp"
#include "backends/cuda/graph_runner.hpp"
#include "core/model_runner.hpp"
#include "core/onnx/onnx_import.hpp"

#include "bench_support.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

namespace {

using namespace redwood;
using Clock = std::chrono::steady_clock;

// A host tensor in page-locked memory from a pool (freed with its last handle), as the frames'
// pool hands them out: never a cudaHostAlloc/cudaFreeHost per tensor, which synchronize the GPU.
Tensor pinned_tensor(DType dtype, const Shape& shape) {
  memory::MemoryResource& pinned = cuda::pinned_pool();
  const std::size_t bytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
  void* p = pinned.allocate(std::max<std::size_t>(bytes, 1));
  std::shared_ptr<Storage> storage(new Storage(p, bytes, Device::kCpu, [](void*) {}), [&pinned, bytes](Storage* s) {
    pinned.deallocate(s->data(), std::max<std::size_t>(bytes, 1));
    delete s;
  });
  return Tensor::from_storage(std::move(storage), dtype, shape);
}

struct Row {
  std::string mode;
  int slots = 0;
  double batches_per_s = 0;
  RunnerStats stats;
};

int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: redwood_stream_bench MODEL.onnx --shape C,H,W [--batch N] [--precision fp16] "
                         "[--batches N] [--warmup N] [--slots 1,2,3,4] [--repeats 3]\n");
    return 2;
  }
  const std::string model = argv[1];
  std::string precision = "fp16", dims, slot_list = "1,2,3,4";
  int batch = 8, batches = 200, warmup = 20, repeats = 3;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return bench::option_value(argc, argv, i); };
    if (a == "--shape") dims = next();
    else if (a == "--batch") batch = std::stoi(next());
    else if (a == "--precision") precision = next();
    else if (a == "--batches") batches = std::stoi(next());
    else if (a == "--warmup") warmup = std::stoi(next());
    else if (a == "--slots") slot_list = next();
    else if (a == "--repeats") repeats = std::stoi(next());
    else throw InvalidArgument(fmt::format("unknown option {}", a));
  }
  RW_EXPECTS(!dims.empty(), InvalidArgument, "give --shape C,H,W (the input's item shape)");
  RW_EXPECTS(batch >= 1 && batches >= 1 && warmup >= 0 && repeats >= 1, InvalidArgument,
             "--batch, --batches and --repeats must be >= 1");
  std::shared_ptr<const Graph> graph = load_onnx(model);
  RW_EXPECTS(graph->inputs.size() == 1, InvalidArgument, "{}: one input expected", model);
  Shape item{1};
  for (auto d : bench::parse_list(dims)) item.push_back(d);
  Shape whole = item;
  whole[0] = batch;

  // Part sets to rotate over (a working set well beyond the caches), in both kinds of memory.
  constexpr int kSets = 8;
  std::vector<std::vector<Tensor>> pageable(kSets), pinned(kSets);
  for (int s = 0; s < kSets; ++s) {
    for (int k = 0; k < batch; ++k) {
      Tensor t = bench::random_input(item, static_cast<std::uint32_t>(100 * s + k));
      Tensor p = pinned_tensor(DType::kF32, item);
      std::memcpy(p.raw_data(), t.raw_data(), t.nbytes());
      pageable[static_cast<std::size_t>(s)].push_back(std::move(t));
      pinned[static_cast<std::size_t>(s)].push_back(std::move(p));
    }
  }
  const std::string input = graph->inputs[0].name;
  std::vector<Row> rows;
  std::size_t frame_bytes = 0;

  // The serial path: concatenate, then one synchronous call per batch.
  {
    cuda::GraphRunner serial(graph, cuda::RunnerOptions{.precision = cuda::parse_precision(precision)});
    const auto one = [&](int s) {
      Tensor cat = Tensor::empty(DType::kF32, whole);
      gather_rows(pageable[static_cast<std::size_t>(s)], cat.raw_data(), cat.nbytes());
      return serial.run({{input, cat}});
    };
    for (int i = 0; i < warmup; ++i) one(i % kSets);
    std::vector<double> rates;
    for (int rep = 0; rep < repeats; ++rep) {
      const auto start = Clock::now();
      for (int i = 0; i < batches; ++i) one(i % kSets);
      rates.push_back(batches / std::chrono::duration<double>(Clock::now() - start).count());
    }
    std::sort(rates.begin(), rates.end());
    rows.push_back({"serial call (concatenate, run, synchronize)", 1, rates[rates.size() / 2], {}});
  }

  for (const bool use_pinned : {true, false}) {
    for (auto slots : bench::parse_list(slot_list)) {
      RunnerConfig config;
      config.slots = static_cast<int>(slots);
      config.precision = precision;
      auto runner = device_runner_registry().at("cuda").make(graph, config);
      runner->prepare({whole});
      auto& sets = use_pinned ? pinned : pageable;
      TensorAllocator allocate;
      if (use_pinned) allocate = [](DType dtype, const Shape& shape) { return pinned_tensor(dtype, shape); };
      std::atomic<int> failed{0};
      const auto submit = [&](int s) {
        InferBatch b;
        b.inputs.push_back(sets[static_cast<std::size_t>(s)]);
        b.allocate = allocate;
        runner->submit(std::move(b), [&failed](InferResult& r) { failed += r.error != nullptr; });
      };
      for (int i = 0; i < warmup; ++i) submit(i % kSets);
      runner->drain();
      std::vector<Row> runs;
      for (int rep = 0; rep < repeats; ++rep) {
        const RunnerStats before = runner->stats();
        const auto start = Clock::now();
        for (int i = 0; i < batches; ++i) submit(i % kSets);
        runner->drain();
        const double s = std::chrono::duration<double>(Clock::now() - start).count();
        RW_EXPECTS(failed.load() == 0, Error, "{} batch(es) failed", failed.load());
        RunnerStats st = runner->stats();
        // The measured batches only: the difference of the totals (the unions included, since
        // the batches before ended before the measured ones began).
        st.batches -= before.batches;
        st.copy_in_ms -= before.copy_in_ms;
        st.compute_ms -= before.compute_ms;
        st.copy_out_ms -= before.copy_out_ms;
        st.compute_busy_ms -= before.compute_busy_ms;
        st.copy_busy_ms -= before.copy_busy_ms;
        st.busy_ms -= before.busy_ms;
        st.bytes_in -= before.bytes_in;
        st.bytes_out -= before.bytes_out;
        st.span_ms = s * 1000.0;
        frame_bytes = st.batches ? (st.bytes_in + st.bytes_out) / static_cast<std::size_t>(st.batches * batch) : 0;
        runs.push_back({use_pinned ? "slots, parts in pinned memory" : "slots, parts in pageable memory", static_cast<int>(slots),
                        batches / s, st});
      }
      std::sort(runs.begin(), runs.end(), [](const Row& a, const Row& b) { return a.batches_per_s < b.batches_per_s; });
      rows.push_back(runs[runs.size() / 2]);
    }
  }

  const double serial = rows[0].batches_per_s;
  double one_slot[2] = {0, 0};
  for (const Row& r : rows) {
    if (r.slots == 1 && r.mode.find("pinned") != std::string::npos) one_slot[0] = r.batches_per_s;
    if (r.slots == 1 && r.mode.find("pageable") != std::string::npos) one_slot[1] = r.batches_per_s;
  }
  fmt::print("{} at {} rows x {}, {}, {} batches after {} warm-up, the median of {} run(s); {:.2f} MB copied per frame\n\n", model,
             batch, fmt::join(item.begin() + 1, item.end(), "x"), precision, batches, warmup, repeats, frame_bytes / 1e6);
  fmt::print("| path | slots | batches/s | frames/s | vs 1 slot | vs serial | copies GB/s (pinned peak in/out) | copy hidden | compute busy |\n");
  fmt::print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const Row& r : rows) {
    const bool streaming = r.stats.batches > 0;
    const double base = r.mode.find("pageable") != std::string::npos ? one_slot[1] : one_slot[0];
    fmt::print("| {} | {} | {:.1f} | {:.0f} | {} | {:.2f}x | {} | {} | {} |\n", r.mode, streaming ? std::to_string(r.slots) : "-",
               r.batches_per_s, r.batches_per_s * batch, streaming && base > 0 ? fmt::format("{:.2f}x", r.batches_per_s / base) : "-",
               r.batches_per_s / serial,
               streaming ? fmt::format("{:.1f} ({:.1f}/{:.1f})", r.stats.copy_gbps(), r.stats.pinned_h2d_gbps, r.stats.pinned_d2h_gbps) : "-",
               streaming ? fmt::format("{:.0f} %", 100.0 * r.stats.overlap()) : "-",
               streaming ? fmt::format("{:.0f} %", 100.0 * r.stats.compute_busy_ms / r.stats.span_ms) : "-");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return redwood::bench::guarded_main("redwood_stream_bench", [&] { return run(argc, argv); }); }
