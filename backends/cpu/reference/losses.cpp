// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (ONNX opsets 12-22; the opsets differ
// only in the types they allow), as the ONNX spec's reference computes them.
//
//   input   [N, C] or [N, C, d1, ..., dk], fp32 (NLL: log-probabilities; SCE: scores)
//   target  [N]    or [N, d1, ..., dk], int64 or int32 class indices
//   weight  [C], fp32, optional
//
// Viewing input as [N, C, D] (D = d1 * ... * dk), each target position j = (n, d) with class
// t = target[j] contributes
//
//     loss_j = -w_j * input[n, t, d],   w_j = weight[t] (1 without weight), 0 if t == ignore_index
//
// and `reduction` gives: none, loss shaped as target; sum, the sum of loss_j; mean, that sum
// divided by the sum of w_j (with neither weight nor ignore_index: the plain mean; all targets
// ignored: 0 / 0 = NaN, as the reference). A class outside [0, C) that is not ignore_index is an
// error. SoftmaxCrossEntropyLoss does the same on log_softmax(scores) over axis 1 and, when its
// second output is used, returns those log-probabilities (shaped as scores).

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/reference/kernel_util.hpp"
#include "backends/cpu/reference/nn_common.hpp"
#include "backends/cpu/reference/softmax.hpp"

namespace redwood::cpu {
namespace {

enum class Reduction { kNone, kSum, kMean };

template <bool kSoftmax>
class LossKernel final : public Kernel {
 public:
  LossKernel(const Node& node, const KernelInfo& info) {
    const std::string reduction = node.attr_string("reduction", "mean");
    if (reduction == "none") {
      reduction_ = Reduction::kNone;
    } else if (reduction == "sum") {
      reduction_ = Reduction::kSum;
    } else if (reduction == "mean") {
      reduction_ = Reduction::kMean;
    } else {
      throw InvalidArgument(
          fmt::format("{}: reduction '{}' is not one of none, sum, mean", node.where(), reduction));
    }
    if (node.has_attr("ignore_index")) ignore_index_ = node.attr_int("ignore_index", 0);
    const char* names[] = {kSoftmax ? "scores" : "input", kSoftmax ? "labels" : "target",
                           kSoftmax ? "weights" : "weight"};
    for (std::size_t i = 0; i < info.input_dtypes.size() && i < 3; ++i) {
      if (i == 1) {
        expect_dtype(node, info.input_dtypes[i], {DType::kI64, DType::kI32}, names[i]);
      } else {
        expect_dtype(node, info.input_dtypes[i], {DType::kF32}, names[i]);
      }
    }
  }

  void run(KernelContext& ctx) override {
    const Node& node = ctx.node;
    const char* input_name = kSoftmax ? "scores" : "input";
    const char* target_name = kSoftmax ? "labels" : "target";
    const Tensor x = ctx.input(0).contiguous();
    const Tensor& target = ctx.input(1);
    nn::expect_f32(node, x, input_name);
    RW_EXPECTS(target.dtype() == DType::kI64 || target.dtype() == DType::kI32, InvalidArgument,
               "{}: {} must be int64 or int32, got {}", node.where(), target_name,
               target.description());
    RW_EXPECTS(x.rank() >= 2, InvalidArgument, "{}: {} {} must be [N, C] or [N, C, d1, ...]",
               node.where(), input_name, shape_str(x.shape()));
    Shape expected_target = x.shape();
    expected_target.erase(expected_target.begin() + 1);
    RW_EXPECTS(target.shape() == expected_target, InvalidArgument,
               "{}: {} {} does not match {} {} (expected {})", node.where(), target_name,
               shape_str(target.shape()), input_name, shape_str(x.shape()),
               shape_str(expected_target));
    const std::int64_t n = x.dim(0), c = x.dim(1);
    std::int64_t d = 1;
    for (std::int64_t i = 2; i < x.rank(); ++i) d *= x.dim(i);

    Tensor weight;
    if (ctx.has_input(2)) {
      weight = ctx.input(2).contiguous();
      nn::expect_f32(node, weight, kSoftmax ? "weights" : "weight");
      RW_EXPECTS(weight.rank() == 1 && weight.dim(0) == c, InvalidArgument,
                 "{}: weight {} must be [C] = [{}]", node.where(), shape_str(weight.shape()), c);
    }

    // Classes, checked before any work.
    const std::vector<std::int64_t> labels = target.to_int64_vector();
    for (std::size_t j = 0; j < labels.size(); ++j) {
      const std::int64_t t = labels[j];
      RW_EXPECTS((t >= 0 && t < c) || (ignore_index_ && t == *ignore_index_), InvalidArgument,
                 "{}: {} {} at position {} is outside [0, {}) and is not ignore_index",
                 node.where(), target_name, t, j, c);
    }

    const float* log_prob = x.data<float>();
    Tensor log_prob_tensor;
    if constexpr (kSoftmax) {
      const bool wanted =
          ctx.num_outputs() > 1 && node.outputs.size() > 1 && !node.outputs[1].empty();
      log_prob_tensor = wanted ? ctx.allocate_output(1, DType::kF32, x.shape())
                               : Tensor::empty(DType::kF32, x.shape());
      softmax_along(SoftmaxFn::kLogSoftmax, x.data<float>(), log_prob_tensor.data<float>(), n, c,
                    d);
      if (wanted) ctx.outputs[1] = log_prob_tensor;
      log_prob = log_prob_tensor.data<float>();
    }

    const float* w = weight.defined() ? weight.data<float>() : nullptr;
    // Position j's weight and weighted loss.
    auto term = [&](std::int64_t j, float& wj, float& lj) {
      const std::int64_t t = labels[static_cast<std::size_t>(j)];
      if (ignore_index_ && t == *ignore_index_) {
        wj = lj = 0.0f;
        return;
      }
      wj = w != nullptr ? w[t] : 1.0f;
      lj = -wj * log_prob[((j / d) * c + t) * d + j % d];
    };

    const auto total = static_cast<std::int64_t>(labels.size());
    if (reduction_ == Reduction::kNone) {
      Tensor y = ctx.allocate_output(0, DType::kF32, target.shape());
      float* yp = y.data<float>();
      parallel_for(total, 4096, [&](std::int64_t begin, std::int64_t end) {
        float wj = 0;
        for (std::int64_t j = begin; j < end; ++j) term(j, wj, yp[j]);
      });
      ctx.outputs[0] = y;
      return;
    }

    // Partial sums per fixed chunk, added in order: the result does not depend on the threads.
    constexpr std::int64_t kChunk = 16384;
    const std::int64_t chunks = (total + kChunk - 1) / kChunk;
    std::vector<double> loss_sum(static_cast<std::size_t>(chunks)), weight_sum(loss_sum.size());
    parallel_for(chunks, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t k = begin; k < end; ++k) {
        double ls = 0, ws = 0;
        for (std::int64_t j = k * kChunk, last = std::min(total, j + kChunk); j < last; ++j) {
          float wj = 0, lj = 0;
          term(j, wj, lj);
          ls += lj;
          ws += wj;
        }
        loss_sum[static_cast<std::size_t>(k)] = ls;
        weight_sum[static_cast<std::size_t>(k)] = ws;
      }
    });
    double ls = 0, ws = 0;
    for (std::size_t k = 0; k < loss_sum.size(); ++k) {
      ls += loss_sum[k];
      ws += weight_sum[k];
    }
    Tensor y = ctx.allocate_output(0, DType::kF32, {});
    y.data<float>()[0] = static_cast<float>(reduction_ == Reduction::kSum ? ls : ls / ws);
    ctx.outputs[0] = y;
  }

 private:
  Reduction reduction_ = Reduction::kMean;
  std::optional<std::int64_t> ignore_index_;
};

}  // namespace

RW_REGISTER_KERNEL("NegativeLogLikelihoodLoss", Device::kCpu, make_factory<LossKernel<false>>());
RW_REGISTER_KERNEL("SoftmaxCrossEntropyLoss", Device::kCpu, make_factory<LossKernel<true>>());

}  // namespace redwood::cpu
