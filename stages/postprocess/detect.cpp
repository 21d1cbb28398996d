// detect stage: a detector's output tensors -> Frame::detections (picture pixels) with class id,
// label and score, best first. Decoders in detect.hpp; overlap suppression in nms.hpp.
//
//   - name: objects
//     type: detect
//     format: yolo_v8          # yolo_v5, yolo_v8 (= yolo_v11), ssd, detr
//     input: out0              # yolo: the one output tensor
//     # boxes: loc             # ssd / detr: the two output tensors
//     # scores: conf           #   (detr: its class logits)
//     transform: det_in        # the preprocess tensor whose mapping brings boxes back
//     labels: ../labels/coco.txt  # one class per line (relative to this file)
//     kind: object             # Detection::kind
//     score_threshold: 0.25
//     class_thresholds: {person: 0.5, 2: 0.4}   # by label or id
//     classes: [person, car]   # keep only these (labels or ids)
//     iou_threshold: 0.45
//     max_detections: 300      # per frame
//     class_agnostic: false    # true: boxes of different classes suppress each other
//     box_units: pixels        # of the model input (default: pixels for yolo, normalized else)
//     activation: none         # sigmoid (yolo logits), softmax (ssd logits; detr's default)
//     layout: auto             # yolo_v8: channels_first [N, 4+C, B], boxes_first [N, B, 4+C]
//     background: 0            # ssd: the background class (or none)
//     anchors:                 # ssd: boxes are offsets against these priors (else corners)
//       steps: [8, 16, 32, 64]
//       min_sizes: [[10, 16, 24], [32, 48], [64, 96], [128, 192, 256]]
//       variances: [0.1, 0.2]
//       centers: cells         # or stride
//       clip: true
//
// NMS runs in model-input pixels (as Ultralytics does: a stretched picture does not change which
// boxes overlap), then boxes map to the picture and are clipped to it.

#include "stages/postprocess/detect.hpp"

#include "stages/postprocess/labels.hpp"
#include "stages/stage.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>

namespace redwood {

namespace {

constexpr float kNever = std::numeric_limits<float>::infinity();

float sigmoid(float x) { return 1.f / (1.f + std::exp(-std::clamp(x, -80.f, 80.f))); }

/// Softmax of n values into out.
void softmax(const float* in, std::size_t stride, int n, float* out) {
  float top = -std::numeric_limits<float>::infinity();
  for (int c = 0; c < n; ++c) top = std::max(top, in[c * stride]);
  float sum = 0;
  for (int c = 0; c < n; ++c) sum += out[c] = std::exp(in[c * stride] - top);
  for (int c = 0; c < n; ++c) out[c] /= sum;
}

/// A candidate's box from centre form, scaled to input pixels; nullopt when degenerate.
std::optional<RectF> centre_box(float cx, float cy, float w, float h, const DecodeOptions& o) {
  const bool norm = o.units == BoxUnits::kNormalized;
  const float sx = norm ? o.input_width : 1.f, sy = norm ? o.input_height : 1.f;
  const RectF r{(cx - w / 2) * sx, (cy - h / 2) * sy, w * sx, h * sy};
  if (!std::isfinite(r.x) || !std::isfinite(r.y) || !(r.width > 0) || !(r.height > 0) || !std::isfinite(r.width) ||
      !std::isfinite(r.height)) {
    return std::nullopt;
  }
  return r;
}

/// YOLO's class part: the best class of `classes` values `stride` apart, after the activation.
std::pair<int, float> best_class(const float* p, std::size_t stride, int classes, ScoreActivation a) {
  int best = -1;
  float top = -std::numeric_limits<float>::infinity();
  for (int c = 0; c < classes; ++c) {
    if (p[c * stride] > top) {
      top = p[c * stride];
      best = c;
    }
  }
  return {best, a == ScoreActivation::kSigmoid ? sigmoid(top) : top};  // sigmoid is monotonic
}

}  // namespace

std::vector<ScoredBox> decode_yolo_v5(const float* data, int boxes, int classes, const DecodeOptions& o) {
  std::vector<ScoredBox> out;
  const auto row_size = static_cast<std::size_t>(5 + classes);
  for (int i = 0; i < boxes; ++i) {
    const float* r = data + i * row_size;
    const float objectness = o.activation == ScoreActivation::kSigmoid ? sigmoid(r[4]) : r[4];
    const auto [c, class_score] = best_class(r + 5, 1, classes, o.activation);
    if (c < 0) continue;
    const float score = objectness * class_score;
    if (!(score >= o.thresholds[c])) continue;
    if (const auto box = centre_box(r[0], r[1], r[2], r[3], o)) out.push_back({*box, score, c});
  }
  return out;
}

std::vector<ScoredBox> decode_yolo_v8(const float* data, int boxes, int classes, bool channels_first,
                                      const DecodeOptions& o) {
  std::vector<ScoredBox> out;
  // Element (attribute a, box i) lies at i * box_step + a * attr_step.
  const std::size_t attr_step = channels_first ? static_cast<std::size_t>(boxes) : 1;
  const std::size_t box_step = channels_first ? 1 : static_cast<std::size_t>(4 + classes);
  for (int i = 0; i < boxes; ++i) {
    const float* r = data + i * box_step;
    const auto [c, score] = best_class(r + 4 * attr_step, attr_step, classes, o.activation);
    if (c < 0 || !(score >= o.thresholds[c])) continue;
    if (const auto box = centre_box(r[0], r[attr_step], r[2 * attr_step], r[3 * attr_step], o)) out.push_back({*box, score, c});
  }
  return out;
}

std::vector<Prior> generate_priors(const PriorSpec& spec, int input_width, int input_height) {
  std::vector<Prior> priors;
  const auto clip = [&](float v) { return spec.clip ? std::clamp(v, 0.f, 1.f) : v; };
  for (std::size_t k = 0; k < spec.steps.size(); ++k) {
    const int step = spec.steps[k];
    const int cells_x = (input_width + step - 1) / step, cells_y = (input_height + step - 1) / step;
    for (int y = 0; y < cells_y; ++y) {
      for (int x = 0; x < cells_x; ++x) {
        const float cx = spec.centers_on_cells ? (x + 0.5f) / cells_x : (x + 0.5f) * step / input_width;
        const float cy = spec.centers_on_cells ? (y + 0.5f) / cells_y : (y + 0.5f) * step / input_height;
        for (const float size : spec.min_sizes[k]) {
          priors.push_back({clip(cx), clip(cy), clip(size / input_width), clip(size / input_height)});
        }
      }
    }
  }
  return priors;
}

std::vector<ScoredBox> decode_ssd(const float* boxes, const float* scores, int count, int classes,
                                  const std::vector<Prior>& priors, std::array<float, 2> variances,
                                  const DecodeOptions& o) {
  std::vector<ScoredBox> out;
  std::vector<float> probabilities(static_cast<std::size_t>(classes));
  for (int i = 0; i < count; ++i) {
    const float* s = scores + static_cast<std::size_t>(i) * classes;
    if (o.activation == ScoreActivation::kSoftmax) {
      softmax(s, 1, classes, probabilities.data());
    } else {
      for (int c = 0; c < classes; ++c) probabilities[c] = o.activation == ScoreActivation::kSigmoid ? sigmoid(s[c]) : s[c];
    }
    std::optional<RectF> box;
    bool decoded = false;
    for (int c = 0; c < classes; ++c) {
      if (!(probabilities[c] >= o.thresholds[c])) continue;
      if (!decoded) {  // only boxes some class wants are decoded
        decoded = true;
        const float* b = boxes + static_cast<std::size_t>(i) * 4;
        if (priors.empty()) {
          box = centre_box((b[0] + b[2]) / 2, (b[1] + b[3]) / 2, b[2] - b[0], b[3] - b[1], o);
        } else {
          const Prior& p = priors[static_cast<std::size_t>(i)];
          DecodeOptions normalized = o;
          normalized.units = BoxUnits::kNormalized;
          box = centre_box(p.cx + b[0] * variances[0] * p.w, p.cy + b[1] * variances[0] * p.h,
                           p.w * std::exp(b[2] * variances[1]), p.h * std::exp(b[3] * variances[1]), normalized);
        }
      }
      if (box) out.push_back({*box, probabilities[c], c});
    }
  }
  return out;
}

std::vector<ScoredBox> decode_detr(const float* boxes, const float* logits, int queries, int classes,
                                   const DecodeOptions& o) {
  std::vector<ScoredBox> out;
  std::vector<float> probabilities(static_cast<std::size_t>(classes + 1));
  DecodeOptions normalized = o;
  normalized.units = BoxUnits::kNormalized;
  for (int q = 0; q < queries; ++q) {
    const float* l = logits + static_cast<std::size_t>(q) * (classes + 1);
    if (o.activation == ScoreActivation::kSoftmax) {
      softmax(l, 1, classes + 1, probabilities.data());
    } else {
      for (int c = 0; c <= classes; ++c) probabilities[c] = o.activation == ScoreActivation::kSigmoid ? sigmoid(l[c]) : l[c];
    }
    const auto best = std::max_element(probabilities.begin(), probabilities.begin() + classes);
    const int c = static_cast<int>(best - probabilities.begin());
    if (classes == 0 || !(*best >= o.thresholds[c])) continue;
    const float* b = boxes + static_cast<std::size_t>(q) * 4;
    if (const auto box = centre_box(b[0], b[1], b[2], b[3], o.units == BoxUnits::kPixels ? o : normalized)) {
      out.push_back({*box, *best, c});
    }
  }
  return out;
}

namespace {

enum class Format { kYoloV5, kYoloV8, kSsd, kDetr };
enum class Layout { kAuto, kChannelsFirst, kBoxesFirst };

/// A class named in `classes:` or `class_thresholds:`: an id, or a label of the labels file.
int class_id_of(const Params& p, const std::string& key, const YAML::Node& node, const std::vector<std::string>& labels) {
  const std::string text = node.IsScalar() ? node.Scalar() : std::string();
  const auto where = [&](const std::string& message) { p.origin().fail(node, fmt::format("{}: {}: {}", p.what(), key, message)); };
  if (!node.IsScalar() || text.empty()) where("expected a class label or id");
  const auto named = std::find(labels.begin(), labels.end(), text);
  if (named != labels.end()) return static_cast<int>(named - labels.begin());
  if (std::all_of(text.begin(), text.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) && text.size() < 9) {
    const int id = std::stoi(text);
    if (!labels.empty() && id >= static_cast<int>(labels.size())) {
      where(fmt::format("class id {} is past the labels file's {} classes", id, labels.size()));
    }
    return id;
  }
  if (labels.empty()) where(fmt::format("'{}' is not a class id, and the stage has no labels file to name classes", text));
  where(fmt::format("no class '{}' in the labels file ({} classes: {}{})", text, labels.size(),
                    fmt::join(labels.begin(), labels.begin() + std::min<std::size_t>(labels.size(), 8), ", "),
                    labels.size() > 8 ? ", ..." : ""));
  return -1;  // not reached: where() throws
}

class DetectStage final : public Stage {
 public:
  explicit DetectStage(StageArgs& args) : Stage(args.name) {
    Params& p = args.params;
    remember_place(p);
    if (!p.has("format")) p.fail("format", "missing required key 'format' (yolo_v5, yolo_v8, yolo_v11, ssd, detr)");
    const std::string format = p.choice("format", "", {"yolo_v5", "yolo_v8", "yolo_v11", "ssd", "detr"});
    format_ = format == "yolo_v5" ? Format::kYoloV5 : format == "ssd" ? Format::kSsd : format == "detr" ? Format::kDetr : Format::kYoloV8;
    const bool yolo = format_ == Format::kYoloV5 || format_ == Format::kYoloV8;
    if (yolo) {
      input_ = p.require<std::string>("input");
      consume(input_);
    } else {
      boxes_ = p.require<std::string>("boxes");
      scores_ = p.require<std::string>("scores");
      consume(boxes_);
      consume(scores_);
    }
    transform_ = p.require<std::string>("transform");
    consume_transform(transform_);

    labels_ = read_labels(p, "labels");
    kind_ = p.get<std::string>("kind", "object");
    score_threshold_ = p.get<float>("score_threshold", 0.25f);
    if (!(score_threshold_ >= 0 && score_threshold_ <= 1)) p.fail("score_threshold", "must be in [0, 1]");
    nms_.iou_threshold = p.get<float>("iou_threshold", 0.45f);
    if (!(nms_.iou_threshold >= 0 && nms_.iou_threshold <= 1)) p.fail("iou_threshold", "must be in [0, 1]");
    nms_.max_detections = p.get<int>("max_detections", 300);
    if (nms_.max_detections < 1) p.fail("max_detections", "must be at least 1");
    nms_.class_agnostic = p.get<bool>("class_agnostic", false);
    if (format_ == Format::kDetr && p.has("iou_threshold")) p.fail("iou_threshold", "detr runs no NMS (its queries do not overlap)");

    const YAML::Node classes = p.node("classes");
    if (classes && !classes.IsNull()) {
      if (!classes.IsSequence() || classes.size() == 0) p.fail("classes", "expected a list of class labels or ids");
      for (const auto& c : classes) keep_.insert(class_id_of(p, "classes", c, labels_));
    }
    const YAML::Node thresholds = p.node("class_thresholds");
    if (thresholds && !thresholds.IsNull()) {
      if (!thresholds.IsMap()) p.fail("class_thresholds", "expected a map of class (label or id) to score, e.g. {person: 0.5}");
      for (const auto& kv : thresholds) {
        const int id = class_id_of(p, "class_thresholds", kv.first, labels_);
        float t = 0;
        try {
          t = kv.second.as<float>();
        } catch (const YAML::Exception&) {
          p.origin().fail(kv.second, fmt::format("{}: class_thresholds: expected a score in [0, 1]", p.what()));
        }
        if (!(t >= 0 && t <= 1)) p.origin().fail(kv.second, fmt::format("{}: class_thresholds: {} is not in [0, 1]", p.what(), t));
        class_thresholds_[id] = t;
      }
    }

    const std::string units = p.choice("box_units", yolo ? "pixels" : "normalized", {"pixels", "normalized"});
    options_.units = units == "pixels" ? BoxUnits::kPixels : BoxUnits::kNormalized;
    const std::string activation = p.choice("activation", format_ == Format::kDetr ? "softmax" : "none", {"none", "sigmoid", "softmax"});
    options_.activation = activation == "none" ? ScoreActivation::kNone : activation == "sigmoid" ? ScoreActivation::kSigmoid : ScoreActivation::kSoftmax;
    if (yolo && options_.activation == ScoreActivation::kSoftmax) p.fail("activation", "YOLO scores are independent per class: none or sigmoid");

    if (format_ == Format::kYoloV8) {
      const std::string layout = p.choice("layout", "auto", {"auto", "channels_first", "boxes_first"});
      layout_ = layout == "auto" ? Layout::kAuto : layout == "channels_first" ? Layout::kChannelsFirst : Layout::kBoxesFirst;
    } else if (p.has("layout")) {
      p.fail("layout", "only yolo_v8 output comes in two layouts");
    }
    if (format_ == Format::kSsd) {
      background_ = read_background(p);
      if (p.has("anchors")) read_anchors(p);
    } else {
      if (p.has("background")) p.fail("background", "only ssd has a background class (detr's last class is 'no object')");
      if (p.has("anchors")) p.fail("anchors", "only ssd decodes offsets against anchors (exported YOLO models decode their own boxes)");
    }
    for (const int id : keep_) {
      if (id == background_) p.fail("classes", fmt::format("class {} is the background", id));
    }
  }

  void check(const TensorSpecs& available) const override {
    Stage::check(available);
    const auto bad = [&](const std::string& key, const std::string& wanted) {
      fail_config(fmt::format("{} '{}' is {}; {} decoding reads {}", key == input_ ? "input" : key == boxes_ ? "boxes" : "scores",
                              key, available.at(key).description(), format_name(), wanted));
    };
    const auto dims = [&](const std::string& key) { return available.at(key).dims; };
    std::int64_t classes = -1;  // the tensor's class count, when known
    switch (format_) {
      case Format::kYoloV5: {
        const auto d = dims(input_);
        if (d.size() != 3 || (d[2] >= 0 && d[2] < 6)) bad(input_, "[N, boxes, 5 + classes]");
        if (d[2] >= 0) classes = d[2] - 5;
        break;
      }
      case Format::kYoloV8: {
        const auto d = dims(input_);
        if (d.size() != 3) bad(input_, "[N, 4 + classes, boxes] or [N, boxes, 4 + classes]");
        if (d[1] >= 0 && d[2] >= 0) {
          const Layout l = resolve_layout(d[1], d[2]);
          if (l == Layout::kAuto) {
            fail_config(fmt::format("input '{}' is {}: which dim holds the 4 + classes values is unclear; say layout: channels_first "
                                    "([N, 4 + C, boxes]) or boxes_first",
                                    input_, available.at(input_).description()));
          }
          classes = (l == Layout::kChannelsFirst ? d[1] : d[2]) - 4;
          if (classes < 1) bad(input_, "4 box values and at least one class score per box");
        }
        break;
      }
      case Format::kSsd:
      case Format::kDetr: {
        const auto b = dims(boxes_), s = dims(scores_);
        if (b.size() != 3 || (b[2] >= 0 && b[2] != 4)) bad(boxes_, format_ == Format::kSsd ? "[N, boxes, 4]" : "[N, queries, 4]");
        if (s.size() != 3) bad(scores_, format_ == Format::kSsd ? "[N, boxes, classes]" : "[N, queries, classes + 1]");
        if (b[1] >= 0 && s[1] >= 0 && b[1] != s[1]) {
          fail_config(fmt::format("boxes '{}' {} and scores '{}' {} disagree on the number of boxes", boxes_,
                                  available.at(boxes_).description(), scores_, available.at(scores_).description()));
        }
        if (s[2] >= 0) classes = format_ == Format::kDetr ? s[2] - 1 : s[2];
        if (format_ == Format::kSsd && has_anchors_ && b[1] >= 0) check_prior_count(available, b[1]);
        break;
      }
    }
    if (classes >= 0) check_classes(classes, [&](const std::string& m) { fail_config(m); });
  }

 private:
  static int read_background(Params& p) {
    const YAML::Node node = p.node("background");
    if (!node || node.IsNull()) return 0;
    if (node.IsScalar() && node.Scalar() == "none") return -1;
    const int id = p.get<int>("background", 0);
    if (id < 0) p.fail("background", "a class id (0 or more), or none");
    return id;
  }

  void read_anchors(Params& p) {
    Params a(p.node("anchors"), std::make_shared<ConfigOrigin>(p.origin()), p.what() + ": anchors");
    if (!a.self().IsMap()) p.fail("anchors", "expected a map (steps, min_sizes, variances, centers, clip)");
    priors_.steps = a.require<std::vector<int>>("steps");
    priors_.min_sizes = a.require<std::vector<std::vector<float>>>("min_sizes");
    if (priors_.steps.empty() || std::any_of(priors_.steps.begin(), priors_.steps.end(), [](int s) { return s < 1; })) {
      a.fail("steps", "expected strides of 1 pixel or more, one per feature map");
    }
    if (priors_.min_sizes.size() != priors_.steps.size()) a.fail("min_sizes", fmt::format("needs one list per step ({})", priors_.steps.size()));
    for (const auto& sizes : priors_.min_sizes) {
      if (sizes.empty() || std::any_of(sizes.begin(), sizes.end(), [](float s) { return !(s > 0); })) a.fail("min_sizes", "expected lists of sizes > 0 in input pixels");
    }
    const auto variances = a.get<std::vector<float>>("variances", {0.1f, 0.2f});
    if (variances.size() != 2 || !(variances[0] > 0) || !(variances[1] > 0)) a.fail("variances", "expected two values > 0: [centre, size]");
    priors_.variances = {variances[0], variances[1]};
    priors_.centers_on_cells = a.choice("centers", "cells", {"cells", "stride"}) == "cells";
    priors_.clip = a.get<bool>("clip", true);
    a.finish();
    has_anchors_ = true;
  }

  std::string format_name() const {
    switch (format_) {
      case Format::kYoloV5: return "yolo_v5";
      case Format::kYoloV8: return "yolo_v8";
      case Format::kSsd: return "ssd";
      case Format::kDetr: return "detr";
    }
    return "";
  }

  /// yolo_v8's layout from the dims after N: the key's, else the dim that holds 4 + the labels'
  /// classes, else the smaller (boxes outnumber classes: 8400 vs 84); kAuto when unclear.
  Layout resolve_layout(std::int64_t d1, std::int64_t d2) const {
    if (layout_ != Layout::kAuto) return layout_;
    if (!labels_.empty()) {
      const auto want = static_cast<std::int64_t>(labels_.size()) + 4;
      if ((d1 == want) != (d2 == want)) return d1 == want ? Layout::kChannelsFirst : Layout::kBoxesFirst;
      if (d1 == want) return Layout::kAuto;  // both: a square output
      // Neither: the rule below picks, and the class count check then names the mismatch.
    }
    if (d1 == d2) return Layout::kAuto;
    return d1 < d2 ? Layout::kChannelsFirst : Layout::kBoxesFirst;
  }

  /// The class count the tensor says against the labels, `classes:` and `class_thresholds:`.
  template <typename Fail>
  void check_classes(std::int64_t classes, Fail fail) const {
    if (!labels_.empty()) {
      const auto labelled = static_cast<std::int64_t>(labels_.size());
      // detr's labels may name the "no object" class too.
      if (labelled != classes && !(format_ == Format::kDetr && labelled == classes + 1)) {
        fail(fmt::format("the labels file has {} classes but the model's output has {}{}", labelled, classes,
                         format_ == Format::kSsd ? " (ssd counts the background class)" : ""));
      }
    }
    const auto past = [&](int id) { return id >= classes; };
    for (const int id : keep_) {
      if (past(id)) fail(fmt::format("classes: class id {} is past the model's {} classes", id, classes));
    }
    for (const auto& [id, _] : class_thresholds_) {
      if (past(id)) fail(fmt::format("class_thresholds: class id {} is past the model's {} classes", id, classes));
    }
    if (background_ >= classes) fail(fmt::format("background: class {} is past the model's {} classes", background_, classes));
  }

  /// The model input's width and height from the transform's tensor dims ([1, C, H, W] or
  /// [1, H, W, C]); nullopt when they cannot be told.
  static std::optional<std::pair<int, int>> input_size(const TensorSpec& spec) {
    const auto& d = spec.dims;
    if (d.size() != 4) return std::nullopt;
    const auto channels = [](std::int64_t c) { return c == 1 || c == 3 || c == 4; };
    if (!spec.picture && channels(d[1]) && d[2] > 0 && d[3] > 0) return std::pair{static_cast<int>(d[3]), static_cast<int>(d[2])};
    if (channels(d[3]) && d[1] > 0 && d[2] > 0) return std::pair{static_cast<int>(d[2]), static_cast<int>(d[1])};
    return std::nullopt;
  }

  void check_prior_count(const TensorSpecs& available, std::int64_t boxes) const {
    const auto size = input_size(available.at(transform_));
    if (!size) return;
    const auto n = generate_priors(priors_, size->first, size->second).size();
    if (static_cast<std::int64_t>(n) != boxes) {
      fail_config(fmt::format("anchors: give {} priors for a {}x{} input but boxes '{}' holds {} boxes", n, size->first, size->second,
                              boxes_, boxes));
    }
  }

  /// The score each class needs (size `classes`).
  std::vector<float> thresholds(int classes) const {
    std::vector<float> t(static_cast<std::size_t>(classes), keep_.empty() ? score_threshold_ : kNever);
    for (const int id : keep_) {
      if (id < classes) t[id] = score_threshold_;
    }
    for (const auto& [id, value] : class_thresholds_) {
      if (id < classes && (keep_.empty() || keep_.count(id))) t[id] = value;
    }
    if (background_ >= 0 && background_ < classes) t[background_] = kNever;
    return t;
  }

  const std::vector<Prior>& priors_for(int width, int height) const {
    std::lock_guard lock(priors_mutex_);
    auto& p = priors_cache_[{width, height}];
    if (p.empty()) p = generate_priors(priors_, width, height);
    return p;
  }

  /// One frame's tensor as [dim1, dim2] values, checked: rank 3, N = 1.
  Tensor frame_tensor(const Frame& f, const std::string& key, const char* role) const {
    const Tensor& t = f.tensors.at(key);
    if (t.rank() != 3 || t.dim(0) != 1) {
      throw Error(fmt::format("stage '{}': {} '{}' is {}; one frame's {} output is [1, *, *]", name(), role, key, shape_str(t.shape()),
                              format_name()));
    }
    return t.dtype() == DType::kF32 ? t.contiguous() : t.cast(DType::kF32).contiguous();
  }

  void do_process(std::span<Frame* const> frames) override {
    for (Frame* f : frames) process_frame(*f);
  }

  void process_frame(Frame& f) const {
    const ImageTransform& tf = f.transforms.at(transform_);
    DecodeOptions o = options_;
    o.input_width = static_cast<float>(tf.tensor_width);
    o.input_height = static_cast<float>(tf.tensor_height);
    const auto run_error = [&](const std::string& m) { throw Error(fmt::format("stage '{}': {}", name(), m)); };
    std::vector<ScoredBox> candidates;
    if (format_ == Format::kYoloV5 || format_ == Format::kYoloV8) {
      const Tensor t = frame_tensor(f, input_, "input");
      int boxes = 0, classes = 0;
      bool channels_first = false;
      if (format_ == Format::kYoloV5) {
        boxes = static_cast<int>(t.dim(1));
        classes = static_cast<int>(t.dim(2)) - 5;
      } else {
        const Layout l = resolve_layout(t.dim(1), t.dim(2));
        if (l == Layout::kAuto) run_error(fmt::format("input '{}' is {}: say layout: channels_first or boxes_first", input_, shape_str(t.shape())));
        channels_first = l == Layout::kChannelsFirst;
        boxes = static_cast<int>(channels_first ? t.dim(2) : t.dim(1));
        classes = static_cast<int>(channels_first ? t.dim(1) : t.dim(2)) - 4;
      }
      if (classes < 1) run_error(fmt::format("input '{}' is {}: no class scores", input_, shape_str(t.shape())));
      check_classes(classes, run_error);
      o.thresholds = thresholds(classes);
      candidates = format_ == Format::kYoloV5 ? decode_yolo_v5(t.data<float>(), boxes, classes, o)
                                              : decode_yolo_v8(t.data<float>(), boxes, classes, channels_first, o);
    } else {
      const Tensor b = frame_tensor(f, boxes_, "boxes"), s = frame_tensor(f, scores_, "scores");
      if (b.dim(2) != 4 || b.dim(1) != s.dim(1)) {
        run_error(fmt::format("boxes '{}' {} and scores '{}' {}: expected [1, B, 4] and [1, B, classes]", boxes_, shape_str(b.shape()), scores_,
                              shape_str(s.shape())));
      }
      const int count = static_cast<int>(b.dim(1));
      const int classes = static_cast<int>(s.dim(2)) - (format_ == Format::kDetr ? 1 : 0);
      if (classes < 1) run_error(fmt::format("scores '{}' is {}: no classes", scores_, shape_str(s.shape())));
      check_classes(classes, run_error);
      o.thresholds = thresholds(classes);
      if (format_ == Format::kDetr) {
        candidates = decode_detr(b.data<float>(), s.data<float>(), count, classes, o);
      } else {
        static const std::vector<Prior> kNone;
        const std::vector<Prior>& priors = has_anchors_ ? priors_for(tf.tensor_width, tf.tensor_height) : kNone;
        if (has_anchors_ && priors.size() != static_cast<std::size_t>(count)) {
          run_error(fmt::format("anchors give {} priors for a {}x{} input but boxes '{}' holds {}", priors.size(), tf.tensor_width,
                                tf.tensor_height, boxes_, count));
        }
        candidates = decode_ssd(b.data<float>(), s.data<float>(), count, classes, priors, priors_.variances, o);
      }
    }

    // Into the picture first: a box wholly in a letterbox's padding must not take a place among
    // the max_detections, nor suppress a box that is in the picture.
    const RectF picture{0, 0, static_cast<float>(f.image.width), static_cast<float>(f.image.height)};
    std::vector<RectF> in_picture;
    std::size_t inside = 0;
    for (const ScoredBox& c : candidates) {
      const RectF box = intersection(RectF::spanning(tf.to_picture(c.box.top_left()), tf.to_picture(c.box.bottom_right())), picture);
      if (box.empty()) continue;
      candidates[inside++] = c;
      in_picture.push_back(box);
    }
    candidates.resize(inside);
    NmsOptions nms = nms_;
    if (format_ == Format::kDetr) {  // one query per object: no NMS, only the best max_detections
      nms.iou_threshold = 1.f;
      nms.class_agnostic = false;
    }
    for (const std::size_t i : batched_nms(candidates, nms)) {
      Detection d;
      d.kind = kind_;
      d.class_id = candidates[i].class_id;
      d.label = label_of(labels_, d.class_id);
      d.score = candidates[i].score;
      d.box = in_picture[i];
      f.detections.push_back(std::move(d));
    }
  }

  Format format_ = Format::kYoloV8;
  Layout layout_ = Layout::kAuto;
  std::string input_, boxes_, scores_, transform_, kind_;
  std::vector<std::string> labels_;
  float score_threshold_ = 0.25f;
  std::set<int> keep_;                    // `classes:` (empty: all)
  std::map<int, float> class_thresholds_;
  int background_ = -1;
  NmsOptions nms_;
  DecodeOptions options_;
  bool has_anchors_ = false;
  PriorSpec priors_;
  mutable std::mutex priors_mutex_;  // frames of several streams decode at once
  mutable std::map<std::pair<int, int>, std::vector<Prior>> priors_cache_;
};

}  // namespace

RW_REGISTER_STAGE("detect", DetectStage);

}  // namespace redwood
