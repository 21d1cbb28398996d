#pragma once
// oneDNN regions: a chain of nodes oneDNN runs together as one composite node
// (core/passes/form_regions.cpp groups them, Node::body holds them). Inside a region every tensor
// keeps the layout oneDNN chose for it (format_tag::any: blocked or NHWC), so the only reorders
// are at the region's boundary (inputs and outputs are plain NCHW) and where two primitives
// disagree. region_accepts() is the static test a node passes to join a region.

#include "core/graph/graph.hpp"
#include "core/ops/names.hpp"

namespace redwood::cpu::onednn {

inline constexpr const char* kRegionOp = ops::kOneDnnRegion;

/// Whether `node` can be part of a oneDNN region: Conv/ConvTranspose (what make_conv takes),
/// pooling, Add/Sub/Mul/Div, Relu/LeakyRelu/Clip/HardSwish/HardSigmoid/Sigmoid/Tanh, Concat on
/// the channel axis, nearest Resize by integer factors; fp32, rank 4 where the graph knows it
/// (elementwise ops: any rank up to 6).
bool region_accepts(const Graph& graph, const Node& node);

}  // namespace redwood::cpu::onednn
