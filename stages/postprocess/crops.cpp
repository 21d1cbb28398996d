// crops stage: the frame's detections -> a batch of crops for a secondary model, one row per
// selected detection, in detection order, and Frame::crop_parents[output]: the index in
// frame.detections of each row, so that the secondary model's results (the classify stage)
// attach to their detection. A frame with no selected detection gets a tensor of 0 rows (the
// infer stage then gives it no output, and classify nothing to attach).
//
//   - name: face_crops
//     type: crops
//     output: face_crops  # tensor key (default: the stage's name)
//     model: expression   # the crop's size from this model's input [N, 3, H, W] (or width/height)
//     width: 224
//     height: 224
//     kinds: [face]       # only these Detection::kind (default: all)
//     classes: [car, bus] # only these labels (default: all)
//     min_size: 16        # px: boxes narrower or shorter are skipped
//     max_crops: 32       # per frame, the highest scores
//     padding: 0.1        # fraction of the box added on each side
//     aspect: stretch     # pad (letterbox, proportions kept), expand (grow the box to W:H first)
//     color: rgb          # or bgr; then (x * scale - mean) / std as the preprocess stage does
//     scale: 0.00392157
//     mean: [0, 0, 0]
//     std: [1, 1, 1]
//
// A region reaching outside the picture repeats the picture's edge pixels there (replicate):
// a face at the border keeps face-like surroundings rather than a black bar the model never saw
// in training.

#include "stages/postprocess/crops.hpp"

#include "stages/picture_cv.hpp"
#include "stages/preprocess/image_tensor.hpp"
#include "stages/preprocess/normalization_keys.hpp"
#include "stages/stage.hpp"

#include <fmt/format.h>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace redwood {

std::vector<int> select_crops(const std::vector<Detection>& detections, const CropSelection& s, int width, int height) {
  const RectF picture{0.f, 0.f, static_cast<float>(width), static_cast<float>(height)};
  std::vector<int> chosen;
  for (std::size_t i = 0; i < detections.size(); ++i) {
    const Detection& d = detections[i];
    const RectF& b = d.box;
    if (!s.kinds.empty() && !s.kinds.count(d.kind)) continue;
    if (!s.classes.empty() && !s.classes.count(d.label)) continue;
    if (!std::isfinite(b.x) || !std::isfinite(b.y) || !std::isfinite(b.width) || !std::isfinite(b.height)) continue;
    if (std::min(b.width, b.height) < std::max(s.min_size, 1.f)) continue;
    if (intersection(b, picture).empty()) continue;
    chosen.push_back(static_cast<int>(i));
  }
  if (chosen.size() > static_cast<std::size_t>(std::max(s.max_crops, 0))) {
    // The best scores (the earlier of equal ones), then back in detection order.
    std::stable_sort(chosen.begin(), chosen.end(),
                     [&](int a, int b) { return detections[a].score > detections[b].score; });
    chosen.resize(static_cast<std::size_t>(std::max(s.max_crops, 0)));
    std::sort(chosen.begin(), chosen.end());
  }
  return chosen;
}

RectF crop_region(const RectF& box, const CropOptions& o) {
  RectF r{box.x - o.padding * box.width, box.y - o.padding * box.height, box.width * (1 + 2 * o.padding),
          box.height * (1 + 2 * o.padding)};
  if (o.aspect == CropAspect::kExpand && o.width > 0 && o.height > 0) {
    const float target = static_cast<float>(o.width) / static_cast<float>(o.height);
    const float cx = r.x + r.width / 2, cy = r.y + r.height / 2;
    if (r.width < r.height * target) {
      r.width = r.height * target;
    } else {
      r.height = r.width / target;
    }
    r.x = cx - r.width / 2;
    r.y = cy - r.height / 2;
  }
  return r;
}

namespace {

// Samples `region` of the picture into all of `out` (its size given): one affine warp does the
// cut, the resize (cv::resize's INTER_LINEAR sample points: pixel centres mapped onto pixel
// centres) and the border, with no intermediate the size of the region, however large.
void sample_region(const cv::Mat& bgr, const RectF& region, cv::Mat& out) {
  const double sx = region.width / out.cols, sy = region.height / out.rows;
  const cv::Matx23d map(sx, 0, region.x + 0.5 * sx - 0.5, 0, sy, region.y + 0.5 * sy - 0.5);
  cv::warpAffine(bgr, out, map, out.size(), cv::INTER_LINEAR | cv::WARP_INVERSE_MAP, cv::BORDER_REPLICATE);
}

}  // namespace

Tensor crops_to_batch(const cv::Mat& bgr, const std::vector<RectF>& regions, const CropOptions& o, FrameMemory* memory) {
  RW_EXPECTS(o.width > 0 && o.height > 0, InvalidArgument, "crops: the crop's size must be positive, not {}x{}", o.width,
             o.height);
  RW_EXPECTS(regions.empty() || (!bgr.empty() && bgr.type() == CV_8UC3), InvalidArgument,
             "crops: expected an 8-bit 3-channel picture");
  const auto k = static_cast<std::int64_t>(regions.size());
  Tensor out = frame_tensor_zeros(memory, DType::kF32, {k, 3, o.height, o.width});
  if (k == 0) return out;
  cv::Mat crop = frame_mat(memory), ordered = frame_mat(memory);
  crop.create(o.height, o.width, CV_8UC3);
  const std::size_t row = 3 * static_cast<std::size_t>(o.height) * o.width;
  for (std::int64_t i = 0; i < k; ++i) {
    const RectF& r = regions[static_cast<std::size_t>(i)];
    RW_EXPECTS(!r.empty() && std::isfinite(r.x) && std::isfinite(r.y) && std::isfinite(r.width) && std::isfinite(r.height),
               InvalidArgument, "crops: region {} is empty or not finite ({}, {}, {}x{})", i, r.x, r.y, r.width, r.height);
    if (o.aspect == CropAspect::kPad) {
      // Letterbox: the region resized to fit, centred, black around it (as preprocess pads).
      const double s = std::min(o.width / static_cast<double>(r.width), o.height / static_cast<double>(r.height));
      const int w = std::clamp(static_cast<int>(std::lround(r.width * s)), 1, o.width);
      const int h = std::clamp(static_cast<int>(std::lround(r.height * s)), 1, o.height);
      crop.setTo(cv::Scalar::all(0));
      cv::Mat inner = crop(cv::Rect((o.width - w) / 2, (o.height - h) / 2, w, h));
      sample_region(bgr, r, inner);
    } else {
      sample_region(bgr, r, crop);
    }
    const cv::Mat* pixels = &crop;
    if (o.rgb) {
      cv::cvtColor(crop, ordered, cv::COLOR_BGR2RGB);
      pixels = &ordered;
    }
    write_normalized(*pixels, 3, o.scale, o.mean.data(), o.std.data(), true, out.data<float>() + i * row);
  }
  return out;
}

namespace {

class CropsStage final : public Stage {
 public:
  explicit CropsStage(StageArgs& args) : Stage(args.name) {
    Params& p = args.params;
    remember_place(p);
    output_ = p.get<std::string>("output", args.name);
    read_size(args);
    selection_.kinds = p.string_set("kinds");
    selection_.classes = p.string_set("classes");
    selection_.min_size = p.get<float>("min_size", selection_.min_size);
    if (!(selection_.min_size >= 0)) p.fail("min_size", "must be >= 0 (pixels)");
    selection_.max_crops = p.get<int>("max_crops", selection_.max_crops);
    if (selection_.max_crops < 1 || selection_.max_crops > 4096) p.fail("max_crops", "must be from 1 to 4096");
    options_.padding = p.get<float>("padding", 0.f);
    // Up to 2 (the region 5x the box): the region is sampled, never copied whole, but a box
    // lost in a sea of its surroundings is not what a secondary model looks at.
    if (!(options_.padding >= 0 && options_.padding <= 2)) p.fail("padding", "must be from 0 to 2 (a fraction of the box on each side)");
    const auto aspect = p.choice("aspect", "stretch", {"stretch", "pad", "expand"});
    options_.aspect = aspect == "pad" ? CropAspect::kPad : aspect == "expand" ? CropAspect::kExpand : CropAspect::kStretch;
    // The preprocess stage's normalization keys, with its defaults.
    const PixelNormalization norm = read_normalization_keys(p);
    options_.rgb = norm.rgb;
    options_.scale = norm.scale;
    options_.mean = norm.mean;
    options_.std = norm.std;
    produce(output_, TensorSpec{{-1, 3, options_.height, options_.width}});
  }

 private:
  // width and height: given, or the `model:`'s input [N, 3, H, W]; both, and they must agree.
  void read_size(StageArgs& args) {
    Params& p = args.params;
    options_.width = p.get<int>("width", 0);
    options_.height = p.get<int>("height", 0);
    for (const char* key : {"width", "height"}) {
      if (p.has(key) && (std::string(key) == "width" ? options_.width : options_.height) < 1) p.fail(key, "must be at least 1");
    }
    if (p.has("model")) {
      const ModelEntry& model = args.model("model");
      const ValueInfo* in = model.graph->inputs.empty() ? nullptr : &model.graph->inputs[0];
      if (in == nullptr || !in->has_shape || in->dims.size() != 4 || (in->dims[1].known() && in->dims[1].value != 3)) {
        p.fail("model", fmt::format("input {}: crops make [K, 3, H, W] (NCHW, 3 channels)",
                                    in == nullptr ? std::string("none") : in->name + " " + in->description()));
      }
      const auto fixed = [&](const char* key, const Dim& dim, int& value) {
        if (!dim.known()) return;
        if (dim.value < 1 || dim.value > 8192) p.fail("model", fmt::format("input '{}' is {}: a crop's {} must be from 1 to 8192", in->name, in->description(), key));
        if (value > 0 && value != dim.value) {
          p.fail(key, fmt::format("model input '{}' is {}: its {} is fixed at {}", in->name, in->description(), key, dim.value));
        }
        value = static_cast<int>(dim.value);
      };
      fixed("height", in->dims[2], options_.height);
      fixed("width", in->dims[3], options_.width);
    }
    if (options_.width < 1) p.fail("width", "missing required key 'width' (or a model: whose input fixes it)");
    if (options_.height < 1) p.fail("height", "missing required key 'height' (or a model: whose input fixes it)");
    if (static_cast<std::int64_t>(options_.width) * options_.height > 8192 * 8192) p.fail("width", "the crop is too large");
  }

  void do_process(std::span<Frame* const> frames) override {
    for (Frame* f : frames) {
      const cv::Mat bgr = as_mat(f->image);
      std::vector<int> parents = select_crops(f->detections, selection_, bgr.cols, bgr.rows);
      std::vector<RectF> regions;
      regions.reserve(parents.size());
      for (int i : parents) regions.push_back(crop_region(f->detections[static_cast<std::size_t>(i)].box, options_));
      f->tensors[output_] = crops_to_batch(bgr, regions, options_, f->memory);
      f->crop_parents[output_] = std::move(parents);
    }
  }

  std::string output_;
  CropSelection selection_;
  CropOptions options_;
};

}  // namespace

RW_REGISTER_STAGE("crops", CropsStage);

}  // namespace redwood
