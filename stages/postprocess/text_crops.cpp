// text_crops stage: the frame's text detections -> a batch of rectified crops for a secondary
// (recognition) model, one row per text detection, in detection order.
//
//   - name: crops
//     type: text_crops
//     output: rec_in
//     height: 48
//     max_width: 320

#include "stages/postprocess/text_crops.hpp"

#include "stages/picture_cv.hpp"
#include "stages/stage.hpp"

#include <opencv2/imgproc.hpp>

#include <array>
#include <cmath>

namespace redwood {

cv::Mat rectify_quad(const cv::Mat& bgr, const std::vector<PointF>& quad, FrameMemory* memory) {
  const std::array<cv::Point2f, 4> q{to_cv(quad.at(0)), to_cv(quad.at(1)), to_cv(quad.at(2)), to_cv(quad.at(3))};
  const float w = std::max(cv::norm(q[0] - q[1]), cv::norm(q[2] - q[3]));
  const float h = std::max(cv::norm(q[0] - q[3]), cv::norm(q[1] - q[2]));
  const int cw = std::max(1, static_cast<int>(std::lround(w))), ch = std::max(1, static_cast<int>(std::lround(h)));
  const std::vector<cv::Point2f> dst{{0, 0}, {static_cast<float>(cw), 0}, {static_cast<float>(cw), static_cast<float>(ch)},
                                     {0, static_cast<float>(ch)}};
  cv::Mat crop = frame_mat(memory);
  cv::warpPerspective(bgr, crop, cv::getPerspectiveTransform(q, dst), cv::Size(cw, ch), cv::INTER_CUBIC,
                      cv::BORDER_REPLICATE);
  // Tall regions are vertical text: turn them to read left to right, as PP-OCR does.
  if (crop.rows >= 1.5 * crop.cols) cv::rotate(crop, crop, cv::ROTATE_90_COUNTERCLOCKWISE);
  return crop;
}

Tensor crops_to_tensor(const std::vector<cv::Mat>& crops, const TextCropOptions& o, FrameMemory* memory) {
  const std::int64_t k = static_cast<std::int64_t>(crops.size());
  Tensor out = frame_tensor_zeros(memory, DType::kF32, {k, 3, o.height, o.max_width});
  cv::Mat resized = frame_mat(memory);
  float* base = out.data<float>();
  const std::size_t plane = static_cast<std::size_t>(o.height) * o.max_width;
  for (std::int64_t i = 0; i < k; ++i) {
    const cv::Mat& c = crops[i];
    const int w = std::clamp(static_cast<int>(std::ceil(o.height * static_cast<double>(c.cols) / c.rows)), 1, o.max_width);
    cv::resize(c, resized, cv::Size(w, o.height), 0, 0, cv::INTER_LINEAR);
    float* dst = base + i * 3 * plane;
    // (p * scale - mean) / std as one multiply-add, a channel plane at a time (vectorized).
    const float alpha = o.scale / o.std, beta = -o.mean / o.std;
    for (int ch = 0; ch < 3; ++ch) {
      const int src = o.rgb ? 2 - ch : ch;
      for (int y = 0; y < o.height; ++y) {
        const std::uint8_t* __restrict row = resized.ptr<std::uint8_t>(y);
        float* __restrict out = dst + ch * plane + static_cast<std::size_t>(y) * o.max_width;
        for (int x = 0; x < w; ++x) out[x] = static_cast<float>(row[3 * x + src]) * alpha + beta;
      }
    }
  }
  return out;
}

namespace {

class TextCropsStage final : public Stage {
 public:
  explicit TextCropsStage(StageArgs& args) : Stage(args.name) {
    Params& p = args.params;
    remember_place(p);
    output_ = p.get<std::string>("output", args.name);
    options_.height = p.get<int>("height", options_.height);
    options_.max_width = p.get<int>("max_width", options_.max_width);
    options_.rgb = p.choice("color", "bgr", {"rgb", "bgr"}) == "rgb";
    if (options_.height < 4) p.fail("height", "must be at least 4");
    if (options_.max_width < options_.height) p.fail("max_width", "must be at least the height");
    produce(output_, TensorSpec{{-1, 3, options_.height, options_.max_width}});
  }

 private:
  void do_process(std::span<Frame* const> frames) override {
    for (Frame* f : frames) {
      std::vector<cv::Mat> crops;
      std::vector<int> parents;  // the detection each row was cut from (Frame::crop_parents)
      for (std::size_t i = 0; i < f->detections.size(); ++i) {
        const Detection& d = f->detections[i];
        if (d.kind != "text" || d.quad.size() != 4) continue;
        crops.push_back(rectify_quad(as_mat(f->image), d.quad, f->memory));
        parents.push_back(static_cast<int>(i));
      }
      f->tensors[output_] = crops_to_tensor(crops, options_, f->memory);
      f->crop_parents[output_] = std::move(parents);
    }
  }

  std::string output_;
  TextCropOptions options_;
};

}  // namespace

RW_REGISTER_STAGE("text_crops", TextCropsStage);

}  // namespace redwood
