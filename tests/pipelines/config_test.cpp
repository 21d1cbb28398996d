// Pipeline files: every kind of mistake fails at load with file:line:column, and --set
// overrides reach any value.

#include "pipelines/pipeline.hpp"
#include "pipelines/pipeline_text.hpp"

#include <gtest/gtest.h>

namespace redwood {
namespace {

using testing::pipeline_text;

const char* kSynthetic = R"(version: 1
name: t
sources:
  - name: a
    type: synthetic
    width: 64
    height: 48
    frames: 3
)";

/// The message of the ConfigError that building `yaml` throws ("" when none).
std::string load_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    Pipeline p(pipeline_text(yaml, overrides));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

std::string where(int line, int column) {
  return (testing::assets_dir() / "test.yaml").string() + ":" + std::to_string(line) + ":" + std::to_string(column) + ":";
}

TEST(PipelineConfig, BuildsAMinimalPipeline) {
  Pipeline p(pipeline_text(kSynthetic));
  EXPECT_EQ(p.name(), "t");
  EXPECT_EQ(p.stream_names(), std::vector<std::string>{"a"});
}

TEST(PipelineConfig, UnknownKeyNamesLineAndColumn) {
  const std::string e = load_error(std::string(kSynthetic) + "    widht: 3\n");
  EXPECT_NE(e.find(where(9, 5)), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'widht'"), std::string::npos) << e;
}

TEST(PipelineConfig, UnknownTopLevelKey) {
  const std::string e = load_error(std::string(kSynthetic) + "stages_: []\n");
  EXPECT_NE(e.find(where(9, 1)), std::string::npos) << e;
  EXPECT_NE(e.find("unknown key 'stages_'"), std::string::npos) << e;
}

TEST(PipelineConfig, AKeyGivenTwiceIsRefusedAtItsLine) {
  const std::string e = load_error(std::string(kSynthetic) + "    frames: 9\n");
  EXPECT_NE(e.find(where(9, 5)), std::string::npos) << e;
  EXPECT_NE(e.find("key 'frames' is given twice in this map"), std::string::npos) << e;
  EXPECT_NE(load_error("version: 1\nversion: 1\n").find("key 'version' is given twice"), std::string::npos);
}

TEST(PipelineConfig, WrongTypeNamesTheValue) {
  std::string yaml = kSynthetic;
  yaml.replace(yaml.find("width: 64"), 9, "width: wide");
  const std::string e = load_error(yaml);
  EXPECT_NE(e.find(where(6, 12)), std::string::npos) << e;
  EXPECT_NE(e.find("expected an integer, got 'wide'"), std::string::npos) << e;
}

TEST(PipelineConfig, MissingFileNamesThePath) {
  const std::string e = load_error(R"(version: 1
sources:
  - name: v
    type: video
    path: video/no-such.avi
)");
  EXPECT_NE(e.find(where(5, 11)), std::string::npos) << e;
  EXPECT_NE(e.find("no such file 'video/no-such.avi'"), std::string::npos) << e;
}

TEST(PipelineConfig, MissingRequiredKeyAndBadVersion) {
  EXPECT_NE(load_error("name: x\nsources: []\n").find("missing required key 'version'"), std::string::npos);
  const std::string e = load_error(std::string(kSynthetic).replace(9, 1, "2"));
  EXPECT_NE(e.find(where(1, 10)), std::string::npos) << e;
}

TEST(PipelineConfig, SyntaxErrorNamesLineAndColumn) {
  try {
    pipeline_text("version: 1\nsources: [\n  - a: b\n");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("test.yaml:"), std::string::npos) << e.what();
  }
}

TEST(PipelineConfig, UnknownTypeListsKnownOnes) {
  std::string yaml = kSynthetic;
  yaml.replace(yaml.find("type: synthetic"), 15, "type: camera");
  const std::string e = load_error(yaml);
  EXPECT_NE(e.find(where(5, 11)), std::string::npos) << e;
  EXPECT_NE(e.find("unknown source type 'camera'"), std::string::npos) << e;
  EXPECT_NE(e.find("synthetic"), std::string::npos) << e;
}

const char* kFaces = R"(version: 1
sources:
  - name: a
    type: synthetic
    frames: 2
models:
  face: {path: models/face_detection_front_128x128_barracuda.onnx}
  det: {path: models/ch_PP-OCRv4_det_infer.onnx}
stages:
  - name: pre
    type: preprocess
    model: face
    output: face_in
    scale: 0.00784314
    mean: [1, 1, 1]
  - name: face
    type: infer
    model: face
    input: face_in
)";

TEST(PipelineConfig, FixedModelSizeRejectsAnotherWidth) {
  std::string yaml = kFaces;
  yaml.insert(yaml.find("    scale:"), "    width: 256\n");
  const std::string e = load_error(yaml);
  EXPECT_NE(e.find(where(14, 12)), std::string::npos) << e;
  EXPECT_NE(e.find("width is fixed at 128"), std::string::npos) << e;
}

TEST(PipelineConfig, SizeNotAMultipleTheModelNeeds) {
  std::string yaml = kFaces;
  yaml.replace(yaml.find("model: face\n    output"), 11, "model: det\n    width: 418\n    height: 320\n    multiple_of: 32");
  const std::string e = load_error(yaml);
  EXPECT_NE(e.find(where(13, 12)), std::string::npos) << e;
  EXPECT_NE(e.find("418 is not a multiple of 32"), std::string::npos) << e;
}

TEST(PipelineConfig, ModelInputAStageCannotFeed) {
  // A tensor shaped for the text detector (NCHW, 3 x 320 x 416) cannot feed BlazeFace (NHWC 128).
  std::string yaml = kFaces;
  yaml.replace(yaml.find("model: face\n    output"), 11, "model: det\n    width: 416\n    height: 320");
  const std::string e = load_error(yaml);
  EXPECT_NE(e.find(where(21, 12)), std::string::npos) << e;
  EXPECT_NE(e.find("cannot feed input 'input:0'"), std::string::npos) << e;
}

TEST(PipelineConfig, StageReadingAnUnwrittenTensor) {
  std::string yaml = kFaces;
  yaml.replace(yaml.find("input: face_in"), 14, "input: nothing");
  const std::string e = load_error(yaml);
  EXPECT_NE(e.find(where(16, 5)), std::string::npos) << e;
  EXPECT_NE(e.find("reads tensor 'nothing' but no earlier stage writes it"), std::string::npos) << e;
}

// A decoder's transform must be a preprocess stage's output (only those carry the picture
// mapping): another tensor fails at load, not with a missing key at the first frame.
TEST(PipelineConfig, TransformMustNameAPreprocessOutput) {
  std::string yaml = kFaces;
  yaml += "    outputs: {\"Identity:0\": s16, \"Identity_1:0\": s8, \"Identity_2:0\": b16, \"Identity_3:0\": b8}\n"
          "  - {name: post, type: blazeface, scores: [s16, s8], boxes: [b16, b8], transform: s16, input_size: 128}\n";
  const std::string e = load_error(yaml);
  EXPECT_NE(e.find("transform 's16' is not a preprocess stage's output"), std::string::npos) << e;
  yaml.replace(yaml.find("transform: s16"), 14, "transform: face_in");
  EXPECT_EQ(load_error(yaml), "");
}

TEST(PipelineConfig, VideoSinkFrameRateMustBePositive) {
  for (const char* fps : {"0", "-5"}) {
    const std::string e = load_error(std::string(kSynthetic) + "sinks:\n  - {name: v, type: video, path: /tmp/x.avi, fps: " + fps + "}\n");
    EXPECT_NE(e.find("fps: must be above 0 and at most 1000"), std::string::npos) << fps << ": " << e;
  }
}

// ZeroMQ would take a TCP port modulo 65536; one out of range is refused at load.
TEST(PipelineConfig, ZmqPortOutOfRange) {
  for (const char* endpoint : {"tcp://127.0.0.1:99999", "tcp://127.0.0.1:0", "tcp://127.0.0.1:http"}) {
    const std::string e = load_error(std::string(kSynthetic) + "sinks:\n  - {name: pub, type: zmq, endpoint: '" + endpoint + "'}\n");
    EXPECT_NE(e.find("the port must be from 1 to 65535"), std::string::npos) << endpoint << ": " << e;
  }
}

TEST(PipelineConfig, UnknownModelName) {
  std::string yaml = kFaces;
  yaml.replace(yaml.find("model: face\n    input"), 11, "model: body");
  const std::string e = load_error(yaml);
  EXPECT_NE(e.find(where(18, 12)), std::string::npos) << e;
  EXPECT_NE(e.find("no model named 'body'"), std::string::npos) << e;
}

TEST(PipelineConfig, SetOverridesAnyValue) {
  Pipeline p(pipeline_text(kSynthetic, {"name=renamed", "sources.a.frames=5", "service.max_in_flight=7"}));
  EXPECT_EQ(p.name(), "renamed");
  EXPECT_EQ(p.service().max_in_flight, 7);
  EXPECT_EQ(p.run().streams.at(0).delivered, 5);
}

TEST(PipelineConfig, SetErrorsNameTheOverride) {
  std::string e = load_error(kSynthetic, {"sources.a.width=wide"});
  EXPECT_NE(e.find("--set sources.a.width=wide:"), std::string::npos) << e;
  EXPECT_NE(e.find("expected an integer"), std::string::npos) << e;
  e = load_error(kSynthetic, {"sources.a.colour=red"});
  EXPECT_NE(e.find("unknown key 'colour'"), std::string::npos) << e;
  EXPECT_THROW(pipeline_text(kSynthetic, {"sources.b.width=3"}), ConfigError);
  EXPECT_THROW(pipeline_text(kSynthetic, {"no-equals-sign"}), ConfigError);
}

// A list part of a --set path that is a huge index, or a list whose elements have a list as their
// name: a ConfigError naming the override, where std::out_of_range (std::stoul) and yaml-cpp's
// TypedBadConversion escaped (found by tests/fuzz/pipeline_config_fuzz.cpp).
TEST(PipelineConfig, SetPathsThatMatchNoElementAreConfigErrors) {
  try {
    pipeline_text(kSynthetic, {"sources.99999999999999999999999.width=3"});
    FAIL() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--set sources.99999999999999999999999.width=3: no element named "
                                         "'99999999999999999999999'"),
              std::string::npos)
        << e.what();
  }
  const std::string listed_name = std::string(kSynthetic) + "  - name: [b, c]\n    type: synthetic\n";
  EXPECT_THROW(pipeline_text(listed_name, {"sources.b.width=3"}), ConfigError);
  Pipeline p(pipeline_text(kSynthetic, {"sources.0.frames=2"}));  // an index still selects
  EXPECT_EQ(p.run().streams.at(0).delivered, 2);
}

// A key that is a list or a map, in the file or in a --set value: refused at its place, where
// Params met it as yaml-cpp's TypedBadConversion (found by tests/fuzz/pipeline_config_fuzz.cpp).
// A path the system cannot look up (longer than PATH_MAX): the located error, where
// std::filesystem::exists threw filesystem_error (found by tests/fuzz/pipeline_config_fuzz.cpp).
TEST(PipelineConfig, APathTooLongToLookUpIsAConfigError) {
  const std::string e = load_error(std::string(kSynthetic) + "models:\n  m:\n    path: " + std::string(5000, 'a') + "\n");
  EXPECT_NE(e.find(where(11, 11) + " model 'm': path: cannot look up 'aaaa"), std::string::npos) << e.substr(0, 300);
}

TEST(PipelineConfig, KeysThatAreListsOrMapsAreRefusedAtTheirPlace) {
  std::string e = load_error(std::string(kSynthetic) + "    [x, y]: 1\n");
  EXPECT_NE(e.find(where(9, 5) + " a key is a name, not a list or a map"), std::string::npos) << e;
  e = load_error(std::string(kSynthetic) + "service: {{a: b}: 1}\n");
  EXPECT_NE(e.find(where(9, 11) + " a key is a name, not a list or a map"), std::string::npos) << e;
  EXPECT_THROW(pipeline_text(kSynthetic, {"service={[a]: 1}"}), ConfigError);
}

}  // namespace
}  // namespace redwood
