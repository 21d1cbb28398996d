// Which nodes may join a oneDNN region (see region.hpp). A node that passes may still fall back to
// the node-by-node kernels at run time for shapes oneDNN cannot take; this test only keeps out
// what could never run inside a region.

#include "backends/cpu/onednn/conv_primitive.hpp"
#include "backends/cpu/onednn/pool_primitive.hpp"
#include "backends/cpu/onednn/region.hpp"
#include "core/kernel_info.hpp"
#include "core/passes/pass_manager.hpp"

#include <set>

namespace redwood::cpu::onednn {
namespace {

bool f32_value(const Graph& g, const std::string& v) {
  if (const Tensor* c = g.find_initializer(v)) return c->dtype() == DType::kF32;
  const ValueInfo* vi = g.find_value(v);
  return vi == nullptr || vi->dtype == DType::kF32 || vi->dtype == DType::kUndefined;
}

// Rank 4, or unknown before the run.
bool rank4(const Graph& g, const std::string& v) {
  if (const Tensor* c = g.find_initializer(v)) return c->rank() == 4;
  const ValueInfo* vi = g.find_value(v);
  return vi == nullptr || !vi->has_shape || vi->dims.size() == 4;
}

bool resize_accepts(const Graph& g, const Node& n) {
  if (g.opset < 11 || n.attr_string("mode", "nearest") != "nearest") return false;
  if (n.has_attr("axes") || n.attr_int("antialias", 0) != 0) return false;
  if (n.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch") return false;  // sizes are not the output
  const std::string coords = n.attr_string("coordinate_transformation_mode", "half_pixel");
  const std::string rounding = n.attr_string("nearest_mode", "round_prefer_floor");
  // With integer factors oneDNN's nearest (source = round((dst + 0.5) / k - 0.5)) is ONNX's
  // half_pixel for any rounding, and asymmetric with floor.
  const bool same = coords == "half_pixel" || coords == "pytorch_half_pixel" ||
                    (coords == "asymmetric" && rounding == "floor");
  if (!same) return false;
  const Tensor* scales = n.has_input(2) ? g.find_initializer(n.inputs[2]) : nullptr;
  const Tensor* sizes = n.has_input(3) ? g.find_initializer(n.inputs[3]) : nullptr;
  if (scales != nullptr && scales->numel() == 4) return true;
  return sizes != nullptr && sizes->numel() == 4 && (n.has_input(2) ? scales != nullptr : true);
}

}  // namespace

bool region_accepts(const Graph& g, const Node& n) {
  static const std::set<std::string> unary{"Relu", "LeakyRelu", "Clip", "HardSwish", "HardSigmoid", "Sigmoid", "Tanh"};
  static const std::set<std::string> binary{"Add", "Sub", "Mul", "Div"};
  static const std::set<std::string> pools{"MaxPool", "AveragePool", "GlobalAveragePool"};
  if (!n.domain.empty() || !n.body.empty() || n.inputs.empty()) return false;
  const std::string& op = n.op_type;
  const bool any_rank = binary.count(op) || unary.count(op);  // up to rank 6, checked per plan
  for (const auto& o : n.outputs) {
    if (!o.empty() && (!f32_value(g, o) || (!any_rank && !rank4(g, o)))) return false;
  }
  const bool x_ok = n.has_input(0) && f32_value(g, n.inputs[0]) && g.find_initializer(n.inputs[0]) == nullptr &&
                    rank4(g, n.inputs[0]);
  try {
    if (op == "Conv" || op == "ConvTranspose") {
      ConvSpec::from_node(n, declared_kernel_info(g, n));
      return x_ok && n.outputs.size() == 1;
    }
    if (pools.count(op)) {
      PoolSpec::from_node(n, declared_kernel_info(g, n).input_dtypes);
      return x_ok;
    }
  } catch (const Error&) {
    return false;
  }
  if (binary.count(op)) {
    if (n.inputs.size() != 2 || !n.has_input(1)) return false;
    const bool c0 = g.find_initializer(n.inputs[0]) != nullptr, c1 = g.find_initializer(n.inputs[1]) != nullptr;
    return f32_value(g, n.inputs[0]) && f32_value(g, n.inputs[1]) && !(c0 && c1);
  }
  if (unary.count(op)) {
    for (std::size_t i = 1; i < n.inputs.size(); ++i) {
      if (n.has_input(i) && g.find_initializer(n.inputs[i]) == nullptr) return false;  // Clip bounds
    }
    return n.has_input(0) && f32_value(g, n.inputs[0]) && g.find_initializer(n.inputs[0]) == nullptr;
  }
  if (op == "Concat") {
    const std::int64_t axis = n.attr_int("axis", 0);
    if (axis != 1 && axis != -3) return false;
    for (const auto& in : n.inputs) {
      if (in.empty() || !f32_value(g, in) || !rank4(g, in)) return false;
    }
    return true;
  }
  if (op == "Resize") return x_ok && resize_accepts(g, n);
  return false;
}

namespace {
const bool registered = [] {
  passes::register_region_provider({kRegionOp, region_accepts, 2});
  return true;
}();
}  // namespace

}  // namespace redwood::cpu::onednn
