// db_text stage: probability map [1, 1, H, W] -> text detections in picture coordinates.
//
//   - name: det_post
//     type: db_text
//     input: det_prob        # the detector's output
//     transform: det_in      # the preprocess tensor whose mapping brings boxes back
//     threshold: 0.3
//     box_threshold: 0.6
//     unclip_ratio: 1.5
//     min_size: 3

#include "stages/postprocess/db_text.hpp"

#include "core/free_list.hpp"
#include "stages/picture_cv.hpp"
#include "stages/postprocess/contours.hpp"
#include "stages/postprocess/min_area_rect.hpp"
#include "stages/postprocess/polygon_fill.hpp"
#include "stages/stage.hpp"

#include <fmt/format.h>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <array>

namespace redwood {

std::array<PointF, 4> order_quad(std::array<PointF, 4> pts) {
  // PP-OCR's get_mini_boxes: sort by x, then the left pair by y and the right pair by y.
  std::sort(pts.begin(), pts.end(), [](auto& a, auto& b) { return a.x < b.x; });
  const auto [tl, bl] = pts[0].y <= pts[1].y ? std::pair{pts[0], pts[1]} : std::pair{pts[1], pts[0]};
  const auto [tr, br] = pts[2].y <= pts[3].y ? std::pair{pts[2], pts[3]} : std::pair{pts[3], pts[2]};
  return {tl, tr, br, bl};
}

namespace {

// The mask, the contours, the hull's and the fill's buffers and each region's mask, which keep
// their capacity from frame to frame: once the largest map has been seen, a frame allocates
// nothing here (the contours, rectangles and fills are Redwood's copies of OpenCV's, which
// allocate on every call).
struct DbScratch {
  std::vector<std::uint8_t> mask_bytes, region_bytes;
  ContourList contours;
  HullScratch hull;
  PolygonFill fill;
  std::vector<cv::Point> shifted;
  std::vector<TextQuad> quads;  // the stage's result, before it becomes the frame's detections
};

void decode_db(const float* prob, int height, int width, const DbOptions& o, DbScratch& scratch, std::vector<TextQuad>& quads) {
  std::vector<std::uint8_t>& mask_bytes = scratch.mask_bytes;
  std::vector<std::uint8_t>& region_bytes = scratch.region_bytes;
  ContourList& contours = scratch.contours;
  HullScratch& hull_scratch = scratch.hull;
  PolygonFill& polygon_fill = scratch.fill;
  std::vector<cv::Point>& shifted = scratch.shifted;
  quads.clear();
  const cv::Mat map(height, width, CV_32F, const_cast<float*>(prob));
  cv::Mat mask = scratch_mat(mask_bytes, height, width, CV_8U);
  cv::compare(map, o.threshold, mask, cv::CMP_GT);  // 0 / 255
  find_contours(mask, contours);
  for (std::size_t i = 0; i < contours.size() && static_cast<int>(i) < o.max_candidates; ++i) {
    const std::span<const cv::Point> contour = contours[i];
    const cv::RotatedRect rect = min_area_rect(contour, hull_scratch);  // PP-OCR's get_mini_boxes' rectangle
    if (std::min(rect.size.width, rect.size.height) < o.min_size) continue;
    // Score: mean probability inside the contour (PP-OCR's "slow" mode, exact for rotated text).
    const cv::Rect bounds = cv::boundingRect(contours.mat(i)) & cv::Rect(0, 0, width, height);
    if (bounds.empty()) continue;
    cv::Mat region_mask = scratch_mat(region_bytes, bounds.height, bounds.width, CV_8U);
    std::fill_n(region_mask.data, region_mask.total(), std::uint8_t{0});  // continuous (setTo allocates inside)
    shifted.assign(contour.begin(), contour.end());
    for (auto& p : shifted) p -= bounds.tl();
    polygon_fill.fill(region_mask, shifted, 1);
    const float score = static_cast<float>(cv::mean(map(bounds), region_mask)[0]);
    if (score < o.box_threshold) continue;
    // Unclip: offset the rectangle outwards by d = area * ratio / perimeter on every side.
    const float w = rect.size.width, h = rect.size.height;
    const float d = w * h * o.unclip_ratio / (2.f * (w + h));
    const cv::RotatedRect grown(rect.center, cv::Size2f(w + 2 * d, h + 2 * d), rect.angle);
    if (std::min(grown.size.width, grown.size.height) < o.min_size + 2) continue;
    std::array<cv::Point2f, 4> corners;
    grown.points(corners.data());
    std::array<PointF, 4> pts;
    for (std::size_t k = 0; k < 4; ++k) {
      pts[k] = {std::clamp(corners[k].x, 0.f, static_cast<float>(width)), std::clamp(corners[k].y, 0.f, static_cast<float>(height))};
    }
    quads.push_back({order_quad(pts), score});
  }
  std::sort(quads.begin(), quads.end(), [](const TextQuad& a, const TextQuad& b) {
    if (std::abs(a.points[0].y - b.points[0].y) > 10.f) return a.points[0].y < b.points[0].y;
    return a.points[0].x < b.points[0].x;
  });
}

}  // namespace

void decode_db(const float* prob, int height, int width, const DbOptions& o, std::vector<TextQuad>& quads) {
  thread_local DbScratch scratch;
  decode_db(prob, height, width, o, scratch, quads);
}

std::vector<TextQuad> decode_db(const float* prob, int height, int width, const DbOptions& o) {
  std::vector<TextQuad> quads;
  decode_db(prob, height, width, o, quads);
  return quads;
}

namespace {

class DbTextStage final : public Stage {
 public:
  explicit DbTextStage(StageArgs& args) : Stage(args.name) {
    Params& p = args.params;
    remember_place(p);
    input_ = p.require<std::string>("input");
    transform_ = p.require<std::string>("transform");
    consume(input_);
    consume_transform(transform_);
    options_.threshold = p.get<float>("threshold", options_.threshold);
    options_.box_threshold = p.get<float>("box_threshold", options_.box_threshold);
    options_.unclip_ratio = p.get<float>("unclip_ratio", options_.unclip_ratio);
    options_.min_size = p.get<float>("min_size", options_.min_size);
    options_.max_candidates = p.get<int>("max_candidates", options_.max_candidates);
    if (options_.threshold <= 0 || options_.threshold >= 1) p.fail("threshold", "must be in (0, 1)");
  }

  void check(const TensorSpecs& available) const override {
    Stage::check(available);  // the transform is a preprocess stage's output
    const auto& dims = available.at(input_).dims;
    if (dims.size() != 4 || (dims[1] >= 0 && dims[1] != 1)) {
      fail_config(fmt::format("input '{}' is {}; DB decoding reads a [N, 1, H, W] probability map", input_,
                              available.at(input_).description()));
    }
  }

 private:
  void do_process(std::span<Frame* const> frames) override {
    for (Frame* f : frames) {
      const Tensor prob = f->tensors.at(input_).contiguous();
      const ImageTransform& tf = f->transforms.at(transform_);
      const int h = static_cast<int>(prob.dim(2)), w = static_cast<int>(prob.dim(3));
      // The map may differ in size from the tensor fed (it does not for DB): rescale first.
      const float sx = tf.tensor_width > 0 ? static_cast<float>(tf.tensor_width) / w : 1.f;
      const float sy = tf.tensor_height > 0 ? static_cast<float>(tf.tensor_height) / h : 1.f;
      const FreeList<DbScratch>::Lease scratch = scratch_.take();
      std::vector<TextQuad>& quads = scratch->quads;
      decode_db(prob.data<float>(), h, w, options_, *scratch, quads);
      f->detections.reserve(f->detections.size() + quads.size());
      for (const TextQuad& q : quads) {
        Detection d;
        d.kind = "text";
        d.score = q.score;
        std::array<cv::Point2f, 4> corners;  // the quad's (decode_db gives 4), for OpenCV's bounding box
        for (std::size_t k = 0; k < corners.size(); ++k) {
          PointF pic = tf.to_picture({q.points[k].x * sx, q.points[k].y * sy});
          pic.x = std::clamp(pic.x, 0.f, static_cast<float>(f->image.width - 1));
          pic.y = std::clamp(pic.y, 0.f, static_cast<float>(f->image.height - 1));
          d.quad.push_back(pic);
          corners[k] = to_cv(pic);
        }
        d.box = from_cv(cv::Rect2f(cv::boundingRect(corners)));
        f->detections.push_back(std::move(d));
      }
    }
  }

  std::string input_, transform_;
  DbOptions options_;
  FreeList<DbScratch> scratch_;  // shared by the stage's calls, whichever thread runs them
};

}  // namespace

RW_REGISTER_STAGE("db_text", DbTextStage);

}  // namespace redwood
