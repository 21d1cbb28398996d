// The infer stage on a small generated model (y = 2x, dynamic batch): frames of three streams of
// different picture sizes are batched together, and each frame gets back exactly its own rows.
// A stage registered here checks every frame as it passes.

#include "pipelines/pipeline.hpp"
#include "pipelines/pipeline_text.hpp"
#include "support/onnx_builder.hpp"

#include <gtest/gtest.h>

#include <mutex>

namespace redwood {
namespace {

std::mutex g_mutex;
int g_checked = 0;
int g_mismatches = 0;

/// Checks that tensor "y" is twice tensor "x", element by element.
class CheckDouble final : public Stage {
 public:
  explicit CheckDouble(StageArgs& a) : Stage(a.name) {
    consume("x");
    consume("y");
  }

 private:
  void do_process(std::span<Frame* const> frames) override {
    for (Frame* f : frames) {
      const auto x = f->tensors.at("x").to_float_vector(), y = f->tensors.at("y").to_float_vector();
      std::lock_guard lock(g_mutex);
      ++g_checked;
      if (x.size() != y.size() || f->tensors.at("y").shape() != f->tensors.at("x").shape()) {
        ++g_mismatches;
        continue;
      }
      for (std::size_t i = 0; i < x.size(); ++i) g_mismatches += y[i] != 2 * x[i];
    }
  }
};
RW_REGISTER_STAGE("test_check_double", CheckDouble);

TEST(PipelineInfer, BatchesAcrossStreamsAndSplitsBack) {
  const auto dir = testing::temp_dir("infer-batch");
  testing::OnnxBuilder b(13);
  b.input("pic", onnx::TensorProto::FLOAT, {-1, 3, 8, 8}, {"N"});
  b.initializer("two", Tensor::from_vector<float>({1}, {2.f}));
  b.node("Mul", {"pic", "two"}, {"doubled"}, "mul");
  b.output("doubled", onnx::TensorProto::FLOAT, {-1, 3, 8, 8}, {"N"});
  b.save(dir / "double.onnx");
  Pipeline p(testing::pipeline_text("version: 1\n"
                                    "service: {max_in_flight: 4}\n"
                                    "sources:\n"
                                    "  - {name: a, type: synthetic, width: 64, height: 48, frames: 20}\n"
                                    "  - {name: b, type: synthetic, width: 32, height: 32, frames: 20}\n"
                                    "  - {name: c, type: synthetic, width: 40, height: 24, frames: 20}\n"
                                    "models:\n"
                                    "  double: {path: '" + (dir / "double.onnx").string() + "'}\n"
                                    "stages:\n"
                                    "  - {name: x, type: preprocess, model: double}\n"
                                    "  - {name: twice, type: infer, model: double, input: x, outputs: {doubled: y}, "
                                    "max_batch: 3, timeout_ms: 20}\n"
                                    "  - {name: check, type: test_check_double}\n"));
  const auto stats = p.run();
  for (const auto& s : stats.streams) EXPECT_EQ(s.delivered, 20);
  EXPECT_EQ(g_checked, 60);
  EXPECT_EQ(g_mismatches, 0);
  // Fewer runs than frames: frames were batched.
  const Stage& twice = *p.stages().at(1);
  EXPECT_LT(twice.calls(), 60);
}

TEST(PipelineInfer, SecondaryModelWithNoItemsLeavesNoOutput) {
  // A frame with zero items (no crops) skips the model; the frame still reaches the end.
  const auto dir = testing::temp_dir("infer-empty");
  testing::OnnxBuilder b(13);
  b.input("crops", onnx::TensorProto::FLOAT, {-1, 3, 48, 320}, {"K"});
  b.node("Identity", {"crops"}, {"same"}, "id");
  b.output("same", onnx::TensorProto::FLOAT, {-1, 3, 48, 320}, {"K"});
  b.save(dir / "id.onnx");
  Pipeline p(testing::pipeline_text("version: 1\n"
                                    "sources:\n"
                                    "  - {name: a, type: synthetic, width: 64, height: 48, frames: 4}\n"
                                    "models:\n"
                                    "  id: {path: '" + (dir / "id.onnx").string() + "'}\n"
                                    "stages:\n"
                                    "  - {name: crops, type: text_crops, output: rec_in}\n"
                                    "  - {name: rec, type: infer, model: id, input: rec_in, max_batch: 2}\n"));
  const auto stats = p.run();
  EXPECT_EQ(stats.streams[0].delivered, 4);
}

}  // namespace
}  // namespace redwood
