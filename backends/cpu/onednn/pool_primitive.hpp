#pragma once
// MaxPool, AveragePool and GlobalAveragePool geometry for oneDNN's pooling, shared by the per-node
// kernel (pool.cpp) and the region kernel (region.cpp). Dilated pooling, MaxPool's Indices output,
// storage_order and count_include_pad with ceil_mode are not supported (Unsupported at load).

#include "backends/cpu/onednn/onednn_common.hpp"
#include "backends/cpu/reference/nn_common.hpp"

#include <optional>

namespace redwood::cpu::onednn {

struct PoolSpec {
  bool global = false, max = false, include_pad = false;
  nn::WindowAttrs window;
  /// Reads a pooling node; throws Unsupported (naming the node) for what oneDNN cannot do.
  static PoolSpec from_node(const Node& node, const std::vector<DType>& input_dtypes);
};

struct PoolGeometry {
  dims strides, kernel, pad_begin, pad_end;
  Shape out;
  dnnl::algorithm alg;
};

/// The pooling of an input of shape `xs` (rank 4); nullopt when oneDNN cannot take it.
std::optional<PoolGeometry> pool_geometry(const Node& node, const PoolSpec& spec, const Shape& xs);

}  // namespace redwood::cpu::onednn
