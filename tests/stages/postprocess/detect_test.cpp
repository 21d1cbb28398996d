// The detect stage on hand-made tensors of each format, with known survivors and their picture
// boxes through the preprocess mapping; its keys and tensor checks, whose errors name the place
// in the file; and the prior (anchor) layout against UltraFace RFB-320's own priors.

#include "stages/postprocess/detect.hpp"

#include "stages/stage.hpp"
#include "support/onnx_builder.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>

namespace redwood {
namespace {

namespace fs = std::filesystem;

TensorSpec spec(std::vector<std::int64_t> dims, bool maps_picture = false) {
  TensorSpec s;
  s.dims = std::move(dims);
  s.maps_picture = maps_picture;
  return s;
}

class DetectStageTest : public ::testing::Test {
 protected:
  DetectStageTest() : dir_(testing::temp_dir("detect")) {
    write("coco3.txt", "person\nbicycle\ncar\n");
    write("face.txt", "background\nface\n");
  }

  void write(const std::string& name, const std::string& text) const { std::ofstream(dir_ / name) << text; }

  /// The stage built from `yaml` (a stage's map, as if at dir/test.yaml) and checked against
  /// `available` (the transform "det_in", a 640 x 640 input, is added).
  std::unique_ptr<Stage> make(const std::string& yaml, TensorSpecs available) const {
    auto origin = std::make_shared<ConfigOrigin>();
    origin->file = dir_ / "test.yaml";
    Params p(YAML::Load(yaml), origin, "stage 'det'");
    p.get<std::string>("name", "");
    p.get<std::string>("type", "");
    ModelTable models;
    StageArgs args{"det", p, models};
    auto stage = stage_registry().at("detect")(args);
    p.finish();
    available.emplace("det_in", spec({1, 3, 640, 640}, true));
    stage->check(available);
    return stage;
  }

  /// The ConfigError message of make() ("" when none).
  std::string error(const std::string& yaml, const TensorSpecs& available) const {
    try {
      make(yaml, available);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  }

  std::string where(int line, int column) const {
    return (dir_ / "test.yaml").string() + ":" + std::to_string(line) + ":" + std::to_string(column) + ":";
  }

  fs::path dir_;
};

/// A frame of a width x height picture, with the transform `tf` under "det_in".
Frame frame_of(int width, int height, ImageTransform tf, std::map<std::string, Tensor> tensors) {
  Frame f;
  f.image.width = width;
  f.image.height = height;
  f.image.channels = 3;
  f.transforms["det_in"] = tf;
  f.tensors.insert(tensors.begin(), tensors.end());
  return f;
}

std::vector<Detection> run(Stage& stage, Frame& f) {
  Frame* frames[] = {&f};
  stage.process(frames);
  return f.detections;
}

void expect_box(const RectF& got, RectF want) {
  EXPECT_NEAR(got.x, want.x, 1e-3);
  EXPECT_NEAR(got.y, want.y, 1e-3);
  EXPECT_NEAR(got.width, want.width, 1e-3);
  EXPECT_NEAR(got.height, want.height, 1e-3);
}

// A 1280 x 720 picture letterboxed into 640 x 640: scale 0.5, 140 rows of padding above.
const ImageTransform kLetterbox{0.5f, 0.5f, 0.f, 140.f, 640, 640};

// Five yolo_v8 boxes (cx, cy, w, h in input pixels; scores of person, bicycle, car):
//  0 person 0.9; 1 person 0.8 over 0 (suppressed); 2 car 0.7 over 0 (another class: kept);
//  3 bicycle 0.6 past the left edge (clipped); 4 person 0.95 wholly in the padding (dropped).
const std::vector<std::vector<float>> kYoloBoxes = {
    {320, 320, 100, 50, 0.9f, 0.1f, 0.0f},
    {325, 322, 100, 50, 0.8f, 0.0f, 0.0f},
    {330, 320, 100, 50, 0.0f, 0.0f, 0.7f},
    {10, 320, 40, 20, 0.1f, 0.6f, 0.1f},
    {300, 50, 20, 20, 0.95f, 0.0f, 0.0f},
};

Tensor yolo_v8_tensor(bool channels_first) {
  const std::size_t boxes = kYoloBoxes.size(), attributes = kYoloBoxes[0].size();
  std::vector<float> v(boxes * attributes);
  for (std::size_t b = 0; b < boxes; ++b) {
    for (std::size_t a = 0; a < attributes; ++a) v[channels_first ? a * boxes + b : b * attributes + a] = kYoloBoxes[b][a];
  }
  const auto n = static_cast<std::int64_t>(boxes), c = static_cast<std::int64_t>(attributes);
  return Tensor::from_vector(channels_first ? Shape{1, c, n} : Shape{1, n, c}, v);
}

constexpr const char* kYoloV8 =
    "name: det\n"
    "type: detect\n"
    "format: yolo_v8\n"
    "input: out\n"
    "transform: det_in\n"
    "labels: coco3.txt\n";

TEST_F(DetectStageTest, YoloV8ThroughALetterbox) {
  for (const bool channels_first : {true, false}) {
    SCOPED_TRACE(channels_first ? "[1, 4 + C, boxes]" : "[1, boxes, 4 + C]");
    const Tensor t = yolo_v8_tensor(channels_first);
    auto stage = make(kYoloV8, {{"out", spec(t.shape())}});
    Frame f = frame_of(1280, 720, kLetterbox, {{"out", t}});
    const auto d = run(*stage, f);
    ASSERT_EQ(d.size(), 3u);
    EXPECT_EQ(d[0].label, "person");
    EXPECT_EQ(d[0].class_id, 0);
    EXPECT_EQ(d[0].kind, "object");
    EXPECT_FLOAT_EQ(d[0].score, 0.9f);
    expect_box(d[0].box, {540, 310, 200, 100});  // x (270 - 0) / 0.5, y (295 - 140) / 0.5
    EXPECT_EQ(d[1].label, "car");
    EXPECT_FLOAT_EQ(d[1].score, 0.7f);
    expect_box(d[1].box, {560, 310, 200, 100});
    EXPECT_EQ(d[2].label, "bicycle");
    EXPECT_EQ(d[2].class_id, 1);
    expect_box(d[2].box, {0, 340, 60, 40});  // from x -20, clipped at the picture's edge
  }
}

TEST_F(DetectStageTest, YoloV8DecoderAloneGivesInputPixels) {
  const Tensor t = yolo_v8_tensor(true);
  DecodeOptions o;
  o.thresholds = {0.25f, 0.25f, 0.25f};
  const auto c = decode_yolo_v8(t.data<float>(), 5, 3, true, o);
  ASSERT_EQ(c.size(), 5u);  // no NMS yet, nothing clipped
  expect_box(c[0].box, {270, 295, 100, 50});
  EXPECT_EQ(c[2].class_id, 2);
  o.thresholds = {0.85f, 0.25f, 1.f};  // per class
  EXPECT_EQ(decode_yolo_v8(t.data<float>(), 5, 3, true, o).size(), 3u);  // 0, 3, 4
}

TEST_F(DetectStageTest, ClassFiltersAndPerClassThresholds) {
  const Tensor t = yolo_v8_tensor(true);
  const auto labels_of = [&](const std::string& extra) {
    auto stage = make(std::string(kYoloV8) + extra, {{"out", spec(t.shape())}});
    Frame f = frame_of(1280, 720, kLetterbox, {{"out", t}});
    std::vector<std::string> labels;
    for (const auto& d : run(*stage, f)) labels.push_back(d.label);
    return labels;
  };
  using L = std::vector<std::string>;
  EXPECT_EQ(labels_of("classes: [car]\n"), (L{"car"}));
  EXPECT_EQ(labels_of("classes: [person, 1]\n"), (L{"person", "bicycle"}));
  // Person at 0.95: box 0 (0.9) and 1 (0.8) fail it; 4 (0.95) passes but lies in the padding.
  EXPECT_EQ(labels_of("class_thresholds: {person: 0.95}\n"), (L{"car", "bicycle"}));
  EXPECT_EQ(labels_of("class_thresholds: {2: 0.75}\n"), (L{"person", "bicycle"}));
  EXPECT_EQ(labels_of("score_threshold: 0.65\n"), (L{"person", "car"}));
  EXPECT_EQ(labels_of("class_agnostic: true\n"), (L{"person", "bicycle"}));  // car overlaps person
  EXPECT_EQ(labels_of("max_detections: 1\n"), (L{"person"}));  // not box 4 (0.95): it is not in the picture
  EXPECT_EQ(labels_of("kind: vehicle\nclasses: [car]\n"), (L{"car"}));
}

TEST_F(DetectStageTest, YoloV5ObjectnessTimesClassThroughAStretch) {
  // A 200 x 400 picture stretched to 100 x 100: scale 0.5 across, 0.25 down.
  const ImageTransform stretch{0.5f, 0.25f, 0.f, 0.f, 100, 100};
  // cx, cy, w, h, objectness, 2 class scores.
  const Tensor t = Tensor::from_vector(Shape{1, 3, 7}, std::vector<float>{
                                                         50, 50, 20, 10, 0.8f, 0.5f, 0.9f,   // class 1, 0.72
                                                         20, 20, 10, 10, 0.2f, 1.0f, 0.0f,   // 0.2: below 0.25
                                                         80, 80, 10, 10, 0.5f, 0.6f, 0.1f,   // class 0, 0.3
                                                     });
  auto stage = make("name: det\ntype: detect\nformat: yolo_v5\ninput: out\ntransform: det_in\n", {{"out", spec({1, 3, 7})}});
  Frame f = frame_of(200, 400, stretch, {{"out", t}});
  const auto d = run(*stage, f);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].class_id, 1);
  EXPECT_EQ(d[0].label, "1");  // no labels file: the id
  EXPECT_NEAR(d[0].score, 0.72f, 1e-6);
  expect_box(d[0].box, {80, 180, 40, 40});
  EXPECT_EQ(d[1].class_id, 0);
  EXPECT_NEAR(d[1].score, 0.3f, 1e-6);

  // The same as logits: sigmoid(0) = 0.5, sigmoid(ln 9) = 0.9.
  const float l9 = std::log(9.f);
  const Tensor logits = Tensor::from_vector(Shape{1, 1, 7}, std::vector<float>{50, 50, 20, 10, 0.f, -5.f, l9});
  auto sigmoid = make("name: det\ntype: detect\nformat: yolo_v5\ninput: out\ntransform: det_in\nactivation: sigmoid\n",
                      {{"out", spec({1, -1, 7})}});
  Frame g = frame_of(200, 400, stretch, {{"out", logits}});
  const auto e = run(*sigmoid, g);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NEAR(e[0].score, 0.45f, 1e-6);
}

TEST_F(DetectStageTest, SsdCornersPerClassWithBackground) {
  // Classes background, face, hand; boxes x1, y1, x2, y2 normalized; a 100 x 100 input of a
  // 200 x 100 picture (stretch: scale 0.5 across).
  write("three.txt", "background\nface\nhand\n");
  const ImageTransform stretch{0.5f, 1.f, 0.f, 0.f, 100, 100};
  const Tensor boxes = Tensor::from_vector(Shape{1, 3, 4}, std::vector<float>{0.1f, 0.2f, 0.3f, 0.6f,  //
                                                                              0.5f, 0.5f, 0.7f, 0.9f,  //
                                                                              0.0f, 0.0f, 1.0f, 1.0f});
  const Tensor scores = Tensor::from_vector(Shape{1, 3, 3}, std::vector<float>{0.1f, 0.6f, 0.3f,  // face and hand
                                                                               0.5f, 0.1f, 0.4f,  // hand
                                                                               0.9f, 0.05f, 0.05f});  // background
  auto stage = make("name: det\ntype: detect\nformat: ssd\nboxes: b\nscores: s\ntransform: det_in\nlabels: three.txt\n",
                    {{"b", spec({1, 3, 4})}, {"s", spec({1, 3, 3})}});
  Frame f = frame_of(200, 100, stretch, {{"b", boxes}, {"s", scores}});
  const auto d = run(*stage, f);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].label, "face");
  EXPECT_NEAR(d[0].score, 0.6f, 1e-6);
  expect_box(d[0].box, {20, 20, 40, 40});
  EXPECT_EQ(d[1].label, "hand");
  EXPECT_NEAR(d[1].score, 0.4f, 1e-6);
  expect_box(d[1].box, {100, 50, 40, 40});
  EXPECT_EQ(d[2].label, "hand");  // the same box as the face: another class, not suppressed
  expect_box(d[2].box, {20, 20, 40, 40});

  // Logits: softmax over the three, the background included.
  const Tensor logits = Tensor::from_vector(Shape{1, 1, 3}, std::vector<float>{0.f, std::log(3.f), 0.f});  // 0.2 0.6 0.2
  auto softmax = make("name: det\ntype: detect\nformat: ssd\nboxes: b\nscores: s\ntransform: det_in\nactivation: softmax\n",
                      {{"b", spec({1, 1, 4})}, {"s", spec({1, 1, 3})}});
  Frame g = frame_of(200, 100, stretch, {{"b", Tensor::from_vector(Shape{1, 1, 4}, std::vector<float>{0.1f, 0.2f, 0.3f, 0.6f})}, {"s", logits}});
  const auto e = run(*softmax, g);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].class_id, 1);
  EXPECT_NEAR(e[0].score, 0.6f, 1e-6);
}

TEST_F(DetectStageTest, SsdWithoutBackgroundReportsClassZero) {
  const ImageTransform identity{1.f, 1.f, 0.f, 0.f, 100, 100};
  const Tensor boxes = Tensor::from_vector(Shape{1, 1, 4}, std::vector<float>{10, 20, 30, 60});  // pixels
  const Tensor scores = Tensor::from_vector(Shape{1, 1, 2}, std::vector<float>{0.8f, 0.1f});
  const std::string yaml = "name: det\ntype: detect\nformat: ssd\nboxes: b\nscores: s\ntransform: det_in\nbox_units: pixels\n";
  const TensorSpecs specs = {{"b", spec({1, 1, 4})}, {"s", spec({1, 1, 2})}};
  Frame f = frame_of(100, 100, identity, {{"b", boxes}, {"s", scores}});
  EXPECT_TRUE(run(*make(yaml, specs), f).empty());  // class 0 is the background by default
  Frame g = frame_of(100, 100, identity, {{"b", boxes}, {"s", scores}});
  const auto d = run(*make(yaml + "background: none\n", specs), g);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].class_id, 0);
  expect_box(d[0].box, {10, 20, 20, 40});
}

TEST_F(DetectStageTest, NonFiniteValuesAndHalfOutputs) {
  // Box 0 has a NaN width, box 1 a NaN score, box 2 is fine: one detection, no crash.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> rows = {320, 320, nan, 50, 0.9f, 0.f, 0.f,  //
                                   320, 320, 100, 50, nan, 0.f, 0.f,  //
                                   100, 320, 100, 50, 0.f, 0.f, 0.5f};
  const Tensor t = Tensor::from_vector(Shape{1, 3, 7}, rows);
  auto stage = make(std::string(kYoloV8) + "layout: boxes_first\n", {{"out", spec({1, 3, 7})}});
  Frame f = frame_of(1280, 720, kLetterbox, {{"out", t}});
  const auto d = run(*stage, f);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].label, "car");
  // The same outputs in float16 (a model exported in half precision) decode alike.
  Frame g = frame_of(1280, 720, kLetterbox, {{"out", t.cast(DType::kF16)}});
  const auto e = run(*stage, g);
  ASSERT_EQ(e.size(), 1u);
  expect_box(e[0].box, d[0].box);
}

TEST(DetectPriors, MatchUltraFaceRfb320) {
  // The priors UltraFace's RFB-320 ONNX export holds as constants (fr_detect.onnx: centres and
  // sizes of 4420 priors), at the start of each feature map and at its last ones.
  PriorSpec s;
  s.steps = {8, 16, 32, 64};
  s.min_sizes = {{10, 16, 24}, {32, 48}, {64, 96}, {128, 192, 256}};
  const auto p = generate_priors(s, 320, 240);
  ASSERT_EQ(p.size(), 4420u);  // 40x30x3 + 20x15x2 + 10x8x2 + 5x4x3
  const auto expect = [&](std::size_t i, Prior want) {
    SCOPED_TRACE(i);
    EXPECT_NEAR(p[i].cx, want.cx, 1e-6);
    EXPECT_NEAR(p[i].cy, want.cy, 1e-6);
    EXPECT_NEAR(p[i].w, want.w, 1e-6);
    EXPECT_NEAR(p[i].h, want.h, 1e-6);
  };
  expect(0, {0.0125f, 0.016666668f, 0.03125f, 0.041666668f});
  expect(2, {0.0125f, 0.016666668f, 0.075f, 0.1f});
  expect(3, {0.0375f, 0.016666668f, 0.03125f, 0.041666668f});
  expect(3600, {0.025f, 0.033333335f, 0.1f, 0.13333334f});
  expect(4356, {0.85f, 0.9375f, 0.2f, 0.26666668f});  // step 32: 8 rows of 7.5 -> centres by cell
  expect(4419, {0.9f, 0.875f, 0.8f, 1.f});             // 256 / 240 clipped to 1
  s.centers_on_cells = false;  // RetinaFace's convention: (i + 0.5) * step / size
  EXPECT_NEAR(generate_priors(s, 320, 240)[4419].cy, 3.5f * 64 / 240, 1e-6);
  s.clip = false;
  EXPECT_NEAR(generate_priors(s, 320, 240)[4419].h, 256.f / 240, 1e-6);
}

TEST_F(DetectStageTest, SsdOffsetsAgainstAnchors) {
  // steps [50] on 100 x 100: 2 x 2 cells, one prior of 20 pixels each, centres 0.25 / 0.75.
  const std::string yaml =
      "name: det\ntype: detect\nformat: ssd\nboxes: b\nscores: s\ntransform: det_in\nlabels: face.txt\n"
      "anchors:\n  steps: [50]\n  min_sizes: [[20]]\n";
  const ImageTransform identity{1.f, 1.f, 0.f, 0.f, 100, 100};
  // Prior 3 (0.75, 0.75, 0.2, 0.2): dx 1 -> cx 0.75 + 1 * 0.1 * 0.2; dh ln 2 / 0.2 -> h 0.4.
  std::vector<float> offsets(16, 0.f);
  offsets[12] = 1.f;
  offsets[15] = std::log(2.f) / 0.2f;
  const std::vector<float> scores = {0.9f, 0.1f, 0.9f, 0.1f, 0.9f, 0.1f, 0.2f, 0.8f};
  TensorSpecs specs = {{"b", spec({1, 4, 4})}, {"s", spec({1, 4, 2})}};
  specs["det_in"] = spec({1, 3, 100, 100}, true);
  auto stage = make(yaml, specs);
  Frame f = frame_of(100, 100, identity, {{"b", Tensor::from_vector(Shape{1, 4, 4}, offsets)}, {"s", Tensor::from_vector(Shape{1, 4, 2}, scores)}});
  const auto d = run(*stage, f);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].label, "face");
  EXPECT_NEAR(d[0].score, 0.8f, 1e-6);
  expect_box(d[0].box, {67, 55, 20, 40});  // centre (77, 75), 20 x 40

  // Five boxes for four priors: at load when the input size is known.
  specs["b"] = spec({1, 5, 4});
  specs["s"] = spec({1, 5, 2});
  auto origin = std::make_shared<ConfigOrigin>();
  EXPECT_NE(error(yaml, specs).find("stage 'det': anchors: give 4 priors for a 100x100 input but boxes 'b' holds 5 boxes"),
            std::string::npos)
      << error(yaml, specs);
}

TEST_F(DetectStageTest, DetrSoftmaxWithNoObjectAndNoNms) {
  // Two classes + "no object"; queries 0 and 2 the same box and class (no NMS: both stay).
  const Tensor boxes = Tensor::from_vector(Shape{1, 3, 4}, std::vector<float>{0.5f, 0.5f, 0.2f, 0.4f,  //
                                                                              0.1f, 0.1f, 0.1f, 0.1f,  //
                                                                              0.5f, 0.5f, 0.2f, 0.4f});
  const Tensor logits = Tensor::from_vector(Shape{1, 3, 3}, std::vector<float>{5, 0, 0,  //
                                                                               0, 0, 5,  // no object
                                                                               4, 0, 0});
  auto stage = make("name: det\ntype: detect\nformat: detr\nboxes: b\nscores: s\ntransform: det_in\n",
                    {{"b", spec({1, 3, 4})}, {"s", spec({1, 3, 3})}});
  const ImageTransform identity{1.f, 1.f, 0.f, 0.f, 640, 640};
  Frame f = frame_of(640, 640, identity, {{"b", boxes}, {"s", logits}});
  const auto d = run(*stage, f);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_NEAR(d[0].score, std::exp(5.f) / (std::exp(5.f) + 2), 1e-5);
  EXPECT_NEAR(d[1].score, std::exp(4.f) / (std::exp(4.f) + 2), 1e-5);
  expect_box(d[0].box, {256, 192, 128, 256});
  expect_box(d[1].box, d[0].box);
}

TEST_F(DetectStageTest, BadKeysNameTheirPlace) {
  const TensorSpecs out = {{"out", spec({1, 7, 8400})}};
  const auto expect_error = [&](const std::string& yaml, int line, int column, const std::string& text) {
    const std::string e = error(yaml, out);
    EXPECT_EQ(e.rfind(where(line, column), 0), 0u) << e;
    EXPECT_NE(e.find(text), std::string::npos) << e;
  };
  const std::string base = kYoloV8;  // 6 lines
  expect_error(base + "scor_threshold: 0.3\n", 7, 1, "unknown key 'scor_threshold'");
  expect_error(base + "score_threshold: 1.5\n", 7, 18, "score_threshold: must be in [0, 1]");
  expect_error(base + "classes: [person, zebra]\n", 7, 19, "classes: no class 'zebra' in the labels file (3 classes: person, bicycle, car)");
  expect_error(base + "classes: [7]\n", 7, 11, "class id 7 is past the labels file's 3 classes");
  expect_error(base + "class_thresholds: {car: 1.5}\n", 7, 25, "class_thresholds: 1.5 is not in [0, 1]");
  expect_error(base + "class_thresholds: {truck: 0.5}\n", 7, 20, "no class 'truck'");
  expect_error(base + "layout: sideways\n", 7, 9, "'sideways' is not one of auto, channels_first, boxes_first");
  expect_error(base + "background: 0\n", 7, 13, "only ssd has a background class");
  expect_error(base + "anchors: {steps: [8]}\n", 7, 10, "only ssd decodes offsets against anchors");
  expect_error(base + "activation: softmax\n", 7, 13, "none or sigmoid");
  expect_error(base + "iou_threshold: -1\n", 7, 16, "must be in [0, 1]");
  expect_error(base + "max_detections: 0\n", 7, 17, "must be at least 1");
  expect_error("name: det\ntype: detect\nformat: yolo_v9\ninput: out\ntransform: det_in\n", 3, 9, "'yolo_v9' is not one of");
  expect_error("name: det\ntype: detect\ninput: out\ntransform: det_in\n", 1, 1, "missing required key 'format'");
  expect_error("name: det\ntype: detect\nformat: ssd\nboxes: out\ntransform: det_in\n", 1, 1, "missing required key 'scores'");
  expect_error("name: det\ntype: detect\nformat: yolo_v8\ninput: out\ntransform: det_in\nlabels: nope.txt\n", 6, 9, "no such file 'nope.txt'");
  expect_error("name: det\ntype: detect\nformat: yolo_v8\ninput: out\ntransform: det_in\nclasses: [car]\n", 6, 11,
               "'car' is not a class id, and the stage has no labels file");
  expect_error(
      "name: det\ntype: detect\nformat: ssd\nboxes: out\nscores: s\ntransform: det_in\nanchors:\n  steps: [8, 16]\n  min_sizes: [[10]]\n",
      9, 14, "anchors: min_sizes: needs one list per step (2)");
  expect_error("name: det\ntype: detect\nformat: ssd\nboxes: out\nscores: s\ntransform: det_in\nanchors:\n  steps: [8]\n  min_sizes: [[10]]\n  centres: cells\n",
               10, 3, "unknown key 'centres'");
  expect_error("name: det\ntype: detect\nformat: ssd\nboxes: out\nscores: s\ntransform: det_in\nclasses: [0]\n", 7, 10, "class 0 is the background");
  write("empty_line.txt", "a\n\nb\n");
  expect_error("name: det\ntype: detect\nformat: yolo_v8\ninput: out\ntransform: det_in\nlabels: empty_line.txt\n", 6, 9, "empty_line.txt:2: empty label");
}

TEST_F(DetectStageTest, TensorsAreCheckedAtLoad) {
  const auto expect_error = [&](const std::string& yaml, const TensorSpecs& specs, const std::string& text) {
    const std::string e = error(yaml, specs);
    EXPECT_EQ(e.rfind(where(1, 1), 0), 0u) << e;  // the stage's place
    EXPECT_NE(e.find(text), std::string::npos) << e;
  };
  // 4 + 5 classes against the labels' 3.
  expect_error(kYoloV8, {{"out", spec({1, 9, 8400})}}, "stage 'det': the labels file has 3 classes but the model's output has 5");
  expect_error(kYoloV8, {{"out", spec({1, 84})}}, "stage 'det': input 'out' is [1, 84]; yolo_v8 decoding reads [N, 4 + classes, boxes]");
  const std::string no_labels = "name: det\ntype: detect\nformat: yolo_v8\ninput: out\ntransform: det_in\n";
  expect_error(no_labels, {{"out", spec({1, 7, 7})}}, "which dim holds the 4 + classes values is unclear; say layout");
  EXPECT_EQ(error(no_labels + "layout: boxes_first\n", {{"out", spec({1, 7, 7})}}), "");
  expect_error(no_labels + "classes: [3]\n", {{"out", spec({1, 7, 8400})}}, "classes: class id 3 is past the model's 3 classes");
  expect_error("name: det\ntype: detect\nformat: yolo_v5\ninput: out\ntransform: det_in\nlabels: coco3.txt\n",
               {{"out", spec({1, 25200, 85})}}, "the labels file has 3 classes but the model's output has 80");
  const std::string ssd = "name: det\ntype: detect\nformat: ssd\nboxes: b\nscores: s\ntransform: det_in\nlabels: face.txt\n";
  expect_error(ssd, {{"b", spec({1, 4420, 5})}, {"s", spec({1, 4420, 2})}}, "boxes 'b' is [1, 4420, 5]; ssd decoding reads [N, boxes, 4]");
  expect_error(ssd, {{"b", spec({1, 4420, 4})}, {"s", spec({1, 4000, 2})}}, "disagree on the number of boxes");
  expect_error(ssd, {{"b", spec({1, 4420, 4})}, {"s", spec({1, 4420, 3})}},
               "the labels file has 2 classes but the model's output has 3 (ssd counts the background class)");
  expect_error("name: det\ntype: detect\nformat: detr\nboxes: b\nscores: s\ntransform: det_in\nlabels: coco3.txt\n",
               {{"b", spec({1, 100, 4})}, {"s", spec({1, 100, 92})}}, "the labels file has 3 classes but the model's output has 91");
  // detr's labels may or may not name "no object".
  EXPECT_EQ(error("name: det\ntype: detect\nformat: detr\nboxes: b\nscores: s\ntransform: det_in\nlabels: coco3.txt\n",
                  {{"b", spec({1, 100, 4})}, {"s", spec({1, 100, 4})}}),
            "");
  expect_error(kYoloV8, {}, "reads tensor 'out' but no earlier stage writes it");
}

TEST_F(DetectStageTest, TensorsUnknownAtLoadAreCheckedPerFrame) {
  auto stage = make(kYoloV8, {{"out", spec({1, -1, -1})}});
  const auto message = [&](Tensor t) {
    Frame f = frame_of(1280, 720, kLetterbox, {{"out", std::move(t)}});
    try {
      run(*stage, f);
    } catch (const ConfigError&) {
      return std::string("ConfigError");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // 4 + 5 values per box (channels first, by the smaller dim) against 3 labels.
  EXPECT_EQ(message(Tensor::zeros(DType::kF32, Shape{1, 9, 100})),
            "stage 'det': the labels file has 3 classes but the model's output has 5");
  EXPECT_NE(message(Tensor::zeros(DType::kF32, Shape{2, 7, 100})).find("stage 'det': input 'out' is [2, 7, 100]"), std::string::npos);
  EXPECT_EQ(message(Tensor::zeros(DType::kF32, Shape{1, 7, 100})), "");
}

}  // namespace
}  // namespace redwood
