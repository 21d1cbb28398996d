// A secondary classifier on the crops of a detector's detections, with real models: BlazeFace
// (configs/faces.yaml's stages) finds the face in Megamind.avi, the crops stage cuts it as
// faceplugin-face-recognition-js feeds its expression model (the box plus 10% on each side,
// 224 x 224, RGB, x / 255), the zoo's fr_expression.onnx runs on the crops and the classify stage
// names the expression (configs/labels/expression.txt). A second source of synthetic frames (a
// gradient, no face) shows frames without a face going through: crops of 0 rows, no output
// from the infer stage, nothing to classify. And the expression of one crop agrees with ONNX
// Runtime run on the same crop.

#include "core/npy.hpp"
#include "pipelines/pipeline.hpp"
#include "pipelines/pipeline_text.hpp"
#include "stages/postprocess/classify.hpp"
#include "stages/postprocess/labels.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <set>

namespace redwood {
namespace {

struct Seen {
  std::string stream;
  std::int64_t seq = 0;
  std::vector<Detection> detections;
  std::int64_t crop_rows = -1;
  Tensor first_crop;    // row 0 of the crops, [1, 3, 224, 224]
  Tensor first_logits;  // row 0 of the model's output, [1, 7]
};
std::mutex g_mutex;
std::vector<Seen> g_seen;

/// Keeps what each frame carries after the classify stage.
class ExpressionCapture final : public Stage {
 public:
  explicit ExpressionCapture(StageArgs& a) : Stage(a.name) {}

 private:
  void do_process(std::span<Frame* const> frames) override {
    for (Frame* f : frames) {
      Seen s{f->stream_name, f->seq, f->detections, -1, {}, {}};
      const Tensor& crops = f->tensors.at("face_crops");
      s.crop_rows = crops.dim(0);
      if (s.crop_rows > 0) {
        s.first_crop = crops.rows(0, 1).contiguous().clone();
        s.first_logits = f->tensors.at("expr_logits").rows(0, 1).contiguous().clone();
      }
      std::lock_guard lock(g_mutex);
      g_seen.push_back(std::move(s));
    }
  }
};
RW_REGISTER_STAGE("test_expression_capture", ExpressionCapture);

std::filesystem::path labels_path() {
  return std::filesystem::path(REDWOOD_SOURCE_DIR) / "configs" / "labels" / "expression.txt";
}

std::string config() {
  return fmt::format(R"(version: 1
name: expressions
sources:
  - name: megamind
    type: video
    path: video/Megamind.avi
    start_frame: 20
  - name: blank
    type: synthetic
    width: 320
    height: 240
    frames: 3
models:
  face:
    path: models/face_detection_front_128x128_barracuda.onnx
  expression:
    path: models/zoo/fr_expression.onnx
stages:
  - name: face_pre
    type: preprocess
    model: face
    output: face_in
    resize: letterbox
    color: rgb
    scale: 0.00784314
    mean: [1, 1, 1]
    std: [1, 1, 1]
  - name: face
    type: infer
    model: face
    input: face_in
    outputs: {{"Identity:0": s16, "Identity_1:0": s8, "Identity_2:0": b16, "Identity_3:0": b8}}
  - name: face_post
    type: blazeface
    scores: [s16, s8]
    boxes: [b16, b8]
    transform: face_in
    input_size: 128
    score_threshold: 0.75
    iou_threshold: 0.3
  - name: face_crops
    type: crops
    model: expression
    kinds: [face]
    padding: 0.1
    color: rgb
    scale: 0.00392157
  - name: expr
    type: infer
    model: expression
    input: face_crops
    outputs: {{output: expr_logits}}
  - name: expression
    type: classify
    input: expr_logits
    crops: face_crops
    labels: {}
  - name: capture
    type: test_expression_capture
)",
                     labels_path().string());
}

bool have_assets() {
  return std::filesystem::exists(testing::assets_dir() / "video" / "Megamind.avi") &&
         std::filesystem::exists(testing::assets_dir() / "models" / "zoo" / "fr_expression.onnx") &&
         std::filesystem::exists(testing::assets_dir() / "models" / "face_detection_front_128x128_barracuda.onnx");
}

// One run for both tests (the expression model takes a while on the CPU).
const std::vector<Seen>& run_once() {
  static const bool ran = [] {
    Pipeline pipeline(testing::pipeline_text(config()));
    RunOptions options;
    options.max_frames = 4;
    const auto stats = pipeline.run(options);
    EXPECT_EQ(stats.streams.at(0).delivered, 4);
    EXPECT_EQ(stats.streams.at(1).delivered, 3);
    std::sort(g_seen.begin(), g_seen.end(),
              [](const Seen& a, const Seen& b) { return std::tie(a.stream, a.seq) < std::tie(b.stream, b.seq); });
    return true;
  }();
  (void)ran;
  return g_seen;
}

TEST(SecondaryClassifier, EveryFaceGetsOneExpression) {
  if (!have_assets()) GTEST_SKIP() << "assets missing: run scripts/fetch_assets.sh";
  const auto labels = read_labels(labels_path());
  ASSERT_EQ(labels.size(), 7u);
  const std::set<std::string> known(labels.begin(), labels.end());
  const auto& seen = run_once();
  ASSERT_EQ(seen.size(), 7u);
  int faces = 0, blank = 0;
  for (const Seen& s : seen) {
    std::int64_t face_count = 0;
    for (const Detection& d : s.detections) {
      if (d.kind != "face") continue;
      ++face_count;
      ++faces;
      ASSERT_EQ(d.classes.size(), 1u) << s.stream << " frame " << s.seq;
      const Classification& c = d.classes[0];
      EXPECT_EQ(c.attribute, "expression");
      EXPECT_TRUE(known.count(c.label)) << c.label;
      EXPECT_EQ(c.label, labels.at(static_cast<std::size_t>(c.class_id)));
      EXPECT_GT(c.score, 0.f);
      EXPECT_LE(c.score, 1.f);
      std::printf("%s frame %lld: face at (%.0f, %.0f) %.0fx%.0f: %s %.3f\n", s.stream.c_str(), static_cast<long long>(s.seq),
                  d.box.x, d.box.y, d.box.width, d.box.height, c.label.c_str(), c.score);
    }
    EXPECT_EQ(s.crop_rows, face_count) << s.stream << " frame " << s.seq;  // the box of every face is > 16 px
    if (s.stream == "blank") {
      EXPECT_EQ(face_count, 0) << "a face in the synthetic gradient";
      EXPECT_EQ(s.crop_rows, 0);
      ++blank;
    }
  }
  EXPECT_GE(faces, 4);  // the woman's face in each of Megamind's frames 20-23
  EXPECT_EQ(blank, 3);
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The model's logits on one face crop against ONNX Runtime's on the very same crop (the tensor
// the infer stage consumed, saved as .npy): within 1e-4 of the logits' range, and the same
// expression with the same score.
TEST(SecondaryClassifier, ExpressionAgreesWithOnnxRuntime) {
  if (!have_assets()) GTEST_SKIP() << "assets missing: run scripts/fetch_assets.sh";
  const auto ort = testing::assets_dir() / "tools" / "ort" / "node_modules" / "onnxruntime-node" / "package.json";
  if (!std::filesystem::exists(ort)) GTEST_SKIP() << ort << " (ONNX Runtime) missing: run scripts/setup.sh";
  if (std::system("command -v node >/dev/null 2>&1") != 0) GTEST_SKIP() << "node not found: run scripts/setup.sh";
  const auto& seen = run_once();
  const auto it = std::find_if(seen.begin(), seen.end(), [](const Seen& s) { return s.crop_rows > 0; });
  ASSERT_NE(it, seen.end()) << "no face: nothing to compare";
  const auto dir = testing::temp_dir("expression-ort");
  write_npy(dir / "crop.npy", it->first_crop);
  const auto runner = std::filesystem::path(REDWOOD_SOURCE_DIR) / "scripts" / "ort_run.js";
  const auto model = testing::assets_dir() / "models" / "zoo" / "fr_expression.onnx";
  const std::string command = "node " + shell_quote(runner.string()) + " " + shell_quote(model.string()) + " --input " +
                              shell_quote("input=" + (dir / "crop.npy").string()) + " --out " + shell_quote(dir.string()) +
                              " > /dev/null 2> " + shell_quote((dir / "ort.err").string());
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::vector<float> theirs = read_npy(dir / "output.npy").to_float_vector();
  std::vector<float> mine = it->first_logits.to_float_vector();
  ASSERT_EQ(theirs.size(), 7u);
  ASSERT_EQ(mine.size(), 7u);
  const auto [lo, hi] = std::minmax_element(theirs.begin(), theirs.end());
  const float range = *hi - *lo;
  float worst = 0.f;
  for (std::size_t i = 0; i < 7; ++i) worst = std::max(worst, std::abs(mine[i] - theirs[i]));
  EXPECT_LE(worst, 1e-4f * range) << "logits range " << range;
  softmax_in_place(theirs);
  const auto best = top_classes(theirs, 1, 0.f).at(0);
  const Detection* face = nullptr;
  for (const Detection& d : it->detections) {
    if (d.kind == "face" && face == nullptr) face = &d;
  }
  ASSERT_NE(face, nullptr);
  const Classification& c = face->classes.at(0);
  EXPECT_EQ(c.class_id, best.first);
  EXPECT_NEAR(c.score, best.second, 1e-5);
  std::printf("expression of %s frame %lld: Redwood %s %.6f, ONNX Runtime %s %.6f; logits max |diff| %.3g (range %.3g)\n",
              it->stream.c_str(), static_cast<long long>(it->seq), c.label.c_str(), c.score,
              label_of(read_labels(labels_path()), best.first).c_str(), best.second, worst, range);
  ::testing::Test::RecordProperty("logits_max_abs_diff", fmt::format("{:.3g}", worst));
}

}  // namespace
}  // namespace redwood
