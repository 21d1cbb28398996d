// Conv and ConvTranspose on the GPU (2-D, and 1-D as 2-D of height 1), with the fused epilogue of
// core/passes/fuse_epilogue.cpp: bias (input 2), residual (input 3, the output's shape), and
// rw.activation / rw.alpha / rw.beta. Depthwise and other one-channel-per-group convolutions take
// the direct kernel; every other convolution the implicit GEMM at the runner's precision.

#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/kernels/conv_kernels.hpp"
#include "backends/cuda/kernels/fused_epilogue.hpp"
#include "core/error.hpp"

namespace redwood::cuda {
namespace {

using kernels::ConvShape;

kernels::MmaType mma_type(Precision p) {
  switch (p) {
    case Precision::kTf32: return kernels::MmaType::kTf32;
    case Precision::kFp16: return kernels::MmaType::kFp16;
    case Precision::kBf16: return kernels::MmaType::kBf16;
    default: return kernels::MmaType::kFp32;
  }
}

// Spatial attributes as 2-D (a 1-D convolution is 2-D with height 1 and kernel height 1).
struct Spatial {
  std::int64_t kernel[2] = {1, 1}, stride[2] = {1, 1}, dil[2] = {1, 1}, pad_begin[2] = {0, 0}, pad_end[2] = {0, 0};
  std::int64_t out_pad[2] = {0, 0};
  std::vector<std::int64_t> output_shape;
  std::string auto_pad;
};

Spatial read_spatial(const Node& node, std::size_t spatial_rank, const Shape& w) {
  RW_EXPECTS(spatial_rank == 1 || spatial_rank == 2, Unsupported,
             "{}: the CUDA kernel handles 1-D and 2-D convolutions, not {}-D", node.where(), spatial_rank);
  Spatial s;
  const std::size_t off = 2 - spatial_rank;  // 1-D fills the width
  auto fill = [&](const char* key, std::int64_t* dst, std::int64_t fallback) {
    const auto v = node.attr_ints(key, std::vector<std::int64_t>(spatial_rank, fallback));
    RW_EXPECTS(v.size() == spatial_rank, InvalidArgument, "{}: {} has {} values for {} spatial axes", node.where(),
               key, v.size(), spatial_rank);
    for (std::size_t i = 0; i < spatial_rank; ++i) dst[off + i] = v[i];
  };
  for (std::size_t i = 0; i < spatial_rank; ++i) s.kernel[off + i] = w[2 + i];
  fill("strides", s.stride, 1);
  fill("dilations", s.dil, 1);
  fill("output_padding", s.out_pad, 0);
  const auto pads = node.attr_ints("pads", std::vector<std::int64_t>(2 * spatial_rank, 0));
  RW_EXPECTS(pads.size() == 2 * spatial_rank, InvalidArgument, "{}: pads has {} values", node.where(), pads.size());
  for (std::size_t i = 0; i < spatial_rank; ++i) {
    s.pad_begin[off + i] = pads[i];
    s.pad_end[off + i] = pads[spatial_rank + i];
  }
  s.auto_pad = node.attr_string("auto_pad", "NOTSET");
  s.output_shape = node.attr_ints("output_shape", {});
  return s;
}

// Shared by Conv and ConvTranspose: operand checks, epilogue inputs, launch arguments.
class ConvBase : public CudaKernel {
 protected:
  ConvBase(const Node& node, const KernelInfo& info) : node_(node) {
    for (std::size_t i = 0; i < info.input_dtypes.size() && i < 4; ++i) expect_f32(node, info.input_dtypes[i]);
    epilogue_ = fused_activation(node);
  }

  // Checks bias and residual against the planned output.
  void check_epilogue(const PlanInfo& info, std::int64_t out_channels, const Shape& out) const {
    if (info.has_input(2)) {
      RW_EXPECTS(shape_numel(info.input(2).shape) == out_channels, InvalidArgument, "{}: bias {} for {} channels",
                 node_.where(), shape_str(info.input(2).shape), out_channels);
    }
    check_fused_residual(info, out);
  }

  // The operands both kernels read: input and weights of one rank, 2-D spatial attributes, group.
  struct Operands {
    Shape x, w;
    std::size_t spatial_rank;
    Spatial sp;
    std::int64_t groups;
    std::int64_t in[2];  // input extent as 2-D
  };
  Operands read_operands(const PlanInfo& info) const {
    Operands o{info.input(0).shape, info.input(1).shape, 0, {}, node_.attr_int("group", 1), {}};
    RW_EXPECTS(o.x.size() >= 3 && o.w.size() == o.x.size(), InvalidArgument, "{}: input {} and weights {}",
               node_.where(), shape_str(o.x), shape_str(o.w));
    o.spatial_rank = o.x.size() - 2;
    o.sp = read_spatial(node_, o.spatial_rank, o.w);
    o.in[0] = o.spatial_rank == 2 ? o.x[2] : 1;
    o.in[1] = o.x[o.x.size() - 1];
    return o;
  }

  // Records the launch shape and returns the output shape [N, k, (oh,) ow].
  Shape set_shape(const Operands& o, std::int64_t k, const std::int64_t out[2], const std::int64_t pad_begin[2]) {
    const Spatial& sp = o.sp;
    shape_ = ConvShape{static_cast<int>(o.x[0]), static_cast<int>(o.x[1]), static_cast<int>(o.in[0]),
                       static_cast<int>(o.in[1]), static_cast<int>(k), static_cast<int>(sp.kernel[0]),
                       static_cast<int>(sp.kernel[1]), static_cast<int>(out[0]), static_cast<int>(out[1]),
                       static_cast<int>(sp.stride[0]), static_cast<int>(sp.stride[1]), static_cast<int>(pad_begin[0]),
                       static_cast<int>(pad_begin[1]), static_cast<int>(sp.dil[0]), static_cast<int>(sp.dil[1]),
                       static_cast<int>(o.groups)};
    Shape y = {o.x[0], k};
    if (o.spatial_rank == 2) y.push_back(out[0]);
    y.push_back(out[1]);
    return y;
  }

  kernels::Epilogue bound_epilogue(const LaunchArgs& a) const {
    kernels::Epilogue e = epilogue_;
    if (a.inputs.size() > 2) e.bias = static_cast<const float*>(a.inputs[2].data);
    if (a.inputs.size() > cpu::kResidualInput) e.residual = static_cast<const float*>(a.inputs[cpu::kResidualInput].data);
    return e;
  }

  const Node& node_;
  kernels::Epilogue epilogue_;
  ConvShape shape_{};
};

class ConvKernel final : public ConvBase {
 public:
  ConvKernel(const Node& node, const KernelInfo& info) : ConvBase(node, info) {}

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Operands o = read_operands(info);
    const Shape& x = o.x;
    const Shape& w = o.w;
    const Spatial& sp = o.sp;
    const std::int64_t groups = o.groups;
    RW_EXPECTS(groups > 0 && x[1] % groups == 0 && w[0] % groups == 0 && w[1] * groups == x[1], InvalidArgument,
               "{}: {} input channels, weights {}, group {}", node_.where(), x[1], shape_str(w), groups);
    const std::int64_t* in = o.in;
    std::int64_t out[2], pb[2];
    for (int i = 0; i < 2; ++i) {
      const std::int64_t ext = (sp.kernel[i] - 1) * sp.dil[i] + 1;
      pb[i] = sp.pad_begin[i];
      if (sp.auto_pad == "SAME_UPPER" || sp.auto_pad == "SAME_LOWER") {
        out[i] = ceil_div(in[i], sp.stride[i]);
        const std::int64_t total = std::max<std::int64_t>(0, (out[i] - 1) * sp.stride[i] + ext - in[i]);
        pb[i] = sp.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      } else if (sp.auto_pad == "VALID") {
        pb[i] = 0;
        out[i] = (in[i] - ext) / sp.stride[i] + 1;
      } else {
        RW_EXPECTS(sp.auto_pad == "NOTSET", InvalidArgument, "{}: auto_pad '{}'", node_.where(), sp.auto_pad);
        out[i] = (in[i] + sp.pad_begin[i] + sp.pad_end[i] - ext) / sp.stride[i] + 1;
      }
      RW_EXPECTS(out[i] > 0, InvalidArgument, "{}: input {} is smaller than the kernel", node_.where(), shape_str(x));
    }
    const Shape y = set_shape(o, w[0], out, pb);
    check_epilogue(info, w[0], y);
    depthwise_ = w[1] == 1;
    type_ = mma_type(info.precision);
    splits_ = depthwise_ ? 1 : kernels::conv_split_k(shape_, type_, multiprocessor_count());
    return {{DType::kF32, y}};
  }

  std::size_t workspace_bytes() const override {
    if (splits_ <= 1) return 0;
    return static_cast<std::size_t>(splits_) * shape_.n * shape_.k * shape_.oh * shape_.ow * sizeof(float);
  }

  void launch(const LaunchArgs& a) override {
    const auto* x = static_cast<const float*>(a.inputs[0].data);
    const auto* w = static_cast<const float*>(a.inputs[1].data);
    auto* y = static_cast<float*>(a.outputs[0].data);
    if (depthwise_) {
      kernels::launch_conv_depthwise(shape_, x, w, y, bound_epilogue(a), a.stream);
    } else {
      kernels::launch_conv_implicit_gemm(shape_, x, w, y, bound_epilogue(a), type_, splits_,
                                         static_cast<float*>(a.workspace), a.stream);
    }
  }

 private:
  bool depthwise_ = false;
  kernels::MmaType type_ = kernels::MmaType::kFp32;
  int splits_ = 1;  // K split in this many ranges (layers with few output pixels)
};

class ConvTransposeKernel final : public ConvBase {
 public:
  ConvTransposeKernel(const Node& node, const KernelInfo& info) : ConvBase(node, info) {}

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const Operands o = read_operands(info);
    const Shape& x = o.x;
    const Shape& w = o.w;
    const Spatial& sp = o.sp;
    const std::size_t sr = o.spatial_rank;
    const std::int64_t groups = o.groups;
    RW_EXPECTS(groups > 0 && x[1] == w[0] && x[1] % groups == 0, InvalidArgument,
               "{}: {} input channels, weights {}, group {}", node_.where(), x[1], shape_str(w), groups);
    const std::int64_t* in = o.in;
    std::int64_t out[2], pb[2];
    for (int i = 0; i < 2; ++i) {
      const std::int64_t ext = (sp.kernel[i] - 1) * sp.dil[i] + 1;
      const std::int64_t full = sp.stride[i] * (in[i] - 1) + sp.out_pad[i] + ext;
      std::int64_t target = -1;
      if (!sp.output_shape.empty()) {
        RW_EXPECTS(sp.output_shape.size() >= sr, InvalidArgument, "{}: output_shape has {} values", node_.where(),
                   sp.output_shape.size());
        target = i == 0 && sr == 1 ? 1 : sp.output_shape[sp.output_shape.size() - (2 - i)];
      } else if (sp.auto_pad == "SAME_UPPER" || sp.auto_pad == "SAME_LOWER") {
        target = in[i] * sp.stride[i];
      }
      if (target >= 0) {
        // ONNX's total padding; negative when output_shape asks for more than the inputs reach
        // (the extra outputs see only the bias). Halved with floor division, as ONNX does.
        const std::int64_t total = full - target;
        const std::int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
        pb[i] = sp.auto_pad == "SAME_UPPER" ? half : total - half;
        out[i] = target;
      } else {
        pb[i] = sp.auto_pad == "VALID" ? 0 : sp.pad_begin[i];
        out[i] = full - pb[i] - (sp.auto_pad == "VALID" ? 0 : sp.pad_end[i]);
      }
      RW_EXPECTS(out[i] > 0, InvalidArgument, "{}: empty output", node_.where());
    }
    const std::int64_t k = w[1] * groups;
    const Shape y = set_shape(o, k, out, pb);
    check_epilogue(info, k, y);
    return {{DType::kF32, y}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_conv_transpose(shape_, static_cast<const float*>(a.inputs[0].data),
                                   static_cast<const float*>(a.inputs[1].data), static_cast<float*>(a.outputs[0].data),
                                   bound_epilogue(a), a.stream);
  }
};

}  // namespace

RW_REGISTER_CUDA_KERNEL("Conv", ConvKernel);
RW_REGISTER_CUDA_KERNEL("ConvTranspose", ConvTransposeKernel);

}  // namespace redwood::cuda
