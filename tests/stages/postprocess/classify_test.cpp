// The classify stage: softmax and the best classes of a row (known answers), results attached to
// the detections the crops were cut from (or to the frame), frames with no crop, and mismatched
// rows, classes and labels refused with the stage named (at load where the shapes are known).

#include "stages/postprocess/classify.hpp"

#include "pipelines/pipeline_text.hpp"
#include "stages/stage.hpp"
#include "support/onnx_builder.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

namespace redwood {
namespace {

TEST(Classify, SoftmaxKnownAnswerAndNoOverflow) {
  std::vector<float> row{1.f, 2.f, 3.f};
  softmax_in_place(row);
  const double sum = std::exp(-2.0) + std::exp(-1.0) + 1.0;
  EXPECT_NEAR(row[0], std::exp(-2.0) / sum, 1e-7);
  EXPECT_NEAR(row[1], std::exp(-1.0) / sum, 1e-7);
  EXPECT_NEAR(row[2], 1.0 / sum, 1e-7);
  std::vector<float> big{1000.f, 1000.f + std::log(3.f)};
  softmax_in_place(big);
  EXPECT_NEAR(big[0], 0.25f, 1e-4);  // 1000 + ln 3 is a float: 6e-5 apart
  EXPECT_NEAR(big[1], 0.75f, 1e-4);
  std::vector<float> none;
  softmax_in_place(none);
}

TEST(Classify, TellsProbabilitiesFromLogits) {
  EXPECT_TRUE(looks_like_probabilities(std::vector<float>{0.2f, 0.8f}));
  EXPECT_TRUE(looks_like_probabilities(std::vector<float>{0.5f, 0.5009f}));  // within 1e-3
  EXPECT_FALSE(looks_like_probabilities(std::vector<float>{0.5f, 0.502f}));
  EXPECT_FALSE(looks_like_probabilities(std::vector<float>{-0.1f, 1.1f}));     // sums to 1, not in [0, 1]
  EXPECT_FALSE(looks_like_probabilities(std::vector<float>{0.f, 1.f, NAN}));
  EXPECT_FALSE(looks_like_probabilities(std::vector<float>{}));
}

TEST(Classify, TopClassesBestFirstLowerIdOnTiesAboveMinScore) {
  const std::vector<float> row{0.1f, 0.4f, 0.1f, 0.4f, NAN};
  using R = std::vector<std::pair<int, float>>;
  EXPECT_EQ(top_classes(row, 1, 0.f), (R{{1, 0.4f}}));
  EXPECT_EQ(top_classes(row, 3, 0.f), (R{{1, 0.4f}, {3, 0.4f}, {0, 0.1f}}));
  EXPECT_EQ(top_classes(row, 3, 0.2f), (R{{1, 0.4f}, {3, 0.4f}}));
  EXPECT_EQ(top_classes(row, 9, 0.f).size(), 4u);  // the NaN is never above a min_score
}

std::filesystem::path labels_file(const std::vector<std::string>& labels) {
  const auto file = testing::temp_dir("classify-labels") / "labels.txt";
  std::ofstream out(file);
  for (const auto& l : labels) out << l << "\n";
  return file;
}

std::unique_ptr<Stage> make_classify(const std::string& yaml) {
  const auto origin = std::make_shared<ConfigOrigin>();
  origin->file = "classify.yaml";
  const YAML::Node node = YAML::Load(yaml);
  Params p(node, origin, "stage 'expr'");
  p.get<std::string>("name", "");
  p.get<std::string>("type", "");
  ModelTable models;
  StageArgs args{"expr", p, models};
  auto stage = stage_registry().at("classify")(args);
  p.finish();
  return stage;
}

Tensor f32(Shape shape, std::vector<float> v) { return Tensor::from_vector(std::move(shape), v); }

TEST(Classify, AttachesEachRowToTheDetectionItWasCutFrom) {
  const auto labels = labels_file({"cat", "dog", "fox"});
  const auto stage = make_classify(fmt::format("{{input: logits, crops: crops, labels: '{}'}}", labels.string()));
  Frame f;
  f.detections.resize(3);
  f.crop_parents["crops"] = {2, 0};
  f.tensors["logits"] = f32({2, 3}, {0.f, 0.f, std::log(2.f), 5.f, 1.f, 1.f});  // logits: softmax applies
  std::vector<Frame*> frames{&f};
  stage->process(frames);
  ASSERT_EQ(f.detections[2].classes.size(), 1u);
  const Classification& c = f.detections[2].classes[0];
  EXPECT_EQ(c.attribute, "expr");
  EXPECT_EQ(c.class_id, 2);
  EXPECT_EQ(c.label, "fox");
  EXPECT_NEAR(c.score, 0.5f, 1e-6);
  ASSERT_EQ(f.detections[0].classes.size(), 1u);
  EXPECT_EQ(f.detections[0].classes[0].label, "cat");
  EXPECT_NEAR(f.detections[0].classes[0].score, std::exp(5.f) / (std::exp(5.f) + 2 * std::exp(1.f)), 1e-6);
  EXPECT_TRUE(f.detections[1].classes.empty());
  EXPECT_TRUE(f.classes.empty());
  EXPECT_FLOAT_EQ(f.tensors.at("logits").data<float>()[3], 5.f);  // the model's output is left as it was
}

TEST(Classify, ProbabilitiesPassThroughAndTheWholePictureGoesToTheFrame) {
  const auto stage = make_classify("{input: probs, top_k: 2, min_score: 0.25, attribute: scene}");
  Frame f;
  f.tensors["probs"] = f32({1, 3, 1, 1}, {0.3f, 0.2f, 0.5f});
  std::vector<Frame*> frames{&f};
  stage->process(frames);
  ASSERT_EQ(f.classes.size(), 2u);
  EXPECT_EQ(f.classes[0].class_id, 2);
  EXPECT_EQ(f.classes[0].label, "2");  // no labels file: the id
  EXPECT_FLOAT_EQ(f.classes[0].score, 0.5f);
  EXPECT_EQ(f.classes[1].class_id, 0);
  EXPECT_EQ(f.classes[1].attribute, "scene");
  // softmax: on makes probabilities of them all the same.
  const auto forced = make_classify("{input: probs, softmax: on}");
  Frame g;
  g.tensors["probs"] = f32({1, 2}, {0.5f, 0.5f});
  std::vector<Frame*> gs{&g};
  forced->process(gs);
  ASSERT_EQ(g.classes.size(), 1u);
  EXPECT_FLOAT_EQ(g.classes[0].score, 0.5f);
  const auto off = make_classify("{input: probs, softmax: off}");
  Frame h;
  h.tensors["probs"] = f32({1, 2}, {3.f, 1.f});
  std::vector<Frame*> hs{&h};
  off->process(hs);
  EXPECT_FLOAT_EQ(h.classes.at(0).score, 3.f);
}

TEST(Classify, AFrameWithoutCropsHasNothingToClassify) {
  const auto stage = make_classify("{input: logits, crops: crops}");
  Frame f;  // the infer stage gives a frame of 0 crops no output
  f.detections.resize(1);
  f.crop_parents["crops"] = {};
  std::vector<Frame*> frames{&f};
  EXPECT_NO_THROW(stage->process(frames));
  EXPECT_TRUE(f.detections[0].classes.empty());
}

std::string error_of(Stage& stage, Frame& f) {
  std::vector<Frame*> frames{&f};
  try {
    stage.process(frames);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Classify, MismatchedFramesAreErrorsNamingTheStage) {
  const auto labels = labels_file({"cat", "dog", "fox"});
  const auto stage = make_classify(fmt::format("{{input: logits, crops: crops, labels: '{}'}}", labels.string()));
  Frame rows;
  rows.detections.resize(3);
  rows.crop_parents["crops"] = {0, 1, 2};
  rows.tensors["logits"] = f32({2, 3}, std::vector<float>(6, 0.f));
  std::string e = error_of(*stage, rows);
  EXPECT_NE(e.find("stage 'expr'"), std::string::npos) << e;
  EXPECT_NE(e.find("2 rows for the 3 crops of 'crops'"), std::string::npos) << e;
  Frame classes;
  classes.detections.resize(1);
  classes.crop_parents["crops"] = {0};
  classes.tensors["logits"] = f32({1, 4}, std::vector<float>(4, 0.f));
  e = error_of(*stage, classes);
  EXPECT_NE(e.find("4 classes but the labels file names 3"), std::string::npos) << e;
  Frame parent;
  parent.detections.resize(1);
  parent.crop_parents["crops"] = {5};
  parent.tensors["logits"] = f32({1, 3}, std::vector<float>(3, 0.f));
  e = error_of(*stage, parent);
  EXPECT_NE(e.find("cut from detection 5; the frame has 1"), std::string::npos) << e;
  Frame missing;
  missing.detections.resize(1);
  missing.crop_parents["crops"] = {0};
  e = error_of(*stage, missing);
  EXPECT_NE(e.find("no tensor 'logits'"), std::string::npos) << e;
  Frame no_parents;
  no_parents.tensors["logits"] = f32({1, 3}, std::vector<float>(3, 0.f));
  e = error_of(*stage, no_parents);
  EXPECT_NE(e.find("no crop parents for 'crops'"), std::string::npos) << e;
  const auto whole = make_classify("{input: logits}");
  Frame two;
  two.tensors["logits"] = f32({2, 3}, std::vector<float>(6, 0.f));
  e = error_of(*whole, two);
  EXPECT_NE(e.find("2 rows; a whole picture's has 1"), std::string::npos) << e;
}

// A stage that declares a classifier's output of the given shape (what an infer stage declares).
class FakeLogits final : public Stage {
 public:
  explicit FakeLogits(StageArgs& a) : Stage(a.name) {
    const auto dims = a.params.get<std::vector<std::int64_t>>("dims", {});
    produce("logits", TensorSpec{dims});
  }

 private:
  void do_process(std::span<Frame* const>) override {}
};
RW_REGISTER_STAGE("test_fake_logits", FakeLogits);

std::string pipeline(const std::string& dims, const std::string& classify_keys) {
  return fmt::format(R"(version: 1
sources:
  - name: a
    type: synthetic
    frames: 1
stages:
  - name: crops
    type: crops
    width: 8
    height: 8
  - name: fake
    type: test_fake_logits
    dims: {}
  - name: expr
    type: classify
    input: logits
{})",
                     dims, classify_keys);
}

TEST(Classify, ShapesKnownAtLoadAreCheckedThere) {
  const auto labels = labels_file({"cat", "dog", "fox"});
  const std::string with_labels = fmt::format("    crops: crops\n    labels: '{}'\n", labels.string());
  EXPECT_EQ(testing::load_error(pipeline("[-1, 3]", with_labels)), "");
  EXPECT_EQ(testing::load_error(pipeline("[-1, 3, 1, 1]", with_labels)), "");
  const std::vector<std::tuple<std::string, std::string, std::string>> cases{
      {"[-1, 5]", with_labels, "has 5 classes but the labels file names 3"},
      {"[-1, 3, 2]", with_labels, "a classifier's output is float [K, classes] or [K, classes, 1, 1]"},
      {"[-1, 3, 7, 7]", with_labels, "a classifier's output is float"},
      {"[-1, 2]", "    crops: crops\n    top_k: 3\n", "top_k 3 is more than the 2 classes"},
      {"[4, 3]", "", "4 rows for one picture"},
      {"[-1, 3]", "    crops: nothing\n", "reads tensor 'nothing' but no earlier stage writes it"},
  };
  for (const auto& [dims, keys, what] : cases) {
    const std::string e = testing::load_error(pipeline(dims, keys));
    EXPECT_NE(e.find(what), std::string::npos) << dims << " " << keys << " -> " << e;
    EXPECT_NE(e.find(testing::where(14, 5)), std::string::npos) << e;  // the stage's place
    EXPECT_NE(e.find("stage 'expr'"), std::string::npos) << e;
  }
}

TEST(Classify, MistakesInItsKeysFailAtTheirPlace) {
  const auto two = labels_file({"cat", "dog"});
  const std::vector<std::tuple<std::string, std::string, int>> cases{
      {"    softmax: maybe\n", "softmax", 17},
      {"    top_k: 0\n", "must be at least 1", 17},
      {fmt::format("    labels: '{}'\n    top_k: 3\n", two.string()), "3 is more than the 2 classes of the labels file", 18},
      {"    labels: no-such-labels.txt\n", "no such file", 17},
      {"    tpo_k: 1\n", "unknown key 'tpo_k'", 17},
  };
  for (const auto& [keys, what, line] : cases) {
    const std::string e = testing::load_error(pipeline("[-1, 3]", keys));
    EXPECT_NE(e.find(what), std::string::npos) << keys << " -> " << e;
    EXPECT_NE(e.find(fmt::format("test.yaml:{}:", line)), std::string::npos) << keys << " -> " << e;
  }
}

}  // namespace
}  // namespace redwood
