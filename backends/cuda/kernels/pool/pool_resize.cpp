// MaxPool / AveragePool (2-D windows), GlobalAveragePool / GlobalMaxPool and Resize (nearest and
// linear over the last two axes) on the GPU.

#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/kernels/launchers.hpp"
#include "core/error.hpp"

#include <cmath>

namespace redwood::cuda {
namespace {

class PoolKernel final : public CudaKernel {
 public:
  PoolKernel(const Node& node, const KernelInfo& info) : node_(node) {
    if (!info.input_dtypes.empty()) expect_f32(node, info.input_dtypes[0]);
    RW_EXPECTS(node.outputs.size() == 1 || node.outputs[1].empty(), Unsupported,
               "{}: MaxPool's Indices output is not computed on the GPU", node.where());
    RW_EXPECTS(node.attr_int("storage_order", 0) == 0, Unsupported, "{}: storage_order 1", node.where());
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Shape& x = info.input(0).shape;
    expect_f32(node_, info.input(0).dtype);
    RW_EXPECTS(x.size() == 4 || x.size() == 3, Unsupported, "{}: the CUDA kernel pools 1-D and 2-D, input is {}",
               node_.where(), shape_str(x));
    const std::size_t sr = x.size() - 2, off = 2 - sr;
    auto get = [&](const char* key, std::int64_t fallback, std::size_t count) {
      auto v = node_.attr_ints(key, std::vector<std::int64_t>(count, fallback));
      RW_EXPECTS(v.size() == count, InvalidArgument, "{}: {} has {} values", node_.where(), key, v.size());
      return v;
    };
    RW_EXPECTS(node_.has_attr("kernel_shape"), InvalidArgument, "{}: kernel_shape is required", node_.where());
    const auto k = get("kernel_shape", 1, sr), s = get("strides", 1, sr), d = get("dilations", 1, sr);
    const auto pads = get("pads", 0, 2 * sr);
    const std::string auto_pad = node_.attr_string("auto_pad", "NOTSET");
    const bool ceil_mode = node_.attr_int("ceil_mode", 0) != 0;
    std::int64_t in[2] = {1, x.back()}, kk[2] = {1, 1}, ss[2] = {1, 1}, dd[2] = {1, 1}, pb[2] = {0, 0},
                 pe[2] = {0, 0}, out[2];
    if (sr == 2) in[0] = x[2];
    for (std::size_t i = 0; i < sr; ++i) {
      kk[off + i] = k[i];
      ss[off + i] = s[i];
      dd[off + i] = d[i];
      pb[off + i] = pads[i];
      pe[off + i] = pads[sr + i];
    }
    for (int i = 0; i < 2; ++i) {
      const std::int64_t ext = (kk[i] - 1) * dd[i] + 1;
      if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        out[i] = ceil_div(in[i], ss[i]);
        const std::int64_t total = std::max<std::int64_t>(0, (out[i] - 1) * ss[i] + ext - in[i]);
        pb[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        pe[i] = total - pb[i];
      } else if (auto_pad == "VALID") {
        pb[i] = pe[i] = 0;
        out[i] = (in[i] - ext) / ss[i] + 1;
      } else {
        const std::int64_t span = in[i] + pb[i] + pe[i] - ext;
        out[i] = (ceil_mode ? ceil_div(span, ss[i]) : span / ss[i]) + 1;
        // A last window that would start in the end padding is dropped.
        if (ceil_mode && (out[i] - 1) * ss[i] >= in[i] + pb[i]) --out[i];
      }
      RW_EXPECTS(out[i] > 0, InvalidArgument, "{}: input {} is smaller than the window", node_.where(), shape_str(x));
    }
    p_ = kernels::PoolParams{static_cast<int>(x[0]), static_cast<int>(x[1]), static_cast<int>(in[0]),
                             static_cast<int>(in[1]), static_cast<int>(out[0]), static_cast<int>(out[1]),
                             static_cast<int>(kk[0]), static_cast<int>(kk[1]), static_cast<int>(ss[0]),
                             static_cast<int>(ss[1]), static_cast<int>(pb[0]), static_cast<int>(pb[1]),
                             static_cast<int>(dd[0]), static_cast<int>(dd[1]), static_cast<int>(pe[0]),
                             static_cast<int>(pe[1]), node_.op_type == "MaxPool",
                             node_.attr_int("count_include_pad", 0) != 0};
    Shape y = {x[0], x[1]};
    if (sr == 2) y.push_back(out[0]);
    y.push_back(out[1]);
    return {{DType::kF32, y}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_pool2d(p_, static_cast<const float*>(a.inputs[0].data), static_cast<float*>(a.outputs[0].data),
                           a.stream);
  }

 private:
  const Node& node_;
  kernels::PoolParams p_{};
};

class GlobalPoolKernel final : public CudaKernel {
 public:
  GlobalPoolKernel(const Node& node, const KernelInfo& info) : node_(node), max_(node.op_type == "GlobalMaxPool") {
    if (!info.input_dtypes.empty()) expect_f32(node, info.input_dtypes[0]);
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Shape& x = info.input(0).shape;
    expect_f32(node_, info.input(0).dtype);
    RW_EXPECTS(x.size() >= 2, InvalidArgument, "{}: input {} has no channel axis", node_.where(), shape_str(x));
    Shape y = x;
    inner_ = 1;
    for (std::size_t d = 2; d < x.size(); ++d) {
      inner_ *= x[d];
      y[d] = 1;
    }
    rows_ = x[0] * x[1];
    return {{DType::kF32, y}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_global_pool(static_cast<const float*>(a.inputs[0].data), static_cast<float*>(a.outputs[0].data),
                                rows_, inner_, max_, a.stream);
  }

 private:
  const Node& node_;
  bool max_;
  long long rows_ = 0, inner_ = 1;
};

class ResizeKernel final : public CudaKernel {
 public:
  ResizeKernel(const Node& node, const KernelInfo& info) : node_(node), opset_(info.opset) {
    if (!info.input_dtypes.empty()) expect_f32(node, info.input_dtypes[0]);
    const std::string mode = node.attr_string("mode", "nearest");
    RW_EXPECTS(mode == "nearest" || mode == "linear", Unsupported, "{}: Resize mode '{}' (the GPU does nearest, linear)",
               node.where(), mode);
    p_.mode = mode == "nearest" ? kernels::ResizeMode::kNearest : kernels::ResizeMode::kLinear;
    const std::string coord = node.attr_string("coordinate_transformation_mode", opset_ >= 11 ? "half_pixel" : "asymmetric");
    if (coord == "half_pixel") {
      p_.coord = kernels::ResizeCoord::kHalfPixel;
    } else if (coord == "pytorch_half_pixel") {
      p_.coord = kernels::ResizeCoord::kPytorchHalfPixel;
    } else if (coord == "align_corners") {
      p_.coord = kernels::ResizeCoord::kAlignCorners;
    } else if (coord == "asymmetric") {
      p_.coord = kernels::ResizeCoord::kAsymmetric;
    } else if (coord == "tf_half_pixel_for_nn") {
      p_.coord = kernels::ResizeCoord::kTfHalfPixelForNn;
    } else {
      throw Unsupported(fmt::format("{}: coordinate_transformation_mode '{}'", node.where(), coord));
    }
    const std::string nearest = node.attr_string("nearest_mode", "round_prefer_floor");
    if (nearest == "round_prefer_floor") {
      p_.nearest = kernels::ResizeNearest::kRoundPreferFloor;
    } else if (nearest == "round_prefer_ceil") {
      p_.nearest = kernels::ResizeNearest::kRoundPreferCeil;
    } else if (nearest == "floor") {
      p_.nearest = kernels::ResizeNearest::kFloor;
    } else if (nearest == "ceil") {
      p_.nearest = kernels::ResizeNearest::kCeil;
    } else {
      throw Unsupported(fmt::format("{}: nearest_mode '{}'", node.where(), nearest));
    }
    RW_EXPECTS(!node.has_attr("axes") && node.attr_int("antialias", 0) == 0 &&
                   node.attr_string("keep_aspect_ratio_policy", "stretch") == "stretch",
               Unsupported, "{}: Resize with axes, antialias or keep_aspect_ratio_policy", node.where());
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Shape& x = info.input(0).shape;
    expect_f32(node_, info.input(0).dtype);
    RW_EXPECTS(x.size() == 4, Unsupported, "{}: the CUDA kernel resizes NCHW tensors, not {}", node_.where(),
               shape_str(x));
    // opset 10: (X, scales); opset 11+: (X, roi, scales, sizes).
    const std::size_t scales_at = opset_ >= 11 ? 2 : 1;
    std::vector<double> scales;
    Shape y = x;
    if (info.has_input(scales_at) && shape_numel(info.input(scales_at).shape) > 0) {
      const Tensor& s = info.host_input(scales_at, "Resize's scales");
      RW_EXPECTS(s.numel() == 4, InvalidArgument, "{}: {} scales for a rank-4 input", node_.where(), s.numel());
      for (std::int64_t i = 0; i < 4; ++i) {
        scales.push_back(s.get_as_double(i));
        y[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(std::floor(x[static_cast<std::size_t>(i)] * scales.back()));
      }
    } else {
      const Tensor& s = info.host_input(3, "Resize's sizes");
      RW_EXPECTS(s.numel() == 4, InvalidArgument, "{}: {} sizes for a rank-4 input", node_.where(), s.numel());
      for (std::int64_t i = 0; i < 4; ++i) {
        y[static_cast<std::size_t>(i)] = static_cast<std::int64_t>(s.get_as_double(i));
        scales.push_back(static_cast<double>(y[static_cast<std::size_t>(i)]) / static_cast<double>(x[static_cast<std::size_t>(i)]));
      }
    }
    RW_EXPECTS(y[0] == x[0] && y[1] == x[1], Unsupported, "{}: the CUDA kernel resizes only the last two axes ({} to {})",
               node_.where(), shape_str(x), shape_str(y));
    p_.planes = x[0] * x[1];
    p_.h = static_cast<int>(x[2]);
    p_.w = static_cast<int>(x[3]);
    p_.oh = static_cast<int>(y[2]);
    p_.ow = static_cast<int>(y[3]);
    p_.scale_h = static_cast<float>(scales[2]);
    p_.scale_w = static_cast<float>(scales[3]);
    return {{DType::kF32, y}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_resize(p_, static_cast<const float*>(a.inputs[0].data), static_cast<float*>(a.outputs[0].data),
                           a.stream);
  }

 private:
  const Node& node_;
  std::int64_t opset_;
  kernels::ResizeParams p_{};
};

}  // namespace

RW_REGISTER_CUDA_KERNEL("MaxPool", PoolKernel);
RW_REGISTER_CUDA_KERNEL("AveragePool", PoolKernel);
RW_REGISTER_CUDA_KERNEL("GlobalAveragePool", GlobalPoolKernel);
RW_REGISTER_CUDA_KERNEL("GlobalMaxPool", GlobalPoolKernel);
RW_REGISTER_CUDA_KERNEL("Resize", ResizeKernel);

}  // namespace redwood::cuda
