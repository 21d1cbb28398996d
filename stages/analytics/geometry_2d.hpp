#pragma once
// The plane geometry of the analytics stage: which side of a line a point is on, whether a step
// of a track's path crossed a line segment, whether a point is inside a polygon; in picture
// pixels (x to the right, y down), computed in double so that a point exactly on a line reads
// as exactly on it.

#include "stages/geometry.hpp"

#include <span>
#include <vector>

namespace redwood {

/// The side of the directed line a -> b that p is on, as seen on the picture (y down): +1 on its
/// right (walking from a to b, the right hand's side; for a = (0, 0), b = (1, 0): below, larger
/// y), -1 on its left, 0 exactly on the line (or its extension past a and b).
int side_of_line(PointF a, PointF b, PointF p);

/// Whether the step p -> q, which ends strictly on one side of the line through a and b and
/// starts on the other side or on the line, meets the line within the segment a-b (its ends
/// included). False for a step that does not reach the line's other side.
bool step_crosses_segment(PointF a, PointF b, PointF p, PointF q);

/// Whether p is inside the polygon (even-odd rule, so a concave polygon works); a point on its
/// boundary counts as inside.
bool inside_polygon(std::span<const PointF> polygon, PointF p);

/// The polygon's signed area (shoelace; positive when its points go clockwise on the picture).
double polygon_area(std::span<const PointF> polygon);

/// Points given as fractions of a picture's width and height, in that picture's pixels.
std::vector<PointF> to_pixels(std::span<const PointF> relative, int width, int height);

}  // namespace redwood
