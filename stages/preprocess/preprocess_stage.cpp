// preprocess: the picture of a frame -> one model input tensor (resize by stretching or
// letterboxing, colour order, scale/mean/std, NCHW or NHWC), shaped from the model's declared
// input so that a size the model cannot take fails at load. Writes the tensor under `output`
// and the picture->tensor mapping that decoders use to bring boxes back.
//
// Where scale/mean/std are applied (normalize_on): on the host here (`stage`: a float tensor), or
// by the runner of the model the tensor feeds (`model`: this stage writes the resized picture as
// 8-bit pixels [1, H, W, C] with the normalization on its spec, and the infer stage hands both to
// the runner; core/picture_input.hpp). On a GPU that takes the per-value conversion off the
// host's cores, the bottleneck of many streams, and copies a quarter of the bytes; the values are
// the same either way (to a float rounding). `auto` (default) is `model` where the model runs on
// a GPU (device cuda, or auto with CUDA usable), else `stage`. Only an infer stage may read the
// pixels; decoders read only the mapping (`transform`), which is the same either way.
//
//   - name: det_pre
//     type: preprocess
//     model: det          # the model (under models:) whose input this feeds
//     input: x            # that model's input (default: its first)
//     output: det_in      # tensor key (default: the stage's name)
//     width: 416          # for dynamic extents; fixed extents must match
//     height: 320
//     multiple_of: 32     # sizes the model needs divisible (DB detectors: 32); checked at load
//     resize: stretch     # or letterbox
//     color: bgr          # or rgb
//     scale: 0.00392157
//     mean: [0.485, 0.456, 0.406]
//     std: [0.229, 0.224, 0.225]
//     layout: auto        # nchw, nhwc
//     normalize_on: auto  # stage, model

#include "stages/picture_cv.hpp"
#include "stages/preprocess/image_tensor.hpp"
#include "stages/preprocess/normalization_keys.hpp"
#include "stages/stage.hpp"

#include <fmt/format.h>

namespace redwood {
namespace {

// normalize_on: auto is `model` where the model will run on a GPU (as the infer stage decides:
// device cuda, or auto with CUDA usable), where the host's cores are what many streams run short of.
bool normalize_on_model(const std::string& choice, const ModelEntry& model) {
  if (choice != "auto") return choice == "model";
  if (model.device == "cuda") return true;
  if (model.device != "auto") return false;
  const auto& registry = device_runner_registry();
  const auto it = registry.find("cuda");
  return it != registry.end() && it->second.unavailable().empty();
}

class PreprocessStage final : public Stage {
 public:
  explicit PreprocessStage(StageArgs& args) : Stage(args.name) {
    Params& p = args.params;
    remember_place(p);
    const ModelEntry& model = args.model("model");
    const auto input_name = p.get<std::string>("input", model.graph->inputs.empty() ? "" : model.graph->inputs[0].name);
    const ValueInfo* vi = nullptr;
    for (const auto& in : model.graph->inputs) {
      if (in.name == input_name) vi = &in;
    }
    if (!vi) p.fail("input", fmt::format("the model has no input '{}'", input_name));
    input_ = *vi;
    if (!input_.has_shape || input_.dims.size() != 4) {
      p.fail("model", fmt::format("input '{}' is {}: a picture feeds only a rank-4 input", input_.name, input_.description()));
    }
    output_ = p.get<std::string>("output", args.name);
    options_.width = p.get<int>("width", 0);
    options_.height = p.get<int>("height", 0);
    // A model cannot declare "multiples of 32" in its shapes; the file says it, and a size that
    // breaks it fails here rather than deep inside the first run.
    const int multiple = p.get<int>("multiple_of", 1);
    if (multiple < 1) p.fail("multiple_of", "must be at least 1");
    for (const char* key : {"width", "height"}) {
      const int v = std::string(key) == "width" ? options_.width : options_.height;
      if (v > 0 && v % multiple != 0) p.fail(key, fmt::format("{} is not a multiple of {} (multiple_of)", v, multiple));
    }
    options_.resize = p.choice("resize", "stretch", {"stretch", "letterbox"}) == "letterbox" ? ResizeMode::kLetterbox
                                                                                           : ResizeMode::kStretch;
    options_.pad_value = p.get<float>("pad_value", 0.f);
    const PixelNormalization norm = read_normalization_keys(p);
    options_.rgb = norm.rgb;
    options_.scale = norm.scale;
    options_.mean = norm.mean;
    options_.std = norm.std;
    const auto layout = p.choice("layout", "auto", {"auto", "nchw", "nhwc"});
    options_.layout = layout == "nchw" ? ImageLayout::kNCHW : layout == "nhwc" ? ImageLayout::kNHWC : ImageLayout::kAuto;
    const auto normalize_on = p.choice("normalize_on", "auto", {"auto", "stage", "model"});
    // The infer stage feeds models of one input, and the runner normalizes only its input 0.
    const bool one_input = model.graph->inputs.size() == 1;
    if (normalize_on == "model" && !one_input) {
      p.fail("normalize_on", fmt::format("the model has {} inputs; its runner normalizes a picture only for a model of one "
                                         "input (infer feeds only those)", model.graph->inputs.size()));
    }
    on_model_ = one_input && normalize_on_model(normalize_on, model);

    // Fit a dummy picture now: a width the model fixes otherwise, a batch the model fixes above 1,
    // a channel count other than 3 or 1 all fail here, at load.
    PictureFit fit;
    try {
      const cv::Mat probe(std::max(options_.height, 8), std::max(options_.width, 8), CV_8UC3, cv::Scalar::all(0));
      fit = fit_picture(probe, input_, options_);
    } catch (const Error& e) {
      p.fail("model", e.what());
    }
    if (options_.width > 0 && fit.width != options_.width) {
      p.fail("width", fmt::format("model input '{}' is {}: its width is fixed at {}", input_.name, input_.description(), fit.width));
    }
    if (options_.height > 0 && fit.height != options_.height) {
      p.fail("height", fmt::format("model input '{}' is {}: its height is fixed at {}", input_.name, input_.description(),
                                   fit.height));
    }
    // Without a size, a dynamic extent follows each picture's size: unknown at load.
    const bool nchw = fit.nchw;
    const std::int64_t h = options_.height <= 0 && !(nchw ? input_.dims[2] : input_.dims[1]).known() ? -1 : fit.height;
    const std::int64_t w = options_.width <= 0 && !(nchw ? input_.dims[3] : input_.dims[2]).known() ? -1 : fit.width;
    TensorSpec spec;
    if (on_model_) {
      spec.dims = {1, h, w, fit.channels};
      spec.dtype = DType::kU8;
      spec.picture = picture_input(fit, options_);
    } else {
      spec.dims = nchw ? std::vector<std::int64_t>{1, fit.channels, h, w} : std::vector<std::int64_t>{1, h, w, fit.channels};
    }
    spec.maps_picture = true;
    produce(output_, spec);
  }

 private:
  void do_process(std::span<Frame* const> frames) override {
    for (Frame* f : frames) {
      ImageTransform tf;
      const cv::Mat bgr = as_mat(f->image);
      f->tensors[output_] = on_model_ ? image_to_pixels(bgr, input_, options_, &tf, f->memory)
                                      : image_to_tensor(bgr, input_, options_, &tf, f->memory);
      f->transforms[output_] = tf;
    }
  }

  ValueInfo input_;
  std::string output_;
  ImageTensorOptions options_;
  bool on_model_ = false;  // normalize_on: the pixels go out, the model's runner normalizes them
};

}  // namespace

RW_REGISTER_STAGE("preprocess", PreprocessStage);

}  // namespace redwood
