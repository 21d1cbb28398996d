#pragma once
// Layouts of reductions for the reference kernels (private to backends/cpu/reference): which
// input elements fold into which output element.
//
//   ReducePlan: any set of reduced axes (the Reduce* ops, MeanVarianceNormalization).
//   AxisSplit:  one axis, the data seen as [outer, length, inner] (ArgMax, TopK, CumSum,
//               LpNormalization).
//
// Input tensors are contiguous. A ReducePlan merges runs of neighbouring axes with the same fate
// (extent-1 axes drop out), so the data becomes a few alternating kept/reduced blocks. The output
// is walked as rows x width: `width` is the innermost block when it is kept (a contiguous run of
// outputs whose inputs are contiguous too, so the inner loop vectorizes), else 1; a reduced
// innermost block is a contiguous `run` of inputs folding into one output.

#include "backends/cpu/reference/kernel_util.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace redwood::cpu {

/// `axis` (negative counts from the back) normalized against `shape`; throws InvalidArgument
/// naming the node and the shape when it is out of range.
inline std::int64_t node_axis(const Node& node, std::int64_t axis, const Shape& shape) {
  const auto rank = static_cast<std::int64_t>(shape.size());
  RW_EXPECTS(axis >= -rank && axis < rank, InvalidArgument, "{}: axis {} is out of range for input {}",
             node.where(), axis, shape_str(shape));
  return axis < 0 ? axis + rank : axis;
}

/// Which axes of `shape` a node reduces: those in `axes`, or every axis when `axes` is empty.
/// Throws InvalidArgument naming the node for an axis out of range or listed twice.
inline std::vector<bool> reduced_axes_mask(const Node& node, std::span<const std::int64_t> axes,
                                           const Shape& shape) {
  std::vector<bool> reduced(shape.size(), axes.empty());
  for (std::int64_t axis : axes) {
    const auto a = static_cast<std::size_t>(node_axis(node, axis, shape));
    RW_EXPECTS(!reduced[a], InvalidArgument, "{}: axis {} is listed twice in axes [{}]", node.where(), a,
               fmt::join(axes, ", "));
    reduced[a] = true;
  }
  return reduced;
}

/// The shape of a reduction's output: reduced axes kept as extent 1, or dropped.
inline Shape reduced_shape(const Shape& shape, const std::vector<bool>& reduced, bool keepdims) {
  Shape out;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (!reduced[i]) {
      out.push_back(shape[i]);
    } else if (keepdims) {
      out.push_back(1);
    }
  }
  return out;
}

class ReducePlan {
 public:
  ReducePlan(const Shape& shape, const std::vector<bool>& reduced) {
    for (std::size_t i = 0; i < shape.size(); ++i) {
      (reduced[i] ? count_ : outputs_) *= shape[i];
    }
    if (count_ == 0 || outputs_ == 0) {
      // Nothing to read: every output (if any) is its reduction's identity.
      rows_ = outputs_;
      return;
    }
    std::vector<Block> blocks;
    for (std::size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] == 1) continue;
      if (!blocks.empty() && blocks.back().reduced == reduced[i]) {
        blocks.back().extent *= shape[i];
      } else {
        blocks.push_back({shape[i], 0, reduced[i]});
      }
    }
    if (blocks.empty()) blocks.push_back({1, 0, true});
    std::int64_t stride = 1;
    for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) {
      b->stride = stride;
      stride *= b->extent;
    }
    // The innermost block becomes the run (reduced) or the width (kept); the others index rows
    // (kept) or the runs of one output (reduced).
    const Block inner = blocks.back();
    blocks.pop_back();
    (inner.reduced ? run_ : width_) = inner.extent;
    std::vector<Block> outer_reduced;
    for (const Block& b : blocks) {
      if (b.reduced) {
        outer_reduced.push_back(b);
      } else {
        kept_.push_back(b);
      }
    }
    if (!inner.reduced) {
      for (const Block& b : kept_) rows_ *= b.extent;
    } else {
      rows_ = outputs_;
    }
    run_offsets_.assign(1, 0);
    for (const Block& b : outer_reduced) {
      std::vector<std::int64_t> next;
      next.reserve(run_offsets_.size() * static_cast<std::size_t>(b.extent));
      for (std::int64_t off : run_offsets_) {
        for (std::int64_t i = 0; i < b.extent; ++i) next.push_back(off + i * b.stride);
      }
      run_offsets_ = std::move(next);
    }
  }

  /// Elements folded into each output (0: every output is the reduction's identity).
  std::int64_t count() const { return count_; }
  /// Rows of outputs; output r * width() + w is row r's element w.
  std::int64_t rows() const { return rows_; }
  /// Outputs per row, contiguous in the input as in the output (1 when the innermost axis is
  /// reduced).
  std::int64_t width() const { return width_; }
  /// Contiguous inputs that fold into one output (1 when the innermost axis is kept).
  std::int64_t run() const { return run_; }
  /// Offset of each run (width() > 1: of each input row) from its output row's input offset.
  const std::vector<std::int64_t>& run_offsets() const { return run_offsets_; }
  /// Input offset of output row r.
  std::int64_t row_offset(std::int64_t r) const {
    std::int64_t off = 0;
    for (auto b = kept_.rbegin(); b != kept_.rend(); ++b) {
      off += r % b->extent * b->stride;
      r /= b->extent;
    }
    return off;
  }
  /// Rows per parallel task, about 16K input elements.
  std::int64_t grain() const {
    return std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, count_ * width_));
  }

 private:
  // Neighbouring axes of the same fate, merged; strides in input elements.
  struct Block {
    std::int64_t extent, stride;
    bool reduced;
  };
  std::int64_t count_ = 1, outputs_ = 1;
  std::int64_t rows_ = 1, width_ = 1, run_ = 1;
  std::vector<Block> kept_;  // the kept blocks that index rows, outermost first
  std::vector<std::int64_t> run_offsets_;  // empty when count_ or outputs_ is 0
};

/// Folds each output's inputs: acc = fold(acc, x, out_index) from `init` over them, then
/// y[out_index] = finish(acc, out_index). Rows run in parallel; `x` is the contiguous input.
template <typename T, typename Out, typename Acc, typename Fold, typename Finish>
void reduce_rows(const ReducePlan& plan, const T* x, Out* y, Acc init, Fold fold, Finish finish) {
  const std::int64_t width = plan.width(), run = plan.run();
  const std::vector<std::int64_t>& runs = plan.run_offsets();
  parallel_for(plan.rows(), plan.grain(), [&](std::int64_t begin, std::int64_t end) {
    // The accumulators of one row: on the stack when the row is short (a task of every run),
    // on the heap only for wide rows.
    constexpr std::int64_t kOnStack = 64;
    std::array<Acc, kOnStack> on_stack;
    std::vector<Acc> on_heap(static_cast<std::size_t>(width > kOnStack ? width : 0));
    const std::span<Acc> acc = width > kOnStack ? std::span<Acc>(on_heap) : std::span<Acc>(on_stack.data(), static_cast<std::size_t>(width));
    for (std::int64_t r = begin; r < end; ++r) {
      const T* row = x + plan.row_offset(r);
      const std::int64_t o = r * width;
      if (width == 1) {
        Acc a = init;
        for (std::int64_t off : runs) {
          for (std::int64_t i = 0; i < run; ++i) a = fold(a, row[off + i], o);
        }
        y[o] = finish(a, o);
        continue;
      }
      std::fill(acc.begin(), acc.end(), init);
      for (std::int64_t off : runs) {
        const T* src = row + off;
        for (std::int64_t w = 0; w < width; ++w) acc[w] = fold(acc[w], src[w], o + w);
      }
      for (std::int64_t w = 0; w < width; ++w) y[o + w] = finish(acc[w], o + w);
    }
  });
}

/// Calls visit(input_offset, out_index) for every input element, rows in parallel.
template <typename Visit>
void for_each_input(const ReducePlan& plan, Visit visit) {
  const std::int64_t width = plan.width(), run = plan.run();
  const std::vector<std::int64_t>& runs = plan.run_offsets();
  parallel_for(plan.rows(), plan.grain(), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const std::int64_t row = plan.row_offset(r), o = r * width;
      for (std::int64_t off : runs) {
        for (std::int64_t i = 0; i < run * width; ++i) visit(row + off + i, width == 1 ? o : o + i);
      }
    }
  });
}

/// A tensor seen as [outer, length, inner] around one axis.
struct AxisSplit {
  std::int64_t outer = 1, length = 1, inner = 1;
};

inline AxisSplit split_at_axis(const Shape& shape, std::int64_t axis) {
  AxisSplit s;
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(shape.size()); ++i) {
    (i < axis ? s.outer : i == axis ? s.length : s.inner) *= shape[i];
  }
  return s;
}

}  // namespace redwood::cpu
