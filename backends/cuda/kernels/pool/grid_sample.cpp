// GridSample on the GPU: float X [N, C, H, W] and grid [N, Ho, Wo, 2], modes bilinear / nearest /
// bicubic (opset 20's linear / cubic too), padding zeros / border / reflection, align_corners,
// as the reference kernel computes them (backends/cpu/reference/grid_sample.cpp). Volumes (5-D,
// opset 20) are Unsupported.

#include "backends/cuda/cuda_kernel.hpp"
#include "backends/cuda/kernels/launchers.hpp"
#include "core/error.hpp"

#include <string>

namespace redwood::cuda {
namespace {

using kernels::GridSampleMode;
using kernels::GridSamplePadding;

GridSampleMode mode_of(const Node& node) {
  const std::string m = node.attr_string("mode", "bilinear");
  if (m == "bilinear" || m == "linear") return GridSampleMode::kBilinear;
  if (m == "nearest") return GridSampleMode::kNearest;
  if (m == "bicubic" || m == "cubic") return GridSampleMode::kBicubic;
  throw Unsupported(fmt::format("{}: mode '{}' is not supported (bilinear, linear, nearest, bicubic, cubic)",
                                node.where(), m));
}

GridSamplePadding padding_of(const Node& node) {
  const std::string m = node.attr_string("padding_mode", "zeros");
  if (m == "zeros") return GridSamplePadding::kZeros;
  if (m == "border") return GridSamplePadding::kBorder;
  if (m == "reflection") return GridSamplePadding::kReflection;
  throw Unsupported(fmt::format("{}: padding_mode '{}' is not supported (zeros, border, reflection)", node.where(), m));
}

class GridSampleKernel final : public CudaKernel {
 public:
  GridSampleKernel(const Node& node, const KernelInfo& info) : node_(node) {
    if (!info.input_dtypes.empty()) expect_f32(node, info.input_dtypes[0], "X");
    if (info.input_dtypes.size() > 1) expect_f32(node, info.input_dtypes[1], "grid");
    p_.mode = mode_of(node);
    p_.padding = padding_of(node);
    p_.align_corners = node.attr_int("align_corners", 0) != 0;
  }

  std::vector<TensorDesc> plan(const PlanInfo& info) override {
    const TensorDesc& x = info.input(0);
    const TensorDesc& grid = info.input(1);
    expect_f32(node_, x.dtype, "X");
    expect_f32(node_, grid.dtype, "grid");
    RW_EXPECTS(x.shape.size() == 4, Unsupported, "{}: X {} is not supported; the CUDA GridSample samples [N, C, H, W] images",
               node_.where(), shape_str(x.shape));
    RW_EXPECTS(grid.shape.size() == 4 && grid.shape[0] == x.shape[0] && grid.shape[3] == 2, InvalidArgument,
               "{}: grid {} must be [N, H_out, W_out, 2] for X {}", node_.where(), shape_str(grid.shape),
               shape_str(x.shape));
    RW_EXPECTS(x.shape[2] > 0 && x.shape[3] > 0, InvalidArgument, "{}: X {} has no pixels to sample", node_.where(),
               shape_str(x.shape));
    p_.n = x.shape[0];
    p_.c = x.shape[1];
    p_.h = x.shape[2];
    p_.w = x.shape[3];
    p_.ho = grid.shape[1];
    p_.wo = grid.shape[2];
    return {{DType::kF32, {p_.n, p_.c, p_.ho, p_.wo}}};
  }

  void launch(const LaunchArgs& a) override {
    kernels::launch_grid_sample(p_, static_cast<const float*>(a.inputs[0].data), static_cast<const float*>(a.inputs[1].data),
                                static_cast<float*>(a.outputs[0].data), a.stream);
  }

 private:
  const Node& node_;
  kernels::GridSampleParams p_;
};

}  // namespace

RW_REGISTER_CUDA_KERNEL("GridSample", GridSampleKernel);

}  // namespace redwood::cuda
