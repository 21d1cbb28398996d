// The detect stage on a real detector: UltraFace RFB-320 (the zoo's fr_detect.onnx, npm
// faceplugin-face-recognition-js) in a pipeline on frames of Megamind.avi, against the same decode
// done apart (scripts/detect_reference.py, numpy) on ONNX Runtime's outputs for the same input:
//
//   frame ─ preprocess ─> face_in ─> Redwood infer ─> scores, boxes ─> detect (ssd) ───> detections ─┐
//                           │                                                                         ├─ same faces:
//                           └─ .npy ─> node scripts/ort_run.js ─> *.npy ─> detect_reference.py ───────┘  boxes ≤ 1 px,
//                                                                                                         scores ≤ 1e-4
// Two decodes of the same model: its `boxes` output (the export decodes its priors itself:
// corners, normalized) and, through `anchors:`, its raw offsets (the graph's tensor before that
// decoding, made an output of a copy of the model) against the priors Redwood generates. The
// reference also decodes Redwood's own outputs, which must give Redwood's detections: that checks
// the decoder alone, apart from inference. Not vacuous: the frames hold faces, and every frame
// must give the same number of faces each way.

#include "core/npy.hpp"
#include "pipelines/config.hpp"
#include "pipelines/pipeline.hpp"
#include "stages/stage.hpp"
#include "support/test_support.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unistd.h>

namespace redwood {
namespace {

namespace fs = std::filesystem;

constexpr float kBoxTolerancePx = 1.f;
constexpr float kScoreTolerance = 1e-4f;
// The graph's box offsets before its own prior decoding (fr_detect.onnx, pinned by sha256 in
// scripts/fetch_assets.sh): Concat '462' [1, 4420, 4].
constexpr const char* kRawOffsets = "462";
// UltraFace RFB-320's priors, as faceplugin's fr_detect.js defines them.
constexpr const char* kAnchorsYaml =
    "{steps: [8, 16, 32, 64], min_sizes: [[10, 16, 24], [32, 48], [64, 96], [128, 192, 256]], variances: [0.1, 0.2]}";
constexpr const char* kAnchorsJson =
    R"({"steps": [8, 16, 32, 64], "min_sizes": [[10, 16, 24], [32, 48], [64, 96], [128, 192, 256]], "variances": [0.1, 0.2]})";
constexpr float kScoreThreshold = 0.5f;
constexpr float kIouThreshold = 0.4f;  // fr_detect.js's nms_threshold

struct Captured {
  std::string tag;  // "<stream>-<seq>": the files' prefix
  ImageTransform transform;
  int width = 0, height = 0;
  std::vector<Detection> detections;
};
std::mutex g_mutex;
std::vector<Captured> g_captured;
fs::path g_dir;
bool g_with_offsets = false;

/// Saves each frame's model input and Redwood's raw outputs as .npy, and keeps its detections.
class DetectCapture final : public Stage {
 public:
  explicit DetectCapture(StageArgs& a) : Stage(a.name) {
    for (const char* key : {"face_in", "scores", "boxes"}) consume(key);
    if (g_with_offsets) consume("offsets");
  }

 private:
  void do_process(std::span<Frame* const> frames) override {
    for (Frame* f : frames) {
      const std::string tag = fmt::format("{}-{}", f->stream_name, f->seq);
      for (const char* key : {"face_in", "scores", "boxes", "offsets"}) {
        if (f->tensors.count(key)) write_npy(g_dir / fmt::format("{}-{}.npy", tag, key), f->tensors.at(key));
      }
      std::lock_guard lock(g_mutex);
      g_captured.push_back({tag, f->transforms.at("face_in"), f->image.width, f->image.height, f->detections});
    }
  }
};
RW_REGISTER_STAGE("test_detect_capture", DetectCapture);

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// detect_reference.py's faces for the outputs in files `scores` and `boxes` of captured frame c.
std::vector<Detection> reference(const Captured& c, const fs::path& scores, const fs::path& boxes, bool anchors) {
  const ImageTransform& t = c.transform;
  const fs::path out = g_dir / (c.tag + "-reference.json");
  const std::string command =
      fmt::format("/usr/bin/python3 {} --boxes {} --scores {} --transform {},{},{},{},{},{} --picture {},{} --score-threshold {} "
                  "--iou-threshold {} --background 0 {} > {} 2>&1",
                  shell_quote((fs::path(REDWOOD_SOURCE_DIR) / "scripts" / "detect_reference.py").string()), shell_quote(boxes.string()),
                  shell_quote(scores.string()), t.scale_x, t.scale_y, t.pad_x, t.pad_y, t.tensor_width, t.tensor_height, c.width,
                  c.height, kScoreThreshold, kIouThreshold, anchors ? "--anchors " + shell_quote(kAnchorsJson) : "",
                  shell_quote(out.string()));
  std::vector<Detection> found;
  if (std::system(command.c_str()) != 0) {
    ADD_FAILURE() << command << "\n" << read_text(out);
    return found;
  }
  for (const auto& j : nlohmann::json::parse(read_text(out))) {
    Detection d;
    d.class_id = j.at("class_id").get<int>();
    d.score = j.at("score").get<float>();
    const auto b = j.at("box").get<std::vector<float>>();
    d.box = {b[0], b[1], b[2], b[3]};
    found.push_back(d);
  }
  return found;
}

struct Agreement {
  int faces = 0;
  float box_diff = 0, score_diff = 0;  // the largest seen
};

/// Expects the same faces both ways (each of `got` matched to the nearest of `want`).
void expect_same_faces(const std::vector<Detection>& got, const std::vector<Detection>& want, Agreement& a) {
  ASSERT_EQ(got.size(), want.size());
  std::vector<bool> used(want.size(), false);
  for (const Detection& g : got) {
    float best = INFINITY;
    std::size_t at = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const RectF& w = want[i].box;
      const float d = std::max({std::fabs(g.box.x - w.x), std::fabs(g.box.y - w.y), std::fabs(g.box.x + g.box.width - w.x - w.width),
                                std::fabs(g.box.y + g.box.height - w.y - w.height)});
      if (!used[i] && d < best) best = d, at = i;
    }
    ASSERT_LT(best, INFINITY);
    used[at] = true;
    EXPECT_LE(best, kBoxTolerancePx) << "face at " << g.box.x << "," << g.box.y;
    EXPECT_EQ(g.class_id, want[at].class_id);
    EXPECT_NEAR(g.score, want[at].score, kScoreTolerance);
    a.box_diff = std::max(a.box_diff, best);
    a.score_diff = std::max(a.score_diff, std::fabs(g.score - want[at].score));
    ++a.faces;
  }
}

std::vector<Detection> of_kind(const std::vector<Detection>& all, const std::string& kind) {
  std::vector<Detection> out;
  for (const auto& d : all) {
    if (d.kind == kind) out.push_back(d);
  }
  return out;
}

TEST(DetectFidelity, UltraFaceFacesAgreeWithOnnxRuntime) {
  const fs::path assets = testing::assets_dir();
  const fs::path model = assets / "models" / "zoo" / "fr_detect.onnx";
  const fs::path video = assets / "video" / "Megamind.avi";
  const fs::path runner = fs::path(REDWOOD_SOURCE_DIR) / "scripts" / "ort_run.js";
  if (!fs::exists(model) || !fs::exists(video)) GTEST_SKIP() << "assets missing (model zoo, Megamind.avi): run scripts/setup.sh";
  if (!fs::exists(assets / "tools" / "ort" / "node_modules" / "onnxruntime-node" / "package.json")) {
    GTEST_SKIP() << "ONNX Runtime (onnxruntime-node) missing: run scripts/setup.sh";
  }
  if (std::system("command -v node >/dev/null 2>&1") != 0) GTEST_SKIP() << "node not found: run scripts/setup.sh";
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) GTEST_SKIP() << "/usr/bin/python3 with numpy not found";

  g_dir = fs::temp_directory_path() / ("redwood_detect_fidelity_" + std::to_string(::getpid()));
  fs::remove_all(g_dir);
  fs::create_directories(g_dir);
  g_captured.clear();
  // A copy of the model with its raw offsets as an output too (needs python's onnx package);
  // without it only the decoded boxes are compared.
  const fs::path with_offsets = g_dir / "fr_detect_offsets.onnx";
  const std::string add_output = fmt::format(
      "/usr/bin/python3 -c \"import onnx, sys; m = onnx.load(sys.argv[1]); "
      "m.graph.output.append(onnx.helper.make_tensor_value_info(sys.argv[3], onnx.TensorProto.FLOAT, [1, 4420, 4])); "
      "onnx.save(m, sys.argv[2])\" {} {} {} > /dev/null 2>&1",
      shell_quote(model.string()), shell_quote(with_offsets.string()), kRawOffsets);
  g_with_offsets = std::system(add_output.c_str()) == 0;
  if (!g_with_offsets) std::printf("[detect-fidelity] python3's onnx package missing: the anchors decode is not compared\n");

  // Three moments of the video, two frames each; the package's preprocessing: a stretch to
  // 320 x 240, RGB, (x - 127) / 128.
  const std::string yaml = fmt::format(R"(version: 1
name: detect-fidelity
sources:
  - {{name: a, type: video, path: {video}, start_frame: 40}}
  - {{name: b, type: video, path: {video}, start_frame: 120}}
  - {{name: c, type: video, path: {video}, start_frame: 200}}
models:
  ultraface: {{path: {model}}}
stages:
  - name: pre
    type: preprocess
    model: ultraface
    output: face_in
    resize: stretch
    color: rgb
    scale: 0.0078125
    mean: [0.9921875, 0.9921875, 0.9921875]
    std: [1, 1, 1]
  - name: infer
    type: infer
    model: ultraface
    input: face_in
    outputs: {outputs}
  - name: faces
    type: detect
    format: ssd
    boxes: boxes
    scores: scores
    transform: face_in
    labels: labels/ultraface.txt
    kind: face
    score_threshold: {threshold}
    iou_threshold: {iou}
{anchors_stage}  - name: capture
    type: test_detect_capture
)",
      fmt::arg("video", video.string()), fmt::arg("model", (g_with_offsets ? with_offsets : model).string()),
      fmt::arg("outputs", g_with_offsets ? fmt::format("{{scores: scores, boxes: boxes, '{}': offsets}}", kRawOffsets)
                                         : std::string("{scores: scores, boxes: boxes}")),
      fmt::arg("threshold", kScoreThreshold), fmt::arg("iou", kIouThreshold),
      fmt::arg("anchors_stage", g_with_offsets ? fmt::format("  - name: faces_by_anchors\n    type: detect\n    format: ssd\n"
                                                             "    boxes: offsets\n    scores: scores\n    transform: face_in\n"
                                                             "    labels: labels/ultraface.txt\n    kind: face_by_anchors\n"
                                                             "    score_threshold: {}\n    iou_threshold: {}\n    anchors: {}\n",
                                                             kScoreThreshold, kIouThreshold, kAnchorsYaml)
                                               : std::string()));
  Pipeline pipeline(parse_pipeline_text(yaml, fs::path(REDWOOD_SOURCE_DIR) / "configs" / "detect-fidelity.yaml"));
  RunOptions run;
  run.max_frames = 2;
  pipeline.run(run);
  ASSERT_EQ(g_captured.size(), 6u);
  std::sort(g_captured.begin(), g_captured.end(), [](const Captured& x, const Captured& y) { return x.tag < y.tag; });

  Agreement ort, ort_anchors, decode_only;
  for (const Captured& c : g_captured) {
    SCOPED_TRACE(c.tag);
    const fs::path out = g_dir / (c.tag + "-ort");
    const std::string command = fmt::format("node {} {} --input {} --out {} > /dev/null 2> {}", shell_quote(runner.string()),
                                            shell_quote((g_with_offsets ? with_offsets : model).string()),
                                            shell_quote("input=" + (g_dir / (c.tag + "-face_in.npy")).string()),
                                            shell_quote(out.string()), shell_quote((g_dir / "ort.err").string()));
    ASSERT_EQ(std::system(command.c_str()), 0) << command << "\n" << read_text(g_dir / "ort.err");
    const auto faces = of_kind(c.detections, "face");
    for (const auto& d : faces) {
      EXPECT_EQ(d.label, "face");
      std::printf("[detect-fidelity] %s face %.4f at %.1f,%.1f %.1fx%.1f\n", c.tag.c_str(), d.score, d.box.x, d.box.y, d.box.width,
                  d.box.height);
    }
    expect_same_faces(faces, reference(c, out / "scores.npy", out / "boxes.npy", false), ort);
    expect_same_faces(faces, reference(c, g_dir / (c.tag + "-scores.npy"), g_dir / (c.tag + "-boxes.npy"), false), decode_only);
    if (g_with_offsets) {
      expect_same_faces(of_kind(c.detections, "face_by_anchors"),
                        reference(c, out / "scores.npy", out / fmt::format("{}.npy", kRawOffsets), true), ort_anchors);
    }
  }
  std::printf("[detect-fidelity] %d faces in 6 frames; Redwood vs ONNX Runtime + reference decode: boxes within %.3g px, scores "
              "within %.3g\n",
              ort.faces, ort.box_diff, ort.score_diff);
  std::printf("[detect-fidelity] decoder alone (reference on Redwood's outputs): boxes within %.3g px, scores within %.3g\n",
              decode_only.box_diff, decode_only.score_diff);
  if (g_with_offsets) {
    std::printf("[detect-fidelity] anchors decode of the raw offsets vs ONNX Runtime + reference: %d faces, boxes within %.3g px, "
                "scores within %.3g\n",
                ort_anchors.faces, ort_anchors.box_diff, ort_anchors.score_diff);
    EXPECT_EQ(ort_anchors.faces, ort.faces);
  }
  EXPECT_GE(ort.faces, 3);  // the frames hold faces: the comparison is not vacuous
  if (!HasFailure() && std::getenv("REDWOOD_FIDELITY_KEEP") == nullptr) fs::remove_all(g_dir);
}

}  // namespace
}  // namespace redwood
