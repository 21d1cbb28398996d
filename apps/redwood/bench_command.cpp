// redwood bench MODEL: Redwood against a peer runtime on the same input, in one run.
//
//   redwood bench assets/models/ch_PP-OCRv4_det_infer.onnx --shape x=1x3x640x640 --peer ort
//       --threads 2 --runs 20 --json out/det.json --profile [--load 3]
//
// Inputs: --input NAME=FILE takes a picture or video frame, preprocessed as `redwood infer` does
// (stages/preprocess/image_tensor: --size for dynamic extents, --scale/--mean/--std), or a .npy;
// the others are random (uniform [0, 1), fixed seed), which for a detector gives outputs of a
// tiny range where the relative comparison is meaningless: compare on a real frame. Every input
// is written once as .npy; Redwood runs them in this
// process (warm-up, then --runs timed runs), ONNX Runtime runs the same files through
// scripts/ort_run.js with the same thread count. Prints median and p99 of both, the speed ratio
// (ORT median / Redwood median: above 1 means Redwood is faster), and the largest output
// difference relative to the peer output's range. --load N keeps N busy threads running from the
// first warm-up to the end of the peer's run, so both meet the same load.

#include "apps/redwood/background_load.hpp"
#include "apps/redwood/commands.hpp"
#include "backends/cpu/onednn/onednn_common.hpp"
#include "core/error.hpp"
#include "runtime/executor.hpp"
#include "core/npy.hpp"
#include "core/onnx/onnx_import.hpp"
#include "pipelines/pipeline.hpp"
#include "stages/preprocess/image_tensor.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <oneapi/tbb/global_control.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <unistd.h>

namespace redwood::app {
namespace {

namespace fs = std::filesystem;

struct BenchArgs {
  std::string model;
  std::vector<std::string> shapes;  // NAME=DIMS
  std::vector<std::string> inputs;  // NAME=FILE (picture, video, .npy)
  std::string size;                 // WxH for pictures fed to dynamic extents
  std::vector<float> mean{0.f, 0.f, 0.f}, std{1.f, 1.f, 1.f};
  float scale = 1.0f / 255.0f;
  bool bgr = false;  // pictures in BGR channel order (PP-OCR)
  std::string peer;                 // "" or "ort"
  int runs = 20;
  int warmup = 3;
  int threads = 2;
  int load = 0;                     // busy background threads during both runtimes' runs
  std::string json;
  bool profile = false;
  bool reference = false;
};

Shape parse_dims(const std::string& text) {
  Shape s;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, 'x')) {
    std::stringstream in2(part);
    std::string p2;
    while (std::getline(in2, p2, ',')) {
      try {
        s.push_back(std::stoll(p2));
      } catch (const std::exception&) {
        throw InvalidArgument(fmt::format("--shape: '{}' is not a shape such as 1x3x640x640", text));
      }
    }
  }
  return s;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

fs::path find_ort_runner() {
  std::vector<fs::path> roots;
  if (const char* s = std::getenv("REDWOOD_SOURCE_DIR")) roots.emplace_back(s);
  roots.push_back(fs::current_path());
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) roots.push_back(exe.parent_path());
  for (fs::path r : roots) {
    for (; !r.empty(); r = r.parent_path()) {
      if (fs::exists(r / "scripts" / "ort_run.js")) return r / "scripts" / "ort_run.js";
      if (r == r.parent_path()) break;
    }
  }
  throw IoError("scripts/ort_run.js not found (set REDWOOD_SOURCE_DIR to Redwood's source folder)");
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string safe_name(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  }
  return out;
}

int run_bench(const BenchArgs& args) {
  RW_EXPECTS(args.runs >= 15, InvalidArgument, "--runs must be at least 15 (got {})", args.runs);
  RW_EXPECTS(args.peer.empty() || args.peer == "ort", InvalidArgument, "--peer must be 'ort' (got '{}')", args.peer);
  RW_EXPECTS(args.load >= 0 && args.load <= 256, InvalidArgument, "--load must be from 0 to 256 busy threads (got {})", args.load);
  std::optional<oneapi::tbb::global_control> tbb_threads;
  if (args.threads > 0) {
    tbb_threads.emplace(oneapi::tbb::global_control::max_allowed_parallelism, args.threads);
    cpu::onednn::set_threads(args.threads);
  }
  std::shared_ptr<Graph> graph = load_onnx(args.model, OnnxImportOptions{.cache = true});
  ExecutorOptions options;
  options.optimize = !args.reference;
  options.reference_only = args.reference;
  const auto load_start = std::chrono::steady_clock::now();
  Executor executor(graph, options);
  const double load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();

  // Inputs: every graph input needs a shape (declared, or from --shape for dynamic extents).
  std::map<std::string, Shape> shapes;
  for (const auto& s : args.shapes) {
    const auto eq = s.find('=');
    RW_EXPECTS(eq != std::string::npos, InvalidArgument, "--shape '{}': expected NAME=DIMS", s);
    shapes[s.substr(0, eq)] = parse_dims(s.substr(eq + 1));
  }
  const fs::path scratch = fs::temp_directory_path() / fmt::format("redwood-bench-{}", ::getpid());
  fs::create_directories(scratch);
  std::map<std::string, Tensor> feeds;
  std::map<std::string, fs::path> files;
  ImageTensorOptions image;
  RW_EXPECTS(args.mean.size() == 3 && args.std.size() == 3, InvalidArgument,
             "--mean and --std take three values each (got {} and {})", args.mean.size(), args.std.size());
  std::copy(args.mean.begin(), args.mean.end(), image.mean.begin());
  std::copy(args.std.begin(), args.std.end(), image.std.begin());
  image.scale = args.scale;
  image.rgb = !args.bgr;
  if (!args.size.empty()) {
    const Shape wh = parse_dims(args.size);
    RW_EXPECTS(wh.size() == 2 && wh[0] > 0 && wh[1] > 0, InvalidArgument, "--size '{}': expected WIDTHxHEIGHT", args.size);
    image.width = static_cast<int>(wh[0]);
    image.height = static_cast<int>(wh[1]);
  }
  std::map<std::string, std::string> input_files;
  for (const auto& s : args.inputs) {
    const auto eq = s.find('=');
    RW_EXPECTS(eq != std::string::npos && eq > 0, InvalidArgument, "--input '{}': expected NAME=FILE", s);
    input_files[s.substr(0, eq)] = s.substr(eq + 1);
  }
  for (const auto& [name, file] : input_files) {
    bool known = false;
    for (const auto& vi : graph->inputs) known = known || vi.name == name;
    RW_EXPECTS(known, InvalidArgument, "--input {}: the model has no input '{}'", file, name);
  }
  std::uint32_t seed = 1;
  for (const auto& vi : graph->inputs) {
    Shape shape;
    if (input_files.count(vi.name)) {
      const fs::path file = input_files.at(vi.name);
      Tensor t = file.extension() == ".npy" ? read_npy(file) : image_to_tensor(read_image_or_first_frame(file), vi, image);
      RW_EXPECTS(t.dtype() == DType::kF32, Unsupported, "--input {}: bench feeds float inputs only", file.string());
      feeds[vi.name] = t.contiguous();
      files[vi.name] = scratch / (safe_name(vi.name) + ".npy");
      write_npy(files[vi.name], feeds[vi.name]);
      fmt::print("input: {} {} from {}\n", vi.name, t.description(), file.string());
      continue;
    }
    if (shapes.count(vi.name)) {
      shape = shapes.at(vi.name);
    } else {
      for (const Dim& d : vi.dims) {
        RW_EXPECTS(d.known(), InvalidArgument, "input '{}' ({}) has dynamic extents: give --shape {}=DIMS",
                   vi.name, vi.description(), vi.name);
        shape.push_back(d.value);
      }
    }
    RW_EXPECTS(vi.dtype == DType::kF32, Unsupported, "input '{}': bench makes float inputs only", vi.name);
    Tensor t = Tensor::empty(DType::kF32, shape);
    std::mt19937 rng(seed++);
    std::uniform_real_distribution<float> dist(0.f, 1.f);
    for (float& v : t.values<float>()) v = dist(rng);
    feeds[vi.name] = t;
    files[vi.name] = scratch / (safe_name(vi.name) + ".npy");
    write_npy(files[vi.name], t);
  }

  // Redwood.
  std::vector<Tensor> outputs;
  // The load runs from the first warm-up to the end of the peer's run: both runtimes meet it.
  const BackgroundLoad load(args.load);
  for (int i = 0; i < args.warmup; ++i) outputs = executor.run(feeds);
  std::vector<double> times;
  for (int i = 0; i < args.runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    outputs = executor.run(feeds);
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  const double rw_p50 = percentile(times, 50), rw_p99 = percentile(times, 99);
  std::size_t onednn_nodes = 0;
  for (const auto& p : executor.node_providers()) onednn_nodes += p == "onednn";
  fmt::print("model: {} ({} nodes, {} after optimization, {} on oneDNN), loaded in {:.1f} ms\n", args.model,
             graph->nodes.size(), executor.graph().nodes.size(), onednn_nodes, load_ms);
  fmt::print("threads: {}   runs: {} after {} warm-up{}\n", args.threads, args.runs, args.warmup,
             args.load > 0 ? fmt::format("   background load: {} busy thread(s)", args.load) : std::string());
  fmt::print("redwood: median {:8.2f} ms   p99 {:8.2f} ms\n", rw_p50, rw_p99);

  nlohmann::json report;
  report["model"] = args.model;
  report["threads"] = args.threads;
  report["load"] = args.load;
  report["runs"] = args.runs;
  report["redwood"] = {{"median_ms", rw_p50}, {"p99_ms", rw_p99}, {"load_ms", load_ms}};

  int status = 0;
  if (args.peer == "ort") {
    const fs::path out_dir = scratch / "ort";
    std::string command = "node " + quote(find_ort_runner().string()) + " " + quote(args.model);
    for (const auto& [name, file] : files) command += " --input " + quote(name + "=" + file.string());
    command += fmt::format(" --repeat {} --threads {} --out {} > {} 2> {}", args.runs, args.threads,
                           quote(out_dir.string()), quote((scratch / "ort.json").string()),
                           quote((scratch / "ort.err").string()));
    RW_EXPECTS(std::system(command.c_str()) == 0, Error, "ONNX Runtime failed: {}\n{}", command,
               [&] { std::ifstream f(scratch / "ort.err"); return std::string(std::istreambuf_iterator<char>(f), {}); }());
    std::ifstream f(scratch / "ort.json");
    const nlohmann::json ort = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(f), {}));
    const double ort_p50 = ort["latency_ms"]["p50"], ort_p99 = ort["latency_ms"]["p99"];
    // Outputs: max |redwood - ort| relative to the range of ORT's output.
    double worst = 0;
    for (const auto& o : ort["outputs"]) {
      const std::string name = o["name"];
      std::size_t index = 0;
      while (index < graph->outputs.size() && graph->outputs[index].name != name) ++index;
      RW_EXPECTS(index < outputs.size(), Error, "ONNX Runtime output '{}' is not a Redwood output", name);
      const Tensor peer = read_npy(o["file"].get<std::string>()).cast(DType::kF32).contiguous();
      const Tensor mine = outputs[index].cast(DType::kF32).contiguous();
      RW_EXPECTS(peer.shape() == mine.shape(), Error, "output '{}': Redwood {} but ONNX Runtime {}", name,
                 mine.description(), peer.description());
      const auto pv = peer.values<float>();
      const auto mv = mine.values<float>();
      float lo = INFINITY, hi = -INFINITY;
      double diff = 0;
      for (std::size_t i = 0; i < pv.size(); ++i) {
        lo = std::min(lo, pv[i]);
        hi = std::max(hi, pv[i]);
        diff = std::max(diff, static_cast<double>(std::fabs(pv[i] - mv[i])));
      }
      const double rel = diff / std::max(1e-12, static_cast<double>(hi - lo));
      worst = std::max(worst, rel);
      fmt::print("output {}: max |diff| {:.3g} (range {:.3g}, relative {:.3g})\n", name, diff, hi - lo, rel);
    }
    const bool agree = worst <= 1e-4;
    fmt::print("ort:     median {:8.2f} ms   p99 {:8.2f} ms\n", ort_p50, ort_p99);
    fmt::print("ratio:   {:.2f}x (ORT median / Redwood median)   outputs {} (max relative diff {:.3g})\n",
               ort_p50 / rw_p50, agree ? "agree" : "DIFFER", worst);
    report["ort"] = {{"median_ms", ort_p50}, {"p99_ms", ort_p99}};
    report["ratio"] = ort_p50 / rw_p50;
    report["max_relative_diff"] = worst;
    report["outputs_agree"] = agree;
    if (!agree) status = 2;
  }

  if (args.profile) {
    executor.set_profiling(true);
    std::map<std::string, std::pair<double, int>> per_op;  // "op (provider)" -> ms, count
    std::vector<std::vector<NodeTiming>> all;
    for (int i = 0; i < 5; ++i) {
      executor.run(feeds);
      all.push_back(executor.last_timings());
    }
    std::vector<NodeTiming> med = all.front();
    for (std::size_t n = 0; n < med.size(); ++n) {
      std::vector<double> v;
      for (const auto& run : all) v.push_back(run[n].milliseconds);
      med[n].milliseconds = percentile(v, 50);
      auto& [ms, count] = per_op[med[n].op_type + " (" + med[n].provider + ")"];
      ms += med[n].milliseconds;
      ++count;
    }
    std::vector<std::pair<std::string, std::pair<double, int>>> rows(per_op.begin(), per_op.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    double total = 0;
    for (const auto& r : rows) total += r.second.first;
    fmt::print("\nprofile (median of 5 runs, per op type):\n");
    for (const auto& [op, v] : rows) {
      fmt::print("  {:32s} {:4d} nodes {:9.3f} ms  {:5.1f}%\n", op, v.second, v.first, 100 * v.first / total);
    }
    std::sort(med.begin(), med.end(), [](const auto& a, const auto& b) { return a.milliseconds > b.milliseconds; });
    fmt::print("slowest nodes:\n");
    for (std::size_t i = 0; i < std::min<std::size_t>(10, med.size()); ++i) {
      fmt::print("  {:40s} {:14s} {:8s} {:8.3f} ms\n", med[i].node, med[i].op_type, med[i].provider, med[i].milliseconds);
    }
    nlohmann::json prof = nlohmann::json::array();
    for (const auto& [op, v] : rows) prof.push_back({{"op", op}, {"nodes", v.second}, {"ms", v.first}});
    report["profile"] = prof;
  }
  if (!args.json.empty()) {
    std::ofstream out(args.json);
    RW_EXPECTS(out.good(), IoError, "--json {}: cannot write", args.json);
    out << report.dump(2) << "\n";
  }
  std::error_code ec;
  fs::remove_all(scratch, ec);
  return status;
}

}  // namespace

Command make_bench_command() {
  auto args = std::make_shared<BenchArgs>();
  Command c;
  c.attach_fn = [args](CLI::App& app) {
    CLI::App* sub = app.add_subcommand("bench", "Time a model on Redwood (and a peer runtime) and compare");
    sub->add_option("model", args->model, "ONNX model")->required()->check(CLI::ExistingFile);
    sub->add_option("--shape", args->shapes, "NAME=DIMS for a random input (e.g. x=1x3x640x640)");
    sub->add_option("--input", args->inputs,
                    "NAME=FILE: a picture or video (first frame), preprocessed as `redwood infer` does, or a .npy");
    sub->add_option("--size", args->size, "WIDTHxHEIGHT for pictures fed to dynamic extents (default: as read)");
    sub->add_option("--mean", args->mean, "per-channel mean subtracted from pictures (after --scale)")
        ->delimiter(',')->expected(3);
    sub->add_option("--std", args->std, "per-channel std dividing pictures (after --mean)")
        ->delimiter(',')->expected(3);
    sub->add_option("--scale", args->scale, "factor applied to 0..255 pixel values first");
    sub->add_flag("--bgr", args->bgr, "feed pictures in BGR channel order (PP-OCR's det and rec)");
    sub->add_option("--peer", args->peer, "Peer runtime to compare with: ort");
    sub->add_option("--runs", args->runs, "Timed runs (at least 15)");
    sub->add_option("--warmup", args->warmup, "Warm-up runs");
    sub->add_option("--threads", args->threads, "Threads for Redwood and the peer (0: all cores)")
        ->check(CLI::Range(0, kMaxThreads));
    sub->add_option("--load", args->load, "Busy background threads while both runtimes run (a controlled load)");
    sub->add_option("--json", args->json, "Write the results as JSON");
    sub->add_flag("--profile", args->profile, "Print the time per op");
    sub->add_flag("--reference", args->reference, "Reference kernels only, no graph optimization");
    return sub;
  };
  c.run = [args] { return run_bench(*args); };
  return c;
}

}  // namespace redwood::app
