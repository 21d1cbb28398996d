// Real-model fidelity: the shipped models (PP-OCRv4 detection and recognition, the PP-OCR direction
// classifier, both BlazeFace detectors) and the model zoo of docs/models.md (six face models of npm
// faceplugin-face-recognition-js, M-LSD tiny) run on real video frames through Redwood's CPU
// executor, through the launcher (`redwood infer`) and through ONNX Runtime (scripts/ort_run.js,
// the npm onnxruntime-node build), and every output must agree:
//
//   frame ──preprocess──> input.npy ──> redwood::Executor ───────────> outputs ─┐
//                                  ├──> redwood infer --save ───────> *.npy ───┤
//                                  └──> node scripts/ort_run.js ────> *.npy ───┴─> max |Δ| ≤ 1e-4 × range(ORT)
//
// The tolerance is relative to the reference output's range, so it means the same for softmax
// probabilities and for raw box regressions. Both runtimes get the very same input tensor (written
// once as .npy), so video decoding or seeking can never explain a difference.
// Assets come from scripts/setup.sh; without them the cases skip and say so.

#include "runtime/executor.hpp"
#include "core/npy.hpp"
#include "core/onnx/onnx_import.hpp"
#include "stages/preprocess/image_tensor.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <ostream>
#include <functional>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace redwood {
namespace {

namespace fs = std::filesystem;

constexpr double kRelativeTolerance = 1e-4;

fs::path source_dir() {
#ifdef REDWOOD_SOURCE_DIR
  return REDWOOD_SOURCE_DIR;
#else
  return fs::current_path();
#endif
}

fs::path models_dir() { return testing::assets_dir() / "models"; }
fs::path video_dir() { return testing::assets_dir() / "video"; }
fs::path ort_package() {
  return testing::assets_dir() / "tools" / "ort" / "node_modules" / "onnxruntime-node";
}

/// Frame `index` of a video as 8-bit BGR (empty when it cannot be read).
cv::Mat read_frame(const fs::path& video, int index) {
  cv::VideoCapture capture(video.string());
  if (!capture.isOpened()) return {};
  capture.set(cv::CAP_PROP_POS_FRAMES, index);
  cv::Mat frame;
  if (!capture.read(frame)) return {};
  return frame;
}

/// The largest centred square of a picture.
cv::Mat centre_square(const cv::Mat& image) {
  const int side = std::min(image.rows, image.cols);
  return image(cv::Rect((image.cols - side) / 2, (image.rows - side) / 2, side, side)).clone();
}

/// Resizes each picture to height × width and stacks them as one batch through
/// image_to_tensor, the same conversion Redwood's preprocess stage uses (channels 1: grey).
Tensor pictures_to_batch(const std::vector<cv::Mat>& pictures, int height, int width,
                         ImageLayout layout, const ImageTensorOptions& base, int channels = 3) {
  ImageTensorOptions options = base;
  options.layout = layout;
  ValueInfo info;
  info.name = "picture";
  info.dtype = DType::kF32;
  info.has_shape = true;
  const bool nchw = layout == ImageLayout::kNCHW;
  info.dims = nchw ? std::vector<Dim>{{1, ""}, {channels, ""}, {height, ""}, {width, ""}}
                   : std::vector<Dim>{{1, ""}, {height, ""}, {width, ""}, {channels, ""}};
  const auto n = static_cast<std::int64_t>(pictures.size());
  Tensor batch = Tensor::empty(DType::kF32, nchw ? Shape{n, channels, height, width} : Shape{n, height, width, channels});
  const std::size_t per_picture = static_cast<std::size_t>(channels) * height * width;
  for (std::size_t i = 0; i < pictures.size(); ++i) {
    cv::Mat resized;
    cv::resize(pictures[i], resized, cv::Size(width, height), 0, 0, cv::INTER_LINEAR);
    const Tensor one = image_to_tensor(resized, info, options);
    EXPECT_EQ(static_cast<std::size_t>(one.numel()), per_picture);
    std::memcpy(batch.data<float>() + i * per_picture, one.contiguous().data<float>(),
                per_picture * sizeof(float));
  }
  return batch;
}

// PaddleOCR feeds its models OpenCV's BGR order as is (no channel swap).
ImageTensorOptions ppocr_det_options() {
  ImageTensorOptions o;
  o.rgb = false;
  o.scale = 1.0f / 255.0f;
  o.mean = {0.485f, 0.456f, 0.406f};
  o.std = {0.229f, 0.224f, 0.225f};
  return o;
}
ImageTensorOptions ppocr_rec_options() {  // rec and cls: (x/255 - 0.5) / 0.5
  ImageTensorOptions o;
  o.rgb = false;
  o.scale = 1.0f / 255.0f;
  o.mean = {0.5f, 0.5f, 0.5f};
  o.std = {0.5f, 0.5f, 0.5f};
  return o;
}
ImageTensorOptions blazeface_options() {  // RGB, x/127.5 - 1
  ImageTensorOptions o;
  o.rgb = true;
  o.scale = 1.0f / 127.5f;
  o.mean = {1.f, 1.f, 1.f};
  o.std = {1.f, 1.f, 1.f};
  return o;
}

/// A picture as M-LSD takes it: RGB resized to side × side, 0..255, and an alpha plane of 1, NHWC.
Tensor rgba_with_alpha_one(const cv::Mat& bgr, int side) {
  cv::Mat resized;
  cv::resize(bgr, resized, cv::Size(side, side), 0, 0, cv::INTER_LINEAR);
  Tensor t = Tensor::empty(DType::kF32, Shape{1, side, side, 4});
  float* out = t.data<float>();
  for (int y = 0; y < side; ++y) {
    const auto* row = resized.ptr<cv::Vec3b>(y);
    for (int x = 0; x < side; ++x, out += 4) {
      out[0] = row[x][2];
      out[1] = row[x][1];
      out[2] = row[x][0];
      out[3] = 1.f;
    }
  }
  return t;
}

// The zoo's face models, as npm faceplugin-face-recognition-js feeds them: RGB planes.
ImageTensorOptions plus_minus_one_options() {  // UltraFace, MobileFaceNet: (x - 127) / 128
  ImageTensorOptions o;
  o.scale = 1.0f / 128.0f;
  o.mean = {127.f / 128.f, 127.f / 128.f, 127.f / 128.f};
  return o;
}
ImageTensorOptions imagenet_options() {  // head pose: ImageNet's mean and std
  ImageTensorOptions o;
  o.mean = {0.485f, 0.456f, 0.406f};
  o.std = {0.229f, 0.224f, 0.225f};
  return o;
}
ImageTensorOptions scaled_options(float scale) {  // expression x/255, landmarks x/256, liveness x
  ImageTensorOptions o;
  o.scale = scale;
  return o;
}

// Megamind.avi's frame 60 (720×528): the woman's face, as a square and with the margins the
// package's crops add around a detected face.
const cv::Rect kFace{195, 175, 180, 180};
const cv::Rect kFaceWide{177, 157, 216, 216};     // the box × 1.2 (pose, expression)
const cv::Rect kFaceContext{42, 22, 486, 486};    // the box × 2.7 (liveness)

struct FidelityCase {
  std::string name;   // the ctest case name
  std::string model;  // file under assets/models
  std::string input;  // the model's input name
  std::string video;  // file under assets/video
  int frame;
  /// Makes the input tensor from the frame.
  std::function<Tensor(const cv::Mat&)> make_input;
};

// gtest names a failing case by this instead of dumping the struct's bytes.
void PrintTo(const FidelityCase& c, std::ostream* os) { *os << c.name; }

std::vector<FidelityCase> fidelity_cases() {
  return {
      {"PpOcrV4Det", "ch_PP-OCRv4_det_infer.onnx", "x", "vtest.avi", 100,
       [](const cv::Mat& frame) {
         // 768×576 → 416×320: small for CI, both sides multiples of 32 as DB needs.
         return pictures_to_batch({frame}, 320, 416, ImageLayout::kNCHW, ppocr_det_options());
       }},
      {"PpOcrV4Rec", "ch_PP-OCRv4_rec_infer.onnx", "x", "vtest.avi", 100,
       [](const cv::Mat& frame) {
         // Two strips of the street scene, crop-resized to the recognizer's 48×320.
         const std::vector<cv::Mat> strips = {frame(cv::Rect(0, 40, 480, 72)),
                                              frame(cv::Rect(200, 300, 560, 84))};
         return pictures_to_batch(strips, 48, 320, ImageLayout::kNCHW, ppocr_rec_options());
       }},
      {"PpOcrMobileCls", "ch_ppocr_mobile_v2.0_cls_infer.onnx", "x", "vtest.avi", 100,
       [](const cv::Mat& frame) {
         return pictures_to_batch({frame(cv::Rect(100, 200, 384, 96))}, 48, 192,
                                  ImageLayout::kNCHW, ppocr_rec_options());
       }},
      {"BlazeFaceFront128", "face_detection_front_128x128_barracuda.onnx", "input:0",
       "Megamind.avi", 60,
       [](const cv::Mat& frame) {
         return pictures_to_batch({centre_square(frame)}, 128, 128, ImageLayout::kNHWC,
                                  blazeface_options());
       }},
      {"BlazeFaceBack256", "face_detection_back_256x256_barracuda.onnx", "input:0",
       "Megamind.avi", 120,
       [](const cv::Mat& frame) {
         return pictures_to_batch({centre_square(frame)}, 256, 256, ImageLayout::kNHWC,
                                  blazeface_options());
       }},
  };
}

// The model zoo (docs/models.md): models users bring, from npm packages, each on a real frame
// sized and normalized as its package does (the face models on fixed crops around one face).
std::vector<FidelityCase> zoo_cases() {
  return {
      {"UltraFaceRfb320", "zoo/fr_detect.onnx", "input", "Megamind.avi", 120,
       [](const cv::Mat& frame) {
         return pictures_to_batch({frame}, 240, 320, ImageLayout::kNCHW, plus_minus_one_options());
       }},
      {"MobileFaceNet", "zoo/fr_feature.onnx", "input", "Megamind.avi", 60,
       [](const cv::Mat& frame) {
         return pictures_to_batch({frame(kFace)}, 112, 112, ImageLayout::kNCHW, plus_minus_one_options());
       }},
      {"FaceLandmark68", "zoo/fr_landmark.onnx", "input", "Megamind.avi", 60,
       [](const cv::Mat& frame) {
         return pictures_to_batch({frame(kFace)}, 64, 64, ImageLayout::kNCHW, scaled_options(1.0f / 256.0f), 1);
       }},
      {"HeadPoseShuffleNetV2", "zoo/fr_pose.onnx", "input", "Megamind.avi", 60,
       [](const cv::Mat& frame) {
         return pictures_to_batch({frame(kFaceWide)}, 224, 224, ImageLayout::kNCHW, imagenet_options());
       }},
      {"ExpressionDenseNet", "zoo/fr_expression.onnx", "input", "Megamind.avi", 60,
       [](const cv::Mat& frame) {
         return pictures_to_batch({frame(kFaceWide)}, 224, 224, ImageLayout::kNCHW, scaled_options(1.0f / 255.0f));
       }},
      {"LivenessMiniFasNet", "zoo/fr_liveness.onnx", "input", "Megamind.avi", 60,
       [](const cv::Mat& frame) {
         return pictures_to_batch({frame(kFaceContext)}, 128, 128, ImageLayout::kNCHW, scaled_options(1.0f));
       }},
      {"MlsdTiny320", "zoo/mlsd_320x320_tiny.onnx", "input_image_with_alpha:0", "vtest.avi", 100,
       [](const cv::Mat& frame) { return rgba_with_alpha_one(frame, 320); }},
  };
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Single-quotes a word for /bin/sh.
std::string shell_quote(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// A scratch folder removed when the test ends (kept, and named, when REDWOOD_FIDELITY_KEEP is
/// set, to look at the input and ONNX Runtime's outputs after a failure).
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag)
      : path_(fs::temp_directory_path() /
              ("redwood_fidelity_" + tag + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    if (std::getenv("REDWOOD_FIDELITY_KEEP") != nullptr) {
      std::printf("[fidelity] kept %s\n", path_.c_str());
      return;
    }
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

/// Expects `outputs` (the graph's outputs `names`, in order) to match ONNX Runtime's (`report`,
/// ort_run.js' JSON line) within kRelativeTolerance of each output's range; prints each output's
/// worst difference and names the worst element of one that fails.
void expect_matches_ort(const std::vector<std::string>& names, const std::vector<Tensor>& outputs,
                        const nlohmann::json& report) {
  ASSERT_EQ(outputs.size(), names.size());
  ASSERT_EQ(outputs.size(), report["outputs"].size()) << "output count differs from ONNX Runtime's";
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const std::string& name = names[i];
    SCOPED_TRACE("output '" + name + "'");
    const nlohmann::json* entry = nullptr;
    for (const auto& e : report["outputs"]) {
      if (e["name"] == name) entry = &e;
    }
    ASSERT_NE(entry, nullptr) << "ONNX Runtime has no output named '" << name << "'";
    const Tensor expected = read_npy((*entry)["file"].get<std::string>());
    const Tensor& actual = outputs[i];
    ASSERT_EQ(actual.shape(), expected.shape())
        << "redwood " << actual.description() << " vs onnxruntime " << expected.description();

    const std::vector<float> a = actual.to_float_vector();
    const std::vector<float> e = expected.to_float_vector();
    const auto [lo, hi] = std::minmax_element(e.begin(), e.end());
    const double range = e.empty() ? 0.0 : double(*hi) - double(*lo);
    double max_diff = 0;
    std::size_t worst = 0, non_finite = 0;
    for (std::size_t k = 0; k < a.size(); ++k) {
      if (!std::isfinite(a[k])) {
        ++non_finite;
        continue;
      }
      const double d = std::fabs(double(a[k]) - double(e[k]));
      if (d > max_diff) {
        max_diff = d;
        worst = k;
      }
    }
    const double tolerance = kRelativeTolerance * range;
    std::printf("[fidelity]   %-18s %-20s range %.6g  max|diff| %.3g  (%.3g of range)  tol %.3g\n",
                name.c_str(), shape_str(actual.shape()).c_str(), range, max_diff,
                range > 0 ? max_diff / range : 0.0, tolerance);
    EXPECT_EQ(non_finite, 0u) << "Redwood produced NaN or Inf";
    EXPECT_LE(max_diff, tolerance) << "worst element " << worst << ": redwood " << a[worst]
                                   << ", onnxruntime " << e[worst];
  }
}

class FidelityTest : public ::testing::TestWithParam<FidelityCase> {};

TEST_P(FidelityTest, MatchesOnnxRuntime) {
  const FidelityCase& c = GetParam();
  const fs::path model = models_dir() / c.model;
  const fs::path video = video_dir() / c.video;
  const fs::path runner = source_dir() / "scripts" / "ort_run.js";
  if (!fs::exists(model)) GTEST_SKIP() << "asset " << model << " missing: run scripts/setup.sh";
  if (!fs::exists(video)) GTEST_SKIP() << "asset " << video << " missing: run scripts/setup.sh";
  if (!fs::exists(ort_package() / "package.json")) {
    GTEST_SKIP() << "asset " << ort_package() << " (ONNX Runtime) missing: run scripts/setup.sh";
  }
  if (std::system("command -v node >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "node not found: run scripts/setup.sh";
  }
  ASSERT_TRUE(fs::exists(runner)) << runner;

  const cv::Mat frame = read_frame(video, c.frame);
  ASSERT_FALSE(frame.empty()) << "cannot read frame " << c.frame << " of " << video;
  const Tensor input = c.make_input(frame);

  ScratchDir scratch(c.name);
  const fs::path input_file = scratch.path() / "input.npy";
  write_npy(input_file, input);

  // ONNX Runtime, in its own process.
  const fs::path ort_out = scratch.path() / "ort";
  const fs::path ort_json = scratch.path() / "ort.json";
  const fs::path ort_err = scratch.path() / "ort.err";
  const std::string command = "node " + shell_quote(runner.string()) + " " +
                              shell_quote(model.string()) + " --input " +
                              shell_quote(c.input + "=" + input_file.string()) + " --out " +
                              shell_quote(ort_out.string()) + " > " +
                              shell_quote(ort_json.string()) + " 2> " + shell_quote(ort_err.string());
  const int status = std::system(command.c_str());
  ASSERT_EQ(status, 0) << "ONNX Runtime failed: " << command << "\n" << read_text(ort_err);
  const nlohmann::json report = nlohmann::json::parse(read_text(ort_json));

  // Redwood, twice: the reference kernels on the graph as imported (the ground truth), and the
  // default executor (optimizer passes, oneDNN first).
  const std::shared_ptr<Graph> graph = load_onnx(model);
  std::vector<std::string> names;
  for (const ValueInfo& output : graph->outputs) names.push_back(output.name);
  ExecutorOptions reference;
  reference.optimize = false;
  reference.reference_only = true;
  for (const auto& [label, options] : {std::pair<const char*, ExecutorOptions>{"reference", reference},
                                       std::pair<const char*, ExecutorOptions>{"default", ExecutorOptions{}}}) {
    SCOPED_TRACE(std::string("executor: ") + label);
    Executor executor(graph, options);
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<Tensor> outputs = executor.run({{c.input, input}});
    const double redwood_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[fidelity] %s (%s executor): input %s, redwood %.1f ms (first run), onnxruntime %.1f ms (p50)\n",
                c.name.c_str(), label, input.description().c_str(), redwood_ms,
                report["latency_ms"]["p50"].get<double>());
    expect_matches_ort(names, outputs, report);
  }

  // The launcher as a user runs it, on the same .npy: `redwood infer MODEL --input NAME=FILE
  // --save DIR` prints one "saved: FILE" line per output, in the graph's output order.
  SCOPED_TRACE("redwood infer");
  const fs::path saved = scratch.path() / "redwood";
  const testing::LauncherResult infer = testing::run_launcher(
      "infer " + shell_quote(model.string()) + " --input " + shell_quote(c.input + "=" + input_file.string()) +
      " --save " + shell_quote(saved.string()));
  ASSERT_EQ(infer.exit_code, 0) << infer.output;
  std::vector<Tensor> launcher_outputs;
  std::istringstream lines(infer.output);
  const std::string prefix = "saved: ";
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) == 0) launcher_outputs.push_back(read_npy(line.substr(prefix.size())));
  }
  std::printf("[fidelity] %s (redwood infer): %zu of %zu outputs saved\n", c.name.c_str(), launcher_outputs.size(),
              names.size());
  expect_matches_ort(names, launcher_outputs, report);
}

std::string case_name(const ::testing::TestParamInfo<FidelityCase>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(RealModels, FidelityTest, ::testing::ValuesIn(fidelity_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(ModelZoo, FidelityTest, ::testing::ValuesIn(zoo_cases()), case_name);

}  // namespace
}  // namespace redwood
