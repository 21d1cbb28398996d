#pragma once
// Shapes are vectors of extents; helpers for element counts, contiguous strides, numpy-style
// broadcasting and printing.

#include <cstdint>
#include <string>
#include <vector>

namespace redwood {

using Shape = std::vector<std::int64_t>;
using Strides = std::vector<std::int64_t>;

/// Product of the extents (1 for a scalar).
std::int64_t shape_numel(const Shape& shape);
/// Row-major strides in elements.
Strides contiguous_strides(const Shape& shape);
/// "[1, 3, 640, 640]".
std::string shape_str(const Shape& shape);
/// Multidirectional (numpy) broadcast of two shapes; throws InvalidArgument when they do not
/// broadcast, naming both.
Shape broadcast_shapes(const Shape& a, const Shape& b);
/// Normalizes a possibly negative axis against a rank; throws InvalidArgument when out of range.
std::int64_t normalize_axis(std::int64_t axis, std::int64_t rank);

}  // namespace redwood
