// configs/faces.yaml as shipped (sinks redirected) on Megamind.avi: BlazeFace finds the one face
// once it is on screen, inside the picture, with six keypoints inside its box's surroundings.

#include "pipelines/pipeline.hpp"
#include "support/onnx_builder.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace redwood {
namespace {

TEST(PipelineFacesEndToEnd, FindsTheFaceInMegamind) {
  const auto config = std::filesystem::path(REDWOOD_SOURCE_DIR) / "configs" / "faces.yaml";
  if (!std::filesystem::exists(testing::assets_dir() / "video" / "Megamind.avi")) GTEST_SKIP() << "assets missing";
  const auto dir = testing::temp_dir("faces-e2e");
  Pipeline pipeline(load_pipeline_file(config, {"sinks.pub.endpoint=ipc://" + (dir / "pub.sock").string(),
                                                "sinks.log.path=" + (dir / "faces.jsonl").string(),
                                                "sinks.annotated.path=" + (dir / "{stream}.avi").string(),
                                                "sources.megamind.start_frame=20"}));
  RunOptions options;
  options.max_frames = 5;
  const auto stats = pipeline.run(options);
  EXPECT_EQ(stats.streams.at(0).delivered, 5);
  EXPECT_TRUE(std::filesystem::file_size(dir / "megamind.avi") > 0);
  std::ifstream in(dir / "faces.jsonl");
  int frames = 0;
  for (std::string line; std::getline(in, line); ++frames) {
    const auto m = nlohmann::json::parse(line);
    ASSERT_EQ(m.at("detections").size(), 1u) << line;
    const auto& d = m.at("detections")[0];
    EXPECT_EQ(d.at("kind"), "face");
    EXPECT_GT(d.at("score").get<double>(), 0.75);
    const auto box = d.at("box").get<std::vector<double>>();
    EXPECT_GT(box[2], 60);  // a face of about 130 pixels in a 720 x 528 picture
    EXPECT_LT(box[2], 250);
    EXPECT_GE(box[0], 0);
    EXPECT_LE(box[0] + box[2], 720.5);
    ASSERT_EQ(d.at("keypoints").size(), 6u);
    for (const auto& k : d.at("keypoints")) {
      EXPECT_GT(k[0].get<double>(), box[0] - box[2] * 0.3);
      EXPECT_LT(k[0].get<double>(), box[0] + box[2] * 1.3);
    }
  }
  EXPECT_EQ(frames, 5);
}

}  // namespace
}  // namespace redwood
