// The preprocess stage's normalize_on on the CPU: `model` hands the infer stage the resized
// picture as 8-bit pixels, and the model's runner normalizes it into the float input, giving what
// `stage` (the floats made on the host) gives: the same model outputs in one pipeline running both
// ways side by side over streams of three sizes, and the same text found by the PP-OCRv4 detector
// on the captioned clip. The pixels, their mapping, and the mistakes that fail at load.

#include "pipelines/pipeline.hpp"
#include "pipelines/pipeline_text.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <mutex>

namespace redwood {
namespace {

using testing::load_error;
using testing::pipeline_text;
using testing::where;

std::mutex g_mutex;
int g_compared = 0;
std::vector<std::string> g_differences;

/// Compares, per frame, the two ways: "px" are pixels (u8 [1, H, W, 3]) and "fl" floats, with
/// the same mapping; the model's outputs "y_px" and "y_fl" agree to a float rounding.
class CompareNormalizeOn final : public Stage {
 public:
  explicit CompareNormalizeOn(StageArgs& a) : Stage(a.name) {
    consume_picture("px");
    consume("fl");
    consume("y_px");
    consume("y_fl");
  }

 private:
  void do_process(std::span<Frame* const> frames) override {
    for (Frame* f : frames) {
      std::vector<std::string> wrong;
      const Tensor& px = f->tensors.at("px");
      const Tensor& fl = f->tensors.at("fl");
      if (px.dtype() != DType::kU8 || px.rank() != 4 || px.dim(3) != 3 || fl.dim(2) != px.dim(1) || fl.dim(3) != px.dim(2)) {
        wrong.push_back(fmt::format("pixels {} for floats {}", px.description(), fl.description()));
      }
      const ImageTransform& a = f->transforms.at("px");
      const ImageTransform& b = f->transforms.at("fl");
      if (a.scale_x != b.scale_x || a.scale_y != b.scale_y || a.pad_x != b.pad_x || a.pad_y != b.pad_y) {
        wrong.push_back("the mappings differ");
      }
      const auto y_px = f->tensors.at("y_px").to_float_vector(), y_fl = f->tensors.at("y_fl").to_float_vector();
      if (y_px.size() != y_fl.size()) wrong.push_back("the outputs differ in size");
      for (std::size_t i = 0; i < y_px.size() && i < y_fl.size() && wrong.empty(); ++i) {
        if (std::abs(y_px[i] - y_fl[i]) > 2e-6f) wrong.push_back(fmt::format("output {}: {} and {}", i, y_px[i], y_fl[i]));
      }
      std::lock_guard lock(g_mutex);
      ++g_compared;
      for (auto& w : wrong) g_differences.push_back(fmt::format("{} frame {}: {}", f->stream_name, f->seq, w));
    }
  }
};
RW_REGISTER_STAGE("test_compare_normalize_on", CompareNormalizeOn);

// y = 2x over [N, 3, 24, 40].
std::filesystem::path doubling_model() {
  const auto dir = testing::temp_dir("normalize-on");
  testing::OnnxBuilder b(13);
  b.input("pic", onnx::TensorProto::FLOAT, {-1, 3, 24, 40}, {"N"});
  b.initializer("two", Tensor::from_vector<float>({1}, {2.f}));
  b.node("Mul", {"pic", "two"}, {"doubled"}, "mul");
  b.output("doubled", onnx::TensorProto::FLOAT, {-1, 3, 24, 40}, {"N"});
  b.save(dir / "double.onnx");
  return dir / "double.onnx";
}

std::string pipeline_both_ways(const std::filesystem::path& model) {
  return "version: 1\n"
         "sources:\n"
         "  - {name: a, type: synthetic, width: 64, height: 48, frames: 12}\n"
         "  - {name: b, type: synthetic, width: 32, height: 32, frames: 12}\n"
         "  - {name: c, type: synthetic, width: 40, height: 24, frames: 12}\n"
         "models:\n"
         "  double: {path: '" + model.string() + "'}\n"
         "stages:\n"
         "  - {name: px, type: preprocess, model: double, resize: letterbox, pad_value: 114, mean: [0.485, 0.456, 0.406], "
         "std: [0.229, 0.224, 0.225], normalize_on: model}\n"
         "  - {name: fl, type: preprocess, model: double, resize: letterbox, pad_value: 114, mean: [0.485, 0.456, 0.406], "
         "std: [0.229, 0.224, 0.225], normalize_on: stage}\n"
         "  - {name: twice_px, type: infer, model: double, input: px, outputs: {doubled: y_px}, max_batch: 3, timeout_ms: 20, "
         "batch_sizes: [2, 4]}\n"
         "  - {name: twice_fl, type: infer, model: double, input: fl, outputs: {doubled: y_fl}, max_batch: 3, timeout_ms: 20}\n"
         "  - {name: compare, type: test_compare_normalize_on}\n";
}

TEST(NormalizeOn, ModelGivesWhatStageGivesInOnePipeline) {
  Pipeline p(pipeline_text(pipeline_both_ways(doubling_model())));
  EXPECT_EQ(p.stages().at(0)->produces().at("px").description(), "[1, 24, 40, 3] u8 picture");
  EXPECT_EQ(p.stages().at(1)->produces().at("fl").description(), "[1, 3, 24, 40]");
  const auto stats = p.run();
  for (const auto& s : stats.streams) EXPECT_EQ(s.delivered, 12);
  EXPECT_EQ(g_compared, 36);
  EXPECT_TRUE(g_differences.empty()) << fmt::format("{}", fmt::join(g_differences, "\n"));
  EXPECT_LT(p.stages().at(2)->calls(), 36);  // the pixels were batched across streams
}

// auto: the pixels where the model runs on a GPU (device cuda, or auto with CUDA usable), else floats.
TEST(NormalizeOn, AutoGivesPixelsWhereTheModelRunsOnAGpu) {
  std::string yaml = pipeline_both_ways(doubling_model());
  yaml.replace(yaml.find("normalize_on: model"), 19, "normalize_on: auto");
  Pipeline on_cpu(pipeline_text(yaml));
  EXPECT_EQ(on_cpu.stages().at(0)->produces().at("px").description(), "[1, 3, 24, 40]");
  const auto& registry = device_runner_registry();
  const bool gpu = registry.count("cuda") && registry.at("cuda").unavailable().empty();
  Pipeline on_auto(pipeline_text(yaml, {"models.double.device=auto"}));
  EXPECT_EQ(on_auto.stages().at(0)->produces().at("px").description(), gpu ? "[1, 24, 40, 3] u8 picture" : "[1, 3, 24, 40]");
  EXPECT_EQ(on_auto.stages().at(2)->runner_device(), gpu ? "cuda" : "cpu");
}

// One synthetic frame; preprocess 'px' hands pixels for 'double' to the stages `then` (YAML
// lines), with `more_models` beside 'double'.
std::string pixels_then(const std::string& then, const std::string& more_models = "") {
  return "version: 1\n"
         "sources: [{name: a, type: synthetic, frames: 1}]\n"
         "models:\n"
         "  double: {path: '" + doubling_model().string() + "'}\n" + more_models +
         "stages:\n"
         "  - {name: px, type: preprocess, model: double, normalize_on: model}\n" + then;
}

TEST(NormalizeOn, MistakesFailAtLoadAtTheirPlace) {
  const std::string both = pipeline_both_ways(doubling_model());
  // Not a choice: at the key.
  std::string yaml = both;
  yaml.replace(yaml.find("normalize_on: model"), 19, "normalize_on: gpu");
  std::string e = load_error(yaml);
  EXPECT_NE(e.find(where(9, 155)), std::string::npos) << e;
  EXPECT_NE(e.find("normalize_on: 'gpu' is not one of auto, stage, model"), std::string::npos) << e;
  // Pixels for a model of another size: the infer stage refuses them at its input.
  const auto dir = testing::temp_dir("normalize-on-other");
  testing::OnnxBuilder b(13);
  b.input("pic", onnx::TensorProto::FLOAT, {-1, 3, 32, 40}, {"N"});
  b.node("Identity", {"pic"}, {"same"}, "id");
  b.output("same", onnx::TensorProto::FLOAT, {-1, 3, 32, 40}, {"N"});
  b.save(dir / "taller.onnx");
  e = load_error(pixels_then("  - {name: run, type: infer, model: taller, input: px}\n",
                             "  taller: {path: '" + (dir / "taller.onnx").string() + "'}\n"));
  EXPECT_NE(e.find(where(8, 52)), std::string::npos) << e;
  EXPECT_NE(e.find("tensor 'px' [1, 24, 40, 3] u8 picture cannot feed input 'pic' float[N, 3, 32, 40] of model 'taller': "
                   "the picture is 24 tall, the input 32 (NCHW)"),
            std::string::npos)
      << e;
  // Pixels read by a stage other than infer.
  yaml = pixels_then("  - {name: dec, type: db_text, input: px, transform: px}\n");
  e = load_error(yaml);
  EXPECT_NE(e.find(where(7, 5)), std::string::npos) << e;
  EXPECT_NE(e.find("stage 'dec': reads tensor 'px' [1, 24, 40, 3] u8 picture, pixels left for its model's runner to "
                   "normalize"),
            std::string::npos)
      << e;
  // A decoder reads only the mapping, which comes either way.
  yaml.replace(yaml.find("input: px"), 9, "input: y");
  yaml.replace(yaml.find("  - {name: dec"), 0, "  - {name: run, type: infer, model: double, input: px, outputs: {doubled: y}}\n");
  e = load_error(yaml);
  EXPECT_EQ(e.find("reads tensor"), std::string::npos) << e;
  EXPECT_NE(e.find("DB decoding reads a [N, 1, H, W] probability map"), std::string::npos) << e;  // y is [N, 3, ...]
}

// The PP-OCRv4 detector on frames of the captioned clip that show the first two captions: text
// found with the pixels normalized by the CPU runner is the text found from the stage's floats.
std::mutex g_found_mutex;
std::map<std::string, std::map<std::int64_t, std::vector<Detection>>> g_found;  // way -> seq -> text found

class KeepDetections final : public Stage {
 public:
  explicit KeepDetections(StageArgs& a) : Stage(a.name), way_(a.params.require<std::string>("way")) {}

 private:
  void do_process(std::span<Frame* const> frames) override {
    std::lock_guard lock(g_found_mutex);
    for (Frame* f : frames) g_found[way_][f->seq] = f->detections;
  }
  std::string way_;
};
RW_REGISTER_STAGE("test_keep_detections", KeepDetections);

TEST(NormalizeOn, TheDetectorFindsTheSameTextEitherWay) {
  const auto video = testing::assets_dir() / "video" / "vtest-captions.avi";
  const auto det = testing::assets_dir() / "models" / "ch_PP-OCRv4_det_infer.onnx";
  if (!std::filesystem::exists(video) || !std::filesystem::exists(det)) GTEST_SKIP() << "assets missing: run scripts/setup.sh";
  for (const std::string way : {"stage", "model"}) {
    Pipeline p(pipeline_text("version: 1\n"
                             "sources: [{name: captions, type: video, path: video/vtest-captions.avi, start_frame: 74}]\n"
                             "models: {det: {path: models/ch_PP-OCRv4_det_infer.onnx}}\n"
                             "stages:\n"
                             "  - {name: det_pre, type: preprocess, model: det, output: det_in, width: 416, height: 320, "
                             "multiple_of: 32, color: bgr, mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225], "
                             "normalize_on: " + way + "}\n"
                             "  - {name: det, type: infer, model: det, input: det_in, outputs: {sigmoid_0.tmp_0: det_prob}, "
                             "max_batch: 2}\n"
                             "  - {name: det_post, type: db_text, input: det_prob, transform: det_in, threshold: 0.3, "
                             "box_threshold: 0.6, unclip_ratio: 2.0}\n"
                             "  - {name: keep, type: test_keep_detections, way: " + way + "}\n"));
    RunOptions options;
    options.max_frames = 12;
    p.run(options);
  }
  const auto& from_floats = g_found["stage"];
  const auto& from_pixels = g_found["model"];
  ASSERT_EQ(from_floats.size(), 12u);
  ASSERT_EQ(from_pixels.size(), 12u);
  int texts = 0;
  for (const auto& [seq, want] : from_floats) {
    const auto& got = from_pixels.at(seq);
    ASSERT_EQ(got.size(), want.size()) << "frame " << seq;
    for (std::size_t i = 0; i < want.size(); ++i) {
      ++texts;
      EXPECT_NEAR(got[i].score, want[i].score, 1e-4) << "frame " << seq << " text " << i;
      ASSERT_EQ(got[i].quad.size(), want[i].quad.size());
      for (std::size_t k = 0; k < want[i].quad.size(); ++k) {
        EXPECT_NEAR(got[i].quad[k].x, want[i].quad[k].x, 1e-3) << "frame " << seq << " text " << i;
        EXPECT_NEAR(got[i].quad[k].y, want[i].quad[k].y, 1e-3) << "frame " << seq << " text " << i;
      }
    }
  }
  EXPECT_GE(texts, 12);  // a caption on every frame (the first, then the second from frame 80)
}

}  // namespace
}  // namespace redwood
