// blazeface stage: BlazeFace outputs -> face detections (box, 6 keypoints) in picture pixels.
//
//   - name: faces
//     type: blazeface
//     scores: [s16, s8]       # score outputs [1, n, 1], in anchor order (the barracuda
//     boxes: [b16, b8]        # models split them by feature map: 512 + 384 = 896 anchors)
//     transform: face_in      # the preprocess tensor whose mapping brings boxes back
//     input_size: 128         # 128 (front) or 256 (back)
//     score_threshold: 0.75
//     iou_threshold: 0.3

#include "stages/postprocess/blazeface.hpp"

#include "stages/stage.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace redwood {

std::vector<Anchor> blazeface_anchors(int input_size) {
  const std::vector<int> strides = input_size >= 256 ? std::vector<int>{16, 32, 32, 32} : std::vector<int>{8, 16, 16, 16};
  std::vector<Anchor> anchors;
  for (std::size_t layer = 0; layer < strides.size();) {
    std::size_t last = layer;
    int per_cell = 0;
    while (last < strides.size() && strides[last] == strides[layer]) {
      per_cell += 2;  // aspect ratio 1 plus the interpolated scale
      ++last;
    }
    const int cells = static_cast<int>(std::ceil(static_cast<double>(input_size) / strides[layer]));
    for (int y = 0; y < cells; ++y) {
      for (int x = 0; x < cells; ++x) {
        for (int a = 0; a < per_cell; ++a) anchors.push_back({(x + 0.5f) / cells, (y + 0.5f) / cells});
      }
    }
    layer = last;
  }
  return anchors;
}

std::vector<FaceDetection> non_max_suppression(std::vector<FaceDetection> dets, float iou_threshold) {
  std::sort(dets.begin(), dets.end(), [](auto& a, auto& b) { return a.score > b.score; });
  std::vector<FaceDetection> kept;
  for (auto& d : dets) {
    bool keep = true;
    for (const auto& k : kept) {
      if (intersection_over_union(d.box, k.box) > iou_threshold) {
        keep = false;
        break;
      }
    }
    if (keep) kept.push_back(std::move(d));
  }
  return kept;
}

std::vector<FaceDetection> decode_blazeface(const float* scores, const float* boxes, const std::vector<Anchor>& anchors,
                                            int input_size, const BlazeFaceOptions& o) {
  std::vector<FaceDetection> found;
  const float s = static_cast<float>(input_size);
  for (std::size_t i = 0; i < anchors.size(); ++i) {
    float score = scores[i];
    if (o.scores_are_logits) score = 1.f / (1.f + std::exp(-std::clamp(score, -100.f, 100.f)));
    if (score < o.score_threshold) continue;
    const float* r = boxes + i * 16;
    const float cx = r[0] / s + anchors[i].cx, cy = r[1] / s + anchors[i].cy;
    const float w = r[2] / s, h = r[3] / s;
    FaceDetection d;
    d.score = score;
    d.box = RectF{cx - w / 2, cy - h / 2, w, h};
    for (int k = 0; k < 6; ++k) d.keypoints.push_back({r[4 + 2 * k] / s + anchors[i].cx, r[5 + 2 * k] / s + anchors[i].cy});
    found.push_back(std::move(d));
  }
  return non_max_suppression(std::move(found), o.iou_threshold);
}

namespace {

class BlazeFaceStage final : public Stage {
 public:
  explicit BlazeFaceStage(StageArgs& args) : Stage(args.name) {
    Params& p = args.params;
    remember_place(p);
    scores_ = p.require<std::vector<std::string>>("scores");
    boxes_ = p.require<std::vector<std::string>>("boxes");
    if (scores_.size() != boxes_.size() || scores_.empty()) p.fail("boxes", "needs as many tensors as scores");
    transform_ = p.require<std::string>("transform");
    input_size_ = p.get<int>("input_size", 128);
    if (input_size_ != 128 && input_size_ != 256) p.fail("input_size", "BlazeFace models take 128 or 256");
    options_.score_threshold = p.get<float>("score_threshold", input_size_ == 128 ? 0.75f : 0.52f);
    options_.iou_threshold = p.get<float>("iou_threshold", 0.3f);
    options_.scores_are_logits = p.get<bool>("scores_are_logits", true);
    anchors_ = blazeface_anchors(input_size_);
    for (const auto& k : scores_) consume(k);
    for (const auto& k : boxes_) consume(k);
    consume_transform(transform_);
  }

  void check(const TensorSpecs& available) const override {
    Stage::check(available);  // the transform is a preprocess stage's output
    const auto n = static_cast<std::int64_t>(anchors_.size());
    std::int64_t total = 0;
    bool known = true;
    for (const auto& key : boxes_) {
      const auto& b = available.at(key).dims;
      if (b.size() != 3 || (b[2] >= 0 && b[2] != 16)) {
        fail_config(fmt::format("boxes '{}' is {}; BlazeFace decodes [1, n, 16]", key, available.at(key).description()));
      }
      known = known && b[1] >= 0;
      total += b[1];
    }
    if (known && total != n) fail_config(fmt::format("boxes hold {} anchors; BlazeFace {} has {}", total, input_size_, n));
    const auto& tdims = available.at(transform_).dims;
    if (tdims.size() == 4 && tdims[1] >= 0 && tdims[1] != input_size_ && tdims[2] >= 0 && tdims[2] != input_size_) {
      fail_config(fmt::format("transform '{}' is {} but input_size is {}", transform_, available.at(transform_).description(), input_size_));
    }
  }

 private:
  void do_process(std::span<Frame* const> frames) override {
    for (Frame* f : frames) {
      std::vector<float> scores, boxes;
      for (const auto& k : scores_) {
        const auto v = f->tensors.at(k).to_float_vector();
        scores.insert(scores.end(), v.begin(), v.end());
      }
      for (const auto& k : boxes_) {
        const auto v = f->tensors.at(k).to_float_vector();
        boxes.insert(boxes.end(), v.begin(), v.end());
      }
      if (scores.size() != anchors_.size() || boxes.size() != anchors_.size() * 16) {
        throw Error(fmt::format("stage '{}': {} scores and {} box values for {} anchors", name(), scores.size(), boxes.size(), anchors_.size()));
      }
      const ImageTransform& tf = f->transforms.at(transform_);
      for (const FaceDetection& fd : decode_blazeface(scores.data(), boxes.data(), anchors_, input_size_, options_)) {
        Detection d;
        d.kind = "face";
        d.score = fd.score;
        const auto to_pic = [&](PointF n) { return tf.to_picture({n.x * tf.tensor_width, n.y * tf.tensor_height}); };
        d.box = intersection(RectF::spanning(to_pic(fd.box.top_left()), to_pic(fd.box.bottom_right())),
                             RectF{0, 0, static_cast<float>(f->image.width), static_cast<float>(f->image.height)});
        for (const auto& k : fd.keypoints) d.keypoints.push_back(to_pic(k));
        f->detections.push_back(std::move(d));
      }
    }
  }

  std::vector<std::string> scores_, boxes_;
  std::string transform_;
  int input_size_ = 128;
  BlazeFaceOptions options_;
  std::vector<Anchor> anchors_;
};

}  // namespace

RW_REGISTER_STAGE("blazeface", BlazeFaceStage);

}  // namespace redwood
