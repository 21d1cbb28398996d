// text_crops stage: the frame's text detections -> a batch of rectified crops for a secondary
// (recognition) model, one row per text detection, in detection order.
//
//   - name: crops
//     type: text_crops
//     output: rec_in
//     height: 48
//     max_width: 320
//
// A crop lives only while its row is written: it is warped and resized into buffers of the
// worker thread's own, which stop growing once the largest crop has been seen, so a frame's
// crops take no memory of their own (the warp and the resize give OpenCV's bytes without its
// buffers: stages/postprocess/perspective_warp.hpp, stages/preprocess/linear_resize.hpp).

#include "stages/postprocess/text_crops.hpp"

#include "core/error.hpp"
#include "core/free_list.hpp"
#include "stages/picture_cv.hpp"
#include "stages/postprocess/perspective_warp.hpp"
#include "stages/preprocess/linear_resize.hpp"
#include "stages/stage.hpp"

#include <opencv2/imgproc.hpp>

#include <array>
#include <cmath>

namespace redwood {

namespace {

// The quad's corners and the upright size its content is warped to.
struct QuadWarp {
  std::array<cv::Point2f, 4> corners;
  int width = 1, height = 1;
};

QuadWarp quad_warp(std::span<const PointF> quad) {
  RW_EXPECTS(quad.size() == 4, InvalidArgument, "a text region has 4 corners (got {})", quad.size());
  QuadWarp q;
  q.corners = {to_cv(quad[0]), to_cv(quad[1]), to_cv(quad[2]), to_cv(quad[3])};
  const auto& c = q.corners;
  const float w = std::max(cv::norm(c[0] - c[1]), cv::norm(c[2] - c[3]));
  const float h = std::max(cv::norm(c[0] - c[3]), cv::norm(c[1] - c[2]));
  q.width = std::max(1, static_cast<int>(std::lround(w)));
  q.height = std::max(1, static_cast<int>(std::lround(h)));
  return q;
}

// Warps the quad's content into `crop` (already q.height x q.width, the picture's type).
void warp_quad(const cv::Mat& bgr, const QuadWarp& q, cv::Mat& crop) {
  const auto w = static_cast<float>(q.width), h = static_cast<float>(q.height);
  const std::array<cv::Point2f, 4> upright{cv::Point2f{0, 0}, {w, 0}, {w, h}, {0, h}};
  warp_perspective_cubic(bgr, perspective_transform(q.corners, upright), crop);
}

// Tall regions are vertical text: they are turned to read left to right, as PP-OCR does.
bool is_vertical(const QuadWarp& q) { return q.height >= 1.5 * q.width; }

// The crop resized to the strip's height (its width kept in proportion, at most max_width) and
// normalized into one [3, height, max_width] row of the batch, whose padding is already zero.
// A crop's buffers, kept between crops: warped, then turned when vertical, then resized.
struct CropScratch {
  std::vector<std::uint8_t> warped_bytes, turned_bytes, resized_bytes;
  LinearResize resize;
};

void write_crop(const cv::Mat& crop, const TextCropOptions& o, float* dst, CropScratch& scratch) {
  std::vector<std::uint8_t>& resized_bytes = scratch.resized_bytes;
  LinearResize& resize = scratch.resize;
  const int w = std::clamp(static_cast<int>(std::ceil(o.height * static_cast<double>(crop.cols) / crop.rows)), 1, o.max_width);
  cv::Mat resized = scratch_mat(resized_bytes, o.height, w, CV_8UC3);
  resize.resize(crop, resized);
  const std::size_t plane = static_cast<std::size_t>(o.height) * o.max_width;
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

}  // namespace

cv::Mat rectify_quad(const cv::Mat& bgr, std::span<const PointF> quad, FrameMemory* memory) {
  const QuadWarp q = quad_warp(quad);
  cv::Mat crop = frame_mat(memory);
  crop.create(q.height, q.width, bgr.type());
  warp_quad(bgr, q, crop);
  if (is_vertical(q)) cv::rotate(crop, crop, cv::ROTATE_90_COUNTERCLOCKWISE);
  return crop;
}

Tensor crops_to_tensor(const std::vector<cv::Mat>& crops, const TextCropOptions& o, FrameMemory* memory) {
  const std::int64_t k = static_cast<std::int64_t>(crops.size());
  Tensor out = frame_tensor_zeros(memory, DType::kF32, {k, 3, o.height, o.max_width});
  const std::size_t row = 3 * static_cast<std::size_t>(o.height) * o.max_width;
  thread_local CropScratch scratch;
  for (std::int64_t i = 0; i < k; ++i) write_crop(crops[static_cast<std::size_t>(i)], o, out.data<float>() + i * row, scratch);
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
  static bool is_text(const Detection& d) { return d.kind == "text" && d.quad.size() == 4; }

  void do_process(std::span<Frame* const> frames) override {
    // rectify_quad's steps, into the stage's buffers: warped, then turned when vertical.
    const FreeList<CropScratch>::Lease scratch = scratch_.take();
    std::vector<std::uint8_t>& warped_bytes = scratch->warped_bytes;
    std::vector<std::uint8_t>& turned_bytes = scratch->turned_bytes;
    for (Frame* f : frames) {
      const cv::Mat bgr = as_mat(f->image);
      // The detection each row was cut from: the frame's own vector, whose room a recycled frame
      // keeps (FramePool::reset empties it).
      std::vector<int>& parents = f->crop_parents[output_];
      parents.clear();
      for (std::size_t i = 0; i < f->detections.size(); ++i) {
        if (is_text(f->detections[i])) parents.push_back(static_cast<int>(i));
      }
      const auto k = static_cast<std::int64_t>(parents.size());
      Tensor batch = frame_tensor_zeros(f->memory, DType::kF32, {k, 3, options_.height, options_.max_width});
      const std::size_t row = 3 * static_cast<std::size_t>(options_.height) * options_.max_width;
      for (std::int64_t r = 0; r < k; ++r) {
        const QuadWarp q = quad_warp(f->detections[static_cast<std::size_t>(parents[static_cast<std::size_t>(r)])].quad);
        cv::Mat crop = scratch_mat(warped_bytes, q.height, q.width, bgr.type());
        warp_quad(bgr, q, crop);
        if (is_vertical(q)) {
          cv::Mat turned = scratch_mat(turned_bytes, q.width, q.height, bgr.type());
          cv::rotate(crop, turned, cv::ROTATE_90_COUNTERCLOCKWISE);
          crop = turned;
        }
        write_crop(crop, options_, batch.data<float>() + r * row, *scratch);
      }
      f->tensors[output_] = std::move(batch);
    }
  }

  std::string output_;
  TextCropOptions options_;
  FreeList<CropScratch> scratch_;  // shared by the stage's calls, whichever thread runs them
};

}  // namespace

RW_REGISTER_STAGE("text_crops", TextCropsStage);

}  // namespace redwood
