// Redwood's own ops, each declared once (schema.hpp). What they compute is documented here; the
// passes that make them and the kernels that run them point back to these entries.

#include "core/ops/schema.hpp"

#include "core/error.hpp"
#include "core/ops/names.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>

namespace redwood::ops {
namespace {

using enum AttrType;

// The fused epilogue (epilogue.hpp), on the ONNX ops that take it and on rw.ConvNhwc.
std::vector<AttrSchema> epilogue_attributes() {
  return {{attr::kActivation, kString, false, "",
           "the fused activation after bias and residual: Relu, Clip, HardSigmoid, HardSwish, Sigmoid, LeakyRelu"},
          {attr::kAlpha, kFloat, false, "the activation's ONNX default",
           "Clip's min, HardSigmoid's alpha, LeakyRelu's alpha"},
          {attr::kBeta, kFloat, false, "the activation's ONNX default", "Clip's max, HardSigmoid's beta"}};
}

AttrSchema round_tf32_attribute() {
  return {attr::kRoundTf32, kInt, false, "0",
          "1: fp32 outputs are stored rounded to tf32 (ops/tf32.hpp), so that the next tensor-core product takes "
          "them exactly; fp32 storage only"};
}

std::vector<OpSchema> built_in() {
  std::vector<OpSchema> s;
  s.push_back({kToNhwc,
               "Converts an NCHW fp32 image into the channels-last storage of an NHWC group: Y[n, h, w, c] = X[n, c, h, "
               "w] rounded once to the storage type, channels C..Cp-1 zero.",
               {{"X", false, "fp32 [N, C, H, W]"}},
               {"S [N, H, W, Cp] (S: float16, bfloat16 or float; with rw.space_to_depth: [N, ceil(H/2), ceil(W/2), Cp] "
                "of the 2x2 space-to-depth, 4C channels used)"},
               {{"to", kInt, true, "", "the ONNX type code of the storage type S"},
                {attr::kChannels, kInt, true, "", "Cp: the channels written, at least C (4C with rw.space_to_depth)"},
                round_tf32_attribute(),
                {attr::kSpaceToDepth, kInt, false, "0", "2: write the input's 2x2 space-to-depth (the stem's rewrite)"},
                {attr::kSpaceToDepthHw, kInts, false, "",
                 "[H, W] the space-to-depth was planned for; required with rw.space_to_depth, another input extent is "
                 "refused"}}});
  s.push_back({kToNchw,
               "Converts an NHWC group's value back to NCHW fp32 (where a graph output or an NCHW node reads it).",
               {{"X", false, "S [N, H, W, Cs]"}},
               {"fp32 [N, C, H, W]"},
               {{attr::kChannels, kInt, true, "", "C: the channels kept, at most Cs (the rest are padding)"}}});
  std::vector<AttrSchema> conv_attrs = epilogue_attributes();
  conv_attrs.push_back(round_tf32_attribute());
  conv_attrs.push_back({attr::kShortcutStrides, kInts, false, "1, 1",
                        "with input X2: the strides X2 is read at (a ResNet block's projection shortcut)"});
  s.push_back({kConvNhwc,
               "A 2-D convolution of group 1 on channels-last operands: Y = act(conv(X, W) + B + R [+ conv1x1(X2, "
               "W's last C2 channels)]), fp32 accumulation, one rounding to S. ONNX Conv's strides, pads, dilations "
               "and kernel_shape; the epilogue of core/ops/epilogue.hpp.",
               {{"X", false, "S [N, H, W, C], C a multiple of 16 bytes of S"},
                {"W", false, "S [K, R, S, C] (+ C2 with X2), K a multiple of 8"},
                {"B", true, "fp32 [K]"},
                {"R", true, "S [N, OH, OW, K]: the residual, added before the activation"},
                {"X2", true, "S [N, H2, W2, C2]: a projection shortcut's input (a 1x1 stride-1 main convolution)"}},
               {"S [N, OH, OW, K]"},
               conv_attrs,
               true});
  std::vector<AttrSchema> dw_attrs = epilogue_attributes();
  dw_attrs.push_back(round_tf32_attribute());
  s.push_back({kDepthwiseConvNhwc,
               "A depthwise 2-D convolution (group = C = K) on channels-last operands, fp32 accumulation, the fused "
               "epilogue, one rounding to S. ONNX Conv's strides, pads, dilations and kernel_shape.",
               {{"X", false, "S [N, H, W, C], C a multiple of 8"},
                {"W", false, "fp32 [R, S, C]"},
                {"B", true, "fp32 [C]"},
                {"R", true, "S [N, OH, OW, C]"}},
               {"S [N, OH, OW, C]"},
               dw_attrs,
               true});
  s.push_back({kMaxPoolNhwc,
               "ONNX MaxPool (2-D; kernel_shape, strides, pads, dilations, ceil_mode) on a channels-last value.",
               {{"X", false, "S [N, H, W, C]"}},
               {"S [N, OH, OW, C]"},
               {round_tf32_attribute()},
               true});
  s.push_back({kGlobalAveragePoolNhwc,
               "The mean over H and W of a channels-last value, in fp32 (an exit of its group: squeeze-excite reads "
               "it NCHW).",
               {{"X", false, "S [N, H, W, C]"}},
               {"fp32 [N, C, 1, 1]"},
               {}});
  s.push_back({kScaleChannelsNhwc,
               "Y[n, h, w, c] = X[n, h, w, c] * scale[n, c] (squeeze-excite's Mul), one rounding to S.",
               {{"X", false, "S [N, H, W, C]"}, {"scale", false, "fp32 [N, C, 1, 1] (N·C values)"}},
               {"S [N, H, W, C]"},
               {round_tf32_attribute()}});
  s.push_back({kElementwiseChain,
               "A chain of fp32 elementwise steps applied in order to input 0, as the separate ONNX nodes would "
               "(bit for bit): unary activations, and Add, Sub, Mul, Div, Pow with a constant operand that broadcasts "
               "without changing the data's shape.",
               {{"X", false, "fp32, any shape"}},
               {"fp32, X's shape"},
               {{attr::kSteps, kStrings, true, "", "one ONNX op type per step"},
                {attr::kStepAlpha, kFloats, true, "", "per step: LeakyRelu's and HardSigmoid's alpha, Clip's min"},
                {attr::kStepBeta, kFloats, true, "", "per step: HardSigmoid's beta, Clip's max"},
                {attr::kStepOperand, kInts, true, "", "per step: the input index of a binary step's constant, -1 if unary"},
                {attr::kStepSwapped, kInts, true, "", "per step: 1 where the constant is the left operand (c - x, c / x)"}},
               false,
               true});
  s.push_back({kOneDnnRegion,
               "A group of nodes oneDNN runs together in its own layouts (reorders only at the edges): a composite "
               "node whose body holds them; its inputs and outputs are the group's boundary values.",
               {},
               {"the group's outputs"},
               {},
               false,
               true});
  return s;
}

struct Schemas {
  std::mutex mutex;
  std::map<std::string, OpSchema, std::less<>> by_type;
};

Schemas& schemas() {
  static Schemas* s = [] {
    auto* out = new Schemas();  // never destroyed: registrations may run until exit
    for (OpSchema& o : built_in()) out->by_type.emplace(o.op_type, std::move(o));
    return out;
  }();
  return *s;
}

AttrType type_of(const AttributeValue& v) { return static_cast<AttrType>(v.index()); }

}  // namespace

std::string_view attr_type_name(AttrType t) {
  switch (t) {
    case kInt: return "int";
    case kFloat: return "float";
    case kString: return "string";
    case kInts: return "ints";
    case kFloats: return "floats";
    case kStrings: return "strings";
    case kTensor: return "tensor";
  }
  return "?";
}

const AttrSchema* OpSchema::attribute(std::string_view name) const {
  for (const AttrSchema& a : attributes) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

const OpSchema* find_schema(std::string_view op_type) {
  Schemas& s = schemas();
  const std::lock_guard lock(s.mutex);
  const auto it = s.by_type.find(op_type);
  return it == s.by_type.end() ? nullptr : &it->second;
}

std::vector<const OpSchema*> all_schemas() {
  Schemas& s = schemas();
  const std::lock_guard lock(s.mutex);
  std::vector<const OpSchema*> out;
  for (const auto& [type, schema] : s.by_type) out.push_back(&schema);
  return out;
}

void register_schema(OpSchema schema) {
  RW_EXPECTS(is_redwood_op(schema.op_type), Error, "op schema '{}': Redwood's own op types start with \"rw.\"",
             schema.op_type);
  Schemas& s = schemas();
  const std::lock_guard lock(s.mutex);
  const std::string type = schema.op_type;
  RW_EXPECTS(s.by_type.emplace(type, std::move(schema)).second, Error, "op schema '{}' is declared twice", type);
}

std::span<const AttrSchema> rw_attributes_of_onnx_ops() {
  static const std::vector<AttrSchema> attrs = epilogue_attributes();
  return attrs;
}

void check_node(const Node& node) {
  const auto check_attribute = [&](const std::string& name, const AttributeValue& value, const AttrSchema* a) {
    RW_EXPECTS(a != nullptr, InvalidArgument, "{}: attribute '{}' is not one of {}'s (core/ops/schema.cpp)",
               node.where(), name, node.op_type);
    RW_EXPECTS(type_of(value) == a->type, InvalidArgument, "{}: attribute '{}' must be {}, not {}", node.where(), name,
               attr_type_name(a->type), attr_type_name(type_of(value)));
  };
  if (!is_redwood_op(node.op_type)) {
    const auto onnx = rw_attributes_of_onnx_ops();
    for (const auto& [name, value] : node.attributes) {
      if (!is_redwood_op(name)) continue;  // ONNX's own attributes are the importer's and kernels' to check
      const auto it = std::find_if(onnx.begin(), onnx.end(), [&](const AttrSchema& a) { return a.name == name; });
      check_attribute(name, value, it == onnx.end() ? nullptr : &*it);
    }
    return;
  }
  const OpSchema* schema = find_schema(node.op_type);
  RW_EXPECTS(schema != nullptr, InvalidArgument, "{}: {} is not an op Redwood declares (core/ops/schema.cpp)",
             node.where(), node.op_type);
  RW_EXPECTS(schema->variadic_inputs || node.inputs.size() <= schema->inputs.size(), InvalidArgument,
             "{}: {} takes at most {} inputs, not {}", node.where(), node.op_type, schema->inputs.size(),
             node.inputs.size());
  for (std::size_t i = 0; i < schema->inputs.size(); ++i) {
    RW_EXPECTS(schema->inputs[i].optional || node.has_input(i), InvalidArgument, "{}: input {} ({}) is required",
               node.where(), i, schema->inputs[i].name);
  }
  for (const AttrSchema& a : schema->attributes) {
    RW_EXPECTS(!a.required || node.has_attr(a.name), InvalidArgument, "{}: attribute '{}' is required", node.where(),
               a.name);
  }
  for (const auto& [name, value] : node.attributes) {
    const AttrSchema* a = schema->attribute(name);
    if (a == nullptr && schema->onnx_attributes && !is_redwood_op(name)) continue;
    check_attribute(name, value, a);
  }
}

}  // namespace redwood::ops
