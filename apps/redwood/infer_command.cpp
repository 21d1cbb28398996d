// redwood infer MODEL: load an ONNX model, feed it inputs (pictures, video frames, .npy tensors
// or random values), run it on the CPU or a GPU, and print each output's shape and a summary with
// the latency, and the time to first inference (load, plan, tune, run: what a restart costs
// before the first result, which the plan cache shortens on a GPU).
//
//   redwood infer assets/models/ch_PP-OCRv4_det_infer.onnx --input x=assets/video/vtest.avi
//       --mean 0.485,0.456,0.406 --std 0.229,0.224,0.225 --repeat 10 --save out/
//   redwood infer resnet50.onnx --random input=1x3x224x224 --device cuda --precision fp16

#include "apps/redwood/commands.hpp"
#include "apps/redwood/tensor_summary.hpp"
#include "backends/cpu/onednn/onednn_common.hpp"
#include "core/error.hpp"
#include "core/model_runner.hpp"
#include "core/npy.hpp"
#include "core/onnx/onnx_import.hpp"
#include "pipelines/pipeline.hpp"
#include "runtime/cpu_runner.hpp"
#include "runtime/executor.hpp"
#include "stages/preprocess/image_tensor.hpp"

#include <fmt/format.h>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>
#include <oneapi/tbb/global_control.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>

#include <unistd.h>

namespace redwood::app {

namespace {

struct InferArgs {
  std::string model;
  std::vector<std::string> inputs;   // NAME=FILE
  std::vector<std::string> randoms;  // NAME=SHAPE
  int repeat = 1;
  int warmup = 1;
  int threads = 0;
  std::string save_dir;
  std::vector<float> mean{0.f, 0.f, 0.f};
  std::vector<float> std{1.f, 1.f, 1.f};
  float scale = 1.0f / 255.0f;
  bool bgr = false;
  std::string layout = "auto";
  bool profile = false;
  int frames = 0;
  std::string size;  // WxH for pictures fed to dynamic extents  // > 0: run on this many successive frames of the (one) video input
  std::string device = "cpu";
  std::string precision = "fp32";
  std::vector<std::string> cuda;  // NAME=VALUE: the CUDA backend's switches
};

std::pair<std::string, std::string> split_assignment(const std::string& arg, const char* option) {
  const auto eq = arg.find('=');
  RW_EXPECTS(eq != std::string::npos && eq > 0 && eq + 1 < arg.size(), InvalidArgument,
             "{} '{}': expected NAME=VALUE", option, arg);
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}

Shape parse_shape(const std::string& text, const std::string& option) {
  Shape shape;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const auto next = text.find_first_of("x,", pos);
    const std::string part = text.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
    try {
      std::size_t used = 0;
      const long long v = std::stoll(part, &used);
      RW_EXPECTS(used == part.size() && v >= 0, InvalidArgument, "");
      shape.push_back(v);
    } catch (const std::exception&) {
      throw InvalidArgument(fmt::format("{}: '{}' is not a shape such as 1x3x640x640", option, text));
    }
    if (next == std::string::npos) break;
    pos = next + 1;
  }
  try {
    (void)shape_numel(shape);  // a count that overflows is refused before anything is allocated
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: {}", option, e.what()));
  }
  return shape;
}

const ValueInfo& find_input(const Graph& graph, const std::string& name, const char* option) {
  for (const auto& vi : graph.inputs) {
    if (vi.name == name) return vi;
  }
  std::string names;
  for (const auto& vi : graph.inputs) names += (names.empty() ? "" : ", ") + vi.name;
  throw InvalidArgument(fmt::format("{} {}: the model has no input '{}' (its inputs: {})", option, name,
                                    name, names));
}

Tensor random_input(const ValueInfo& vi, const Shape& shape, std::uint32_t seed) {
  RW_EXPECTS(vi.dtype != DType::kUndefined, Unsupported, "input '{}': cannot make random {}", vi.name,
             vi.description());
  Tensor f = Tensor::empty(DType::kF32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.f, 1.f);
  for (float& v : f.values<float>()) v = is_floating(vi.dtype) ? dist(rng) : std::floor(dist(rng) * 10.f);
  return vi.dtype == DType::kF32 ? f : f.cast(vi.dtype);
}

std::string file_safe(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  }
  return out;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

// --save is checked before the model runs (and nothing is created until its outputs are ready):
// the folder, or the nearest folder above it that exists, must be one this process can write in.
void check_save_dir(const std::string& dir) {
  std::filesystem::path p = std::filesystem::absolute(dir);
  std::error_code ec;
  while (!std::filesystem::exists(p, ec) && p.has_parent_path() && p != p.parent_path()) p = p.parent_path();
  RW_EXPECTS(std::filesystem::is_directory(p, ec), IoError, "--save {}: {} is not a folder", dir, p.string());
  RW_EXPECTS(::access(p.c_str(), W_OK) == 0, IoError, "--save {}: cannot write in {}: {}", dir, p.string(),
             std::strerror(errno));
}

// The "cuda" model runner (GPU 0, one slot), or an error saying why this process has none.
// --cuda NAME=VALUE, checked by the CUDA backend where this build has one (before the model loads).
std::map<std::string, std::string> cuda_options_of(const InferArgs& args) {
  std::map<std::string, std::string> options;
  for (const std::string& a : args.cuda) {
    const auto [name, value] = split_assignment(a, "--cuda");
    options[name] = value;
  }
  const auto it = device_runner_registry().find("cuda");
  if (it != device_runner_registry().end() && it->second.check_options) it->second.check_options(options);
  return options;
}

std::unique_ptr<ModelRunner> make_gpu_runner(std::shared_ptr<const Graph> graph, const InferArgs& args,
                                             std::map<std::string, std::string> cuda_options) {
  const auto& registry = device_runner_registry();
  const auto it = registry.find("cuda");
  const std::string why = it == registry.end() ? "this Redwood was built without CUDA" : it->second.unavailable();
  RW_EXPECTS(why.empty(), Unsupported, "--device cuda: {}", why);
  RunnerConfig config;
  config.slots = 1;  // one batch at a time, as the CPU runs it
  config.precision = args.precision;
  config.device_options = std::move(cuda_options);
  return it->second.make(std::move(graph), config);
}

int run_infer(const InferArgs& args) {
  std::optional<oneapi::tbb::global_control> threads;
  if (args.threads > 0) {
    threads.emplace(oneapi::tbb::global_control::max_allowed_parallelism, args.threads);
    cpu::onednn::set_threads(args.threads);  // oneDNN's OpenMP workers follow the same count
  }
  RW_EXPECTS(args.repeat >= 1, InvalidArgument, "--repeat must be at least 1 (got {})", args.repeat);
  RW_EXPECTS(args.mean.size() == 3 && args.std.size() == 3, InvalidArgument,
             "--mean and --std take three values each (got {} and {})", args.mean.size(), args.std.size());
  for (float s : args.std) RW_EXPECTS(s != 0.f, InvalidArgument, "--std values must not be zero");
  RW_EXPECTS(args.layout == "auto" || args.layout == "nchw" || args.layout == "nhwc", InvalidArgument,
             "--layout must be auto, nchw or nhwc (got '{}')", args.layout);

  RW_EXPECTS(args.device == "cpu" || args.device == "cuda", InvalidArgument, "--device must be cpu or cuda (got '{}')",
             args.device);
  RW_EXPECTS(args.device == "cuda" || args.precision == "fp32", InvalidArgument,
             "--precision {} needs --device cuda (the CPU computes in fp32)", args.precision);
  RW_EXPECTS(args.device == "cpu" || !args.profile, InvalidArgument,
             "--profile times the CPU executor's ops; on the GPU, redwood_gpu_bench --profile does");

  if (!args.save_dir.empty()) check_save_dir(args.save_dir);
  RW_EXPECTS(args.cuda.empty() || args.device == "cuda", InvalidArgument,
             "--cuda sets options of the CUDA backend; this run is on the {} (add --device cuda)", args.device);
  std::map<std::string, std::string> cuda_options = cuda_options_of(args);

  const auto load_start = std::chrono::steady_clock::now();
  // The GPU's context is made while the model is read: the two overlap.
  const std::jthread warming = warm_up_device(args.device, 0);
  std::shared_ptr<Graph> graph = load_onnx(args.model, OnnxImportOptions{.cache = true});
  const std::chrono::duration<double, std::milli> import_ms = std::chrono::steady_clock::now() - load_start;
  std::unique_ptr<Executor> executor;
  std::unique_ptr<ModelRunner> gpu;  // the "cuda" runner, as the infer stage gets it for `device: cuda`
  if (args.device == "cpu") {
    executor = std::make_unique<Executor>(graph);
  } else {
    gpu = make_gpu_runner(graph, args, std::move(cuda_options));
  }
  const std::chrono::duration<double, std::milli> load_ms = std::chrono::steady_clock::now() - load_start;
  fmt::print("model: {} (opset {}, {} nodes), loaded in {:.1f} ms{}\n", args.model, graph->opset,
             graph->nodes.size(), load_ms.count(), gpu ? fmt::format(" on {}", gpu->description()) : "");

  ImageTensorOptions image_options;
  image_options.rgb = !args.bgr;
  if (!args.size.empty()) {
    const Shape wh = parse_shape(args.size, "--size");
    RW_EXPECTS(wh.size() == 2 && wh[0] > 0 && wh[1] > 0, InvalidArgument, "--size '{}': expected WIDTHxHEIGHT",
               args.size);
    image_options.width = static_cast<int>(wh[0]);
    image_options.height = static_cast<int>(wh[1]);
  }
  image_options.scale = args.scale;
  std::copy(args.mean.begin(), args.mean.end(), image_options.mean.begin());
  std::copy(args.std.begin(), args.std.end(), image_options.std.begin());
  image_options.layout = args.layout == "nchw"   ? ImageLayout::kNCHW
                         : args.layout == "nhwc" ? ImageLayout::kNHWC
                                                 : ImageLayout::kAuto;

  std::map<std::string, Tensor> feeds;
  std::vector<std::pair<std::string, std::string>> video_inputs;  // (input name, file)
  for (const auto& arg : args.inputs) {
    const auto [name, file] = split_assignment(arg, "--input");
    const ValueInfo& vi = find_input(*graph, name, "--input");
    RW_EXPECTS(!feeds.count(name), InvalidArgument, "input '{}' is given twice", name);
    if (std::filesystem::path(file).extension() == ".npy") {
      feeds[name] = read_npy(file);
    } else {
      feeds[name] = image_to_tensor(read_image_or_first_frame(file), vi, image_options);
      if (cv::imread(file, cv::IMREAD_UNCHANGED).empty()) video_inputs.emplace_back(name, file);
    }
  }
  std::uint32_t seed = 1;
  for (const auto& arg : args.randoms) {
    const auto [name, shape_text] = split_assignment(arg, "--random");
    const ValueInfo& vi = find_input(*graph, name, "--random");
    RW_EXPECTS(!feeds.count(name), InvalidArgument, "input '{}' is given twice", name);
    feeds[name] = random_input(vi, parse_shape(shape_text, "--random " + name), seed++);
  }
  for (const auto& vi : graph->inputs) {
    RW_EXPECTS(feeds.count(vi.name), InvalidArgument,
               "input '{}' ({}) is not given: use --input {}=FILE or --random {}=SHAPE", vi.name,
               vi.description(), vi.name, vi.name);
  }
  for (const auto& [name, t] : feeds) fmt::print("input: {} {}\n", name, t.description());

  if (executor) executor->set_profiling(args.profile);
  std::vector<Tensor> outputs;
  std::vector<double> times;
  // The first run of any kind ends the time to first inference: on a GPU it plans (and tunes,
  // unless the plan cache has the picks) for the inputs' shapes.
  bool first = true;
  auto run_model = [&] {
    const auto start = std::chrono::steady_clock::now();
    outputs = executor ? executor->run(feeds) : gpu->run(feeds);
    if (!first) return;
    first = false;
    const auto end = std::chrono::steady_clock::now();
    fmt::print("time to first inference: {:.1f} ms (import {:.1f} ms, runner {:.1f} ms, first run {:.1f} ms)\n",
               std::chrono::duration<double, std::milli>(end - load_start).count(), import_ms.count(),
               (load_ms - import_ms).count(), std::chrono::duration<double, std::milli>(end - start).count());
  };
  auto timed_run = [&] {
    const auto start = std::chrono::steady_clock::now();
    run_model();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  };
  if (args.frames > 0) {
    // Successive frames of the video input, one run each, a line per frame as results arrive.
    RW_EXPECTS(video_inputs.size() == 1, InvalidArgument,
               "--frames needs exactly one --input that is a video file (got {})", video_inputs.size());
    const auto& [name, file] = video_inputs.front();
    const ValueInfo& vi = find_input(*graph, name, "--input");
    cv::VideoCapture capture(file);
    RW_EXPECTS(capture.isOpened(), IoError, "{}: cannot open the video", file);
    cv::Mat frame;
    int done = 0;
    for (; done < args.frames && capture.read(frame) && !frame.empty(); ++done) {
      feeds[name] = image_to_tensor(frame, vi, image_options);
      timed_run();
      fmt::print("frame {:4d}: {:7.1f} ms", done, times.back());
      for (std::size_t i = 0; i < outputs.size(); ++i) fmt::print("  {}: {}", graph->outputs[i].name, summarize_tensor(outputs[i]));
      fmt::print("\n");
      std::fflush(stdout);
    }
    RW_EXPECTS(done > 0, IoError, "{}: the video has no readable frame", file);
    if (done < args.frames) fmt::print("{}: the video ended after {} frame(s)\n", file, done);
  } else {
    for (int i = 0; i < (args.repeat > 1 ? args.warmup : 0); ++i) run_model();
    for (int i = 0; i < args.repeat; ++i) timed_run();
  }

  for (std::size_t i = 0; i < outputs.size(); ++i) {
    fmt::print("output: {} {}\n", graph->outputs[i].name, summarize_tensor(outputs[i]));
  }
  fmt::print("latency: p50 {:.2f} ms, p99 {:.2f} ms over {} run(s) (threads: {})\n", percentile(times, 50),
             percentile(times, 99), times.size(),
             args.threads > 0 ? std::to_string(args.threads) : std::string("default"));
  if (args.profile) {
    std::map<std::string, double> per_op;
    for (const auto& t : executor->last_timings()) per_op[t.op_type] += t.milliseconds;
    std::vector<std::pair<std::string, double>> sorted(per_op.begin(), per_op.end());
    std::sort(sorted.begin(), sorted.end(), [](auto& a, auto& b) { return a.second > b.second; });
    for (const auto& [op, ms] : sorted) fmt::print("  {:<20} {:9.2f} ms\n", op, ms);
  }
  if (!args.save_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(args.save_dir, ec);
    RW_EXPECTS(!ec, IoError, "--save {}: cannot create the folder: {}", args.save_dir, ec.message());
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const auto file = std::filesystem::path(args.save_dir) / (file_safe(graph->outputs[i].name) + ".npy");
      write_npy(file, outputs[i]);
      fmt::print("saved: {}\n", file.string());
    }
  }
  return 0;
}

}  // namespace

Command make_infer_command() {
  auto args = std::make_shared<InferArgs>();
  Command c;
  c.attach_fn = [args](CLI::App& app) {
    CLI::App* sub = app.add_subcommand("infer", "Run an ONNX model on given or random inputs; print outputs and latency");
    sub->add_option("model", args->model, "ONNX model file")->required();
    sub->add_option("--input", args->inputs,
                    "NAME=FILE: an image, a video (its first frame) or a .npy tensor");
    sub->add_option("--random", args->randoms, "NAME=SHAPE: uniform random values, e.g. x=1x3x640x640");
    sub->add_option("--repeat", args->repeat, "timed runs (after one warm-up run when > 1)")->default_val(1);
    sub->add_option("--threads", args->threads, "CPU threads (0: all cores)")
        ->default_val(0)
        ->check(CLI::Range(0, kMaxThreads));
    sub->add_option("--save", args->save_dir, "write each output as DIR/<output name>.npy");
    sub->add_option("--mean", args->mean, "per-channel mean subtracted from pictures (after --scale)")
        ->delimiter(',')->expected(3);
    sub->add_option("--std", args->std, "per-channel std dividing pictures (after --mean)")
        ->delimiter(',')->expected(3);
    sub->add_option("--scale", args->scale, "factor applied to 0..255 pixel values first")->default_val(1.0f / 255.0f);
    sub->add_option("--size", args->size, "WIDTHxHEIGHT for pictures fed to dynamic extents (default: as read)");
    sub->add_flag("--bgr", args->bgr, "feed pictures in BGR channel order (default RGB)");
    sub->add_option("--layout", args->layout, "picture layout: auto, nchw or nhwc")->default_val("auto");
    sub->add_flag("--profile", args->profile, "print time per op type of the last run");
    sub->add_option("--frames", args->frames,
                    "run on this many successive frames of the video --input, printing each")->default_val(0);
    sub->add_option("--device", args->device, "cpu, or cuda (GPU 0, Redwood's CUDA kernels)")->default_val("cpu");
    sub->add_option("--precision", args->precision, "on the GPU: fp32, tf32, fp16 or bf16")->default_val("fp32");
    sub->add_option("--cuda", args->cuda,
                    "NAME=on|off: a CUDA option (docs/cuda.md, Options: wgmma, tma, narrow_conv, pdl, ...)");
    return sub;
  };
  c.run = [args] { return run_infer(*args); };
  return c;
}

}  // namespace redwood::app
