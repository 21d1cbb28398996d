// The crops stage: which detections are cut (kind, label, size, best scores), the region around
// each box (padding, expand), the pixels of the batch (stretch, pad, the border replicated, colour
// order and normalization), the rows' parents, frames with no crop, and mistakes in the file.

#include "stages/postprocess/crops.hpp"

#include "core/onnx/onnx_import.hpp"
#include "pipelines/pipeline_text.hpp"
#include "stages/picture_cv.hpp"
#include "stages/stage.hpp"
#include "support/onnx_builder.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

namespace redwood {
namespace {

Detection det(std::string kind, std::string label, float score, RectF box) {
  Detection d;
  d.kind = std::move(kind);
  d.label = std::move(label);
  d.score = score;
  d.box = box;
  return d;
}

TEST(Crops, SelectsByKindLabelSizeAndBestScores) {
  const std::vector<Detection> dets{
      det("face", "", 0.9f, {10, 10, 40, 40}),    // 0
      det("object", "car", 0.8f, {0, 0, 50, 30}),  // 1
      det("face", "", 0.7f, {60, 10, 10, 40}),    // 2: 10 px wide
      det("face", "", 0.95f, {20, 20, 30, 30}),   // 3
      det("face", "", 0.5f, {200, 10, 40, 40}),   // 4: outside the 100 x 80 picture
      det("object", "bus", 0.6f, {5, 5, 20, 20}), // 5
  };
  CropSelection s;
  EXPECT_EQ(select_crops(dets, s, 100, 80), (std::vector<int>{0, 1, 3, 5}));  // min_size 16 drops 2
  s.kinds = {"face"};
  EXPECT_EQ(select_crops(dets, s, 100, 80), (std::vector<int>{0, 3}));
  s.min_size = 8;
  EXPECT_EQ(select_crops(dets, s, 100, 80), (std::vector<int>{0, 2, 3}));
  s.max_crops = 2;  // the two best, in detection order
  EXPECT_EQ(select_crops(dets, s, 100, 80), (std::vector<int>{0, 3}));
  CropSelection by_label;
  by_label.classes = {"car", "bus"};
  EXPECT_EQ(select_crops(dets, by_label, 100, 80), (std::vector<int>{1, 5}));
  EXPECT_TRUE(select_crops(dets, by_label, 0, 0).empty());  // no picture, nothing to cut
}

TEST(Crops, RegionIsPaddedThenExpandedAroundItsCentre) {
  CropOptions o;
  o.width = 100;
  o.height = 100;
  o.padding = 0.1f;
  const RectF padded = crop_region({10, 20, 100, 50}, o);
  EXPECT_FLOAT_EQ(padded.x, 0.f);
  EXPECT_FLOAT_EQ(padded.y, 15.f);
  EXPECT_FLOAT_EQ(padded.width, 120.f);
  EXPECT_FLOAT_EQ(padded.height, 60.f);
  o.aspect = CropAspect::kExpand;
  const RectF square = crop_region({10, 20, 100, 50}, o);  // 120 x 60 grown to 120 x 120 around (60, 45)
  EXPECT_FLOAT_EQ(square.x, 0.f);
  EXPECT_FLOAT_EQ(square.y, -15.f);
  EXPECT_FLOAT_EQ(square.width, 120.f);
  EXPECT_FLOAT_EQ(square.height, 120.f);
  o.width = 50;  // 1:2, a tall crop: the height grows
  o.padding = 0.f;
  const RectF tall = crop_region({0, 0, 40, 40}, o);
  EXPECT_FLOAT_EQ(tall.width, 40.f);
  EXPECT_FLOAT_EQ(tall.height, 80.f);
  EXPECT_FLOAT_EQ(tall.y, -20.f);
}

// An 8 x 8 picture: the left half red, the right half blue, column 0 green.
cv::Mat halves() {
  cv::Mat bgr(8, 8, CV_8UC3, cv::Scalar(255, 0, 0));
  bgr(cv::Rect(0, 0, 4, 8)).setTo(cv::Scalar(0, 0, 255));
  bgr.col(0).setTo(cv::Scalar(0, 255, 0));
  return bgr;
}

// The value at channel c, row y, column x of crop i of a [K, 3, H, W] tensor.
float at(const Tensor& t, std::int64_t i, int c, int y, int x) {
  return t.data<float>()[((i * 3 + c) * t.dim(2) + y) * t.dim(3) + x];
}

TEST(Crops, CutsResizesAndNormalizesEachRegion) {
  CropOptions o;
  o.width = 2;
  o.height = 4;
  o.mean = {0.5f, 0.5f, 0.5f};
  o.std = {0.5f, 0.5f, 0.5f};
  // Region 0: the right half (blue), halved: 2 x 4 samples of blue. Region 1: columns 1-2 (red).
  const Tensor t = crops_to_batch(halves(), {{4, 0, 4, 8}, {1, 0, 2, 4}}, o);
  ASSERT_EQ(t.shape(), (Shape{2, 3, 4, 2}));
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 2; ++x) {
      EXPECT_FLOAT_EQ(at(t, 0, 0, y, x), -1.f);  // RGB: R of blue, (0 - 0.5) / 0.5
      EXPECT_FLOAT_EQ(at(t, 0, 2, y, x), 1.f);   // B
      EXPECT_FLOAT_EQ(at(t, 1, 0, y, x), 1.f);   // R of red
      EXPECT_FLOAT_EQ(at(t, 1, 1, y, x), -1.f);
    }
  }
  o.rgb = false;  // BGR: channel 0 is blue
  const Tensor bgr = crops_to_batch(halves(), {{4, 0, 4, 8}}, o);
  EXPECT_FLOAT_EQ(at(bgr, 0, 0, 0, 0), 1.f);
  EXPECT_FLOAT_EQ(at(bgr, 0, 2, 0, 0), -1.f);
}

TEST(Crops, OutsideThePictureRepeatsItsEdge) {
  CropOptions o;
  o.width = 8;
  o.height = 8;
  // 4 columns left of the picture, then its columns 0-3: the green column 0 repeated 5 times.
  const Tensor t = crops_to_batch(halves(), {{-4, 0, 8, 8}}, o);
  for (int x = 0; x < 8; ++x) {
    EXPECT_FLOAT_EQ(at(t, 0, 1, 3, x), x <= 4 ? 1.f : 0.f) << x;  // G
    EXPECT_FLOAT_EQ(at(t, 0, 0, 3, x), x <= 4 ? 0.f : 1.f) << x;  // R
  }
}

TEST(Crops, PadKeepsProportionsCentredOnBlack) {
  CropOptions o;
  o.width = 8;
  o.height = 8;
  o.aspect = CropAspect::kPad;
  o.mean = {0.1f, 0.1f, 0.1f};
  // The red columns 1-3 (3 x 8) into 8 x 8: 3 columns wide at x 2-4, black on both sides.
  const Tensor t = crops_to_batch(halves(), {{1, 0, 3, 8}}, o);
  for (int x = 0; x < 8; ++x) {
    const bool inside = x >= 2 && x <= 4;
    EXPECT_NEAR(at(t, 0, 0, 5, x), inside ? 0.9f : -0.1f, 1e-6) << x;
  }
}

TEST(Crops, NoRegionIsATensorOfNoRows) {
  CropOptions o;
  o.width = 16;
  o.height = 12;
  const Tensor t = crops_to_batch(cv::Mat(), {}, o);
  EXPECT_EQ(t.shape(), (Shape{0, 3, 12, 16}));
  EXPECT_THROW(crops_to_batch(halves(), {{0, 0, 0, 4}}, o), InvalidArgument);
}

// The stage itself, made as a pipeline makes it.
std::unique_ptr<Stage> make_crops(const std::string& yaml, const ModelTable& models = {}) {
  const auto origin = std::make_shared<ConfigOrigin>();
  origin->file = "crops.yaml";
  const YAML::Node node = YAML::Load(yaml);
  Params p(node, origin, "stage 'face_crops'");
  p.get<std::string>("name", "");
  p.get<std::string>("type", "");
  StageArgs args{"face_crops", p, models};
  auto stage = stage_registry().at("crops")(args);
  p.finish();
  return stage;
}

TEST(Crops, StageWritesTheBatchAndEachRowsParent) {
  const auto stage = make_crops("{name: face_crops, type: crops, width: 4, height: 4, kinds: [face], min_size: 2}");
  ASSERT_EQ(stage->produces().at("face_crops").dims, (std::vector<std::int64_t>{-1, 3, 4, 4}));
  Frame f;
  f.image = from_mat(halves());
  f.detections = {det("face", "", 0.9f, {4, 0, 4, 4}), det("text", "", 0.9f, {0, 0, 4, 4}), det("face", "", 0.8f, {0, 4, 4, 4})};
  Frame empty;
  empty.image = from_mat(halves());
  std::vector<Frame*> frames{&f, &empty};
  stage->process(frames);
  EXPECT_EQ(f.tensors.at("face_crops").shape(), (Shape{2, 3, 4, 4}));
  EXPECT_EQ(f.crop_parents.at("face_crops"), (std::vector<int>{0, 2}));
  EXPECT_FLOAT_EQ(at(f.tensors.at("face_crops"), 0, 2, 1, 1), 1.f);  // detection 0: blue
  EXPECT_FLOAT_EQ(at(f.tensors.at("face_crops"), 1, 0, 1, 1), 1.f);  // detection 2: red (x 1-3)
  EXPECT_EQ(empty.tensors.at("face_crops").shape(), (Shape{0, 3, 4, 4}));
  ASSERT_TRUE(empty.crop_parents.count("face_crops"));
  EXPECT_TRUE(empty.crop_parents.at("face_crops").empty());
}

// A model whose input is [N, 3, 20, 30] (x -> Identity).
std::filesystem::path model_file(const std::vector<std::int64_t>& dims) {
  testing::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, dims, {"N"});
  b.output("y", onnx::TensorProto::FLOAT, dims, {"N"});
  b.node("Identity", {"x"}, {"y"});
  const auto file = testing::temp_dir("crops-model") / "m.onnx";
  b.save(file);
  return file;
}

const char* kHead = R"(version: 1
sources:
  - name: a
    type: synthetic
    width: 64
    height: 48
    frames: 2
models:
  m:
    path: {}
stages:
  - name: crops
    type: crops
)";

std::string pipeline(const std::filesystem::path& model, const std::string& keys) {
  return fmt::format(fmt::runtime(kHead), model.string()) + keys;
}

TEST(Crops, SizeComesFromTheModelsInput) {
  const auto model = model_file({-1, 3, 20, 30});
  ModelTable models;
  models["m"].graph = load_onnx(model);
  const auto stage = make_crops("{name: face_crops, type: crops, model: m}", models);
  EXPECT_EQ(stage->produces().at("face_crops").dims, (std::vector<std::int64_t>{-1, 3, 20, 30}));
  EXPECT_TRUE(testing::load_error(pipeline(model, "    model: m\n    width: 30\n")).empty());
  std::string e = testing::load_error(pipeline(model, "    model: m\n    width: 32\n"));
  EXPECT_NE(e.find(testing::where(15, 12)), std::string::npos) << e;
  EXPECT_NE(e.find("width is fixed at 30"), std::string::npos) << e;
  e = testing::load_error(pipeline(model_file({-1, 20, 30, 3}), "    model: m\n"));
  EXPECT_NE(e.find(testing::where(14, 12)), std::string::npos) << e;
  EXPECT_NE(e.find("NCHW, 3 channels"), std::string::npos) << e;
}

TEST(Crops, MistakesFailAtTheirPlace) {
  const auto model = model_file({-1, 3, 20, 30});
  // The value's place (line 16: the third key), or the stage's for a missing key.
  const std::vector<std::tuple<std::string, std::string, int, int>> cases{
      {"    height: 8\n", "missing required key 'width'", 12, 5},
      {"    width: 8\n    height: 8\n    aspect: squash\n", "'squash' is not one of stretch, pad, expand", 16, 13},
      {"    width: 8\n    height: 8\n    padding: 3\n", "must be from 0 to 2", 16, 14},
      {"    width: 8\n    height: 8\n    max_crops: 0\n", "must be from 1 to 4096", 16, 16},
      {"    width: 8\n    height: 8\n    kinds: []\n", "non-empty list", 16, 12},
      {"    width: 8\n    height: 8\n    mean: [1, 2]\n", "three values", 16, 11},
      {"    width: 8\n    height: 8\n    color: yuv\n", "'yuv' is not one of rgb, bgr", 16, 12},
      {"    width: 8\n    height: 8\n    paddin: 0.1\n", "unknown key 'paddin'", 16, 5},
  };
  for (const auto& [keys, what, line, column] : cases) {
    const std::string e = testing::load_error(pipeline(model, keys));
    EXPECT_NE(e.find(what), std::string::npos) << keys << " -> " << e;
    EXPECT_NE(e.find(testing::where(line, column) + " stage 'crops'"), std::string::npos) << keys << " -> " << e;
  }
}

// text_crops keeps the same contract: the detection of each row.
TEST(Crops, TextCropsRecordTheirParentsToo) {
  const auto origin = std::make_shared<ConfigOrigin>();
  const YAML::Node node = YAML::Load("{output: rec_in, height: 8, max_width: 32}");
  Params p(node, origin, "stage 'rec_crops'");
  ModelTable models;
  StageArgs args{"rec_crops", p, models};
  const auto stage = stage_registry().at("text_crops")(args);
  p.finish();
  Frame f;
  f.image = from_mat(halves());
  Detection text = det("text", "", 0.9f, {0, 0, 8, 4});
  text.quad = {{0, 0}, {8, 0}, {8, 4}, {0, 4}};
  f.detections = {det("face", "", 0.9f, {0, 0, 4, 4}), text, det("text", "", 0.9f, {0, 0, 4, 4}), text};
  std::vector<Frame*> frames{&f};
  stage->process(frames);
  EXPECT_EQ(f.tensors.at("rec_in").dim(0), 2);
  EXPECT_EQ(f.crop_parents.at("rec_in"), (std::vector<int>{1, 3}));  // detection 2 has no quad
}

}  // namespace
}  // namespace redwood
