// BatchNormalization (ONNX opsets 1-15), inference mode only:
//     Y = (X - mean) / sqrt(var + epsilon) * scale + B      per channel (axis 1)
// folded into Y = X * a + c with a and c per channel. Training mode (training_mode = 1, or the
// running-statistics outputs asked for) and the per-activation statistics of old opsets
// (spatial = 0) are rejected at load.

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/nn_common.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace redwood::cpu {
namespace {

class BatchNormKernel final : public Kernel {
 public:
  BatchNormKernel(const Node& node, const KernelInfo& info)
      : epsilon_(node.attr_float("epsilon", 1e-5f)) {
    static const char* const kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
    for (std::size_t i = 0; i < info.input_dtypes.size() && i < 5; ++i) {
      expect_dtype(node, info.input_dtypes[i], {DType::kF32}, kNames[i]);
    }
    RW_EXPECTS(node.attr_int("training_mode", 0) == 0, Unsupported,
               "{}: training_mode = 1 is not supported (inference only)", node.where());
    RW_EXPECTS(node.attr_int("spatial", 1) != 0, Unsupported,
               "{}: spatial = 0 (per-activation statistics) is not supported", node.where());
    std::size_t outputs = 0;
    for (const auto& o : node.outputs) outputs += o.empty() ? 0 : 1;
    RW_EXPECTS(outputs <= 1, Unsupported,
               "{}: {} outputs requested; only Y is supported (the running mean and variance "
               "outputs exist for training)",
               node.where(), outputs);
    RW_EXPECTS(node.inputs.size() >= 5, InvalidArgument,
               "{}: needs 5 inputs (X, scale, B, input_mean, input_var), has {}", node.where(),
               node.inputs.size());
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const Tensor x = ctx.input(0).contiguous();
    nn::expect_f32(node, x, "X");
    RW_EXPECTS(x.rank() >= 2, InvalidArgument, "{}: X {} must have rank 2 or more", node.where(),
               shape_str(x.shape()));
    const std::int64_t channels = x.dim(1);
    static const char* const kNames[] = {"X", "scale", "B", "input_mean", "input_var"};
    std::vector<std::vector<float>> params;
    for (std::size_t i = 1; i < 5; ++i) {
      const Tensor& t = ctx.input(i);
      nn::expect_f32(node, t, kNames[i]);
      RW_EXPECTS(t.rank() == 1 && t.dim(0) == channels, InvalidArgument,
                 "{}: {} {} must be [{}] for X {}", node.where(), kNames[i], shape_str(t.shape()),
                 channels, shape_str(x.shape()));
      params.push_back(t.to_float_vector());
    }
    const auto& scale = params[0];
    const auto& bias = params[1];
    const auto& mean = params[2];
    const auto& var = params[3];
    std::vector<float> mul(channels), add(channels);
    for (std::int64_t c = 0; c < channels; ++c) {
      // In double: the folded constants are then as exact as the unfolded formula.
      const double a = double(scale[c]) / std::sqrt(double(var[c]) + double(epsilon_));
      mul[c] = static_cast<float>(a);
      add[c] = static_cast<float>(double(bias[c]) - double(mean[c]) * a);
    }

    Tensor y = ctx.allocate_output(0, DType::kF32, x.shape());
    ctx.outputs[0] = y;
    const std::int64_t planes = x.dim(0) * channels;
    const std::int64_t inner = planes == 0 ? 0 : x.numel() / planes;
    const float* xp = x.data<float>();
    float* yp = y.data<float>();
    parallel_for(planes, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, inner)),
                 [&](std::int64_t begin, std::int64_t end) {
                   for (std::int64_t p = begin; p < end; ++p) {
                     const float m = mul[p % channels], s = add[p % channels];
                     const float* src = xp + p * inner;
                     float* dst = yp + p * inner;
                     for (std::int64_t i = 0; i < inner; ++i) dst[i] = src[i] * m + s;
                   }
                 });
  }

 private:
  float epsilon_;
};

}  // namespace

RW_REGISTER_KERNEL("BatchNormalization", Device::kCpu, make_factory<BatchNormKernel>());

}  // namespace redwood::cpu
